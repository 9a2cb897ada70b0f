"""A real Jupyter server of this environment serves the repository's notebooks, then stops cleanly.

One server is started for the module (loopback, a free port, a known token, root dir = the repo,
no browser, its own runtime and config directories), ``notebooks/`` is listed through the contents
API, and the server is stopped with SIGTERM; the tests then check the listing and that no process
of the server's process group is left behind.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 90
STOP_TIMEOUT_S = 30
# The four notebooks of the kit. 01 and 02 are written in another part of the work; until they are
# committed, test_required_notebooks_are_served fails on exactly those names.
REQUIRED_NOTEBOOKS = {
    "01_reproduce_pr_tables.ipynb",
    "02_profiles.ipynb",
    "03_module_traversal_costs.ipynb",
    "04_explore_token2wav.ipynb",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 5.0) -> tuple[int, object]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, json.loads(response.read().decode())


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (cannot happen for our own group, but be exact)
        return True
    return True


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class ServerRun:
    listing: dict
    status_code: int
    startup_s: float
    returncode: int | None
    group_alive_after_stop: bool
    port_open_after_stop: bool
    log: str


@pytest.fixture(scope="module")
def server_run(tmp_path_factory: pytest.TempPathFactory) -> ServerRun:
    tmp = tmp_path_factory.mktemp("jupyter")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.update(JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), JUPYTER_CONFIG_DIR=str(tmp / "config"),
               JUPYTER_PLATFORM_DIRS="1", BROWSER="true")
    cmd = [
        sys.executable, "-m", "jupyter", "server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={REPO}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI often run as root; the server refuses otherwise
    log_path = tmp / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                start_new_session=True)
    pgid = proc.pid  # start_new_session: the server leads its own process group
    base = f"http://127.0.0.1:{port}"
    try:
        start = time.monotonic()
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter server exited with {proc.returncode} before answering:\n{log_path.read_text()}")
            try:
                status, _ = _get_json(f"{base}/api/status?token={token}", timeout=2.0)
                if status == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            if time.monotonic() - start > STARTUP_TIMEOUT_S:
                pytest.fail(f"jupyter server did not answer within {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()}")
            time.sleep(0.25)
        startup = time.monotonic() - start
        code, listing = _get_json(f"{base}/api/contents/notebooks?token={token}", timeout=10.0)
        # without the token the API must refuse
        try:
            _get_json(f"{base}/api/contents/notebooks")
            unauthenticated_refused = False
        except urllib.error.HTTPError as exc:
            unauthenticated_refused = exc.code in (401, 403)
        assert unauthenticated_refused, "the contents API answered without the token"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            proc.wait(timeout=10)
            pytest.fail(f"jupyter server ignored SIGTERM for {STOP_TIMEOUT_S} s:\n{log_path.read_text()}")
    deadline = time.monotonic() + 10
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _group_alive(pgid)
    if alive:
        os.killpg(pgid, signal.SIGKILL)  # do not leave it behind even when the test fails
    return ServerRun(listing=listing, status_code=code, startup_s=startup, returncode=proc.returncode,
                     group_alive_after_stop=alive, port_open_after_stop=_port_open(port), log=log_path.read_text())


def _served_notebooks(run: ServerRun) -> set[str]:
    return {e["name"] for e in run.listing["content"] if e["type"] == "notebook"}


@pytest.mark.subprocess
def test_contents_api_lists_the_notebooks_on_disk(server_run: ServerRun) -> None:
    assert server_run.status_code == 200
    assert server_run.listing["type"] == "directory" and server_run.listing["path"] == "notebooks"
    on_disk = {p.name for p in (REPO / "notebooks").glob("*.ipynb")}
    assert on_disk, "no notebooks on disk"
    assert _served_notebooks(server_run) == on_disk


@pytest.mark.subprocess
def test_required_notebooks_are_served(server_run: ServerRun) -> None:
    """DEPENDS ON THE OTHER PART OF ISSUE 5: 01 and 02 are written elsewhere; passes once all four exist."""
    missing = REQUIRED_NOTEBOOKS - _served_notebooks(server_run)
    assert not missing, f"notebooks not (yet) in notebooks/: {sorted(missing)}"


@pytest.mark.subprocess
def test_server_stops_without_orphans(server_run: ServerRun) -> None:
    assert server_run.returncode is not None, "server process still running"
    assert not server_run.group_alive_after_stop, "a process of the server's group outlived it"
    assert not server_run.port_open_after_stop, "the port still accepts connections after the stop"
    print(f"jupyter server answered after {server_run.startup_s:.1f} s, exited with {server_run.returncode}")


@pytest.mark.subprocess
def test_project_jupyter_config_turns_off_the_news_popup(tmp_path: Path) -> None:
    """``make lab`` (and the browser test) put ``jupyter-config/`` on JUPYTER_CONFIG_PATH: JupyterLab's
    page config then disables the announcements plugin, whose "get notified about official Jupyter
    news?" question would otherwise greet every new user, and the news feed is off."""
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(REPO / "jupyter-config"), JUPYTER_CONFIG_DIR=str(tmp_path))
    code = ("import json; from jupyterlab_server.config import get_static_page_config; "
            "print(json.dumps(get_static_page_config()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    disabled = json.loads(out).get("disabledExtensions", {})
    assert disabled.get("@jupyterlab/apputils-extension:announcements") is True
    server_config = json.loads((REPO / "jupyter-config" / "jupyter_server_config.json").read_text())
    assert server_config["LabApp"]["news_url"] is None


@pytest.mark.subprocess
def test_saving_through_the_server_keeps_the_projects_notebooks_without_outputs(tmp_path: Path) -> None:
    """With the project's Jupyter configuration (as ``make lab`` runs it), a notebook under ``notebooks/``
    saved through the contents API (what Lab's autosave does) reaches the disk with the person's edited
    source and no outputs; a notebook elsewhere is saved as it is."""
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(REPO / "jupyter-config"), JUPYTER_CONFIG_DIR=str(tmp_path / "c"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), JUPYTER_PLATFORM_DIRS="1", BROWSER="true")
    cmd = [sys.executable, "-m", "jupyter", "server", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}"] + (["--allow-root"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}/api/contents"
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"widgets": {"state": {}}}, "cells": [
        {"cell_type": "code", "id": "a1", "metadata": {}, "source": "x = 1  # my edit", "execution_count": 3,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "half-finished run\n"}]},
        {"cell_type": "markdown", "id": "a2", "metadata": {}, "source": "my prose"}]}
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                if _get_json(f"{base}?token={token}", timeout=2.0)[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "jupyter server did not start"
            time.sleep(0.25)
        for folder in ("notebooks", "elsewhere"):
            body = json.dumps({"type": "notebook", "format": "json", "content": notebook}).encode()
            request = urllib.request.Request(f"{base}/{folder}/n.ipynb?token={token}", data=body, method="PUT",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status in (200, 201)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=STOP_TIMEOUT_S)
    stored = json.loads((root / "notebooks" / "n.ipynb").read_text())
    assert "".join(stored["cells"][0]["source"]) == "x = 1  # my edit"
    assert "".join(stored["cells"][1]["source"]) == "my prose"
    assert stored["cells"][0]["outputs"] == [] and stored["cells"][0]["execution_count"] is None
    assert "widgets" not in stored["metadata"]
    other = json.loads((root / "elsewhere" / "n.ipynb").read_text())
    assert "".join(other["cells"][0]["outputs"][0]["text"]) == "half-finished run\n" and other["cells"][0]["execution_count"] == 3
