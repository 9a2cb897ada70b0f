"""vLLM-Omni's Token2Wav load path, one named function per step, read top to bottom.

1. ``construct``            build the model under the stage dtype, directly on the device; with
                            ``construct="upstream"`` (default) the parameters upstream's
                            constructors initialise are written here, as they are upstream
2. ``read_checkpoint``      the outer Qwen2.5-Omni ``load_weights`` turns the lazy shard iterator
                            into lists (one per stage) before anything else
3. ``speaker_conditioning`` the stage loads ``spk_dict.pt`` onto the device for conditioning
4. ``weight_loading``       Token2Wav's ``load_weights(weights, spk_dict_path)`` on that list:
   a. ``buffer_discovery``     ``find_all_registers()``: the step the PR changed
   b. ``split_buffers``        checkpoint entries that are persistent buffers are set aside
   c. ``load_parameters``      copy each tensor into its parameter (q/k/v stacked into
                               ``qkv_proj`` for the vllm-omni layout; dtype cast, device move)
   d. ``load_buffers``         every persistent buffer is copied from its set-aside entry, or onto
                               itself where the checkpoint lacks it, and counted as loaded either
                               way (``named_buffers()`` walked again), as ``reload_buffers_to_model``
   e. ``load_spk_dict``        ``spk_dict.pt`` loaded a second time (default device: the CPU)
5. ``post_load``            every parameter loaded? then ``eval()``

Where the kit still differs from vLLM-Omni, and why:

- Parameters are loaded by the kit's own short loop, not vLLM's ``AutoWeightsLoader`` (vLLM is not
  installed here); the loop does what that loader does for these tensors (stacked q/k/v shards,
  a default ``copy_`` that casts and moves) without its bookkeeping.
- The stage's other work between construction and loading (KV cache profiling, other stages on the
  same device) is absent: only Token2Wav's own steps are timed.
- ``upstream`` construction writes zeros instead of random init: the same pages are touched in the
  same phase, without the 7 s of random number generation that would only inflate ``construct``.
- ``read_checkpoint`` lists only the ``token2wav.`` tensors (the stage's other lists are empty
  for a Token2Wav-only snapshot), and the tensors stay lazily mapped, as safetensors gives them.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .checkpoint import Snapshot, iter_token2wav_weights
from .devices import resolve_device
from .discovery import count_state_dict_calls
from .errors import CheckpointError, OmniLoaderError
from .model import CHECKPOINT_PREFIX, _modeling, build_model
from .timing import PhaseClock, PhaseRecord
from .variants import Variant, variant_from

# (fused parameter, checkpoint part, shard index): vLLM-Omni's stacked q/k/v mapping.
STACKED_PARAMS = (("qkv_proj", "to_q", 0), ("qkv_proj", "to_k", 1), ("qkv_proj", "to_v", 2))
LEAF_PHASES = (
    "construct",
    "read_checkpoint",
    "speaker_conditioning",
    "buffer_discovery",
    "split_buffers",
    "load_parameters",
    "load_buffers",
    "load_spk_dict",
    "post_load",
)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadResult:
    """Everything one load reports: timings, counts, and a digest to compare loads by."""

    variant: str
    layout: str
    device: str
    dtype: str
    construct: str
    phases: list[PhaseRecord]
    state_dict_calls: int
    weights_loaded: int
    persistent_buffers: list[str]
    digest: str
    tensors_digested: int
    loaded_names: set[str] = field(default_factory=set, repr=False)

    def phase_seconds(self) -> dict[str, float]:
        return {p.name: p.seconds for p in self.phases}

    def to_dict(self) -> dict[str, Any]:
        peak = max((p.rss_peak_bytes for p in self.phases), default=0)
        device_peaks = [p.device_peak_bytes for p in self.phases if p.device_peak_bytes is not None]
        return {
            "variant": self.variant,
            "layout": self.layout,
            "device": self.device,
            "dtype": self.dtype,
            "construct": self.construct,
            "phases": self.phase_seconds(),
            "phase_records": [p.to_dict() for p in self.phases],
            "state_dict_calls": self.state_dict_calls,
            "weights_loaded": self.weights_loaded,
            "persistent_buffers": self.persistent_buffers,
            "digest": self.digest,
            "tensors_digested": self.tensors_digested,
            "rss_peak_bytes": peak,
            "device_peak_bytes": max(device_peaks) if device_peaks else None,
        }


# --------------------------------------------------------------------------- steps


def split_buffer_entries(
    weights: list[tuple[str, torch.Tensor]], persistent: dict[str, torch.Tensor]
) -> tuple[list[tuple[str, torch.Tensor]], list[tuple[str, torch.Tensor]]]:
    """Separate checkpoint entries that are persistent buffers from the parameter entries."""
    params, buffers = [], []
    for key, tensor in weights:
        (buffers if _strip(key) in persistent else params).append((key, tensor))
    return params, buffers


def load_parameters(
    model: nn.Module, weights: list[tuple[str, torch.Tensor]], snapshot: Snapshot, fused: bool,
    non_blocking: bool = False,
) -> dict[str, set[int]]:
    """Copy checkpoint tensors into parameters; returns parameter name -> shards loaded.

    This is the ``copy`` implementation of the ``parameters`` step (see :mod:`omni_loader.variants`):
    what vLLM's default weight loader does, a ``copy_`` that casts and moves.
    """
    params = dict(model.named_parameters())
    skippable = {n for n, _ in model.named_buffers()}  # e.g. inv_freq where it is not persistent
    loaded: dict[str, set[int]] = defaultdict(set)
    for key, tensor in weights:
        name = _strip(key)
        target, shard = _stacked_target(name) if fused else (name, None)
        if target not in params:
            if name in skippable:
                continue
            raise CheckpointError(f"checkpoint key {key} ({snapshot.root / snapshot.weight_map[key]}) matches no model parameter")
        param = params[target]
        if shard is None:
            _check_shape(key, tensor, param, snapshot)
            param.data.copy_(tensor, non_blocking=non_blocking)
        else:
            _load_stacked_shard(key, param, tensor, shard, snapshot, non_blocking)
        loaded[target].add(0 if shard is None else shard)
    return loaded


def load_parameters_assign(
    model: nn.Module, weights: list[tuple[str, torch.Tensor]], snapshot: Snapshot, fused: bool
) -> dict[str, set[int]]:
    """The ``assign`` parameters step: make the checkpoint's tensors *be* the parameters.

    safetensors hands out tensors backed by the memory-mapped file; where one already has the
    parameter's dtype and device, it replaces the parameter (as ``load_state_dict(assign=True)``
    does) and no byte is copied until something reads it. The fused ``qkv_proj`` still needs its
    q/k/v stacked into one new tensor; a dtype or device mismatch falls back to a copy.
    """
    params = dict(model.named_parameters())
    copies: list[tuple[str, torch.Tensor]] = []
    parts: dict[str, dict[int, tuple[str, torch.Tensor]]] = defaultdict(dict)
    loaded: dict[str, set[int]] = defaultdict(set)
    for key, tensor in weights:
        target, shard = _stacked_target(_strip(key)) if fused else (_strip(key), None)
        param = params.get(target)
        if param is None or (shard is None and not _assignable(tensor, param)):
            copies.append((key, tensor))  # load_parameters raises for unknown keys, as the copy step does
        elif shard is None:
            _check_shape(key, tensor, param, snapshot)
            _assign(model, target, tensor, param)
            loaded[target].add(0)
        else:
            parts[target][shard] = (key, tensor)
    for target, shards in parts.items():
        param = params[target]
        if len(shards) == len(STACKED_PARAMS) and all(_assignable(t, param) for _, t in shards.values()):
            for shard, (key, tensor) in shards.items():
                _load_stacked_shard(key, param, tensor, shard, snapshot, check_only=True)
            _assign(model, target, torch.cat([shards[i][1] for i in range(len(STACKED_PARAMS))]), param)
            loaded[target].update(shards)
        else:
            copies += list(shards.values())
    for name, shards in load_parameters(model, copies, snapshot, fused).items():
        loaded[name].update(shards)
    return loaded


def load_parameters_pinned(
    model: nn.Module, weights: list[tuple[str, torch.Tensor]], snapshot: Snapshot, fused: bool
) -> dict[str, set[int]]:
    """The ``pinned`` parameters step (GPU only): stage each host tensor in pinned memory, then copy it
    to the device without blocking, so host-side staging and device transfers overlap; the phase clock
    synchronises at the end of the step, so the figure includes every transfer."""
    staged = [(key, tensor.pin_memory() if tensor.device.type == "cpu" else tensor) for key, tensor in weights]
    return load_parameters(model, staged, snapshot, fused, non_blocking=True)


def load_parameters_fastsafetensors(
    model: nn.Module, weights: list[tuple[str, torch.Tensor]], snapshot: Snapshot, fused: bool
) -> dict[str, set[int]]:
    """The ``fastsafetensors`` parameters step: vLLM's optional loader library reads the shards.

    fastsafetensors reads whole shard files straight into one buffer on the parameters' device
    (through GPUDirect Storage where the machine has it; here ``nogds``, through host bounce
    buffers) instead of safetensors' per-tensor memory map; its tensors are then assigned, as in
    :func:`load_parameters_assign`, so the bytes are moved once. The tensors the read_checkpoint
    step listed serve only as the list of keys.
    """
    try:
        from fastsafetensors import fastsafe_open
    except ImportError:
        raise OmniLoaderError("variant fastsafetensors needs the fastsafetensors package (pip install "
                              "fastsafetensors)") from None
    device = next(model.parameters()).device
    files = sorted({str(snapshot.root / snapshot.weight_map[key]) for key, _ in weights})
    with fastsafe_open(files, device=str(device), nogds=True) as reader:
        entries = [(key, reader.get_tensor(key)) for key, _ in weights]
    return load_parameters_assign(model, entries, snapshot, fused)


def _assignable(tensor: torch.Tensor, param: torch.Tensor) -> bool:
    return tensor.dtype == param.dtype and tensor.device == param.device


def _assign(model: nn.Module, name: str, tensor: torch.Tensor, old: nn.Parameter) -> None:
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    if tuple(tensor.shape) != tuple(old.shape):
        raise CheckpointError(f"shape mismatch for {name}: checkpoint {tuple(tensor.shape)}, model {tuple(old.shape)}")
    setattr(module, leaf, nn.Parameter(tensor, requires_grad=old.requires_grad))


def load_buffers(
    model: nn.Module, persistent: dict[str, torch.Tensor], entries: list[tuple[str, torch.Tensor]], snapshot: Snapshot
) -> set[str]:
    """Reload every persistent buffer, as vLLM-Omni's ``reload_buffers_to_model`` does.

    Walks ``named_buffers()`` once more; each persistent buffer is copied from its set-aside
    checkpoint entry, or onto itself where the checkpoint has none, and counted as loaded in both
    cases (so "weights loaded" counts 721 whether or not the checkpoint saved ``inv_freq``).
    """
    saved = {}
    for key, tensor in entries:
        saved[_strip(key)] = (key, tensor)
    done = set()
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name not in persistent:
                continue
            key, tensor = saved.get(name, (None, persistent[name]))
            if key is not None:
                _check_shape(key, tensor, buf, snapshot)
            buf.copy_(tensor)
            done.add(name)
    return done


def load_speaker_dict(snapshot: Snapshot, device: torch.device) -> dict[str, Any]:
    try:
        return torch.load(snapshot.spk_dict_path, map_location=device, weights_only=True)
    except Exception as exc:  # one line: torch's weights-only message is paragraphs long
        from .errors import one_line

        raise CheckpointError(f"cannot read speaker dictionary {snapshot.spk_dict_path} ({one_line(str(exc), 160)}):"
                              " the file is damaged or not a torch dictionary; restore spk_dict.pt from the model "
                              "snapshot") from None


def check_all_loaded(model: nn.Module, loaded: dict[str, set[int]], fused: bool) -> None:
    """Every parameter (and every q/k/v shard of a fused one) must have come from the checkpoint."""
    for name, param in model.named_parameters():
        expected = {0, 1, 2} if fused and name.rsplit(".", 2)[-2] == "qkv_proj" else {0}
        missing = expected - loaded.get(name, set())
        if missing:
            parts = [STACKED_PARAMS[i][1] for i in sorted(missing)] if expected != {0} else []
            key = CHECKPOINT_PREFIX + (name.replace("qkv_proj", parts[0]) if parts else name)
            raise CheckpointError(f"checkpoint is missing key {key} (needed by parameter {name})")


def tensor_digest(model: nn.Module) -> tuple[str, int]:
    """SHA-256 over the name, dtype, shape and bytes of every parameter and buffer, sorted by name."""
    h = hashlib.sha256()
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    for name in sorted(tensors):
        t = tensors[name].detach()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        # hashlib reads the array's buffer in place: no 1.8 GB copy (and no page faults) per digest.
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy() if t.numel() else b"")
    return h.hexdigest(), len(tensors)


# --------------------------------------------------------------------------- the load


def load_token2wav(
    snapshot: Snapshot,
    variant: str | Variant = "optimized",
    layout: str = "vllm-omni",
    device: str | torch.device = "cpu",
    dtype: str = "float32",
    digest: bool = True,
    construct: str = "upstream",
    reference_copy: bool = False,
    clock: PhaseClock | None = None,
) -> tuple[nn.Module, LoadResult]:
    """Load Token2Wav from ``snapshot`` as vLLM-Omni's code2wav stage does, timing every phase.

    ``reference_copy`` adds, after the load and outside ``total``, a phase that copies the same
    tensors once more with a plain strict ``load_state_dict`` into the same (now resident) model:
    the yardstick that ``load_parameters`` is measured against, side by side in one process.
    ``clock`` lets a profiler observe the phase edges (a :class:`PhaseClock` subclass).
    ``variant`` is a built-in name (``baseline``, ``optimized``, ``assign``, ``pinned``) or a
    :class:`~omni_loader.variants.Variant` naming its own steps.
    """
    spec = variant_from(variant)
    dev = resolve_device(str(device))
    if spec.needs_gpu and dev.type != "cuda":
        raise OmniLoaderError(f"variant {spec.name} needs a GPU (--device cuda); this load is on {dev}")
    discover, load_params = spec.step("discovery"), spec.step("parameters")
    torch_dtype = _dtype(dtype)
    _modeling()  # a serving stage has imported its model code before it loads; keep imports out of the phases
    clock = clock or PhaseClock(dev)
    fused = layout == "vllm-omni"
    with clock.phase("total"):
        with clock.phase("construct"):
            model = build_model(snapshot.token2wav_config, layout=layout, device=dev, dtype=torch_dtype,
                                construct=construct)
        with clock.phase("read_checkpoint"):
            weights = list(iter_token2wav_weights(snapshot))
        with clock.phase("speaker_conditioning"):
            load_speaker_dict(snapshot, dev)
        with clock.phase("weight_loading"):
            with clock.phase("buffer_discovery"), count_state_dict_calls(model) as calls:
                persistent = discover(model)
            with clock.phase("split_buffers"):
                param_entries, buffer_entries = split_buffer_entries(weights, persistent)
            with clock.phase("load_parameters"):
                loaded = load_params(model, param_entries, snapshot, fused)
            with clock.phase("load_buffers"):
                loaded_buffers = load_buffers(model, persistent, buffer_entries, snapshot)
            with clock.phase("load_spk_dict"):
                load_speaker_dict(snapshot, torch.device("cpu"))
        with clock.phase("post_load"):
            check_all_loaded(model, loaded, fused)
            model.eval()
    if reference_copy:
        state = reference_state_dict(model, param_entries, buffer_entries, persistent, fused)
        with clock.phase("reference_copy"):
            model.load_state_dict(state, strict=True)
        del state
    del weights, param_entries, buffer_entries
    # A meta-device model holds no bytes to digest.
    hexdigest, count = tensor_digest(model) if digest and dev.type != "meta" else ("", 0)
    result = LoadResult(
        variant=spec.name,
        layout=layout,
        device=str(dev),
        dtype=dtype,
        construct=construct,
        phases=clock.records,
        state_dict_calls=calls.calls,
        weights_loaded=len(loaded) + len(loaded_buffers),
        persistent_buffers=sorted(persistent),
        digest=hexdigest,
        tensors_digested=count,
        loaded_names=set(loaded) | loaded_buffers,
    )
    return model, result


def reference_state_dict(
    model: nn.Module,
    param_entries: list[tuple[str, torch.Tensor]],
    buffer_entries: list[tuple[str, torch.Tensor]],
    persistent: dict[str, torch.Tensor],
    fused: bool,
) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors keyed as ``model.state_dict()`` keys them (q/k/v stacked for a fused
    layout, persistent buffers included), built before the reference copy is timed."""
    state: dict[str, torch.Tensor] = {}
    parts: dict[str, list[torch.Tensor | None]] = defaultdict(lambda: [None] * len(STACKED_PARAMS))
    for key, tensor in param_entries:
        target, shard = _stacked_target(_strip(key)) if fused else (_strip(key), None)
        if shard is None:
            state[target] = tensor
        else:
            parts[target][shard] = tensor
    state.update({name: torch.cat(tensors, dim=0) for name, tensors in parts.items()})
    state.update({name: buf.detach().clone() for name, buf in persistent.items()})
    state.update({_strip(key): tensor for key, tensor in buffer_entries})
    params = dict(model.named_parameters())
    return {k: v for k, v in state.items() if k in params or k in persistent}


