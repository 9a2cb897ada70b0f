"""Checkpoints in the Hugging Face snapshot layout: find them, check them, read them, make them.

A snapshot is a directory holding ``config.json`` (with a ``token2wav_config``), ``model.safetensors.index.json``
(tensor name -> shard file), the shards ``model-0000N-of-0000M.safetensors`` and ``spk_dict.pt``; Token2Wav
tensors keep their ``token2wav.`` prefix, as in the released files. Since the real checkpoint cannot be
downloaded everywhere, :func:`synthesize` writes one with its exact names, shapes and dtypes (seeded random
values), read by the same code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections import defaultdict
from contextlib import ExitStack
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError, OmniLoaderError
from ..host.procs import remove_dead_owners_dirs
from ..host.checkpoint_cache import CHECKPOINT_PREFIX
from .model import build_model, config_dict, shipped_tensor_specs
from ..names import SYNTHETIC_KEY, cache_dir

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
SPK_DICT_FILE = "spk_dict.pt"
DEFAULT_MODEL_ID = "Qwen/Qwen2.5-Omni-3B"
DEFAULT_SHARD_BYTES = 1 << 30

@dataclass
class Snapshot:
    """A checked snapshot: where it is, where it came from, and which shard holds each tensor."""

    root: Path
    source: str  # "directory", "hub-cache" or "synthetic"
    token2wav_config: dict[str, Any]
    weight_map: dict[str, str]  # token2wav.* key -> shard file name
    model_id: str | None = None
    revision: str | None = None
    synthetic: dict[str, Any] | None = None

    @property
    def spk_dict_path(self) -> Path:
        return self.root / SPK_DICT_FILE

    @property
    def shards(self) -> list[str]:
        return sorted(set(self.weight_map.values()))

    @property
    def model(self) -> str:
        """What it holds in a few words, for a title: "tiny Token2Wav", a model id, a directory's name."""
        return model_words(self.describe(), weights=False)

    def describe(self) -> dict[str, Any]:
        """The checkpoint-source fields of the metadata record."""
        return {"checkpoint_dir": str(self.root), "checkpoint_source": self.source, "model_id": self.model_id,
                "revision": self.revision, "synthetic": self.synthetic, "checkpoint_tensors": len(self.weight_map),
                "checkpoint_shards": self.shards}


def model_words(described: dict[str, Any], weights: bool = True) -> str:
    """What a snapshot holds in words, from its record (:meth:`Snapshot.describe`, a benchmark's ``checkpoint``),
    as every title names it: "full-size Token2Wav (synthetic weights)" (``weights``), a model id, a directory."""
    synthetic = described.get("synthetic") or {}
    if isinstance(synthetic, dict) and synthetic.get("size"):
        size = "full-size" if synthetic["size"] == "full" else synthetic["size"]
        return f"{size} Token2Wav" + (" (synthetic weights)" if weights else "")
    directory = Path(str(described.get("checkpoint_dir") or "")).name
    return described.get("model_id") or (f"Token2Wav from {directory}" if directory else "Token2Wav")


# --------------------------------------------------------------------------- finding

def open_snapshot(root: str | os.PathLike[str], source: str = "directory", model_id: str | None = None) -> Snapshot:
    """Check a snapshot directory and return it; every problem is one line naming the file."""
    root = Path(root)
    if not root.is_dir():
        raise CheckpointError(f"checkpoint directory not found: {root}")
    config = _read_json(root / CONFIG_FILE)
    t2w_config = config.get("token2wav_config")
    if not isinstance(t2w_config, dict):
        raise CheckpointError(f"{root / CONFIG_FILE} has no 'token2wav_config' section")
    weight_map = _read_weight_map(root)
    token2wav = {k: v for k, v in weight_map.items() if k.startswith(CHECKPOINT_PREFIX)}
    if not token2wav:
        raise CheckpointError(f"no '{CHECKPOINT_PREFIX}' tensors in {root} ({len(weight_map)} other tensors)")
    for shard in sorted(set(token2wav.values())):
        if not (root / shard).is_file():
            raise CheckpointError(f"shard listed in {INDEX_FILE} is missing: {root / shard}")
    if not (root / SPK_DICT_FILE).is_file():
        raise CheckpointError(f"speaker dictionary missing: {root / SPK_DICT_FILE}")
    return Snapshot(root=root, source=source, token2wav_config=t2w_config, weight_map=token2wav, model_id=model_id,
                    revision=root.name if source == "hub-cache" else None, synthetic=config.get(SYNTHETIC_KEY))

