"""Workers: a fork-server child and a spawned interpreter load the same thing; failures are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_loader.bench.worker import LoadRequest, WorkerFailed, run_isolated


@pytest.fixture(scope="module")
def loads(tiny_snapshot: Path) -> dict[str, dict]:
    request = LoadRequest(str(tiny_snapshot), "baseline")
    return {mode: run_isolated(request, mode) for mode in ("forkserver", "spawn", "in-process")}


@pytest.mark.slow
@pytest.mark.subprocess
def test_forkserver_and_spawn_load_the_same_model(loads: dict[str, dict]) -> None:
    fork, spawn, here = loads["forkserver"], loads["spawn"], loads["in-process"]
    assert fork["digest"] and fork["digest"] == spawn["digest"] == here["digest"]
    for key in ("state_dict_calls", "weights_loaded", "persistent_buffers", "tensors_digested", "construct"):
        assert fork[key] == spawn[key] == here[key], key
    assert fork["state_dict_calls"] == 51


@pytest.mark.subprocess
def test_a_forked_worker_imports_nothing_in_its_timed_phases(loads: dict[str, dict]) -> None:
    """The child was forked after the imports: its phases are the load's own, as a spawned one's are."""
    assert set(loads["forkserver"]["phases"]) == set(loads["spawn"]["phases"])


@pytest.mark.subprocess
def test_forked_worker_error_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkerFailed) as info:
        run_isolated(LoadRequest(str(tmp_path / "nowhere"), "optimized"), "forkserver")
    message = str(info.value)
    assert message.startswith("worker exit 2: ") and str(tmp_path / "nowhere") in message
    assert "\n" not in message


def test_unknown_worker_mode(tiny_snapshot: Path) -> None:
    with pytest.raises(Exception, match="--workers must be one of"):
        run_isolated(LoadRequest(str(tiny_snapshot), "optimized"), "thread")


@pytest.mark.slow
@pytest.mark.subprocess
def test_forked_workers_do_not_rerun_the_callers_script(tiny_snapshot: Path, tmp_path: Path) -> None:
    """A script without an ``if __name__ == "__main__"`` guard (here read from stdin, which has no file
    to re-import) benchmarks normally: its workers never run it again."""
    import subprocess
    import sys

    marker = tmp_path / "script-ran"
    script = (f"from pathlib import Path\n"
              f"with open({str(marker)!r}, 'a') as fh: fh.write('x')\n"
              f"from omni_loader.bench.worker import LoadRequest, run_isolated\n"
              f"print(run_isolated(LoadRequest({str(tiny_snapshot)!r}, 'optimized'))['weights_loaded'])\n")
    proc = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["187"]
    assert marker.read_text() == "x"  # the script ran once: in the parent only


@pytest.mark.slow
@pytest.mark.subprocess
def test_threads_apply_to_the_load_and_are_restored(tiny_snapshot: Path, probe_variant) -> None:
    """A discovery step reports the intra-op threads the load ran with; in-process, the caller's setting
    comes back afterwards."""
    import torch

    variant, seen = probe_variant("torch.get_num_threads()", " ")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for mode in ("forkserver", "spawn", "in-process"):
            run_isolated(LoadRequest(str(tiny_snapshot), variant, threads=1), mode)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen.read_text().split() == ["1", "1", "1"]


def test_the_spawned_worker_reads_its_request_back_as_the_same_value(tmp_path: Path) -> None:
    """worker_command writes the call as JSON and an argv of one option; read_call reads back the same WorkerCall."""
    from omni_loader.token2wav.options import LoadOptions
    from omni_loader.bench.worker import WorkerCall, read_call, worker_command

    custom = {"name": "mine", "discovery": "pkg.mod:find", "parameters": "builtin:copy", "memory": "",
              "needs_gpu": False}
    for request in (LoadRequest("/snap", "baseline"),
                    LoadRequest("/snap", custom, LoadOptions(layout="transformers", device="cuda:1", dtype="bfloat16",
                                                             construct="empty"), reference_copy=True, digest=False,
                                threads=2, cpus=(0, 3))):
        call = WorkerCall(request, "r.json", 3)
        argv = worker_command(call, tmp_path / "request.json")
        assert argv[1:] == ["-m", "omni_loader.bench.worker", "--request", str(tmp_path / "request.json")]
        assert read_call(argv[3:]) == call
    (tmp_path / "min.json").write_text('{"protocol": 1, "request": {"checkpoint": "/snap", "variant": "optimized"}}')
    assert read_call(["--request", str(tmp_path / "min.json")]) == WorkerCall(LoadRequest("/snap", "optimized"))


@pytest.mark.parametrize(("text", "message"), [
    ('{"protocol": 2, "request": {}}', "protocol 2, this worker speaks protocol 1"),
    ("[1]", "protocol 'list', this worker speaks protocol 1"),
    ("{not json", "not JSON"),
    ('{"protocol": 1, "request": {"variant": "baseline"}}', "'request' must be an object with 'checkpoint'"),
    ('{"protocol": 1, "request": {"checkpoint": "/s", "variant": "b", "frob": 1}}', "unknown request key frob"),
    ('{"protocol": 1, "repeat": 0, "request": {"checkpoint": "/s", "variant": "b"}}', "'repeat' must be an integer"),
    ('{"protocol": 1, "request": {"checkpoint": "/s", "variant": "b", "threads": "two"}}', "'threads' must be"),
    ('{"protocol": 1, "request": {"checkpoint": "/s", "variant": "b", "cpus": [0, "one"]}}', "'cpus' must be a list"),
    ('{"protocol": 1, "request": {"checkpoint": "/s", "variant": "b", "options": {"layout": "flat"}}}',
     "--layout 'flat' is not one of"),
    ('{"protocol": 1, "request": {"checkpoint": "/s", "variant": "b", "options": {"shape": 1}}}',
     "'options' must be an object of layout, device, dtype, construct"),
])
def test_a_bad_worker_request_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    from omni_loader.errors import OmniLoaderError
    from omni_loader.bench.worker import read_call

    (tmp_path / "req.json").write_text(text)
    with pytest.raises(OmniLoaderError) as err:
        read_call(["--request", str(tmp_path / "req.json")])
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("--layout") or str(err.value).startswith(f"--request {tmp_path / 'req.json'}")
    with pytest.raises(OmniLoaderError, match="usage: python -m omni_loader.bench.worker --request FILE"):
        read_call(["--checkpoint", "/s", "--variant", "baseline"])


@pytest.mark.subprocess
def test_stop_group_stops_a_group_that_ignores_sigterm_and_a_leader_not_yet_leading() -> None:
    """SIGTERM, then SIGKILL after the grace; and a child that has not made its group yet (a forked worker
    stopped before its setsid) is stopped by its pid."""
    import signal
    import subprocess
    import sys

    from omni_loader.host.procs import group_members, stop_group

    stubborn = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); print('up', flush=True); "
                "time.sleep(600)")
    group = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    assert group.stdout.readline() == "up\n"
    assert len(group_members(group.pid)) == 2
    assert stop_group(group.pid, grace=0.2, leader=group) == []
    assert group.returncode == -signal.SIGKILL and group_members(group.pid) == []
    group.stdout.close()

    same_group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # our group, not its own
    assert stop_group(same_group.pid, grace=0, leader=same_group) == []
    assert same_group.returncode == -signal.SIGKILL


@pytest.mark.subprocess
def test_run_folders_a_killed_benchmark_left_are_removed_by_the_next(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: a folder named after a dead pid goes, a live process's folder and others stay."""
    import os
    import subprocess
    import sys

    from omni_loader.bench.worker import RUN_DIR_PREFIX
    from omni_loader.host.procs import remove_dead_owners_dirs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"{RUN_DIR_PREFIX}{gone.pid}-x1"
    live = tmp_path / f"{RUN_DIR_PREFIX}{os.getpid()}-x2"
    other = tmp_path / "omni-loader-run-notapid-x3"
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "result.json").write_text("{}")
    assert remove_dead_owners_dirs(RUN_DIR_PREFIX, str(tmp_path)) == (str(dead),)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_forked_worker_whose_result_folder_is_gone_exits_without_a_traceback(tiny_snapshot: Path,
                                                                              tmp_path: Path) -> None:
    """After a Ctrl-C the parent removes the run's folder while a just-forked worker may still run: the worker
    then fails to write its result, and must exit quietly (no "Process-N: Traceback" under the one line)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from omni_loader.bench.worker import LoadRequest, start_without_main, ensure_forkserver, "
        "forkserver_context, _forked_main, stop_forkserver\n"
        "if __name__ == '__main__':\n"
        "    ensure_forkserver()\n"
        "    request = LoadRequest(sys.argv[1], 'optimized')\n"
        "    p = forkserver_context().Process(target=_forked_main, args=(request, sys.argv[2]), daemon=True)\n"
        "    start_without_main(p); p.join(120); print(p.exitcode); stop_forkserver()\n")
    script = tmp_path / "probe.py"
    script.write_text(probe)
    gone = tmp_path / "removed-by-the-parent" / "result.json"
    proc = subprocess.run([sys.executable, str(script), str(tiny_snapshot), str(gone)], capture_output=True,
                          text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.split()[-1] == "1", proc.stdout + proc.stderr


def test_a_fork_request_cut_short_is_an_aborted_connection_the_fork_server_skips():
    """A Ctrl-C while the benchmark handed the fork server a request left the server reading half a request:
    ``recvfds`` raised EOFError, which its loop does not catch (a traceback after the kit's one line, seen once in
    CI). With the kit's guard, the first module the server preloads, it is the OSError ECONNABORTED the loop skips."""
    import errno
    import socket
    from multiprocessing import reduction

    from omni_loader.bench import forkserver_guard
    from omni_loader.bench.worker import PRELOAD

    assert PRELOAD[0] == "omni_loader.bench.forkserver_guard"
    assert reduction.recvfds is forkserver_guard.recvfds
    server, client = socket.socketpair(socket.AF_UNIX)
    with server, client:
        client.close()  # the client is gone before its descriptors were sent
        with pytest.raises(OSError) as raised:
            reduction.recvfds(server, 3)
    assert raised.value.errno == errno.ECONNABORTED
