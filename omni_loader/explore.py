"""Looking inside Token2Wav: tables of its module tree, buffers and parameter bytes, the two
layouts side by side, a forward pass from codec tokens to a waveform, and small modules on which
the two buffer-discovery rules disagree.

Everything returns a pandas DataFrame, a matplotlib Figure (built without pyplot) or a small
dataclass, so notebooks only call and display.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .discovery import compare_variants, non_persistent_buffer_names, rule_hazards

SAMPLE_RATE = 24_000  # Qwen2.5-Omni's Token2Wav writes 24 kHz audio
SYNTHETIC_KEY = "omni_loader_synthetic"  # config.json key that marks a synthetic (random-weight) snapshot


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
            "most_common": ", ".join(f"{c} ×{n}" for c, n in common),
            "buffers": int(sub["buffers"].sum()),
        })
    return pd.DataFrame(rows)


def class_by_depth(model: nn.Module):  # -> DataFrame
    """Cross table: classes (rows) x depth (columns), module counts."""
    import pandas as pd

    table = module_table(model)
    out = pd.crosstab(table["class"], table["depth"], margins=True, margins_name="total")
    return out.sort_values("total", ascending=False)


def describe_tree(model: nn.Module, label: str = "Token2Wav") -> str:
    """One line: where the model lives and how many modules, buffers and parameter bytes it has."""
    from .formatting import count, mib

    counts = layout_counts(model)
    device = next(model.parameters()).device
    return (f"{label} on {device}: {count(counts['modules'])} modules, {count(counts['named buffers'])} named buffers "
            f"({count(counts['persistent buffers'])} persistent), {count(counts['parameter tensors'])} parameter "
            f"tensors, {mib(counts['parameter bytes'])} of parameters")


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
            "shape": tuple(buf.shape),
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


def plot_parameter_bytes(table, title: str = "Parameter bytes per submodule", top: int = 20):  # -> Figure
    """Horizontal bar chart of :func:`parameter_bytes` (largest ``top`` rows), in MiB."""
    from matplotlib.figure import Figure

    rows = table.head(top).iloc[::-1]
    fig = Figure(figsize=(10, 0.32 * len(rows) + 1.6), layout="constrained")
    ax = fig.subplots()
    bars = ax.barh(rows["submodule"], rows["MiB"], color="C0", label="parameter bytes")
    for bar, share in zip(bars, rows["share"]):
        ax.annotate(f"{share:.1%}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_xlabel("parameter bytes (MiB)")
    ax.set_ylabel("submodule")
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


# =========================================================================== layouts


def layout_counts(model: nn.Module) -> dict[str, int]:
    """The counts the PR and the facts quote, for one built model."""
    params = list(model.parameters())
    non_persistent = non_persistent_buffer_names(model)
    buffers = [n for n, _ in model.named_buffers()]
    return {
        "modules": sum(1 for _ in model.named_modules()),
        "named buffers": len(buffers),
        "persistent buffers": sum(1 for n in buffers if n not in non_persistent),
        "non-persistent buffers": sum(1 for n in buffers if n in non_persistent),
        "parameter tensors": len(params),
        "parameter elements": sum(p.numel() for p in params),
        "parameter bytes": sum(p.numel() * p.element_size() for p in params),
        "state_dict keys": len(model.state_dict()),
    }


def build_layouts(size: str = "full") -> dict[str, nn.Module]:
    """Both layouts of Token2Wav built on the meta device: the full tree, no memory, well under a second."""
    from .model import LAYOUTS, build_model, config_dict

    return {layout: build_model(config_dict(size), layout=layout, device="meta") for layout in LAYOUTS}


def compare_layouts(size: str = "full", models: dict[str, nn.Module] | None = None):  # -> DataFrame
    """Counts of both layouts side by side, with the difference (vllm-omni minus transformers)."""
    import pandas as pd

    models = models or build_layouts(size)
    table = pd.DataFrame({layout: layout_counts(m) for layout, m in models.items()})
    if {"vllm-omni", "transformers"} <= set(table.columns):
        table["vllm-omni − transformers"] = table["vllm-omni"] - table["transformers"]
    table.index.name = "count"
    return table


def layout_differences(size: str = "full", models: dict[str, nn.Module] | None = None):  # -> DataFrame
    """Module classes and persistent buffers whose counts differ between the layouts."""
    import pandas as pd

    models = models or build_layouts(size)
    counts = {layout: Counter(type(m).__name__ for _, m in model.named_modules()) for layout, model in models.items()}
    for layout, model in models.items():
        non_persistent = non_persistent_buffer_names(model)
        for name, _ in model.named_buffers():
            kind = "non-persistent" if name in non_persistent else "persistent"
            counts[layout][f"buffer {name.rpartition('.')[2]} ({kind})"] += 1
    table = pd.DataFrame(counts).fillna(0).astype(int)
    differ = table.nunique(axis=1) > 1
    table.index.name = "module class / buffer"
    return table[differ].sort_index()


# =========================================================================== forward pass


def weights_are_random(snapshot: Any) -> bool:
    """True when the snapshot's ``config.json`` carries the ``omni_loader_synthetic`` key."""
    root = Path(getattr(snapshot, "root", snapshot))
    config = json.loads((root / "config.json").read_text())
    return SYNTHETIC_KEY in config


def load_model(size: str = "tiny", layout: str = "vllm-omni", checkpoint: str | None = None,
               model_id: str | None = None, device: str = "auto"):
    """``(model, snapshot, load_result)``: the snapshot (``checkpoint``, ``model_id`` in the local
    cache, or the embedded synthetic one of ``size``) loaded with the optimized rule onto ``device``
    (``auto``: the GPU when torch sees one; the forward pass then runs there too)."""
    from .checkpoint import resolve_snapshot
    from .loader import load_token2wav

    snapshot = resolve_snapshot(checkpoint=checkpoint, model_id=model_id, size=size)
    model, result = load_token2wav(snapshot, "optimized", layout=layout, device=device)
    return model, snapshot, result


