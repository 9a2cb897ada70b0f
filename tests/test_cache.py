"""Cold and warm loads (issue 35): the page-cache residency of a file and of a checkpoint, eviction, ``--cache``
through the record and ``--resume``, and a run whose checkpoint was partly evicted named in the report.

Files live under pytest's tmp_path, which must be a file system where ``posix_fadvise(DONTNEED)`` drops pages
(ext4, xfs...: not tmpfs, where the page cache is the storage); a test that finds it does not skips in one line.
No test asserts a duration.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from omni_loader.host.checkpoint_cache import (COLD_RESIDENT, WARM_RESIDENT, as_condition, checkpoint_residency,
                                                 prepare_checkpoint, safetensors_ranges)
from omni_loader.host.pagecache import evict, read_seconds, resident_fraction

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)


def _evicting(directory: Path) -> None:
    """Skip (one line) where eviction does not take on ``directory``'s file system."""
    probe = directory / ".evict-probe"
    probe.write_bytes(os.urandom(1 << 20))
    evict(probe)
    left = resident_fraction(probe)
    probe.unlink()
    if left is None or left > 0.5:
        pytest.skip(f"posix_fadvise(DONTNEED) does not evict on {directory}'s file system ({left:.0%} stayed resident)")


def test_a_file_read_then_evicted_is_resident_then_not(tmp_path: Path) -> None:
    _evicting(tmp_path)
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(8 << 20))
    nbytes, _ = read_seconds(path)
    assert nbytes == 8 << 20
    assert resident_fraction(path) > 0.95
    evict(path)
    assert resident_fraction(path) < 0.05
    with path.open("rb", buffering=0) as fh:  # reading the first half without readahead brings back that half
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        fh.read(4 << 20)
    assert 0.45 < resident_fraction(path) < 0.6
    assert resident_fraction(path, [(0, 1 << 20)]) > 0.95 and resident_fraction(path, [(7 << 20, 8 << 20)]) < 0.05
    (tmp_path / "empty").write_bytes(b"")
    assert resident_fraction(tmp_path / "empty") is None


def test_a_shard_is_measured_on_its_header_and_token2wav_tensors_only(tmp_path: Path) -> None:
    """A real checkpoint's shard holds the thinker's tensors beside Token2Wav's: only what the load reads counts."""
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "model-00001-of-00001.safetensors"
    save_file({"thinker.w": torch.zeros(1 << 20), "token2wav.w": torch.ones(1 << 18)}, str(path))
    ranges = safetensors_ranges(path)
    assert len(ranges) == 2 and ranges[0][0] == 0 and ranges[1][1] - ranges[1][0] == 4 << 18
    assert sum(e - s for s, e in ranges) < os.path.getsize(path) // 4
    path.write_bytes(b"not a safetensors file")
    assert safetensors_ranges(path) == [(0, len(b"not a safetensors file"))]


def test_a_cold_preparation_evicts_the_checkpoint_and_says_so(tiny_snapshot: Path, tmp_path: Path) -> None:
    from omni_loader.token2wav.checkpoint import open_snapshot

    _evicting(tmp_path)
    snapshot = open_snapshot(shutil.copytree(tiny_snapshot, tmp_path / "snap"))
    for name in (*snapshot.shards, "spk_dict.pt"):
        read_seconds(snapshot.root / name)
    warm = prepare_checkpoint(snapshot, "warm")
    assert warm["resident"] >= WARM_RESIDENT and as_condition("warm", warm["resident"])
    assert set(warm["files"]) == {*snapshot.shards, "spk_dict.pt"} and all(f >= WARM_RESIDENT for f in warm["files"].values())
    cold = prepare_checkpoint(snapshot, "cold")
    assert cold["condition"] == "cold" and cold["resident"] <= COLD_RESIDENT and as_condition("cold", cold["resident"])
    files = {name: None for name in cold["files"]}  # whole files: measuring reads nothing back
    assert checkpoint_residency(snapshot, files)["resident"] <= COLD_RESIDENT
    assert as_condition("warm", cold["resident"]) is False and as_condition("cold", None) is None


