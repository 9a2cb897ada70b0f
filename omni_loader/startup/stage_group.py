"""``stage-group``: N stage servers started together, as vLLM-Omni's deploy config starts its stages.

``omni-loader stage-group --stages 3 --token2wav-stage 2 --variant baseline --port 8091`` binds the
port first (503 on ``/health`` from then on), then starts every stage at once, each a
``stage-server`` process of its own (``--stage N``, ``--port 0``: their own HTTP is not used): the
Token2Wav stage loads ``--variant`` from the snapshot, the others simulate their load (a sleep of
``--simulate-seconds``: one value for all, or one per other stage in stage order). Their lines are
copied into the group's stdout as they come, whole lines, so one log holds the stages interleaved,
each line with its own stage tag, pid and time (:class:`~omni_loader.startup.server.StageLog`).

The group plays vLLM-Omni's orchestrator, in lines tagged ``(APIServer pid=...)``: when a stage logs
its ready line, ``[Orchestrator] Stage-N reported ready`` (the stage's ready in
:mod:`omni_loader.startup.timeline`); when every stage has, ``[AsyncOrchestrator] All stages initialized
successfully`` and ``Application startup complete.`` (the server's ready), and ``/health`` answers
200. ``GET /stats``: each stage's pid, state and seconds from the group's start to its ready.

A stage that exits while the group runs stops the others and the group exits with status 2 (one
line). SIGTERM or SIGINT stops every stage (SIGTERM, SIGKILL after ``grace`` seconds), copies their
last lines and exits with status 0. The stages stay in the group's process group, so serve-ab's stop
of the group's process group reaches them too. :func:`stage_group_commands` makes serve-ab's two
commands (baseline and optimized Token2Wav stage) of one group shape.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import OmniLoaderError
from ..names import VARIANTS
from ..token2wav.options import CheckpointOptions, LoadOptions, command_words
from .server import DEFAULT_HOST, MAX_SIMULATE, READY_MESSAGE, StageLog, StageState, bind_server, serving
from .one_run import ab_commands
from ..host.procs import PARENT_ENV, stop_children

# The stage commands alone (no pandas, no matplotlib): a startup benchmark times the stages, not the kit's CLI.
STAGE_ENTRY = ("-m", "omni_loader.cli.serve")


@dataclass(frozen=True)
class StageGroupOptions:
    """A group: how many stages, which one is Token2Wav (and its load), what the others sleep, where it listens."""

    variant: str
    port: int
    stages: int = 3
    token2wav_stage: int = 2
    simulate_seconds: tuple[float, ...] = (2.0,)
    snapshot: CheckpointOptions = field(default_factory=CheckpointOptions)
    load: LoadOptions = field(default_factory=LoadOptions)
    host: str = DEFAULT_HOST
    digest: bool = False
    tag: str | None = None
    replica_tags: bool = False  # the stages' lines tagged (StageEngineCoreProc_stageN_replica0 pid=...)
    grace: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.stages <= 64 or not 0 <= self.token2wav_stage < self.stages:
            raise OmniLoaderError(f"stage-group --stages {self.stages} --token2wav-stage {self.token2wav_stage}: "
                                  "needs 1 to 64 stages and a Token2Wav stage from 0 to stages - 1")
        seconds = tuple(float(s) for s in self.simulate_seconds)
        if len(seconds) not in (1, self.stages - 1) or not all(0 < s < MAX_SIMULATE for s in seconds):
            raise OmniLoaderError(f"stage-group --simulate-seconds {','.join(f'{s:g}' for s in seconds)}: one "
                                  f"value, or one per stage that is not Token2Wav ({self.stages - 1}), each "
                                  f"above 0 and under {MAX_SIMULATE:g} s")
        object.__setattr__(self, "simulate_seconds", seconds)
        if not (isinstance(self.grace, (int, float)) and math.isfinite(self.grace) and self.grace >= 0):
            raise OmniLoaderError(f"stage-group --grace {self.grace!r}: must be a finite number of seconds, 0 or more")

    def simulated(self, stage: int) -> float | None:
        """The seconds stage ``stage`` sleeps as its load (None: it is Token2Wav's)."""
        if stage == self.token2wav_stage:
            return None
        others = [s for s in range(self.stages) if s != self.token2wav_stage]
        return self.simulate_seconds[0 if len(self.simulate_seconds) == 1 else others.index(stage)]

    def stage_argv(self, stage: int) -> list[str]:
        """The ``stage-server`` command of stage ``stage``."""
        argv = [sys.executable, *STAGE_ENTRY, "stage-server", "--stage", str(stage), "--host", self.host, "--port", "0"]
        argv += ["--replica", "0"] if self.replica_tags else []
        argv += ["--tag", self.tag] if self.tag else []
        seconds = self.simulated(stage)
        if seconds is not None:
            return argv + ["--simulate", f"{seconds:g}"]
        argv += ["--variant", self.variant, *command_words(CheckpointOptions, asdict(self.snapshot)), *self.load.argv()]
        return argv + (["--digest"] if self.digest else [])


class Stage:
    """One stage's process, the thread copying its lines, and when it said it was ready."""

    def __init__(self, number: int, argv: list[str], token2wav: bool) -> None:
        self.number, self.argv, self.token2wav = number, argv, token2wav
        self.proc: subprocess.Popen | None = None
        self.reader: threading.Thread | None = None
        self.ready_after: float | None = None

    @property
    def ready(self) -> bool:
        return self.ready_after is not None

    def to_dict(self) -> dict[str, Any]:
        rc = self.proc.poll() if self.proc is not None else None
        state = "ready" if self.ready else "loading"
        return {"stage": self.number, "token2wav": self.token2wav, "pid": self.proc.pid if self.proc else None,
                "state": state if rc is None else f"exited ({rc})", "ready_after_s": self.ready_after}


class GroupState(StageState):
    """The group's /health and /stats: ready when every stage is; /stats lists the stages."""

    def __init__(self, options: StageGroupOptions) -> None:
        super().__init__(options.variant, options.tag)
        self.token2wav_stage = options.token2wav_stage
        self.stages: list[Stage] = []

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "token2wav_stage": self.token2wav_stage,
                "stages": [s.to_dict() for s in self.stages]}


