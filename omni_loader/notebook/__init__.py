"""The kit's face for notebooks: ``from omni_loader import notebook as kit``.

A notebook is read by people who want the story, so its cells call one module whose names say what
they show, and the kit's folders can change underneath without breaking a notebook. Every name here
is a documented function, class or constant; the kit's own notebooks import nothing else from
``omni_loader`` (``tests/test_layout.py`` checks), and a notebook of your own can start from the same
names. Unlike another folder's API, this face may name any folder's functions, as the package's top
level does.

What it offers, by the notebook that shows it:

- everywhere: the parameters checked (:func:`check_parameters`), where results go (:func:`results_dir`), the device, the snapshot, the load options,
  tables and numbers for people, :func:`show` (text as Markdown, a saved plot as an image);
- 01: the benchmark (:func:`benchmark_spec`, :func:`plan_runs`, :func:`reproduce`) and the saved
  results section by section (:mod:`~.sections`), earlier reproductions side by side;
- 02: both variants profiled (:func:`profile_variants`) and their tables (:mod:`~.profiles`);
- 03 and 05: the discovery rules on small trees, the traversal sweep and its fits, the audit of
  transformers architectures and the source audit (rule OL001);
- 04: the module tree (:mod:`~.explore`, offered whole as ``kit.explore``) and a forward pass
  (``kit.waveform``);
- 06: stage groups started, their timeline and the startup A/B (:mod:`~.stages`).

Its own modules: :mod:`~.files` (executing notebooks, trust, the pre-save hook that keeps outputs
out of stored notebooks), :mod:`~.showing`, :mod:`~.sections` (with the A/B tables of :mod:`~.ab_tables`),
:mod:`~.profiles`, :mod:`~.stages`, :mod:`~.explore` and :mod:`~.waveform`.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    # everywhere
    "results_dir": "files",
    "results_root": "files",
    "execute": "files",
    "pre_save_hook": "files",
    "strip_outputs": "files",
    "show": "showing",
    "check_parameters": "parameters",
    "readable": "showing",
    "device_banner": ".host.devices",
    "resolve_device": ".host.devices",
    "resolve_snapshot": ".token2wav.checkpoint",
    "LoadOptions": ".token2wav.options",
    "table": ".formatting",
    "key_values": ".formatting",
    "short_duration": ".formatting",
    "count": ".formatting",
    "mib": ".formatting",
    # 01: the benchmark, and its saved results section by section
    "plan_runs": ".results.planner",
    "benchmark_spec": ".bench.runner",
    "reproduce": ".job",
    "report_opening": "sections",
    "environment": "sections",
    "result_tables": "sections",
    "phase_table": "sections",
    "controls": "sections",
    "pr_reference": "sections",
    "saved_plots": "sections",
    "equivalence_and_memory": "sections",
    "earlier_results": "sections",
    "side_by_side": "sections",
    "weight_loading_parts": "sections",
    "largest_phases": "sections",
    "cold_and_warm": ".reporting.cache_report",
    # 02: profiles
    "profile_variants": ".profiling.run",
    "phase_share_table": ".profiling.tables",
    "state_dict_call_table": ".profiling.tables",
    "read_summary": ".profiling.summary",
    "top_functions": "profiles",
    "torch_operators": "profiles",
    "flamegraphs": "profiles",
    "profile_diff": ".profiling.diff",
    "read_profile_diff": ".profiling.diff",
    "diff_table": "profiles",
    # 03: the two rules and what module traversal costs
    "VARIANTS": ".names",
    "build_tree": ".sweep.trees",
    "token2wav_model": ".sweep.trees",
    "non_persistent_buffer_names": ".token2wav.discovery",
    "find_persistent_buffers": ".token2wav.discovery",
    "count_state_dict_calls": ".token2wav.discovery",
    "compare_variants": ".token2wav.discovery",
    "rule_hazards": ".token2wav.discovery",
    "SweepConfig": ".sweep.traversal",
    "traversal_sweep": ".sweep.traversal",
    "plot_sweep": ".sweep.traversal_plots",
    "cost_summary": ".sweep.fits",
    "baseline_over_state_dicts": ".sweep.fits",
    # 04: the module tree
    "build_model": ".token2wav.model",
    "config_dict": ".token2wav.model",
    "inventory": ".token2wav.model",
    # 05: beyond the PR
    "architectures": ".sweep.audit",
    "audit": ".sweep.audit",
    "audit_frame": ".sweep.audit",
    "place_on_curve": ".sweep.audit",
    "with_placed_models": ".sweep.audit",
    "range_sentence": ".sweep.audit",
    "plot_on_curve": ".sweep.audit",
    "audit_sources": ".lint.source_audit",
    "findings_markdown": ".lint.findings",
    "parse_variant": ".token2wav.variants",
    "BUILTIN_VARIANTS": ".token2wav.variants",
    "beyond_the_pr": "sections",
    # 06: where startup goes
    "start_stage_groups": "stages",
    "first_start_log": "stages",
    "read_timeline": ".startup.timeline",
    "timeline_sentence": "stages",
    "timeline_table": "stages",
    "gantt": ".startup.timeline_plot",
    "stage_comparison_table": "stages",
    "startup_row": "stages",
    "detectable_sentences": "stages",
}, modules={"explore": "explore", "waveform": "waveform"})
