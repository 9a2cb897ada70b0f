"""Snapshots in the Hub layout: synthesis, checking, the Hugging Face cache lookup."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import safetensors.torch
import torch
from safetensors import safe_open

from omni_loader.token2wav.checkpoint import (CONFIG_FILE, INDEX_FILE, SINGLE_FILE, SPK_DICT_FILE,
                                              checkpoint_tensor_specs, ensure_synthetic, find_in_hub_cache,
                                              iter_token2wav_weights, open_snapshot, place_in_hub_cache,
                                              resolve_snapshot, synthesize)
from omni_loader.errors import CheckpointError
from omni_loader.token2wav.model import build_model, config_dict, shipped_tensor_specs
from omni_loader.token2wav.options import CheckpointOptions

SHARD_RE = re.compile(r"model-(\d{5})-of-(\d{5})\.safetensors")
INV_FREQ_KEY = "token2wav.code2wav_dit_model.rotary_embed.inv_freq"
MODEL_ID = "Qwen/Qwen2.5-Omni-3B"


def _shard_digest(root: Path) -> str:
    h = hashlib.sha256()
    for shard in sorted(root.glob("model-*.safetensors")):
        h.update(shard.name.encode())
        h.update(shard.read_bytes())
    return h.hexdigest()


def _tensors(root: Path) -> dict[str, torch.Tensor]:
    return dict(iter_token2wav_weights(open_snapshot(root)))


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".tmp-" in p.name)


@pytest.fixture(scope="module")
def tiny_specs() -> dict:
    return checkpoint_tensor_specs(config_dict("tiny"))


# --------------------------------------------------------------------------- specs


def test_full_checkpoint_specs_match_the_released_checkpoint() -> None:
    specs = checkpoint_tensor_specs(config_dict("full"))
    assert all(k.startswith("token2wav.") for k in specs)
    assert len(specs) == 808 + 1  # 808 parameters + the rotary inv_freq
    params = {k: v for k, v in specs.items() if k != INV_FREQ_KEY}
    assert sum(torch.Size(shape).numel() for shape, _ in params.values()) == 449_051_264
    assert {dtype for _, dtype in specs.values()} == {torch.float32}
    assert specs[INV_FREQ_KEY][0] == (32,)  # head_dim 64 / 2
    assert specs["token2wav.code2wav_dit_model.transformer_blocks.0.attn.to_q.weight"][0] == (1024, 1024)
    assert not any("qkv_proj" in k for k in specs)


@pytest.mark.parametrize("size", ["tiny", "full"])
def test_shipped_tensor_list_is_transformers_model(size: str) -> None:
    """The synthetic snapshot writes its tensors from data/token2wav-SIZE-tensors.json, not from the model
    (whose import costs seconds): the file must be the model's list, in its order (the order fixes the
    random stream, so the snapshot's bytes). After a transformers upgrade that changes it, rewrite the file
    from checkpoint_tensor_specs(config_dict(size))."""
    derived = checkpoint_tensor_specs(config_dict(size))
    assert list(shipped_tensor_specs(size).items()) == list(derived.items())


# --------------------------------------------------------------------------- the snapshot on disk


def test_tiny_snapshot_layout(tiny_snapshot: Path, tiny_specs: dict) -> None:
    names = {p.name for p in tiny_snapshot.iterdir()}
    assert {CONFIG_FILE, INDEX_FILE, SPK_DICT_FILE} <= names
    shards = sorted(n for n in names if n.endswith(".safetensors"))
    assert shards and all(SHARD_RE.fullmatch(s) for s in shards)
    assert names == {CONFIG_FILE, INDEX_FILE, SPK_DICT_FILE, *shards}

    config = json.loads((tiny_snapshot / CONFIG_FILE).read_text())
    assert config["token2wav_config"] == config_dict("tiny")
    assert config["omni_loader_synthetic"]["seed"] == 0

    index = json.loads((tiny_snapshot / INDEX_FILE).read_text())
    assert set(index["weight_map"]) == set(tiny_specs)
    assert set(index["weight_map"].values()) == set(shards)
    assert index["metadata"]["total_size"] == sum(
        torch.Size(s).numel() * d.itemsize for s, d in tiny_specs.values()
    )

    on_disk = {}
    for shard in shards:
        with safe_open(str(tiny_snapshot / shard), framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                assert index["weight_map"][key] == shard
                t = fh.get_tensor(key)
                on_disk[key] = (tuple(t.shape), t.dtype)
    assert on_disk == tiny_specs


def test_spk_dict(tiny_snapshot: Path) -> None:
    dit = config_dict("tiny")["dit_config"]
    spk = torch.load(tiny_snapshot / SPK_DICT_FILE, weights_only=True)
    assert set(spk) == {"Chelsie", "Ethan"}
    for entry in spk.values():
        assert entry["cond"].shape == (1, dit["enc_emb_dim"])
        assert entry["ref_mel"].shape[0] == 1 and entry["ref_mel"].shape[2] == dit["mel_dim"]
        assert entry["bos_token"] == dit["num_embeds"] - 1
    assert not torch.equal(spk["Chelsie"]["cond"], spk["Ethan"]["cond"])


def test_checkpoint_inv_freq_is_what_the_constructor_computes(tiny_snapshot: Path) -> None:
    model = build_model(config_dict("tiny"), layout="transformers", device="cpu")
    with safe_open(str(tiny_snapshot / open_snapshot(tiny_snapshot).weight_map[INV_FREQ_KEY]), framework="pt") as fh:
        saved = fh.get_tensor(INV_FREQ_KEY)
    torch.testing.assert_close(saved, model.code2wav_dit_model.rotary_embed.inv_freq, rtol=0, atol=0)


def test_open_snapshot(tiny_snapshot: Path, tiny_specs: dict) -> None:
    snap = open_snapshot(tiny_snapshot)
    assert snap.root == tiny_snapshot
    assert snap.source == "directory"
    assert set(snap.weight_map) == set(tiny_specs)
    assert snap.spk_dict_path == tiny_snapshot / SPK_DICT_FILE
    assert snap.synthetic["size"] == "tiny"
    described = snap.describe()
    assert described["checkpoint_tensors"] == len(tiny_specs)
    assert described["checkpoint_source"] == "directory"
    assert described["checkpoint_shards"] == snap.shards


# --------------------------------------------------------------------------- determinism


def test_synth_is_deterministic(tiny_snapshot: Path, tmp_path: Path) -> None:
    again = synthesize(tmp_path / "again", size="tiny", seed=0)
    other = synthesize(tmp_path / "other", size="tiny", seed=1)
    assert _shard_digest(again) == _shard_digest(tiny_snapshot)
    for shard in tiny_snapshot.glob("model-*.safetensors"):
        assert (again / shard.name).read_bytes() == shard.read_bytes()
    assert (again / INDEX_FILE).read_text() == (tiny_snapshot / INDEX_FILE).read_text()
    assert _shard_digest(other) != _shard_digest(tiny_snapshot)
    spk0 = torch.load(again / SPK_DICT_FILE, weights_only=True)
    spk_ref = torch.load(tiny_snapshot / SPK_DICT_FILE, weights_only=True)
    spk1 = torch.load(other / SPK_DICT_FILE, weights_only=True)
    assert torch.equal(spk0["Ethan"]["ref_mel"], spk_ref["Ethan"]["ref_mel"])
    for speaker in ("Chelsie", "Ethan"):  # every field of every speaker comes from the seed
        assert torch.equal(spk0[speaker]["cond"], spk_ref[speaker]["cond"])
        assert torch.equal(spk0[speaker]["ref_mel"], spk_ref[speaker]["ref_mel"])
        assert spk0[speaker]["bos_token"] == spk_ref[speaker]["bos_token"]
    assert not torch.equal(spk1["Ethan"]["ref_mel"], spk_ref["Ethan"]["ref_mel"])
    # only the random tensors differ with the seed; inv_freq is computed
    t0, t1 = _tensors(tiny_snapshot), _tensors(other)
    assert torch.equal(t0[INV_FREQ_KEY], t1[INV_FREQ_KEY])
    differing = [k for k in t0 if not torch.equal(t0[k], t1[k])]
    assert len(differing) == len(t0) - 1
    # what the synthesis itself writes, held against what it does not make (the session's snapshot is made by it)
    import stat

    made = _tensors(again)
    model = build_model(config_dict("tiny"), layout="transformers", device="cpu")
    assert torch.equal(made[INV_FREQ_KEY], model.code2wav_dit_model.rotary_embed.inv_freq)  # as the constructor
    index = json.loads((again / INDEX_FILE).read_text())  # the Hub layout's index: its total size, every key's shard
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in made.values())
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in again.glob("*.safetensors"))  # shared, not 0600


def test_sharded_synth_has_the_same_tensors(tiny_snapshot: Path, tmp_path: Path) -> None:
    sharded = synthesize(tmp_path / "sharded", size="tiny", seed=0, shard_bytes=200_000)
    shards = sorted(p.name for p in sharded.glob("*.safetensors"))
    total = len(shards)
    assert total > 2
    assert [SHARD_RE.fullmatch(s).groups() for s in shards] == [
        (f"{i:05d}", f"{total:05d}") for i in range(1, total + 1)
    ]
    weight_map = json.loads((sharded / INDEX_FILE).read_text())["weight_map"]
    assert set(weight_map.values()) == set(shards)
    a, b = _tensors(tiny_snapshot), _tensors(sharded)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- atomic writes


class _FailingSave:
    """safetensors.torch.save_file that writes normally, then raises on call number ``fail_on``."""

    def __init__(self, real, fail_on: int, exc: BaseException) -> None:
        self.real, self.fail_on, self.exc, self.calls = real, fail_on, exc, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_on:
            raise self.exc
        return self.real(*args, **kwargs)


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()], ids=["oserror", "interrupt"])
def test_synth_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    saver = _FailingSave(safetensors.torch.save_file, fail_on=2, exc=exc)
    monkeypatch.setattr(safetensors.torch, "save_file", saver)
    out = tmp_path / "tiny"
    with pytest.raises(type(exc)):
        synthesize(out, size="tiny", seed=0, shard_bytes=200_000)
    assert saver.calls == 2  # one shard was written before the failure
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    assert _leftovers(tmp_path) == []


def test_failed_overwrite_keeps_the_old_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = synthesize(tmp_path / "tiny", size="tiny", seed=0)
    before = _shard_digest(out)
    monkeypatch.setattr(safetensors.torch, "save_file", _FailingSave(safetensors.torch.save_file, 1, OSError("boom")))
    with pytest.raises(OSError):
        synthesize(out, size="tiny", seed=1, overwrite=True)
    assert _shard_digest(out) == before
    assert _leftovers(tmp_path) == []


def test_synth_refuses_a_non_empty_out(tmp_path: Path) -> None:
    out = tmp_path / "occupied"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match=re.escape(str(out))):
        synthesize(out, size="tiny")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert _leftovers(tmp_path) == []


def test_synth_into_an_empty_dir_and_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    synthesize(out, size="tiny", seed=0)
    (out / "stale.txt").write_text("old")
    first = _shard_digest(out)
    synthesize(out, size="tiny", seed=1, overwrite=True)
    assert not (out / "stale.txt").exists()
    assert _shard_digest(out) != first
    assert json.loads((out / CONFIG_FILE).read_text())["omni_loader_synthetic"]["seed"] == 1


def test_synth_overwrite_replaces_a_file(tmp_path: Path) -> None:
    out = tmp_path / "afile"
    out.write_text("not a snapshot")
    with pytest.raises(CheckpointError, match="afile"):
        synthesize(out, size="tiny")
    synthesize(out, size="tiny", overwrite=True)
    assert open_snapshot(out).weight_map


def test_synth_keeps_a_snapshot_another_process_finished_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "tiny"
    real = safetensors.torch.save_file

    def save_and_race(*args, **kwargs):
        out.mkdir(exist_ok=True)
        (out / INDEX_FILE).write_text('{"weight_map": {}, "winner": "other"}')
        return real(*args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", save_and_race)
    assert synthesize(out, size="tiny") == out
    assert json.loads((out / INDEX_FILE).read_text())["winner"] == "other"
    assert _leftovers(tmp_path) == []


def test_ensure_synthetic_makes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNI_LOADER_CACHE", str(tmp_path))
    path = ensure_synthetic("tiny", seed=3)
    assert path == tmp_path / "synthetic" / "tiny-seed3"
    stamp = (path / INDEX_FILE).stat().st_mtime_ns
    assert ensure_synthetic("tiny", seed=3) == path
    assert (path / INDEX_FILE).stat().st_mtime_ns == stamp
    snap = resolve_snapshot(size="tiny", seed=3)
    assert snap.source == "synthetic" and snap.root == path
    assert snap.synthetic == {"size": "tiny", "seed": 3, "note": snap.synthetic["note"]}


# --------------------------------------------------------------------------- the Hugging Face cache


def test_hub_cache_lookup_by_model_id(tiny_snapshot: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    target = place_in_hub_cache(tiny_snapshot, cache, MODEL_ID)
    assert target.parent.parent == cache / "models--Qwen--Qwen2.5-Omni-3B"
    snap = find_in_hub_cache(MODEL_ID, cache_dir=cache)
    assert snap.source == "hub-cache"
    assert snap.model_id == MODEL_ID
    assert snap.root.resolve() == target.resolve()
    assert snap.revision == target.name
    assert snap.weight_map == open_snapshot(tiny_snapshot).weight_map
    via_resolve = resolve_snapshot(model_id=MODEL_ID, cache_dir=cache)
    assert via_resolve.source == "hub-cache" and via_resolve.root == snap.root


def test_unknown_model_id(tiny_snapshot: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    place_in_hub_cache(tiny_snapshot, cache, MODEL_ID)
    with pytest.raises(CheckpointError, match=re.escape("'Nobody/NoSuchModel'")) as info:
        find_in_hub_cache("Nobody/NoSuchModel", cache_dir=cache)
    assert str(cache) in str(info.value)
    assert "\n" not in str(info.value)


def test_malformed_model_id_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=re.escape("'not a valid id!!'")) as info:
        find_in_hub_cache("not a valid id!!", cache_dir=tmp_path)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- checking a snapshot


@pytest.fixture
def snap_copy(tiny_snapshot: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_snapshot, tmp_path / "copy"))


def test_single_file_snapshot(snap_copy: Path, tiny_specs: dict) -> None:
    shards = list(snap_copy.glob("model-*.safetensors"))
    assert len(shards) == 1
    shards[0].rename(snap_copy / SINGLE_FILE)
    (snap_copy / INDEX_FILE).unlink()
    snap = open_snapshot(snap_copy)
    assert snap.weight_map == dict.fromkeys(tiny_specs, SINGLE_FILE)
    assert {k: (tuple(t.shape), t.dtype) for k, t in iter_token2wav_weights(snap)} == tiny_specs


def test_other_tensors_are_ignored(snap_copy: Path) -> None:
    index = json.loads((snap_copy / INDEX_FILE).read_text())
    index["weight_map"]["thinker.lm_head.weight"] = "model-00009-of-00009.safetensors"  # not fetched, not needed
    (snap_copy / INDEX_FILE).write_text(json.dumps(index))
    snap = open_snapshot(snap_copy)
    assert "thinker.lm_head.weight" not in snap.weight_map
    assert all(k.startswith("token2wav.") for k in snap.weight_map)


@pytest.mark.parametrize(
    "mutate, culprit",
    [
        (lambda d: (d / CONFIG_FILE).unlink(), CONFIG_FILE),
        (lambda d: (d / CONFIG_FILE).write_text("{not json"), CONFIG_FILE),
        (lambda d: (d / CONFIG_FILE).write_text('{"model_type": "qwen2_5_omni"}'), CONFIG_FILE),
        (lambda d: (d / SPK_DICT_FILE).unlink(), SPK_DICT_FILE),
        (lambda d: (d / "model-00001-of-00001.safetensors").unlink(), "model-00001-of-00001.safetensors"),
        (lambda d: (d / INDEX_FILE).write_text('{"metadata": {}}'), INDEX_FILE),
        (lambda d: (d / INDEX_FILE).unlink(), INDEX_FILE),
    ],
    ids=["no-config", "bad-json", "no-token2wav-config", "no-spk-dict", "missing-shard", "no-weight-map", "no-index"],
)
def test_open_snapshot_names_the_culprit(snap_copy: Path, mutate, culprit: str) -> None:
    mutate(snap_copy)
    with pytest.raises(CheckpointError) as info:
        open_snapshot(snap_copy)
    message = str(info.value)
    assert culprit in message
    assert str(snap_copy) in message
    assert "\n" not in message


# --------------------------------------------------------------------------- exact records, defaults, the Hub offline


def test_describe_is_the_metadata_record(tiny_snapshot: Path) -> None:
    snap = open_snapshot(tiny_snapshot, model_id="Org/Name")
    assert snap.describe() == {
        "checkpoint_dir": str(tiny_snapshot), "checkpoint_source": "directory", "model_id": "Org/Name",
        "revision": None, "synthetic": {"size": "tiny", "seed": 0, "note": snap.synthetic["note"]},
        "checkpoint_tensors": len(snap.weight_map), "checkpoint_shards": sorted(set(snap.weight_map.values())),
    }


def test_synthesized_config_is_shaped_like_the_released_one(tmp_path: Path) -> None:
    snap = synthesize(tmp_path / "snap", size="tiny", seed=2)  # made here, not by the shared fixture
    config = json.loads((snap / CONFIG_FILE).read_text())
    assert config["architectures"] == ["Qwen2_5OmniModel"]
    assert config["model_type"] == "qwen2_5_omni" and config["enable_audio_output"] is True
    assert config["token2wav_config"] == config_dict("tiny")
    assert config["omni_loader_synthetic"] == {"size": "tiny", "seed": 2,
                                               "note": "random weights; names, shapes, dtypes as released"}


def test_corrupt_single_file_names_it(snap_copy: Path) -> None:
    (snap_copy / INDEX_FILE).unlink()
    for shard in snap_copy.glob("model-*.safetensors"):
        shard.unlink()
    (snap_copy / SINGLE_FILE).write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match=re.escape(f"truncated or corrupt shard {snap_copy / SINGLE_FILE}: ")) as e:
        open_snapshot(snap_copy)
    assert str(e.value).split(": ", 1)[1] not in ("", "None")  # safetensors' own reason follows


def test_a_json_file_that_is_not_an_object_is_refused_naming_what_it_holds(snap_copy: Path) -> None:
    (snap_copy / CONFIG_FILE).write_text("[1, 2]")
    with pytest.raises(CheckpointError) as info:
        open_snapshot(snap_copy)
    assert str(info.value) == (f"{snap_copy / CONFIG_FILE} holds a JSON list, not an object: it is not a Hugging Face "
                               f"{CONFIG_FILE}")


def test_a_synthesis_removes_the_temporaries_its_dead_predecessors_left_and_no_living_ones(tmp_path: Path) -> None:
    """Beside ``out``, a hidden temporary whose maker is dead is removed; one whose maker lives (another synthesis
    of the same snapshot, still writing) is kept, and so is another snapshot's."""
    import psutil

    dead = 2**22 + 1  # above Linux's largest pid: no process has it
    assert not psutil.pid_exists(dead)
    left = [f".snap.tmp-{dead}-abcdefgh", f".snap.tmp-{os.getpid()}-abcdefgh", f".other.tmp-{dead}-abcdefgh"]
    for name in left:
        (tmp_path / name).mkdir()
        (tmp_path / name / "model-00001-of-00002.safetensors").write_bytes(b"x" * 1000)
    synthesize(tmp_path / "snap", size="tiny")
    assert sorted(os.listdir(tmp_path)) == sorted([*left[1:], "snap"])


