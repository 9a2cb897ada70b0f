"""The score of ``make mutation``: mutmut's results per core module, equivalent mutants excluded.

Run by the Makefile after ``mutmut run``; reads ``mutants/omni_loader/<module>.py.meta`` and the list of
equivalent mutants in ``tests/mutation-equivalent.md`` (one ``- `mutant name`: reason`` line each).
Exits 1 when a mutant survived that is not listed (kill it with a test, or list it with its reason), or
when a listed mutant no longer survives (drop it from the list). Mutants listed as ``(untested)`` (real
survivors that no test here can reach, e.g. the network path of ``--download``) count as survived.

    python tests/mutation_score.py [--seconds N] discovery loader steps checkpoint stats report planner …
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = REPO / "tests" / "mutation-equivalent.md"
SCOPE: dict[str, str] = {}  # module -> mutant name pattern, where only part of a module is scored
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
          37: "killed"}
SURVIVED = {0: "survived", 5: "no tests", 33: "no tests"}


def listed_mutants(path: Path | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """``({equivalent mutant: reason}, {known survivor: reason})`` from the list's lines:
    ``- `name`: reason`` for an equivalent mutant (left out of the score), ``- `name` (untested): reason``
    for a real survivor no test here can kill (it stays in the score as survived, and does not fail the run).
    """
    equivalent, untested = {}, {}
    path = path or EQUIVALENT_FILE
    if not path.is_file():
        return equivalent, untested
    for line in path.read_text().splitlines():
        m = re.match(r"^- `([^`]+__mutmut_\d+)`( \(untested\))?:\s*(.+)$", line.strip())
        if m:
            (untested if m.group(2) else equivalent)[m.group(1)] = m.group(3)
    return equivalent, untested


def module_results(module: str, mutants_dir: Path = REPO / "mutants") -> dict[str, int | None]:
    meta = mutants_dir / "omni_loader" / f"{module.replace('.', '/')}.py.meta"  # results.rows: results/rows.py
    if not meta.is_file():
        raise SystemExit(f"no mutmut results for {module}: {meta} (run `make mutation MODULES={module}`)")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    pattern = SCOPE.get(module, f"omni_loader.{module}.*")
    return {name: code for name, code in codes.items() if fnmatch.fnmatch(name, pattern)}


def status(code: int | None) -> str:
    if code is None:
        return "not checked"
    return KILLED.get(code) or SURVIVED.get(code) or f"other ({code})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("modules", nargs="+")
    p.add_argument("--seconds", type=int, help="how long the run took (printed with the score)")
    p.add_argument("--mutants", type=Path, default=REPO / "mutants", help="mutmut's output directory")
    args = p.parse_args(argv)
    equivalent, untested = listed_mutants()
    unlisted, stale, lines = [], [], []
    total = Counter()
    lines.append(f"{'module':<24} {'mutants':>7} {'killed':>6} {'timeout':>7} {'equiv.':>6} {'survived':>8} "
                 f"{'no tests':>8} {'other':>5} {'unchecked':>9} {'score':>7}")
    for module in args.modules:
        counts = Counter()
        for name, code in sorted(module_results(module, args.mutants).items()):
            s = status(code)
            if name in equivalent:
                counts["equivalent"] += 1
                if s not in ("survived", "no tests", "not checked"):
                    stale.append(f"{name} ({s})")
                continue
            counts[s if s in ("killed", "timeout", "survived", "no tests", "not checked") else "other"] += 1
            if name in untested:
                if s not in ("survived", "no tests", "not checked"):
                    stale.append(f"{name} ({s})")
            elif s in ("survived", "no tests") or s.startswith("other"):
                unlisted.append(f"{name} ({s})")
        counts["mutants"] = sum(v for k, v in counts.items())
        total.update(counts)
        lines.append(_row(module, counts))
    lines.append(_row("total", total))
    print("\n".join(lines))
    if args.seconds is not None:
        print(f"time: {args.seconds // 60} min {args.seconds % 60} s")
    if unlisted:
        print(f"\n{len(unlisted)} mutant(s) survived and are not listed in {EQUIVALENT_FILE.name} "
              "(kill each with a test, or list it with the reason it is equivalent; `mutmut show NAME`):")
        print("\n".join(f"  {u}" for u in unlisted))
    if stale:
        print(f"\nlisted but no longer surviving (drop them from the list): {', '.join(stale)}")
    if total["not checked"]:
        print(f"\n{total['not checked']} mutant(s) not checked yet (an interrupted run): the score is of the "
              "checked ones; `make mutation` again continues where it stopped")
    return 1 if unlisted or stale or total["not checked"] else 0


def _row(name: str, c: Counter) -> str:
    scored = c["mutants"] - c["equivalent"] - c["not checked"]
    score = f"{100 * (c['killed'] + c['timeout']) / scored:.1f}%" if scored else "—"
    return (f"{name:<24} {c['mutants']:>7} {c['killed']:>6} {c['timeout']:>7} {c['equivalent']:>6} "
            f"{c['survived']:>8} {c['no tests']:>8} {c['other']:>5} {c['not checked']:>9} {score:>7}")


if __name__ == "__main__":
    sys.exit(main())
