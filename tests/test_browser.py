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
  circle does). Without the project's configuration it says Idle: Lab opens a kernel subshell for
  the widgets' comms, the kernel answers that control request with a status ``busy``/``idle`` pair
  of its own, and Lab takes every status message for the kernel's state unless its parent's type is
  one of the server's ``untracked_message_types`` (``debug_request`` is, the subshell requests were
  not); ``jupyter-config/jupyter_server_config.json`` adds them to that list;
* every notebook in ``notebooks/`` (globbed) is executed once per suite run, by papermill
  (``executed_notebook`` in ``conftest.py``; ``tests/test_notebooks.py`` checks what the copies hold);
  here each executed copy is opened in Lab as a person would open it, and what only a browser can tell is
  checked: no table wider than its output area, no error or stderr output on screen, 02's inline
  flamegraph with the imports directly under the load under 10% of its width, 04's audio player with its
  sound and a plot. A screenshot of each is saved as ``results/browser-test/<notebook>-lab.png``;
* one notebook (``RUN_IN_LAB``, 04: tables, a plot and the audio player, seconds on small settings) is
  also run through the Lab UI (a cell typed under its parameters cell with the small settings
  ``tests/test_notebooks.py`` uses, then Run ▸ Run All Cells) and ends with every cell run and nothing on
  screen a person would object to. Then the typed cell is deleted again and autosave is switched on
  (Settings ▸ Autosave Documents, every 5 s); once Lab has autosaved the notebook with all its outputs on
  screen, the file holds the same bytes as before (the project's pre-save hook keeps outputs out of the
  stored notebooks) and git reports no change in ``notebooks/``. Autosave stays off until the typed cell
  is gone, so the tracked file never holds it, not even for the minutes of a run (others may commit
  meanwhile). On a fresh clone no change means a clean git status; in a checkout others are editing,
  the status is compared with the one before the test, leaving out the other notebooks' lines.

