"""Notebook 04's tables: the layouts compared through model.inventory, and the modules on which the rules disagree."""

from __future__ import annotations

import re

import pytest

from omni_loader.notebook import explore
from omni_loader.token2wav.model import inventory


@pytest.fixture(scope="module")
def layouts():
    return explore.tree("tiny").compare_layouts().set_index("count")


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
    line = explore.tree("tiny").describe()
    assert line.startswith("Token2Wav (tiny, vllm-omni layout): ")
    assert "51 named buffers (1 persistent), 186 parameter tensors" in line


def test_hazard_examples_disagree_where_a_module_rewrites_its_state_dict() -> None:
    table = explore.hazards().table().set_index("case")
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
                 "tree": kit.tree("tiny", layout="vllm-omni")}
    cells = [c.source for c in nbformat.read(NOTEBOOK_DIR / "04_explore_token2wav.ipynb", as_version=4).cells
             if c.cell_type == "code" and c.source.splitlines()[-1].startswith("kit.table(")]
    cells += [c.source for c in nbformat.read(NOTEBOOK_DIR / "03_module_traversal_costs.ipynb", as_version=4).cells
              if c.cell_type == "code" and "kit.hazards().table()" in c.source]
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
    whole, top = explore.Tree(tree).class_by_depth(), explore.Tree(tree).class_by_depth(top=3)
    classes = whole.iloc[:-1]
    assert list(whole.columns[:2]) == ["class", "depth 0"] and whole.columns[-1] == "total"
    assert whole.iloc[-1]["class"] == f"all {len(classes)} classes" == top.iloc[-1]["class"]
    assert whole.iloc[-1]["total"] == classes["total"].sum() == len(list(tree.modules())) == top.iloc[-1]["total"]
    assert list(classes["total"]) == sorted(classes["total"], reverse=True)
    assert list(top["class"][:-1]) == list(classes["class"][:3]) and len(top) == 4


# --------------------------------------------------------------------------- the forward pass (kit.load_model)


@pytest.fixture(scope="module")
def tiny_model(tiny_snapshot):
    from omni_loader.token2wav.checkpoint import open_snapshot
    from omni_loader.token2wav.loader import load_token2wav

    snapshot = open_snapshot(tiny_snapshot)
    model, result = load_token2wav(snapshot, "optimized")
    return model, snapshot, result


def test_describe_load_puts_each_path_and_buffer_name_on_a_line_of_its_own(tiny_model) -> None:
    """A narrow output area (JupyterLab's) broke the one long line inside a name: 'code2wa' / 'v_dit_model...'."""
    from omni_loader.notebook import waveform

    model, snapshot, result = tiny_model
    lines = waveform.LoadedModel(model, snapshot, result).describe().splitlines()
    assert f"    {snapshot.root}" in lines and "    code2wav_dit_model.rotary_embed.inv_freq" in lines
    assert "persistent buffers (1):" in lines
    assert all(len(line) <= 100 for line in lines if not line.startswith("    ")), lines


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_a_cpu_forward_pass_runs_a_float32_copy_of_the_vocoder_and_leaves_the_model_as_loaded(tiny_model) -> None:
    """vLLM-Omni's BigVGAN is bfloat16; on a CPU, where a bfloat16 convolution took 60 times as long, 04 ran 9
    minutes. The float32 copy computes with the same weights; the model keeps its tensors, hooks and vocoder."""
    import numpy as np
    import torch

    from omni_loader.notebook import waveform

    model, snapshot, _ = tiny_model
    own = model.code2wav_bigvgan_model
    loaded = {k: v.clone() for k, v in own.state_dict().items()}
    hooks = [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in own.modules()]
    run = {dtype: waveform.synthesize_waveform(model, snapshot, n_codes=8, num_steps=2, progress=False,
                                               vocoder_dtype=dtype) for dtype in ("float32", "loaded")}
    assert model.code2wav_bigvgan_model is own
    assert [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in own.modules()] == hooks
    now = own.state_dict()
    assert all(now[k].dtype == v.dtype == torch.bfloat16 and torch.equal(now[k], v) for k, v in loaded.items()
               if v.is_floating_point() and k.endswith("weight"))
    single, half = run["float32"], run["loaded"]
    assert (single.vocoder.loaded, single.vocoder.run, half.vocoder.run) == ("bfloat16", "float32", "bfloat16")
    # the same weights at another precision: the clips agree to bfloat16's precision, and are not the same numbers
    assert np.abs(single.audio - half.audio).max() <= 0.05 * np.abs(half.audio).max() + 1e-3
    assert not np.array_equal(single.audio, half.audio)
    assert "ran a float32 copy" in single.note() and "ran a float32 copy" not in half.note()
    assert "forward pass" in single.describe().splitlines()[1] and "BigVGAN" in single.describe()


