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