The Lab in this test has its own settings: autosave off (every save the test makes is explicit,
or the autosave it switches on at the end of a notebook's run) and every cell laid out
(``windowingMode: none``), so that each output's size can be measured.
"""

from __future__ import annotations

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
# The notebook run through Lab's own Run All (the others are executed once, by papermill, and their copies
# opened here): 04 has every kind of output (tables, a plot, the audio player) and runs in seconds on small
# settings. Its executed copy is also the one the trust test opens.
RUN_IN_LAB = "04_explore_token2wav.ipynb"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STARTUP_TIMEOUT_S = 120
RUN_TIMEOUT_MS = 600_000  # one notebook on small settings: 20-120 s on 2 cores; only a hang should fail
UI_TIMEOUT_MS = 240_000  # generous: a kernel starts slowly on a busy 2-core machine; only hangs should fail
DOCMANAGER = "@jupyterlab/docmanager-extension:plugin"  # autosave, autosaveInterval (seconds)
AUTOSAVE_S = 5
# Lab's status bar item for the current notebook's kernel: "Python 3 (ipykernel) | Idle"
KERNEL_STATUS = "#jp-main-statusbar .jp-StatusBar-TextItem[title^='Change kernel']"
IMPORT_SHARE_MAX = 0.10  # of the flamegraph's width, for the imports directly under the load
def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


CHROMIUM = chromium_path()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.subprocess,  # JupyterLab, its kernels, Chromium
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
    """What the visible notebook shows: stderr/error outputs, audio players, images, over-wide tables, and
    table cells whose number breaks across lines (``broken``): each quantity in a cell (a number, a range
    "a … b", with its unit) measured as rendered, its text's line boxes on more than one line."""
    return page.evaluate("""() => {
        const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        const outs = Array.from(panel.querySelectorAll('.jp-OutputArea-output'));
        const wide = [];
        outs.forEach(o => o.querySelectorAll('table').forEach(t => {
            const w = t.getBoundingClientRect().width;
            if (w > o.clientWidth + 1) wide.push(`${Math.round(w)} px in ${o.clientWidth} px: ${t.innerText.slice(0, 60)}`);
        }));
        const n = /[−-]?\\d[\\d,]*(?:\\.\\d+)?/.source, to = /[\\s\\u00a0]*[…–][\\s\\u00a0]*/.source;
        const unit = /(?:[\\s\\u00a0]+(?:ns|µs|ms|s|%|x|×|KiB|MiB|GiB|kB|MB|GB|bytes|Hz)(?!\\w))?/.source;
        const quantity = new RegExp(n + '(?:' + to + n + ')?' + unit, 'g');
        const broken = [];
        outs.forEach(o => o.querySelectorAll('td, th').forEach(cell => {
            const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (const m of node.data.matchAll(quantity)) {
                    const range = document.createRange();
                    range.setStart(node, m.index);
                    range.setEnd(node, m.index + m[0].length);
                    const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0)
                                          .map(r => Math.round(r.top)));
                    if (lines.size > 1) broken.push(`"${m[0]}" on ${lines.size} lines in a cell ` +
                                                    `${Math.round(cell.getBoundingClientRect().height)} px tall: ` +
                                                    cell.innerText.slice(0, 60));
                }
            }
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
            broken: broken,
            prompts: Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).map(p => p.textContent.trim()),
        };
    }""")


def _save(page) -> None:
    """Save the current notebook (Ctrl+S) and wait until Lab says it is saved."""
    page.keyboard.press("Control+s")
    page.get_by_text("Saving completed").first.wait_for()


def _api(lab, method: str, path: str, body: object = None) -> object:
    """One call to the server's REST API (token in the header: no XSRF cookie needed)."""
    base, token = lab
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        text = r.read()
    return json.loads(text) if text else None


def _lab_settings(lab, plugin: str, values: dict) -> None:
    """Set a plugin's user settings through Lab's settings API, which checks them against the plugin's
    schema (a misspelt name is refused). A page loaded afterwards uses them."""
    _api(lab, "PUT", f"/lab/api/settings/{plugin}", {"raw": json.dumps(values)})
    composite = _api(lab, "GET", f"/lab/api/settings/{plugin}")["settings"]
    assert {k: composite.get(k) for k in values} == values, f"{plugin}: settings not taken: {composite}"


def _shutdown_kernels(lab) -> None:
    """End every session the server holds (a notebook's kernel keeps its model in memory otherwise)."""
    for session in _api(lab, "GET", "/api/sessions"):
        try:
            _api(lab, "DELETE", f"/api/sessions/{session['id']}")
        except urllib.error.HTTPError:
            pass


def _turn_on_autosave(page) -> None:
    """Settings ▸ Autosave Documents, as a person would; Lab applies it at once (a setting changed through
    the settings API reaches only a page loaded afterwards)."""
    page.get_by_role("menuitem", name="Settings", exact=True).click()
    item = page.locator(".lm-Menu .lm-Menu-item", has_text="Autosave Documents")
    assert "lm-mod-toggled" not in (item.get_attribute("class") or ""), "autosave was on during the run"
    item.click()


def _notebook_status(name: str) -> str:
    """``git status`` of ``notebooks/`` less the lines of the other notebooks: what a run of ``name``
    can change (itself, or a file it writes next to itself); another notebook is someone else's edit."""
    return "".join(line for line in _git_status("notebooks").splitlines(keepends=True)
                   if not (line[3:].strip().endswith(".ipynb") and Path(line[3:].strip()).name != name))


def _small_settings(path: Path, out_dir: Path) -> str:
    """The cell a person would type under the parameters cell: what papermill injects in
    ``tests/test_notebooks.py`` (``notebook_parameters``: the small settings the parameters cell declares)."""
    import papermill as pm
    from test_notebooks import notebook_parameters

    declared = pm.inspect_notebook(str(path))
    return "; ".join(f"{k} = {v!r}" for k, v in notebook_parameters(path, out_dir, declared).items())


def _parameters_cell(path: Path) -> int:
    import nbformat

    cells = nbformat.read(path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))


