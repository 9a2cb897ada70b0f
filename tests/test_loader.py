"""The Token2Wav load path: both variants, both layouts, and that the loaded model computes the same thing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import safetensors.torch
import torch

from omni_loader.bench import worker
from omni_loader.token2wav.checkpoint import iter_token2wav_weights, open_snapshot, synthesize
from omni_loader.errors import CheckpointError, OmniLoaderError
from omni_loader.names import LEAF_PHASES, PHASE_TREE, PHASES
from omni_loader.token2wav.loader import load_token2wav, tensor_digest
from omni_loader.token2wav.model import build_model

INV_FREQ = "code2wav_dit_model.rotary_embed.inv_freq"
PREFIX = "token2wav."
# A bfloat16 vocoder against a float32 one, on the synthetic snapshot's small outputs (~1e-2).
BF16_RTOL, BF16_ATOL = 5e-2, 1e-3


@pytest.fixture(scope="module")
def loads(tiny_snapshot: Path) -> dict:
    """(variant, layout) -> (model, LoadResult), each loaded once from the shared tiny snapshot."""
    snap = open_snapshot(tiny_snapshot)
    return {
        (variant, layout): load_token2wav(snap, variant, layout=layout)
        for variant in ("baseline", "optimized")
        for layout in ("vllm-omni", "transformers")
    }


@pytest.fixture(scope="module")
def checkpoint(tiny_snapshot: Path) -> dict[str, torch.Tensor]:
    return dict(iter_token2wav_weights(open_snapshot(tiny_snapshot)))


# --------------------------------------------------------------------------- counts and digests


@pytest.mark.parametrize("layout, n_buffers", [("vllm-omni", 51), ("transformers", 52)])
def test_state_dict_calls(loads: dict, layout: str, n_buffers: int) -> None:
    model, base = loads["baseline", layout]
    _, opt = loads["optimized", layout]
    assert sum(1 for _ in model.named_buffers()) == n_buffers
    assert base.state_dict_calls == n_buffers
    assert opt.state_dict_calls == 0


def test_vllm_omni_weights_loaded(loads: dict) -> None:
    model, base = loads["baseline", "vllm-omni"]
    _, opt = loads["optimized", "vllm-omni"]
    params = {n for n, _ in model.named_parameters()}
    assert base.weights_loaded == opt.weights_loaded == len(params) + 1 == 187
    assert base.loaded_names == opt.loaded_names == params | {INV_FREQ}
    assert base.persistent_buffers == opt.persistent_buffers == [INV_FREQ]


def test_transformers_weights_loaded(loads: dict) -> None:
    model, base = loads["baseline", "transformers"]
    _, opt = loads["optimized", "transformers"]
    params = {n for n, _ in model.named_parameters()}
    assert base.weights_loaded == opt.weights_loaded == len(params) == 198
    assert base.persistent_buffers == opt.persistent_buffers == []


@pytest.mark.parametrize("layout", ["vllm-omni", "transformers"])
def test_variants_give_the_same_model(loads: dict, layout: str) -> None:
    m_base, base = loads["baseline", layout]
    m_opt, opt = loads["optimized", layout]
    assert base.digest.startswith("xxh3-128:") and len(base.digest) == len("xxh3-128:") + 32
    assert base.digest == opt.digest
    assert base.tensors_digested == opt.tensors_digested
    assert base.tensors_digested == sum(1 for _ in m_base.named_parameters()) + sum(1 for _ in m_base.named_buffers())
    assert tensor_digest(m_opt) == (opt.digest, opt.tensors_digested)
    # the digest sees the values: one changed element changes it
    param = next(m_opt.parameters())
    saved = param.detach().clone()
    with torch.no_grad():
        param.view(-1)[0] += 1
    try:
        assert tensor_digest(m_opt)[0] != opt.digest
    finally:
        with torch.no_grad():
            param.copy_(saved)  # exact restore: the module-scoped models are shared
    assert tensor_digest(m_opt)[0] == opt.digest


def test_layouts_have_different_digests(loads: dict) -> None:
    assert loads["optimized", "vllm-omni"][1].digest != loads["optimized", "transformers"][1].digest


def test_loads_are_reproducible(tiny_snapshot: Path, loads: dict) -> None:
    """The model is built uninitialised; a second load must not depend on what memory held."""
    _, again = load_token2wav(open_snapshot(tiny_snapshot), "optimized")
    assert again.digest == loads["optimized", "vllm-omni"][1].digest


def test_sharded_snapshot_loads_to_the_same_model(tmp_path: Path, loads: dict) -> None:
    sharded = synthesize(tmp_path / "sharded", size="tiny", seed=0, shard_bytes=150_000)
    snap = open_snapshot(sharded)
    assert len(snap.shards) > 2
    _, result = load_token2wav(snap, "baseline")
    assert result.digest == loads["baseline", "vllm-omni"][1].digest


# --------------------------------------------------------------------------- phases


@pytest.mark.parametrize("key", [(v, lay) for v in ("baseline", "optimized") for lay in ("vllm-omni", "transformers")])
def test_phases(loads: dict, key: tuple[str, str]) -> None:
    _, result = loads[key]
    seconds = result.phase_seconds()
    assert set(LEAF_PHASES) | {"weight_loading", "outer_load_weights", "total"} <= set(seconds)
    assert seconds["total"] == max(seconds.values())  # the outermost phase spans every other one
    parents = {p.name: p.parent for p in result.phases}
    assert parents["total"] is None
    children = [p for p in result.phases if p.parent == "weight_loading"]
    assert [p.name for p in children] == [
        "buffer_discovery", "split_buffers", "load_parameters", "model_loaded_size", "load_buffers", "load_spk_dict"
    ]
    assert sum(p.seconds for p in children) <= seconds["weight_loading"]
    top = [p.name for p in result.phases if p.parent == "total"]
    assert top == ["construct", "outer_load_weights", "post_load"]  # vLLM's "Loading weights took" region between
    outer = [p for p in result.phases if p.parent == "outer_load_weights"]
    # Upstream's order: the outer load_weights lists the checkpoint before speaker conditioning.
    assert [p.name for p in outer] == ["read_checkpoint", "hub_check", "speaker_conditioning", "weight_loading"]
    assert sum(p.seconds for p in outer) <= seconds["outer_load_weights"] <= seconds["total"]
    assert sum(seconds[p] for p in top) <= seconds["total"]
    assert all(p.rss_peak_bytes > 0 and p.device_peak_bytes is None for p in result.phases)


def test_the_loader_times_the_declared_phase_tree(tiny_snapshot: Path, loads: dict) -> None:
    """``names.PHASES`` is the loader's ``with clock.phase`` nesting: each phase under its parent, in the order they end."""
    parents = {p.name: p.parent for p in PHASES}
    declared = [(name, parents[name]) for name in PHASE_TREE.ended()]
    _, result = load_token2wav(open_snapshot(tiny_snapshot), "optimized", reference_copy=True)
    assert [(p.name, p.parent) for p in result.phases] == declared
    for _, result in loads.values():  # without the yardstick, the same tree less its phase
        assert [(p.name, p.parent) for p in result.phases] == [d for d in declared if d[0] != "reference_copy"]


