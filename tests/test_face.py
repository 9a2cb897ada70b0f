"""A notebook of your own, written with the face alone: docs/my_first_ab.ipynb (five cells: a tiny A/B, its table,
its plot), executed as the kit executes notebooks. What docs/notebooks.md shows a reader must run as shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "my_first_ab.ipynb"


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_notebook_written_with_the_face_alone_runs_a_tiny_ab_and_shows_its_table_and_plot(tmp_path, monkeypatch):
    from omni_loader.notebook.files import RESULTS_ENV, execute

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "results"))  # the kernel inherits it: results go under tmp_path
    code = [c for c in json.loads(EXAMPLE.read_text())["cells"] if c["cell_type"] == "code"]
    assert len(code) == 5, "the example is five cells"
    copy = execute(EXAMPLE, tmp_path / "executed.ipynb", timeout=300)
    outputs = [o for c in json.loads(copy.read_text())["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    shown = [o.get("data", {}) for o in outputs if o["output_type"] == "display_data"]
    tables = [d["text/html"] for d in shown if "text/html" in d and "<table" in "".join(d["text/html"])]
    assert any("Buffer discovery" in "".join(t) for t in tables), "no table of the PR's rows"
    assert any("image/png" in d for d in shown), "no plot"
    made = list((tmp_path / "results").glob("my-first-ab-*/plots/where_time_goes.png"))
    assert len(made) == 1, "the A/B's results did not go where results_dir said"


@pytest.mark.slow
def test_a_notebook_checks_its_directory_once_whatever_sections_it_shows(tmp_path, monkeypatch):
    """``r = kit.results(out)`` reads and checks ``out`` once; every section of ``r`` (each property, each method,
    found on the class, not listed here) is drawn from that check, so a notebook of many sections checks once."""
    import functools
    import inspect
    import sys

    import omni_loader.notebook as kit
    from omni_loader.notebook.sections import SavedResults
    from omni_loader.results import integrity
    from test_report import ARMS, _arms_results

    out = _arms_results(tmp_path / "res")
    calls = []

    def counted(directory):
        calls.append(directory)
        return original(directory)

    original = integrity.check_results
    for module in list(sys.modules.values()):  # every module that holds the name, as imported
        if getattr(module, "check_results", None) is original:
            monkeypatch.setattr(module, "check_results", counted)
    r = kit.results(out)
    shown = []
    for name, member in inspect.getmembers(SavedResults):
        if name.startswith("_"):
            continue
        if isinstance(member, (property, functools.cached_property)):
            shown.append(getattr(r, name))
            continue
        needed = [p.name for p in list(inspect.signature(member).parameters.values())[1:]
                  if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        shown.append({(): lambda: member(r), ("first", "second"): lambda: member(r, ARMS[0], ARMS[-1]),
                      ("cold",): lambda: member(r, r)}[tuple(needed)]())
    assert len(shown) >= 15 and any(shown)
    assert calls == [out], f"checked {len(calls)} times"