def test_auto_runs_the_copy_only_where_the_probe_finds_bfloat16_slow(tiny_model, monkeypatch) -> None:
    import torch

    from omni_loader.notebook import waveform

    model, _, _ = tiny_model
    for half, single, expected in ((1.0, 0.1, "float32"), (0.12, 0.1, "bfloat16")):
        monkeypatch.setattr(waveform, "conv_seconds", lambda dtype, h=half, s=single: h if dtype != torch.float32 else s)
        vocoder, precision = waveform.vocoder_for_run(model, torch.device("cpu"))
        assert precision.run == expected and (vocoder is model.code2wav_bigvgan_model) == (expected == "bfloat16")
        assert precision.probe == (half, single)
    forced = waveform.vocoder_for_run(model, torch.device("cpu"), "float32")[1]
    assert forced.probe is None and 'as asked (`vocoder_dtype="float32"`)' in forced.sentence()
    monkeypatch.setattr(waveform, "conv_seconds", lambda dtype: 1.0 if dtype != torch.float32 else 0.1)
    slow = waveform.vocoder_for_run(model, torch.device("cpu"))[1].sentence()
    assert ("on this CPU bfloat16 convolutions are slow (a `Conv1d(128, 128, 7)` over 1,200 samples took 1,000\u00a0ms in "
            "bfloat16 against 100\u00a0ms in float32, 10× as long)") in slow
    gpu_vocoder, gpu = waveform.vocoder_for_run(model, torch.device("cuda"))
    assert gpu.probe is None and gpu.run == "bfloat16" and gpu_vocoder is model.code2wav_bigvgan_model


def test_the_forward_bar_counts_the_dit_and_the_vocoder_and_names_the_step(tiny_model, monkeypatch, capsys) -> None:
    """The bar stood at 12/12 for 9 minutes while BigVGAN ran, its unit read '1.26s/ DiT evaluation'."""
    import re

    from omni_loader.notebook import waveform

    model, snapshot, _ = tiny_model
    monkeypatch.setenv("OMNI_LOADER_PROGRESS", "lines")
    waveform.synthesize_waveform(model, snapshot, n_codes=8, num_steps=2, vocoder_dtype="float32")
    lines = capsys.readouterr().err.strip().splitlines()
    steps = waveform.dit_evaluations(2) + len(model.code2wav_bigvgan_model.resblocks)
    assert re.match(rf"forward pass: {steps}/{steps} \|#+\| \d\d:\d\d elapsed, \d\d:\d\d left, ", lines[-1]), lines
    # the last words short (a long one squeezed Lab's bar to 25 px); the running block's stage is named while it
    # runs (tests/test_fidelity.py follows it step by step)
    assert lines[-1].endswith(f"all {len(model.code2wav_bigvgan_model.resblocks)} residual blocks done"), lines


