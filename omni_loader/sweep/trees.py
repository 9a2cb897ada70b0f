"""Module trees to measure discovery on: synthetic trees of any size, and the real Token2Wav.

Token2Wav's N and B are fixed, so its cost cannot say which of them it grows with; here they vary independently.
"""

from __future__ import annotations

import torch
from torch import nn

ROOT_PERSISTENT = "scale"  # root-level persistent buffer: its qualified name has no dot
NESTED_PERSISTENT = "inv_freq"  # persistent buffer on the deepest module, like Token2Wav's rotary


class TreeNode(nn.Module):
    """A small module: one 4-element parameter, children and buffers added by :func:`build_tree`."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(4))


def build_tree(n_modules: int, n_buffers: int, fanout: int = 4, buffer_numel: int = 12) -> nn.Module:
    """A ``fanout``-ary tree of exactly ``n_modules`` modules (depth grows as log N) and ``n_buffers`` named buffers:
    ``scale`` on the root and ``inv_freq`` on the deepest module persistent, the rest spread evenly, non-persistent."""
    if n_modules < 2:
        raise ValueError(f"n_modules must be at least 2 (root + one nested module), not {n_modules}")
    if n_buffers < 2:
        raise ValueError(f"n_buffers must be at least 2 (the two persistent buffers), not {n_buffers}")
    if fanout < 1:
        raise ValueError(f"fanout must be positive, not {fanout}")
    nodes = [TreeNode() for _ in range(n_modules)]
    for i in range(1, n_modules):
        nodes[(i - 1) // fanout].add_module(f"m{(i - 1) % fanout}", nodes[i])
    root = nodes[0]
    root.register_buffer(ROOT_PERSISTENT, torch.ones(1))
    nodes[-1].register_buffer(NESTED_PERSISTENT, torch.ones(8))
    non_persistent = n_buffers - 2
    for j in range(non_persistent):
        owner = nodes[(j * n_modules) // non_persistent]
        owner.register_buffer(f"filter{j}", torch.zeros(buffer_numel), persistent=False)
    return root


def tree_counts(model: nn.Module) -> tuple[int, int]:
    """(N, B): modules as ``named_modules()`` yields them, buffers as ``named_buffers()`` does."""
    return sum(1 for _ in model.named_modules()), sum(1 for _ in model.named_buffers())


def token2wav_model(size: str = "full", layout: str = "vllm-omni") -> nn.Module:
    """The real Token2Wav module tree, built on the CPU (weights left unwritten: discovery never reads them)."""
    from ..token2wav.model import build_model, config_dict

    return build_model(config_dict(size), layout=layout, device="cpu")
