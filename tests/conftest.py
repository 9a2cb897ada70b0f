"""Shared fixtures. Everything runs on the tiny Token2Wav config so the suite stays fast on 2 cores."""

from __future__ import annotations

import json
import multiprocessing.process
import multiprocessing.util
import os
import platform
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from omni_loader.results import metadata

REPO = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------- lanes
# `make test-fast` runs `-m "not slow and not subprocess"`: the lane is chosen by markers, so it stays fast
# only if every test that starts a process carries `subprocess`. This guard makes that a rule: a test
# (its set-up, body or tear-down, fixtures it starts included) that starts a process without the marker
# fails with one line naming what it started. Processes are seen through Python's audit events
# (subprocess.Popen: servers, kernels, browsers, py-spy; os.fork, os.posix_spawn, os.system, os.exec)
# and, since multiprocessing raises none, through its two ways to start one (Process.start, and
# spawnv_passfds, which starts the forkserver and the resource tracker).
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn",
                            "os.system", "os.exec", "os.startfile"})
_UNMARKED = pytest.StashKey[str]()


class UnmarkedProcessStart(RuntimeError):
    """A test without ``@pytest.mark.subprocess`` started a process."""


class _ProcessGuard:
    """Which test is running, and whether it may start processes. One per session (conftest is imported once)."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.pid = os.getpid()

    def started(self, what: str) -> None:
        item = self.item
        if item is None or os.getpid() != self.pid or item.get_closest_marker("subprocess"):
            return  # between tests, in a forked child, or allowed
        message = (f"{item.nodeid} started a process ({what}) without @pytest.mark.subprocess: "
                   "mark it (and `slow` if it takes seconds) so `make test-fast` leaves it out")
        item.stash.setdefault(_UNMARKED, message)  # failed at report time even if the code caught the error
        raise UnmarkedProcessStart(message)

    def audit(self, event: str, args: tuple) -> None:
        if event in PROCESS_EVENTS:
            self.started(event)

    def wrap(self, owner: object, name: str, what: str) -> None:
        original = getattr(owner, name)

        def guarded(*args, **kwargs):
            self.started(what)
            return original(*args, **kwargs)

        setattr(owner, name, guarded)


_GUARD = _ProcessGuard()
# Two answers that cost a process once per interpreter and are cached: `uname -p` (platform.uname) and the
# kit's own commit (`git rev-parse`, `git status`). The kit's environment record asks both, so without
# asking here, before any test, the first in-process test to write a record would count as starting one.
platform.uname().processor
metadata.git_commit()
# Under `make mutation`, mutmut forks each mutant's tests from a server that has collected them: what is imported
# here is imported once, not once per mutant. The model code a load needs (the kit's fork server's PRELOAD:
# transformers' Qwen2.5-Omni modules, seconds to import) is imported here for that reason; a plain run of the
# suite imports it where a test first needs it.
if "mutmut" in sys.modules:
    import importlib

    from omni_loader.bench.worker import PRELOAD

    for _module in PRELOAD:
        importlib.import_module(_module)
sys.addaudithook(_GUARD.audit)
_GUARD.wrap(multiprocessing.process.BaseProcess, "start", "multiprocessing Process.start")
_GUARD.wrap(multiprocessing.util, "spawnv_passfds", "multiprocessing spawnv_passfds")


DURATIONS = Path(__file__).with_name("durations.json")  # each file's seconds in the last stored full run


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's total time to {DURATIONS.name}, which orders the next runs")


def _expected_seconds(module: str, items: list[pytest.Item], stored: dict[str, float]) -> float:
    """A test file's expected time: as stored by the last ``--store-durations`` run, else from its markers
    (a slow test 30 s, one that starts a process 5 s, any other a tenth of a second)."""
    if module in stored:
        return stored[module]
    return sum(30 if i.get_closest_marker("slow") else 5 if i.get_closest_marker("subprocess") else 0.1
               for i in items)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest test files first (tests within a file in their own order), so that under pytest-xdist
    (``make test``: ``--dist loadscope``, one file to a worker at a time) the long files start at once and
    the short ones fill in around them: the suite's tail is short. Only the order changes.

    Under ``make mutation`` the shortest files first: mutmut runs a mutant's tests with ``-x`` and orders them
    by the time of their calls alone, so it put a test whose module fixture runs a benchmark (test_sequential's,
    10 s) before the unit tests that kill most mutants in a tenth of a second, and longest-first put the
    longest files first whatever its order."""
    try:
        stored = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    except ValueError:
        stored = {}
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    sign = 1 if os.environ.get("MUTANT_UNDER_TEST") else -1  # a mutant's tests (mutmut sets it in each worker)
    order = sorted(modules, key=lambda m: sign * _expected_seconds(m, modules[m], stored))
    items[:] = [item for module in order for item in modules[module]]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _GUARD.item = item
    try:
        yield
    finally:
        _GUARD.item = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    message = item.stash.get(_UNMARKED, None)
    if message and report.passed and report.when in ("setup", "call"):
        report.outcome, report.longrepr = "failed", message
        item.stash[_UNMARKED] = ""  # one failed report per test


