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
