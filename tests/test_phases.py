"""The load's phase tree, declared once (``names.PHASES``): every list and map of phases follows the declaration."""

from __future__ import annotations

from omni_loader.names import PHASE_LABELS, PHASE_TREE, PHASES, Phase, PhaseTree


def test_every_phase_is_said_in_words() -> None:
    from omni_loader.reporting.measurements import LABELS, label

    for p in PHASES:
        assert p.label.strip() and p.label != p.name, p  # label() falls back to the raw name
        assert label(p.name) == LABELS[p.name] == PHASE_LABELS[p.name] == p.label


def test_a_declared_phase_reaches_every_derived_list_and_map() -> None:
    at = [p.name for p in PHASES].index("load_parameters") + 1
    planted = Phase("planted", "weight_loading", "A planted phase", reads_checkpoint=True, step="planted_step")
    tree = PhaseTree((*PHASES[:at], planted, *PHASES[at:]))
    leaves, old = tree.leaves(), list(PHASE_TREE.leaves())
    old.insert(old.index("load_parameters") + 1, "planted")
    assert list(leaves) == old
    assert all("planted" in tree.enclosing[row] for row in ("weight_loading", "outer_load_weights", "total"))
    assert list(tree.enclosing) == list(PHASE_TREE.enclosing)
    assert tree.labels["planted"] == "A planted phase" and list(tree.labels) == [*leaves, *tree.enclosing,
                                                                               "reference_copy"]
    assert "planted" in tree.reading and tree.steps["planted_step"] == "planted"
    assert tree.reading_rows == PHASE_TREE.reading_rows
    assert tree.ended().index("planted") < tree.ended().index("weight_loading")


def test_the_kits_lists_are_the_derived_ones() -> None:
    """What the report, the controls and the startup chart read is the tree's, not a copy kept by hand."""
    from omni_loader.names import ENCLOSING, LEAF_PHASES, OUTER_LOAD_WEIGHTS_CHILDREN, READ_PHASES, STEP_PHASES
    from omni_loader.names import WEIGHT_LOADING_CHILDREN
    from omni_loader.reporting import cache_report, controls, sequential
    from omni_loader.startup.timeline_plot import ENCLOSED

    assert LEAF_PHASES == PHASE_TREE.leaves() and ENCLOSING == PHASE_TREE.enclosing
    assert (WEIGHT_LOADING_CHILDREN, OUTER_LOAD_WEIGHTS_CHILDREN) == (ENCLOSING["weight_loading"],
                                                                      ENCLOSING["outer_load_weights"])
    assert controls.ENCLOSING is sequential.ENCLOSING is ENCLOSING and controls.STEP_PHASES is STEP_PHASES
    assert cache_report.READ_PHASES is READ_PHASES and cache_report.TOUCHED_ROWS == PHASE_TREE.reading_rows
    assert ENCLOSED["model_loading"] == LEAF_PHASES
    assert ENCLOSED["model_loaded"] == LEAF_PHASES[LEAF_PHASES.index("read_checkpoint"):
                                                   LEAF_PHASES.index("model_loaded_size") + 1]
