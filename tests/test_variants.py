"""Loader variants: built-in and user-defined steps, any number of arms, equivalence across all of them."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from omni_loader.token2wav.checkpoint import open_snapshot
from omni_loader.errors import OmniLoaderError
from omni_loader.token2wav.loader import load_token2wav
from omni_loader.reporting.report import render_report
from omni_loader.host.residency import backing_file
from omni_loader.results.rows import read_runs
from omni_loader.results.planner import plan_runs
from omni_loader.bench.runner import benchmark_spec
from omni_loader.job import reproduce
from omni_loader.token2wav.options import LoadOptions
from omni_loader.token2wav.variants import BUILTIN_VARIANTS, Variant, parse_variant, resolve_step

STEPS_FILE = '''
from omni_loader.token2wav.discovery import non_persistent_buffer_names

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)


def find(model):
    """The optimized rule, written by a user."""
    skip = non_persistent_buffer_names(model)
    return {name: buf for name, buf in model.named_buffers() if name not in skip}


def find_nothing(model):
    """A wrong rule: no buffer is persistent."""
    return {}


def explode(model):
    """A step with a bug in it."""
    raise ZeroDivisionError("a bug in the step")
'''


@pytest.fixture
def steps_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_steps.py"
    path.write_text(STEPS_FILE)
    return path


def test_three_variant_rotations_are_balanced() -> None:
    names = ("baseline", "optimized", "assign")
    plan = plan_runs(warmup=1, runs=6, order="alternate", variants=names)
    measured = [r for r in plan if not r.warmup]
    assert [r.variant for r in plan if r.warmup] == list(names)
    assert Counter(r.variant for r in measured) == dict.fromkeys(names, 6)
    rounds = [measured[i:i + 3] for i in range(0, 18, 3)]
    assert all({r.variant for r in round_} == set(names) for round_ in rounds)  # each round has every arm
    for position in range(3):  # and each arm takes each position equally often
        assert Counter(round_[position].variant for round_ in rounds) == dict.fromkeys(names, 2)
    assert [r.order for r in measured if r.variant == "assign"] == list(range(1, 7))


def test_parse_variant_and_bad_definitions(steps_file: Path) -> None:
    v = parse_variant(f"mine=discovery:{steps_file}:find")
    assert v == Variant("mine", discovery=f"{steps_file}:find", parameters="builtin:copy")
    assert callable(resolve_step(v.discovery, "discovery"))
    for bad, message in (("mine", "NAME=STEP:REF"), ("mine=loader:x:y", "STEP one of"),
                         ("optimized=discovery:x:y", "built-in variant"),
                         (f"mine=discovery:{steps_file}:nope", "no function 'nope'"),
                         ("mine=discovery:no_such_module_here:find", "cannot import"),
                         ("mine=parameters:builtin:teleport", "no built-in 'teleport'")):
        with pytest.raises(OmniLoaderError, match=message):
            v = parse_variant(bad)
            resolve_step(v.discovery, "discovery")
            resolve_step(v.parameters, "parameters")


@pytest.mark.slow
@pytest.mark.subprocess
def test_user_step_runs_in_fresh_workers_beside_the_builtins(tiny_snapshot: Path, tmp_path: Path,
                                                             steps_file: Path) -> None:
    snapshot = open_snapshot(tiny_snapshot)
    mine = parse_variant(f"mine=discovery:{steps_file}:find")
    spec = benchmark_spec(snapshot, warmup=0, runs=2, variants=("baseline", "optimized", "mine"),
                          custom_variants=[mine])
    out = reproduce(spec, tmp_path / "res", snapshot=snapshot, progress=False)
    runs = read_runs(out).drop_duplicates("run_id")
    assert Counter(runs["variant"]) == {"baseline": 2, "optimized": 2, "mine": 2}
    assert set(runs[runs["variant"] == "mine"]["state_dict_calls"]) == {0}
    assert runs["digest"].nunique() == 1 and (runs["status"] == "ok").all()
    report = render_report(out)
    assert "all 6 runs of all 3 variants (baseline, optimized, mine) loaded identical tensors" in report
    assert "## Beyond the PR" in report and f"discovery `{steps_file}:find`" in report
    assert "| Buffer discovery |" in report  # the PR table is still there: baseline and optimized both ran


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_variant_that_loads_something_else_fails_loudly(tiny_snapshot: Path, tmp_path: Path,
                                                          steps_file: Path) -> None:
    out = tmp_path / "res"
    proc = subprocess.run(
        [sys.executable, "-m", "omni_loader", "reproduce", "--checkpoint", str(tiny_snapshot), "--warmup", "0",
         "--runs", "1", "--variants", "optimized,wrong", "--variant", f"wrong=discovery:{steps_file}:find_nothing",
         "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "NOT equivalent" in errors[0] and "persistent buffers differ" in errors[0]
    assert "NOT equivalent" in (out / "report.md").read_text()
    assert "| Buffer discovery |" not in (out / "report.md").read_text().split("## Beyond the PR")[0]


@pytest.mark.subprocess
def test_an_in_process_step_that_raises_is_a_failed_run_and_the_benchmark_completes(tiny_snapshot: Path,
                                                                                    tmp_path: Path,
                                                                                    steps_file: Path) -> None:
    """In-process as in a worker: the run is recorded failed with the error's one line, the rest go on, and the
    benchmark ends complete (no traceback, no record left 'running')."""
    from omni_loader.results.suite import benchmark, read_metadata

    spec = benchmark_spec(open_snapshot(tiny_snapshot), warmup=0, runs=1, workers="in-process",
                          variants=("optimized", "buggy"),
                          custom_variants=(parse_variant(f"buggy=discovery:{steps_file}:explode"),))
    out = reproduce(spec, tmp_path / "res", progress=False)
    frame = read_runs(out)
    failed = frame[frame["variant"] == "buggy"]
    assert list(failed["status"]) == ["failed"] and failed["error"].iloc[0] == "ZeroDivisionError: a bug in the step"
    assert set(frame[frame["variant"] == "optimized"]["status"]) == {"ok"}
    assert benchmark(read_metadata(out), "load")["status"] == "complete"


def test_assign_variant_loads_the_same_model_backed_by_the_shards(tiny_snapshot: Path) -> None:
    snapshot = open_snapshot(tiny_snapshot)
    copied, copy_result = load_token2wav(snapshot, "optimized")
    assigned, assign_result = load_token2wav(snapshot, "assign")
    assert assign_result.digest == copy_result.digest
    assert assign_result.weights_loaded == copy_result.weights_loaded
    shards = {str((snapshot.root / shard).resolve()) for shard in snapshot.weight_map.values()}
    params = dict(assigned.named_parameters())
    big = [n for n, p in params.items() if p.numel() * p.element_size() >= 1 << 16]
    assert big
    for name in big:
        backing = backing_file(params[name])
        if ".qkv_proj." in name:
            assert backing is None  # stacked into a new tensor
        elif params[name].dtype != torch.float32:
            assert backing is None  # the bfloat16 BigVGAN: cast from the float32 checkpoint, so copied
        else:
            assert backing is not None and str(Path(backing).resolve()) in shards, name
    assert all(backing_file(p) is None for p in copied.parameters())


def test_gpu_variant_on_a_cpu_is_refused_in_one_line(tiny_snapshot: Path, tmp_path: Path) -> None:
    assert BUILTIN_VARIANTS["pinned"].needs_gpu
    with pytest.raises(OmniLoaderError, match="pinned needs a GPU") as info:
        reproduce(benchmark_spec(open_snapshot(tiny_snapshot), LoadOptions(device="cpu"),
                                 variants=("optimized", "pinned")), tmp_path / "res", progress=False)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "res").exists()  # refused before anything was written


@pytest.mark.parametrize("variant", ["assign", "fastsafetensors"])
def test_parameter_loading_alternatives_load_the_same_model(tiny_snapshot: Path, variant: str) -> None:
    snapshot = open_snapshot(tiny_snapshot)
    _, reference = load_token2wav(snapshot, "optimized")
    model, result = load_token2wav(snapshot, variant, layout="vllm-omni")
    assert (result.variant, result.digest, result.weights_loaded) == (variant, reference.digest,
                                                                     reference.weights_loaded)
    _, transformers_ref = load_token2wav(snapshot, "optimized", layout="transformers")
    _, transformers_alt = load_token2wav(snapshot, variant, layout="transformers")
    assert transformers_alt.digest == transformers_ref.digest


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize(("body", "said"), [
    ("import time\ntime.sleep(600)\n", "did not finish in 3 s (a step file that hangs at import?)"),
    ("import os\nos._exit(3)\n", "the process ended with status 3 and no word (os._exit or a crash at import?)"),
])
def test_a_step_file_that_hangs_or_exits_at_import_is_one_line_before_any_run(tiny_snapshot: Path, tmp_path: Path,
                                                                           body: str, said: str) -> None:
    """The user's steps are imported in a child under the limit, not in the benchmark: a hang is killed, an exit
    named, and nothing is written."""
    step = tmp_path / "bad_steps.py"
    step.write_text(body + "def find(model):\n    return {}\n")
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "omni_loader", "reproduce", "--checkpoint", str(tiny_snapshot),
                           "--variant", f"bad=discovery:{step}:find", "--variants", "optimized,bad", "--worker-timeout",
                           "3", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["omni-loader: error: --variant bad: " + (
        f"importing its discovery step {step}:find {said}; set --worker-timeout to allow longer" if "finish" in said
        else f"its discovery step {step}:find cannot be imported: {said}")]
    assert not out.exists()


@pytest.mark.subprocess
def test_ctrl_c_before_the_benchmark_starts_offers_no_resume(tiny_snapshot: Path, tmp_path: Path) -> None:
    """Interrupted while the steps are being imported: nothing was saved, and no --resume is offered for a
    directory that does not exist."""
    import signal
    import time

    step = tmp_path / "slow_steps.py"
    step.write_text("import time\ntime.sleep(600)\ndef find(model):\n    return {}\n")
    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "omni_loader", "reproduce", "--checkpoint", str(tiny_snapshot),
                             "--variant", f"slow=discovery:{step}:find", "--variants", "optimized,slow", "--out",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _cmdlines_with(str(step), "resolve_step"):  # the import probe runs
        time.sleep(0.1)
    assert _cmdlines_with(str(step), "resolve_step"), "the step import never started"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert output.strip().splitlines()[-1] == f"interrupted before the benchmark started: nothing was saved ({out} was not made)"
    assert "--resume" not in output and not out.exists()


def _cmdlines_with(*texts: str) -> list[int]:
    """The pids whose command line holds every one of ``texts``."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            line = (entry / "cmdline").read_bytes().decode(errors="replace")
            if all(t in line for t in texts):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_assign_stacks_a_fused_qkv_only_when_every_shard_can_become_it(tiny_snapshot: Path) -> None:
    """One q shard of another dtype: that attention's three shards go to the copy step (cast into the parameter in
    place), every other parameter as the assign step makes it, and the model holds what the copy step loads."""
    from omni_loader.host.checkpoint_cache import CHECKPOINT_PREFIX
    from omni_loader.token2wav.checkpoint import iter_token2wav_weights
    from omni_loader.token2wav.model import build_model
    from omni_loader.token2wav.steps import load_parameters, load_parameters_assign

    snapshot = open_snapshot(tiny_snapshot)
    weights = list(iter_token2wav_weights(snapshot))
    odd = next(k for k, _ in weights if ".to_q.weight" in k)
    fused = odd.removeprefix(CHECKPOINT_PREFIX).replace(".to_q.", ".qkv_proj.")
    model, reference = (build_model(snapshot.token2wav_config) for _ in range(2))
    kept = model.get_parameter(fused)
    loaded = load_parameters_assign(model, [(k, t.double() if k == odd else t) for k, t in weights], snapshot, True)
    expected = load_parameters(reference, weights, snapshot, True)
    assert loaded == expected and loaded[fused] == {0, 1, 2}
    assert model.get_parameter(fused) is kept  # copied into, not replaced
    params = dict(model.named_parameters())
    for name, p in reference.named_parameters():
        assert params[name].dtype == p.dtype and torch.equal(params[name], p), name