def _cell(page, index: int):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(index)


def _cell_count(page) -> int:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").count()


def _insert_cell_below(page, index: int, source: str) -> None:
    """Select cell ``index``, insert a code cell below it (b, command mode) and type ``source`` into it."""
    count = _cell_count(page)
    _cell(page, index).locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.wait_for_function(f"() => document.querySelectorAll("
                           f"'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length === {count + 1}")
    page.keyboard.press("Enter")  # edit it
    page.keyboard.insert_text(source)
    page.keyboard.press("Escape")
    typed = _cell(page, index + 1).locator(".jp-InputArea-editor").inner_text().strip()
    assert typed == source, f"the settings cell reads {typed!r}"


def _delete_cell(page, index: int, source: str) -> None:
    """Delete cell ``index`` (d d, command mode), after checking it is the one holding ``source``."""
    count = _cell_count(page)
    cell = _cell(page, index)
    assert cell.locator(".jp-InputArea-editor").inner_text().strip() == source, "not the settings cell"
    cell.locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("d")
    page.keyboard.press("d")
    page.wait_for_function(f"() => document.querySelectorAll("
                           f"'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length === {count - 1}")


def _wait_until_run(page) -> None:
    """Done when the kernel is idle and every code cell has an execution count, or a cell failed
    (Run All stops there, and the error output says why)."""
    page.wait_for_function("""() => {
        const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        const prompts = Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).map(p => p.textContent);
        const idle = panel.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']");
        const failed = panel.querySelector(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']");
        return idle && prompts.length && (failed || prompts.every(t => /\\[\\d+\\]/.test(t)));
    }""", timeout=RUN_TIMEOUT_MS, polling=1000)


def _flamegraphs(page) -> list[dict]:
    """Each inline flamegraph (``svg.omni-flame``, see omni_loader.profiling.flamegraph): its frames are
    ``<g class="f">`` with the name in ``data-n``, the depth in ``data-d`` (0: the load) and a ``<title>``
    naming the function and file; a frame's width is its ``<rect>``'s, measured as drawn."""
    return page.evaluate("""() => {
        const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        return Array.from(panel.querySelectorAll('.jp-OutputArea-output svg.omni-flame')).map(svg => {
            const frames = Array.from(svg.querySelectorAll('g.f')).filter(g => g.style.display !== 'none');
            const width = g => g.querySelector('rect').getBoundingClientRect().width;
            const root = frames.find(g => g.getAttribute('data-d') === '0');
            const top = frames.filter(g => g.getAttribute('data-d') === '1').map(g => ({
                name: g.getAttribute('data-n'), title: g.querySelector('title').textContent, width: width(g)}));
            return {heading: svg.querySelector('text').textContent, root: root ? root.getAttribute('data-n') : null,
                    width: root ? width(root) : 0, top: top, scripted: svg.getAttribute('data-ready') === '1'};
        });
    }""")


def _import_share(flame: dict) -> tuple[float, list[str]]:
    """The share of the load's width held by the frames directly under it that are imports."""
    imports = [f for f in flame["top"] if "import" in f["name"] or "<frozen importlib" in f["title"]]
    share = sum(f["width"] for f in imports) / flame["width"] if flame["width"] else 1.0
    return share, [f"{f['name']}: {f['width'] / flame['width']:.1%}" for f in imports if flame["width"]]


