"""Looking inside a module tree: notebook 04's tables of Token2Wav's modules, buffers and parameter bytes, the two
layouts side by side, and both discovery rules run on any tree (03); then small modules on which the rules disagree.

``t = kit.tree(...)`` builds a tree once (Token2Wav's, a synthetic one, or yours) and its methods answer the same
few questions of it, each returning a DataFrame, a Figure, a sentence or the rule's own result.
"""

from __future__ import annotations

import inspect
from collections import Counter

import torch
from torch import nn

from ..token2wav.discovery import (Agreement, RuleHazard, compare_variants, count_state_dict_calls,
                                   find_persistent_buffers, non_persistent_buffer_names, rule_hazards)
from ..token2wav.model import Inventory, build_model, config_dict, inventory
from ..names import LAYOUTS, VARIANTS


def tree(model: str | int | nn.Module = "full", buffers: int | None = None, *, layout: str = "vllm-omni",
         fanout: int = 4) -> Tree:
    """A tree to look inside: Token2Wav's of a size, a synthetic one of ``model`` modules, or a module."""
    if isinstance(model, nn.Module):
        return Tree(model)
    if isinstance(model, int):
        from ..sweep.trees import build_tree

        return Tree(build_tree(model, buffers if buffers is not None else model, fanout=fanout))
    return Tree(build_model(config_dict(model), layout=layout, device="meta"), size=model, layout=layout)