def _rows(directory: Path) -> list[dict[str, str]]:
    with (directory / "runs.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_cache_cold_round_trips_through_the_record_resume_report_and_compare(tiny_snapshot: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    """``--cache cold``: recorded in the spec, each run's residency in runs.csv and metadata.json, kept by a resume
    (and a contradicting ``--cache warm`` refused in one line), shown by the report and by compare."""
    from omni_loader.cli import main

    _evicting(tmp_path)
    snap, out = shutil.copytree(tiny_snapshot, tmp_path / "snap"), tmp_path / "cold"
    common = ["--checkpoint", str(snap), "--workers", "in-process", "--warmup", "0", "--runs", "1", "--out", str(out)]
    assert main(["reproduce", *common, "--cache", "cold"]) == 0
    record = json.loads((out / "metadata.json").read_text())["benchmarks"]["load"]
    assert record["spec"]["load"]["cache"] == "cold"
    cache = record["checkpoint_cache"]
    assert cache["condition"] == "cold" and cache["summary"]["not_cold"] == [] and "bytes_per_second" in cache["storage"]
    rows = _rows(out)
    assert {r["checkpoint_resident"] for r in rows} and all(float(r["checkpoint_resident"]) <= COLD_RESIDENT
                                                            for r in rows)
    assert all(r["read_bytes"] != "" for r in rows)

    # the last run lost: a resume without --cache runs it cold again, one with --cache warm is refused
    kept = [r for r in rows if r["run_id"] != "1"]
    with (out / "runs.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(kept)
    capsys.readouterr()
    assert main(["reproduce", "--resume", "--out", str(out), "--cache", "warm"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cache warm (saved: cold)" in err[0]
    assert main(["reproduce", "--resume", "--out", str(out)]) == 0
    again = json.loads((out / "metadata.json").read_text())["benchmarks"]["load"]
    assert again["spec"]["load"]["cache"] == "cold" and set(again["checkpoint_cache"]["runs"]) == {"0", "1"}
    assert float(next(r for r in _rows(out) if r["run_id"] == "1")["checkpoint_resident"]) <= COLD_RESIDENT
    report = (out / "report.md").read_text()
    assert "## Page cache" in report and "Condition: **cold** (`--cache cold`)" in report
    assert "In this cold condition the fix saves " in report

    # a residency no measurement gives: the run is ignored, in one finding
    from omni_loader.results.integrity import check_results

    edited = [{**r, "checkpoint_resident": "1.7"} if r["run_id"] == "0" else r for r in _rows(out)]
    with (out / "runs.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, list(edited[0]))
        writer.writeheader()
        writer.writerows(edited)
    assert "1 run with an impossible checkpoint residency ignored" in check_results(out).findings

    capsys.readouterr()
    main(["compare", str(out)])  # its exit code says what its checks found (a run ignored above): not tested here
    text = capsys.readouterr().out
    assert "Page cache" in text and "| cold |" in text


@pytest.mark.slow
def test_a_shard_evicted_between_warm_runs_is_named_in_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm benchmark; before its second load one of two shards is evicted (as memory pressure or another job's
    reads would): that run is named, and the headline row enclosing the reading phases is marked not warm."""
    import omni_loader.bench.worker as worker
    from omni_loader.bench.runner import benchmark_spec, run_benchmark
    from omni_loader.reporting.report import render_report
    from omni_loader.token2wav.checkpoint import open_snapshot, synthesize

    _evicting(tmp_path)
    snapshot = open_snapshot(synthesize(tmp_path / "snap", size="tiny", shard_bytes=700_000))
    assert len(snapshot.shards) >= 2
    real, calls = worker.run_isolated, []

    def evicting_before_the_second(request, *args, **kwargs):
        calls.append(request)
        if len(calls) == 2:
            evict(snapshot.root / snapshot.shards[0])
        return real(request, *args, **kwargs)

    monkeypatch.setattr(worker, "run_isolated", evicting_before_the_second)
    spec = benchmark_spec(snapshot, warmup=0, runs=2, order="alternate", workers="in-process", cpus="any")
    out = run_benchmark(spec, tmp_path / "warm", snapshot, progress=False)
    cache = json.loads((out / "metadata.json").read_text())["benchmarks"]["load"]["checkpoint_cache"]
    assert cache["condition"] == "warm" and cache["summary"]["not_warm"] == [1]
    assert 0.05 < cache["runs"]["1"]["resident"] < WARM_RESIDENT
    assert cache["runs"]["1"]["files"][snapshot.shards[0]] < 0.05

    text = render_report(out)
    lines = text.splitlines()
    page = next(line for line in lines if line.startswith("- **Page cache**"))
    assert page.startswith("- **Page cache**: warm condition, but run 1 (optimized) found ") and "0 " not in page[:40]
    weight = next(line for line in lines if line.startswith("- **Token2Wav weight loading**"))
    assert weight.endswith("; **not warm**: run 1 (see Page cache).")
    buffer = next(line for line in lines if line.startswith("- **Buffer discovery**"))
    assert "not warm" not in buffer  # buffer discovery reads no file
    assert "| 1 | optimized |" in text and "**not warm** |" in text
