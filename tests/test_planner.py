"""Order designs: balanced, seeded, and (by default) not tying carry-over to one variant."""

from __future__ import annotations

from collections import Counter

import pytest

from omni_loader.results.planner import DEFAULT_ORDER, ORDERS, plan_runs
from omni_loader.results.spec import BenchmarkSpec


def _measured(plan) -> str:
    return "".join(r.variant[0] for r in plan if not r.warmup)


def _predecessors(sequence: str) -> Counter:
    """How often each variant follows each variant (carry-over pairs) in a measured sequence."""
    return Counter(zip(sequence, sequence[1:]))


@pytest.mark.parametrize("order", ORDERS)
def test_every_order_is_balanced(order):
    """Each variant gets exactly ``runs`` measured runs, numbered 1..runs in the order they run."""
    for variants in (("baseline", "optimized"), ("a", "b", "c")):
        plan = plan_runs(1, 6, order, seed=3, variants=variants)
        measured = [r for r in plan if not r.warmup]
        assert Counter(r.variant for r in measured) == {v: 6 for v in variants}
        for v in variants:
            assert [r.order for r in measured if r.variant == v] == list(range(1, 7))


def test_randomized_blocks_are_permutations_of_the_variants():
    for variants in (("baseline", "optimized"), ("a", "b", "c")):
        sequence = [r.variant for r in plan_runs(0, 8, "blocks", seed=5, variants=variants)]
        blocks = [sequence[i:i + len(variants)] for i in range(0, len(sequence), len(variants))]
        assert all(sorted(b) == sorted(variants) for b in blocks)  # every block holds each variant once
        assert len({tuple(b) for b in blocks}) > 1  # and the blocks are not all the same permutation
    assert plan_runs(1, 10, "blocks", seed=2) == plan_runs(1, 10, "blocks", seed=2)  # seeded
    assert len({_measured(plan_runs(0, 10, "blocks", seed=s)) for s in range(5)}) > 1  # the seed matters


def test_blocks_do_not_tie_the_run_before_to_the_variant():
    """Under ``alternate`` the optimized variant always follows the baseline: anything a run leaves
    behind lands on the other variant every time. Under randomized blocks each variant follows
    both variants."""
    alternate = _predecessors(_measured(plan_runs(0, 10, "alternate")))
    assert alternate[("o", "b")] == 9 and alternate[("b", "b")] == alternate[("o", "o")] == 0
    blocks = _predecessors(_measured(plan_runs(0, 10, "blocks", seed=0)))
    for pair in (("b", "b"), ("b", "o"), ("o", "b"), ("o", "o")):
        assert blocks[pair] > 0, pair


def test_blocks_are_the_default_and_alternate_stays_an_option():
    assert DEFAULT_ORDER == "blocks" and "alternate" in ORDERS
    assert BenchmarkSpec("ckpt").order == "blocks"
    assert plan_runs(0, 3) == plan_runs(0, 3, "blocks", seed=0)
