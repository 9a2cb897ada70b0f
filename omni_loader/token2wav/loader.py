"""vLLM-Omni's Token2Wav load path, one named function per step, read top to bottom.

The reference is the released vLLM-Omni 0.30.0 (``qwen2_5_omni_token2wav.py`` and the outer
Qwen2.5-Omni ``load_weights`` in ``qwen2_5_omni.py``). The two built-in variants of PR 7061 are two
releases of the same code (:data:`omni_loader.token2wav.variants.VARIANT_RELEASES`):

- ``baseline``: ``find_all_registers`` tests ``name in self.state_dict()`` for every named buffer,
  the rule of ``be81443c`` (December 2025) and of the releases before the fix (0.28.0 and earlier);
- ``optimized``: one ``named_modules()`` walk for ``_non_persistent_buffers_set``, one
  ``named_buffers()`` walk, no ``state_dict()``: the rule as 0.30.0 ships it. 0.28.0 and 0.30.0
  differ in this file by that method alone, and the outer ``load_weights`` not at all.

1. ``construct``            build the model under the stage dtype, directly on the device (the
                            vllm-omni layout: DiT float32, BigVGAN bfloat16, as 0.30.0 builds
                            them); with ``construct="resident"`` (default) every parameter is
                            written here, so that weight loading copies into resident memory as on
                            the GPU the PR measured (``upstream-cpu``: only those upstream's
                            constructors initialise, as on a CPU)
   ``outer_load_weights``   steps 2 to 4: the outer Qwen2.5-Omni ``load_weights``, the region vLLM's
                            ``Loading weights took X seconds`` line times (its counter starts as the
                            weight iterator is first pulled, and stops when ``load_weights`` returns)
2. ``read_checkpoint``      the outer Qwen2.5-Omni ``load_weights`` turns the lazy shard iterator
                            into lists (one per stage) before anything else
   ``hub_check``            for a model given as a Hub id (``--model``), ``spk_dict.pt`` is
                            resolved through ``huggingface_hub`` (a file lock, ``snapshot_download``
                            of ``*.pt``, then a glob); for a directory, one ``exists()``
3. ``speaker_conditioning`` the stage loads ``spk_dict.pt`` onto the device for conditioning
4. ``weight_loading``       Token2Wav's ``load_weights(weights, spk_dict_path)`` on that list (the
                            PR's "Token2Wav weight loading" row: its medians are given to the
                            microsecond, which vLLM's line, to the hundredth of a second, cannot give):
   a. ``buffer_discovery``     ``find_all_registers()``: the step the PR changed
   b. ``split_buffers``        checkpoint entries that are persistent buffers are set aside
   c. ``load_parameters``      copy each tensor into its parameter (q/k/v stacked into
                               ``qkv_proj`` for the vllm-omni layout; the dtype cast, float32 to
                               bfloat16 for the BigVGAN's 115 M elements; device move)
   d. ``model_loaded_size``    ``load_weights_without_buffers``' ``[Model Loaded] … size=… MB``
                               line: one more ``named_parameters()`` walk summing
                               ``numel() * element_size()`` (1,492.80 MB for the full model)
   e. ``load_buffers``         every persistent buffer is copied from its set-aside entry, or onto
                               itself where the checkpoint lacks it, and counted as loaded either
                               way (``named_buffers()`` walked again), as ``reload_buffers_to_model``
   f. ``load_spk_dict``        ``spk_dict.pt`` loaded a second time (default device: the CPU)
5. ``post_load``            every parameter loaded, from a tensor of the dtype the checkpoint should hold
                            (float32, or the parameter's own)? then ``eval()``

Where the kit still differs from vLLM-Omni 0.30.0, and why:

- The module tree is built from transformers' Qwen2.5-Omni classes, rewritten into vLLM-Omni's
  tree (persistent ``inv_freq``, no ``original_inv_freq``, fused ``qkv_proj``; 219 buffers, 720
  parameters, the same names and shapes): vLLM-Omni cannot be installed here (it pins
  ``transformers>=5.13,<5.15`` and a GPU stack). Upstream's own modules differ from transformers'
  in their forward code only; where the two dtypes meet (the vocoder's input, the anti-alias
  filters), hooks make the casts 0.30.0's forward makes.
- The BigVGAN is bfloat16 whatever the kit's ``--dtype``: 0.30.0 builds it under the stage's
  default dtype, ``auto`` (the checkpoint's bfloat16) in the Qwen2.5-Omni deploy file; a stage run
  with another ``--dtype`` would build it in that one unless the checkpoint's sub-config pins it
  (the released ``config.json`` is not read here). The DiT is float32 in both.
- Parameters are loaded by the kit's own short loop, not vLLM's ``AutoWeightsLoader`` (vLLM is not
  installed here); the loop does what that loader does for these tensors (stacked q/k/v shards,
  a default ``copy_`` that casts and moves) without its bookkeeping, and ``hf_to_vllm_mapper``'s
  ``model.`` prefix rename, which no ``token2wav.`` key matches, is not run.
- The ``[Model Loaded]`` line goes to the ``omni_loader.load`` logger (no handler by default), not
  to vLLM's: the walk is timed, the writing of a log line is not modelled.
- The fused ``qkv_proj`` is a plain ``nn.Linear``; upstream's ``QKVParallelLinear`` allocates its
  parameters with ``torch.empty`` and loads each shard through its ``weight_loader``.
- The Hub check is always offline (``local_files_only=True``): upstream's is offline only with
  ``HF_HUB_OFFLINE=1`` and otherwise asks the Hub, a network round trip inside its timed load that
  the kit does not model.
- The Hub check runs ``huggingface_hub.snapshot_download`` directly with a ``filelock`` lock of the
  same name, where upstream goes through vLLM's ``get_lock`` and its ``hf_api()`` wrapper (a progress
  bar class, ModelScope when ``VLLM_USE_MODELSCOPE``); ``--model`` resolves the id once before the
  load too (the kit's ``find_in_hub_cache``), where upstream's engine had resolved the config and the
  shards before it.
- The stage's other work between construction and loading (KV cache profiling, other stages on the
  same device) is absent: only Token2Wav's own steps are timed.
- ``resident`` (the default) also writes the fused ``qkv_proj``, which upstream allocates with
  ``torch.empty``: on a GPU that memory is resident when the caching allocator hands it out, on a CPU
  it is not, and a CPU virtual machine prices its ~69,000 first touches by the host, differently run
  to run. Writing it at construction puts the CPU load where the GPU load is (``upstream-cpu`` keeps
  upstream's CPU behaviour, for study).
- ``resident`` and ``upstream-cpu`` construction write zeros instead of random init: the same pages are touched in the
  same phase, without the 7 s of random number generation that would only inflate ``construct``.
- ``read_checkpoint`` lists only the ``token2wav.`` tensors (the stage's other lists are empty
  for a Token2Wav-only snapshot); under ``--read lazy`` (the default) the tensors stay memory-mapped, as
  safetensors gives them, and under ``--read eager`` each shard is read whole into memory first.
- The second ``spk_dict.pt`` load passes ``weights_only=True`` and ``map_location="cpu"``; 0.30.0
  calls ``torch.load(spk_dict_path)`` with neither: weights-only is torch's default since 2.6, and
  without ``map_location`` each tensor returns to the device it was saved from (the CPU for the
  kit's synthetic file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import xxhash
from torch import nn

from .checkpoint import Snapshot, iter_token2wav_weights
from ..host.devices import resolve_device
from .discovery import count_state_dict_calls
from .model import build_model, import_model_code
from ..names import DIGEST_ALGORITHM, DTYPE_NAMES, OUTER_LOAD_WEIGHTS
from .options import LoadOptions, option_fields
from .steps import (check_all_loaded, check_dtypes, hub_check, load_buffers, load_speaker_dict, model_loaded_line,
                    reference_state_dict, split_buffer_entries)
from ..host.procs import announce
from ..host.timing import PhaseClock, PhaseRecord
from .variants import Variant, refuse_off_gpu, variant_from

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


@dataclass
class LoadResult:
    """Everything one load reports: timings, counts, and a digest to compare loads by."""

    variant: str
    options: LoadOptions  # what the load was told, its device resolved (result.layout, .device... read it)
    phases: list[PhaseRecord]
    state_dict_calls: int
    weights_loaded: int
    persistent_buffers: list[str]
    digest: str
    tensors_digested: int
    loaded_names: set[str] = field(default_factory=set, repr=False)
    # vLLM-Omni's "[Model Loaded] name=…, success=…, size=… MB, device=…" line for this load
    model_loaded: str = ""
    # the dtype of each Token2Wav submodule's parameters ("code2wav_dit_model": "float32", …)
    parameter_dtypes: dict[str, str] = field(default_factory=dict)

    def phase_seconds(self) -> dict[str, float]:
        return {p.name: p.seconds for p in self.phases}

    def to_dict(self) -> dict[str, Any]:
        peak = max((p.rss_peak_bytes for p in self.phases), default=0)
        device_peaks = [p.device_peak_bytes for p in self.phases if p.device_peak_bytes is not None]
        return {
            "variant": self.variant,
            **self.options.to_dict(),  # every load option, by its name
            "phases": self.phase_seconds(),
            "phase_records": [p.to_dict() for p in self.phases],
            "state_dict_calls": self.state_dict_calls,
            "weights_loaded": self.weights_loaded,
            "persistent_buffers": self.persistent_buffers,
            "digest": self.digest,
            "tensors_digested": self.tensors_digested,
            "rss_peak_bytes": peak,
            "device_peak_bytes": max(device_peaks) if device_peaks else None,
            "model_loaded": self.model_loaded,
            "parameter_dtypes": dict(self.parameter_dtypes),
        }


for _name in option_fields(LoadOptions):  # result.layout reads result.options.layout, for every load option
    setattr(LoadResult, _name, property(lambda self, name=_name: getattr(self.options, name)))


# --------------------------------------------------------------------------- steps


def tensor_digest(model: nn.Module) -> tuple[str, int]:
    """``xxh3-128:<hex>`` over the name, dtype, shape and bytes of every parameter and buffer, sorted by name.

    Computed after the timed phases of every run, so its cost is not in any figure, but it is in
    the benchmark's wall time: xxh3 keeps that at ~0.07 s per full-size load (SHA-256: ~1 s).
    """
    h = xxhash.xxh3_128()
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    for name in sorted(tensors):
        t = tensors[name].detach()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        # xxhash reads the array's buffer in place: no 1.8 GB copy (and no page faults) per digest.
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy() if t.numel() else b"")
    return f"{DIGEST_ALGORITHM}:{h.hexdigest()}", len(tensors)


# --------------------------------------------------------------------------- the load


def load_token2wav(
    snapshot: Snapshot,
    variant: str | Variant = "optimized",
    options: LoadOptions | None = None,
    *,
    digest: bool = True,
    reference_copy: bool = False,
    clock: PhaseClock | None = None,
    **overrides: Any,
) -> tuple[nn.Module, LoadResult]:
    """Load Token2Wav from ``snapshot`` as vLLM-Omni's code2wav stage does, timing every phase.

    ``reference_copy`` adds, after the load and outside ``total``, a phase that copies the same
    tensors once more with a plain strict ``load_state_dict`` into the same (now resident) model:
    the yardstick that ``load_parameters`` is measured against, side by side in one process.
    ``clock`` lets a profiler observe the phase edges (a :class:`PhaseClock` subclass).
    ``variant`` is a built-in name (``baseline``, ``optimized``, ``assign``, ``pinned``) or a
    :class:`~omni_loader.token2wav.variants.Variant` naming its own steps. ``options`` (a
    :class:`~omni_loader.token2wav.options.LoadOptions`) sets the layout, device, dtype, construction mode and
    read strategy; ``overrides`` named after its fields (``layout=``, ``read=``...) change single fields of it.
    """
    opts = (options or LoadOptions()).replace(**{k: None if v is None else str(v) for k, v in overrides.items()})
    layout, dtype, construct = opts.layout, opts.dtype, opts.construct
    spec = variant_from(variant)
    dev = resolve_device(opts.device)
    refuse_off_gpu(spec, str(dev))
    discover, load_params = spec.step("discovery"), spec.step("parameters")
    torch_dtype = DTYPES[dtype]  # checked by LoadOptions
    import_model_code()  # a serving stage has imported its model code before it loads; keep imports out of the phases
    clock = clock or PhaseClock(dev)
    fused = layout == "vllm-omni"
    with clock.phase("total"):  # the tree names.PHASES declares (test_loader holds the two alike)
        with clock.phase("construct"):
            model = build_model(snapshot.token2wav_config, layout=layout, device=dev, dtype=torch_dtype,
                                construct=construct)
        with clock.phase(OUTER_LOAD_WEIGHTS):  # the region of vLLM's "Loading weights took" (see names)
            with clock.phase("read_checkpoint"):
                weights = list(iter_token2wav_weights(snapshot, opts.read))
            with clock.phase("hub_check"):
                hub_check(snapshot)
            with clock.phase("speaker_conditioning"):
                load_speaker_dict(snapshot, dev)
            with clock.phase("weight_loading"):
                with clock.phase("buffer_discovery"), count_state_dict_calls(model) as calls:
                    persistent = discover(model)
                with clock.phase("split_buffers"):
                    param_entries, buffer_entries = split_buffer_entries(weights, persistent)
                with clock.phase("load_parameters"):
                    loaded = load_params(model, param_entries, snapshot, fused)
                with clock.phase("model_loaded_size"):
                    model_loaded = model_loaded_line(model)
                with clock.phase("load_buffers"):
                    loaded_buffers = load_buffers(model, persistent, buffer_entries, snapshot)
                with clock.phase("load_spk_dict"):
                    load_speaker_dict(snapshot, torch.device("cpu"))
        with clock.phase("post_load"):
            check_all_loaded(model, loaded, fused)
            check_dtypes(model, param_entries, fused)
            model.eval()
    if reference_copy:
        state = reference_state_dict(model, param_entries, buffer_entries, persistent, fused)
        with clock.phase("reference_copy"):
            model.load_state_dict(state, strict=True)
        del state
    del weights, param_entries, buffer_entries
    # A meta-device model holds no bytes to digest.
    if digest and dev.type != "meta":
        announce("digest")
    hexdigest, count = tensor_digest(model) if digest and dev.type != "meta" else ("", 0)
    result = LoadResult(
        variant=spec.name,
        options=opts.replace(device=str(dev)),
        phases=clock.records,
        state_dict_calls=calls.calls,
        weights_loaded=len(loaded) + len(loaded_buffers),
        persistent_buffers=sorted(persistent),
        digest=hexdigest,
        tensors_digested=count,
        loaded_names=set(loaded) | loaded_buffers,
        model_loaded=model_loaded,
        parameter_dtypes={name: str(next(sub.parameters()).dtype).removeprefix("torch.")
                          for name, sub in model.named_children() if any(True for _ in sub.parameters())},
    )
    return model, result


# --------------------------------------------------------------------------- helpers
