"""Persistent-buffer discovery, both variants, on hand-made module trees and on Token2Wav."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from omni_loader.token2wav.discovery import (compare_variants, count_state_dict_calls, find_persistent_buffers,
                                             non_persistent_buffer_names, rule_hazards)
from omni_loader.token2wav.model import build_model, config_dict

VARIANTS = ("baseline", "optimized")


class Leaf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("keep", torch.ones(2))
        self.register_buffer("skip", torch.zeros(2), persistent=False)
        self.register_buffer("unset", None)  # a None buffer is neither named nor saved


class Tree(nn.Module):
    """Root-level and nested buffers of both kinds; the root's non-persistent buffer is called
    ``keep`` like the children's persistent ones, so a rule that mangles root names is caught."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("root_keep", torch.arange(3.0))
        self.register_buffer("keep", torch.arange(4.0), persistent=False)
        self.child = Leaf()
        self.stack = nn.Sequential(Leaf(), nn.Sequential(Leaf()))


PERSISTENT = {"root_keep", "child.keep", "stack.0.keep", "stack.1.0.keep"}
NON_PERSISTENT = {"keep", "child.skip", "stack.0.skip", "stack.1.0.skip"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_finds_exactly_the_persistent_buffers(variant: str) -> None:
    model = Tree()
    found = find_persistent_buffers(model, variant)
    assert set(found) == PERSISTENT
    # the definition: the buffers that state_dict() holds
    assert set(found) == set(model.state_dict()) & {n for n, _ in model.named_buffers()}
    buffers = dict(model.named_buffers())
    assert all(found[name] is buffers[name] for name in found)


def test_both_variants_return_the_same_dict() -> None:
    model = Tree()
    base, opt = find_persistent_buffers(model, "baseline"), find_persistent_buffers(model, "optimized")
    assert base.keys() == opt.keys()
    assert all(base[k] is opt[k] for k in base)


def test_non_persistent_names_have_no_leading_dot_at_the_root() -> None:
    names = non_persistent_buffer_names(Tree())
    assert names == NON_PERSISTENT
    assert not any(n.startswith(".") for n in names)


def test_root_only_module() -> None:
    model = nn.Module()
    model.register_buffer("a", torch.ones(1))
    model.register_buffer("b", torch.ones(1), persistent=False)
    assert non_persistent_buffer_names(model) == {"b"}
    for variant in VARIANTS:
        assert list(find_persistent_buffers(model, variant)) == ["a"]


def test_buffer_made_non_persistent_after_registration() -> None:
    """vLLM-Omni's layout flips inv_freq the other way; the rule must read the set, not the registration call."""
    model = Tree()
    model.child._non_persistent_buffers_set.add("keep")
    for variant in VARIANTS:
        assert set(find_persistent_buffers(model, variant)) == PERSISTENT - {"child.keep"}


def test_unknown_variant() -> None:
    with pytest.raises(ValueError, match="variant"):
        find_persistent_buffers(Tree(), "fastest")


# --------------------------------------------------------------------------- counting state_dict() calls


def test_count_state_dict_calls_per_variant() -> None:
    model = Tree()
    n_buffers = sum(1 for _ in model.named_buffers())
    assert n_buffers == len(PERSISTENT | NON_PERSISTENT)
    with count_state_dict_calls(model) as base:
        find_persistent_buffers(model, "baseline")
    with count_state_dict_calls(model) as opt:
        find_persistent_buffers(model, "optimized")
    assert base.calls == n_buffers
    assert opt.calls == 0


def test_count_state_dict_calls_counts_whole_state_dicts_and_unwraps() -> None:
    model = Tree()
    with count_state_dict_calls(model) as counter:
        model.state_dict()  # recurses into 5 children internally: still one whole state dict
        model.child.state_dict()  # not the root
    assert counter.calls == 1
    assert "state_dict" not in model.__dict__  # the wrapper is gone
    with count_state_dict_calls(model) as counter:
        pass
    assert counter.calls == 0


def test_count_state_dict_calls_unwraps_on_error() -> None:
    model = Tree()
    with pytest.raises(RuntimeError), count_state_dict_calls(model):
        model.state_dict()
        raise RuntimeError("boom")
    assert "state_dict" not in model.__dict__


# --------------------------------------------------------------------------- hazards and disagreement


# Hook factories: torch marks a function registered through the public API, so each
# registration gets a fresh function object.
def _drop_keep():
    def hook(module, state_dict, prefix, local_metadata):
        state_dict.pop(prefix + "keep", None)

    return hook


def _add_skip():
    def hook(module, state_dict, prefix, local_metadata):
        state_dict[prefix + "skip"] = module.skip

    return hook


def _register_post_hook(module: nn.Module, hook) -> None:
    """The public API where this torch has it, else the private one."""
    if hasattr(module, "register_state_dict_post_hook"):
        module.register_state_dict_post_hook(hook)
    else:  # pragma: no cover - older torch
        module._register_state_dict_hook(hook)


def test_clean_tree_has_no_hazards() -> None:
    assert rule_hazards(Tree()) == []


@pytest.mark.parametrize("api", ["public", "private"])
def test_state_dict_post_hook_is_a_hazard(api: str) -> None:
    model = Tree()
    if api == "public":
        _register_post_hook(model.stack[1][0], _drop_keep())
    else:
        model.stack[1][0]._register_state_dict_hook(_drop_keep())
    hazards = rule_hazards(model)
    assert [h.module for h in hazards] == ["stack.1.0"]
    assert hazards[0].cls == "Leaf"
    assert "post-hook" in hazards[0].reason
    assert str(hazards[0]).startswith("stack.1.0 (Leaf)")


def test_state_dict_pre_hook_is_a_hazard() -> None:
    model = Tree()
    model.child.register_state_dict_pre_hook(lambda module, prefix, keep_vars: None)
    hazards = rule_hazards(model)
    assert [(h.module, "pre-hook" in h.reason) for h in hazards] == [("child", True)]


def test_root_hazard_is_named_root() -> None:
    model = Tree()
    _register_post_hook(model, _drop_keep())
    (hazard,) = rule_hazards(model)
    assert hazard.module == ""
    assert str(hazard).startswith("<root> (Tree)")


class SelectiveLeaf(Leaf):
    """Saves everything but its persistent ``keep`` buffer."""

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination.pop(prefix + "keep", None)


class ExtraStateDict(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("x", torch.ones(1))

    def state_dict(self, *args, **kwargs):  # type: ignore[override]
        return super().state_dict(*args, **kwargs)


def test_save_to_state_dict_override_is_a_hazard_and_disagrees() -> None:
    model = Tree()
    model.child = SelectiveLeaf()
    hazards = rule_hazards(model)
    assert [(h.module, h.cls) for h in hazards] == [("child", "SelectiveLeaf")]
    assert "_save_to_state_dict" in hazards[0].reason
    agreement = compare_variants(model)
    assert not agreement.agree
    assert agreement.only_optimized == ["child.keep"]
    assert agreement.only_baseline == []


def test_state_dict_override_is_a_hazard() -> None:
    model = Tree()
    model.extra = ExtraStateDict()
    assert [(h.module, "overrides state_dict" in h.reason) for h in rule_hazards(model)] == [("extra", True)]


def test_compare_variants_when_a_hook_drops_a_buffer() -> None:
    model = Tree()
    _register_post_hook(model.stack[0], _drop_keep())
    agreement = compare_variants(model)
    assert agreement.agree is False
    assert agreement.only_optimized == ["stack.0.keep"]
    assert agreement.only_baseline == []
    assert agreement.baseline == sorted(PERSISTENT - {"stack.0.keep"})
    assert agreement.optimized == sorted(PERSISTENT)
    assert [h.module for h in agreement.hazards] == ["stack.0"]
    summary = agreement.summary()
    assert "DISAGREE" in summary and "stack.0.keep" in summary and "stack.0 (Leaf)" in summary


def test_compare_variants_when_a_hook_adds_a_buffer() -> None:
    model = Tree()
    _register_post_hook(model.child, _add_skip())
    assert "child.skip" in model.state_dict()
    agreement = compare_variants(model)
    assert agreement.agree is False
    assert agreement.only_baseline == ["child.skip"]
    assert agreement.only_optimized == []


def test_compare_variants_agree_on_a_clean_tree() -> None:
    agreement = compare_variants(Tree())
    assert agreement.agree is True
    assert agreement.baseline == agreement.optimized == sorted(PERSISTENT)
    assert agreement.only_baseline == agreement.only_optimized == agreement.hazards == []
    assert agreement.summary() == f"variants agree on {len(PERSISTENT)} persistent buffer{'s' * (len(PERSISTENT) != 1)}"


def test_hook_that_changes_nothing_is_still_flagged_but_agrees() -> None:
    model = Tree()
    _register_post_hook(model.child, lambda module, state_dict, prefix, local_metadata: None)
    agreement = compare_variants(model)
    assert agreement.agree is True
    assert [h.module for h in agreement.hazards] == ["child"]


# --------------------------------------------------------------------------- Token2Wav


@pytest.mark.parametrize(
    "layout, expected", [("vllm-omni", ["code2wav_dit_model.rotary_embed.inv_freq"]), ("transformers", [])]
)
def test_token2wav_tiny_variants_agree(layout: str, expected: list[str]) -> None:
    model = build_model(config_dict("tiny"), layout=layout, device="cpu")
    agreement = compare_variants(model)
    assert agreement.agree, agreement.summary()
    assert agreement.baseline == agreement.optimized == expected
    assert agreement.hazards == []
    n_buffers = sum(1 for _ in model.named_buffers())
    assert n_buffers == {"vllm-omni": 51, "transformers": 52}[layout]
    with count_state_dict_calls(model) as base:
        find_persistent_buffers(model, "baseline")
    with count_state_dict_calls(model) as opt:
        find_persistent_buffers(model, "optimized")
    assert (base.calls, opt.calls) == (n_buffers, 0)


# --------------------------------------------------------------------------- exact wording and defaults


def test_default_variant_is_the_optimized_rule() -> None:
    model = Tree()
    with count_state_dict_calls(model) as calls:
        found = find_persistent_buffers(model)
    assert calls.calls == 0 and set(found) == PERSISTENT


def test_hazard_reasons_are_stated_in_full() -> None:
    model = Tree()
    _register_post_hook(model.child, lambda module, state_dict, prefix, local_metadata: None)
    model.child.register_state_dict_pre_hook(lambda module, prefix, keep_vars: None)
    model.stack[0] = SelectiveLeaf()
    model.extra = ExtraStateDict()
    assert [str(h) for h in rule_hazards(model)] == [
        "child (Leaf): has state_dict post-hooks",
        "child (Leaf): has state_dict pre-hooks",
        "stack.0 (SelectiveLeaf): overrides _save_to_state_dict",
        "extra (ExtraStateDict): overrides state_dict",
    ]


def test_disagreement_summary_in_full() -> None:
    model = Tree()
    _register_post_hook(model.stack[0], _drop_keep())
    _register_post_hook(model.child, lambda module, state_dict, prefix, local_metadata: None)
    assert compare_variants(model).summary() == (
        "variants DISAGREE on 3 persistent buffers; only baseline: []; only optimized: ['stack.0.keep']; "
        "unsafe for the optimized rule: child (Leaf): has state_dict post-hooks; "
        "stack.0 (Leaf): has state_dict post-hooks"
    )


# mutmut (make mutation) runs the tests on its copy of the package, where each function is a trampoline to its mutants:
# the source shown there is the trampoline's, not the rule's.
UNDER_MUTMUT = "MUTANT_UNDER_TEST" in os.environ


@pytest.mark.skipif(UNDER_MUTMUT, reason="under mutmut each rule's source is mutmut's trampoline")
def test_the_rules_shown_as_code_are_the_rules_that_run() -> None:
    """Notebooks 01 and 03 show the two rules as code (``kit.rules_as_code``): each block, executed on its
    own, finds what the kit's rule finds on a tree with root and nested buffers of both kinds, and the baseline's
    block asks ``state_dict()`` once per named buffer while the optimized one never does; no docstring is shown."""
    import re

    from omni_loader.notebook.story import rules_as_code

    blocks = re.findall(r"```python\n(.*?)\n```", rules_as_code(), re.S)
    assert len(blocks) == 2
    tree = Tree()
    for block, variant, name in zip(blocks, VARIANTS, ("_baseline", "_optimized")):
        assert '"""' not in block, f"the {variant} rule is shown with its docstring"
        namespace = {"nn": nn, "torch": torch}
        exec(compile("from __future__ import annotations\n" + block, f"<{variant}>", "exec"), namespace)
        with count_state_dict_calls(tree) as calls:
            found = namespace[name](tree)
        assert found == find_persistent_buffers(tree, variant)
        assert calls.calls == (len(list(tree.named_buffers())) if variant == "baseline" else 0)
