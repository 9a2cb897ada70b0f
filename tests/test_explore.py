"""Notebook 04's tables: the layouts compared through model.inventory, and the modules on which the rules disagree."""

from __future__ import annotations

import pytest

from omni_loader.notebook import explore
from omni_loader.token2wav.model import inventory


@pytest.fixture(scope="module")
def layouts():
    return explore.compare_layouts("tiny")


def test_layout_table_is_the_two_inventories_side_by_side(layouts) -> None:
    for layout in ("vllm-omni", "transformers"):
        inv = inventory(layout, "tiny")
        column = layouts[layout]
        assert column["modules"] == inv.modules
        assert column["parameter bytes"] == inv.parameter_bytes
        assert column["persistent buffers"] == len(inv.persistent_buffers)
        assert column["persistent buffers"] + column["non-persistent buffers"] == inv.named_buffers
    difference = layouts["vllm-omni − transformers"]
    assert difference["named buffers"] == 51 - 52 and difference["parameter tensors"] == 186 - 198
    assert difference["persistent buffers"] == 1 and difference["parameter elements"] == 0


def test_describe_tree_names_the_tree_and_its_counts() -> None:
    line = explore.describe_tree(inventory("vllm-omni", "tiny"))
    assert line.startswith("Token2Wav (tiny, vllm-omni layout): ")
    assert "51 named buffers (1 persistent), 186 parameter tensors" in line


def test_hazard_examples_disagree_where_a_module_rewrites_its_state_dict() -> None:
    table = explore.hazard_table().set_index("case")
    assert table["agree"].to_dict() == {"plain": True, "post-hook drops a buffer": False,
                                        "_save_to_state_dict override": False}
    assert table.loc["plain", "rule_hazards"] == "(none)"
    assert "block.running" in table.loc["post-hook drops a buffer", "optimized (not in the set)"]
    assert "block.window" in table.loc["_save_to_state_dict override", "baseline (in state_dict)"]
