"""The audit: transformers architectures built on the meta device, both rules checked against state_dict()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from omni_loader.sweep.audit import audit, audit_model, build_on_meta

ARCHS = ("resnet", "encodec", "bert")


@pytest.fixture(scope="module")
def models() -> dict:
    return {arch: build_on_meta(arch) for arch in ARCHS}


@pytest.mark.slow
def test_audit_agrees_with_state_dict_on_every_model_it_builds(models: dict) -> None:
    rows = {r.arch: r for r in audit(ARCHS, repeats=1, progress=False)}
    for arch, model in models.items():
        buffers = {name for name, _ in model.named_buffers()}
        truth = buffers & set(model.state_dict())  # what state_dict() says is persistent
        row = rows[arch]
        assert not row.error and row.agree is True and row.hazards == []
        assert (row.named_buffers, row.persistent_buffers, row.baseline_calls) == (len(buffers), len(truth),
                                                                                    len(buffers))
        assert row.modules == sum(1 for _ in model.named_modules())
    assert rows["resnet"].named_buffers == 159 and rows["encodec"].named_buffers == 224


def test_a_state_dict_hook_is_flagged_and_breaks_agreement(models: dict) -> None:
    model = build_on_meta("resnet")
    victim = next(name for name, _ in model.named_buffers())

    def drop(module, state_dict, prefix, local_metadata):
        state_dict.pop(victim, None)

    model.register_state_dict_post_hook(drop)
    row = audit_model("resnet+hook", model, repeats=1)
    assert row.agree is False
    assert any("state_dict post-hooks" in h for h in row.hazards)
    assert row.persistent_buffers == 159  # the optimized rule cannot see the hook


def test_unbuildable_architecture_is_a_row_not_a_crash() -> None:
    (row,) = audit(["no-such-architecture"], repeats=1, progress=False)
    assert row.error and "\n" not in row.error and row.agree is None


@pytest.mark.slow
@pytest.mark.subprocess
def test_audit_command_writes_tidy_rows(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "omni_loader", "audit", "--arch", "resnet", "--arch", "bert",
                           "--repeats", "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(tmp_path / "audit.csv", keep_default_na=False)
    assert list(frame["arch"]) == ["resnet", "bert"]  # costliest baseline first
    assert frame.set_index("arch").loc["resnet", "baseline_calls"] == 159
    assert "| resnet | ResNetModel |" in proc.stdout and "Rules disagree on: none." in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "omni_loader", "audit", "--arch", "nope"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "'nope'" in bad.stderr


def _lab_placement():
    """05's second Lab pass: four audited models and the sweep's Token2Wav on a quick sweep's line (slope 0.95,
    fitted up to B·N 65,536); seamless_m4t the highest point but one, at 2.21x the line."""
    import math

    from omni_loader.sweep.fits import LogLogFit

    rows = [("bert", 228, 2, 2.090e-3), ("resnet", 282, 159, 225.003e-3), ("encodec", 297, 224, 211.701e-3),
            ("seamless_m4t", 2146, 76, 1188.220e-3), ("token2wav-full", 1092, 219, 1004.619e-3)]
    fit = LogLogFit(0.953, math.log10(775.031e-3) - 0.953 * math.log10(239_148), 0.99, 0.03, 12, 64, 65_536)
    placed = pd.DataFrame([{"arch": a, "N": n, "B": b, "x": n * b, "baseline_seconds": s,
                            "predicted_seconds": float(fit.predict(n * b)),
                            "measured_over_fit": s / float(fit.predict(n * b)), "inside_fitted_range": n * b <= 65_536}
                           for a, n, b, s in rows])
    return placed, fit


def test_the_models_labels_lie_inside_the_axes_clear_of_each_other_and_the_exponent_is_a_superscript() -> None:
    """05's plot wrote "seamless_m4t" on its top frame line, the Token2Wav star right under the frame, and its legend
    "time ∝ (B·N)^0.95": every label lies inside the axes and overlaps no other label, no point and not the legend,
    every point lies below the frame, and the exponent is set as a superscript (mathtext, in the legend only)."""
    from matplotlib.text import Annotation

    from omni_loader.sweep.audit import overlap, plot_on_curve

    placed, fit = _lab_placement()
    fig = plot_on_curve(placed, fit)
    fig.canvas.draw()
    ax = fig.axes[0]
    frame = ax.get_window_extent()
    labels = [t for t in ax.texts if isinstance(t, Annotation)]
    assert sorted(t.get_text() for t in labels) == sorted(placed["arch"].replace("token2wav-full", "full-size Token2Wav"))
    boxes = [t.get_window_extent() for t in labels]
    boxes = [(b.x0, b.y0, b.x1, b.y1) for b in boxes]
    for text, box in zip(labels, boxes):
        assert frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1, text
    assert all(overlap(a, b) == 0 for i, a in enumerate(boxes) for b in boxes[i + 1:]), boxes
    legend = ax.get_legend().get_window_extent()
    assert all(overlap(box, (legend.x0, legend.y0, legend.x1, legend.y1)) == 0 for box in boxes)
    centres = ax.transData.transform(placed[["x", "baseline_seconds"]].to_numpy(float) * [1, 1e3])  # ms axis
    star = 220 ** 0.5 / 2 * fig.dpi / 72  # the star's radius in pixels
    assert (centres[:, 1] + star + 12 < frame.y1).all()  # no point on or right under the top frame line
    for box in boxes:
        assert not any(overlap(box, (cx - 3, cy - 3, cx + 3, cy + 3)) for cx, cy in centres)
    [line_label] = [t.get_text() for t in ax.get_legend().get_texts() if "∝" in t.get_text()]
    assert "^" not in line_label.replace("$^{", "") and "$^{0.95}$" in line_label


def test_the_factor_of_two_is_computed_and_names_every_model_with_what_a_ratio_outside_it_means() -> None:
    """05's prose said "values within a factor of about two of 1 ... say the B·N law carries over" beside
    seamless_m4t's 2.21, outside the fitted range, without saying whether 2.21 counts: the line under the table
    names the models within, and for one outside, its price per visit against the line's and the extrapolation."""
    from omni_loader.sweep.audit import OnCurve

    placed, fit = _lab_placement()
    line = OnCurve(placed, fit).factor_sentence()
    assert line.startswith("Within a factor of 2 of the line (baseline ÷ predicted 0.5\u00a0…\u00a02): bert (1.05), "
                           "resnet (1.43), encodec (0.92), full-size Token2Wav (1.30). Outside it: seamless_m4t (2.21) "
                           "took 1,188 ms where the line predicts 538 ms at B·N = 163,096: 7.29 µs per module visit "
                           "against the line's 3.30 µs")
    assert "beyond the fitted range (which ends at 65,536)" in line
    assert "carries over to every model" in OnCurve(placed[placed.arch != "seamless_m4t"], fit).factor_sentence()


