"""The two buffer-discovery rules, on small trees and on Token2Wav: notebooks 01 and 03 (``kit.rules``).

Both open with the rules as the code that runs (:func:`rules_as_code`).

Notebook 03 builds a small module tree (:func:`build_tree`) and shows what each rule returns on it: the
non-persistent names the optimized rule qualifies (:func:`non_persistent_buffer_names`), the persistent
buffers by each rule of :data:`VARIANTS` (:func:`find_persistent_buffers`) and how many whole state dicts
the baseline builds (:func:`count_state_dict_calls`); then, on the real model (:func:`token2wav_model`),
that both rules agree (:func:`compare_variants`) and that no hook or override could make them differ
(:func:`rule_hazards`).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "VARIANTS": ".names",
    "build_tree": ".sweep.trees",
    "token2wav_model": ".sweep.trees",
    "non_persistent_buffer_names": ".token2wav.discovery",
    "find_persistent_buffers": ".token2wav.discovery",
    "count_state_dict_calls": ".token2wav.discovery",
    "compare_variants": ".token2wav.discovery",
    "rule_hazards": ".token2wav.discovery",
    "rules_as_code": "story",
}, relative_to=__package__)
