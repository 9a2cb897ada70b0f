"""Qwen2.5-Omni Token2Wav, built from transformers' own classes in one of two layouts.

``transformers``
    The module tree exactly as the installed transformers builds it, float32 throughout (or the ``dtype``
    asked for), as transformers' Qwen2.5-Omni calls ``token2wav.float()``.
``vllm-omni`` (default)
    The tree as vLLM-Omni loads it: the DiT's rotary ``inv_freq`` is a *persistent* buffer (in
    ``state_dict()`` and the checkpoint), ``original_inv_freq`` is absent (219 named buffers), and each DiT
    attention block holds one fused ``qkv_proj`` instead of ``to_q``/``to_k``/``to_v`` (720 parameter
    tensors), computing the same function. Each half has the dtype vLLM-Omni 0.30.0's code2wav stage gives
    it (:data:`~.options.VLLM_OMNI_HALF_DTYPES`): the DiT float32, the BigVGAN bfloat16, 1,492.80 MiB in all, the
    ``size`` of its ``[Model Loaded]`` line; loading casts the checkpoint's float32.

Why those dtypes: 0.30.0 builds each half through ``_from_config`` under the stage's default (``auto``: the
checkpoint's bfloat16) unless its sub-config pins one, and only DiT 333,607,760 elements in float32 plus BigVGAN
115,443,504 in bfloat16 give the logged 1,492.80 MiB (all float32: 1,712.99; the other mix: 1,076.69).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import torch
from torch import nn

from ..errors import check_choice
from ..names import CONSTRUCT_MODES, DATA_DIR, LAYOUTS, SIZES
from .discovery import find_persistent_buffers
from .options import half_dtypes


@lru_cache(maxsize=1)
def _modeling() -> Any:
    """Import transformers' Qwen2.5-Omni modules lazily: the import alone costs seconds."""
    from transformers.models.qwen2_5_omni import configuration_qwen2_5_omni as cfg
    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as mdl

    return cfg, mdl


def import_model_code() -> None:
    """Import transformers' Qwen2.5-Omni model code now (cached): a serving stage has done so before it loads."""
    _modeling()


def _shipped(size: str, suffix: str = "") -> Any:
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, not {size!r}")
    return json.loads((DATA_DIR / f"token2wav-{size}{suffix}.json").read_text())


def config_dict(size: str) -> dict[str, Any]:
    """The shipped ``token2wav_config`` for ``size`` ('full' is the released checkpoint's)."""
    return _shipped(size)


def shipped_tensor_specs(size: str) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Names, shapes and dtypes of the checkpoint's tensors for the shipped ``size``, as
    :func:`~omni_loader.token2wav.checkpoint.checkpoint_tensor_specs` derives them (a test holds the two alike),
    read from a file so that the synthetic snapshot does not import transformers' model code (seconds)."""
    return {name: (tuple(shape), getattr(torch, dtype)) for name, shape, dtype in _shipped(size, "-tensors")["tensors"]}


def make_config(token2wav_config: dict[str, Any]) -> Any:
    cfg, _ = _modeling()
    return cfg.Qwen2_5OmniToken2WavConfig(**token2wav_config)


class FusedQKVDiTAttention(nn.Module):
    """DiT attention with one ``qkv_proj`` matmul, as vLLM-Omni stacks q/k/v into one weight: its rows are
    ``[to_q; to_k; to_v]``, so splitting its output gives the unfused block's three projections."""

    def __init__(self, config: Any, to_out: nn.ModuleList | None = None) -> None:
        super().__init__()
        self.config = config
        self.heads = config.num_attention_heads
        self.inner_dim = config.head_dim * config.num_attention_heads
        self.is_causal = False
        # In the DiT's own dtype (the to_out it keeps), whatever the default dtype of the moment.
        dtype = None if to_out is None else to_out[0].weight.dtype
        self.qkv_proj = nn.Linear(config.hidden_size, 3 * self.inner_dim, dtype=dtype)
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
    """Rewrite a transformers-built Token2Wav in place into vLLM-Omni's module tree, under the construction's
    device, dtype and no-init context, so the new ``qkv_proj`` is allocated like every other weight."""
    dit = model.code2wav_dit_model
    rotary = dit.rotary_embed
    # transformers 5.x registers inv_freq non-persistent beside an original_inv_freq; 4.x kept one persistent inv_freq
    rotary._non_persistent_buffers_set.discard("inv_freq")
    rotary._non_persistent_buffers_set.discard("original_inv_freq")
    rotary._buffers.pop("original_inv_freq", None)
    for block in dit.transformer_blocks:
        block.attn = FusedQKVDiTAttention(block.attn.config, to_out=block.attn.to_out)
    _cast_like_vllm_omni(model)


def _to_dtype(module: nn.Module, args: tuple[Any, ...], dtype: torch.dtype | None = None) -> tuple[Any, ...]:
    """Forward pre-hook: the first input in ``dtype`` (default: the module's ``filter`` buffer's)."""
    return (args[0].to(dtype or module.filter.dtype), *args[1:])


