"""The ``omni-loader`` command line: mostly in-process through ``cli.main``, a few real subprocesses."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import safetensors.torch
import torch

from omni_loader import __version__
from omni_loader.token2wav.checkpoint import INDEX_FILE, place_in_hub_cache
from omni_loader.cli import main
from omni_loader.names import LEAF_PHASES
from omni_loader.names import WEIGHT_LOADING_CHILDREN

INV_FREQ = "code2wav_dit_model.rotary_embed.inv_freq"
MODEL_ID = "Qwen/Qwen2.5-Omni-3B"
LOAD_KEYS = {
    "variant", "layout", "device", "phases", "state_dict_calls", "weights_loaded", "persistent_buffers", "digest",
}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("omni-loader: error: ")
    return lines[0]


# --------------------------------------------------------------------------- inventory


def test_inventory_json_full(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "inventory", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"modules", "named_buffers", "persistent_buffers", "parameters", "parameter_elements",
            "parameter_bytes"} <= set(data)
    assert data["named_buffers"] == 219
    assert data["persistent_buffers"] == [INV_FREQ]
    assert data["parameters"] == 720
    assert data["parameter_elements"] == 449_051_264
    assert data["parameter_bytes"] == 1_565_318_048  # DiT float32 + BigVGAN bfloat16, as vLLM-Omni 0.30.0


def test_inventory_json_tiny_transformers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "inventory", "--size", "tiny", "--layout", "transformers", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["named_buffers"], data["persistent_buffers"], data["parameters"]) == (52, [], 198)
    assert isinstance(data["persistent_buffers"], list)


def test_inventory_readable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "inventory", "--size", "tiny")
    assert code == 0
    assert out.splitlines()[0] == "Token2Wav (tiny, vllm-omni layout)"
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows["named_buffers"] == ["51"]
    assert rows["parameters"] == ["186"]
    assert rows["parameter_elements"] == ["341,104"]
    assert rows["persistent_buffers"] == ["1", INV_FREQ]


# --------------------------------------------------------------------------- load


@pytest.fixture(scope="module")
def load_json(tiny_snapshot: Path) -> Callable[..., dict]:
    cache: dict[tuple[str, ...], dict] = {}

    def get(*argv: str) -> dict:
        if argv not in cache:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert main(["load", "--checkpoint", str(tiny_snapshot), "--json", *argv]) == 0
            cache[argv] = json.loads(buf.getvalue())
        return cache[argv]

    return get


def test_load_json_keys_and_counts(load_json: Callable[..., dict], tiny_snapshot: Path) -> None:
    base = load_json("--variant", "baseline")
    opt = load_json("--variant", "optimized")
    for data, variant in ((base, "baseline"), (opt, "optimized")):
        assert LOAD_KEYS <= set(data)
        assert data["variant"] == variant
        assert data["layout"] == "vllm-omni" and data["device"] == "cpu"
        assert set(LEAF_PHASES) | {"weight_loading", "total"} <= set(data["phases"])
        assert data["weights_loaded"] == 187
        assert data["persistent_buffers"] == [INV_FREQ]
        assert data["checkpoint"]["checkpoint_dir"] == str(tiny_snapshot)
        assert data["checkpoint"]["checkpoint_source"] == "directory"
    assert (base["state_dict_calls"], opt["state_dict_calls"]) == (51, 0)
    assert base["digest"] == opt["digest"] and base["digest"].startswith("xxh3-128:")


def test_load_json_transformers_layout(load_json: Callable[..., dict]) -> None:
    data = load_json("--variant", "baseline", "--layout", "transformers")
    assert data["layout"] == "transformers"
    assert (data["state_dict_calls"], data["weights_loaded"], data["persistent_buffers"]) == (52, 198, [])


def test_load_readable(capsys: pytest.CaptureFixture[str], tiny_snapshot: Path, load_json: Callable[..., dict]) -> None:
    code, out, _ = run_cli(capsys, "load", "--variant", "baseline", "--checkpoint", str(tiny_snapshot))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == ("Token2Wav load: variant=baseline layout=vllm-omni device=cpu dtype=float32"
                        " construct=resident")
    assert lines[1] == f"checkpoint: {tiny_snapshot} (directory)"
    data = load_json("--variant", "baseline")
    for phase in ("total", "outer_load_weights", "weight_loading", *LEAF_PHASES):
        (row,) = [line for line in lines if line.split()[0] == phase]
        name, seconds, unit, faults, *_ = row.split()
        assert unit == "ms"
        float(seconds)
        assert faults.replace(",", "").isdigit()
    # in the order they run, each enclosing phase right above the phases it encloses, indented one step deeper
    order = [line.split()[0] for line in lines[3:3 + 3 + len(LEAF_PHASES)]]
    assert order == ["total", "construct", "outer_load_weights", "read_checkpoint", "hub_check", "speaker_conditioning",
                     "weight_loading", *WEIGHT_LOADING_CHILDREN, "post_load"]
    depth = {line.split()[0]: (len(line) - len(line.lstrip())) // 2 for line in lines[3:3 + len(order)]}
    assert [depth[p] for p in ("total", "construct", "outer_load_weights", "read_checkpoint", "weight_loading",
                               "buffer_discovery", "post_load")] == [1, 2, 2, 3, 3, 4, 2]
    assert "state_dict() calls: 51" in lines
    assert "weights loaded:     187" in lines
    assert f"persistent buffers: {INV_FREQ}" in lines
    assert any(line.startswith(f"digest:             {data['digest']} (") for line in lines)


def test_load_from_hub_cache(capsys: pytest.CaptureFixture[str], tiny_snapshot: Path, tmp_path: Path,
                             load_json: Callable[..., dict]) -> None:
    cache = tmp_path / "hub"
    place_in_hub_cache(tiny_snapshot, cache, MODEL_ID)
    code, out, _ = run_cli(capsys, "load", "--model", MODEL_ID, "--hf-cache", str(cache), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["checkpoint"]["checkpoint_source"] == "hub-cache"
    assert data["checkpoint"]["model_id"] == MODEL_ID
    assert data["digest"] == load_json("--variant", "optimized")["digest"]

    code, _, err = run_cli(capsys, "load", "--model", "Nobody/Nothing", "--hf-cache", str(cache))
    assert code == 2
    assert "'Nobody/Nothing'" in one_error_line(err)


# --------------------------------------------------------------------------- synth


def test_synth(capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_snapshot: Path) -> None:
    out_dir = tmp_path / "snap"
    code, out, _ = run_cli(capsys, "synth", "--size", "tiny", "--out", str(out_dir))
    assert code == 0
    assert str(out_dir) in out
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(p.name for p in tiny_snapshot.iterdir())
    assert (out_dir / INDEX_FILE).read_text() == (tiny_snapshot / INDEX_FILE).read_text()

    code, _, err = run_cli(capsys, "synth", "--size", "tiny", "--out", str(out_dir), "--seed", "4")
    assert code == 2
    assert str(out_dir) in one_error_line(err)

    code, _, _ = run_cli(capsys, "synth", "--size", "tiny", "--out", str(out_dir), "--seed", "4", "--force",
                         "--hub-cache", str(tmp_path / "hub"), "--model-id", "Org/Tiny")
    assert code == 0
    assert json.loads((out_dir / "config.json").read_text())["omni_loader_synthetic"]["seed"] == 4
    assert list((tmp_path / "hub" / "models--Org--Tiny" / "snapshots").iterdir())


def test_synth_without_out_writes_the_snapshot_reproduce_reads(capsys, tmp_path, monkeypatch) -> None:
    """`synth` with no --out makes the cache's default snapshot ahead of a first reproduce: the very directory
    reproduce then finds, with the tensors `--out` gets; again, it is found and left as it is; --force writes
    it anew."""
    from omni_loader.token2wav.checkpoint import resolve_snapshot

    monkeypatch.setenv("OMNI_LOADER_CACHE", str(tmp_path / "cache"))
    code, out, _ = run_cli(capsys, "synth", "--size", "tiny", "--seed", "7")
    made = resolve_snapshot(size="tiny", seed=7).root
    assert code == 0 and out.startswith("wrote the default synthetic tiny snapshot (seed 7)") and str(made) in out
    assert made.parent.parent == tmp_path / "cache"
    assert run_cli(capsys, "synth", "--size", "tiny", "--seed", "7", "--out", str(tmp_path / "elsewhere"))[0] == 0
    assert (made / INDEX_FILE).read_text() == (tmp_path / "elsewhere" / INDEX_FILE).read_text()
    shard = next(made.glob("*.safetensors"))
    assert shard.read_bytes() == (tmp_path / "elsewhere" / shard.name).read_bytes()
    written = shard.stat().st_mtime_ns
    code, out, _ = run_cli(capsys, "synth", "--size", "tiny", "--seed", "7")
    assert code == 0 and out.startswith("found the default") and shard.stat().st_mtime_ns == written
    code, out, _ = run_cli(capsys, "synth", "--size", "tiny", "--seed", "7", "--force")
    assert code == 0 and out.startswith("wrote the default") and next(made.glob("*.safetensors")).stat().st_mtime_ns != written


# --------------------------------------------------------------------------- bad inputs


def _copy(tiny_snapshot: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))


def _shard_of(snap: Path, key: str) -> Path:
    return snap / json.loads((snap / INDEX_FILE).read_text())["weight_map"][key]


def _missing_dir(snap: Path) -> tuple[Path, str]:
    target = snap.parent / "does-not-exist"
    return target, str(target)


def _no_token2wav_keys(snap: Path) -> tuple[Path, str]:
    index = json.loads((snap / INDEX_FILE).read_text())
    index["weight_map"] = {"talker." + k.removeprefix("token2wav."): v for k, v in index["weight_map"].items()}
    (snap / INDEX_FILE).write_text(json.dumps(index))
    return snap, str(snap)


def _truncated_shard(snap: Path) -> tuple[Path, str]:
    shard = _shard_of(snap, "token2wav." + INV_FREQ)
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) * 2 // 3])
    return snap, str(shard)


def _shape_mismatch(snap: Path) -> tuple[Path, str]:
    key = "token2wav.code2wav_bigvgan_model.conv_post.weight"
    shard = _shard_of(snap, key)
    tensors = safetensors.torch.load_file(str(shard))
    tensors[key] = torch.zeros(3, 5, 7)
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    return snap, key


def _shape_mismatch_fused(snap: Path) -> tuple[Path, str]:
    key = "token2wav.code2wav_dit_model.transformer_blocks.1.attn.to_v.weight"
    shard = _shard_of(snap, key)
    tensors = safetensors.torch.load_file(str(shard))
    tensors[key] = tensors[key][:-1]
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    return snap, key


def _missing_key(snap: Path) -> tuple[Path, str]:
    key = "token2wav.code2wav_dit_model.proj_out.bias"
    shard = _shard_of(snap, key)
    index = json.loads((snap / INDEX_FILE).read_text())
    del index["weight_map"][key]
    (snap / INDEX_FILE).write_text(json.dumps(index))
    tensors = safetensors.torch.load_file(str(shard))
    del tensors[key]
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    return snap, key


def _index_points_nowhere(snap: Path) -> tuple[Path, str]:
    key = "token2wav.code2wav_dit_model.proj_out.bias"
    shard = _shard_of(snap, key)
    tensors = safetensors.torch.load_file(str(shard))
    del tensors[key]  # still listed in the index
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    return snap, key


@pytest.mark.parametrize(
    "mutate",
    [_missing_dir, _no_token2wav_keys, _truncated_shard, _shape_mismatch, _shape_mismatch_fused, _missing_key,
     _index_points_nowhere],
    ids=lambda f: f.__name__.strip("_"),
)
@pytest.mark.parametrize("layout", ["vllm-omni", "transformers"])
def test_bad_checkpoint(
    capsys: pytest.CaptureFixture[str], tiny_snapshot: Path, tmp_path: Path, mutate, layout: str
) -> None:
    snap, culprit = mutate(_copy(tiny_snapshot, tmp_path))
    code, out, err = run_cli(capsys, "load", "--checkpoint", str(snap), "--layout", layout)
    assert code == 2
    assert culprit in one_error_line(err)
    assert out == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_without_gpu(capsys: pytest.CaptureFixture[str], tiny_snapshot: Path) -> None:
    code, _, err = run_cli(capsys, "load", "--checkpoint", str(tiny_snapshot), "--device", "cuda")
    assert code == 2
    assert "--device cuda" in one_error_line(err)


def test_unknown_device(capsys: pytest.CaptureFixture[str], tiny_snapshot: Path) -> None:
    code, _, err = run_cli(capsys, "load", "--checkpoint", str(tiny_snapshot), "--device", "tpu")
    assert code == 2
    assert "--device 'tpu'" in one_error_line(err)


def test_malformed_model_id(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "load", "--model", "not/a/valid id", "--hf-cache", str(tmp_path))
    assert code == 2
    assert "'not/a/valid id'" in one_error_line(err)


def test_the_checkpoint_options_are_the_fields_of_checkpoint_options(capsys: pytest.CaptureFixture[str]) -> None:
    """Each CheckpointOptions field is one option of the commands that load, with its help and default, parsed back
    into the same value (one declaration: a hand-written copy kept its own flags and defaults)."""
    from omni_loader.cli import parse_args
    from omni_loader.cli.options import checkpoint_options
    from omni_loader.token2wav.options import CheckpointOptions, flag, option_fields

    assert checkpoint_options(parse_args(["load"])) == CheckpointOptions()
    given = parse_args(["load", "--checkpoint", "/s", "--model", "a/b", "--size", "tiny", "--seed", "3", "--hf-cache",
                        "/h", "--download"])
    assert checkpoint_options(given) == CheckpointOptions("/s", "a/b", "tiny", 3, "/h", True)
    with pytest.raises(SystemExit):
        parse_args(["load", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for f in option_fields(CheckpointOptions).values():
        assert f"{flag(f)} " in shown and f.metadata["help"] in shown, flag(f)
    with pytest.raises(SystemExit) as info:
        main(["load", "--size", "huge"])
    assert info.value.code == 2 and "--size" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["load", "--variant", "fastest"])
    assert info.value.code == 2
    assert "--variant" in capsys.readouterr().err


# --------------------------------------------------------------------------- real subprocesses


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return env


@pytest.mark.subprocess
def test_version_subprocess(python: str) -> None:
    proc = subprocess.run([python, "-m", "omni_loader", "--version"],
                          capture_output=True, text=True, check=False, timeout=120, env=_subprocess_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"omni-loader {__version__}"


@pytest.mark.slow
@pytest.mark.subprocess
def test_console_script_load_json(python: str, tiny_snapshot: Path, load_json: Callable[..., dict]) -> None:
    script = Path(python).parent / "omni-loader"
    assert script.is_file(), f"console script not installed next to {python}"
    proc = subprocess.run([str(script), "load", "--variant", "baseline", "--checkpoint", str(tiny_snapshot), "--json"],
                          capture_output=True, text=True, check=False, timeout=180, env=_subprocess_env())
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["state_dict_calls"] == 51
    assert data["digest"] == load_json("--variant", "baseline")["digest"]  # same model in a fresh process


@pytest.mark.slow
@pytest.mark.subprocess
def test_subprocess_error_is_one_line(python: str, tiny_snapshot: Path, tmp_path: Path) -> None:
    """In a real process, nothing else (warnings, logging, a traceback) reaches stderr."""
    snap, key = _shape_mismatch(_copy(tiny_snapshot, tmp_path))
    proc = subprocess.run([python, "-m", "omni_loader", "load", "--checkpoint", str(snap)],
                          capture_output=True, text=True, check=False, timeout=180, env=_subprocess_env())
    assert proc.returncode == 2
    assert key in one_error_line(proc.stderr)
    assert proc.stdout == ""