def test_05_shows_the_computed_lines_and_its_prose_names_phases_in_words() -> None:
    """05's ratio is headed with the table's own words (baseline ÷ predicted), its factor-of-two line and the finding's
    price line are printed by the kit, and section 4's prose names the phases as the line under it does."""
    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "05_beyond_the_pr.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert 'measured_over_fit="baseline ÷ predicted"' in code and "measured ÷ fit" not in code + prose
    assert "placed.factor_sentence()" in code and "findings.price_beside(sweep)" in code
    assert "`construct`" not in prose and "`load_parameters`" not in prose and "Load parameters" in prose


def test_the_audit_bar_prices_the_models_left_without_the_first_models_one_off_cost(monkeypatch) -> None:
    """05's bar said "00:20 left" at 00:02, after resnet, and ended at 00:09: tqdm's rate charged the first model's
    one-off cost (transformers' auto classes, the first meta-device model) to every model left. On a fake clock where
    the first model takes 3 s and every other 1 s, the bar names no time left until a second model is done, and from
    then on shows the true time left at each tick."""
    import re

    from omni_loader import progress
    from omni_loader.sweep import audit as audit_module
    from stand_ins import PostfixBar

    archs = [f"arch{i}" for i in range(8)]
    now, made = [0.0], []

    def fake_arch(arch: str, repeats: int):
        now[0] += 3.0 if arch == "arch0" else 1.0
        return audit_module.AuditRow(arch=arch)

    monkeypatch.setattr(progress, "progress_bar", lambda *a, **k: made.append(PostfixBar(*a, **k)) or made[-1])
    monkeypatch.setattr(audit_module, "audit_arch", fake_arch)
    rows = audit_module.audit(archs, repeats=1, clock=lambda: now[0])
    (bar,) = made
    assert [r.arch for r in rows] == archs and "{remaining}" not in bar.kwargs["bar_format"]
    assert bar.ticks[0] == "time left after the second model, arch1"
    for k, words in enumerate(bar.ticks[1:-1], start=2):  # after k models, 8 - k are left at 1 s each
        assert re.fullmatch(rf"00:0{8 - k} left, arch{k}", words), (k, words)
    assert bar.ticks[-1] == "done: 8 models audited"