def test_default_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omni_loader.token2wav.checkpoint import default_cache_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OMNI_LOADER_CACHE", "")  # empty: not set
    assert default_cache_dir() == tmp_path / ".cache" / "omni-loader"
    monkeypatch.delenv("OMNI_LOADER_CACHE")
    assert default_cache_dir() == tmp_path / ".cache" / "omni-loader"
    monkeypatch.setenv("OMNI_LOADER_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"


def test_resolve_snapshot_defaults_and_precedence(tiny_snapshot: Path, tmp_path: Path, capsys) -> None:
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(resolve_snapshot).parameters.items()}
    assert defaults == {**asdict(CheckpointOptions()), "progress": False}  # the options' fields, as declared
    snap = resolve_snapshot(checkpoint=tiny_snapshot, model_id="Org/Name", size="nope")  # --checkpoint wins
    assert (snap.root, snap.source, snap.model_id) == (tiny_snapshot, "directory", "Org/Name")
    capsys.readouterr()
    resolve_snapshot(size="tiny", seed=5)  # synthesized quietly unless asked
    assert capsys.readouterr().err == ""


def test_place_in_hub_cache_names_a_snapshot_by_its_files_and_place(tiny_snapshot: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    first = place_in_hub_cache(tiny_snapshot, cache, MODEL_ID)
    assert place_in_hub_cache(tiny_snapshot, cache, MODEL_ID) == first  # again: replaced in place
    repo = cache / "models--Qwen--Qwen2.5-Omni-3B"
    assert (repo / "refs" / "main").read_text() == first.name and first.parent == repo / "snapshots"
    other = Path(shutil.copytree(tiny_snapshot, tmp_path / "elsewhere"))
    moved = place_in_hub_cache(other, cache, MODEL_ID)  # same files, another place: another snapshot
    assert moved.name != first.name and (repo / "refs" / "main").read_text() == moved.name
    (other / "extra.txt").write_text("x")
    assert place_in_hub_cache(other, cache, MODEL_ID).name != moved.name  # same place, other files
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in tiny_snapshot.iterdir())


