"""Sentences beside notebook 02's tables, each computed from the files the run saved (never a typed number).

Why: a table whose figures run against what a reader expects (the optimized load slower under torch.profiler, an
untouched phase differing more than the fix saves) needs a word beside it, true whichever way the figures fall.
"""

from __future__ import annotations

from functools import partial

from ..errors import OmniLoaderError
from ..formatting import duration
from ..names import LEAF_PHASES
from ..reporting.measurements import label
from .outputs import TORCH_OPS_CSV, TRACE_JSON, read_torch_ops
from .result import VariantProfile
from .torch_trace import PHASE_RANGE, in_words, trace_phase_ranges

WHOLE = "total"  # the phase range that is the whole load
SELF_TIMES = ("self_gpu_ms", "self_cpu_ms")  # torch_ops.csv's self-time column, the GPU's first (as its table)
# Why a profiled load's copies can cost what an unprofiled one's did not (the flamegraphs' note says it too).
OTHER_CAUSES = ("one profiled load per variant, a single sample; this virtual machine returns freed memory to its "
                "host, so a later first touch of memory costs a host page fault whose price varies from load to load, "
                "and copies into fresh memory are where that shows; and torch.profiler's own overhead on every "
                "operator it records")


class Profiles(dict):
    """Each variant's :class:`VariantProfile` by name, and the sentences notebook 02 shows beside its tables."""

    def phase_notes(self) -> list[str]:
        """Beside the phase shares: :func:`untouched_phase_sentence`."""
        return [s] if (s := untouched_phase_sentence(self)) else []

    def torch_notes(self) -> list[str]:
        """Beside torch.profiler's tables: :func:`torch_slower_sentence`."""
        return [s] if (s := torch_slower_sentence(self)) else []


def untouched_phase_sentence(profiles: dict[str, VariantProfile]) -> str | None:
    """Which untouched phase differs most between the two median unprofiled runs, against the changed phases'
    saving: that difference is the machine's, not the fix's. ``None`` without two variants or a phase both ran."""
    from ..reporting.controls import changed_phases

    if len(profiles) != 2:
        return None
    (a, pa), (b, pb) = profiles.items()
    sa, sb = (dict(p.reference.get("phases", {})) for p in (pa, pb))
    try:
        changed = changed_phases(a, b)
    except OmniLoaderError:  # a custom variant's name: no phase is known to be changed
        changed = ()
    untouched = [p for p in LEAF_PHASES if p in sa and p in sb and p not in changed]
    if not untouched:
        return None
    phase = max(untouched, key=lambda p: abs(sb[p] - sa[p]))
    gap = sb[phase] - sa[phase]
    ms = partial(duration, unit="ms", digits=2)  # as the phase-share table's cells
    text = (f"Of the phases the loader change does not touch, {label(phase)} differs most between the two median "
            f"runs: {ms(sa[phase])} ({a}) against {ms(sb[phase])} ({b}), {ms(abs(gap))} "
            f"{'more' if gap > 0 else 'less'} in the {b} run")
    mine = [p for p in changed if p in sa and p in sb]
    if mine:
        saving = sum(sa[p] - sb[p] for p in mine)
        what = " and ".join(label(p).lower() if i else label(p) for i, p in enumerate(mine))
        text += (f", {'more' if abs(gap) > abs(saving) else 'less'} than {what}'s "
                 f"{'saving' if saving >= 0 else 'difference'} of {ms(abs(saving))}")
    return (text + f". Both variants run the same {label(phase).lower()} code, so that difference is this machine's "
            f"noise between runs, not the fix; notebook 01's runs, more of them, say how large that noise is.")


def torch_slower_sentence(profiles: dict[str, VariantProfile]) -> str | None:
    """Which variant's load was the slower under torch.profiler, where (phase, operator), whether their unprofiled
    runs agree and what else can explain it. ``None`` without both variants' trace and operator table."""
    if len(profiles) != 2:
        return None
    ranges, ops = {}, {}
    for v, p in profiles.items():
        if not (p.directory / TRACE_JSON).is_file() or not (p.directory / TORCH_OPS_CSV).is_file():
            return None
        r = trace_phase_ranges(p.directory / TRACE_JSON)
        ranges[v] = r.groupby("phase")["dur_us"].sum() / 1e6
        o = read_torch_ops(p.directory)
        column = next((c for c in SELF_TIMES if c in o.columns), None)
        if column is None or WHOLE not in ranges[v]:
            return None
        o = o[~o["name"].astype(str).str.startswith(PHASE_RANGE)]
        ops[v] = (o.groupby("name")[column].sum() / 1e3, column)
    (a, ra), (b, rb) = ranges.items()
    slow, fast = (a, b) if ra[WHOLE] >= rb[WHOLE] else (b, a)
    rs, rf = ranges[slow], ranges[fast]
    leaves = [p for p in LEAF_PHASES if p in rs and p in rf]
    ms = partial(duration, unit="ms", digits=3)  # as torch.profiler's tables' cells
    text = (f"Under torch.profiler the {slow} load was the slower one: {ms(rs[WHOLE])} against the {fast} load's "
            f"{ms(rf[WHOLE])}")
    if leaves:
        phase = max(leaves, key=lambda p: rs[p] - rf[p])
        text += f", most of the gap in {label(phase)} ({ms(rs[phase])} against {ms(rf[phase])})"
    (os_, column), (of, _) = ops[slow], ops[fast]
    names = os_.index.intersection(of.index)
    if len(names):
        op = max(names, key=lambda n: os_[n] - of[n])
        text += f", and of the operators `{op}`'s {in_words(column)} differed most that way ({ms(os_[op])} against {ms(of[op])})"
    unprofiled = {v: p.reference.get("phases", {}).get(WHOLE) for v, p in profiles.items()}
    if all(isinstance(s, (int, float)) for s in unprofiled.values()):
        same = unprofiled[slow] >= unprofiled[fast]
        text += (f". Unprofiled, their median runs were {ms(unprofiled[slow])} ({slow}) and {ms(unprofiled[fast])} "
                 f"({fast}): {'the same order' if same else 'the other way round'}")
    return (text + f". What else can explain it: {OTHER_CAUSES}. The timed A/B medians (notebook 01), not one "
            "profiled load, carry the claim.")
