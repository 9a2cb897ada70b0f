"""Shared-phase controls: which phases a pair of variants changes, and a confound the report names."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from omni_loader.reporting.controls import MATERIAL, changed_phases, control_report, pair_reports
from omni_loader.names import LEAF_PHASES, WEIGHT_LOADING_CHILDREN
from omni_loader.reporting.report_tables import controls_section, headline
from omni_loader.reporting.stats import compare, phase_summary
from omni_loader.token2wav.variants import Variant

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)


def test_the_pr_pair_changes_only_discovery_and_every_other_phase_is_a_control():
    assert changed_phases("baseline", "optimized") == ("buffer_discovery",)
    assert changed_phases("optimized", "assign") == ("load_parameters",)
    assert changed_phases("baseline", "assign") == ("buffer_discovery", "load_parameters")
    assert changed_phases("optimized", "optimized") == ()  # an A/A pair: everything is a control
    own = Variant("mine", discovery="pkg.mod:find").to_dict()
    assert changed_phases("optimized", own) == ("buffer_discovery",)


def _frame(slower: dict[str, float] | None = None, runs: int = 10) -> pd.DataFrame:
    """Rows of ``runs`` runs a side: baseline discovery 1 s, optimized 5 ms, every shared phase the
    same in both arms (small run-to-run jitter) except those in ``slower`` (extra seconds, optimized)."""
    base = {"construct": 1.0, "read_checkpoint": 0.05, "hub_check": 0.0003, "speaker_conditioning": 0.005,
            "buffer_discovery": 1.0,
            "split_buffers": 0.001, "load_parameters": 0.3, "model_loaded_size": 0.0002, "load_buffers": 0.004,
            "load_spk_dict": 0.003,
            "post_load": 0.01}
    rows, run_id = [], 0
    for i in range(runs):
        for variant in ("baseline", "optimized"):
            jitter = 1 + 0.002 * ((i * 7 + (variant == "optimized") * 3) % 5)
            phases = {p: s * jitter for p, s in base.items()}
            if variant == "optimized":
                phases["buffer_discovery"] = 0.005 * jitter
                for p, extra in (slower or {}).items():
                    phases[p] += extra
            phases["weight_loading"] = sum(phases[p] for p in WEIGHT_LOADING_CHILDREN)
            phases["total"] = sum(phases[p] for p in LEAF_PHASES)
            rows += [{"run_id": run_id, "variant": variant, "warmup": False, "status": "ok", "source": "load",
                      "phase": p, "seconds": s} for p, s in phases.items()]
            run_id += 1
    return pd.DataFrame(rows)


def test_clean_pair_names_no_control_and_the_accounting_adds_up():
    report = control_report(_frame())
    assert report.changed == ("buffer_discovery",)
    assert [c.phase for c in report.controls] == [p for p in LEAF_PHASES if p != "buffer_discovery"]
    assert report.confounders == []
    loading = report.row("weight_loading")
    assert not loading.confounded and set(loading.changed) == {"buffer_discovery"}
    assert set(loading.controls) == set(WEIGHT_LOADING_CHILDREN) - {"buffer_discovery"}
    assert loading.changed_saving == pytest.approx(0.995, rel=0.01)
    assert loading.saving == pytest.approx(loading.changed_saving + loading.controls_saving + loading.remainder)
    sentence = headline([], {"statement": "equivalent"}, "unchanged", controls=report)[-1]
    assert sentence.startswith("- **Controls**: none of the 10 phases both variants run unchanged differs")


def test_a_planted_confound_is_named_and_marks_only_the_rows_that_contain_it():
    """The optimized arm's load_parameters 0.2 s slower (code both arms share): weight loading and the
    whole load are confounded; construction, outside weight loading, is not a confounder."""
    frame = _frame(slower={"load_parameters": 0.2})
    report = control_report(frame)
    assert [c.phase for c in report.confounders] == ["load_parameters"]
    loading, total = report.row("weight_loading"), report.row("total")
    assert loading.confounders == ("load_parameters",) and total.confounders == ("load_parameters",)
    assert loading.controls["load_parameters"] == pytest.approx(-0.2, rel=0.05)
    # What the change itself bought is the discovery saving, not the row's (smaller) saving.
    assert loading.saving == pytest.approx(loading.changed_saving - 0.2, rel=0.02)
    comps = [compare(phase_summary(frame, "baseline", p), phase_summary(frame, "optimized", p))
             for p in ("buffer_discovery", "weight_loading")]
    lines = headline(comps, {"statement": "equivalent"}, "unchanged", controls=report)
    assert "**confounded** by Load parameters (see Controls)" in lines[1]
    assert "confounded" not in lines[0]  # buffer discovery is the changed step itself
    assert lines[-1].startswith("- **Controls**: 1 of the 10 phases both variants run unchanged differs: "
                                "Load parameters 301.200 ms → 501.200 ms (slower (95% CI")
    section = "\n".join(controls_section([report]))
    assert "| Load parameters |" in section and "**confounds** Token2Wav weight loading" in section
    assert "- Token2Wav weight loading: saving" in section and "**Confounded** by Load parameters" in section


def test_a_control_difference_below_the_materiality_share_marks_nothing():
    tiny = 0.5 * MATERIAL * 1.32  # half the material share of weight loading's baseline median (about 1.31 s)
    report = control_report(_frame(slower={"load_parameters": tiny}))
    control = next(c for c in report.controls if c.phase == "load_parameters")
    assert control.differs  # the statistics see it ...
    assert not report.material(control) and not report.row("weight_loading").confounded  # ... it cannot matter
    assert control_report(_frame(slower={"load_parameters": 2 * MATERIAL * 1.32})).row("weight_loading").confounded


def test_the_controls_sentence_counts_every_control_that_differs_and_names_those_that_confound():
    """The report's opening agrees with the Controls table: a control the statistics call different is counted
    even where it is too small to confound a row (01's run said '1 of the 10 differs' beside four called faster)."""
    report = control_report(_frame(slower={"load_parameters": 0.2, "load_buffers": 0.5 * MATERIAL * 1.32}))
    assert sorted(c.phase for c in report.controls if c.differs) == ["load_buffers", "load_parameters"]
    assert [c.phase for c in report.confounders] == ["load_parameters"]
    sentence = headline([], {"statement": "equivalent"}, "unchanged", controls=report)[-1]
    assert sentence.startswith("- **Controls**: 2 of the 10 phases both variants run unchanged differ: ")
    assert "Load persistent buffers" in sentence and "Load parameters" in sentence
    assert "; 1 of them (Load parameters) by at least 1% of a row it is in: the rows holding it are confounded." \
        in sentence
    small = control_report(_frame(slower={"load_buffers": 0.5 * MATERIAL * 1.32}))
    assert "1 of the 10 phases both variants run unchanged differs: Load persistent buffers" in \
        headline([], {"statement": "equivalent"}, "unchanged", controls=small)[-1]
    assert "by less than 1% of a row it is in, so no row is confounded." in \
        headline([], {"statement": "equivalent"}, "unchanged", controls=small)[-1]


SLOW_STEP = '''
import sys, time
from omni_loader.token2wav.discovery import find_persistent_buffers

def _slow(frame, event, arg):
    end = time.perf_counter() + 2e-5
    while time.perf_counter() < end:
        pass

def find(model):
    """Finds the persistent buffers as the optimized rule does, then leaves every later Python call of
    this load slower: a step that changes discovery and also slows phases both variants share."""
    found = find_persistent_buffers(model, "optimized")
    sys.setprofile(_slow)
    return found
'''


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_step_that_slows_shared_phases_is_named_in_the_report(tiny_snapshot, tmp_path, python):
    """A real benchmark (fork-server workers, the tiny snapshot): a custom variant whose discovery step
    also slows every later phase. Its pair's controls name load_parameters and mark weight loading."""
    step = tmp_path / "slow_step.py"
    step.write_text(SLOW_STEP)
    out = tmp_path / "res"
    proc = subprocess.run([python, "-m", "omni_loader", "reproduce", "--checkpoint", str(tiny_snapshot), "--runs", "5",
                           "--warmup", "1", "--variant", f"slowed=discovery:{step}:find",
                           "--variants", "baseline,optimized,slowed", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    from omni_loader.results.integrity import check_results

    check = check_results(out)
    slowed = next(r for r in pair_reports(check.frame, check.suite) if r.second == "slowed")
    assert slowed.changed == ("buffer_discovery",)
    assert "load_parameters" in [c.phase for c in slowed.confounders]
    assert slowed.row("weight_loading").confounded
    text = (out / "report.md").read_text()
    assert "### `baseline` against `slowed`" in text
    beyond = [line for line in text.splitlines() if line.startswith("| slowed | Token2Wav weight loading |")]
    assert len(beyond) == 1 and "**confounded** by " in beyond[0] and "Load parameters" in beyond[0]


def test_compare_marks_a_confounded_row_as_the_report_does():
    from omni_loader.compare.side_by_side import Entry, _confounded, consistency_checks
    from omni_loader.results.suite import Suite

    assert _confounded(_frame(), Suite({})) == {}
    confounded = _confounded(_frame(slower={"load_parameters": 0.2}), Suite({}))
    assert confounded == {"weight_loading": ("load_parameters",), "total": ("load_parameters",)}
    entry = Entry("r", Path("r"), False, Suite({}), (), {}, confounded=confounded)
    notes = [c for c in consistency_checks([entry], entry) if c.what == "controls"]
    assert [c.message for c in notes] == [
        "weight_loading is confounded: load_parameters (code both variants share) differs between them; see its "
        "report.md's Controls",
        "total is confounded: load_parameters (code both variants share) differs between them; see its report.md's "
        "Controls"]