def test_hub_lookup_by_revision_offline_download_and_default_cache(
    tiny_snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants as hub

    cache = tmp_path / "hub"
    target = place_in_hub_cache(tiny_snapshot, cache, MODEL_ID)
    assert find_in_hub_cache(MODEL_ID, cache_dir=cache, revision=target.name).revision == target.name
    with pytest.raises(CheckpointError, match="is not in"):
        find_in_hub_cache(MODEL_ID, cache_dir=cache, revision="0" * 40)  # a revision that is not cached
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)  # --download, answered from the cache: no network here
    snap = find_in_hub_cache(MODEL_ID, cache_dir=cache, download=True)
    assert snap.root.resolve() == target.resolve() and snap.source == "hub-cache"
    assert resolve_snapshot(model_id=MODEL_ID, cache_dir=cache, download=True).root == snap.root
    with pytest.raises(CheckpointError) as err:  # offline, a model not cached: the download itself fails
        find_in_hub_cache("Nobody/Nothing", cache_dir=cache, download=True)
    said = str(err.value)  # the library's reason, its last line, between the kit's words
    assert said.startswith(f"--download of 'Nobody/Nothing' from {hub.ENDPOINT} failed (") and said.endswith(
        "); check the network (HF_ENDPOINT, HF_HUB_OFFLINE, proxies), or pass --checkpoint DIR")
    reason = said.split(" failed (", 1)[1].rsplit("); check the network", 1)[0]
    assert "\n" not in said and " " in reason.strip()  # the library's sentence, not its error type's name
    ref = cache / "models--Qwen--Qwen2.5-Omni-3B" / "refs" / "v1"
    ref.write_text("../../../elsewhere")  # a ref of this cache, by the revision asked for, that leads out of it
    with pytest.raises(CheckpointError) as err:
        find_in_hub_cache(MODEL_ID, cache_dir=cache, revision="v1")
    assert str(err.value) == (f"{ref} holds '../../../elsewhere', not a commit hash: it would lead out of the Hugging "
                              "Face cache; refusing to follow it (repair the cache, or pass --checkpoint DIR)")
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(CheckpointError) as err:
        find_in_hub_cache(MODEL_ID)
    assert str(err.value) == (f"model {MODEL_ID!r} is not in the default Hugging Face cache (HF_HUB_CACHE); "
                              "pass --download to fetch it, or --checkpoint DIR")
    with pytest.raises(CheckpointError) as err:
        find_in_hub_cache("not a valid id!!", cache_dir=cache)
    assert str(err.value).startswith("not a valid Hugging Face model id: 'not a valid id!!' (")
    assert "None" not in str(err.value)  # the validator's own reason, first line


