"""Both variants profiled, and what the profiles say: notebook 02 (``kit.profiling``).

Notebook 02 profiles one load of each variant with cProfile, py-spy and torch.profiler beside a few
unprofiled loads (:func:`profile_variants`), then shows the phase shares of the unprofiled loads
(:func:`phase_share_table`), ``Module.state_dict``'s call counts in cProfile (:func:`state_dict_call_table`),
the top functions (:func:`top_functions`), the flamegraphs (:func:`flamegraphs`, with how wide they draw discovery and construction beside the phase
table's shares, :func:`flame_note`), torch's operators and
phase ranges (:func:`torch_operators`), the bottleneck summary (:func:`where_time_goes`: ``profile.md``, which
:func:`read_summary` reads whole, under the notebook's heading, without the tables shown above it), and last the
differential profile: which functions the change moved, with intervals (:func:`profile_diff`, read back
by :func:`read_profile_diff`, shown by :func:`diff_section`: its sentences, its table :func:`diff_table` and its
flamegraph).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "profile_variants": ".profiling.run",
    "phase_share_table": ".profiling.tables",
    "state_dict_call_table": ".profiling.tables",
    "top_functions": "profiles",
    "flamegraphs": "profiles",
    "flame_note": "profiles",
    "torch_operators": "profiles",
    "read_summary": ".profiling.summary",
    "where_time_goes": "profiles",
    "profile_diff": ".profiling.diff",
    "read_profile_diff": ".profiling.diff",
    "diff_table": "profiles",
    "diff_section": "profiles",
}, relative_to=__package__)
