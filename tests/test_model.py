"""Token2Wav module trees: the counts the PR quotes, and the two layouts."""

from __future__ import annotations

import pytest
import torch

from omni_loader.token2wav.model import (FusedQKVDiTAttention, Inventory, build_model, config_dict, inventory,
                                         make_config)

INV_FREQ = "code2wav_dit_model.rotary_embed.inv_freq"
FULL_ELEMENTS = 449_051_264


@pytest.fixture(scope="module")
def full_vllm() -> Inventory:
    return inventory("vllm-omni", "full")


@pytest.fixture(scope="module")
def full_transformers() -> Inventory:
    return inventory("transformers", "full")


@pytest.fixture(scope="module")
def tiny_models() -> dict[str, torch.nn.Module]:
    layouts = ("vllm-omni", "transformers")
    return {layout: build_model(config_dict("tiny"), layout=layout, device="meta") for layout in layouts}


# --------------------------------------------------------------------------- full-size counts


def test_full_vllm_omni_inventory(full_vllm: Inventory) -> None:
    assert full_vllm.layout == "vllm-omni" and full_vllm.size == "full"
    assert full_vllm.named_buffers == 219
    assert len(full_vllm.persistent_buffers) == 1
    assert full_vllm.persistent_buffers[0].endswith(INV_FREQ)
    assert full_vllm.parameters == 720
    assert full_vllm.parameter_elements == FULL_ELEMENTS
    # DiT float32 + BigVGAN bfloat16, as vLLM-Omni 0.30.0 builds them: 1,565,318,048 bytes = 1,492.80 MiB
    assert full_vllm.parameter_bytes == 333_607_760 * 4 + 115_443_504 * 2 == 1_565_318_048


def test_full_transformers_inventory(full_transformers: Inventory) -> None:
    assert full_transformers.named_buffers == 220
    assert full_transformers.persistent_buffers == []
    assert full_transformers.parameters == 808
    assert full_transformers.parameter_elements == FULL_ELEMENTS
    assert full_transformers.modules == 1136
    assert full_transformers.parameter_bytes == FULL_ELEMENTS * 4  # float32: 1,796,205,056 bytes


def test_layouts_differ_by_fusion_and_original_inv_freq(full_vllm: Inventory, full_transformers: Inventory) -> None:
    # 22 DiT blocks: 3 unfused Linear modules become 1 fused one, i.e. 2 fewer modules and 4 fewer tensors per block.
    assert full_transformers.modules - full_vllm.modules == 22 * 2
    assert full_transformers.parameters - full_vllm.parameters == 22 * 4
    assert full_transformers.named_buffers - full_vllm.named_buffers == 1  # original_inv_freq


def test_inventory_to_dict_round_trips(full_vllm: Inventory) -> None:
    data = full_vllm.to_dict()
    assert set(data) == {
        "layout", "size", "modules", "named_buffers", "persistent_buffers",
        "parameters", "parameter_elements", "parameter_bytes",
    }
    assert Inventory(**data) == full_vllm


def test_full_model_filters_are_the_218_anti_alias_filters() -> None:
    model = build_model(config_dict("full"), layout="vllm-omni", device="meta")
    filters = [n for n, _ in model.named_buffers() if n.endswith(".filter")]
    assert len(filters) == 218
    bigvgan = model.code2wav_bigvgan_model
    assert len(bigvgan.resblocks) == 18  # 6 upsample stages x 3 kernel sizes
    assert len(filters) == 2 * (6 * len(bigvgan.resblocks) + 1)  # up + down filter per activation, + activation_post


# --------------------------------------------------------------------------- tiny model


def test_tiny_has_every_kind_of_block(tiny_models: dict[str, torch.nn.Module]) -> None:
    for model in tiny_models.values():
        dit = model.code2wav_dit_model
        assert len(dit.transformer_blocks) >= 2
        assert type(dit.input_embed.spk_encoder).__name__ == "ECAPA_TimeDelayNet"
        bigvgan = model.code2wav_bigvgan_model
        amp = [m for m in bigvgan.resblocks if type(m).__name__ == "Qwen2_5OmniAMPBlock"]
        assert len(amp) >= 2
        assert type(bigvgan.activation_post).__name__ == "Qwen2_5OmniAntiAliasedActivation1d"
        filters = [n for n, _ in model.named_buffers() if n.endswith(".filter")]
        assert len(filters) == 2 * (6 * len(amp) + 1)
        assert "code2wav_bigvgan_model.activation_post.upsample.filter" in filters