def test_to_dict_is_json(loads: dict) -> None:
    data = json.loads(json.dumps(loads["baseline", "vllm-omni"][1].to_dict()))
    assert {"variant", "layout", "device", "dtype", "phases", "phase_records", "state_dict_calls", "weights_loaded",
            "persistent_buffers", "digest", "tensors_digested", "rss_peak_bytes", "device_peak_bytes"} <= set(data)
    assert data["variant"] == "baseline" and data["device"] == "cpu" and data["device_peak_bytes"] is None
    assert len(data["phase_records"]) == len(data["phases"])


# --------------------------------------------------------------------------- the values that were loaded


def test_transformers_layout_holds_the_checkpoint(loads: dict, checkpoint: dict[str, torch.Tensor]) -> None:
    model, _ = loads["optimized", "transformers"]
    params = dict(model.named_parameters())
    assert {PREFIX + n for n in params} == set(checkpoint) - {PREFIX + INV_FREQ}
    for name, param in params.items():
        assert torch.equal(param, checkpoint[PREFIX + name]), name


def test_fused_qkv_is_the_stacked_checkpoint(loads: dict, checkpoint: dict[str, torch.Tensor]) -> None:
    fused, _ = loads["optimized", "vllm-omni"]
    unfused, _ = loads["optimized", "transformers"]
    blocks = list(zip(fused.code2wav_dit_model.transformer_blocks, unfused.code2wav_dit_model.transformer_blocks))
    assert blocks
    for i, (fb, ub) in enumerate(blocks):
        for kind in ("weight", "bias"):
            parts = [checkpoint[f"{PREFIX}code2wav_dit_model.transformer_blocks.{i}.attn.{p}.{kind}"]
                     for p in ("to_q", "to_k", "to_v")]
            fused_t = getattr(fb.attn.qkv_proj, kind)
            assert torch.equal(fused_t, torch.cat(parts))
            unfused_parts = [getattr(getattr(ub.attn, p), kind) for p in ("to_q", "to_k", "to_v")]
            assert torch.equal(fused_t, torch.cat(unfused_parts))
    # every other parameter is shared one to one (the BigVGAN's cast to bfloat16, as upstream holds it)
    other = {n: p for n, p in fused.named_parameters() if ".qkv_proj." not in n}
    assert {p.dtype for p in other.values()} == {torch.float32, torch.bfloat16}
    for name, param in other.items():
        assert torch.equal(param, checkpoint[PREFIX + name].to(param.dtype)), name


def test_buffers_match_across_layouts(loads: dict) -> None:
    fused, _ = loads["optimized", "vllm-omni"]
    unfused, _ = loads["optimized", "transformers"]
    a, b = dict(fused.named_buffers()), dict(unfused.named_buffers())
    assert set(b) - set(a) == {"code2wav_dit_model.rotary_embed.original_inv_freq"}
    for name, buf in a.items():
        if name.startswith("code2wav_bigvgan_model."):
            # the same constructor under the vocoder's bfloat16 default dtype, as upstream's: the filter's
            # time indices (arange + 0.5) take the default dtype, so its sinc is rounded to bfloat16
            torch.testing.assert_close(buf, b[name], rtol=0, atol=2e-3)
            assert not torch.equal(buf, b[name]) or buf.abs().max() == 0, name
        else:
            assert torch.equal(buf, b[name]), name
    assert all(buf.dtype == torch.float32 for name, buf in a.items() if name.endswith(".filter"))


