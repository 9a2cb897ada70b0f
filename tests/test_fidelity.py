"""Row for row what vLLM-Omni 0.30.0 does: the dtype of each submodule, the ``[Model Loaded]`` walk, the releases.

The figures come from the released source and the public logs of its code2wav stage (``size=1492.80
MB``): 0.30.0 builds the DiT in float32 and the BigVGAN in bfloat16 (``Qwen2_5OmniToken2WavModel``
makes each half with ``_from_config`` under its sub-config's dtype, else the stage's bfloat16), while
the checkpoint stores float32, so the parameter copy casts the BigVGAN's tensors.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import struct
import tempfile
from pathlib import Path

import pytest
import torch

from omni_loader.token2wav import loader
from omni_loader.token2wav.checkpoint import iter_token2wav_weights, open_snapshot
from omni_loader.token2wav.loader import load_token2wav
from omni_loader.token2wav.model import build_model, config_dict, inventory, parameter_bytes
from omni_loader.token2wav.options import VLLM_OMNI_HALF_DTYPES
from omni_loader.names import LEAF_PHASES, VARIANTS, WEIGHT_LOADING_CHILDREN
from omni_loader.token2wav.steps import hub_check, model_loaded_line
from omni_loader.token2wav.variants import VARIANT_RELEASES

DIT, BIGVGAN = "code2wav_dit_model", "code2wav_bigvgan_model"
# Elements of the full model's two halves (449,051,264 in all, as the facts file counts them).
DIT_ELEMENTS, BIGVGAN_ELEMENTS = 333_607_760, 115_443_504
MIB = 1024 ** 2
PREFIX = "token2wav."


@pytest.fixture(scope="module")
def full() -> dict[str, torch.nn.Module]:
    return {layout: build_model(config_dict("full"), layout=layout, device="meta")
            for layout in ("vllm-omni", "transformers")}


def _bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


# --------------------------------------------------------------------------- dtypes per submodule


def test_vllm_omni_layout_holds_what_the_code2wav_stage_logs(full: dict) -> None:
    """DiT float32 + BigVGAN bfloat16: 1,492.80 MiB, the ``size`` of 0.30.0's ``[Model Loaded]`` line."""
    model = full["vllm-omni"]
    dit, vocoder = getattr(model, DIT), getattr(model, BIGVGAN)
    assert {p.dtype for p in dit.parameters()} == {torch.float32}
    assert {p.dtype for p in vocoder.parameters()} == {torch.bfloat16}
    assert sum(p.numel() for p in dit.parameters()) == DIT_ELEMENTS
    assert sum(p.numel() for p in vocoder.parameters()) == BIGVGAN_ELEMENTS
    assert _bytes(dit) == 4 * DIT_ELEMENTS == 1_334_431_040
    assert _bytes(vocoder) == 2 * BIGVGAN_ELEMENTS == 230_887_008
    assert parameter_bytes(model) == _bytes(dit) + _bytes(vocoder)  # no parameter outside the two halves
    assert f"{parameter_bytes(model) / MIB:.2f}" == "1492.80"
    assert inventory("vllm-omni", "full").parameter_bytes == parameter_bytes(model)


def test_transformers_layout_is_float32_throughout(full: dict) -> None:
    """transformers' Qwen2.5-Omni calls ``token2wav.float()``: 1,712.99 MiB, 220 MiB more than upstream."""
    model = full["transformers"]
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert _bytes(getattr(model, DIT)) == 4 * DIT_ELEMENTS
    assert _bytes(getattr(model, BIGVGAN)) == 4 * BIGVGAN_ELEMENTS
    assert f"{parameter_bytes(model) / MIB:.2f}" == "1712.99"
    assert round((parameter_bytes(model) - parameter_bytes(full["vllm-omni"])) / MIB) == 220