def _screenshot(page, path: Path) -> None:
    """The whole notebook: Lab scrolls inside a fixed-size page, so the page is made as tall as the
    notebook first (at most 16,000 px, a limit of Chromium's) and put back afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    hidden = page.evaluate("""() => {
        const p = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        const s = p.querySelector('.jp-WindowedPanel-outer') || p.querySelector('.jp-Notebook');
        return s.scrollHeight - s.clientHeight;
    }""")
    page.set_viewport_size({"width": size["width"], "height": min(16_000, size["height"] + max(0, hidden))})
    page.evaluate("""() => {
        const p = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        (p.querySelector('.jp-WindowedPanel-outer') || p.querySelector('.jp-Notebook')).scrollTop = 0;
    }""")
    page.wait_for_timeout(1000)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)


def _undo_settings_cell(path: Path, stored: bytes, source: str) -> None:
    """Should the typed settings cell ever reach the file (autosave is off until it is deleted, so only a
    broken run could save it), put the stored bytes back, but only when that cell is the file's one
    difference (never someone's edit)."""
    now = path.read_bytes()
    if now == stored:
        return
    try:
        nb, before = json.loads(now), json.loads(stored)
    except ValueError:
        return
    cells = [c for c in nb.get("cells", []) if "".join(c.get("source", "")).strip() != source]
    if len(cells) == len(nb.get("cells", [])) - 1 and {**nb, "cells": cells} == before:
        path.write_bytes(stored)


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


def test_an_executed_copy_is_trusted_and_shows_its_audio_and_plots(page, lab, executed_notebook) -> None:
    """The signed copy shows its audio player on opening; the same copy changed (so its signature no
    longer matches) does not: Lab strips untrusted HTML, which is why the kit signs what it writes."""
    import nbformat

    from omni_loader.notebook import files as notebooks

    copy = executed_notebook(REPO / "notebooks" / RUN_IN_LAB).copy
    assert notebooks.is_trusted(copy)
    unsigned = copy.with_name(f"unsigned-{RUN_IN_LAB}")
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


def _one_cell_notebook(name: str, source: str) -> str:
    """A notebook of one code cell under ``results/browser-test/``, as its path under the server root."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from omni_loader.notebook import files as notebooks

    path = notebooks.results_root() / "browser-test" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = new_notebook(cells=[new_code_cell(source)])
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nbformat.write(nb, path)
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        pytest.skip(f"{path} is outside the server root {REPO} ($OMNI_LOADER_RESULTS points elsewhere)")


def test_progress_bars_are_widgets_in_lab(page, lab) -> None:
    """In a kernel JupyterLab started, the kit's progress bar is an ipywidgets bar (no text redraws,
    no "IProgress not found" warning)."""
    rel = _one_cell_notebook("progress.ipynb",
                             "from omni_loader.progress import progress_bar, progress_mode\n"
                             "print(progress_mode())\n"
                             "with progress_bar(total=5, desc='synth tiny', unit='tensor') as bar:\n"
                             "    for _ in range(5):\n"
                             "        bar.update(1)")
    _open(page, lab, rel)
    _run_all(page)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-CodeCell .jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).first.wait_for(state="attached")
    page.wait_for_function("""() => {
        const p = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        return p.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']") && p.innerText.includes('5/5');
    }""", polling=500)
    shown = _outputs(page)
    texts = panel.locator(".jp-OutputArea-output").all_inner_texts()
    assert not shown["stderr"], shown["stderr"]
    assert [t.strip() for t in texts][:1] == ["widget"], texts
    assert panel.locator(".jp-OutputArea-output .widget-hprogress").count() == 1, texts


def test_status_bar_says_busy_while_a_progress_bar_runs(page, lab) -> None:
    """While a cell showing the kit's progress bar runs, the status bar's kernel item says Busy, as the
    toolbar's circle does (the issue: it said Idle once the bar appeared)."""
    rel = _one_cell_notebook("status-bar.ipynb",
                             "import time\n"
                             "from omni_loader.progress import progress_bar\n"
                             "with progress_bar(total=20, desc='a slow step', unit='step') as bar:\n"
                             "    for _ in range(20):\n"
                             "        time.sleep(0.5)\n"
                             "        bar.update(1)")
    try:
        _open(page, lab, rel)
        _run_all(page)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        panel.locator(".jp-OutputArea-output .widget-hprogress").wait_for()
        page.wait_for_timeout(1000)  # the subshell request and its status messages come just after the bar
        seen = []  # (toolbar circle, status bar) while the cell runs
        for _ in range(8):
            circle = panel.locator(".jp-Notebook-ExecutionIndicator").get_attribute("data-status")
            seen.append((circle, page.locator(KERNEL_STATUS).inner_text().strip()))
            page.wait_for_timeout(500)
        _wait_until_run(page)
    finally:
        _shutdown_kernels(lab)
    running = [text for circle, text in seen if circle == "busy"]
    assert len(running) >= 4, f"the cell was not seen running: {seen}"
    assert all(text.endswith("| Busy") for text in running), f"the status bar while the cell runs: {seen}"