def describe_load(snapshot: Any, result: Any) -> str:
    """Two lines: which snapshot was loaded, and what the load cost and found."""
    from .formatting import count, short_duration

    seconds = result.phase_seconds()
    return (f"snapshot: {snapshot.root} ({snapshot.source})\n"
            f"load on {result.device}: {short_duration(seconds['total'])} in total, buffer discovery "
            f"{short_duration(seconds['buffer_discovery'])}, {count(result.state_dict_calls)} state_dict() calls, "
            f"{count(result.weights_loaded)} weights loaded, persistent buffers: "
            f"{', '.join(result.persistent_buffers) or '(none)'}")


def clip_length(seconds: float) -> str:
    """How long a clip plays, as its player shows it: ``2.00 s``; a clip under a second in ms."""
    from .formatting import short_duration

    return f"{seconds:,.2f} s" if seconds >= 1 else short_duration(seconds)


@dataclass
class Waveform:
    """What :func:`synthesize_waveform` produced, and whether it can mean anything."""

    audio: Any  # numpy float32, 1-D
    sample_rate: int
    random_weights: bool
    speaker: str
    n_codes: int
    num_steps: int
    seconds: float  # wall time of the forward pass
    device: str = "cpu"

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate

    def describe(self) -> str:
        """Length, source and cost of the clip (whether the weights are random is :meth:`note`)."""
        from .formatting import short_duration

        return (f"{len(self.audio):,} samples = {clip_length(self.duration)} at {self.sample_rate:,} Hz from "
                f"{self.n_codes:,} codec tokens, speaker {self.speaker}, {self.num_steps} ODE steps, on "
                f"{self.device}; forward pass {short_duration(self.seconds)}")

    def note(self) -> str:
        """Markdown: what the sound can mean. Said once, where it is seen (not also in describe())."""
        if self.random_weights:
            return ("**The weights are random** (a synthetic snapshot: `omni_loader_synthetic` in its config.json). "
                    "The pipeline runs end to end with the released shapes, but what you hear is noise, not speech.")
        return "Weights from the checkpoint: with codec tokens from the talker, this is speech."

    def save(self, path: str | Path) -> Path:
        """Write the clip as a 16-bit PCM WAV file (``path`` a file, or a directory for ``token2wav.wav``)."""
        import numpy as np
        from scipy.io import wavfile

        path = Path(path)
        if path.suffix.lower() != ".wav":
            path.mkdir(parents=True, exist_ok=True)
            path = path / "token2wav.wav"
        peak = float(np.max(np.abs(self.audio))) if len(self.audio) else 0.0
        scaled = self.audio / peak if peak > 0 else self.audio  # the player normalises too
        wavfile.write(path, self.sample_rate, (np.clip(scaled, -1, 1) * 32767).astype(np.int16))
        return path


def synthesize_waveform(
    model: nn.Module,
    snapshot: Any,
    n_codes: int = 50,
    num_steps: int = 4,
    speaker: str | None = None,
    seed: int = 0,
    code: torch.Tensor | None = None,
) -> Waveform:
    """Codec tokens -> mel (DiT, ``num_steps`` ODE steps) -> waveform (BigVGAN), as the stage does.

    Conditioning vector and reference mel come from the snapshot's ``spk_dict.pt``. Without
    ``code``, ``n_codes`` tokens are drawn from ``seed``; the DiT's initial noise is drawn from
    ``seed`` too, without disturbing the global RNG.
    """
    import numpy as np

    from .loader import load_speaker_dict

    device = next(model.parameters()).device
    speakers = load_speaker_dict(snapshot, torch.device("cpu"))
    speaker = speaker or min(speakers)
    if speaker not in speakers:
        raise ValueError(f"speaker {speaker!r} is not in {snapshot.spk_dict_path} (has {sorted(speakers)})")
    entry = speakers[speaker]
    if code is None:
        vocab = int(entry.get("bos_token", model.config.dit_config.num_embeds - 1))
        code = torch.randint(0, vocab, (1, n_codes), generator=torch.Generator().manual_seed(seed))
    conditioning = entry["cond"].float().to(device)
    reference_mel = entry["ref_mel"].float().to(device)
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        start = time.perf_counter()
        wav = model(code.to(device), conditioning=conditioning, reference_mel=reference_mel, num_steps=num_steps)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # GPU work is queued: wait for it before reading the clock
        seconds = time.perf_counter() - start
    audio = wav.reshape(-1).float().cpu().numpy().astype(np.float32)
    return Waveform(audio=audio, sample_rate=SAMPLE_RATE, random_weights=weights_are_random(snapshot),
                    speaker=speaker, n_codes=int(code.shape[-1]), num_steps=num_steps, seconds=seconds,
                    device=str(device))


def plot_waveform(wave: Waveform):  # -> Figure
    """The clip against time (seconds), labelled with its speaker and whether the weights are random."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 2.6), layout="constrained")
    ax = fig.subplots()
    t = np.arange(len(wave.audio)) / wave.sample_rate
    ax.plot(t, wave.audio, lw=0.5, label=f"speaker {wave.speaker}")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("amplitude")
    ax.set_xlim(0, max(wave.duration, 1 / wave.sample_rate))
    ax.set_title(f"Token2Wav output: {clip_length(wave.duration)} at {wave.sample_rate:,} Hz"
                 + (" (random weights: noise)" if wave.random_weights else ""))
    ax.legend(loc="upper right")
    ax.grid(True, alpha=0.3)
    return fig


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
