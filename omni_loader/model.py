"""Qwen2.5-Omni Token2Wav, built from transformers' own classes in one of two layouts.

``transformers``
    The module tree exactly as the installed transformers builds it.
``vllm-omni`` (default)
    The tree as vLLM-Omni loads it: the DiT's rotary ``inv_freq`` is a *persistent* buffer (so
    it appears in ``state_dict()`` and in the checkpoint), ``original_inv_freq`` is absent (219
    named buffers), and each DiT attention block holds one fused ``qkv_proj`` instead of
    ``to_q``/``to_k``/``to_v`` (720 parameter tensors). The fused block computes the same
    function, so on equal weights both layouts produce the same output.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from .names import CONSTRUCT_MODES, DATA_DIR, LAYOUTS, SIZES  # noqa: F401  (re-exported: model's vocabulary)

CHECKPOINT_PREFIX = "token2wav."


@lru_cache(maxsize=1)
def _modeling() -> Any:
    """Import transformers' Qwen2.5-Omni modules lazily: the import alone costs seconds."""
    from transformers.models.qwen2_5_omni import configuration_qwen2_5_omni as cfg
    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as mdl

    return cfg, mdl


def import_model_code() -> None:
    """Import transformers' Qwen2.5-Omni model code now (cached): a serving stage has done so before it loads."""
    _modeling()


def config_dict(size: str) -> dict[str, Any]:
    """The shipped ``token2wav_config`` for ``size`` ('full' is the released checkpoint's)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, not {size!r}")
    return json.loads((DATA_DIR / f"token2wav-{size}.json").read_text())


def make_config(token2wav_config: dict[str, Any]) -> Any:
    cfg, _ = _modeling()
    return cfg.Qwen2_5OmniToken2WavConfig(**token2wav_config)


class FusedQKVDiTAttention(nn.Module):
    """DiT attention with one ``qkv_proj`` matmul, as vLLM-Omni stacks q/k/v into one weight.

    The rows of ``qkv_proj.weight`` are ``[to_q; to_k; to_v]``, so splitting its output gives the
    three projections of the unfused block and the rest of the computation is unchanged.
    """

    def __init__(self, config: Any, to_out: nn.ModuleList | None = None) -> None:
        super().__init__()
        self.config = config
        self.heads = config.num_attention_heads
        self.inner_dim = config.head_dim * config.num_attention_heads
        self.is_causal = False
        self.qkv_proj = nn.Linear(config.hidden_size, 3 * self.inner_dim)
        if to_out is None:
            to_out = nn.ModuleList([nn.Linear(self.inner_dim, config.hidden_size), nn.Dropout(config.dropout)])
        self.to_out = to_out

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None) -> torch.Tensor:
        _, mdl = _modeling()
        batch = hidden_states.shape[0]
        query, key, value = self.qkv_proj(hidden_states).split(self.inner_dim, dim=-1)
        head_dim = self.inner_dim // self.heads
        query, key, value = (t.view(batch, -1, self.heads, head_dim).transpose(1, 2) for t in (query, key, value))
        # The checkpoint rotates only the first head, in interleaved order (as transformers does).
        cos, sin = position_embeddings
        query[:, :1], key[:, :1] = mdl.apply_rotary_pos_emb(
            mdl.deinterleave_head_dim(query[:, :1]), mdl.deinterleave_head_dim(key[:, :1]), cos, sin
        )
        attend = mdl.ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]
        out, _ = attend(self, query, key, value, attention_mask=attention_mask, is_causal=False)
        out = out.reshape(batch, -1, self.heads * head_dim).to(query.dtype)
        return self.to_out[1](self.to_out[0](out))


def _to_vllm_omni_layout(model: nn.Module) -> None:
    """Rewrite a transformers-built Token2Wav in place into vLLM-Omni's module tree.

    Called under the same device, dtype and no-init context as the construction, so the new
    ``qkv_proj`` is allocated like every other weight (and not randomly initialised: ~10% of an
    optimized load on CPU when it was).
    """
    dit = model.code2wav_dit_model
    rotary = dit.rotary_embed
    rotary._non_persistent_buffers_set.discard("inv_freq")
    del rotary._buffers["original_inv_freq"]
    for block in dit.transformer_blocks:
        block.attn = FusedQKVDiTAttention(block.attn.config, to_out=block.attn.to_out)


def build_model(
    token2wav_config: dict[str, Any],
    layout: str = "vllm-omni",
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    construct: str = "empty",
) -> nn.Module:
    """Construct Token2Wav directly on ``device`` under default ``dtype``, as a serving stage does.

    ``construct`` decides where the first write of the parameter memory happens, which on a CPU
    decides which phase pays the page faults (about 460,000 of them for the full model):

    ``resident``      every parameter written here, the fused ``qkv_proj`` included, so that
                      ``load_weights`` copies into resident memory, as it does on the GPU the PR
                      measured: device memory is backed when the caching allocator takes it from
                      the driver, so upstream's ``torch.empty`` has no first-touch cost there.
                      On a CPU virtual machine that hands freed memory back to its host (free
                      page reporting), a first touch is a host fault whose price varies from run
                      to run; leaving it inside ``load_parameters`` made a phase both variants
                      share look 2x faster in one variant. The kit's default.
    ``upstream-cpu``  upstream's constructors as they behave on a CPU: plain ``nn.Linear``/
                      ``nn.Conv1d``/… run their default init, so their memory is written before
                      ``load_weights``; the fused ``qkv_proj`` stays ``torch.empty`` as vLLM's
                      ``QKVParallelLinear`` allocates it, and its ~69,000 first touches land in
                      ``load_parameters``. (Called ``upstream`` before; that name still reads.)
    ``empty``         nothing written: every first touch lands in ``load_parameters``. Cheapest to
                      build; the right choice for module-tree studies and the meta device.
    ``init``          transformers' full default (random) init of every parameter, ``qkv_proj``
                      too (about 7 s on two cores for the full model): for study.

    The writes of ``resident`` and ``upstream-cpu`` are a cheap zero fill instead of a random init:
    the load overwrites the values either way; what matters is in which phase the first touch is
    timed.
    The anti-alias filters and rotary frequencies are computed by the constructors in every mode,
    because they are buffers the checkpoint does not hold.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if construct not in CONSTRUCT_MODES:
        raise ValueError(f"construct must be one of {CONSTRUCT_MODES}, not {construct!r}")
    _, mdl = _modeling()
    from transformers.initialization import no_init_weights

    config = make_config(token2wav_config)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), (nullcontext() if construct == "init" else no_init_weights()):
            model = mdl.Qwen2_5OmniToken2WavModel(config)
            if layout == "vllm-omni":
                _to_vllm_omni_layout(model)
    finally:
        torch.set_default_dtype(previous)
    if construct in ("resident", "upstream-cpu"):
        write_initialised_parameters(model, include_fused=construct == "resident")
    return model.eval()