def _copy_lines(stage: Stage, log: StageLog, started: float, wake: threading.Event) -> None:
    """Copy a stage's output into the group's stdout, whole lines; note when its ready line comes."""
    assert stage.proc is not None and stage.proc.stdout is not None
    ready = READY_MESSAGE.encode()
    for raw in iter(stage.proc.stdout.readline, b""):
        with log.lock:
            sys.stdout.buffer.write(raw if raw.endswith(b"\n") else raw + b"\n")
            sys.stdout.buffer.flush()
        if not stage.ready and ready in raw:
            stage.ready_after = time.perf_counter() - started
            log(f"[Orchestrator] Stage-{stage.number} reported ready")
            wake.set()
    wake.set()


def run_stage_group(options: StageGroupOptions) -> int:
    """Bind, start every stage, copy their lines, answer /health 200 once all are ready; stop on a signal."""
    state = GroupState(options)
    server = bind_server(options.host, options.port, state)
    log = StageLog(process="APIServer")
    host, port = server.server_address[:2]
    stop, wake = threading.Event(), threading.Event()
    with serving(server, "stage-group-http", stop, wake) as received:
        # No "Token2Wav" in the group's own lines: the timeline marks a lane whose lines name it as Token2Wav's.
        log(f"stage-group: listening on http://{host}:{port} ({options.stages} stages; stage "
            f"{options.token2wav_stage} loads variant {options.variant}); /health answers 503 until every stage is ready")
        started = time.perf_counter()
        state.stages = [Stage(i, options.stage_argv(i), i == options.token2wav_stage) for i in range(options.stages)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", PARENT_ENV: str(os.getpid())}  # each stage dies with the group
        failure = None
        try:
            for stage in state.stages:
                stage.proc = subprocess.Popen(stage.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, env=env, close_fds=True)
                stage.reader = threading.Thread(target=_copy_lines, args=(stage, log, started, wake),
                                                name=f"stage-{stage.number}-log", daemon=True)
                stage.reader.start()
            log(f"stage-group: started stages {', '.join(f'{s.number} (pid {s.proc.pid})' for s in state.stages)}")
            while not stop.is_set():
                if not state.ready.is_set() and all(s.ready for s in state.stages):
                    log("[AsyncOrchestrator] All stages initialized successfully")
                    log("Application startup complete.")
                    state.set_ready(None, {"ready_after_s": time.perf_counter() - started})
                exited = [s for s in state.stages if s.proc is not None and s.proc.poll() is not None]
                if exited and not stop.is_set():
                    s = exited[0]
                    when = "after" if state.ready.is_set() else "before"
                    failure = (f"stage {s.number} (pid {s.proc.pid}) exited with status {s.proc.returncode} {when} "
                               "every stage was ready; the group stopped")
                    log(f"stage-group: {failure}", level="ERROR")
                    break
                wake.wait(0.2)
                wake.clear()
        finally:
            stop_children(os.getpid(), options.grace)  # every stage: SIGTERM, SIGKILL after grace s
            for stage in state.stages:  # then their last lines copied
                if stage.reader is not None:
                    stage.reader.join(timeout=5)
    if failure and not received:
        raise OmniLoaderError(failure)
    log(f"stage-group: {received[0] if received else 'stop'} received, {len(state.stages)} stages stopped, shut down")
    return 0


def stage_group_commands(checkpoint_dir: str | os.PathLike[str], port: int | None = None, *, stages: int = 3,
                         token2wav_stage: int = 2, simulate_seconds: tuple[float, ...] = (2.0,),
                         options: LoadOptions | None = None) -> tuple[str, str, str]:
    """``(baseline_cmd, optimized_cmd, health_url)``: two ``stage-group`` commands on one port, for serve-ab."""
    StageGroupOptions(VARIANTS[0], port or 0, stages, token2wav_stage, simulate_seconds)  # checked here, not in a run
    opts = options or LoadOptions()
    return ab_commands(port, lambda variant: [
        *STAGE_ENTRY, "stage-group", "--stages", str(stages), "--token2wav-stage", str(token2wav_stage),
        "--simulate-seconds", ",".join(f"{s:g}" for s in simulate_seconds), "--variant", variant,
        *command_words(CheckpointOptions, {"checkpoint": str(checkpoint_dir)}), *opts.argv()])
