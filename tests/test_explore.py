"""Notebook 04's tables: the layouts compared through model.inventory, and the modules on which the rules disagree."""

from __future__ import annotations

import pytest

from omni_loader.notebook import explore
from omni_loader.token2wav.model import inventory


@pytest.fixture(scope="module")
def layouts():
    return explore.compare_layouts("tiny").set_index("count")


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


def _last_value(source: str, namespace: dict):
    """Run a notebook cell's ``source`` in ``namespace`` and return its last expression's value, as Jupyter shows it."""
    import ast

    tree = ast.parse(source)
    *body, last = tree.body
    exec(compile(ast.Module(body=body, type_ignores=[]), "<cell>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)


def test_04s_and_03s_tables_read_in_words_and_never_break_a_name(capsys) -> None:
    """The tables notebook 04 shows (and 03's hazard table), each cell run here as the notebook runs it on the tiny
    tree: no header is a bare snake_case identifier (``persistent_by_set``), no name breaks after its "_" (a class
    ``Qwen2_5OmniSnakeBeta``, a rule ``_save_to_state_dict``, a buffer ``inv_freq``), and the cross table's columns
    say they are depths."""
    import re

    import nbformat

    from omni_loader import notebook as kit
    from test_notebooks import NOTEBOOK_DIR

    namespace = {"kit": kit, "tree_size": "tiny", "layout": "vllm-omni", "bytes_depth": 2,
                 "tree": kit.build_model(kit.config_dict("tiny"), layout="vllm-omni", device="meta")}
    cells = [c.source for c in nbformat.read(NOTEBOOK_DIR / "04_explore_token2wav.ipynb", as_version=4).cells
             if c.cell_type == "code" and c.source.splitlines()[-1].startswith("kit.table(")]
    cells += [c.source for c in nbformat.read(NOTEBOOK_DIR / "03_module_traversal_costs.ipynb", as_version=4).cells
              if c.cell_type == "code" and "kit.explore.hazard_table()" in c.source]
    assert len(cells) >= 8
    shown = [_last_value(source, namespace).to_html() for source in cells]
    capsys.readouterr()
    for source, html in zip(cells, shown):
        headers = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*col_heading[^>]*>(.*?)</th>", html)]
        assert not [h for h in headers if re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", h)], (source, headers)
        assert not re.search(r"[A-Za-z0-9]_<wbr>", html), (source, re.findall(r".{30}_<wbr>.{10}", html)[:3])
        # an index's name is a second header row holding one word ("class", "count") above the table's first column
        assert "index_name" not in html, source
    depths = next(html for source, html in zip(cells, shown) if "class_by_depth" in source)
    columns = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*col_heading level0[^>]*>(.*?)</th>", depths)]
    assert [c for c in columns if c not in ("class", "total")] == [f"depth {d}" for d in range(len(columns) - 2)]
    assert "Qwen2_5OmniSnakeBeta</span></code>" in "".join(shown)


def test_class_by_depth_lists_the_most_numerous_classes_and_ends_with_all_of_them() -> None:
    """The cross table's last row sums every class, also those ``top`` leaves out; the rows before it are classes,
    most numerous first (the sums row came first, and the class names were the index: a second header row)."""
    from omni_loader.token2wav.model import build_model, config_dict

    tree = build_model(config_dict("tiny"), layout="vllm-omni", device="meta")
    whole, top = explore.class_by_depth(tree), explore.class_by_depth(tree, top=3)
    classes = whole.iloc[:-1]
    assert list(whole.columns[:2]) == ["class", "depth 0"] and whole.columns[-1] == "total"
    assert whole.iloc[-1]["class"] == f"all {len(classes)} classes" == top.iloc[-1]["class"]
    assert whole.iloc[-1]["total"] == classes["total"].sum() == len(list(tree.modules())) == top.iloc[-1]["total"]
    assert list(classes["total"]) == sorted(classes["total"], reverse=True)
    assert list(top["class"][:-1]) == list(classes["class"][:3]) and len(top) == 4