def test_dit_forward_is_equal_across_layouts(loads: dict) -> None:
    fused, _ = loads["optimized", "vllm-omni"]
    unfused, _ = loads["optimized", "transformers"]
    dit_cfg = fused.config.dit_config
    gen = torch.Generator().manual_seed(1)
    frames = 2 * 8
    inputs = {
        "hidden_states": torch.randn(1, frames, dit_cfg.mel_dim, generator=gen),
        "condition_vector": torch.randn(1, 30, dit_cfg.mel_dim, generator=gen),
        "speaker_embedding": torch.randn(1, frames, dit_cfg.enc_emb_dim, generator=gen),
        "quantized_code": torch.randint(0, dit_cfg.num_embeds, (1, 8), generator=gen),
        "time_step": torch.tensor(0.3),
    }
    with torch.no_grad():
        out_f = fused.code2wav_dit_model(**inputs)
        out_u = unfused.code2wav_dit_model(**inputs)
    assert out_f.shape == (2, frames, dit_cfg.mel_dim)  # conditioned + unconditioned halves
    assert out_f.abs().sum() > 0
    torch.testing.assert_close(out_f, out_u)


def test_token2wav_forward_is_equal_across_layouts(loads: dict, tiny_snapshot: Path) -> None:
    fused, _ = loads["optimized", "vllm-omni"]
    unfused, _ = loads["optimized", "transformers"]
    spk = torch.load(tiny_snapshot / "spk_dict.pt", weights_only=True)["Ethan"]
    code = torch.randint(0, fused.config.dit_config.num_embeds - 1, (1, 10), generator=torch.Generator().manual_seed(2))
    waves, mels = [], []
    with torch.no_grad():
        for model in (fused, unfused):
            # the DiT's mel spectrogram, as the vocoder receives it inside the same forward call
            # prepend: ahead of the vllm-omni layout's own cast to the vocoder's bfloat16
            hook = model.code2wav_bigvgan_model.register_forward_pre_hook(lambda mod, args: mels.append(args[0]),
                                                                          prepend=True)
            torch.manual_seed(0)  # the ODE starts from noise
            try:
                waves.append(model(code, spk["cond"], spk["ref_mel"], num_steps=2))
            finally:
                hook.remove()
    assert waves[0].numel() > 0 and torch.isfinite(waves[0]).all()
    assert mels[0].shape == (1, fused.config.dit_config.mel_dim, 2 * code.shape[1])
    # the DiT (float32 in both) gives the same mel; the vocoder is bfloat16 in the vllm-omni layout
    # and float32 in transformers', so the waveforms agree to bfloat16's precision only
    torch.testing.assert_close(mels[0], mels[1], rtol=1e-5, atol=1e-6)
    assert waves[0].dtype == waves[1].dtype == torch.float32
    torch.testing.assert_close(waves[0], waves[1], rtol=BF16_RTOL, atol=BF16_ATOL)
    with torch.no_grad():  # and the comparison can fail: other noise, other waveform
        torch.manual_seed(1)
        assert not torch.allclose(fused(code, spk["cond"], spk["ref_mel"], num_steps=2), waves[0])


# --------------------------------------------------------------------------- buffers from the checkpoint


def _rewrite_tensor(root: Path, key: str, tensor: torch.Tensor) -> Path:
    """Replace one checkpoint tensor in its shard; returns the shard."""
    index = json.loads((root / "model.safetensors.index.json").read_text())
    shard = root / index["weight_map"][key]
    tensors = safetensors.torch.load_file(str(shard))
    tensors[key] = tensor
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    return shard


def _drop_key(root: Path, key: str) -> None:
    """Remove one tensor from a snapshot: from its shard and from the index."""
    index_path = root / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    shard = root / index["weight_map"].pop(key)
    index_path.write_text(json.dumps(index))
    tensors = safetensors.torch.load_file(str(shard))
    del tensors[key]
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})