class Tree:
    """A module tree (``module``) and, for Token2Wav, which size and layout it is; its tables and the rules on it."""

    def __init__(self, module: nn.Module, size: str | None = None, layout: str | None = None) -> None:
        self.module, self.size, self.layout = module, size, layout

    def __repr__(self) -> str:
        return repr(self.module)

    # ------------------------------------------------------------------- the rules

    def non_persistent(self) -> set[str]:
        """The qualified names of the non-persistent buffers, as the optimized rule collects them in one walk."""
        return non_persistent_buffer_names(self.module)

    def persistent(self, variant: str = "optimized") -> dict[str, torch.Tensor]:
        """The persistent buffers by ``variant``'s rule (``baseline`` or ``optimized``)."""
        return find_persistent_buffers(self.module, variant)

    def state_dict_calls(self) -> dict[str, int]:
        """How many whole state dicts each rule builds on this tree (the baseline: one per named buffer)."""
        counted = {}
        for variant in VARIANTS:
            with count_state_dict_calls(self.module) as calls:
                find_persistent_buffers(self.module, variant)
            counted[variant] = calls.calls
        return counted

    def agreement(self) -> Agreement:
        """Both rules' answers on this tree, and whether they agree."""
        return compare_variants(self.module)

    def hazards(self) -> list[RuleHazard]:
        """The hooks and overrides on this tree that could make the two rules disagree (none on Token2Wav)."""
        return rule_hazards(self.module)

    # ------------------------------------------------------------------- modules

    @property
    def inventory(self) -> Inventory:
        """Token2Wav's counts for this tree's size and layout (:func:`~omni_loader.token2wav.model.inventory`)."""
        if self.size is None:
            raise ValueError("an inventory counts Token2Wav's tree: make it with kit.tree('full') or kit.tree('tiny')")
        return inventory(self.layout, self.size)

    def describe(self) -> str:
        """One line: which tree, and how many modules, buffers and parameter bytes it has."""
        from ..formatting import count, mib

        inv = self.inventory
        return (f"Token2Wav ({inv.size}, {inv.layout} layout): {count(inv.modules)} modules, "
                f"{count(inv.named_buffers)} named buffers ({count(len(inv.persistent_buffers))} persistent), "
                f"{count(inv.parameters)} parameter tensors, {mib(inv.parameter_bytes)} of parameters")

    def modules(self):  # -> DataFrame
        """One row per module: name, class, depth, and its own children, parameters and buffers."""
        import pandas as pd

        rows = []
        for name, module in self.module.named_modules():
            own_params = [p for p in module._parameters.values() if p is not None]
            rows.append({
                "module": name or "<root>",
                "class": type(module).__name__,
                "depth": 0 if not name else name.count(".") + 1,
                "children": len(module._modules),
                "parameters": len(own_params),
                "parameter_elements": sum(p.numel() for p in own_params),
                "buffers": sum(1 for b in module._buffers.values() if b is not None),
                "non_persistent_buffers": len(module._non_persistent_buffers_set),
            })
        return pd.DataFrame(rows)

    def modules_by_class(self):  # -> DataFrame
        """Module count per class, with the depths it occurs at and what its instances hold."""
        out = self.modules().groupby("class").agg(
            modules=("module", "count"),
            min_depth=("depth", "min"),
            max_depth=("depth", "max"),
            parameters=("parameters", "sum"),
            buffers=("buffers", "sum"),
        )
        return out.sort_values(["modules", "parameters"], ascending=False).reset_index()

    def modules_by_depth(self):  # -> DataFrame
        """Module count per depth, with its most common classes."""
        def most_common(classes) -> str:  # a class and its count on one line
            return ", ".join(f"{c}\u00a0×{n}" for c, n in Counter(classes).most_common(3))

        return self.modules().groupby("depth").agg(
            modules=("module", "count"),
            classes=("class", "nunique"),
            most_common=("class", most_common),
            buffers=("buffers", "sum"),
        ).reset_index()

    def class_by_depth(self, top: int | None = None):  # -> DataFrame
        """Cross table of module counts: a row per class (the ``top`` most numerous), a column per depth."""
        import pandas as pd

        table = self.modules()
        out = pd.crosstab(table["class"], table["depth"], margins=True, margins_name="total")
        out = out.rename(columns={d: f"depth {d}" for d in out.columns if d != "total"})
        classes = out.drop(index="total").sort_values("total", ascending=False, kind="stable")
        every = out.loc[["total"]].rename(index={"total": f"all {len(classes)} classes"})
        out = pd.concat([classes.head(top) if top is not None else classes, every])
        out.columns.name = None
        return out.rename_axis("class").reset_index()

    # ------------------------------------------------------------------- buffers

    def buffers(self):  # -> DataFrame
        """One row per named buffer: owner, persistence by the optimized rule, and in ``state_dict()``."""
        import pandas as pd

        non_persistent = self.non_persistent()
        state_keys = set(self.module.state_dict().keys())
        modules = dict(self.module.named_modules())
        rows = []
        for name, buf in self.module.named_buffers():
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

    def buffers_by_owner(self):  # -> DataFrame
        """Buffer counts per owner class, local name and persistence."""
        out = self.buffers().groupby(["owner_class", "local_name", "persistent_by_set", "in_state_dict"]).agg(
            buffers=("buffer", "count"), bytes=("bytes", "sum"), shape=("shape", "first"), dtype=("dtype", "first")
        )
        return out.sort_values("buffers", ascending=False).reset_index()

    # ------------------------------------------------------------------- parameter bytes

    def parameter_bytes(self, depth: int = 2):  # -> DataFrame
        """Parameter bytes per submodule, parameters grouped by the first ``depth`` parts of their path."""
        import pandas as pd

        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        modules = dict(self.module.named_modules())
        params = pd.DataFrame([{
            "submodule": ".".join(name.split(".")[:-1][:depth]) or "<root>",  # the parameter's own name dropped
            "elements": param.numel(),
            "bytes": param.numel() * param.element_size(),
        } for name, param in self.module.named_parameters()], columns=["submodule", "elements", "bytes"])
        out = params.groupby("submodule", sort=False).agg(
            tensors=("bytes", "size"), elements=("elements", "sum"), bytes=("bytes", "sum")).reset_index()
        out.insert(1, "class", [type(modules[p]).__name__ if p in modules else "" for p in out["submodule"]])
        out = out.assign(MiB=out["bytes"] / 2**20, share=out["bytes"] / (out["bytes"].sum() or 1))
        return out.sort_values("bytes", ascending=False).reset_index(drop=True)

    def bytes_of_class(self, class_name: str) -> dict[str, int]:
        """What the modules of one class hold, counted once each: modules, and their tensors' counts and bytes."""
        roots = [m for m in self.module.modules() if type(m).__name__ == class_name]
        inside = {id(sub) for m in roots for sub in m.modules()}
        tensors = {id(t): t for m in roots for t in [*m.parameters(), *m.buffers()]}
        return {"modules": len(roots), "with_submodules": len(inside), "tensors": len(tensors),
                "bytes": sum(t.numel() * t.element_size() for t in tensors.values())}

    def plot_parameter_bytes(self, depth: int = 2, top: int = 20):  # -> Figure
        """Horizontal bar chart of :meth:`parameter_bytes` (largest ``top`` rows), in MiB, titled with the tree."""
        from matplotlib.figure import Figure
        from matplotlib.ticker import StrMethodFormatter

        what = (f"Token2Wav ({'full-size' if self.size == 'full' else self.size}, {self.layout})" if self.size
                else type(self.module).__name__)
        rows = self.parameter_bytes(depth).head(top).iloc[::-1]
        # Text at 10 pt (7 pt labels read at about 7 px at display size): rows tall enough to hold it.
        fig = Figure(figsize=(10, 0.4 * len(rows) + 1.6), layout="constrained")
        ax = fig.subplots()
        bars = ax.barh(rows["submodule"], rows["MiB"], color="C0", label="parameter bytes")
        for bar, share in zip(bars, rows["share"]):
            ax.annotate(f"{share:.1%}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=10)
        ax.set_xlabel("parameter bytes (MiB)")
        ax.set_ylabel("submodule")
        ax.set_title(f"{what}: parameter bytes per submodule (depth {depth})")
        ax.legend(loc="lower right")
        ax.tick_params(axis="y", labelsize=9)
        ax.margins(x=0.14)  # room for the largest bar's share label inside the frame
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))  # "1,000" as the table writes it, not "1000"
        ax.grid(True, axis="x", alpha=0.3)
        return fig

    # ------------------------------------------------------------------- layouts

    def compare_layouts(self):  # -> DataFrame
        """Both layouts' inventories of this tree's size side by side, with vllm-omni minus transformers."""
        import pandas as pd

        counts = {}
        for layout in LAYOUTS:
            inv = inventory(layout, self.inventory.size)
            persistent = len(inv.persistent_buffers)
            counts[layout] = {"modules": inv.modules, "named buffers": inv.named_buffers,
                              "persistent buffers": persistent, "non-persistent buffers": inv.named_buffers - persistent,
                              "parameter tensors": inv.parameters, "parameter elements": inv.parameter_elements,
                              "parameter bytes": inv.parameter_bytes}
        table = pd.DataFrame(counts)
        table["vllm-omni − transformers"] = table["vllm-omni"] - table["transformers"]
        return table.rename_axis("count").reset_index()  # a column: a table shows an index's name as a second header row

    def layout_differences(self):  # -> DataFrame
        """Module classes and persistent buffers whose counts differ between the layouts of this tree's size."""
        import pandas as pd

        counts = {}
        for layout in LAYOUTS:  # each built on the meta device: the full tree, no memory, well under a second
            model = build_model(config_dict(self.inventory.size), layout=layout, device="meta")
            counts[layout] = Counter(type(m).__name__ for m in model.modules())
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
    """A persistent buffer that a state-dict post-hook removes: the optimized rule keeps it, the baseline not."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("running", torch.zeros(4))
        self.register_state_dict_post_hook(self._drop_running)

    @staticmethod
    def _drop_running(module: nn.Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
        state_dict.pop(prefix + "running", None)


class SavesNonPersistent(nn.Module):
    """A non-persistent buffer that an overridden ``_save_to_state_dict`` writes anyway: the baseline keeps it."""

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


class Hazards:
    """Small models, each case nested as ``block`` under a plain root, on which the two rules disagree."""

    CASES = {"plain": PlainBuffers, "post-hook drops a buffer": DropsBufferOnSave,
             "_save_to_state_dict override": SavesNonPersistent}

    def source(self) -> str:
        """The two cases that make the rules disagree, as their code."""
        return "\n".join(inspect.getsource(cls) for cls in (DropsBufferOnSave, SavesNonPersistent))

    def table(self):  # -> DataFrame
        """Both rules on each example: what each returns, whether they agree, and what ``rule_hazards`` flags."""
        import pandas as pd

        rows = []
        for case, cls in self.CASES.items():
            model = nn.Module()  # a plain root with a root-level persistent ``step`` buffer, the case as ``block``
            model.register_buffer("step", torch.zeros((), dtype=torch.long))
            model.block = cls()
            agreement = compare_variants(model)
            rows.append({
                "case": case,
                "baseline (in state_dict)": ", ".join(agreement.baseline),
                "optimized (not in the set)": ", ".join(agreement.optimized),
                "agree": agreement.agree,
                "rule_hazards": "; ".join(map(str, rule_hazards(model))) or "(none)",
            })
        return pd.DataFrame(rows)


hazards = Hazards  # the face's verb: kit.hazards().table()