# --------------------------------------------------------------------------- helpers


def _strip(key: str) -> str:
    return key[len(CHECKPOINT_PREFIX) :] if key.startswith(CHECKPOINT_PREFIX) else key


def _stacked_target(name: str) -> tuple[str, int | None]:
    for fused_name, part, shard in STACKED_PARAMS:
        if f".{part}." in name:
            return name.replace(f".{part}.", f".{fused_name}."), shard
    return name, None


def _check_shape(key: str, tensor: torch.Tensor, target: torch.Tensor, snapshot: Snapshot) -> None:
    if tuple(tensor.shape) != tuple(target.shape):
        raise CheckpointError(
            f"shape mismatch for {key} in {snapshot.root / snapshot.weight_map[key]}: "
            f"checkpoint {tuple(tensor.shape)}, model {tuple(target.shape)}"
        )


def _load_stacked_shard(key: str, param: torch.Tensor, tensor: torch.Tensor, shard: int, snapshot: Snapshot,
                        non_blocking: bool = False, check_only: bool = False) -> None:
    rows = param.shape[0] // len(STACKED_PARAMS)
    expected = (rows, *param.shape[1:])
    if tuple(tensor.shape) != expected:
        raise CheckpointError(
            f"shape mismatch for {key} in {snapshot.root / snapshot.weight_map[key]}: "
            f"checkpoint {tuple(tensor.shape)}, model shard {expected}"
        )
    if not check_only:
        param.data.narrow(0, shard * rows, rows).copy_(tensor, non_blocking=non_blocking)


def _dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise OmniLoaderError(f"--dtype {name!r} is not one of {', '.join(DTYPES)}") from None