def test_shards_fill_up_to_the_limit() -> None:
    from omni_loader.token2wav.checkpoint import _plan_shards

    f32 = torch.float32
    specs = {"a": ((10,), f32), "b": ((10,), f32), "c": ((10,), f32)}  # 40 bytes each
    assert _plan_shards(specs, 80) == [["a", "b"], ["c"]]  # exactly full still fits
    assert _plan_shards(specs, 79) == [["a"], ["b"], ["c"]]
    assert _plan_shards(specs, 10**6) == [["a", "b", "c"]]
    big = {"big": ((100,), f32), "a": ((10,), f32), "b": ((10,), f32)}
    assert _plan_shards(big, 80) == [["big"], ["a", "b"]]  # too big for a shard: alone, and no empty shard first
    assert _plan_shards({"h": ((20,), torch.bfloat16), "a": ((10,), f32)}, 80) == [["h", "a"]]  # by the dtype's size


def test_speaker_dictionary_is_shaped_like_the_released_one(tiny_snapshot: Path, tmp_path: Path) -> None:
    from omni_loader.token2wav.model import make_config

    dit = make_config(config_dict("tiny")).dit_config
    spk = torch.load(tiny_snapshot / SPK_DICT_FILE, weights_only=True)
    assert list(spk) == ["Chelsie", "Ethan"]
    for entry in spk.values():
        assert sorted(entry) == ["bos_token", "cond", "ref_mel"]
        assert entry["cond"].shape == (1, dit.enc_emb_dim)
        assert entry["ref_mel"].shape == (1, 300, dit.mel_dim)
        assert 0.4 < float(entry["ref_mel"].std()) < 0.6 and 0.7 < float(entry["cond"].std()) < 1.3
        assert entry["bos_token"] == dit.num_embeds - 1
    assert not torch.equal(spk["Chelsie"]["cond"], spk["Ethan"]["cond"])
    again = torch.load(synthesize(tmp_path / "again", size="tiny", seed=0) / SPK_DICT_FILE, weights_only=True)
    other = torch.load(synthesize(tmp_path / "other", size="tiny", seed=1) / SPK_DICT_FILE, weights_only=True)
    assert torch.equal(again["Ethan"]["ref_mel"], spk["Ethan"]["ref_mel"])  # from the seeded generator
    assert not torch.equal(other["Ethan"]["ref_mel"], spk["Ethan"]["ref_mel"])


