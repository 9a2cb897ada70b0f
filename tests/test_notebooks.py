"""Every notebook in notebooks/ is stored clean and runs top to bottom in a real kernel.

Notebooks are found by globbing, so a new one is tested as soon as it is added. Each is executed
the way the kit executes notebooks (``omni_loader.notebook.files.execute``: papermill, kernel ``python3``
of this environment, working directory ``notebooks/`` as in JupyterLab, the copy signed) into a
temporary file, with small settings injected: an override applies only when the notebook's
``parameters`` cell declares that name (read with papermill's ``inspect_notebook``).

What a person reading the executed copy would object to is checked on every notebook: an error, any
stderr output (warnings, a progress bar redrawn line by line), a number in scientific notation
(``e+03``), and a copy JupyterLab would not trust (it would hide the HTML outputs).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable
from pathlib import Path

import nbformat
import pytest

from omni_loader.notebook import files as notebooks

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # per cell; a stuck cell fails the test instead of hanging it
SCIENTIFIC = re.compile(r"\d[eE][+-]\d")  # 2.6e+03, 5.129299e+12
BASE64 = re.compile(r"base64,[A-Za-z0-9+/=\s]+")  # embedded audio and images are not numbers
SCRIPT = re.compile(r"<script\b.*?</script>", re.S)  # nor is code a reader never sees
# A tick label in scientific form: 2×10³, mathtext ($10^{2}$), 1e+05, 10^3. The digit before the "e"
# keeps a category such as "stage-2" from matching (as SCIENTIFIC).
SCIENTIFIC_TICK = re.compile(r"×10|\$|\d[eE][+-]\d|10\^")


def small_overrides(out_dir: Path) -> dict[str, object]:
    """Settings that keep one notebook's run in seconds; only the names a notebook declares are passed."""
    return {
        "size": "tiny",  # the tiny synthetic snapshot / model config
        "quick": True,  # quick presets (e.g. the traversal sweep)
        "runs": 1,  # measured runs per variant
        "repeats": 1,  # timed repeats per point
        "warmup": 0,  # warm-up runs
        "out_dir": str(out_dir),  # results written under the test's tmp directory
        "results_dir": str(out_dir),
        "n_codes": 16,  # codec tokens in a forward pass
        "num_steps": 2,  # ODE steps of the DiT sampler
        # 02's unprofiled runs per variant in fresh processes: the profile's own default, because 02's run is the
        # one profile of the suite, which test_profiling reads (the median of three is one of its promises)
        "reference_runs": 3,
        # 02's differential profile: the suite's one --diff run, which test_profile_diff reads
        "diff_runs": 7,
        "cold_runs": 2,  # 01's cold benchmark (two runs: the sentence needs medians, not a verdict)
        "token2wav": "tiny",  # 03's real model placed on the curves
        "archs": ["resnet", "bert"],  # 05's audit: two architectures, one with persistent buffers
        "simulate_seconds": "0.2,0.3",  # 06's simulated stages
    }


# Where one notebook's run is also the suite's one run of something other tests read, it needs more than
# the small settings: 06's stage-group A/B is read by test_stage_logs and test_server (four starts a side, the
# fewest for which the rank test can claim a difference; no warm-up start: each start costs about 17 s of the
# suite here, and the warm-ups' place in a plan is checked on stand-in servers in test_server).
NOTEBOOK_OVERRIDES: dict[str, dict[str, object]] = {
    "06_where_startup_goes": {"warmup": 0, "runs": 4},
}


