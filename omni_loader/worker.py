"""One load in a fresh process, as a server restart would do it, reporting JSON.

``python -m omni_loader.worker --variant baseline --checkpoint DIR --out FILE`` loads Token2Wav
once and writes ``LoadResult.to_dict()`` to FILE (or stdout). The runner starts one per run so
that no run inherits warm caches, allocator state or imported modules from the previous one;
py-spy records the same entry point.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import OmniLoaderError


def run_load(checkpoint: str, variant: str, layout: str = "vllm-omni", device: str = "cpu",
             dtype: str = "float32", digest: bool = True) -> dict[str, Any]:
    """Open the snapshot and load it once; the dict is what runs.csv rows are made from."""
    from .checkpoint import open_snapshot
    from .loader import load_token2wav

    snapshot = open_snapshot(checkpoint)
    model, result = load_token2wav(snapshot, variant, layout=layout, device=device, dtype=dtype, digest=digest)
    del model
    return result.to_dict()


def worker_command(checkpoint: str, variant: str, layout: str, device: str, dtype: str, out: str | None = None,
                   repeat: int = 1) -> list[str]:
    """The argv that runs one load in a fresh interpreter (``repeat`` loads, for a sampling profiler)."""
    cmd = [sys.executable, "-m", "omni_loader.worker", "--checkpoint", str(checkpoint), "--variant", variant,
           "--layout", layout, "--device", device, "--dtype", dtype]
    cmd += ["--repeat", str(repeat)] if repeat != 1 else []
    return cmd + (["--out", str(out)] if out else [])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m omni_loader.worker", description=__doc__)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--variant", required=True, choices=("baseline", "optimized"))
    p.add_argument("--layout", default="vllm-omni")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--no-digest", action="store_true")
    p.add_argument("--out", help="write the JSON here instead of stdout")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="load N times in this process (for a sampling profiler); the JSON is the first, cold load's,"
                        " plus 'repeat' and 'repeat_total_seconds' when N > 1")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, not {args.repeat}")
    try:
        data = run_load(args.checkpoint, args.variant, args.layout, args.device, args.dtype, not args.no_digest)
        if args.repeat > 1:
            totals = [data["phases"]["total"]]
            for _ in range(args.repeat - 1):
                again = run_load(args.checkpoint, args.variant, args.layout, args.device, args.dtype, False)
                totals.append(again["phases"]["total"])
            data.update(repeat=args.repeat, repeat_total_seconds=totals)
    except OmniLoaderError as exc:
        print(f"omni-loader worker: error: {exc}", file=sys.stderr)
        return exc.exit_code
    text = json.dumps(data, default=str)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
