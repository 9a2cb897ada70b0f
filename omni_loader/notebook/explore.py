"""Looking inside Token2Wav: tables of its module tree, buffers and parameter bytes, the two
layouts side by side, and small modules on which the two buffer-discovery rules disagree.

Everything returns a pandas DataFrame, a matplotlib Figure (built without pyplot) or a small
dataclass, so notebooks only call and display. The counts of a whole tree are
:func:`~omni_loader.token2wav.model.inventory`'s (one definition of "how many modules, buffers, bytes"); the
forward pass from codec tokens to audio lives in :mod:`~omni_loader.notebook.waveform`.
"""

from __future__ import annotations

from collections import Counter

import torch
from torch import nn

from ..token2wav.discovery import compare_variants, non_persistent_buffer_names, rule_hazards
from ..token2wav.model import Inventory, build_model, config_dict, inventory
from ..names import LAYOUTS


# =========================================================================== module tree


def module_depth(name: str) -> int:
    """Depth of a qualified module name: the root ('') is 0, ``a`` is 1, ``a.b`` is 2."""
    return 0 if not name else name.count(".") + 1


def module_table(model: nn.Module):  # -> DataFrame
    """One row per module of ``named_modules()``: name, class, depth, and what it holds itself
    (direct children, parameters and buffers, not those of its submodules)."""
    import pandas as pd

    rows = []
    for name, module in model.named_modules():
        own_params = list(module._parameters.values())
        own_params = [p for p in own_params if p is not None]
        rows.append({
            "module": name or "<root>",
            "class": type(module).__name__,
            "depth": module_depth(name),
            "children": len(module._modules),
            "parameters": len(own_params),
            "parameter_elements": sum(p.numel() for p in own_params),
            "buffers": sum(1 for b in module._buffers.values() if b is not None),
            "non_persistent_buffers": len(module._non_persistent_buffers_set),
        })
    return pd.DataFrame(rows)


def modules_by_class(model: nn.Module):  # -> DataFrame
    """Module count per class, with the depths it occurs at and what its instances hold."""
    table = module_table(model)
    out = table.groupby("class").agg(
        modules=("module", "count"),
        min_depth=("depth", "min"),
        max_depth=("depth", "max"),
        parameters=("parameters", "sum"),
        buffers=("buffers", "sum"),
    )
    return out.sort_values(["modules", "parameters"], ascending=False).reset_index()


def modules_by_depth(model: nn.Module):  # -> DataFrame
    """Module count per depth, with its most common classes."""
    import pandas as pd

    table = module_table(model)
    rows = []
    for depth, sub in table.groupby("depth"):
        common = Counter(sub["class"]).most_common(3)
        rows.append({
            "depth": depth,
            "modules": len(sub),
            "classes": sub["class"].nunique(),
            "most_common": ", ".join(f"{c}\u00a0×{n}" for c, n in common),  # a class and its count on one line
            "buffers": int(sub["buffers"].sum()),
        })
    return pd.DataFrame(rows)


def class_by_depth(model: nn.Module, top: int | None = None):  # -> DataFrame
    """Cross table of module counts: a ``class`` column and one column per depth, a row per class (the ``top``
    most numerous; all without ``top``), most numerous first, and a last row over all classes (``total`` is the
    column of row sums). The classes are a column, not the index: a table shows an index's name as a second
    header row."""
    import pandas as pd

    table = module_table(model)
    out = pd.crosstab(table["class"], table["depth"], margins=True, margins_name="total")
    out = out.rename(columns={d: f"depth {d}" for d in out.columns if d != "total"})
    classes = out.drop(index="total").sort_values("total", ascending=False, kind="stable")
    every = out.loc[["total"]].rename(index={"total": f"all {len(classes)} classes"})
    out = pd.concat([classes.head(top) if top is not None else classes, every])
    out.columns.name = None
    return out.rename_axis("class").reset_index()


def describe_tree(inv: Inventory) -> str:
    """One line: which tree, and how many modules, buffers and parameter bytes it has."""
    from ..formatting import count, mib

    return (f"Token2Wav ({inv.size}, {inv.layout} layout): {count(inv.modules)} modules, "
            f"{count(inv.named_buffers)} named buffers ({count(len(inv.persistent_buffers))} persistent), "
            f"{count(inv.parameters)} parameter tensors, {mib(inv.parameter_bytes)} of parameters")


# =========================================================================== buffers


