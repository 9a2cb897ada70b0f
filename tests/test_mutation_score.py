"""tests/mutation_score.py: the score `make mutation` prints is of the mutants it checked, equivalents left out."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "mutation_score.py"


@pytest.fixture()
def score(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("mutation_score", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    listed = tmp_path / "equivalent.md"
    listed.write_text("- `omni_loader.m.x_f__mutmut_3`: the same\n- `omni_loader.m.x_f__mutmut_4` (untested): GPU only\n")
    monkeypatch.setattr(module, "EQUIVALENT_FILE", listed)
    return module


def _meta(tmp_path: Path, codes: dict[str, int | None]) -> Path:
    (tmp_path / "mutants" / "omni_loader").mkdir(parents=True)
    meta = {"exit_code_by_key": {f"omni_loader.m.x_f__mutmut_{k}": v for k, v in codes.items()}}
    (tmp_path / "mutants" / "omni_loader" / "m.py.meta").write_text(json.dumps(meta))
    return tmp_path / "mutants"


def test_score_leaves_out_equivalents_and_counts_untested_as_survived(score, tmp_path, capsys):
    # 1, 2: killed; 3: equivalent (survived); 4: untested (survived); 5: timeout
    mutants = _meta(tmp_path, {1: 1, 2: 1, 3: 0, 4: 0, 5: 36})
    assert score.main(["m", "--mutants", str(mutants)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row == ["m", "5", "2", "1", "1", "1", "0", "0", "0", "75.0%"]


def test_an_unlisted_survivor_a_stale_entry_and_unchecked_mutants_fail_the_run(score, tmp_path, capsys):
    mutants = _meta(tmp_path, {1: 0, 2: 1, 3: 1, 4: 0, 5: None})
    assert score.main(["m", "--mutants", str(mutants)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == ["m", "5", "1", "0", "1", "2", "0", "0", "1", "33.3%"]
    assert "omni_loader.m.x_f__mutmut_1 (survived)" in out  # not listed
    assert "drop them from the list): omni_loader.m.x_f__mutmut_3 (killed)" in out  # stale
    assert "1 mutant(s) not checked yet" in out


def test_an_interrupted_run_is_not_a_passing_one(score, tmp_path, capsys):
    mutants = _meta(tmp_path, {1: 1, 2: None})
    assert score.main(["m", "--mutants", str(mutants)]) == 1
    assert capsys.readouterr().out.splitlines()[1].split()[-2:] == ["1", "100.0%"]


def test_an_unchecked_equivalent_is_not_called_stale(score, tmp_path, capsys):
    mutants = _meta(tmp_path, {1: 1, 3: None})
    score.main(["m", "--mutants", str(mutants)])
    assert "drop them from the list" not in capsys.readouterr().out