@pytest.fixture(scope="session", autouse=True)
def _interruptible_children() -> None:
    """Let the processes the tests start take Ctrl-C. Several tests send SIGINT to ``omni-loader`` as a
    terminal would; a suite started in the background by a non-interactive shell (``make test &``, CI
    scripts) inherits SIGINT *ignored*, and an ignored signal stays ignored across exec, so every
    process it starts would ignore those interrupts too. A handler (not SIG_IGN) is reset to the
    default at exec, so each child starts as it would from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the embedded synthetic snapshots of the tests out of the user's cache."""
    os.environ["OMNI_LOADER_CACHE"] = str(tmp_path_factory.mktemp("omni-loader-cache"))


@pytest.fixture(scope="module", autouse=True)
def _text_only_reports(request: pytest.FixtureRequest):
    """report.md without its plots ($OMNI_LOADER_PLOTS=off) in a module that sets ``TEXT_ONLY_REPORTS = True``:
    its tests read the report's text, never its plots, and drawing them was most of each report's time (65
    reports, 263 CPU-seconds of a suite run on this 2-core machine). The switch itself is tested in
    test_report; the plots are drawn and read there and in test_figures, test_compare, test_hostile and the
    notebooks. Module-scoped and autouse, so it is set before a module's own fixtures run ``reproduce``."""
    if not getattr(request.module, "TEXT_ONLY_REPORTS", False):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMNI_LOADER_PLOTS", "off")
        yield


@pytest.fixture(scope="session")
def tiny_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic tiny snapshot in the Hub layout (seed 0), shared read-only by all tests."""
    from omni_loader.token2wav.checkpoint import synthesize

    return synthesize(tmp_path_factory.mktemp("snap") / "tiny", size="tiny", seed=0)


@pytest.fixture
def python() -> str:
    """The interpreter of the test run, for real subprocesses of the CLI."""
    return sys.executable


@pytest.fixture
def probe_variant(tmp_path: Path):
    """Make a variant whose discovery step first writes what the load sees, then discovers as optimized.

    ``make(expression, end)`` evaluates ``expression`` inside the load (``os`` and ``torch`` are
    imported) and appends ``str(value) + end`` to a file; it returns the variant's dict, which any
    worker mode imports, and that file.
    """
    def make(expression: str, end: str) -> tuple[dict, Path]:
        from omni_loader.token2wav.variants import Variant

        seen = tmp_path / "seen.txt"
        step = tmp_path / "probe_step.py"
        step.write_text("import os\nimport torch\nfrom omni_loader.token2wav.discovery import find_persistent_buffers\n"
                        f"def find(model):\n    open({str(seen)!r}, 'a').write(str({expression}) + {end!r})\n"
                        "    return find_persistent_buffers(model, 'optimized')\n")
        return Variant("probe", discovery=f"{step}:find").to_dict(), seen

    return make


SHOWN_FILES = 12  # the longest files by name; the rest in one line


@pytest.hookimpl(trylast=True)  # after pytest's own --durations list: the last lines of CI's log
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Each test file's total time (set-up, body and tear-down of its tests; a module fixture counts where it
    is first used), longest first, so that a slow newcomer shows in CI's log at the next stop."""
    totals: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                path = report.nodeid.split("::", 1)[0]
                totals[path] = totals.get(path, 0.0) + report.duration
    if not totals:
        return
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    terminalreporter.write_sep("=", f"time per test file ({len(totals)} files, {sum(totals.values()):.0f} s in tests)")
    for path, seconds in ranked[:SHOWN_FILES]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {path}")
    if len(ranked) > SHOWN_FILES:
        rest = ranked[SHOWN_FILES:]
        terminalreporter.write_line(f"{sum(t for _, t in rest):8.1f} s  the other {len(rest)} files")
    if config.getoption("--store-durations"):
        DURATIONS.write_text(json.dumps({p: round(t, 1) for p, t in sorted(totals.items(), key=lambda kv: -kv[1])},
                                        indent=1) + "\n")
        terminalreporter.write_line(f"stored in {DURATIONS}: the next runs start the longest files first")