def test_the_forward_bar_redraws_while_a_step_runs(monkeypatch) -> None:
    """Its elapsed time keeps counting through a long step (it stood at 00:16 while BigVGAN ran for minutes)."""
    import io
    import threading

    from torch import nn
    from tqdm.std import tqdm

    from omni_loader.notebook import forward_bar

    redrawn = threading.Event()

    class Bar(tqdm):
        def refresh(self, *args, **kwargs):
            redrawn.set()
            return super().refresh(*args, **kwargs)

    monkeypatch.setattr("omni_loader.progress.progress_bar",
                        lambda enabled, **kwargs: Bar(file=io.StringIO(), **kwargs))
    vocoder = nn.Module()
    vocoder.resblocks = nn.ModuleList([nn.Identity(), nn.Identity()])
    with forward_bar.forward_progress(nn.Identity(), vocoder, True, 4, tick=0.01):
        redrawn.clear()  # tqdm draws once when it starts
        assert redrawn.wait(timeout=20), "no redraw while a step ran"


def test_the_forward_bars_first_estimates_are_not_a_floor_priced_by_a_slow_first_evaluation(monkeypatch) -> None:
    """04's bar said "at least 00:30 left" after a first DiT evaluation that paid the first call's one-off costs: the
    evaluations left priced at it, the vocoder left out, a floor that was no floor. On a fake clock (a first
    evaluation of 10 s, then 1 s each, blocks 0.5 s): never "at least"; once a second evaluation has ended, the first
    prices none, and the time left is the true one but for the vocoder's prior."""
    import io

    import torch
    import tqdm.std
    from torch import nn

    from omni_loader.notebook import forward_bar

    now, made, seen = [0.0], [], []
    monkeypatch.setattr("omni_loader.progress.progress_bar",
                        lambda enabled, **kwargs: made.append(tqdm.std.tqdm(file=io.StringIO(), **kwargs)) or made[-1])

    class Takes(nn.Module):
        def __init__(self, *seconds: float) -> None:
            super().__init__()
            self.seconds = list(seconds)

        def forward(self, x):
            seen.append(made[0].postfix)
            now[0] += self.seconds.pop(0) if len(self.seconds) > 1 else self.seconds[0]
            return x

    vocoder = nn.Module()
    vocoder.resblocks = nn.ModuleList([Takes(0.5) for _ in range(4)])
    vocoder.forward = lambda x: [block(x) for block in vocoder.resblocks][-1]
    dit = Takes(10.0, 1.0)
    with forward_bar.forward_progress(dit, vocoder, True, 4, tick=0, clock=lambda: now[0]):
        for _ in range(4):
            dit(torch.zeros(1))
        vocoder(torch.zeros(1))
    assert not any("at least" in text for text in seen), seen
    # the third evaluation runs: the pace of 10 s and 1 s is 5.5 s (the slow first one is a sample, capped at twice
    # the median, not the price of all): itself, the fourth, and the 4 blocks at 0.4 × 5.5 s
    assert seen[2].startswith("00:20 left, DiT evaluation 3 of 4 running"), seen


def test_the_bytes_plots_labels_are_legible_and_inside_the_frame() -> None:
    """04's bytes plot: its share labels were 7 pt ("82.6%" read at about 7 px in Lab); every label is at least
    9 pt and lies inside the axes, the largest bar's too."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = explore.tree("full").plot_parameter_bytes()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    (ax,) = fig.axes
    frame = ax.get_window_extent(canvas.get_renderer())
    assert ax.texts and all(t.get_fontsize() >= 9 for t in ax.texts)
    assert all(t.get_fontsize() >= 9 for t in ax.get_yticklabels())
    for t in ax.texts:
        box = t.get_window_extent(canvas.get_renderer())
        # clear of the frame, not touching it ("82.6%" touched the right edge in the third Lab pass)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 - 4, (t.get_text(), box.x1, frame.x1)
    # the MiB ticks separate thousands as the table does ("1,000", not "1000")
    ticks = [lab.get_text() for lab in ax.get_xticklabels() if lab.get_text()]
    assert any("," in x for x in ticks) and not [x for x in ticks if re.fullmatch(r"\d{4,}", x)], ticks