def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(f"missing file: {path}")
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"not valid JSON: {path} ({exc})") from None
    if not isinstance(record, dict):
        raise CheckpointError(f"{path} holds a JSON {type(record).__name__}, not an object: it is not a Hugging Face "
                              f"{path.name}")
    return record

def _read_weight_map(root: Path) -> dict[str, str]:
    if (root / INDEX_FILE).is_file():
        weight_map = _read_json(root / INDEX_FILE).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{root / INDEX_FILE} has no 'weight_map'")
        return weight_map
    if not (root / SINGLE_FILE).is_file():
        raise CheckpointError(f"no {INDEX_FILE} or {SINGLE_FILE} in {root}")
    from safetensors import safe_open

    try:
        with safe_open(str(root / SINGLE_FILE), framework="pt") as fh:
            return dict.fromkeys(fh.keys(), SINGLE_FILE)
    except Exception as exc:  # safetensors raises its own error type for bad files
        raise _shard_error(root / SINGLE_FILE, exc) from None

def find_in_hub_cache(
    model_id: str, cache_dir: str | os.PathLike[str] | None = None, revision: str | None = None, download: bool = False
) -> Snapshot:
    """Resolve ``model_id`` to a local snapshot through huggingface_hub, offline unless ``download`` (config,
    index, speaker dictionary and ``token2wav.`` shards only: :func:`~omni_loader.token2wav.hub.download_snapshot`).
    A ``refs/main`` that is not a commit hash is refused before it is followed."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    from .hub import download_snapshot, refuse_escaping_ref

    kwargs = dict(repo_id=model_id, cache_dir=cache_dir, revision=revision)
    try:
        refuse_escaping_ref(model_id, cache_dir, revision)
        if download:
            path = download_snapshot(model_id, kwargs, INDEX_FILE, lambda index: [CONFIG_FILE, SPK_DICT_FILE, *sorted(
                {v for k, v in index["weight_map"].items() if k.startswith(CHECKPOINT_PREFIX)})])
        else:
            path = snapshot_download(local_files_only=True, **kwargs)
    except HFValidationError as exc:
        raise CheckpointError(f"not a valid Hugging Face model id: {model_id!r} ({str(exc).splitlines()[0]})") from None
    except LocalEntryNotFoundError as exc:
        where = cache_dir or "the default Hugging Face cache (HF_HUB_CACHE)"
        if download:  # the download itself failed: --download is no advice
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            raise CheckpointError(f"--download of {model_id!r} from {constants.ENDPOINT} failed ({reason}); check the "
                                  "network (HF_ENDPOINT, HF_HUB_OFFLINE, proxies), or pass --checkpoint DIR") from None
        raise CheckpointError(f"model {model_id!r} is not in {where}; pass --download to fetch it, or --checkpoint "
                              "DIR") from None
    return open_snapshot(path, source="hub-cache", model_id=model_id)

def resolve_snapshot(checkpoint: str | os.PathLike[str] | None = None, model_id: str | None = None, size: str = "full",
                     seed: int = 0, cache_dir: str | os.PathLike[str] | None = None, download: bool = False,
                     progress: bool = False) -> Snapshot:
    """The snapshot a command should use: ``--checkpoint``, else ``--model``, else the synthetic default."""
    if checkpoint:
        return open_snapshot(checkpoint, model_id=model_id)
    if model_id:
        return find_in_hub_cache(model_id, cache_dir=cache_dir, download=download)
    return open_snapshot(ensure_synthetic(size, seed, progress=progress), source="synthetic")

# --------------------------------------------------------------------------- reading

def iter_token2wav_weights(snapshot: Snapshot, read: str = "lazy") -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(key, tensor)`` for every ``token2wav.`` tensor, one shard at a time, on the CPU, as vLLM's
    iterator: ``lazy`` (its default) memory-maps each shard; ``eager`` (``--safetensors-load-strategy eager``) reads
    each shard whole first."""
    from safetensors import safe_open
    from safetensors.torch import load as load_bytes

    by_shard: dict[str, list[str]] = defaultdict(list)
    for key, shard in snapshot.weight_map.items():
        by_shard[shard].append(key)
    for shard in sorted(by_shard):
        path = snapshot.root / shard
        try:
            with ExitStack() as stack:  # a lazy shard's mapping is closed once its tensors are handed out
                if read == "eager":
                    tensors = load_bytes(path.read_bytes())
                    present, get = set(tensors), tensors.__getitem__
                else:
                    fh = stack.enter_context(safe_open(str(path), framework="pt", device="cpu"))
                    present, get = set(fh.keys()), fh.get_tensor
                for key in by_shard[shard]:
                    if key not in present:
                        raise CheckpointError(f"{INDEX_FILE} maps {key} to {path}, which does not hold it")
                    yield key, get(key)
        except CheckpointError:
            raise
        except Exception as exc:
            raise _shard_error(path, exc) from None


