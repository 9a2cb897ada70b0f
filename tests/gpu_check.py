"""Every GPU path of the kit in one prepared script, each step with what it must show: ``make gpu-check``.

For a person on a ROCm or CUDA machine (and for a session that is lent one): it runs the kit's own commands
in order, the quick ones first, and after each says PASS or FAIL with the evidence:

1. ``doctor``: torch is a ROCm or CUDA build and sees the GPU; nothing to fix first.
2. a tiny reproduce on ``cuda``: the device, its name and peak device memory in the record; baseline calls
   ``state_dict()`` once per named buffer, optimized never; every run of both variants loaded identical tensors.
3. ``installed`` against the installed vLLM-Omni (skipped without one): its rule's call count.
4. ``profile`` on ``cuda`` (tiny): torch.profiler saw device time.
5. the startup A/B: two tiny stage servers on ``cuda`` to ``/health``, every start healthy.
6. the full-size reproduce on ``cuda``: 219 → 0 calls, identical tensors, peak device memory (the long one).

Everything lands in ``results/gpu-check-<time>/`` with ``gpu-check.json`` (each step's verdict and evidence);
exit 0 when every step shows what it must. ``--device cpu --skip-full`` runs the same checks on a CPU, to
check the script itself where no GPU is at hand (then steps 1 and the device checks are read as CPU's).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KIT = [sys.executable, "-m", "omni_loader"]


def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    print(f"$ omni-loader {' '.join(argv)}", flush=True)
    return subprocess.run([*KIT, *argv], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def rows(directory: Path) -> list[dict[str, str]]:
    with open(directory / "runs.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def named_buffers(size: str) -> int:
    done = subprocess.run([*KIT, "inventory", "--size", size, "--json"], cwd=REPO, capture_output=True, text=True,
                          check=True)
    return int(json.loads(done.stdout)["named_buffers"])


def check_reproduce(directory: Path, size: str, device: str, arms: dict[str, int | None]) -> list[str]:
    """What a GPU reproduce must show; each problem one line (none: PASS)."""
    problems = []
    (bench,) = json.loads((directory / "metadata.json").read_text())["benchmarks"].values()
    env = bench["environment"]
    if bench["status"] != "complete":
        problems.append(f"status {bench['status']}")
    if not str(env.get("device", "")).startswith(device):
        problems.append(f"the record's device is {env.get('device')}, not {device}")
    if device == "cuda" and env.get("gpu_backend") not in ("rocm", "cuda"):
        problems.append(f"gpu_backend {env.get('gpu_backend')}")
    measured = [r for r in rows(directory) if r["warmup"] == "False" and r["phase"] == "total"]
    if device == "cuda" and not all(r["device_peak_bytes"] and float(r["device_peak_bytes"]) > 0 for r in measured):
        problems.append("a measured run without its peak device memory")
    for arm, calls in arms.items():
        seen = {r["state_dict_calls"] for r in measured if r["variant"] == arm}
        if calls is not None and seen != {str(calls)}:
            problems.append(f"{arm} called state_dict() {sorted(seen)} times, not {calls}")
    digests = {r["digest"] for r in measured}
    if len(digests) != 1:
        problems.append(f"{len(digests)} different tensor digests across the runs (NOT equivalent)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu to check the script itself")
    parser.add_argument("--skip-full", action="store_true", help="leave out the full-size reproduce (minutes)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / f"gpu-check-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(f"gpu-check: torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False): run "
                  "`omni-loader doctor` for why", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    tiny_buffers = named_buffers("tiny")
    verdicts: dict[str, dict] = {}

    def step(name: str, problems: list[str], evidence: str) -> None:
        verdicts[name] = {"pass": not problems, "problems": problems, "evidence": evidence}
        print(f"{'PASS' if not problems else 'FAIL'} {name}: {evidence}" + "".join(f"\n  - {p}" for p in problems),
              flush=True)

    done = run(["doctor", "--json"], 60)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {"checks": [], "verdict": done.stderr}
    torch_line = next((c["found"] for c in report["checks"] if c["what"] == "torch"), "?")
    gpu_line = next((c["found"] for c in report["checks"] if c["what"] == "GPUs"), "?")
    step("doctor", [] if args.device == "cpu" or report.get("ready") else [report.get("verdict", "?")],
         f"torch {torch_line}; GPUs {gpu_line}")

    tiny = args.out / "tiny"
    done = run(["reproduce", "--size", "tiny", "--device", args.device, "--runs", "3", "--out", str(tiny)], 900)
    step("tiny reproduce", check_reproduce(tiny, "tiny", args.device, {"baseline": tiny_buffers, "optimized": 0})
         if (tiny / "runs.csv").is_file() else [done.stderr.strip()[-300:]], f"exit {done.returncode}; {tiny}")

    from omni_loader.token2wav.release import read_release

    try:
        release = read_release()
    except Exception as exc:  # no vLLM-Omni here: said, not failed
        verdicts["installed"] = {"pass": None, "problems": [], "evidence": f"skipped: {exc}"}
        print(f"SKIP installed: {exc}")
    else:
        out = args.out / "installed"
        done = run(["reproduce", "--size", "tiny", "--device", args.device, "--runs", "3", "--variants",
                    "baseline,optimized,installed", "--out", str(out)], 900)
        calls = tiny_buffers if release.rule.startswith("per-buffer") else 0
        step("installed", check_reproduce(out, "tiny", args.device,
                                          {"baseline": tiny_buffers, "optimized": 0, "installed": calls})
             if (out / "runs.csv").is_file() else [done.stderr.strip()[-300:]], f"{release.label} ({release.rule})")

    out = args.out / "profile"
    done = run(["profile", "--size", "tiny", "--device", args.device, "--out", str(out)], 900)
    traces = list(out.rglob("*trace*.json"))
    device_time = any(("cuda" in t.read_text(errors="ignore").lower() or "hip" in t.read_text(errors="ignore").lower())
                      for t in traces) if args.device == "cuda" else bool(traces)
    step("profile", [] if done.returncode == 0 and device_time else
         [f"exit {done.returncode}; torch.profiler traces: {len(traces)}, device time seen: {device_time}",
          done.stderr.strip()[-300:]], f"{len(traces)} torch.profiler trace(s) under {out}")

    out = args.out / "startup"
    server = f"{sys.executable} -m omni_loader stage-server --size tiny --device {args.device} --port 8391 --variant"
    done = run(["serve-ab", "--baseline-cmd", f"{server} baseline", "--optimized-cmd", f"{server} optimized",
                "--health-url", "http://127.0.0.1:8391/health", "--warmup", "0", "--runs", "2", "--timeout", "300",
                "--out", str(out)], 1800)
    step("startup A/B", [] if done.returncode == 0 else [done.stderr.strip()[-300:]],
         f"exit {done.returncode}; {out}")

    if not args.skip_full:
        full = args.out / "full"
        done = run(["reproduce", "--device", args.device, "--out", str(full)], 3600)
        step("full reproduce", check_reproduce(full, "full", args.device, {"baseline": 219, "optimized": 0})
             if (full / "runs.csv").is_file() else [done.stderr.strip()[-300:]], f"exit {done.returncode}; {full}")

    (args.out / "gpu-check.json").write_text(json.dumps(verdicts, indent=2))
    failed = [n for n, v in verdicts.items() if v["pass"] is False]
    ran = [n for n, v in verdicts.items() if v["pass"] is not None]
    skipped = len(verdicts) - len(ran)
    print(f"gpu-check: {len(ran) - len(failed)} of {len(ran)} steps showed what they must"
          + (f" ({skipped} skipped)" if skipped else "") + (f"; failed: {', '.join(failed)}" if failed else "")
          + f"; {args.out / 'gpu-check.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