def test_synthesized_weights_are_small_and_shards_say_pytorch(tmp_path: Path) -> None:
    snap = synthesize(tmp_path / "snap", size="tiny", seed=0)  # made here, not by the shared fixture
    stds = []
    for shard in sorted(snap.glob("model-*.safetensors")):
        with safe_open(str(shard), framework="pt") as fh:
            assert fh.metadata() == {"format": "pt"}
            stds += [float(fh.get_tensor(k).std()) for k in fh.keys() if fh.get_tensor(k).numel() > 1000]
    assert stds and all(0.015 < s < 0.025 for s in stds)  # N(0, 0.02), as an initialiser would draw


def test_synthesize_into_new_parents_shared_and_via_a_sibling_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import stat

    seen = []
    real_save = torch.save

    def spy(obj, path, *args, **kwargs):  # where the speaker dictionary is written before the rename
        seen.append(Path(path).parent)
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", spy)
    monkeypatch.setenv("OMNI_LOADER_PROGRESS", "lines")
    from tqdm.std import tqdm

    monkeypatch.setattr(tqdm, "monitor_interval", 0)  # no monitor thread left behind in this process
    out = synthesize(tmp_path / "a" / "b" / "snap", size="tiny", seed=0, progress=True)
    assert out == tmp_path / "a" / "b" / "snap" and (out / INDEX_FILE).is_file()
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert len(seen) == 1 and seen[0].parent == out.parent and seen[0].name.startswith(".snap.tmp-")
    err = capsys.readouterr().err.splitlines()
    n = len(open_snapshot(out).weight_map)
    assert err[0].startswith("synth tiny, tensors: 0/") and err[-1].startswith(f"synth tiny, tensors: {n}/{n} |")


