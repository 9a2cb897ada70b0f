"""Where a load runs: the CPUs its process may use (``--cpus``), pinned in the worker and restored after."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omni_loader.errors import OmniLoaderError
from omni_loader.host.placement import cpu_affinity, describe_cpus, resolve_cpus
from omni_loader.results.suite import Suite

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)

ALLOWED = sorted(os.sched_getaffinity(0))


def test_auto_pins_a_one_thread_load_to_the_last_core_and_leaves_more_threads_free():
    assert resolve_cpus("auto", 1) == (ALLOWED[-1],)
    assert resolve_cpus("auto", 2) == () and resolve_cpus("auto", None) == ()
    assert resolve_cpus("any", 1) == ()
    assert resolve_cpus(f"{ALLOWED[0]},{ALLOWED[0]}", 1) == (ALLOWED[0],)  # a list: sorted, each once


@pytest.mark.parametrize("choice, message", [
    ("first", "--cpus first: give auto, any, or CPU numbers such as 1 or 0,2"),
    ("4096", f"--cpus 4096: this process may use CPUs {', '.join(map(str, ALLOWED))}, not 4096"),
])
def test_a_bad_cpus_choice_is_one_line(choice, message):
    with pytest.raises(OmniLoaderError) as err:
        resolve_cpus(choice, 1)
    assert str(err.value) == message


def test_cpu_affinity_pins_inside_and_restores_after():
    before = os.sched_getaffinity(0)
    with cpu_affinity((ALLOWED[-1],)):
        assert os.sched_getaffinity(0) == {ALLOWED[-1]}
    assert os.sched_getaffinity(0) == before
    with cpu_affinity(()):
        assert os.sched_getaffinity(0) == before


def test_the_environment_table_says_where_loads_ran():
    from omni_loader.reporting.report_environment import environment_table

    def row(spec):
        lines = environment_table(Suite({"kind": "reproduce", "spec": spec})).splitlines()
        return next(line for line in lines if line.startswith("| CPUs per load"))

    assert row({"cpus": [1]}) == "| CPUs per load | 1 (pinned) |"
    assert row({"cpus": [0, 2]}) == "| CPUs per load | 0, 2 (pinned) |"
    assert row({"threads": 1}) == "| CPUs per load | any (not pinned) |"  # recorded before --cpus existed
    assert describe_cpus(()) == "any (not pinned)"


@pytest.mark.slow
@pytest.mark.subprocess
def test_every_worker_mode_runs_the_load_on_the_cpus_asked(tiny_snapshot: Path, probe_variant) -> None:
    """A discovery step reports the CPUs its process may use; in-process, the caller's come back afterwards."""
    from omni_loader.bench.worker import LoadRequest, run_isolated

    variant, seen = probe_variant("sorted(os.sched_getaffinity(0))", ";")
    before = os.sched_getaffinity(0)
    for mode in ("forkserver", "spawn", "in-process"):
        run_isolated(LoadRequest(str(tiny_snapshot), variant, cpus=(ALLOWED[-1],)), mode)
    assert os.sched_getaffinity(0) == before
    run_isolated(LoadRequest(str(tiny_snapshot), variant), "forkserver")  # not pinned: every CPU allowed
    assert seen.read_text().split(";")[:-1] == [str([ALLOWED[-1]])] * 3 + [str(ALLOWED)]


@pytest.mark.slow
def test_reproduce_records_the_cpus_it_pinned_to_and_refuses_others_in_one_line(tiny_snapshot: Path, tmp_path: Path,
                                                                                 capsys) -> None:
    from omni_loader.cli import main
    from omni_loader.results.suite import read_metadata
    from omni_loader.bench.runner import benchmark_spec
    from omni_loader.job import reproduce
    from omni_loader.results.spec import BenchmarkSpec
    from omni_loader.token2wav.options import LoadOptions
    from omni_loader.token2wav.checkpoint import open_snapshot

    snapshot = open_snapshot(tiny_snapshot)
    out = reproduce(benchmark_spec(snapshot, LoadOptions(device="cpu"), warmup=0, runs=1, workers="in-process"),
                    tmp_path / "auto", progress=False)
    assert BenchmarkSpec.from_metadata(read_metadata(out)).cpus == (ALLOWED[-1],)  # the default: auto, one thread
    out = reproduce(benchmark_spec(snapshot, LoadOptions(device="cpu"), warmup=0, runs=1, workers="in-process",
                                   cpus="any"), tmp_path / "any", progress=False)
    assert BenchmarkSpec.from_metadata(read_metadata(out)).cpus == ()
    code = main(["reproduce", "--checkpoint", str(tiny_snapshot), "--cpus", "4096", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"omni-loader: error: --cpus 4096: this process may use CPUs "
                                 f"{', '.join(map(str, ALLOWED))}, not 4096"]
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
@pytest.mark.subprocess
def test_resume_refuses_other_cpus_naming_them_as_typed(tiny_snapshot: Path, tmp_path: Path, capsys) -> None:
    from omni_loader.cli import main

    out = tmp_path / "r"
    base = ["reproduce", "--checkpoint", str(tiny_snapshot), "--warmup", "0", "--runs", "1", "--out", str(out)]
    assert main(base + ["--cpus", "any"]) == 0
    capsys.readouterr()
    assert main(base + ["--resume", "--cpus", str(ALLOWED[-1])]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"omni-loader: error: --resume --out {out}: options that contradict the saved benchmark: "
                   f"--cpus {ALLOWED[-1]} (saved: any); drop them (the spec comes from metadata.json) or choose "
                   "another --out")
    assert main(base + ["--resume"]) == 0  # nothing typed: the saved placement is kept