def buffer_table(model: nn.Module):  # -> DataFrame
    """One row per named buffer: owner, persistence by each rule, and whether ``state_dict()`` holds it.

    ``persistent_by_set`` is the optimized rule (not listed in the owner's
    ``_non_persistent_buffers_set``); ``in_state_dict`` is the ground truth the baseline asks for,
    computed here from one ``state_dict()`` call.
    """
    import pandas as pd

    non_persistent = non_persistent_buffer_names(model)
    state_keys = set(model.state_dict().keys())
    modules = dict(model.named_modules())
    rows = []
    for name, buf in model.named_buffers():
        owner, _, local = name.rpartition(".")
        rows.append({
            "buffer": name,
            "owner": owner or "<root>",
            "owner_class": type(modules[owner]).__name__,
            "local_name": local,
            "persistent_by_set": name not in non_persistent,
            "in_state_dict": name in state_keys,
            "shape": "×".join(map(str, buf.shape)) or "scalar",  # "1×1×12": one cell that never breaks
            "dtype": str(buf.dtype).removeprefix("torch."),
            "bytes": buf.numel() * buf.element_size(),
        })
    return pd.DataFrame(rows)


def buffers_by_owner(model: nn.Module):  # -> DataFrame
    """Buffer counts per owner class, local name and persistence."""
    table = buffer_table(model)
    out = table.groupby(["owner_class", "local_name", "persistent_by_set", "in_state_dict"]).agg(
        buffers=("buffer", "count"), bytes=("bytes", "sum"), shape=("shape", "first"), dtype=("dtype", "first")
    )
    return out.sort_values("buffers", ascending=False).reset_index()


# =========================================================================== parameter bytes


def parameter_bytes(model: nn.Module, depth: int = 2):  # -> DataFrame
    """Parameter bytes per submodule, parameters grouped by the first ``depth`` parts of their path."""
    import pandas as pd

    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    modules = dict(model.named_modules())
    totals: dict[str, list[int]] = {}
    for name, param in model.named_parameters():
        parts = name.split(".")[:-1]  # drop the parameter's own name
        prefix = ".".join(parts[:depth]) or "<root>"
        entry = totals.setdefault(prefix, [0, 0, 0])
        entry[0] += 1
        entry[1] += param.numel()
        entry[2] += param.numel() * param.element_size()
    total_bytes = sum(v[2] for v in totals.values()) or 1
    rows = [{
        "submodule": prefix,
        "class": type(modules[prefix]).__name__ if prefix in modules else "",
        "tensors": t,
        "elements": e,
        "bytes": b,
        "MiB": b / 2**20,
        "share": b / total_bytes,
    } for prefix, (t, e, b) in totals.items()]
    return pd.DataFrame(rows).sort_values("bytes", ascending=False).reset_index(drop=True)


def bytes_of_class(model: nn.Module, class_name: str) -> dict[str, int]:
    """What the modules of one class hold, counted once each: the modules (themselves and their
    submodules), their parameters' and buffers' tensors and bytes. For a sentence in notebook 04 that
    weighs many small modules against few large ones."""
    roots = [m for m in model.modules() if type(m).__name__ == class_name]
    inside = {id(sub) for m in roots for sub in m.modules()}
    tensors = {id(t): t for m in roots for t in [*m.parameters(), *m.buffers()]}
    return {"modules": len(roots), "with_submodules": len(inside), "tensors": len(tensors),
            "bytes": sum(t.numel() * t.element_size() for t in tensors.values())}


