"""Where a Token2Wav load spends its time: cProfile, py-spy and torch.profiler, one load per variant.

``omni-loader profile --variant both --tool all --out DIR`` writes, under ``DIR/<variant>/``:

cProfile        ``<variant>.pstats`` (the whole load), ``top_functions.csv``/``.md`` (sorted by
                cumulative time) and ``phase_functions.csv``: every function's own time inside each
                leaf phase of the load, taken from snapshots of the running profiler at the phase
                edges (exact for every call that starts and ends inside the phase).
py-spy          ``speedscope.json`` recorded from a fresh worker process (``python -m
                omni_loader.bench.worker``, as a server restart loads the model; ``--repeat`` loads in it, by
                default enough for ~250 samples) and ``flame.svg`` drawn from the same samples
                (``--py-spy-svg``: a second recording in py-spy's own interactive SVG instead).
torch.profiler  ``trace.json`` (Chrome trace; one ``phase::<name>`` range per load phase) and
                ``torch_ops.csv``/``.md`` (``key_averages``, by self CPU time, or self GPU time on a GPU).
always          ``load.json`` (the variant's reference load: the median of ``--reference-runs``
                unprofiled runs in fresh processes, as ``reproduce`` runs them, kept with the kit's
                results under ``DIR/reference/``; the phase shares come from it) and
                ``profile.md``: phase shares, the functions that cost the most inside the largest
                phases, and the load's largest cost, all derived from the files above.

``DIR/profile.md`` sets the variants side by side. Everything is also a library call for notebooks:
:func:`profile_variants`, :func:`read_top_functions`, :func:`read_phase_functions`,
:func:`state_dict_primitive_calls`, :func:`trace_phase_ranges`, :func:`speedscope_samples`.

``omni-loader profile --diff`` (:func:`profile_diff`) asks which *functions* B made faster or slower than
A, over randomized blocks of fresh-process loads each sampled by py-spy: ``DIR/diff/functions.csv``,
``diff.md`` and ``flame-diff.svg`` (see :mod:`omni_loader.profiling.diff`).
"""

from ..lazy import exports

# Each module's public names, imported on first use (the package rule: a face is lazy); each module's docstring
# says what it holds.
_MODULES = {
    "cprofile": ("TOP_COLUMNS", "phase_function_rows", "profile_cprofile", "read_pstats", "state_dict_call_counts",
                 "state_dict_primitive_calls", "top_functions", "write_top_functions"),
    "diff": ("DIFF_DIR", "DIFF_MD", "FLAME_DIFF_SVG", "FUNCTIONS_CSV", "ProfileDiff", "profile_diff",
             "read_profile_diff"),
    "diff_stats": ("benjamini_hochberg", "compare_functions", "fold_samples"),
    "diff_flame": ("DiffFlameView",),
    "notes": ("Profiles", "torch_slower_sentence", "untouched_phase_sentence"),
    "outputs": ("FLAME_SVG", "LOAD_JSON", "PHASE_FUNCTIONS_CSV", "PROFILE_MD", "PY_SPY_LOG", "SPEEDSCOPE_JSON",
                "TOP_FUNCTIONS_CSV", "TOP_FUNCTIONS_MD", "TORCH_LOG", "TORCH_OPS_CSV", "TORCH_OPS_MD", "TRACE_JSON",
                "read_phase_functions", "read_top_functions", "read_torch_ops"),
    "pyspy": ("PySpyJob", "PySpyUnavailable", "find_py_spy", "record_py_spy", "speedscope_samples",
              "speedscope_summary", "speedscope_to_svg"),
    "sampled": ("sampled_load",),
    "result": ("OTHER_PHASE", "VariantProfile", "largest_cost", "phase_shares", "top_costs"),
    "run": ("profile_variant", "profile_variants", "with_overrides"),
    "settings": ("DEFAULT_RATE", "DEFAULT_TOP", "MAX_AUTO_REPEAT", "PY_SPY_ENV", "SAMPLES_WANTED", "TOOLS",
                 "VARIANT_CHOICES", "ProfileSettings", "auto_repeat", "resolve_tools", "resolve_variants"),
    "sources": ("function_label", "short_path"),
    "summary": ("bottleneck_sentence", "read_summary", "write_summary_report", "write_variant_report"),
    "tables": ("phase_range_table", "phase_share_table", "state_dict_call_table", "top_function_table",
               "torch_ops_table"),
    "torch_trace": ("profile_torch", "trace_phase_ranges"),
}
__all__, __getattr__, __dir__ = exports(__name__, {name: module for module, names in _MODULES.items()
                                                   for name in names})
