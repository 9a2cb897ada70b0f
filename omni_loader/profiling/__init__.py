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
"""

# The package, by module (each imports only the ones listed before it, and torch only when a load runs):
#   settings     ProfileSettings, tools and variants chosen, defaults       (no torch, no pandas)
#   outputs      the file names of a run, reading its tables back, frame -> Markdown
#   sources      short source paths and pstats-style function labels
#   flamegraph   the interactive SVG flamegraph of py-spy's samples
#   result       VariantProfile and the figures derived from the unprofiled reference load
#   clock        the PhaseClock that snapshots cProfile at phase edges       (imports torch)
#   cprofile     cProfile around one load: pstats, top functions, own time per phase
#   torch_trace  torch.profiler around one load: Chrome trace, operator table
#   pyspy        py-spy around a fresh worker: speedscope.json, flame.svg, reading samples
#   reference    the unprofiled reference loads: a small benchmark in fresh processes, its median runs
#   summary      profile.md, per variant and side by side
#   tables       the notebook's Styler tables
#   run          profile_variants: reference loads, warm-up, every tool, the reports

from __future__ import annotations

from . import flamegraph
from .cprofile import (TOP_COLUMNS, phase_function_rows, profile_cprofile, read_pstats, state_dict_call_counts,
                       state_dict_primitive_calls, top_functions, write_top_functions)
from .outputs import (FLAME_SVG, LOAD_JSON, PHASE_FUNCTIONS_CSV, PROFILE_MD, PY_SPY_LOG, SPEEDSCOPE_JSON,
                      TOP_FUNCTIONS_CSV, TOP_FUNCTIONS_MD, TORCH_LOG, TORCH_OPS_CSV, TORCH_OPS_MD, TRACE_JSON,
                      read_phase_functions, read_top_functions, read_torch_ops)
from .pyspy import (PySpyJob, PySpyUnavailable, find_py_spy, record_py_spy, speedscope_samples, speedscope_summary,
                    speedscope_to_svg)
from .result import OTHER_PHASE, VariantProfile, largest_cost, phase_shares, top_costs
from .run import profile_variant, profile_variants, with_overrides
from .settings import (DEFAULT_RATE, DEFAULT_TOP, MAX_AUTO_REPEAT, PY_SPY_ENV, SAMPLES_WANTED, TOOLS, VARIANT_CHOICES,
                       ProfileSettings, auto_repeat, resolve_tools, resolve_variants)
from .sources import function_label, short_path
from .summary import bottleneck_sentence, read_summary, write_summary_report, write_variant_report
from .tables import phase_range_table, phase_share_table, state_dict_call_table, top_function_table, torch_ops_table
from .torch_trace import profile_torch, trace_phase_ranges


__all__ = [
    "DEFAULT_RATE", "DEFAULT_TOP", "FLAME_SVG", "LOAD_JSON", "MAX_AUTO_REPEAT", "OTHER_PHASE", "PHASE_FUNCTIONS_CSV",
    "PROFILE_MD", "PY_SPY_ENV", "PY_SPY_LOG", "SAMPLES_WANTED", "SPEEDSCOPE_JSON", "TOOLS", "TOP_COLUMNS",
    "TOP_FUNCTIONS_CSV", "TOP_FUNCTIONS_MD", "TORCH_LOG", "TORCH_OPS_CSV", "TORCH_OPS_MD", "TRACE_JSON",
    "VARIANT_CHOICES", "ProfileSettings", "PySpyJob", "PySpyUnavailable", "VariantProfile", "auto_repeat",
    "bottleneck_sentence", "find_py_spy", "flamegraph", "function_label", "largest_cost", "phase_function_rows",
    "phase_range_table", "phase_share_table", "phase_shares", "profile_cprofile", "profile_torch", "profile_variant",
    "profile_variants", "read_phase_functions", "read_pstats", "read_summary", "read_top_functions", "read_torch_ops",
    "record_py_spy", "resolve_tools", "resolve_variants", "short_path", "speedscope_samples", "speedscope_summary",
    "speedscope_to_svg", "state_dict_call_counts", "state_dict_call_table", "state_dict_primitive_calls",
    "top_costs", "top_function_table", "top_functions", "torch_ops_table", "trace_phase_ranges", "with_overrides",
    "write_summary_report", "write_top_functions", "write_variant_report",
]