def notebook_parameters(path: Path, out_dir: Path, declared: Iterable[str]) -> dict[str, object]:
    """What the suite injects into ``path``'s parameters cell: the small settings it declares, then its own."""
    given = {**small_overrides(out_dir), **NOTEBOOK_OVERRIDES.get(path.stem, {})}
    return {k: v for k, v in given.items() if k in set(declared)}


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_clean(path: Path) -> None:
    """nbformat v4, valid, no outputs, null execution counts, and a cell tagged ``parameters``."""
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    assert nb.nbformat == 4, f"{path.name}: nbformat {nb.nbformat}"
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: cell {i} has stored outputs"
            assert cell.execution_count is None, f"{path.name}: cell {i} has execution_count {cell.execution_count}"
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters', want 1"
    assert tagged[0].cell_type == "code"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_parameter_says_its_type_and_is_checked_against_it(path: Path) -> None:
    """Each parameter is declared with its type (``runs: int = 5``: papermill reads it, ``--help-notebook`` shows
    it) and the next code cell checks every one (``check_parameters(globals())``): a parameter added without a type
    would be taken unchecked, and ``-y 'runs: "3"'`` would fail deep in the kit."""
    import papermill as pm

    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    first = next(i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    untyped = [n for n in pm.inspect_notebook(str(path)) if not re.search(rf"^{n}\s*:", nb.cells[first].source, re.M)]
    assert not untyped, f"{path.name}: parameters without a type: {untyped}"
    after = next(c for c in nb.cells[first + 1:] if c.cell_type == "code")
    assert "kit.check_parameters(globals())" in after.source, f"{path.name}: the parameters are not checked first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_as_jupyter_writes_it(path: Path) -> None:
    """Every cell has its own id and the bytes are nbformat's: otherwise opening and saving the notebook
    in JupyterLab (which adds missing ids) shows a diff nobody made. The browser test checks the same
    through a real JupyterLab; this one fails in the fast lane, before a cell without an id lands."""
    raw = path.read_text(encoding="utf-8")
    cells = json.loads(raw)["cells"]
    missing = [i for i, cell in enumerate(cells) if "id" not in cell]
    assert not missing, f"{path.name}: cells {missing} have no id"
    assert len({cell["id"] for cell in cells}) == len(cells), f"{path.name}: two cells share an id"
    assert nbformat.writes(nbformat.reads(raw, as_version=nbformat.NO_CONVERT)) + "\n" == raw, \
        f"{path.name}: not stored as nbformat writes it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_holds_no_settings_a_test_typed_into_it(path: Path) -> None:
    """The browser test types small settings into a cell under the parameters cell and deletes it before
    Lab's autosave; if it ever stays (a run killed half-way, an edit saved), the stored notebook would run
    on tiny settings and write into the test's directory. Only the parameters cell assigns the parameters."""
    import papermill as pm

    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    declared = set(pm.inspect_notebook(str(path)))
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "parameters" in cell.get("metadata", {}).get("tags", []):
            continue
        assert "browser-test" not in cell.source, f"{path.name}: cell {i} holds a browser test's settings"
        statements = [s.strip() for line in cell.source.splitlines() for s in line.split(";") if s.strip()]
        assigned = {s.split("=", 1)[0].strip() for s in statements if re.fullmatch(r"\w+\s*=[^=].*", s)}
        assert not (statements and len(assigned) == len(statements) and assigned <= declared), \
            f"{path.name}: cell {i} only re-assigns parameters ({', '.join(sorted(assigned))}): a settings cell left in"


# A measurement typed into prose: a number with a unit (ms, s, minutes, GB, MiB, kHz, ...), a ratio (300×, ~300x) or
# a percentage. A name is not one: the lookbehind leaves Qwen2.5-Omni-3B, 0.28.0, 2-core and 01–06 alone, and a PR or
# issue number has no unit. Code (fenced or `inline`) is code, not a figure in prose.
TYPED_NUMBER = re.compile(r"(?<![\w.\-/])~?\d[\d,]*(?:\.\d+)?[ \u00a0]?"
                          r"(?:ns|µs|ms|s|sec|seconds?|minutes?|mins?|hours?|[KMGT]i?B|kB|bytes?|B|kHz|Hz|px|%|×|x)"
                          r"(?![\w])")
MARKDOWN_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
TYPED_SCALE = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
               "minute": 60.0, "minutes": 60.0, "min": 60.0, "mins": 60.0, "hour": 3600.0, "hours": 3600.0}


def _allowed_figures() -> tuple[list[float], set[str]]:
    """What prose may type: the PR's figures, from its table (medians, savings and ratios, in seconds or as
    ratios; its memory and GPU lines as written), and the kit's statistical design constants as percentages
    (the 95% intervals, the 80% power of the detectability sentences, the 5% false-discovery rate), read from
    the kit, so a changed constant makes the prose that types it fail here."""
    from omni_loader.profiling.diff_stats import FDR
    from omni_loader.reporting.measurements import load_reference
    from omni_loader.reporting.stats import ALPHA
    from omni_loader.startup.detectable import POWER

    ref = load_reference()
    figures = []
    for m in ref["measurements"]:
        b, o = float(m["baseline"]), float(m["optimized"])
        figures += [b, o, b - o] + ([b / o] if o else [])
    percents = {f"{round(100 * x):g}%" for x in (0.95, POWER, FDR, ALPHA)}
    written = " ".join(str(v) for v in [*ref["environment"].values(), *ref.get("memory", {}).values()])
    return figures, percents | {m.group(0).replace(" ", "") for m in TYPED_NUMBER.finditer(written)}