def test_the_dtypes_are_the_layouts_not_the_stage_dtypes() -> None:
    """The vllm-omni layout's dtypes do not follow ``dtype`` (the DiT's is pinned upstream); the
    transformers layout's do, every parameter of it."""
    for stage in (torch.float32, torch.bfloat16, torch.float16):
        fused = build_model(config_dict("tiny"), layout="vllm-omni", device="meta", dtype=stage)
        assert {n: {p.dtype for p in getattr(fused, n).parameters()} for n in (DIT, BIGVGAN)} == {
            n: {getattr(torch, d)} for n, d in VLLM_OMNI_HALF_DTYPES.items()}
        # the fused qkv_proj, made after the tree, is in the DiT's dtype too
        assert {b.attn.qkv_proj.weight.dtype for b in fused.code2wav_dit_model.transformer_blocks} == {torch.float32}
        unfused = build_model(config_dict("tiny"), layout="transformers", device="meta", dtype=stage)
        assert {p.dtype for p in unfused.parameters()} == {stage}


def test_a_dtype_in_the_snapshots_sub_config_does_not_change_the_layout() -> None:
    """A real config.json may carry a sub-config dtype; the layout alone decides what is built."""
    cfg = config_dict("tiny")
    cfg["dit_config"]["dtype"], cfg["bigvgan_config"]["dtype"] = "float16", "float16"
    fused = build_model(cfg, layout="vllm-omni", device="meta")
    assert next(fused.code2wav_dit_model.parameters()).dtype == torch.float32
    assert next(fused.code2wav_bigvgan_model.parameters()).dtype == torch.bfloat16
    assert {p.dtype for p in build_model(cfg, layout="transformers", device="meta").parameters()} == {torch.float32}


def test_buffers_stay_float32_in_the_bfloat16_vocoder(full: dict) -> None:
    """The 218 anti-alias filters and the rotary frequencies are computed in float32, in any half."""
    buffers = dict(full["vllm-omni"].named_buffers())
    assert len(buffers) == 219
    assert {b.dtype for b in buffers.values()} == {torch.float32}


def _safetensors_dtypes(path: Path) -> dict[str, str]:
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


def test_synthetic_snapshot_stores_float32_as_the_released_checkpoint(tiny_snapshot: Path) -> None:
    """The released checkpoint's token2wav tensors are float32; so are the kit's (read from the file
    headers, not from torch), whatever dtype the loaded model gives them."""
    snap = open_snapshot(tiny_snapshot)
    stored: dict[str, str] = {}
    for shard in snap.shards:
        stored.update(_safetensors_dtypes(tiny_snapshot / shard))
    assert set(stored) == set(snap.weight_map)
    assert any(k.startswith(PREFIX + BIGVGAN) for k in stored) and any(k.startswith(PREFIX + DIT) for k in stored)
    assert set(stored.values()) == {"F32"}


# --------------------------------------------------------------------------- the cast inside the load


@pytest.fixture(scope="module")
def tiny_load(tiny_snapshot: Path):
    return load_token2wav(open_snapshot(tiny_snapshot), "optimized")


def test_load_parameters_casts_the_vocoder_and_copies_the_dit(tiny_snapshot: Path, tiny_load) -> None:
    model, result = tiny_load
    checkpoint = dict(iter_token2wav_weights(open_snapshot(tiny_snapshot)))
    params = dict(model.named_parameters())
    vocoder = {n: p for n, p in params.items() if n.startswith(BIGVGAN)}
    assert vocoder
    for name, param in vocoder.items():
        assert param.dtype == torch.bfloat16
        assert torch.equal(param, checkpoint[PREFIX + name].to(torch.bfloat16)), name
    for name, param in params.items():
        if name.startswith(DIT) and ".qkv_proj." not in name:
            assert param.dtype == torch.float32 and torch.equal(param, checkpoint[PREFIX + name]), name
    assert result.parameter_dtypes == {DIT: "float32", BIGVGAN: "bfloat16"}
    assert result.to_dict()["parameter_dtypes"] == result.parameter_dtypes


def test_the_mixed_model_computes_a_waveform(tiny_snapshot: Path, tiny_load) -> None:
    """With the casts 0.30.0's forward makes (mel to the vocoder's dtype, filters in float32), the
    vllm-omni model runs end to end and returns float32 audio."""
    model, _ = tiny_load
    spk = torch.load(tiny_snapshot / "spk_dict.pt", weights_only=True)["Ethan"]
    code = torch.randint(0, model.config.dit_config.num_embeds - 1, (1, 10), generator=torch.Generator().manual_seed(2))
    seen = []
    hook = model.code2wav_bigvgan_model.conv_pre.register_forward_pre_hook(lambda mod, args: seen.append(args[0].dtype))
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            wave = model(code, spk["cond"], spk["ref_mel"], num_steps=2)
    finally:
        hook.remove()
    assert seen == [torch.bfloat16]  # the vocoder computes in its own dtype
    assert wave.dtype == torch.float32 and wave.numel() > 0 and torch.isfinite(wave).all()