def test_persistent_buffer_comes_from_the_checkpoint(tiny_snapshot: Path, tmp_path: Path, loads: dict) -> None:
    """vLLM-Omni's layout copies the checkpoint's inv_freq into the buffer; transformers' keeps its own."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    computed = loads["optimized", "vllm-omni"][0].code2wav_dit_model.rotary_embed.inv_freq.clone()
    _rewrite_tensor(copy, PREFIX + INV_FREQ, computed * 2)
    snap = open_snapshot(copy)
    for variant in ("baseline", "optimized"):
        model, result = load_token2wav(snap, variant)
        assert torch.equal(model.code2wav_dit_model.rotary_embed.inv_freq, computed * 2)
        assert INV_FREQ in result.loaded_names
    model, result = load_token2wav(snap, "optimized", layout="transformers")
    assert torch.equal(model.code2wav_dit_model.rotary_embed.inv_freq, computed)
    assert INV_FREQ not in result.loaded_names


def test_persistent_buffer_missing_from_the_checkpoint_still_counts(tiny_snapshot: Path, tmp_path: Path,
                                                                    loads: dict) -> None:
    """As reload_buffers_to_model: a persistent buffer the checkpoint lacks is copied onto itself and
    counted as loaded, so the weights-loaded figure does not depend on whether inv_freq was saved."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    _drop_key(copy, PREFIX + INV_FREQ)
    model, result = load_token2wav(open_snapshot(copy), "optimized")
    full = loads["optimized", "vllm-omni"][1]
    assert INV_FREQ in result.loaded_names
    assert result.weights_loaded == full.weights_loaded
    computed = loads["optimized", "vllm-omni"][0].code2wav_dit_model.rotary_embed.inv_freq
    assert torch.equal(model.code2wav_dit_model.rotary_embed.inv_freq, computed)


def test_reference_copy_is_timed_outside_the_load(tiny_snapshot: Path, loads: dict) -> None:
    """The yardstick copies the same tensors again after the load: outside "total", model unchanged."""
    model, result = load_token2wav(open_snapshot(tiny_snapshot), "optimized", reference_copy=True)
    records = {p.name: p for p in result.phases}
    assert records["reference_copy"].parent is None
    assert result.phases[-1].name == "reference_copy"  # ended after "total"
    assert result.digest == loads["optimized", "vllm-omni"][1].digest


# --------------------------------------------------------------------------- dtype, device, errors


def test_bfloat16_load(tiny_snapshot: Path, checkpoint: dict[str, torch.Tensor], loads: dict) -> None:
    model, result = load_token2wav(open_snapshot(tiny_snapshot), "baseline", layout="transformers", dtype="bfloat16")
    assert result.dtype == "bfloat16"
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    name = "code2wav_bigvgan_model.conv_post.weight"
    assert torch.equal(dict(model.named_parameters())[name], checkpoint[PREFIX + name].to(torch.bfloat16))
    assert result.weights_loaded == 198
    assert result.digest != loads["baseline", "transformers"][1].digest
    # the vllm-omni layout's dtypes are its own: the stage dtype changes none of its parameters
    _, fused = load_token2wav(open_snapshot(tiny_snapshot), "baseline", dtype="bfloat16")
    assert fused.dtype == "bfloat16" and fused.weights_loaded == 187
    assert fused.parameter_dtypes == {"code2wav_dit_model": "float32", "code2wav_bigvgan_model": "bfloat16"}
    assert fused.digest == loads["baseline", "vllm-omni"][1].digest


def test_meta_device_load_has_no_digest(tiny_snapshot: Path) -> None:
    model, result = load_token2wav(open_snapshot(tiny_snapshot), "baseline", device="meta")
    assert result.device == "meta"
    assert result.state_dict_calls == 51 and result.weights_loaded == 187
    assert result.digest == "" and result.tensors_digested == 0
    assert {p.device.type for p in model.parameters()} == {"meta"}


def test_bad_dtype(tiny_snapshot: Path) -> None:
    with pytest.raises(OmniLoaderError, match="--dtype 'float64'"):
        load_token2wav(open_snapshot(tiny_snapshot), dtype="float64")