def _shard_error(path: Path, exc: BaseException) -> OmniLoaderError:
    return read_failure(path, exc, "shard") or CheckpointError(f"truncated or corrupt shard {path}: {exc}")


def read_failure(path: Path, exc: BaseException, what: str) -> OmniLoaderError | None:
    """The error naming the real cause when reading ``path`` failed for a reason other than its content (memory
    ran out, the file system refused it); None when the content is to blame."""
    if isinstance(exc, MemoryError):
        return OmniLoaderError(f"out of memory reading {what} {path} ({exc}): the machine ran out, the file is not "
                               "to blame; free memory (or lift the process's memory limit) and run again")
    if isinstance(exc, OSError):
        try:  # the file system's own answer: safetensors says "No such file or directory" of a file it may not read
            open(path, "rb").close()
        except OSError as refused:
            exc = refused
        return CheckpointError(f"cannot read {what} {path}: {exc.strerror or exc} (the file system's answer; the "
                               "file's content was not read)")
    return None

# --------------------------------------------------------------------------- writing

def default_cache_dir() -> Path:
    """Where the embedded synthetic snapshots live (``$OMNI_LOADER_CACHE`` overrides)."""
    return cache_dir()

def default_snapshot_dir(size: str, seed: int) -> Path:
    """Where :func:`ensure_synthetic` keeps the embedded default snapshot of this size and seed."""
    return default_cache_dir() / "synthetic" / f"{size}-seed{seed}"

def ensure_synthetic(size: str = "full", seed: int = 0, progress: bool = False) -> Path:
    """The embedded default snapshot, made once into the cache directory and reused after."""
    path = default_snapshot_dir(size, seed)
    if not (path / INDEX_FILE).is_file():
        synthesize(path, size=size, seed=seed, progress=progress)
    return path

def checkpoint_tensor_specs(token2wav_config: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Names, shapes and dtypes of the real checkpoint's ``token2wav.`` tensors: the transformers layout's
    parameters (unfused q/k/v) plus the DiT's rotary ``inv_freq``, which the released checkpoint stores."""
    model = build_model(token2wav_config, layout="transformers", device="meta")
    specs = {CHECKPOINT_PREFIX + n: (tuple(p.shape), p.dtype) for n, p in model.named_parameters()}
    inv_freq = model.code2wav_dit_model.rotary_embed.inv_freq
    specs[CHECKPOINT_PREFIX + "code2wav_dit_model.rotary_embed.inv_freq"] = (tuple(inv_freq.shape), inv_freq.dtype)
    return specs

def _plan_shards(specs: dict[str, tuple[tuple[int, ...], torch.dtype]], shard_bytes: int) -> list[list[str]]:
    shards: list[list[str]] = [[]]
    used = 0
    for key, (shape, dtype) in specs.items():
        size = torch.Size(shape).numel() * dtype.itemsize
        if shards[-1] and used + size > shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(key)
        used += size
    return shards

def _make_tensor(key: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator, dit: dict) -> torch.Tensor:
    if key.endswith("rotary_embed.inv_freq"):
        dim, base = dit["head_dim"], dit["rope_theta"]
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * 0.02).to(dtype)

