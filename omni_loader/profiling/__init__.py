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

# Imported on first use (the package rule: a face is lazy); each module's docstring says what it holds.
__all__, __getattr__, __dir__ = exports(__name__, {
    # cprofile
    "TOP_COLUMNS": "cprofile",
    "phase_function_rows": "cprofile",
    "profile_cprofile": "cprofile",
    "read_pstats": "cprofile",
    "state_dict_call_counts": "cprofile",
    "state_dict_primitive_calls": "cprofile",
    "top_functions": "cprofile",
    "write_top_functions": "cprofile",
    # diff
    "DIFF_DIR": "diff",
    "DIFF_MD": "diff",
    "FLAME_DIFF_SVG": "diff",
    "FUNCTIONS_CSV": "diff",
    "ProfileDiff": "diff",
    "profile_diff": "diff",
    "read_profile_diff": "diff",
    # diff_stats
    "benjamini_hochberg": "diff_stats",
    "compare_functions": "diff_stats",
    "fold_samples": "diff_stats",
    # diff_flame
    "DiffFlameView": "diff_flame",
    # notes
    "Profiles": "notes",
    "torch_slower_sentence": "notes",
    "untouched_phase_sentence": "notes",
    # outputs
    "FLAME_SVG": "outputs",
    "LOAD_JSON": "outputs",
    "PHASE_FUNCTIONS_CSV": "outputs",
    "PROFILE_MD": "outputs",
    "PY_SPY_LOG": "outputs",
    "SPEEDSCOPE_JSON": "outputs",
    "TOP_FUNCTIONS_CSV": "outputs",
    "TOP_FUNCTIONS_MD": "outputs",
    "TORCH_LOG": "outputs",
    "TORCH_OPS_CSV": "outputs",
    "TORCH_OPS_MD": "outputs",
    "TRACE_JSON": "outputs",
    "read_phase_functions": "outputs",
    "read_top_functions": "outputs",
    "read_torch_ops": "outputs",
    # pyspy
    "PySpyJob": "pyspy",
    "PySpyUnavailable": "pyspy",
    "find_py_spy": "pyspy",
    "record_py_spy": "pyspy",
    "speedscope_samples": "pyspy",
    "speedscope_summary": "pyspy",
    "speedscope_to_svg": "pyspy",
    # sampled
    "sampled_load": "sampled",
    # result
    "OTHER_PHASE": "result",
    "VariantProfile": "result",
    "largest_cost": "result",
    "phase_shares": "result",
    "top_costs": "result",
    # run
    "profile_variant": "run",
    "profile_variants": "run",
    "with_overrides": "run",
    # settings
    "DEFAULT_RATE": "settings",
    "DEFAULT_TOP": "settings",
    "MAX_AUTO_REPEAT": "settings",
    "PY_SPY_ENV": "settings",
    "SAMPLES_WANTED": "settings",
    "TOOLS": "settings",
    "VARIANT_CHOICES": "settings",
    "ProfileSettings": "settings",
    "auto_repeat": "settings",
    "resolve_tools": "settings",
    "resolve_variants": "settings",
    # sources
    "function_label": "sources",
    "short_path": "sources",
    # summary
    "bottleneck_sentence": "summary",
    "read_summary": "summary",
    "write_summary_report": "summary",
    "write_variant_report": "summary",
    # tables
    "phase_range_table": "tables",
    "phase_share_table": "tables",
    "state_dict_call_table": "tables",
    "top_function_table": "tables",
    "torch_ops_table": "tables",
    # torch_trace
    "profile_torch": "torch_trace",
    "trace_phase_ranges": "torch_trace",
})