def typed_numbers(markdown: str) -> list[str]:
    """The measurements typed into ``markdown`` that are neither a name nor a figure of the PR's table nor a
    design constant of the kit (:func:`_allowed_figures`), each with a little context."""
    figures, allowed = _allowed_figures()
    text = MARKDOWN_CODE.sub("`…`", markdown)
    found = []
    for m in TYPED_NUMBER.finditer(text):
        typed = m.group(0).lstrip("~").replace("\u00a0", "").replace(" ", "")
        number = re.match(r"[\d,.]+", typed).group(0)
        unit = typed[len(number):]
        value, digits = float(number.replace(",", "")), len(number.split(".")[1]) if "." in number else 0
        half = 0.5 * 10.0 ** -digits
        scale = TYPED_SCALE.get(unit)
        if typed in allowed or (unit in ("×", "x") or scale) and any(
                abs(value - f / (scale or 1.0)) <= half * (1 + 1e-9) for f in figures):
            continue
        found.append(text[max(0, m.start() - 30):m.end() + 10].replace("\n", " "))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_measurement_is_typed_into_markdown(path: Path) -> None:
    """Every figure in a notebook's prose comes from its run or the kit's data, shown as computed Markdown: a
    number typed into a Markdown cell (1.7 GB, 9 minutes, about 300×) stays while the run beside it says
    otherwise (issue: 02's 1.7 GB against 04's 1,492.8 MiB, 04's 9 minutes against a vocoder's 12 s)."""
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    typed = [(i, t) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown" for t in typed_numbers(cell.source)]
    assert not typed, f"{path.name}: measurements typed into Markdown (compute them): " + "; ".join(
        f"cell {i}: …{t}…" for i, t in typed)


def test_the_typed_number_check_catches_what_it_should() -> None:
    """The check, planted: the issue's typed figures are caught; names, the PR's figures and the kit's constants are not."""
    for typed in ("1.7 GB of fresh parameters", "a default pass took 9 minutes", "about 300× faster", "the ~300x",
                  "a 24 kHz waveform", "up to 1.5× slower", "12% of the width", "56 MiB of weights", "a 105 s startup"):
        assert typed_numbers(typed), typed
    for name in ("Qwen2.5-Omni-3B", "PR 7061 (issue 7060)", "vLLM-Omni 0.28.0 and 0.30.0", "notebooks 01–06",
                 "a 2-core machine", "the PR's 292× on an MI300X", "105.738 s → 104.322 s", "a 0.48 s saving",
                 "95% interval", "80% of the time", "5% false claims", "`--runs 5 s`", "B × N", "1 AMD Instinct MI300X VF"):
        assert not typed_numbers(name), name


# A value a cell computes only to show: dropped unseen unless it is the cell's last expression (or passed to kit.show).
SHOWN_VALUES = re.compile(r"table|plot|figure|readable")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_cell_computes_a_table_or_figure_that_it_then_drops(path: Path) -> None:
    """The third Lab pass: 03's and 05's tables of ratios vanished when a print() was added under them (Jupyter shows
    a cell's last expression only). A call that makes a table or a figure, not last in its cell, is shown through
    kit.show or assigned."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        body = ast.parse(TransformerManager().transform_cell(cell.source)).body  # %magics as IPython runs them
        for stmt in body[:-1]:
            call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
            name = call and (call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", ""))
            assert not (name and SHOWN_VALUES.search(name)), \
                f"{path.name}: cell {i} line {stmt.lineno}: {name}(...) is not the cell's last expression: never shown"


@pytest.mark.slow
@pytest.mark.subprocess  # a kernel per notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_executes(path: Path, executed_notebook) -> None:
    """The suite's one execution of each notebook (``executed_notebook`` in conftest.py, shared with the
    browser test, which opens these copies in JupyterLab): what a reader of the executed copy would
    object to, the files its figures were drawn from, and each notebook's own promises."""
    run = executed_notebook(path)
    executed = nbformat.read(run.copy, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}"
    injected = [c for c in executed.cells if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    assert (len(injected) == 1) == bool(run.parameters)
    stderr = [o.text for o in _outputs(executed) if o.output_type == "stream" and o.name == "stderr"]
    assert not stderr, f"{path.name}: stderr output: {stderr[0][:500]!r}"
    scientific = [m.group(0) for text in _shown_text(executed) for m in re.finditer(r".{0,40}\d[eE][+-]\d.{0,20}", text)]
    assert not scientific, f"{path.name}: numbers in scientific notation: {scientific[:3]}"
    assert notebooks.is_trusted(run.copy), f"{path.name}: the executed copy is not signed; JupyterLab would hide its HTML"
    ticks = [(name, text) for name, text in tick_labels(figure_tables(run.results)) if SCIENTIFIC_TICK.search(text)]
    assert not ticks, f"{path.name}: tick labels in scientific form: {ticks[:5]}"
    print(f"{path.name}: executed in {run.seconds:.1f} s with {run.parameters}")
    check = PROMISES.get(path.name)
    if check:
        check(executed, run.results)



@pytest.mark.slow
@pytest.mark.subprocess  # the same execution as test_notebook_executes (shared, once per suite run)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_sentences_agree_with_its_saved_results(path: Path, executed_notebook) -> None:
    """Every number of the sentences the notebook printed (medians, savings, shares, the largest phases, slopes,
    the clip's length) recomputed from the files its run saved (``tests/sentences.py``): a sentence typed into a
    notebook, or computed from the wrong column, disagrees with the run beside it."""
    from sentences import CHECKS, check

    if path.stem not in CHECKS:
        pytest.fail(f"{path.name}: no sentence check in tests/sentences.py (add one for a new notebook)")
    run = executed_notebook(path)
    findings = check(path.stem, run.copy, run.results)
    assert findings.checked >= SENTENCES_AT_LEAST.get(path.stem, 1), \
        f"{path.name}: {findings.checked} sentence number(s) checked; a sentence tests/sentences.py knows was renamed?"
    assert not findings.problems, "sentences that disagree with the saved results:\n  " + "\n  ".join(findings.problems)


# How many numbers' checks each notebook's sentences give at least (on the suite's small settings).
SENTENCES_AT_LEAST = {"01_reproduce_pr_tables": 10, "02_profiles": 5, "03_module_traversal_costs": 8,
                      "04_explore_token2wav": 5, "05_beyond_the_pr": 6, "06_where_startup_goes": 8}

def figure_tables(out_dir: Path) -> list[Path]:
    """The CSV files the kit writes beside its saved figures (write_figure: PNG, SVG and this CSV)."""
    from omni_loader.reporting.figures import FIGURE_DATA_COLUMNS

    found = []
    for path in sorted(out_dir.rglob("*.csv")):
        if not path.with_suffix(".png").is_file():
            continue
        with open(path, newline="", encoding="utf-8") as fh:
            if tuple(next(csv.reader(fh), ())) == FIGURE_DATA_COLUMNS:
                found.append(path)
    return found


def tick_labels(tables: list[Path]) -> list[tuple[str, str]]:
    """``(file, text)`` of every drawn tick label the figure CSVs list (rows of kind x/ytick_label): plots
    are images, so their tick labels are read from the table written beside each."""
    rows = []
    for path in tables:
        with open(path, newline="", encoding="utf-8") as fh:
            rows += [(path.name, row["text"]) for row in csv.DictReader(fh)
                     if row["kind"] in ("xtick_label", "ytick_label")]
    return rows


def _outputs(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _mimes(nb: nbformat.NotebookNode) -> set[str]:
    return {m for o in _outputs(nb) if o.output_type in ("display_data", "execute_result") for m in o.data}


def _text(nb: nbformat.NotebookNode, mime: str = "text/plain") -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get(mime, "")) for o in _outputs(nb))


