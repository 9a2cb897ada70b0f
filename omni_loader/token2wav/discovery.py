"""Persistent-buffer discovery: the code the PR changed, in both variants.

A buffer is *persistent* when ``state_dict()`` emits it; ``register_buffer(..., persistent=False)``
records its name in the owning module's ``_non_persistent_buffers_set`` instead.

``baseline``  asks ``name in model.state_dict()`` for every named buffer: each question rebuilds
              the whole state dict, a walk over every module (219 walks for Qwen2.5-Omni).
``optimized`` walks ``named_modules()`` once, collects the qualified names listed in each
              module's ``_non_persistent_buffers_set`` and keeps every other named buffer.

The two agree as long as no module changes what ``state_dict()`` emits: a state-dict hook or an
overridden ``_save_to_state_dict``/``state_dict`` can add or drop keys that the optimized rule
cannot see. :func:`rule_hazards` names such modules and :func:`compare_variants` says whether the
variants agree on a given model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from ..names import VARIANTS


def _baseline(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: buf for name, buf in model.named_buffers() if name in model.state_dict()}


def non_persistent_buffer_names(model: nn.Module) -> set[str]:
    """Qualified names of every non-persistent buffer, from one walk of the module tree.

    The root module's prefix is the empty string, so its buffers get no leading dot.
    """
    names: set[str] = set()
    for prefix, module in model.named_modules():
        for local in module._non_persistent_buffers_set:
            names.add(f"{prefix}.{local}" if prefix else local)
    return names


def _optimized(model: nn.Module) -> dict[str, torch.Tensor]:
    skip = non_persistent_buffer_names(model)
    return {name: buf for name, buf in model.named_buffers() if name not in skip}


# The two buffer-discovery rules by variant name (a Variant names them as builtin:<name>).
RULES = {"baseline": _baseline, "optimized": _optimized}


def find_persistent_buffers(model: nn.Module, variant: str = "optimized") -> dict[str, torch.Tensor]:
    """``{qualified_name: buffer}`` for every buffer that ``model.state_dict()`` would hold."""
    try:
        rule = RULES[variant]
    except KeyError:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}") from None
    return rule(model)


@dataclass
class CallCounter:
    calls: int = 0


@contextmanager
def count_state_dict_calls(model: nn.Module) -> Iterator[CallCounter]:
    """Count calls of ``model.state_dict()`` on the root module made inside the block: "how many times was the
    whole state dict built", the PR's figure (the wrapper is an instance attribute, so a call's recursive
    ``child.state_dict(...)`` calls are not counted)."""
    counter = CallCounter()
    original = model.state_dict

    def counting_state_dict(*args, **kwargs):
        counter.calls += 1
        return original(*args, **kwargs)

    model.state_dict = counting_state_dict  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        del model.state_dict


@dataclass(frozen=True)
class RuleHazard:
    """A module for which the optimized rule may disagree with ``state_dict()``."""

    module: str
    cls: str
    reason: str

    def __str__(self) -> str:
        return f"{self.module or '<root>'} ({self.cls}): {self.reason}"


# What can make a module's state_dict() emit other than its parameters and persistent buffers.
HAZARDS = {
    "has state_dict post-hooks": lambda m: m._state_dict_hooks,
    "has state_dict pre-hooks": lambda m: m._state_dict_pre_hooks,
    "overrides _save_to_state_dict": lambda m: type(m)._save_to_state_dict is not nn.Module._save_to_state_dict,
    "overrides state_dict": lambda m: type(m).state_dict is not nn.Module.state_dict,
}


def rule_hazards(model: nn.Module) -> list[RuleHazard]:
    """Modules whose ``state_dict()`` output is not just parameters plus persistent buffers."""
    return [RuleHazard(name, type(module).__name__, reason) for name, module in model.named_modules()
            for reason, found in HAZARDS.items() if found(module)]


@dataclass
class Agreement:
    """Whether both variants return the same buffers on one model, and why they might not."""

    agree: bool
    baseline: list[str]
    optimized: list[str]
    only_baseline: list[str] = field(default_factory=list)
    only_optimized: list[str] = field(default_factory=list)
    hazards: list[RuleHazard] = field(default_factory=list)

    def summary(self) -> str:
        verdict = "agree" if self.agree else "DISAGREE"
        n = len(self.baseline)
        text = f"variants {verdict} on {n} persistent buffer{'' if n == 1 else 's'}"
        if self.only_baseline or self.only_optimized:
            text += f"; only baseline: {self.only_baseline}; only optimized: {self.only_optimized}"
        if self.hazards:
            text += "; unsafe for the optimized rule: " + "; ".join(map(str, self.hazards))
        return text


def compare_variants(model: nn.Module) -> Agreement:
    """Run both rules and compare the names and the identity of the tensors they return."""
    base = find_persistent_buffers(model, "baseline")
    opt = find_persistent_buffers(model, "optimized")
    same_tensors = base.keys() == opt.keys() and all(base[k] is opt[k] for k in base)
    return Agreement(agree=same_tensors, baseline=sorted(base), optimized=sorted(opt),
                     only_baseline=sorted(base.keys() - opt.keys()), only_optimized=sorted(opt.keys() - base.keys()),
                     hazards=rule_hazards(model))