@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
@pytest.mark.parametrize("num_steps", [2, 3])
def test_the_forward_bar_total_is_the_dit_calls_the_sampler_makes(tiny_snapshot: Path, tiny_load, num_steps: int) -> None:
    """Notebook 04's forward-pass bar has a total (not "12/?"): the DiT calls transformers' RK4 sampler
    makes for ``num_steps``, counted here on the real model."""
    from omni_loader.notebook.waveform import dit_evaluations

    model, _ = tiny_load
    spk = torch.load(tiny_snapshot / "spk_dict.pt", weights_only=True)["Ethan"]
    code = torch.randint(0, model.config.dit_config.num_embeds - 1, (1, 8), generator=torch.Generator().manual_seed(2))
    calls = []
    hook = model.code2wav_dit_model.register_forward_hook(lambda *_: calls.append(1))
    try:
        with torch.no_grad():
            model(code, spk["cond"], spk["ref_mel"], num_steps=num_steps)
    finally:
        hook.remove()
    assert len(calls) == dit_evaluations(num_steps)


# --------------------------------------------------------------------------- the [Model Loaded] walk


def test_model_loaded_line_prints_the_logged_size(full: dict, caplog) -> None:
    """The line upstream logs, logged as upstream does (at INFO) and returned for the load's record."""
    with caplog.at_level("INFO", logger="omni_loader.load"):
        line = model_loaded_line(full["vllm-omni"])
    assert line == ("[Model Loaded] name=Qwen2_5OmniToken2WavForConditionalGenerationVLLM, success=True, "
                    "size=1492.80 MB, device=meta")
    assert [r.getMessage() for r in caplog.records if r.name == "omni_loader.load"] == [line]
    assert "size=1712.99 MB" in model_loaded_line(full["transformers"])


def test_the_walk_is_timed_inside_weight_loading_after_the_parameters(tiny_load) -> None:
    model, result = tiny_load
    assert WEIGHT_LOADING_CHILDREN == ("buffer_discovery", "split_buffers", "load_parameters", "model_loaded_size",
                                       "load_buffers", "load_spk_dict")
    assert set(WEIGHT_LOADING_CHILDREN) < set(LEAF_PHASES)
    children = [p.name for p in result.phases if p.parent == "weight_loading"]
    assert children == list(WEIGHT_LOADING_CHILDREN)
    assert result.model_loaded == model_loaded_line(model)
    assert f"size={parameter_bytes(model) / MIB:.2f} MB, device=cpu" in result.model_loaded


# --------------------------------------------------------------------------- versions as data


def test_each_pr_variant_names_its_releases() -> None:
    assert set(VARIANT_RELEASES) == set(VARIANTS)
    assert "be81443c" in VARIANT_RELEASES["baseline"]["source"] and "0.28.0" in VARIANT_RELEASES["baseline"]["releases"]
    assert "0.30.0" in VARIANT_RELEASES["optimized"]["releases"]
    assert "state_dict()" in VARIANT_RELEASES["baseline"]["rule"]
    doc = loader.__doc__
    assert "0.30.0" in doc and "be81443c" in doc and "Where the kit still differs from vLLM-Omni 0.30.0" in doc


# --------------------------------------------------------------------------- the Hub check