def _shown_text(nb: nbformat.NotebookNode) -> list[str]:
    """Everything a reader sees as text: streams, plain text, HTML and Markdown (embedded media left out)."""
    texts = []
    for o in _outputs(nb):
        texts.append(o.get("text", ""))
        for mime in ("text/plain", "text/html", "text/markdown"):
            texts.append(SCRIPT.sub("", BASE64.sub("base64,", str(o.get("data", {}).get(mime, "")))))
    return texts


def _promises_03(nb: nbformat.NotebookNode, results: Path) -> None:
    assert {"image/png", "text/html"} <= _mimes(nb), "03: no inline plot or table"
    text = _text(nb)
    shown = _text(nb, "text/markdown") + _text(nb, "text/html")
    assert "slope" in text and re.search(r"(Full-size|Tiny) Token2Wav: N = [\d,]+ modules", shown), \
        "03: no fitted slopes or Token2Wav placement"
    assert "token2wav-" not in text + shown, "03: the sweep's real model is named by its key, not in words"
    assert "variants agree on 1 persistent buffer" in text, "03: no agreement check on the real model"
    assert (results / "traversal.csv").is_file() and (results / "traversal.png").is_file()


def _promises_02(nb: nbformat.NotebookNode, results: Path) -> None:
    html = _text(nb, "text/html")
    assert "<table" in html, "02: no tables"
    if (results / "baseline" / "speedscope.json").is_file():  # py-spy could record here
        assert html.count('class="omni-flame"') == 3, "02: not one inline flamegraph per variant and the diff's"
        claimed = re.findall(r"- `([^`]+)` \([^)]*\): .*? faster by", _text(nb, "text/markdown"))
        assert "Module.state_dict" in claimed, f"02: the differential profile does not claim state_dict: {claimed}"
        assert "stacks under load_token2wav() only" in html, "02: the flamegraph does not say which samples it shows"
        assert "speedscope.json</a>" in html, "02: no link to the speedscope file"
    markdown = _text(nb, "text/markdown")
    assert "](baseline/profile.md)" not in markdown, "02: profile.md links relative to the results, not the notebook"


