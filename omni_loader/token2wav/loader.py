"""vLLM-Omni's Token2Wav load path, one named function per step, read top to bottom.

The reference is the released vLLM-Omni 0.30.0 (``qwen2_5_omni_token2wav.py`` and the outer Qwen2.5-Omni
``load_weights`` in ``qwen2_5_omni.py``). The PR's two built-in variants are two releases of the same code
(:data:`omni_loader.token2wav.variants.VARIANT_RELEASES`): ``baseline`` tests ``name in self.state_dict()``
per named buffer (the rule of ``be81443c``, December 2025, and of 0.28.0 and earlier); ``optimized`` walks
``named_modules()`` once for ``_non_persistent_buffers_set`` and ``named_buffers()`` once, as 0.30.0 ships it
(0.28.0 and 0.30.0 differ in this file by that method alone).

1. ``construct``            build the model under the stage dtype on the device (vllm-omni layout: DiT
                            float32, BigVGAN bfloat16); ``construct="resident"`` (default) writes every
                            parameter here, so weight loading copies into resident memory as on the GPU the
                            PR measured (``upstream-cpu``: only what upstream's constructors initialise)
   ``outer_load_weights``   steps 2 to 4, the region vLLM's ``Loading weights took X seconds`` times
2. ``read_checkpoint``      the lazy shard iterator turned into lists, before anything else
   ``hub_check``            a Hub id (``--model``): ``spk_dict.pt`` resolved through ``huggingface_hub``
                            (a file lock, ``snapshot_download`` of ``*.pt``, a glob); a directory: one ``exists()``
3. ``speaker_conditioning`` ``spk_dict.pt`` loaded onto the device
4. ``weight_loading``       Token2Wav's ``load_weights`` (the PR's "Token2Wav weight loading" row):
   a. ``buffer_discovery``     ``find_all_registers()``: the step the PR changed
   b. ``split_buffers``        checkpoint entries that are persistent buffers set aside
   c. ``load_parameters``      each tensor copied into its parameter (q/k/v stacked into ``qkv_proj`` in the
                               vllm-omni layout; the BigVGAN's float32 to bfloat16 cast; device move)
   d. ``model_loaded_size``    the ``[Model Loaded] … size=… MB`` line: one more ``named_parameters()`` walk
   e. ``load_buffers``         each persistent buffer copied from its entry, or onto itself where the
                               checkpoint lacks it, as ``reload_buffers_to_model``
   f. ``load_spk_dict``        ``spk_dict.pt`` loaded a second time (onto the CPU)
5. ``post_load``            every parameter loaded, from a tensor of an expected dtype? then ``eval()``

Where the kit still differs from vLLM-Omni 0.30.0, and why:

- The tree is transformers' Qwen2.5-Omni classes rewritten into vLLM-Omni's (persistent ``inv_freq``, no
  ``original_inv_freq``, fused ``qkv_proj``; 219 buffers, 720 parameters): vLLM-Omni pins
  ``transformers>=5.13,<5.15`` and a GPU stack. Upstream's modules differ in forward code only; hooks make
  the casts 0.30.0's forward makes where the two dtypes meet.
- The BigVGAN is bfloat16 whatever ``--dtype``: 0.30.0 builds it under the stage's default dtype, ``auto``
  (bfloat16) in the deploy file. The DiT is float32 in both.
- Parameters are loaded by the kit's own loop, not vLLM's ``AutoWeightsLoader``: the same stacked q/k/v
  shards and casting ``copy_`` without its bookkeeping (``hf_to_vllm_mapper``'s ``model.`` rename matches
  no ``token2wav.`` key). The fused ``qkv_proj`` is a plain ``nn.Linear``, not ``QKVParallelLinear``.
- The ``[Model Loaded]`` line goes to the ``omni_loader.load`` logger (no handler by default).
- The Hub check is always offline (upstream asks the Hub unless ``HF_HUB_OFFLINE=1``) and calls
  ``snapshot_download`` under a ``filelock`` of the same name, not vLLM's ``get_lock``/``hf_api()``;
  ``--model`` resolves the id once before the load too, as upstream's engine does.
- The stage's other work (KV cache profiling, other stages) is absent: only Token2Wav's steps are timed.
- ``resident`` also writes the fused ``qkv_proj``, which upstream leaves ``torch.empty``: resident on a GPU,
  not on a CPU, where a virtual machine prices its ~69,000 first touches differently run to run.
- ``resident`` and ``upstream-cpu`` write zeros, not random init: the same pages in the same phase, without
  7 s of random numbers in ``construct``.
- ``read_checkpoint`` lists only the ``token2wav.`` tensors (memory-mapped under ``--read lazy``, read whole
  under ``--read eager``).
- The second ``spk_dict.pt`` load passes ``weights_only=True`` (torch's default since 2.6) and
  ``map_location="cpu"`` (where the synthetic file's tensors return anyway); 0.30.0 passes neither.
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
from ..names import DIGEST_ALGORITHM, OUTER_LOAD_WEIGHTS
from .options import LoadOptions, option_fields
from .steps import (check_all_loaded, check_dtypes, hub_check, load_buffers, load_speaker_dict, model_loaded_line,
                    reference_state_dict, split_buffer_entries)
from ..host.procs import announce
from ..host.timing import PhaseClock, PhaseRecord
from .variants import Variant, refuse_off_gpu, variant_from


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


def tensor_digest(model: nn.Module) -> tuple[str, int]:
    """``xxh3-128:<hex>`` over the name, dtype, shape and bytes of every parameter and buffer, sorted by name:
    after the timed phases, ~0.07 s per full-size load (SHA-256: ~1 s)."""
    h = xxhash.xxh3_128()
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    for name in sorted(tensors):
        t = tensors[name].detach()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        # xxhash reads the array's buffer in place: no 1.8 GB copy (and no page faults) per digest.
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy() if t.numel() else b"")
    return f"{DIGEST_ALGORITHM}:{h.hexdigest()}", len(tensors)


def load_token2wav(snapshot: Snapshot, variant: str | Variant = "optimized", options: LoadOptions | None = None, *,
                   digest: bool = True, reference_copy: bool = False, clock: PhaseClock | None = None,
                   **overrides: Any) -> tuple[nn.Module, LoadResult]:
    """Load Token2Wav from ``snapshot`` as vLLM-Omni's code2wav stage does, timing every phase.

    ``variant``: a built-in name or a :class:`~.variants.Variant`; ``options``: :class:`~.options.LoadOptions`,
    single fields changed by ``overrides`` (``read=``...); ``reference_copy``: outside ``total``, a strict
    ``load_state_dict`` of the same tensors, the yardstick for ``load_parameters``; ``clock``: a :class:`PhaseClock`."""
    opts = (options or LoadOptions()).replace(**{k: None if v is None else str(v) for k, v in overrides.items()})
    layout, construct, torch_dtype = opts.layout, opts.construct, getattr(torch, opts.dtype)  # checked by LoadOptions
    spec = variant_from(variant)
    dev = resolve_device(opts.device)
    refuse_off_gpu(spec, str(dev))
    discover, load_params = spec.step("discovery"), spec.step("parameters")
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
    hexdigest, count = "", 0
    if digest and dev.type != "meta":  # a meta-device model holds no bytes to digest
        announce("digest")
        hexdigest, count = tensor_digest(model)
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