def test_reading_weights_names_the_shard_at_fault(snap_copy: Path) -> None:
    snap = open_snapshot(snap_copy)
    key = sorted(snap.weight_map)[0]
    shard = snap_copy / snap.weight_map[key]
    tensors = safetensors.torch.load_file(str(shard))
    del tensors[key]  # the index still maps the key to this shard
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    with pytest.raises(CheckpointError) as err:
        list(iter_token2wav_weights(snap))
    assert str(err.value) == f"{INDEX_FILE} maps {key} to {shard}, which does not hold it"
    shard.write_bytes(shard.read_bytes()[:64])  # truncated
    with pytest.raises(CheckpointError) as err:
        list(iter_token2wav_weights(snap))
    assert str(err.value).startswith(f"truncated or corrupt shard {shard}: ")
    assert str(err.value) != f"truncated or corrupt shard {shard}: "  # with the library's reason


def test_synthesize_defaults() -> None:
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(synthesize).parameters.items() if k != "out"}
    assert {k: defaults[k] for k in ("size", "seed", "progress", "overwrite")} == {
        "size": "full", "seed": 0, "progress": False, "overwrite": False}


def test_resolve_snapshot_uses_seed_0_and_no_download_unless_asked(tiny_snapshot: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants as hub

    monkeypatch.setenv("OMNI_LOADER_CACHE", str(tmp_path / "cache"))
    assert resolve_snapshot(size="tiny").root.name == "tiny-seed0"
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    with pytest.raises(CheckpointError, match="pass --download to fetch it"):
        resolve_snapshot(model_id="Nobody/NoSuchModel", cache_dir=tmp_path / "hub")


def test_synthesis_is_quiet_unless_asked(tmp_path: Path, capsys) -> None:
    synthesize(tmp_path / "quiet", size="tiny", seed=0)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_an_index_without_token2wav_tensors_says_so(snap_copy: Path) -> None:
    (snap_copy / INDEX_FILE).write_text(json.dumps({"weight_map": {"thinker.a": "x.safetensors",
                                                                   "talker.b": "x.safetensors"}}))
    with pytest.raises(CheckpointError) as err:
        open_snapshot(snap_copy)
    assert str(err.value) == f"no 'token2wav.' tensors in {snap_copy} (2 other tensors)"


def test_synthetic_inv_freq_is_what_the_model_computes(tiny_snapshot: Path) -> None:
    """The one computed tensor of a synthetic snapshot holds the rotary frequencies the constructor
    computes (1 / base^(2i/dim)), so a load that keeps or overwrites it ends the same."""
    from omni_loader.token2wav.model import build_model

    config = open_snapshot(tiny_snapshot).token2wav_config
    computed = build_model(config, layout="vllm-omni").code2wav_dit_model.rotary_embed.inv_freq
    stored = _tensors(tiny_snapshot)[INV_FREQ_KEY]
    assert stored.shape == computed.shape and torch.allclose(stored, computed, rtol=1e-6, atol=0)
    assert stored[0] == 1.0 and bool((stored[1:] < stored[:-1]).all())  # base^0 first, then falling


def test_synthesis_defaults_to_seed_zero(tiny_snapshot: Path, tmp_path: Path) -> None:
    default = synthesize(tmp_path / "default", size="tiny")
    assert _shard_digest(default) == _shard_digest(tiny_snapshot)


def test_synthesis_bar_counts_tensors_and_goes_when_done(monkeypatch: pytest.MonkeyPatch) -> None:
    from omni_loader.token2wav.checkpoint import _progress

    monkeypatch.setenv("OMNI_LOADER_PROGRESS", "terminal")
    bar = _progress(3, "writing", True)
    try:
        assert (bar.total, bar.desc, bar.unit, bar.leave) == (3, "writing", "tensor", False)
    finally:
        bar.close()


def test_a_shard_or_speaker_file_the_file_system_refuses_is_not_called_damaged(snap_copy: Path) -> None:
    """A shard removed after the snapshot was opened, and a spk_dict.pt that is a directory: the file system's
    answer, named as such, not "truncated or corrupt" or "damaged"."""
    from omni_loader.token2wav.steps import load_speaker_dict

    snap = open_snapshot(snap_copy)
    shard = snap_copy / sorted(set(snap.weight_map.values()))[0]
    shard.unlink()
    with pytest.raises(CheckpointError) as err:
        list(iter_token2wav_weights(snap))
    assert str(err.value).startswith(f"cannot read shard {shard}: No such file or directory")
    assert "corrupt" not in str(err.value)
    snap.spk_dict_path.unlink()
    snap.spk_dict_path.mkdir()
    with pytest.raises(CheckpointError) as err:
        load_speaker_dict(snap, torch.device("cpu"))
    assert str(err.value).startswith(f"cannot read speaker dictionary {snap.spk_dict_path}: Is a directory")
    assert "damaged" not in str(err.value) and "\n" not in str(err.value)


@pytest.mark.subprocess
def test_running_out_of_memory_while_reading_a_shard_says_so(tiny_snapshot: Path) -> None:
    """A real allocation failure (the address space capped just above what the process holds): the error names
    memory, not the shard's content."""
    code = (
        "import resource, sys\n"
        "import safetensors, torch  # imported before the cap: the cap is for the shard's pages\n"
        "from omni_loader.token2wav.checkpoint import iter_token2wav_weights, open_snapshot\n"
        "from omni_loader.errors import OmniLoaderError\n"
        f"snap = open_snapshot({str(tiny_snapshot)!r})\n"
        "vm = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize')).split()[1]) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + 2**18, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    list(iter_token2wav_weights(snap))\n"
        "except OmniLoaderError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("out of memory reading shard "), (out.stdout, out.stderr[-500:])
    assert "the file is not to blame" in out.stdout and "corrupt" not in out.stdout


def test_model_words_name_what_a_snapshot_holds_as_every_title_does():
    """A synthetic snapshot by its size (full: "full-size"), its weights said unless asked not to; else the model id,
    else the directory's name, else the model's own name; a record whose ``synthetic`` is not a size is not one."""
    from omni_loader.token2wav.checkpoint import model_words

    assert model_words({"synthetic": {"size": "full"}, "model_id": "M"}) == "full-size Token2Wav (synthetic weights)"
    assert model_words({"synthetic": {"size": "tiny"}}, weights=False) == "tiny Token2Wav"
    assert model_words({"model_id": "Qwen/Qwen2.5-Omni-3B", "checkpoint_dir": "/x/snap"}) == "Qwen/Qwen2.5-Omni-3B"
    assert model_words({"synthetic": True, "checkpoint_dir": "/x/snap"}) == "Token2Wav from snap"
    assert model_words({"synthetic": {"size": ""}, "checkpoint_dir": "/x/snap/"}) == "Token2Wav from snap"
    assert model_words({"checkpoint_dir": None}) == model_words({}) == "Token2Wav"


def test_a_read_that_failed_names_its_real_cause_not_the_files_content(tmp_path):
    """Memory running out is said as that (the file is not to blame); a refusal of the file system is said in its
    own words, asked again of the file when the library's words were its own; a content error is left to the
    caller (None)."""
    from omni_loader.errors import OmniLoaderError
    from omni_loader.token2wav.checkpoint import read_failure

    shard = tmp_path / "model.safetensors"
    oom = read_failure(shard, MemoryError("mmap"), "shard")
    assert type(oom) is OmniLoaderError and str(oom) == (
        f"out of memory reading shard {shard} (mmap): the machine ran out, the file is not to blame; free memory (or "
        "lift the process's memory limit) and run again")
    said = " (the file system's answer; the file's content was not read)"
    refused = read_failure(tmp_path, OSError("No such file or directory"), "shard")  # the library's words: asked again
    assert type(refused) is CheckpointError and str(refused) == f"cannot read shard {tmp_path}: Is a directory{said}"
    shard.write_bytes(b"x")  # readable now: the failure's own words stand
    assert str(read_failure(shard, OSError(5, "Input/output error"), "index")) == (
        f"cannot read index {shard}: Input/output error{said}")
    assert read_failure(shard, ValueError("bad header"), "shard") is None
