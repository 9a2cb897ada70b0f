"""The Hugging Face Hub as ``--model`` meets it: a bound on a Hub that never answers, and a cache ref that is refused
before it is followed (:func:`~omni_loader.token2wav.checkpoint.find_in_hub_cache` uses both).
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


def hub_timeout() -> float:
    """Seconds --download waits for the Hub's first answer (:data:`HUB_TIMEOUT_ENV`, else the default)."""
    text = os.environ.get(HUB_TIMEOUT_ENV, "").strip()
    try:
        value = float(text) if text else DEFAULT_HUB_TIMEOUT
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise OmniLoaderError(f"{HUB_TIMEOUT_ENV}={text}: must be a finite number of seconds above 0")
    return value


def answered_within(seconds: float, what: str, call: Any) -> Any:
    """``call()`` in a daemon thread, its result or its exception; one line when it has not returned in ``seconds``.

    Why a thread: huggingface_hub's own timeouts are per request and it retries (with longer timeouts), so a
    Hub that accepts connections and never answers holds a download for many minutes; a thread that is left
    waiting is the only bound that needs none of its internals. The thread ends with the process.
    """
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
            box["error"] = exc

    worker = threading.Thread(target=run, name="hub-download", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CheckpointError(f"{what} did not answer within {seconds:g} s ({HUB_TIMEOUT_ENV} sets the bound); check "
                              "the network (HF_ENDPOINT, proxies), or pass --checkpoint DIR")
    if "error" in box:
        raise box["error"]
    return box["value"]


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
