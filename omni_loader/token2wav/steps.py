"""The steps of Token2Wav's ``load_weights``, each a function a variant can name or replace.

Why apart from :mod:`omni_loader.token2wav.loader`: a :class:`~omni_loader.token2wav.variants.Variant` names its steps
(``builtin:assign``, ``mypkg.mod:fn``), and the loader runs whichever variant it is given. With the
steps here, the dependencies run one way: ``loader`` → ``variants`` → ``steps``. Every step takes
the model, the checkpoint entries and the snapshot (to name a file in an error) and returns what it
loaded, so that ``post_load`` can check that nothing was missed.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .checkpoint import Snapshot
from ..errors import CheckpointError, OmniLoaderError
from .model import CHECKPOINT_PREFIX


_LOG = logging.getLogger("omni_loader.load")

# (fused parameter, checkpoint part, shard index): vLLM-Omni's stacked q/k/v mapping.
STACKED_PARAMS = (("qkv_proj", "to_q", 0), ("qkv_proj", "to_k", 1), ("qkv_proj", "to_v", 2))


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

    This is the ``copy`` implementation of the ``parameters`` step (see :mod:`omni_loader.token2wav.variants`):
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


def model_loaded_line(model: nn.Module, name: str = "Qwen2_5OmniToken2WavForConditionalGenerationVLLM") -> str:
    """The summary vLLM-Omni logs after the parameters are loaded, before the buffers are reloaded.

    0.30.0's ``load_weights_without_buffers`` walks ``named_parameters()`` once more, sums
    ``numel() * element_size()`` and logs ``[Model Loaded] name=…, success=…, size=… MB, device=…``
    (MB = 1024² bytes); the code2wav stage's logs show ``size=1492.80 MB``. The walk and the line are
    timed as their own phase, inside weight loading, where upstream runs them.
    """
    total = 0
    for _, param in model.named_parameters():
        if param is not None and param.data is not None:
            total += param.data.numel() * param.data.element_size()
    device = next(model.parameters()).device
    line = f"[Model Loaded] name={name}, success=True, size={total / (1024 ** 2):.2f} MB, device={device}"
    _LOG.info(line)
    return line


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


def hub_check(snapshot: Snapshot) -> Path:
    """Where ``spk_dict.pt`` lives, found as the outer Qwen2.5-Omni ``load_weights`` finds it.

    vLLM-Omni 0.30.0 takes the model path as it is when it exists on disk; a Hub id goes through
    ``download_weights_from_hf_specific(model, download_dir, allow_patterns=["*.pt"])``: a file lock
    named after the model, ``snapshot_download`` of the ``*.pt`` files (offline only when
    ``HF_HUB_OFFLINE`` is set: otherwise a request to the Hub, inside the timed load), and a glob of
    the folder for a match. A snapshot the kit found in a Hugging Face cache (``--model``) takes
    that path, through the real ``huggingface_hub``, against the same cache, always offline (as
    upstream with ``HF_HUB_OFFLINE=1``: no request leaves a timed load); any other snapshot is a
    directory, and costs one ``exists()``.
    """
    if snapshot.source != "hub-cache" or not snapshot.model_id:
        snapshot.root.exists()
        return snapshot.root
    import hashlib
    import tempfile

    from filelock import FileLock
    from huggingface_hub import snapshot_download

    cache_dir = snapshot.root.parents[2]  # <cache>/models--org--name/snapshots/<revision>
    name = snapshot.model_id.replace("/", "-")
    lock = Path(tempfile.gettempdir()) / f"{hashlib.sha256(name.encode()).hexdigest()}{name}.lock"
    with FileLock(str(lock), mode=0o666):
        folder = Path(snapshot_download(snapshot.model_id, allow_patterns="*.pt", cache_dir=str(cache_dir),
                                        local_files_only=True))
        if not any(folder.glob("*.pt")):
            raise CheckpointError(f"no *.pt file in {folder}: the speaker dictionary of {snapshot.model_id} is missing")
    return folder


def load_speaker_dict(snapshot: Snapshot, device: torch.device) -> dict[str, Any]:
    try:
        return torch.load(snapshot.spk_dict_path, map_location=device, weights_only=True)
    except Exception as exc:  # one line: torch's weights-only message is paragraphs long
        from ..errors import one_line
        from .checkpoint import read_failure

        raise read_failure(snapshot.spk_dict_path, exc, "speaker dictionary") or CheckpointError(
            f"cannot read speaker dictionary {snapshot.spk_dict_path} ({one_line(str(exc), 160)}): the file is damaged "
            "or not a torch dictionary; restore spk_dict.pt from the model snapshot") from None


# What the released checkpoint stores for Token2Wav: float32 (then cast to the parameter's dtype inside copy_,
# as upstream does: bfloat16 for the BigVGAN). A tensor in the parameter's own dtype needs no cast either.
CHECKPOINT_DTYPE = torch.float32


def check_dtypes(model: nn.Module, entries: list[tuple[str, torch.Tensor]], fused: bool) -> None:
    """Every checkpoint tensor holds what the model expects: float32 (the released checkpoint's dtype, which
    upstream casts where the parameter differs) or the parameter's own dtype. Another dtype (float16, an
    integer type) would be cast as silently as an expected one, and the load would compare something else."""
    params = dict(model.named_parameters())
    for key, tensor in entries:
        name = _strip(key)
        param = params.get(_stacked_target(name)[0] if fused else name)
        if param is not None and tensor.dtype not in (CHECKPOINT_DTYPE, param.dtype):
            raise CheckpointError(
                f"checkpoint tensor {key} is {str(tensor.dtype).removeprefix('torch.')}, not what the model expects: "
                f"the released checkpoint stores {str(CHECKPOINT_DTYPE).removeprefix('torch.')}, which upstream casts "
                f"to the parameter's {str(param.dtype).removeprefix('torch.')}; restore the shard from the model "
                "snapshot")


def check_all_loaded(model: nn.Module, loaded: dict[str, set[int]], fused: bool) -> None:
    """Every parameter (and every q/k/v shard of a fused one) must have come from the checkpoint."""
    for name, param in model.named_parameters():
        expected = {0, 1, 2} if fused and name.rsplit(".", 2)[-2] == "qkv_proj" else {0}
        missing = expected - loaded.get(name, set())
        if missing:
            parts = [STACKED_PARAMS[i][1] for i in sorted(missing)] if expected != {0} else []
            key = CHECKPOINT_PREFIX + (name.replace("qkv_proj", parts[0]) if parts else name)
            raise CheckpointError(f"checkpoint is missing key {key} (needed by parameter {name})")


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