def _output_to(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Forward hook: the output in ``dtype``."""
    return output.to(dtype)


def _cast_like_vllm_omni(model: nn.Module) -> None:
    """The casts vLLM-Omni's forward makes where the DiT and the BigVGAN differ in dtype: the mel spectrogram to
    the vocoder's dtype and the waveform back, the anti-alias resamplers in their float32 filter's dtype. Hooks,
    so the module tree stays transformers' own; none where the two halves agree."""
    vocoder = model.code2wav_bigvgan_model
    inner, outer = next(vocoder.parameters()).dtype, next(model.code2wav_dit_model.parameters()).dtype
    if inner == outer:
        return
    vocoder.register_forward_pre_hook(partial(_to_dtype, dtype=inner))
    vocoder.register_forward_hook(partial(_output_to, dtype=outer))
    for module in vocoder.modules():
        if "filter" in module._buffers:  # an up- or down-sampler of an anti-aliased activation
            module.register_forward_pre_hook(_to_dtype)
            module.register_forward_hook(partial(_output_to, dtype=inner))


def build_model(token2wav_config: dict[str, Any], layout: str = "vllm-omni", device: torch.device | str = "cpu",
                dtype: torch.dtype = torch.float32, construct: str = "empty") -> nn.Module:
    """Construct Token2Wav directly on ``device`` under default ``dtype`` (the stage dtype), as a serving stage does.

    The ``transformers`` layout builds every parameter in ``dtype``; the ``vllm-omni`` layout each half in
    vLLM-Omni 0.30.0's (:data:`~.options.VLLM_OMNI_HALF_DTYPES`), through ``_from_config`` under the sub-config's
    dtype as upstream. ``construct`` decides where parameter memory is first written, so which phase pays a CPU's
    page faults (about 460,000 for the full model): ``resident`` (default) every parameter here, the fused
    ``qkv_proj`` included, as GPU memory is resident when the allocator hands it out (on a VM with free page
    reporting, first touches left in ``load_parameters`` made a phase both variants share look 2× faster in one);
    ``upstream-cpu`` what upstream's constructors write on a CPU, all but the fused ``qkv_proj`` (``torch.empty``,
    ~69,000 first touches); ``empty`` nothing (tree studies, meta); ``init`` transformers' full random init (about
    7 s). The first two write zeros: the load overwrites them anyway. Buffers the checkpoint lacks (anti-alias
    filters, rotary frequencies) are computed in every mode.
    """
    check_choice("--layout", layout, LAYOUTS)
    check_choice("--construct", construct, CONSTRUCT_MODES)
    _, mdl = _modeling()
    try:
        from transformers.initialization import no_init_weights
    except ModuleNotFoundError:  # transformers 4.x keeps it in modeling_utils
        from transformers.modeling_utils import no_init_weights

    config = make_config(token2wav_config)
    # each half is built under its sub-config's dtype (a real config.json may carry one): the layout alone decides
    dtypes = {name: getattr(torch, d) for name, d in half_dtypes(layout, str(dtype).removeprefix("torch.")).items()}
    config.dit_config.dtype = dtypes["code2wav_dit_model"]
    config.bigvgan_config.dtype = dtypes["code2wav_bigvgan_model"]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), (nullcontext() if construct == "init" else no_init_weights()):
            model = mdl.Qwen2_5OmniToken2WavModel(config)
            built = {name: next(getattr(model, name).parameters()).dtype for name in dtypes}
            if built != dtypes:  # a transformers that ignores the sub-config's dtype would build another model
                raise RuntimeError(f"Token2Wav was built in {built}, not {dtypes}: this transformers does not "
                                   "construct a submodule under its sub-config's dtype")
            if layout == "vllm-omni":
                _to_vllm_omni_layout(model)
    finally:
        torch.set_default_dtype(previous)
    if construct in ("resident", "upstream-cpu"):
        write_initialised_parameters(model, include_fused=construct == "resident")
    return model.eval()


def parameter_bytes(model: nn.Module) -> int:
    """The bytes the parameters hold: ``numel() * element_size()`` summed over ``named_parameters()``,
    as vLLM-Omni's ``[Model Loaded]`` line sums them (meta tensors count their would-be size)."""
    return sum(p.numel() * p.element_size() for _, p in model.named_parameters())


def write_initialised_parameters(model: nn.Module, include_fused: bool) -> None:
    """Write (zero) every parameter an upstream constructor would have initialised. The fused ``qkv_proj`` only
    with ``include_fused`` (upstream's ``torch.empty``); nothing on the meta device."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.device.type != "meta" and (include_fused or ".qkv_proj." not in f".{name}"):
                param.zero_()


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
    model = build_model(config_dict(size), layout=layout, device="meta")
    params = list(model.parameters())
    return Inventory(layout=layout, size=size, modules=sum(1 for _ in model.named_modules()),
                     named_buffers=sum(1 for _ in model.named_buffers()),
                     persistent_buffers=sorted(find_persistent_buffers(model, "optimized")), parameters=len(params),
                     parameter_elements=sum(p.numel() for p in params), parameter_bytes=parameter_bytes(model))