def test_tiny_inventory_counts() -> None:
    vllm, tf = inventory("vllm-omni", "tiny"), inventory("transformers", "tiny")
    assert vllm.named_buffers == 51 and tf.named_buffers == 52
    assert vllm.persistent_buffers == [INV_FREQ] and tf.persistent_buffers == []
    assert tf.parameters - vllm.parameters == 4 * config_dict("tiny")["dit_config"]["num_hidden_layers"]
    assert vllm.parameter_elements == tf.parameter_elements


def test_vllm_omni_layout_fuses_qkv_and_keeps_inv_freq(tiny_models: dict[str, torch.nn.Module]) -> None:
    vllm, tf = tiny_models["vllm-omni"], tiny_models["transformers"]
    cfg = config_dict("tiny")["dit_config"]
    inner = cfg["head_dim"] * cfg["num_attention_heads"]
    for block_v, block_t in zip(vllm.code2wav_dit_model.transformer_blocks, tf.code2wav_dit_model.transformer_blocks):
        assert isinstance(block_v.attn, FusedQKVDiTAttention)
        assert not hasattr(block_v.attn, "to_q")
        assert block_v.attn.qkv_proj.weight.shape == (3 * inner, cfg["hidden_size"])
        assert block_t.attn.to_q.weight.shape == (inner, cfg["hidden_size"])
    rot_v, rot_t = vllm.code2wav_dit_model.rotary_embed, tf.code2wav_dit_model.rotary_embed
    assert "original_inv_freq" not in dict(rot_v.named_buffers())
    assert "original_inv_freq" in dict(rot_t.named_buffers())
    assert INV_FREQ in vllm.state_dict()
    assert INV_FREQ not in tf.state_dict()
    # only the q/k/v parameters differ between the layouts
    names_v, names_t = set(vllm.state_dict()) - {INV_FREQ}, set(tf.state_dict())
    assert {n for n in names_t - names_v if not any(f".{p}." in n for p in ("to_q", "to_k", "to_v"))} == set()
    assert {n for n in names_v - names_t if ".qkv_proj." not in n} == set()


def test_fused_attention_computes_the_unfused_function() -> None:
    """Module level: with qkv_proj = [to_q; to_k; to_v], the fused block matches transformers' DiTAttention."""
    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as mdl

    config = make_config(config_dict("tiny")).dit_config
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    unfused = mdl.DiTAttention(config).eval()
    fused = FusedQKVDiTAttention(config).eval()
    with torch.no_grad():
        fused.qkv_proj.weight.copy_(torch.cat([unfused.to_q.weight, unfused.to_k.weight, unfused.to_v.weight]))
        fused.qkv_proj.bias.copy_(torch.cat([unfused.to_q.bias, unfused.to_k.bias, unfused.to_v.bias]))
        fused.to_out.load_state_dict(unfused.to_out.state_dict())
        x = torch.randn(2, 7, config.hidden_size)
        rotary = mdl.Qwen2_5OmniDiTRotaryEmbedding(config=config)
        pos = torch.arange(7)[None].repeat(2, 1)
        emb = rotary(x, pos)
        torch.testing.assert_close(fused(x, position_embeddings=emb), unfused(x, position_embeddings=emb))
        # and the check can fail: a wrong stacking order gives a different output
        fused.qkv_proj.weight.copy_(torch.cat([unfused.to_k.weight, unfused.to_q.weight, unfused.to_v.weight]))
        assert not torch.allclose(fused(x, position_embeddings=emb), unfused(x, position_embeddings=emb))


# --------------------------------------------------------------------------- build_model


def test_build_model_uses_dtype_and_restores_the_default() -> None:
    before = torch.get_default_dtype()
    model = build_model(config_dict("tiny"), layout="transformers", device="meta", dtype=torch.bfloat16)
    assert torch.get_default_dtype() == before
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert not model.training