class NotebookRun(NamedTuple):
    """One notebook executed on small settings: the signed copy, where it wrote, its settings and time."""

    copy: Path
    results: Path
    parameters: dict
    seconds: float


NOTEBOOK_SESSION = "session"  # results/test-notebooks/session<PID>-...: a pytest session's executed notebooks


@pytest.fixture(scope="session")
def executed_notebook(tmp_path_factory: pytest.TempPathFactory):
    """``run(path) -> NotebookRun``: each notebook executed once per suite run, as the kit executes notebooks
    (``omni_loader.notebook.files.execute``: papermill, kernel ``python3`` of this environment, working
    directory ``notebooks/`` as in JupyterLab, the copy signed), with ``test_notebooks.notebook_parameters``
    injected (the small settings where its parameters cell declares the name, and its own). ``test_notebooks`` checks what the copies hold;
    ``test_browser`` opens the same copies in JupyterLab, which is why they are written under the results
    root (the Lab server's root is the repository): ``results/test-notebooks/session<PID>-<basetemp>/<stem>/``.
    A folder per pytest session (PID its pytest's): two sessions at once (a ``make test-fast`` beside a ``make
    test``) would otherwise execute into, and clear, the same folder. A later session removes the folders of
    sessions whose pytest has ended, so the last copies stay to be opened until then.

    Once per suite run, not per worker: under pytest-xdist the two test files may run in two workers, so
    the first to ask for a notebook executes it under a file lock in the directory the workers share (the
    parent of each worker's base temp), and records the run there; the other waits for it and reads it."""
    import json

    import papermill as pm
    from filelock import FileLock
    from test_notebooks import CELL_TIMEOUT_S, NOTEBOOK_DIR, notebook_parameters

    from omni_loader.host.procs import remove_dead_owners_dirs
    from omni_loader.notebook import files as notebooks

    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = base.parent if worker else base
    root = notebooks.results_root() / "test-notebooks"
    session = root / f"{NOTEBOOK_SESSION}{os.getppid() if worker else os.getpid()}-{shared.name}"

    def run(path: Path) -> NotebookRun:
        record = shared / f"executed-{path.stem}.json"
        with FileLock(str(record) + ".lock"):
            if not record.is_file():
                remove_dead_owners_dirs(NOTEBOOK_SESSION, str(root))
                out = session / path.stem
                shutil.rmtree(out, ignore_errors=True)  # a figure left by an attempt that did not finish must not count
                declared = pm.inspect_notebook(str(path))
                assert declared, f"{path.name}: papermill finds no parameters (tag the parameters cell)"
                parameters = notebook_parameters(path, out / "results", declared)
                start = time.perf_counter()
                notebooks.execute(path, out / path.name, parameters, cwd=NOTEBOOK_DIR, timeout=CELL_TIMEOUT_S)
                record.write_text(json.dumps({"copy": str(out / path.name), "results": str(out / "results"),
                                              "parameters": parameters, "seconds": time.perf_counter() - start}))
        done = json.loads(record.read_text())
        return NotebookRun(Path(done["copy"]), Path(done["results"]), done["parameters"], done["seconds"])

    return run


@pytest.fixture(scope="session")
def stage_group_ab(executed_notebook) -> Path:
    """The suite's one stage-group A/B, read by every test that only reads one: notebook 06's run
    (``serve_ab`` of two ``stage-group`` commands: three stage servers and an API server per start, stage 2
    loading the tiny Token2Wav with the baseline or the optimized loader, stages 0 and 1 simulated), with a
    warm-up start and four measured starts a side (``test_notebooks.NOTEBOOK_OVERRIDES``)."""
    from test_notebooks import NOTEBOOK_DIR

    return executed_notebook(NOTEBOOK_DIR / "06_where_startup_goes.ipynb").results
