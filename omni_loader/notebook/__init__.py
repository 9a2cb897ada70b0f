"""The kit's face for notebooks: ``from omni_loader import notebook as kit``.

A notebook is read by people who want the story, so its cells call one module whose names say what
they show, and the kit's folders can change underneath without breaking a notebook. The face is small:
at its top level the names every notebook uses, each a documented function, class or constant, and one
sub-face per subject, offered whole (``kit.rules.find_persistent_buffers(tree)``,
``kit.report.controls(out)``), each module saying in its docstring what its notebook shows with it. The
kit's own notebooks import nothing else from ``omni_loader`` (``tests/test_layout.py`` checks, and that
the top level stays at 40 names or fewer), and a notebook of your own can start from the same names.
Unlike another folder's API, this face may name any folder's functions, as the package's top level does.

At the top level:

- the notebook itself: the parameters checked (:func:`check_parameters`), where results go
  (:func:`results_dir` under :func:`results_root`), a notebook executed headless into a trusted copy
  (:func:`execute`);
- showing: :func:`show` (text as Markdown, a saved plot as an image, anything else displayed), tables and
  numbers for people (:func:`table`, :func:`readable`, :func:`key_values`, :func:`short_duration`,
  :func:`count`, :func:`mib`);
- the machine and the model: :func:`device_banner`, :func:`resolve_device`, :func:`resolve_snapshot`,
  :class:`LoadOptions`, the model built or counted (:func:`build_model`, :func:`config_dict`,
  :func:`inventory`);
- the benchmark (01, 05): :func:`benchmark_spec`, :func:`plan_runs`, :func:`reproduce`, the built-in
  variants (:data:`BUILTIN_VARIANTS`) and one of your own (:func:`parse_variant`);
- the profiles (02): both variants profiled, :func:`profile`, whose methods give each section and the
  differential profile;
- the startup A/B (06): stage groups started, :func:`start_stage_groups`, whose methods compare them, and one
  start's log read into its :func:`timeline` (a log of your own too), which says, tabulates and draws it.

The sub-faces, by the notebook that shows them:

- ``kit.report`` (:mod:`~.report`, 01 and 05): a saved benchmark section by section;
- ``kit.rules`` (:mod:`~.rules`, 03): the two discovery rules on small trees and on Token2Wav;
- ``kit.traversal`` (:mod:`~.traversal`, 03 and 05): the traversal sweep and its fits;
- ``kit.explore`` (:mod:`~.explore`, 03 and 04): the module tree's tables and the rules' hazards;
- ``kit.waveform`` (:mod:`~.waveform`, 04): a real load and a forward pass to audio;
- ``kit.audits`` (:mod:`~.audits`, 05): transformers architectures and source code audited;

Its own modules besides: :mod:`~.files` (executing notebooks, trust, the pre-save hook that keeps outputs
out of stored notebooks, which Jupyter's configuration names by its path), :mod:`~.showing`,
:mod:`~.parameters`, :mod:`~.story` (the two rules as code), :mod:`~.sections` (with the A/B tables of
:mod:`~.ab_tables`), :mod:`~.profiles` and :mod:`~.stages`, which hold 02's and 06's nouns.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    # the notebook itself
    "check_parameters": "parameters",
    "results_dir": "files",
    "execute": "files",
    # showing
    "show": "showing",
    "table": ".formatting",
    "readable": "showing",
    "key_values": "showing",
    "short_duration": ".formatting",
    "count": ".formatting",
    "mib": ".formatting",
    # the machine and the model
    "device_banner": ".host.devices",
    "resolve_device": ".host.devices",
    "resolve_snapshot": ".token2wav.checkpoint",
    "LoadOptions": ".token2wav.options",
    # module trees and the two rules (03, 04)
    "rules_as_code": "story",
    "tree": "explore",
    "hazards": "explore",
    "load_model": "waveform",
    # what module traversal costs (03, 05)
    "sweep": ".sweep.traversal",
    "audit": ".sweep.audit",
    "audit_sources": ".lint.source_audit",
    # the benchmark
    "benchmark_spec": ".bench.runner",
    "reproduce": "sections",
    "results": "sections",
    "discovery_ratios": "sections",
    "BUILTIN_VARIANTS": ".token2wav.variants",
    "parse_variant": ".token2wav.variants",
    # the profiles (02) and the startup A/B (06)
    "profile": "profiles",
    "start_stage_groups": "stages",
    "timeline": "stages",
})