@pytest.fixture
def autosave(lab):
    """Autosave off, and every AUTOSAVE_S seconds once switched on (Lab's default is two minutes) in
    the pages loaded during the test; off again afterwards."""
    _lab_settings(lab, DOCMANAGER, {"autosave": False, "autosaveInterval": AUTOSAVE_S})
    try:
        yield AUTOSAVE_S
    finally:
        _lab_settings(lab, DOCMANAGER, {"autosave": False})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_an_executed_notebook_reads_well_in_lab(page, lab, executed_notebook, path: Path) -> None:
    """Each notebook's executed copy (the suite's one papermill run of it, see ``executed_notebook``) opened
    in JupyterLab as a person would open it: what only a browser can tell. No table wider than its output
    area, no stderr or error output shown, 02's inline flamegraphs drawn with the imports directly under
    the load under 10% of the width, 04's audio player with its sound and a plot. A screenshot of each
    goes to ``results/browser-test/<notebook>-lab.png``."""
    from omni_loader.notebook import files as notebooks

    run = executed_notebook(path)
    try:
        rel = run.copy.relative_to(REPO).as_posix()
    except ValueError:
        pytest.skip(f"{run.copy} is outside the server root {REPO} ($OMNI_LOADER_RESULTS points elsewhere)")
    shot = notebooks.results_root() / "browser-test" / f"{path.stem}-lab.png"
    try:
        _open(page, lab, rel)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        panel.locator(".jp-OutputArea-output").first.wait_for()  # outputs are rendered
        page.wait_for_timeout(1000)  # and the scripts of the trusted HTML (flamegraphs) have run
        shown, flames = _outputs(page), _flamegraphs(page)
        _screenshot(page, shot)
    finally:
        _shutdown_kernels(lab)
    print(f"\n{path.name}: screenshot {shot}; flamegraphs: "
          f"{[(f['root'], round(_import_share(f)[0], 3), f['scripted']) for f in flames]}")

    problems = []
    if shown["trusted"] == 0:
        problems.append("JupyterLab does not trust the executed copy")
    if shown["stderr"]:
        problems.append(f"stderr or error output: {shown['stderr']}")
    if not shown["prompts"] or not all(re.fullmatch(r"\[\d+\]:", p) for p in shown["prompts"]):
        problems.append(f"not every cell ran: {shown['prompts']}")
    if shown["wide"]:
        problems.append(f"tables wider than their output area: {shown['wide']}")
    if shown["broken"]:
        problems.append(f"numbers broken across lines in table cells: {shown['broken'][:5]}")
    if path.name.startswith("02_") and (run.results / "baseline" / "speedscope.json").is_file():  # py-spy recorded
        if not flames:
            problems.append("no inline flamegraph, though py-spy recorded the load")
        for flame in flames:
            share, imports = _import_share(flame)
            if not flame["root"] or not flame["width"]:
                problems.append(f"a flamegraph without its load frame: {flame['heading']}")
            elif share >= IMPORT_SHARE_MAX:
                problems.append(f"imports directly under {flame['root']} hold {share:.0%} of the flamegraph "
                                f"({imports})")
    if path.name.startswith("04_") and (shown["playable"] < 1 or shown["images"] < 1):
        problems.append(f"no audio player with its sound ({shown['playable']}) or no plot image ({shown['images']})")
    assert not problems, f"{run.copy.name} in JupyterLab:\n  " + "\n  ".join(problems)


