"""Workers: a fork-server child and a spawned interpreter load the same thing; failures are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_loader.worker import LoadRequest, WorkerFailed, run_isolated


@pytest.fixture(scope="module")
def loads(tiny_snapshot: Path) -> dict[str, dict]:
    request = LoadRequest(str(tiny_snapshot), "baseline")
    return {mode: run_isolated(request, mode) for mode in ("forkserver", "spawn", "in-process")}


def test_forkserver_and_spawn_load_the_same_model(loads: dict[str, dict]) -> None:
    fork, spawn, here = loads["forkserver"], loads["spawn"], loads["in-process"]
    assert fork["digest"] and fork["digest"] == spawn["digest"] == here["digest"]
    for key in ("state_dict_calls", "weights_loaded", "persistent_buffers", "tensors_digested", "construct"):
        assert fork[key] == spawn[key] == here[key], key
    assert fork["state_dict_calls"] == 51


def test_a_forked_worker_imports_nothing_in_its_timed_phases(loads: dict[str, dict]) -> None:
    """The child was forked after the imports: its phases are the load's own, as a spawned one's are."""
    assert set(loads["forkserver"]["phases"]) == set(loads["spawn"]["phases"])


def test_forked_worker_error_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkerFailed) as info:
        run_isolated(LoadRequest(str(tmp_path / "nowhere"), "optimized"), "forkserver")
    message = str(info.value)
    assert message.startswith("worker exit 2: ") and str(tmp_path / "nowhere") in message
    assert "\n" not in message


def test_unknown_worker_mode(tiny_snapshot: Path) -> None:
    with pytest.raises(Exception, match="--workers must be one of"):
        run_isolated(LoadRequest(str(tiny_snapshot), "optimized"), "thread")


def test_forked_workers_do_not_rerun_the_callers_script(tiny_snapshot: Path, tmp_path: Path) -> None:
    """A script without an ``if __name__ == "__main__"`` guard (here read from stdin, which has no file
    to re-import) benchmarks normally: its workers never run it again."""
    import subprocess
    import sys

    marker = tmp_path / "script-ran"
    script = (f"from pathlib import Path\n"
              f"with open({str(marker)!r}, 'a') as fh: fh.write('x')\n"
              f"from omni_loader.worker import LoadRequest, run_isolated\n"
              f"print(run_isolated(LoadRequest({str(tiny_snapshot)!r}, 'optimized'))['weights_loaded'])\n")
    proc = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["187"]
    assert marker.read_text() == "x"  # the script ran once: in the parent only