def test_a_checkpoint_tensor_of_an_unexpected_dtype_is_refused_in_one_line_naming_each_dtype(tiny_snapshot: Path):
    """A tensor in float64, neither the released checkpoint's float32 nor the parameter's own: a fused layout's q
    shard (float32 parameter), a BigVGAN weight (bfloat16 parameter)."""
    from omni_loader.errors import CheckpointError
    from omni_loader.host.checkpoint_cache import CHECKPOINT_PREFIX
    from omni_loader.token2wav.checkpoint import iter_token2wav_weights
    from omni_loader.token2wav.model import build_model
    from omni_loader.token2wav.steps import check_dtypes

    snapshot = open_snapshot(tiny_snapshot)
    weights = list(iter_token2wav_weights(snapshot))
    model = build_model(snapshot.token2wav_config)
    check_dtypes(model, weights, True)  # float32 everywhere: the parameter's own, or cast as upstream casts it
    params = dict(model.named_parameters())
    half = next(k for k, _ in weights if k.removeprefix(CHECKPOINT_PREFIX) in params
                and params[k.removeprefix(CHECKPOINT_PREFIX)].dtype == torch.bfloat16)
    for odd, own in ((next(k for k, _ in weights if ".to_q.weight" in k), "float32"), (half, "bfloat16")):
        with pytest.raises(CheckpointError) as info:
            check_dtypes(model, [(k, t.double() if k == odd else t) for k, t in weights], True)
        assert str(info.value) == (f"checkpoint tensor {odd} is float64, not what the model expects: the released "
                                   f"checkpoint stores float32, which upstream casts to the parameter's {own}; "
                                   "restore the shard from the model snapshot")