def test_missing_fused_part_names_the_checkpoint_key(tiny_snapshot: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    key = PREFIX + "code2wav_dit_model.transformer_blocks.2.attn.to_k.weight"
    _drop_key(copy, key)
    for layout in ("vllm-omni", "transformers"):
        with pytest.raises(CheckpointError, match=f"missing key {key}"):
            load_token2wav(open_snapshot(copy), "optimized", layout=layout)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_load_matches_cpu(tiny_snapshot: Path, loads: dict) -> None:
    model, result = load_token2wav(open_snapshot(tiny_snapshot), "baseline", device="cuda")
    assert result.device.startswith("cuda")
    assert {p.device.type for p in model.parameters()} == {"cuda"}
    assert result.digest == loads["baseline", "vllm-omni"][1].digest
    assert all(p.device_peak_bytes is not None for p in result.phases)


# --------------------------------------------------------------------------- the worker entry point


def test_worker_run_load(tiny_snapshot: Path, loads: dict) -> None:
    data = worker.run_load(str(tiny_snapshot), "baseline")
    assert data["digest"] == loads["baseline", "vllm-omni"][1].digest
    assert data["state_dict_calls"] == 51


def test_worker_main_writes_json(tiny_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    call = worker.WorkerCall(worker.LoadRequest(str(tiny_snapshot), "optimized"), str(out))
    assert worker.main(worker.worker_command(call, tmp_path / "req.json")[3:]) == 0
    data = json.loads(out.read_text())
    assert data["variant"] == "optimized" and data["state_dict_calls"] == 0 and data["weights_loaded"] == 187
    nowhere = worker.WorkerCall(worker.LoadRequest(str(tmp_path / "nowhere"), "baseline"))
    assert worker.main(worker.worker_command(nowhere, tmp_path / "req2.json")[3:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "nowhere") in err[0]


# --------------------------------------------------------------------------- issue 15: tests that bite


def test_checkpoint_key_matching_no_parameter_is_an_error(tiny_snapshot: Path, tmp_path: Path) -> None:
    """A checkpoint tensor the model has no place for is refused, naming the key and its shard."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    key = PREFIX + "code2wav_dit_model.no_such_block.weight"
    index_path = copy / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    shard = sorted(set(index["weight_map"].values()))[0]
    index["weight_map"][key] = shard
    index_path.write_text(json.dumps(index))
    tensors = safetensors.torch.load_file(str(copy / shard))
    tensors[key] = torch.ones(3)
    safetensors.torch.save_file(tensors, str(copy / shard), metadata={"format": "pt"})
    for variant in ("baseline", "optimized", "assign", "fastsafetensors"):
        for layout in ("vllm-omni", "transformers"):
            with pytest.raises(CheckpointError, match="matches no model parameter") as err:
                load_token2wav(open_snapshot(copy), variant, layout=layout)
            assert key in str(err.value) and str(copy / shard) in str(err.value)


def test_phase_seconds_are_the_clock_difference(tiny_snapshot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each phase's seconds is end minus start of the phase clock: with a clock that advances one second per
    reading, a phase lasts 1 s plus 2 s for every phase nested inside it (their start and end readings)."""
    import time as real_time

    from omni_loader.host import timing

    class TickingTime:
        def __init__(self) -> None:
            self.readings = 0

        def perf_counter(self) -> float:
            self.readings += 1
            return 1000.0 + self.readings

        def __getattr__(self, name: str):
            return getattr(real_time, name)

    clock = TickingTime()
    monkeypatch.setattr(timing, "time", clock)
    _, result = load_token2wav(open_snapshot(tiny_snapshot), "baseline")
    parents = {p.name: p.parent for p in result.phases}

    def nested(name: str) -> int:
        return sum(1 for other in parents if other != name and name in _ancestors(other, parents))

    assert clock.readings == 2 * len(result.phases)
    for p in result.phases:
        assert p.seconds == 1 + 2 * nested(p.name), p.name
    assert result.phase_seconds()["total"] == 2 * len(result.phases) - 1
    # the phases, in the order they end, each under its parent
    assert [(p.name, p.parent) for p in result.phases] == [
        ("construct", "total"), ("read_checkpoint", "outer_load_weights"), ("hub_check", "outer_load_weights"),
        ("speaker_conditioning", "outer_load_weights"),
        ("buffer_discovery", "weight_loading"), ("split_buffers", "weight_loading"),
        ("load_parameters", "weight_loading"), ("model_loaded_size", "weight_loading"),
        ("load_buffers", "weight_loading"), ("load_spk_dict", "weight_loading"),
        ("weight_loading", "outer_load_weights"), ("outer_load_weights", "total"), ("post_load", "total"),
        ("total", None)]
    assert (result.variant, result.layout, result.construct) == ("baseline", "vllm-omni", "resident")
    assert result.persistent_buffers == [INV_FREQ] and result.state_dict_calls == 51
    assert result.weights_loaded == 187 and INV_FREQ in result.loaded_names  # the buffer after the others, too


def _ancestors(name: str, parents: dict) -> list[str]:
    out = []
    while parents.get(name):
        name = parents[name]
        out.append(name)
    return out


def test_result_record_takes_the_peaks_of_its_phases() -> None:
    from omni_loader.token2wav.loader import LoadResult
    from omni_loader.token2wav.options import LoadOptions
    from omni_loader.host.timing import PhaseRecord

    def rec(name: str, rss: int, dev: int | None) -> PhaseRecord:
        return PhaseRecord(name=name, seconds=0.5, parent=None, rss_bytes=1, rss_peak_bytes=rss, device_peak_bytes=dev)

    def result(phases: list) -> dict:
        options = LoadOptions(layout="vllm-omni", device="cuda:0", dtype="float32", construct="upstream-cpu")
        return LoadResult("baseline", options, phases, 3, 4, ["b"], "d", 5).to_dict()

    data = result([rec("a", 7, None), rec("b", 9, 40), rec("c", 8, 60), rec("d", 2, None)])
    assert (data["rss_peak_bytes"], data["device_peak_bytes"]) == (9, 60)
    assert data["construct"] == "upstream-cpu" and data["read"] == "lazy" and data["phases"] == dict.fromkeys("abcd", 0.5)
    assert [r["name"] for r in data["phase_records"]] == list("abcd")
    assert (data["state_dict_calls"], data["weights_loaded"], data["persistent_buffers"]) == (3, 4, ["b"])
    assert (data["digest"], data["tensors_digested"], data["device"], data["dtype"]) == ("d", 5, "cuda:0", "float32")
    empty = result([])
    assert (empty["rss_peak_bytes"], empty["device_peak_bytes"]) == (0, None)
    assert result([rec("a", 7, 0)])["device_peak_bytes"] == 0  # a measured zero is not 'not measured'


def test_digest_covers_name_dtype_shape_and_bytes_of_every_tensor() -> None:
    import xxhash
    from torch import nn

    model = nn.Module()
    model.w = nn.Parameter(torch.tensor([1.0, 2.0]))
    model.register_buffer("empty", torch.zeros(0, 3))
    expected = xxhash.xxh3_128()
    expected.update(b"empty|torch.float32|(0, 3)|")  # no bytes for an empty tensor
    expected.update(b"w|torch.float32|(2,)|" + torch.tensor([1.0, 2.0]).numpy().tobytes())
    assert tensor_digest(model) == ("xxh3-128:" + expected.hexdigest(), 2)


def test_reference_copy_holds_the_same_tensors_in_both_layouts(tiny_snapshot: Path, loads: dict) -> None:
    """The yardstick copy loads the checkpoint again with a strict load_state_dict: it must fit either layout."""
    for layout in ("vllm-omni", "transformers"):
        model, result = load_token2wav(open_snapshot(tiny_snapshot), "optimized", layout=layout, reference_copy=True)
        assert [p.name for p in result.phases][-1] == "reference_copy"
        assert result.phases[-1].parent is None  # outside the load's total
        assert result.digest == loads["optimized", layout][1].digest  # the same values, copied once more


@pytest.mark.parametrize("name, part", [("code2wav_bigvgan_model.conv_post.weight", "model"),
                                        ("code2wav_dit_model.transformer_blocks.0.attn.to_v.weight", "model shard"),
                                        (INV_FREQ, "model")])
def test_shape_mismatch_names_key_shard_and_both_shapes(tiny_snapshot: Path, tmp_path: Path, name: str,
                                                        part: str) -> None:
    """A parameter, one q/k/v part of a fused parameter, a persistent buffer: each refused with both shapes."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    key = PREFIX + name
    model, _ = load_token2wav(open_snapshot(copy), "optimized", device="meta", digest=False)
    target = dict(model.named_parameters()).get(name.replace(".to_v.", ".qkv_proj."))
    expected = tuple(target.shape) if target is not None else tuple(model.code2wav_dit_model.rotary_embed.inv_freq.shape)
    if part == "model shard":
        expected = (expected[0] // 3, *expected[1:])
    shard = _rewrite_tensor(copy, key, torch.zeros(7))
    with pytest.raises(CheckpointError) as err:
        load_token2wav(open_snapshot(copy), "optimized")
    assert str(err.value) == f"shape mismatch for {key} in {shard}: checkpoint (7,), {part} {expected}"


def test_missing_first_fused_part_names_it(tiny_snapshot: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    key = PREFIX + "code2wav_dit_model.transformer_blocks.1.attn.to_q.weight"
    _drop_key(copy, key)
    with pytest.raises(CheckpointError) as err:
        load_token2wav(open_snapshot(copy), "baseline")
    assert str(err.value) == (f"checkpoint is missing key {key} "
                              "(needed by parameter code2wav_dit_model.transformer_blocks.1.attn.qkv_proj.weight)")


def test_a_skipped_buffer_early_in_the_checkpoint_does_not_end_the_load(tiny_snapshot: Path, tmp_path: Path,
                                                                        loads: dict) -> None:
    """The transformers layout has no persistent inv_freq: its checkpoint entry is skipped, and every entry after
    it still loads (here inv_freq is moved to the front of the first shard)."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    index_path = copy / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    key = PREFIX + INV_FREQ
    first = sorted(set(index["weight_map"].values()))[0]
    old = copy / index["weight_map"][key]
    moved = safetensors.torch.load_file(str(old))
    inv = moved.pop(key)
    safetensors.torch.save_file(moved, str(old), metadata={"format": "pt"})
    front = safetensors.torch.load_file(str(copy / first))
    safetensors.torch.save_file({key: inv, **front}, str(copy / first), metadata={"format": "pt"})
    index["weight_map"] = {key: first, **{k: v for k, v in index["weight_map"].items() if k != key}}
    index_path.write_text(json.dumps(index))
    _, result = load_token2wav(open_snapshot(copy), "optimized", layout="transformers")
    assert result.digest == loads["optimized", "transformers"][1].digest


class _NotATensor:
    pass


def test_speaker_dictionary_is_read_as_weights_only_onto_the_device(tiny_snapshot: Path, tmp_path: Path) -> None:
    from omni_loader.token2wav.steps import load_speaker_dict

    snap = open_snapshot(tiny_snapshot)
    on_meta = load_speaker_dict(snap, torch.device("meta"))
    assert {t.device.type for entry in on_meta.values() for t in entry.values() if isinstance(t, torch.Tensor)} == {"meta"}
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    torch.save({"Ethan": {"cond": _NotATensor()}}, copy / "spk_dict.pt")  # a pickle that is not just tensors
    with pytest.raises(CheckpointError) as err:
        load_speaker_dict(open_snapshot(copy), torch.device("cpu"))
    message = str(err.value)
    assert message.startswith(f"cannot read speaker dictionary {copy / 'spk_dict.pt'} (")
    assert message.endswith("): the file is damaged or not a torch dictionary; restore spk_dict.pt from the model "
                            "snapshot")
    reason = message[len(f"cannot read speaker dictionary {copy / 'spk_dict.pt'} ("):message.index("): the file")]
    assert "\n" not in message and 20 < len(reason) <= 160  # the library's reason, on one line, cut at 160
    assert reason != "None"


def test_bad_dtype_lists_the_choices(tiny_snapshot: Path) -> None:
    with pytest.raises(OmniLoaderError) as err:
        load_token2wav(open_snapshot(tiny_snapshot), dtype="float64")
    assert str(err.value) == "--dtype 'float64' is not one of float32, bfloat16, float16"


def test_a_gpu_variant_on_the_cpu_is_refused(tiny_snapshot: Path) -> None:
    with pytest.raises(OmniLoaderError) as err:
        load_token2wav(open_snapshot(tiny_snapshot), "pinned", device="cpu")
    assert str(err.value) == "variant pinned needs a GPU (--device cuda); this load is on cpu"


def test_load_buffers_reloads_every_persistent_buffer_wherever_it_sits() -> None:
    """A non-persistent buffer met first (here at the root) does not end the walk: every persistent one after
    it is reloaded, from the checkpoint when it holds the buffer, else onto itself."""
    from torch import nn

    from omni_loader.token2wav.discovery import find_persistent_buffers
    from omni_loader.token2wav.steps import load_buffers

    model = nn.Module()
    model.register_buffer("scratch", torch.zeros(2), persistent=False)
    model.inner = nn.Module()
    model.inner.register_buffer("a", torch.zeros(2))
    model.inner.register_buffer("b", torch.ones(3))
    done = load_buffers(model, find_persistent_buffers(model), [(PREFIX + "inner.a", torch.full((2,), 5.0))], None)
    assert done == {"inner.a", "inner.b"}
    assert torch.equal(model.inner.a, torch.full((2,), 5.0)) and torch.equal(model.inner.b, torch.ones(3))


@pytest.mark.parametrize("name", ["code2wav_bigvgan_model.conv_post.weight",
                                  "code2wav_dit_model.transformer_blocks.0.attn.to_v.weight", INV_FREQ])
@pytest.mark.parametrize("layout", ["vllm-omni", "transformers"])
def test_assign_variant_refuses_what_the_copy_loader_refuses(tiny_snapshot: Path, tmp_path: Path, name: str,
                                                             layout: str) -> None:
    """Zero-copy assignment checks shapes exactly as the copy does: the same error, word for word, or none."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))
    _rewrite_tensor(copy, PREFIX + name, torch.zeros(7))
    outcomes = []
    for variant in ("optimized", "assign"):
        try:
            load_token2wav(open_snapshot(copy), variant, layout=layout)
            outcomes.append("loaded")
        except CheckpointError as exc:
            outcomes.append(str(exc))
    assert outcomes[1] == outcomes[0]
    assert outcomes[0].startswith("shape mismatch for ") or (name == INV_FREQ and layout == "transformers")


def _assign_and_copy(snapshot, dtype: torch.dtype, layout: str = "vllm-omni"):
    """The assign step and the copy step on two models built alike, from the same checkpoint entries."""
    from omni_loader.token2wav.steps import load_parameters, load_parameters_assign

    weights = list(iter_token2wav_weights(snapshot))
    fused = layout == "vllm-omni"
    assigned, copied = (build_model(snapshot.token2wav_config, layout=layout, dtype=dtype) for _ in range(2))
    before = dict(assigned.named_parameters())
    for name, param in before.items():
        if ".qkv_proj." in name:
            param.data.fill_(7.0)  # the fused parameter's old memory, to see that nothing is copied into it
    plain = next(n for n in before if ".qkv_proj." not in n)
    before[plain].requires_grad_(False)
    loaded = load_parameters_assign(assigned, weights, snapshot, fused)
    assert loaded == load_parameters(copied, weights, snapshot, fused)  # the same parameters and shards
    after, reference = dict(assigned.named_parameters()), dict(copied.named_parameters())
    assert all(torch.equal(after[n], reference[n]) for n in reference) and after.keys() == reference.keys()
    assert not after[plain].requires_grad and all(p.requires_grad for n, p in after.items() if n != plain)
    return dict(weights), before, after


@pytest.mark.parametrize("layout", ["vllm-omni", "transformers"])
def test_assign_step_makes_the_mapped_tensors_the_parameters(tiny_snapshot: Path, layout: str) -> None:
    """Where dtype and device match, each checkpoint tensor *becomes* its parameter (the same memory),
    and the fused qkv_proj a new stacked tensor: no byte is copied into the old parameters. In the
    transformers layout (to_q, to_k, to_v apart) every parameter is a mapped tensor."""
    by_key, before, after = _assign_and_copy(open_snapshot(tiny_snapshot), torch.float32, layout)
    assert any(".qkv_proj." in n for n in after) == (layout == "vllm-omni")
    cast = {n for n, p in before.items() if p.dtype != torch.float32}  # the vllm-omni layout's bfloat16 BigVGAN
    assert bool(cast) == (layout == "vllm-omni") and all(n.startswith("code2wav_bigvgan_model.") for n in cast)
    for name, param in after.items():
        if ".qkv_proj." in name:
            assert param is not before[name] and bool((before[name] == 7.0).all()), name
        elif name in cast:  # a float32 tensor cannot be a bfloat16 parameter: cast and copied, as the copy step
            assert param is before[name] and param.dtype == torch.bfloat16, name
        else:
            assert param.data_ptr() == by_key[PREFIX + name].data_ptr(), name


def test_assign_step_copies_where_the_dtype_differs(tiny_snapshot: Path) -> None:
    """A bfloat16 model cannot take float32 tensors as its parameters: every one is cast and copied into
    the parameter that was there, as the copy step does."""
    _, before, after = _assign_and_copy(open_snapshot(tiny_snapshot), torch.bfloat16, "transformers")
    assert all(after[n] is before[n] for n in before)
    assert {p.dtype for p in after.values()} == {torch.bfloat16}


@pytest.mark.parametrize("construct", ["resident", "upstream-cpu", "empty", "init"])
def test_the_construction_mode_reaches_build_model(tiny_snapshot: Path, monkeypatch: pytest.MonkeyPatch,
                                                   construct: str) -> None:
    """``construct=`` (a keyword or in LoadOptions) is the mode the model is built with, and is reported;
    the variant defaults to the optimized one."""
    import omni_loader.token2wav.loader as loader_module
    from omni_loader.token2wav.options import LoadOptions

    seen: list[str] = []
    real_build = loader_module.build_model

    def spy(*args, **kwargs):
        seen.append(kwargs["construct"])
        return real_build(*args, **kwargs)

    monkeypatch.setattr(loader_module, "build_model", spy)
    snapshot = open_snapshot(tiny_snapshot)
    _, by_keyword = load_token2wav(snapshot, construct=construct, digest=False)
    _, by_options = load_token2wav(snapshot, "baseline", LoadOptions(construct=construct), digest=False)
    assert seen == [construct, construct]
    assert (by_keyword.variant, by_keyword.construct) == ("optimized", construct)
    assert (by_options.variant, by_options.construct) == ("baseline", construct)


def test_eager_reading_loads_the_same_tensors_as_lazy(tiny_snapshot: Path) -> None:
    """--read eager (each shard read whole first, vLLM's eager strategy) yields the same tensors as lazy
    memory-mapping, and a load with it has the same digest; an unknown strategy is one line."""
    from omni_loader.errors import OmniLoaderError
    from omni_loader.host.residency import backing_file
    from omni_loader.token2wav.checkpoint import iter_token2wav_weights
    from omni_loader.token2wav.options import LoadOptions

    snap = open_snapshot(tiny_snapshot)
    lazy, eager = dict(iter_token2wav_weights(snap)), dict(iter_token2wav_weights(snap, "eager"))
    assert lazy.keys() == eager.keys() and all(torch.equal(lazy[k], eager[k]) for k in lazy)
    key = max(lazy, key=lambda k: lazy[k].numel())
    assert backing_file(lazy[key]) is not None and backing_file(eager[key]) is None  # read into memory, not mapped
    _, a = load_token2wav(snap, "optimized", LoadOptions(device="cpu"))
    _, b = load_token2wav(snap, "optimized", LoadOptions(device="cpu", read="eager"))
    assert a.digest == b.digest
    with pytest.raises(OmniLoaderError, match="--read 'mmap' is not one of lazy, eager"):
        LoadOptions(read="mmap")


@pytest.mark.parametrize(("where", "dtype", "loads"), [
    ("code2wav_dit_model.", torch.float16, False),  # not what the released checkpoint stores
    ("code2wav_dit_model.", torch.int32, False),
    ("code2wav_bigvgan_model.", torch.bfloat16, True),  # the parameter's own dtype: nothing to cast
])
def test_a_checkpoint_tensor_of_an_unexpected_dtype_is_named(tiny_snapshot: Path, tmp_path: Path, where: str,
                                                              dtype: torch.dtype, loads: bool) -> None:
    """float32 (cast to bfloat16 for the BigVGAN, as upstream) and the parameter's own dtype load; a tensor of
    any other dtype would be cast as silently, so it is refused in one line naming it."""
    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "snap"))
    snap = open_snapshot(copy)
    key = next(k for k in sorted(snap.weight_map) if k.startswith(f"token2wav.{where}") and k.endswith(".weight"))
    shard = copy / snap.weight_map[key]
    tensors = safetensors.torch.load_file(str(shard))
    tensors[key] = tensors[key].to(dtype)
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    if loads:
        load_token2wav(open_snapshot(copy), "optimized", device="cpu", digest=False)
        return
    with pytest.raises(CheckpointError) as err:
        load_token2wav(open_snapshot(copy), "optimized", device="cpu", digest=False)
    name = str(dtype).removeprefix("torch.")
    assert str(err.value) == (f"checkpoint tensor {key} is {name}, not what the model expects: the released checkpoint "
                              "stores float32, which upstream casts to the parameter's float32; restore the shard "
                              "from the model snapshot")