def synthesize(out: str | os.PathLike[str], size: str = "full", seed: int = 0, shard_bytes: int = DEFAULT_SHARD_BYTES,
               progress: bool = False, overwrite: bool = False) -> Path:
    """Write a deterministic snapshot in the Hub layout, atomically: into a temporary sibling directory renamed
    into place at the end, so an interrupted run never leaves a half-written snapshot where a reader looks."""
    from safetensors.torch import save_file

    out = Path(out)
    occupied = out.is_file() or (out.is_dir() and any(out.iterdir()))
    if occupied and not overwrite:
        raise CheckpointError(f"output exists and is not empty: {out} (use --force to replace it)")
    t2w_config = config_dict(size)
    specs = shipped_tensor_specs(size)  # the list, without importing transformers' model code (see there)
    plan = _plan_shards(specs, shard_bytes)
    out.parent.mkdir(parents=True, exist_ok=True)
    # named after this process, so that the next synthesize removes what one killed with no cleanup left (GBs)
    remove_dead_owners_dirs(f".{out.name}.tmp-", str(out.parent))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    try:
        gen = torch.Generator().manual_seed(seed)
        weight_map: dict[str, str] = {}
        bar = _progress(total=len(specs), desc=f"synth {size}, tensors", enabled=progress)
        for i, keys in enumerate(plan, start=1):
            name = f"model-{i:05d}-of-{len(plan):05d}.safetensors"
            tensors = {}
            for key in keys:
                tensors[key] = _make_tensor(key, *specs[key], gen, t2w_config["dit_config"])
                bar.update(1)
            save_file(tensors, str(tmp / name), metadata={"format": "pt"})
            (tmp / name).chmod(0o644)  # safetensors writes its files 0600; a snapshot is meant to be shared
            weight_map.update(dict.fromkeys(keys, name))
            del tensors
        bar.close()
        total = sum(torch.Size(s).numel() * d.itemsize for s, d in specs.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (tmp / INDEX_FILE).write_text(json.dumps(index, indent=1))
        torch.save(_speaker_dict(t2w_config["dit_config"], gen), tmp / SPK_DICT_FILE)
        config = {"architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni", "enable_audio_output": True,
                  "token2wav_config": t2w_config,
                  SYNTHETIC_KEY: {"size": size, "seed": seed, "note": "random weights; names, shapes, dtypes as released"}}
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2))
        tmp.chmod(0o755)  # mkdtemp made it private; a snapshot is meant to be shared
        if not overwrite and (out / INDEX_FILE).is_file():
            shutil.rmtree(tmp)  # another process finished the same snapshot first: keep theirs
            return out
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists() or out.is_symlink():
            out.unlink()  # --force over a file: rmtree would fail on it
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out

def _speaker_dict(dit: dict[str, Any], gen: torch.Generator) -> dict[str, dict[str, Any]]:
    """Speaker conditioning as the released ``spk_dict.pt`` holds it: per speaker a ``cond`` vector, a reference
    mel spectrogram and the codec's BOS token."""
    return {
        name: {
            "cond": torch.randn(1, dit["enc_emb_dim"], generator=gen),
            "ref_mel": torch.randn(1, 300, dit["mel_dim"], generator=gen) * 0.5,
            "bos_token": dit["num_embeds"] - 1,
        }
        for name in ("Chelsie", "Ethan")
    }

def place_in_hub_cache(
    snapshot_dir: str | os.PathLike[str], cache_dir: str | os.PathLike[str], model_id: str = DEFAULT_MODEL_ID
) -> Path:
    """Lay a snapshot out as huggingface_hub's cache does (``models--org--name/snapshots/<sha>``,
    ``refs/main``), so the model-id lookup can be tested without a network."""
    src = Path(snapshot_dir)
    digest = hashlib.sha1(json.dumps(sorted(p.name for p in src.iterdir())).encode() + str(src).encode()).hexdigest()
    repo = Path(cache_dir) / ("models--" + model_id.replace("/", "--"))
    target = repo / "snapshots" / digest
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(src, target)
    from ..safe_files import ensure_dir, write_text

    write_text(ensure_dir(repo / "refs") / "main", digest)  # a planted link there is refused, never written through
    return target


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from ..progress import progress_bar  # a widget in JupyterLab, a few whole lines in logs and saved notebooks

    return progress_bar(total=total, desc=desc, enabled=enabled, unit="tensor", leave=False)