def plot_parameter_bytes(table, title: str = "Parameter bytes per submodule", top: int = 20):  # -> Figure
    """Horizontal bar chart of :func:`parameter_bytes` (largest ``top`` rows), in MiB."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import StrMethodFormatter

    rows = table.head(top).iloc[::-1]
    # Text at 10 pt (the Lab pass read 7 px labels at display size): rows tall enough to hold it.
    fig = Figure(figsize=(10, 0.4 * len(rows) + 1.6), layout="constrained")
    ax = fig.subplots()
    bars = ax.barh(rows["submodule"], rows["MiB"], color="C0", label="parameter bytes")
    for bar, share in zip(bars, rows["share"]):
        ax.annotate(f"{share:.1%}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=10)
    ax.set_xlabel("parameter bytes (MiB)")
    ax.set_ylabel("submodule")
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.tick_params(axis="y", labelsize=9)
    ax.margins(x=0.14)  # room for the largest bar's share label inside the frame ("82.6%" touched it at 0.08)
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))  # "1,000" as the table writes it, not "1000"
    ax.grid(True, axis="x", alpha=0.3)
    return fig


# =========================================================================== layouts


def build_layouts(size: str = "full") -> dict[str, nn.Module]:
    """Both layouts of Token2Wav built on the meta device: the full tree, no memory, well under a second."""
    return {layout: build_model(config_dict(size), layout=layout, device="meta") for layout in LAYOUTS}


def labelled_counts(inv: Inventory) -> dict[str, int]:
    """The counts of one :func:`~omni_loader.token2wav.model.inventory` as the layout table shows them."""
    persistent = len(inv.persistent_buffers)
    return {
        "modules": inv.modules,
        "named buffers": inv.named_buffers,
        "persistent buffers": persistent,
        "non-persistent buffers": inv.named_buffers - persistent,
        "parameter tensors": inv.parameters,
        "parameter elements": inv.parameter_elements,
        "parameter bytes": inv.parameter_bytes,
    }


def compare_layouts(size: str = "full"):  # -> DataFrame
    """The inventories of both layouts side by side, with the difference (vllm-omni minus transformers): a row
    per count, named in the ``count`` column."""
    import pandas as pd

    table = pd.DataFrame({layout: labelled_counts(inventory(layout, size)) for layout in LAYOUTS})
    table["vllm-omni − transformers"] = table["vllm-omni"] - table["transformers"]
    return table.rename_axis("count").reset_index()  # a column: a table shows an index's name as a second header row


def layout_differences(size: str = "full"):  # -> DataFrame
    """Module classes and persistent buffers whose counts differ between the layouts."""
    import pandas as pd

    models = build_layouts(size)
    counts = {layout: Counter(type(m).__name__ for _, m in model.named_modules()) for layout, model in models.items()}
    for layout, model in models.items():
        non_persistent = non_persistent_buffer_names(model)
        for name, _ in model.named_buffers():
            kind = "non-persistent" if name in non_persistent else "persistent"
            counts[layout][f"buffer {name.rpartition('.')[2]} ({kind})"] += 1
    table = pd.DataFrame(counts).fillna(0).astype(int)
    differ = table.nunique(axis=1) > 1
    table.index.name = "module class / buffer"
    return table[differ].sort_index().reset_index()  # the names a column, as compare_layouts' counts


# =========================================================================== when the rules disagree


class DropsBufferOnSave(nn.Module):
    """A persistent buffer that a state-dict post-hook removes from ``state_dict()``.

    ``register_buffer`` says persistent, so the optimized rule keeps ``running``; the hook drops
    it, so ``name in model.state_dict()`` (the baseline) is False.
    """

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("running", torch.zeros(4))
        self.register_state_dict_post_hook(self._drop_running)

    @staticmethod
    def _drop_running(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
        state_dict.pop(prefix + "running", None)


class SavesNonPersistent(nn.Module):
    """A non-persistent buffer that an overridden ``_save_to_state_dict`` writes anyway.

    The set lists ``window``, so the optimized rule drops it; ``state_dict()`` holds it, so the
    baseline keeps it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("window", torch.hann_window(4), persistent=False)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "window"] = self.window if keep_vars else self.window.detach()


class PlainBuffers(nn.Module):
    """No hooks, no overrides: one persistent and one non-persistent buffer, root-level names."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(1))
        self.register_buffer("filter", torch.zeros(12), persistent=False)


def hazard_examples() -> dict[str, nn.Module]:
    """Small models, each with its root-level case nested as ``block`` under a plain root."""
    examples = {}
    for name, cls in (("plain", PlainBuffers), ("post-hook drops a buffer", DropsBufferOnSave),
                      ("_save_to_state_dict override", SavesNonPersistent)):
        root = nn.Module()
        root.register_buffer("step", torch.zeros((), dtype=torch.long))  # root-level persistent buffer
        root.block = cls()
        examples[name] = root
    return examples


def hazard_table(examples: dict[str, nn.Module] | None = None):  # -> DataFrame
    """Both rules on each example: what each returns, whether they agree, and what ``rule_hazards`` flags."""
    import pandas as pd

    rows = []
    for case, model in (examples or hazard_examples()).items():
        agreement = compare_variants(model)
        rows.append({
            "case": case,
            "baseline (in state_dict)": ", ".join(agreement.baseline),
            "optimized (not in the set)": ", ".join(agreement.optimized),
            "agree": agreement.agree,
            "rule_hazards": "; ".join(map(str, rule_hazards(model))) or "(none)",
        })
    return pd.DataFrame(rows)