def test_a_notebook_runs_in_lab_and_autosave_keeps_the_stored_file(page, lab, autosave) -> None:
    """A notebook run through the Lab UI on small settings (a cell typed under its parameters cell, then
    Run ▸ Run All Cells) ends with every cell run and nothing a person would object to on screen; then the
    typed cell is deleted, autosave writes the notebook with its outputs on screen, and the stored file is
    as it was (the project's pre-save hook). One notebook, RUN_IN_LAB: the others' outputs are checked on
    their executed copies (``test_an_executed_notebook_reads_well_in_lab``), each notebook running once."""
    from omni_loader.notebook import files as notebooks

    path = REPO / "notebooks" / RUN_IN_LAB
    status = _notebook_status(path.name)
    stored, written = path.read_bytes(), path.stat().st_mtime_ns
    out_dir = notebooks.results_root() / "browser-test" / path.stem
    shutil.rmtree(out_dir, ignore_errors=True)
    source = _small_settings(path, out_dir)
    below = _parameters_cell(path)
    shot = notebooks.results_root() / "browser-test" / f"{path.stem}-run-in-lab.png"
    start = time.monotonic()
    try:
        _open(page, lab, f"notebooks/{path.name}")
        # Settings a person would type: a cell under the parameters cell, as papermill injects them.
        _insert_cell_below(page, below, source)
        _run_all(page)
        _wait_until_run(page)
        elapsed = time.monotonic() - start
        shown = _outputs(page)
        _screenshot(page, shot)
        print(f"\n{path.name}: ran in {elapsed:.0f} s with {source}\nscreenshot: {shot}")
        # Take the typed cell out again, so what autosave writes is the notebook as stored plus the
        # run's outputs; autosave then writes it (the tab loses its "modified" dot), hook and all.
        _delete_cell(page, below + 1, source)
        untouched = path.stat().st_mtime_ns == written  # nothing saved it during the run
        _turn_on_autosave(page)
        page.wait_for_timeout(3 * autosave * 1000)
        saved = _settles_unmodified(page, within_ms=10 * autosave * 1000)
    finally:
        page.close()  # no later autosave
        _undo_settings_cell(path, stored, source)
        _shutdown_kernels(lab)

    # Every problem at once: the file checks matter after any failure.
    problems = []
    if shown["stderr"]:
        problems.append(f"stderr or error output: {shown['stderr']}")
    if not all(re.fullmatch(r"\[\d+\]:", p) for p in shown["prompts"]):
        problems.append(f"not every cell ran: {shown['prompts']}")
    if shown["wide"]:
        problems.append(f"tables wider than their output area: {shown['wide']}")
    if shown["broken"]:
        problems.append(f"numbers broken across lines in table cells: {shown['broken'][:5]}")
    if shown["playable"] < 1 or shown["images"] < 1:
        problems.append(f"no audio player with its sound ({shown['playable']}) or no plot image ({shown['images']})")
    if not untouched:
        problems.append("the file was written during the run (the typed settings cell may have been in it)")
    if not saved:
        problems.append(f"Lab did not autosave it within {10 * autosave} s (the tab stays modified)")
    elif path.stat().st_mtime_ns <= written:
        problems.append("autosave did not write the file")
    if path.read_bytes() != stored:
        problems.append("autosaving it after its run changed the stored file")
    if _notebook_status(path.name) != status:
        problems.append(f"running it in JupyterLab changed git status of notebooks/: {status!r} -> "
                        f"{_notebook_status(path.name)!r}")
    assert not problems, f"{path.name} in JupyterLab:\n  " + "\n  ".join(problems)