def _promises_04(nb: nbformat.NotebookNode, results: Path) -> None:
    assert {"image/png", "text/html", "text/markdown"} <= _mimes(nb), "04: no chart, table or note"
    assert "<audio" in _text(nb, "text/html"), "04: no audio player"
    note = _text(nb, "text/markdown")
    assert note.count("The weights are random") == 1, "04: does not say once that the synthetic weights are random"
    assert "RANDOM" not in _text(nb), "04: the random-weights warning is printed a second time"
    assert (results / "token2wav.wav").is_file(), "04: the clip is not saved"
    assert re.search(r"The \d+ anti-aliasing activations \(\d+ modules .*\) hold \d+ tensors of [\d,]+ bytes", note), \
        "04: the anti-aliasing modules are not counted and weighed"


def _promises_06(nb: nbformat.NotebookNode, results: Path) -> None:
    assert {"image/png", "text/html", "text/markdown"} <= _mimes(nb), "06: no Gantt chart, table or sentence"
    markdown, html = _text(nb, "text/markdown"), _text(nb, "text/html")
    assert "Critical path: ready at" in markdown and "gated it" in markdown, "06: no critical path of the start"
    assert all(f"stage-{i}" in html for i in range(3)), "06: the timeline table lacks a stage"
    assert "Token2Wav weight loading" in html and "At this spread (SD " in markdown  # phases in words; detectability
    assert len(list((results / "logs").glob("*-baseline.log"))) >= 1, "06: no serve-ab logs"
    assert "| the PR (MI300X) | — (5 a side, not published) | 105.738 → 104.322 |" in markdown, \
        "06: opens on the PR's startup row and never shows it"
    assert re.search(r"Here the optimized starts' median is [\d,.]+ (ms|s) (faster|slower)", markdown), "06: no verdict words"