def test_a_hub_id_is_resolved_again_inside_the_load_as_its_own_phase(tiny_snapshot: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``--model Qwen/Qwen2.5-Omni-3B``: the outer ``load_weights`` resolves ``spk_dict.pt`` through the
    real huggingface_hub (``*.pt``, the same cache, offline) between the checkpoint list and the
    speaker conditioning; a directory costs an ``exists()`` there, and no Hub call."""
    import huggingface_hub

    from omni_loader.token2wav.checkpoint import find_in_hub_cache, place_in_hub_cache
    from omni_loader.errors import CheckpointError

    model_id, cache = "Qwen/Qwen2.5-Omni-3B", tmp_path / "hub"
    target = place_in_hub_cache(tiny_snapshot, cache, model_id)
    snap = find_in_hub_cache(model_id, cache_dir=cache)
    calls = []
    real = huggingface_hub.snapshot_download

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", spy)
    name = model_id.replace("/", "-")  # upstream's lock: <temp dir>/<sha256 of the name><name>.lock, shared (0o666)
    lock = Path(tempfile.gettempdir()) / f"{hashlib.sha256(name.encode()).hexdigest()}{name}.lock"
    lock.unlink(missing_ok=True)
    _, result = load_token2wav(snap, "optimized")
    assert [(a, k["allow_patterns"], k["local_files_only"], k["cache_dir"]) for a, k in calls] == [
        ((model_id,), "*.pt", True, str(cache))]
    assert lock.is_file() and stat.S_IMODE(lock.stat().st_mode) == 0o666
    outer = [p.name for p in result.phases if p.parent == "outer_load_weights"]
    assert outer == ["read_checkpoint", "hub_check", "speaker_conditioning", "weight_loading"]  # inside vLLM's region
    assert result.phase_seconds()["hub_check"] > 0
    _, plain = load_token2wav(open_snapshot(tiny_snapshot), "optimized")
    assert len(calls) == 1 and "hub_check" in plain.phase_seconds()  # the phase, without a Hub call
    named = open_snapshot(tiny_snapshot, model_id=model_id)  # --checkpoint DIR --model ID: a directory still
    assert hub_check(named) == tiny_snapshot and len(calls) == 1
    assert plain.digest == result.digest
    (target / "spk_dict.pt").unlink()  # the check looks: no *.pt, no load
    with pytest.raises(CheckpointError, match=r"no \*\.pt file in"):
        load_token2wav(snap, "optimized")


# --------------------------------------------------------------------------- 04's forward-pass bar (fake clock)


def test_the_forward_bar_prices_each_part_at_its_own_pace() -> None:
    """At 00:06 of a 23 s pass the bar said "00:44 left" with 17 s left, its 18 vocoder blocks priced at the DiT's
    evaluations; then "at least 00:12 left", the blocks left out. On a fake clock (evaluations 1.5 s, blocks 0.25 s):
    during the DiT every block is priced by the stated prior (a share of the DiT's time), so the time left is a
    whole estimate, not a floor; once a block has ended, every block to come is priced at the blocks' pace; the
    running step's time so far counts it down."""
    from omni_loader.notebook.forward_bar import DIT, VOCODER, VOCODER_SHARE
    from omni_loader.progress import Countdown, Step

    now = [0.0]
    clock = Countdown([Step(DIT)] * 12 + [Step(VOCODER)] * 18, clock=lambda: now[0],
                      priors={VOCODER: (DIT, VOCODER_SHARE * 12 / 18)})
    assert clock.clock_words() == "? left"  # no step has ended: nothing to price by
    clock.begin(Step(DIT))
    assert clock.clock_words() == "? left"
    for _ in range(4):
        now[0] += 1.5
        clock.begin(Step(DIT))
    prior = 18 * 1.5 * VOCODER_SHARE * 12 / 18
    assert clock.left() == pytest.approx(8 * 1.5 + prior)
    now[0] += 1.0  # the fifth evaluation has run for 1 s
    assert clock.left() == pytest.approx(8 * 1.5 - 1.0 + prior)
    for k in range(8):
        now[0] += 0.5 if k == 0 else 1.5
        clock.begin(Step(DIT) if k < 7 else Step(VOCODER))
    now[0] += 0.25  # the vocoder's first block (its interval: from the DiT's last end)
    clock.begin(Step(VOCODER))
    assert clock.left() == pytest.approx(17 * 0.25)
    assert clock.clock_words() == "00:04 left"
    now[0] += 0.2  # the second block has run for 0.2 s
    assert clock.left() == pytest.approx(17 * 0.25 - 0.2)
    for _ in range(16):
        now[0] += 0.25
        clock.begin(Step(VOCODER))
    assert clock.clock_words() == "00:01 left"  # the last block runs: not "00:00 left" while it does
    now[0] += 0.25
    clock.end()
    assert clock.clock_words() == "00:00 left"


def test_the_forward_bars_count_and_postfix_name_the_same_step(monkeypatch) -> None:
    """04's bar read "forward pass: 7/30 ... DiT evaluation 8/12": the count is the steps done, so the postfix
    says the step it names is running ("DiT evaluation 3 of 4 running" beside 2/8), and in the vocoder names the
    residual block the bar counts, with its upsample stage. The time left there is the blocks' own (fake clock)."""
    import io
    from types import SimpleNamespace

    import tqdm.std
    from torch import nn

    from omni_loader.notebook.forward_bar import forward_progress

    now = [0.0]
    made: list = []
    monkeypatch.setattr("omni_loader.progress.progress_bar",
                        lambda enabled, **kwargs: made.append(tqdm.std.tqdm(file=io.StringIO(), **kwargs)) or made[-1])
    seen: list[tuple[int, str]] = []

    def look() -> None:
        seen.append((made[0].n, made[0].postfix))

    class Takes(nn.Module):
        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.seconds = seconds

        def forward(self, x):
            look()
            now[0] += self.seconds
            return x

    class Vocoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = SimpleNamespace(upsample_rates=[5, 2])
            self.ups = nn.ModuleList([nn.ModuleList([nn.Identity()]) for _ in range(2)])
            self.resblocks = nn.ModuleList([Takes(0.5) for _ in range(4)])

        def forward(self, x):
            for stage in range(2):
                x = self.ups[stage][0](x)
                for block in self.resblocks[2 * stage:2 * stage + 2]:
                    x = block(x)
            return x

    dit, vocoder = Takes(10.0), Vocoder()
    ended: list[str] = []
    with forward_progress(dit, vocoder, True, 4, tick=0, clock=lambda: now[0]):
        # after the bar's own hook: what a line written as stage 1's last block ends says (the next block's stage)
        vocoder.resblocks[1].register_forward_hook(lambda *_: ended.append(made[0].postfix))
        for _ in range(4):
            dit(torch.zeros(1))
        vocoder(torch.zeros(1))
    assert ended == ["00:01 left, residual block 3 of 4 running in BigVGAN upsample stage 2/2 (upsamples ×2)"]
    # during the DiT, each block is priced by the prior: 0.4 of the DiT's 4 evaluations over 4 blocks, 4 s each
    assert seen[:4] == [(0, "? left, DiT evaluation 1 of 4 running"),
                        (1, "00:46 left, DiT evaluation 2 of 4 running"),
                        (2, "00:36 left, DiT evaluation 3 of 4 running"),
                        (3, "00:26 left, DiT evaluation 4 of 4 running")], seen
    assert seen[4] == (4, "00:16 left, residual block 1 of 4 running in BigVGAN upsample stage 1/2 "
                          "(upsamples ×5)"), seen
    assert seen[5:] == [(5, "00:02 left, residual block 2 of 4 running in BigVGAN upsample stage 1/2 (upsamples ×5)"),
                        (6, "00:01 left, residual block 3 of 4 running in BigVGAN upsample stage 2/2 (upsamples ×2)"),
                        (7, "00:01 left, residual block 4 of 4 running in BigVGAN upsample stage 2/2 (upsamples ×2)")]
    assert made[0].n == 8 and made[0].postfix == "00:00 left, all 4 residual blocks done"


def test_the_vocoder_notes_durations_do_not_break_between_number_and_unit() -> None:
    """04's cell 19 wrapped "1,106" at a line's end and "ms" at the next's: in the note's prose a duration's number
    and unit are joined by a no-break space."""
    from omni_loader.notebook.waveform import VocoderPrecision

    note = VocoderPrecision("bfloat16", "float32", "CPU", probe=(1.106, 0.00212), copy_seconds=0.0217).sentence()
    assert "took 1,106\u00a0ms in bfloat16 against 2.12\u00a0ms in float32" in note, note
    assert "made in 21.7\u00a0ms" in note and not re.search(r"\d (ns|µs|ms|s)\b", note), note
