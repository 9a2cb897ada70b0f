"""The Hugging Face Hub as ``--model`` meets it: a bound on a Hub that never answers, one deadline for the whole
download, and a cache ref that is refused before it is followed
(:func:`~omni_loader.token2wav.checkpoint.find_in_hub_cache` uses them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import CheckpointError, OmniLoaderError

# How long --download waits for the Hub's first answer (the index file, a few KB): huggingface_hub retries a Hub
# that never answers for minutes. In seconds.
HUB_TIMEOUT_ENV = "OMNI_LOADER_HUB_TIMEOUT"
DEFAULT_HUB_TIMEOUT = 60.0
# How long the whole --download may take: a Hub that stalls mid-file or trickles a byte at a time meets no
# per-request timeout of huggingface_hub. The token2wav files are a few GB: an hour is 1 MB/s. In seconds.
DOWNLOAD_TIMEOUT_ENV = "OMNI_LOADER_DOWNLOAD_TIMEOUT"
DEFAULT_DOWNLOAD_TIMEOUT = 3600.0


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise OmniLoaderError(f"{name}={text}: must be a finite number of seconds above 0")
    return value


def _within(seconds: float, call: Any) -> tuple[bool, Any]:
    """``(True, call())`` when ``call`` returned within ``seconds`` in a daemon thread (its exception raised here),
    else ``(False, None)``, the thread left to end with the process. Why: huggingface_hub's timeouts are per request
    and it retries; a waiting thread bounds a Hub that never answers or trickles, needing none of its internals."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
            box["error"] = exc

    worker = threading.Thread(target=run, name="hub-download", daemon=True)
    worker.start()
    worker.join(max(seconds, 0.0))
    if worker.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box["value"]


def download_snapshot(model_id: str, kwargs: dict[str, Any], index_name: str, files_of: Any) -> str:
    """Download a snapshot's index (``index_name``, the Hub's first answer, within :data:`HUB_TIMEOUT_ENV`), then
    the files ``files_of(index)`` names, one at a time so that a stall is named, all within
    :data:`DOWNLOAD_TIMEOUT_ENV` of the start; returns the snapshot's folder (the index's)."""
    import json
    import time

    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    limit, started = _seconds(DOWNLOAD_TIMEOUT_ENV, DEFAULT_DOWNLOAD_TIMEOUT), time.monotonic()

    def fetch(name: str) -> str:
        try:
            return hf_hub_download(filename=name, **kwargs)
        except RemoteEntryNotFoundError as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(f"--download of {model_id!r} from {constants.ENDPOINT}: {reason}; is it a "
                                  "Qwen2.5-Omni model? (or pass --checkpoint DIR)") from None

    seconds = _seconds(HUB_TIMEOUT_ENV, DEFAULT_HUB_TIMEOUT)
    done, index_file = _within(seconds, lambda: fetch(index_name))
    if not done:
        raise CheckpointError(f"the Hugging Face Hub ({constants.ENDPOINT}), asked for {model_id}/{index_name}, did "
                              f"not answer within {seconds:g} s ({HUB_TIMEOUT_ENV} sets the bound); check the network "
                              "(HF_ENDPOINT, proxies), or pass --checkpoint DIR")
    for name in files_of(json.loads(Path(index_file).read_text())):
        left = started + limit - time.monotonic()
        if not (left > 0 and _within(left, lambda: fetch(name))[0]):
            raise CheckpointError(f"--download of {model_id}: {name} was not downloaded within the download's limit "
                                  f"of {limit:g} s ({DOWNLOAD_TIMEOUT_ENV} sets it); the Hub stopped sending or is too "
                                  "slow: check the network (HF_ENDPOINT, proxies) and run again (the file resumes "
                                  "where it stopped), or pass --checkpoint DIR")
    return str(Path(index_file).parent)


def refuse_escaping_ref(model_id: str, cache_dir: str | os.PathLike[str] | None, revision: str | None) -> None:
    """Refuse, before anything follows it, a ``refs/<revision>`` whose content is not a commit hash (``../..``):
    huggingface_hub joins the ref's text to ``snapshots/``, so a path there leads out of the Hub cache."""
    import re

    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    repo = Path(cache_dir or constants.HF_HUB_CACHE) / repo_folder_name(repo_id=model_id, repo_type="model")
    ref = repo / "refs" / (revision or "main")
    if revision and re.fullmatch(r"[0-9a-f]{40}", revision):
        return  # a commit hash is its own snapshot's name
    try:
        text = ref.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return  # no ref (or not readable): huggingface_hub says what is missing
    if not re.fullmatch(r"[0-9a-f]{40}", text):
        raise CheckpointError(f"{ref} holds {text[:80]!r}, not a commit hash: it would lead out of the Hugging Face "
                              "cache; refusing to follow it (repair the cache, or pass --checkpoint DIR)")
