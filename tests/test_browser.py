"""The notebooks as a person sees them: JupyterLab in a real browser (Chromium, driven by Playwright).

One JupyterLab is started for the module on loopback (a free port, a token, the repository as its
root, the project's Jupyter configuration from ``jupyter-config/`` as ``make lab`` uses it, and a
fresh user configuration so a developer's own settings cannot change the result). Debian's
``chromium`` is the browser (``executable_path``): Playwright's own browser download is not
reachable here, and ``.ci/run`` installs the Debian package. Where no Chromium is installed the
tests skip with one line saying so.

What is checked, each as a person would notice it:

* opening each notebook leaves it unmodified (no "modified" dot on its tab), saving it writes the
  same bytes (the notebooks are stored as JupyterLab writes them), and no news pop-up appears;
* an executed copy the kit writes (``omni_loader.notebook.files.execute``) is trusted by Lab: opened
  without running it, its outputs are trusted and its audio player has its sound; the same copy
  changed after signing is not (Lab's sanitizer drops the player's ``data:`` source and the tables'
  styles), which shows the check means something;
* the kit's progress bar is an ipywidgets bar in a kernel Lab started;
* while a cell showing that bar runs, Lab's status bar says the kernel is Busy (as the toolbar's
  circle does). It says Idle today: Lab opens a kernel subshell for the widgets' comms, the kernel
  answers that control request with a status ``busy``/``idle`` pair of its own, and Lab takes every
  status message for the kernel's state unless its parent's type is one of the server's
  ``untracked_message_types`` (``debug_request`` is, the subshell requests are not). That test is
  an expected failure until ``jupyter-config/`` adds the subshell requests to that list;
* every notebook in ``notebooks/`` (globbed), run through the Lab UI (a cell typed under its
  parameters cell with the small settings ``tests/test_notebooks.py`` uses, then Run ▸ Run All
  Cells), ends with every cell run, no error or stderr output and no table wider than its output
  area; no tick label of a saved figure is in scientific form (the CSV beside each figure lists
  every drawn tick label, plots being images the page cannot read); 02's inline flamegraph gives
  the imports directly under the load under 10% of its width; 04 shows its audio player and a plot.
  A screenshot of each is saved as ``results/browser-test/<notebook>-lab.png``;
* autosave is on for those runs (every 5 s): the typed cell is deleted again after the run and,
  once Lab has autosaved the notebook with all its outputs on screen, the file holds the same bytes
  as before and git reports no change in ``notebooks/`` (the project's pre-save hook keeps outputs
  out of the stored notebooks). On a fresh clone that means a clean git status; in a checkout
  others are editing, the status is compared with the one before the test.

The Lab in this test has its own settings: autosave off except in the notebook runs (which switch
it on through Lab's settings API; every other save the test makes is explicit) and every cell laid
out (``windowingMode: none``), so that each output's size can be measured.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
RUN_IN_LAB = "04_explore_token2wav.ipynb"  # the notebook whose executed copy the trust test opens
# 04 in seconds: the tiny snapshot and model configuration, a short forward pass.
TINY = {"size": "tiny", "tree_size": "tiny", "n_codes": 16, "num_steps": 2}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STARTUP_TIMEOUT_S = 120
RUN_TIMEOUT_MS = 600_000  # one notebook on small settings: 20-120 s on 2 cores; only a hang should fail
UI_TIMEOUT_MS = 240_000  # generous: a kernel starts slowly on a busy 2-core machine; only hangs should fail
DOCMANAGER = "@jupyterlab/docmanager-extension:plugin"  # autosave, autosaveInterval (seconds)
AUTOSAVE_S = 5
# Lab's status bar item for the current notebook's kernel: "Python 3 (ipykernel) | Idle"
KERNEL_STATUS = "#jp-main-statusbar .jp-StatusBar-TextItem[title^='Change kernel']"
# A tick label in scientific form: 2×10³, mathtext ($10^{2}$), 1e+05, 10^3. The digit before the "e"
# keeps a category such as "stage-2" from matching (as SCIENTIFIC in test_notebooks.py).
SCIENTIFIC_TICK = re.compile(r"×10|\$|\d[eE][+-]\d|10\^")
IMPORT_SHARE_MAX = 0.10  # of the flamegraph's width, for the imports directly under the load
SUBSHELL_MESSAGES = ("create_subshell_request", "delete_subshell_request", "list_subshell_request")


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


CHROMIUM = chromium_path()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium; .ci/run does)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _git_status(*paths: str) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    """A JupyterLab server of this environment; yields ``(base_url, token)``, stops it afterwards."""
    tmp = tmp_path_factory.mktemp("lab")
    for plugin, values in (("docmanager-extension/plugin", {"autosave": False}),
                           ("notebook-extension/tracker", {"windowingMode": "none"})):
        path = tmp / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(REPO / "jupyter-config"), JUPYTER_CONFIG_DIR=str(tmp / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"), JUPYTER_PLATFORM_DIRS="1", BROWSER="true")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={REPO}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log_path = tmp / "lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        start = time.monotonic()
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode} before answering:\n{log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() - start > STARTUP_TIMEOUT_S:
                pytest.fail(f"jupyter lab did not answer within {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()}")
            time.sleep(0.25)
        yield base, token
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # kernels the server started, if any outlived it
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    yield page
    context.close()


def _open(page, lab, path: str) -> None:
    """Open a notebook by its path under the server root; wait until its kernel is idle."""
    base, token = lab
    page.goto(f"{base}/lab/tree/{path}?reset&token={token}")  # reset: no tabs restored from an earlier test
    _tab(page, path.rsplit("/", 1)[-1], current=True).wait_for()
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-Notebook").wait_for()
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for()
    # The circle reads idle before a kernel is connected too; the status bar says Idle only once one is.
    page.locator(KERNEL_STATUS, has_text=re.compile(r"\| Idle$")).wait_for()


def _tab(page, name: str, current: bool = False):
    """The document tab whose label is exactly ``name``."""
    css = ".lm-DockPanel-tabBar .lm-TabBar-tab" + (".jp-mod-current" if current else "")
    return page.locator(css).filter(has=page.locator(".lm-TabBar-tabLabel", has_text=re.compile(f"^{re.escape(name)}$")))


def _run_all(page) -> None:
    """Run ▸ Run All Cells, with the notebook focused (the menu acts on the focused document)."""
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell .jp-InputArea-prompt").first.click()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def _settles_unmodified(page, within_ms: int = 20_000) -> bool:
    """Whether the current tab ends up without the "modified" mark. When the kernel's language info
    arrives Lab sets the notebook's metadata and marks it modified for a moment; it clears the mark
    when the content equals what is on disk, and keeps it (autosave then rewrites the file) when not."""
    try:
        page.wait_for_function("""() => {
            const tab = document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current');
            return tab && !tab.classList.contains('jp-mod-dirty');
        }""", timeout=within_ms, polling=250)
    except sync_api.TimeoutError:
        return False
    page.wait_for_timeout(1000)  # and stays so
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() == 0


def _outputs(page) -> dict:
    """What the visible notebook shows: stderr/error outputs, audio players, images, over-wide tables."""
    return page.evaluate("""() => {
        const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        const outs = Array.from(panel.querySelectorAll('.jp-OutputArea-output'));
        const wide = [];
        outs.forEach(o => o.querySelectorAll('table').forEach(t => {
            const w = t.getBoundingClientRect().width;
            if (w > o.clientWidth + 1) wide.push(`${Math.round(w)} px in ${o.clientWidth} px: ${t.innerText.slice(0, 60)}`);
        }));
        return {
            stderr: outs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr')
                        .map(o => o.innerText.slice(0, 300)),
            audio: panel.querySelectorAll('.jp-OutputArea-output audio').length,
            // what an untrusted output loses: the sanitizer keeps <audio> but drops its data: source
            playable: panel.querySelectorAll('.jp-OutputArea-output audio source[src], .jp-OutputArea-output audio[src]').length,
            trusted: panel.querySelectorAll('.jp-mod-trusted').length,
            images: panel.querySelectorAll('.jp-OutputArea-output img').length,
            wide: wide,
            prompts: Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).map(p => p.textContent.trim()),
        };
    }""")


def _save(page) -> None:
    """Save the current notebook (Ctrl+S) and wait until Lab says it is saved."""
    page.keyboard.press("Control+s")
    page.get_by_text("Saving completed").first.wait_for()


def test_opening_a_notebook_leaves_it_unmodified_and_saving_writes_the_same_bytes(page, lab) -> None:
    status = _git_status("notebooks")
    for path in NOTEBOOKS:
        _open(page, lab, f"notebooks/{path.name}")
        assert _settles_unmodified(page), f"{path.name}: JupyterLab marks it modified on opening"
        stored = path.read_bytes()
        _save(page)
        assert path.read_bytes() == stored, f"saving {path.name} from JupyterLab rewrote it: not stored as Lab writes it"
    assert page.get_by_text("official Jupyter news").count() == 0, "the news pop-up is shown"
    assert _git_status("notebooks") == status, "opening and saving the notebooks in JupyterLab changed git status"


def test_an_executed_copy_is_trusted_and_shows_its_audio_and_plots(page, lab, tmp_path: Path) -> None:
    """The signed copy shows its audio player on opening; the same copy changed (so its signature no
    longer matches) does not: Lab strips untrusted HTML, which is why the kit signs what it writes."""
    import nbformat

    from omni_loader.notebook import files as notebooks

    out = notebooks.results_root() / "browser-test"
    copy = out / f"executed-{RUN_IN_LAB}"
    notebooks.execute(REPO / "notebooks" / RUN_IN_LAB, copy, {**TINY, "out_dir": str(tmp_path)}, timeout=600)
    assert notebooks.is_trusted(copy)
    unsigned = out / f"unsigned-{RUN_IN_LAB}"
    nb = nbformat.read(copy, as_version=4)
    nb.metadata["omni_loader_test"] = "changed after signing"
    nbformat.write(nb, unsigned)
    assert not notebooks.is_trusted(unsigned)
    try:
        rel, rel_unsigned = copy.relative_to(REPO), unsigned.relative_to(REPO)
    except ValueError:
        pytest.skip(f"{copy} is outside the server root {REPO} ($OMNI_LOADER_RESULTS points elsewhere)")
    shown = {}
    for name, path in (("signed", rel), ("unsigned", rel_unsigned)):
        _open(page, lab, path.as_posix())
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        panel.locator(".jp-OutputArea-output audio").first.wait_for()  # outputs are rendered
        shown[name] = _outputs(page)
    assert shown["signed"]["trusted"] > 0, "JupyterLab does not trust the signed copy"
    assert shown["signed"]["playable"] >= 1, "the signed copy's audio player has no sound (its source was stripped)"
    assert shown["signed"]["images"] >= 1, "no plot image in the signed copy"
    # the control: the same outputs unsigned lose the player's sound, so the check above means something
    assert shown["unsigned"]["trusted"] == 0 and shown["unsigned"]["playable"] == 0


def test_progress_bars_are_widgets_in_lab(page, lab) -> None:
    """In a kernel JupyterLab started, the kit's progress bar is an ipywidgets bar (no text redraws,
    no "IProgress not found" warning)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from omni_loader.notebook import files as notebooks

    path = notebooks.results_root() / "browser-test" / "progress.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = new_notebook(cells=[new_code_cell(
        "from omni_loader.progress import progress_bar, progress_mode\n"
        "print(progress_mode())\n"
        "with progress_bar(total=5, desc='synth tiny', unit='tensor') as bar:\n"
        "    for _ in range(5):\n"
        "        bar.update(1)")])
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nbformat.write(nb, path)
    try:
        rel = path.relative_to(REPO)
    except ValueError:
        pytest.skip(f"{path} is outside the server root {REPO} ($OMNI_LOADER_RESULTS points elsewhere)")
    _open(page, lab, rel.as_posix())
    _run_all(page)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-CodeCell .jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).first.wait_for(state="attached")
    page.wait_for_function("""() => {
        const p = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        return p.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']") && p.innerText.includes('100%');
    }""", polling=500)
    shown = _outputs(page)
    texts = panel.locator(".jp-OutputArea-output").all_inner_texts()
    assert not shown["stderr"], shown["stderr"]
    assert [t.strip() for t in texts][:1] == ["widget"], texts
    assert panel.locator(".jp-OutputArea-output .widget-hprogress").count() == 1, texts