def _promises_01(nb: nbformat.NotebookNode, results: Path) -> None:
    assert {"image/png", "text/markdown"} <= _mimes(nb), "01: no plot or table"
    # The answer first: before the first section heading, one cell shows this notebook's run's PR rows and picture.
    first_section = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## "))
    opening = [o for c in nb.cells[:first_section] if c.cell_type == "code" for o in c.outputs]
    shown = "".join(str(o.get("data", {}).get("text/markdown", "")) + str(o.get("data", {}).get("text/html", ""))
                    for o in opening)
    assert "**The answer** (`" in shown and any("image/png" in o.get("data", {}) for o in opening), \
        "01: the answer (picture and verdicts) is not on the first screen"
    assert shown.index("Buffer discovery") < shown.index("Calls to state_dict()"), \
        "01: the counts come before the timed verdicts, which then fall below the first screen"
    assert "Buffer discovery" in shown and "Token2Wav weight loading" in shown and re.search(r"no claim|faster|slower",
                                                                                             shown), \
        "01: the first screen lacks the PR's two timed rows with their verdicts"
    plots = sorted((results / "plots").glob("*.png"))
    assert plots, f"01: no plots in {results / 'plots'}"
    tables = figure_tables(results)
    assert all(p.with_suffix(".csv") in tables for p in plots), \
        f"01: not every plot has its figure CSV beside it: {[p.name for p in plots]}"
    parts = re.findall(r"(This run|The PR \(MI300X\)): weight loading .*?, of which buffer discovery .*? and the rest",
                       _text(nb, "text/markdown"))
    assert parts == ["This run", "The PR (MI300X)"], f"01: the weight-loading ratio is not taken apart: {parts}"
    warm_cold = re.findall(r"\*\*(Warm|Cold)\*\*(?: \([^)]*\))?: the fix saves", _text(nb, "text/markdown"))
    assert warm_cold == ["Warm", "Cold"], f"01: what the fix is worth warm and cold is not said: {warm_cold}"
    assert "cold than warm" in _text(nb, "text/markdown") and "same saving" not in _text(nb, "text/markdown"), \
        "01: the cold and warm savings are not set side by side in numbers"
    assert "Buffer discovery alone, the traversal the fix removes, saves" in _text(nb, "text/markdown"), \
        "01: the prose's 'the same traversal either way' has no number beside it (the fifth Lab pass)"


def _promises_05(nb: nbformat.NotebookNode, results: Path) -> None:
    markdown = _text(nb, "text/markdown")
    source = (results / "my_loader.py").read_text().splitlines()
    walk = 1 + next(i for i, ln in enumerate(source) if "return name in model.state_dict()" in ln)
    loop = 1 + next(i for i, ln in enumerate(source) if "if is_persistent(model, name)" in ln)
    found = [ln for ln in markdown.splitlines() if "| my_loader.py:" in ln]  # shown relative to the results
    # The example's one walk per buffer, through its helper, priced; the hoisted walk is not a finding.
    assert len(found) == 1, f"05: the source audit should find the example's one walk per buffer: {found}"
    assert f"| my_loader.py:{walk} | `model.state_dict()` | my_loader.is_persistent |" in found[0], found[0]
    assert f"my_loader.py:{loop} (comprehension)" in found[0], found[0]
    assert "| module visits |" in markdown, "05: the source audit's findings are unpriced"
    assert "1 finding\n" in _text(nb), "05: the source audit found something other than its example's one walk"
    assert "**The PR's rows** (`baseline` against `optimized`)" in markdown, "05: promises the PR's table, shows none"
    assert re.search(r"load's largest phases are [A-Z][^;]* \d", markdown), \
        "05: names the next bottleneck without this run's numbers"


# Extra checks for the notebooks that promise specific content (others only have to run cleanly).
PROMISES = {
    "05_beyond_the_pr.ipynb": _promises_05,
    "01_reproduce_pr_tables.ipynb": _promises_01,
    "06_where_startup_goes.ipynb": _promises_06,
    "02_profiles.ipynb": _promises_02,
    "03_module_traversal_costs.ipynb": _promises_03,
    "04_explore_token2wav.ipynb": _promises_04,
}


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_parameter_of_the_wrong_type_is_named_before_anything_runs(tmp_path: Path) -> None:
    """``quick="False"`` is a non-empty string, so true to Python: the notebook's first cell names the
    parameter and the type it needs, and nothing is written to its results directory."""
    import papermill as pm

    out = tmp_path / "results"
    with pytest.raises(pm.PapermillExecutionError) as raised:
        notebooks.execute(NOTEBOOK_DIR / "03_module_traversal_costs.ipynb", tmp_path / "03.ipynb",
                          {"quick": "False", "out_dir": str(out)}, cwd=NOTEBOOK_DIR, timeout=CELL_TIMEOUT_S)
    assert raised.value.ename == "ParameterError"
    assert raised.value.evalue == "notebook parameter quick='False' is a str; it needs True or False"
    assert not out.exists()