def write_initialised_parameters(model: nn.Module, include_fused: bool = False) -> int:
    """Write every parameter an upstream constructor would have initialised; returns bytes written.

    The fused ``qkv_proj`` is skipped unless ``include_fused``: upstream allocates it with
    ``torch.empty``, which on a GPU is resident memory and on a CPU is not. Nothing is written on
    the meta device, which holds no memory.
    """
    written = 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.device.type == "meta" or (not include_fused and ".qkv_proj." in f".{name}"):
                continue
            param.zero_()
            written += param.numel() * param.element_size()
    return written


@dataclass(frozen=True)
class Inventory:
    """What a module tree holds: the counts that the PR and the facts file quote."""

    layout: str
    size: str
    modules: int
    named_buffers: int
    persistent_buffers: list[str]
    parameters: int
    parameter_elements: int
    parameter_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def inventory(layout: str = "vllm-omni", size: str = "full") -> Inventory:
    """Count modules, buffers and parameters on the meta device (no memory, well under a second)."""
    from .discovery import find_persistent_buffers

    model = build_model(config_dict(size), layout=layout, device="meta")
    params = list(model.parameters())
    return Inventory(
        layout=layout,
        size=size,
        modules=sum(1 for _ in model.named_modules()),
        named_buffers=sum(1 for _ in model.named_buffers()),
        persistent_buffers=sorted(find_persistent_buffers(model, "optimized")),
        parameters=len(params),
        parameter_elements=sum(p.numel() for p in params),
        parameter_bytes=sum(p.numel() * p.element_size() for p in params),
    )
