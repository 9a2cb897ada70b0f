"""The kit's face for notebooks: ``from omni_loader import notebook as kit``.

Notebooks call this one module, so the kit's folders can change underneath without breaking one. At most 30 names:
a few nouns whose methods do the work, the verbs that make them, and the helpers that show
(``docs/my_first_ab.ipynb`` is a tiny A/B in five cells).

- the notebook itself: its parameters checked (:func:`check_parameters`), where results go (:func:`results_dir`),
  a notebook executed headless into a trusted copy (:func:`execute`);
- showing: :func:`show` (text as Markdown, a saved plot as an image, anything else displayed), tables and numbers
  for people (:func:`table`, :func:`readable`, :func:`key_values`, :func:`short_duration`, :func:`count`,
  :func:`mib`);
- the machine and the snapshot: :func:`device_banner`, :func:`resolve_device`, :func:`resolve_snapshot`,
  :class:`LoadOptions`;
- the benchmark (01, 05): :func:`benchmark_spec` (the spec, which knows its plan), :func:`reproduce`, which returns
  the saved results (:func:`results` reads any, or the newest saved), whose methods are the report's sections;
  buffer discovery's ratio figure by figure (:func:`discovery_ratios`); the built-in variants
  (:data:`BUILTIN_VARIANTS`) and one of your own (:func:`parse_variant`);
- module trees and the two rules (03, 04): :func:`rules_as_code`, :func:`tree` (Token2Wav's, a synthetic one or
  yours: what it holds and what each rule returns on it), :func:`hazards` (where the rules would disagree),
  :func:`load_model` (real tensors, then a forward pass to audio);
- what traversal costs (03, 05): :func:`sweep`, :func:`audit` (transformers architectures on its line),
  :func:`audit_sources` (your code read for the same mistake);
- profiles (02): :func:`profile`, and its differential profile (``profiles.diff(...)``);
- startup (06): :func:`start_stage_groups`, and one start's :func:`timeline` (a ``vllm serve`` log of your own too).
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
    "audit_sources": ".sweep.price",
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
