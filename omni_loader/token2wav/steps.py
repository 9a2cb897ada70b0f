"""The steps of Token2Wav's ``load_weights``, each a function a variant can name or replace.

Apart from :mod:`omni_loader.token2wav.loader` so that dependencies run one way: ``loader`` → ``variants`` →
``steps``. Every step takes the model, the checkpoint entries and the snapshot (to name a file in an error) and
returns what it loaded, so that ``post_load`` can check that nothing was missed.
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
from ..host.checkpoint_cache import CHECKPOINT_PREFIX


_LOG = logging.getLogger("omni_loader.load")

# (fused parameter, checkpoint part, shard index): vLLM-Omni's stacked q/k/v mapping.
STACKED_PARAMS = (("qkv_proj", "to_q", 0), ("qkv_proj", "to_k", 1), ("qkv_proj", "to_v", 2))
Entries = list[tuple[str, torch.Tensor]]  # checkpoint (key, tensor) entries
Loaded = dict[str, set[int]]  # parameter name -> shards loaded


def split_buffer_entries(weights: Entries, persistent: dict[str, torch.Tensor]) -> tuple[Entries, Entries]:
    """Separate checkpoint entries that are persistent buffers from the parameter entries."""
    params, buffers = [], []
    for key, tensor in weights:
        (buffers if key.removeprefix(CHECKPOINT_PREFIX) in persistent else params).append((key, tensor))
    return params, buffers


def load_parameters(model: nn.Module, weights: Entries, snapshot: Snapshot, fused: bool,
                    non_blocking: bool = False) -> Loaded:
    """The ``copy`` parameters step, as vLLM's default weight loader: a ``copy_`` that casts and moves each
    checkpoint tensor into its parameter; returns parameter name -> shards loaded."""
    params = dict(model.named_parameters())
    skippable = {n for n, _ in model.named_buffers()}  # e.g. inv_freq where it is not persistent
    loaded: Loaded = defaultdict(set)
    for key, tensor in weights:
        target, shard = _target(key, fused)
        if target not in params:
            if key.removeprefix(CHECKPOINT_PREFIX) in skippable:
                continue
            raise CheckpointError(f"checkpoint key {key} ({snapshot.root / snapshot.weight_map[key]}) matches no model "
                                  "parameter")
        param = params[target]
        if shard is None:
            _check_shape(key, tensor, param.shape, snapshot)
            param.data.copy_(tensor, non_blocking=non_blocking)
        else:
            _load_stacked_shard(key, param, tensor, shard, snapshot, non_blocking)
        loaded[target].add(0 if shard is None else shard)
    return loaded


def load_parameters_assign(model: nn.Module, weights: Entries, snapshot: Snapshot, fused: bool) -> Loaded:
    """The ``assign`` parameters step: a memory-mapped tensor of the parameter's dtype and device *becomes* it (as
    ``load_state_dict(assign=True)``), no byte copied until read; the fused ``qkv_proj`` is stacked, a mismatch
    copied."""
    params = dict(model.named_parameters())
    copies: Entries = []
    parts: dict[str, dict[int, tuple[str, torch.Tensor]]] = defaultdict(dict)
    loaded: Loaded = defaultdict(set)
    for key, tensor in weights:
        target, shard = _target(key, fused)
        param = params.get(target)
        if param is None or (shard is None and not _assignable(tensor, param)):
            copies.append((key, tensor))  # load_parameters raises for unknown keys, as the copy step does
        elif shard is None:
            _check_shape(key, tensor, param.shape, snapshot)
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


def load_parameters_pinned(model: nn.Module, weights: Entries, snapshot: Snapshot, fused: bool) -> Loaded:
    """The ``pinned`` parameters step (GPU only): each host tensor staged in pinned memory, then copied without
    blocking, so staging and transfers overlap (the phase clock synchronises at the step's end)."""
    staged = [(key, tensor.pin_memory() if tensor.device.type == "cpu" else tensor) for key, tensor in weights]
    return load_parameters(model, staged, snapshot, fused, non_blocking=True)


def load_parameters_fastsafetensors(model: nn.Module, weights: Entries, snapshot: Snapshot, fused: bool) -> Loaded:
    """The ``fastsafetensors`` parameters step: vLLM's optional loader library reads whole shards into one buffer
    on the parameters' device (``nogds``: through host bounce buffers), whose tensors are then assigned
    (:func:`load_parameters_assign`). The listed entries serve only as the keys.
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
    """``tensor`` becomes parameter ``name`` (its shape checked by the caller, shard by shard where stacked)."""
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    setattr(module, leaf, nn.Parameter(tensor, requires_grad=old.requires_grad))


def model_loaded_line(model: nn.Module, name: str = "Qwen2_5OmniToken2WavForConditionalGenerationVLLM") -> str:
    """The ``[Model Loaded] name=…, success=…, size=… MB, device=…`` line (MB = 1024² bytes) that 0.30.0's
    ``load_weights_without_buffers`` logs after one more ``named_parameters()`` walk, before the buffers reload.
    Its loop is upstream's (three ``.data`` reads a parameter): the phase times what the server does.
    """
    total = 0
    for _, param in model.named_parameters():
        if param is not None and param.data is not None:
            total += param.data.numel() * param.data.element_size()
    device = next(model.parameters()).device
    line = f"[Model Loaded] name={name}, success=True, size={total / (1024 ** 2):.2f} MB, device={device}"
    _LOG.info(line)
    return line


def load_buffers(model: nn.Module, persistent: dict[str, torch.Tensor], entries: Entries,
                 snapshot: Snapshot) -> set[str]:
    """Reload every persistent buffer, as vLLM-Omni's ``reload_buffers_to_model`` does: one more ``named_buffers()``
    walk, each copied from its checkpoint entry or onto itself, and counted as loaded either way."""
    saved = {key.removeprefix(CHECKPOINT_PREFIX): (key, tensor) for key, tensor in entries}
    done = set()
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name not in persistent:
                continue
            key, tensor = saved.get(name, (None, persistent[name]))
            if key is not None:
                _check_shape(key, tensor, buf.shape, snapshot)
            buf.copy_(tensor)
            done.add(name)
    return done


def hub_check(snapshot: Snapshot) -> Path:
    """Where ``spk_dict.pt`` lives, found as the outer ``load_weights`` finds it: for a snapshot found in a Hugging
    Face cache (``--model``), upstream's Hub path (a file lock named after the model, ``snapshot_download`` of
    ``*.pt``, a glob), always offline; for any other, one ``exists()``."""
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


# What the released checkpoint stores for Token2Wav (cast inside copy_ to the BigVGAN's bfloat16, as upstream).
CHECKPOINT_DTYPE = torch.float32


def check_dtypes(model: nn.Module, entries: Entries, fused: bool) -> None:
    """Every checkpoint tensor is float32 (the released checkpoint's) or the parameter's own dtype: another would
    be cast as silently, and the load would compare something else."""
    params = dict(model.named_parameters())
    for key, tensor in entries:
        param = params.get(_target(key, fused)[0])
        if param is not None and tensor.dtype not in (CHECKPOINT_DTYPE, param.dtype):
            dtypes = [str(d).removeprefix("torch.") for d in (tensor.dtype, CHECKPOINT_DTYPE, param.dtype)]
            raise CheckpointError(f"checkpoint tensor {key} is {dtypes[0]}, not what the model expects: the released "
                                  f"checkpoint stores {dtypes[1]}, which upstream casts to the parameter's "
                                  f"{dtypes[2]}; restore the shard from the model snapshot")


def check_all_loaded(model: nn.Module, loaded: Loaded, fused: bool) -> None:
    """Every parameter (and every q/k/v shard of a fused one) must have come from the checkpoint."""
    for name, param in model.named_parameters():
        expected = {0, 1, 2} if fused and name.rsplit(".", 2)[-2] == "qkv_proj" else {0}
        missing = expected - loaded.get(name, set())
        if missing:
            parts = [STACKED_PARAMS[i][1] for i in sorted(missing)] if expected != {0} else []
            key = CHECKPOINT_PREFIX + (name.replace("qkv_proj", parts[0]) if parts else name)
            raise CheckpointError(f"checkpoint is missing key {key} (needed by parameter {name})")


def reference_state_dict(model: nn.Module, param_entries: Entries, buffer_entries: Entries,
                         persistent: dict[str, torch.Tensor], fused: bool) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors keyed as ``model.state_dict()`` keys them (q/k/v stacked for a fused
    layout, persistent buffers included), built before the reference copy is timed."""
    state: dict[str, torch.Tensor] = {}
    parts: dict[str, list[torch.Tensor | None]] = defaultdict(lambda: [None] * len(STACKED_PARAMS))
    for key, tensor in param_entries:
        target, shard = _target(key, fused)
        if shard is None:
            state[target] = tensor
        else:
            parts[target][shard] = tensor
    state.update({name: torch.cat(tensors, dim=0) for name, tensors in parts.items()})
    state.update({name: buf.detach().clone() for name, buf in persistent.items()})
    state.update({key.removeprefix(CHECKPOINT_PREFIX): tensor for key, tensor in buffer_entries})
    params = dict(model.named_parameters())
    return {k: v for k, v in state.items() if k in params or k in persistent}


def _target(key: str, fused: bool) -> tuple[str, int | None]:
    """The parameter a checkpoint key loads into, and its q/k/v shard where the layout fuses them (else None)."""
    name = key.removeprefix(CHECKPOINT_PREFIX)
    for fused_name, part, shard in STACKED_PARAMS if fused else ():
        if f".{part}." in name:
            return name.replace(f".{part}.", f".{fused_name}."), shard
    return name, None


def _check_shape(key: str, tensor: torch.Tensor, shape: tuple[int, ...], snapshot: Snapshot,
                 what: str = "model") -> None:
    if tuple(tensor.shape) != tuple(shape):
        raise CheckpointError(f"shape mismatch for {key} in {snapshot.root / snapshot.weight_map[key]}: "
                              f"checkpoint {tuple(tensor.shape)}, {what} {tuple(shape)}")


def _load_stacked_shard(key: str, param: torch.Tensor, tensor: torch.Tensor, shard: int, snapshot: Snapshot,
                        non_blocking: bool = False, check_only: bool = False) -> None:
    rows = param.shape[0] // len(STACKED_PARAMS)
    _check_shape(key, tensor, (rows, *param.shape[1:]), snapshot, "model shard")
    if not check_only:
        param.data.narrow(0, shard * rows, rows).copy_(tensor, non_blocking=non_blocking)