def test_build_model_restores_default_dtype_on_error() -> None:
    before = torch.get_default_dtype()
    bad = config_dict("tiny")
    bad["bigvgan_config"]["upsample_initial_channel"] = -4  # valid config, fails inside the constructor
    with pytest.raises(RuntimeError, match="negative dimension"):
        build_model(bad, device="meta", dtype=torch.float16)
    assert torch.get_default_dtype() == before


def test_build_model_computes_rotary_frequencies_in_the_constructor() -> None:
    cfg = config_dict("tiny")["dit_config"]
    model = build_model(config_dict("tiny"), layout="vllm-omni", device="cpu")
    dim = cfg["head_dim"]
    expected = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    torch.testing.assert_close(model.code2wav_dit_model.rotary_embed.inv_freq, expected)


def test_bad_layout_and_size_are_rejected() -> None:
    with pytest.raises(ValueError, match="layout"):
        build_model(config_dict("tiny"), layout="sglang", device="meta")
    with pytest.raises(ValueError, match="size"):
        config_dict("medium")


# --------------------------------------------------------------------------- construction modes


def _residency(construct: str) -> tuple[list[float], list[float]]:
    """Resident fractions of the parameters of 1 MiB or more right after a full-size construction in a
    fresh interpreter (in this one, freed memory may come back resident): (fused qkv_proj, all others)."""
    import json
    import subprocess
    import sys

    code = ("import json; from omni_loader.token2wav.model import build_model, config_dict; "
            "from omni_loader.host.residency import parameter_residency; "
            f"print(json.dumps(parameter_residency(build_model(config_dict('full'), construct='{construct}'))))")
    fractions = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                          check=True).stdout)
    qkv = [f for name, f in fractions.items() if ".qkv_proj." in name]
    return qkv, [f for name, f in fractions.items() if ".qkv_proj." not in name]


@pytest.mark.subprocess
@pytest.mark.slow
def test_resident_construction_leaves_every_parameter_resident() -> None:
    """The default: every parameter, the fused qkv_proj included, resident before weight loading, as device
    memory is when the allocator hands it out."""
    qkv, other = _residency("resident")
    assert len(qkv) == 22 and len(other) > 100
    assert min(qkv) == 1.0 and min(other) == 1.0


@pytest.mark.subprocess
@pytest.mark.slow
def test_upstream_cpu_construction_leaves_only_qkv_proj_untouched() -> None:
    """As vLLM-Omni on a CPU: constructors write every parameter but the fused qkv_proj (torch.empty upstream)."""
    qkv, other = _residency("upstream-cpu")
    assert len(qkv) == 22 and len(other) > 100
    assert min(other) == 1.0
    assert max(qkv) < 0.05


def test_construction_modes_by_name() -> None:
    """``resident`` is the default everywhere a load is set up; the old name ``upstream`` reads as ``upstream-cpu``."""
    from omni_loader.token2wav.options import LoadOptions
    from omni_loader.results.spec import BenchmarkSpec

    assert LoadOptions().construct == "resident" and BenchmarkSpec("ckpt").construct == "resident"
    assert LoadOptions(construct="upstream").construct == "upstream-cpu"
    assert BenchmarkSpec.from_metadata({"schema_version": 3, "benchmarks": {"load": {"spec": {
        "checkpoint": "c", "load": {"construct": "upstream"}}}}}).construct == "upstream-cpu"


@pytest.mark.subprocess
@pytest.mark.slow
def test_empty_construction_touches_no_parameter() -> None:
    qkv, other = _residency("empty")
    fractions = qkv + other
    assert len(qkv) == 22 and max(qkv) < 0.05
    # A few parameters may reuse pages that construction's own temporaries (the filters) touched.
    assert sum(f < 0.05 for f in fractions) >= 0.95 * len(fractions)
    assert sum(fractions) / len(fractions) < 0.05


def test_unknown_construction_mode() -> None:
    with pytest.raises(ValueError, match="--construct 'lazy' is not one of resident, upstream-cpu, empty, init"):
        build_model(config_dict("tiny"), device="meta", construct="lazy")
