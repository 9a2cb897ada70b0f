"""The Hugging Face Hub as ``--model`` meets it: a bound on a Hub that never answers, one deadline for the whole
download, and a cache ref that is refused before it is followed
(:func:`~omni_loader.token2wav.checkpoint.find_in_hub_cache` uses them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import CheckpointError, OmniLoaderError

# How long --download waits for the Hub's first answer (the index file, a few KB) before it gives up: a Hub
# that never answers is retried by huggingface_hub for minutes. OMNI_LOADER_HUB_TIMEOUT overrides it (seconds).
HUB_TIMEOUT_ENV = "OMNI_LOADER_HUB_TIMEOUT"
DEFAULT_HUB_TIMEOUT = 60.0
# How long the whole --download may take, from its first request to its last byte: a Hub that answers and then
# stalls mid-file (or trickles a byte at a time, which no per-request timeout of huggingface_hub ends) is stopped
# here. The token2wav files of Qwen2.5-Omni-3B are a few GB: an hour is 1 MB/s. OMNI_LOADER_DOWNLOAD_TIMEOUT
# overrides it (seconds).
DOWNLOAD_TIMEOUT_ENV = "OMNI_LOADER_DOWNLOAD_TIMEOUT"
DEFAULT_DOWNLOAD_TIMEOUT = 3600.0


def hub_timeout() -> float:
    """Seconds --download waits for the Hub's first answer (:data:`HUB_TIMEOUT_ENV`, else the default)."""
    return _seconds(HUB_TIMEOUT_ENV, DEFAULT_HUB_TIMEOUT)


def download_timeout() -> float:
    """Seconds the whole --download may take (:data:`DOWNLOAD_TIMEOUT_ENV`, else the default)."""
    return _seconds(DOWNLOAD_TIMEOUT_ENV, DEFAULT_DOWNLOAD_TIMEOUT)


def _seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise OmniLoaderError(f"{name}={text}: must be a finite number of seconds above 0")
    return value


def answered_within(seconds: float, what: str, call: Any) -> Any:
    """``call()`` in a daemon thread, its result or its exception; one line when it has not returned in ``seconds``.

    Why a thread: huggingface_hub's own timeouts are per request and it retries (with longer timeouts), so a
    Hub that accepts connections and never answers holds a download for many minutes; a thread that is left
    waiting is the only bound that needs none of its internals. The thread ends with the process.
    """
    done, value = _within(seconds, call)
    if not done:
        raise CheckpointError(f"{what} did not answer within {seconds:g} s ({HUB_TIMEOUT_ENV} sets the bound); check "
                              "the network (HF_ENDPOINT, proxies), or pass --checkpoint DIR")
    return value


def _within(seconds: float, call: Any) -> tuple[bool, Any]:
    """``(True, call())`` when ``call`` returned within ``seconds`` in a daemon thread (its exception raised here),
    else ``(False, None)``: the thread is left waiting, and ends with the process."""
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
    """Download a snapshot's index (``index_name``), then the files ``files_of(index)`` names, one at a time, all
    within :func:`download_timeout` seconds of the start; returns the snapshot's folder (the index's).

    The index is the Hub's first answer, bounded by :func:`hub_timeout`; a file still downloading at the deadline
    is one line naming it (:func:`download_files`); a file the repository lacks, one line naming it."""
    import json
    import time

    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    limit, started = download_timeout(), time.monotonic()  # one deadline for the whole download

    def fetch(name: str) -> str:
        try:
            return hf_hub_download(filename=name, **kwargs)
        except RemoteEntryNotFoundError as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(f"--download of {model_id!r} from {constants.ENDPOINT}: {reason}; is it a "
                                  "Qwen2.5-Omni model? (or pass --checkpoint DIR)") from None

    index_file = answered_within(hub_timeout(), f"the Hugging Face Hub ({constants.ENDPOINT}), asked for "
                                 f"{model_id}/{index_name},", lambda: fetch(index_name))
    download_files(model_id, files_of(json.loads(Path(index_file).read_text())), fetch, limit=limit, started=started)
    return str(Path(index_file).parent)


def download_files(model_id: str, names: list[str], fetch: Any, *, limit: float, started: float) -> list[Path]:
    """Each of ``names`` fetched in turn (``fetch(name)``: its local path), all of them within one deadline:
    ``limit`` seconds from ``started`` (a ``time.monotonic()``). A file still downloading at the deadline ends
    the download in one line naming the file and the limit (the thread fetching it is left to end with the
    process; huggingface_hub resumes its partial file next time).

    Why one file at a time: the line can name the file that stalled, and a deadline in the kit needs none of
    huggingface_hub's internals (its timeouts are per read, and a Hub that sends a byte now and then meets none).
    """
    import time

    paths = []
    for name in names:
        left = started + limit - time.monotonic()
        done, path = _within(left, lambda: fetch(name)) if left > 0 else (False, None)
        if not done:
            raise CheckpointError(f"--download of {model_id}: {name} was not downloaded within the download's limit "
                                  f"of {limit:g} s ({DOWNLOAD_TIMEOUT_ENV} sets it); the Hub stopped sending or is too "
                                  "slow: check the network (HF_ENDPOINT, proxies) and run again (the file resumes "
                                  "where it stopped), or pass --checkpoint DIR")
        paths.append(Path(path))
    return paths


def refuse_escaping_ref(model_id: str, cache_dir: str | os.PathLike[str] | None, revision: str | None) -> None:
    """Refuse, before anything follows it, a ``refs/<revision>`` whose content is not a commit hash (``../..``).

    Why: huggingface_hub joins the ref's text to ``snapshots/``, so a ref that holds a path leads the
    load out of the Hub cache to whatever directory it names.
    """
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
