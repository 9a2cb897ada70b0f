"""04's forward-pass bar: the DiT's evaluations, then BigVGAN's residual blocks, counted by forward hooks.

Each part's steps are priced at their own pace (:class:`~omni_loader.progress.Countdown`); until a block has
ended, the blocks are priced by a measured prior (:data:`VOCODER_SHARE` of the DiT's time), not left out.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ..progress import BAR_FORMAT, TICK, Countdown, Step, StepBar

DIT, VOCODER = "DiT", "BigVGAN"
# The whole vocoder's time as a share of the DiT's, until a block has ended: 0.26 on a GPU in Lab (DiT 18.7 s,
# BigVGAN 4.94 s), 0.25 to 0.4 on a 2-core CPU; the larger, so that the first estimates do not run low.
VOCODER_SHARE = 0.4


def _synchronized(value: Any) -> None:
    """Wait for a GPU's queued work before reading the clock: the step's time is when it is done, not queued."""
    if isinstance(value, torch.Tensor) and value.is_cuda:
        torch.cuda.synchronize(value.device)


@contextlib.contextmanager
def forward_progress(dit: nn.Module, vocoder: nn.Module, enabled: bool, evaluations: int, tick: float = TICK,
                     clock: Callable[[], float] = time.perf_counter) -> Iterator[dict[str, float]]:
    """A bar over the forward pass's steps, naming the one running; yields a dict that gets the vocoder's start."""
    from ..progress import progress_bar  # looked up when called: a test stands a bar in for it

    blocks = list(getattr(vocoder, "resblocks", [])) or [vocoder]  # the steps counted: its residual blocks, else itself
    # its upsampling convolutions, one a stage (``ups`` is ``[[ConvTranspose1d]]`` in transformers' tree)
    ups = [up[0] if isinstance(up, nn.ModuleList) else up for up in getattr(vocoder, "ups", [])]
    rates = list(getattr(getattr(vocoder, "config", None), "upsample_rates", [])) or ["?"] * len(ups)
    raw = progress_bar(total=evaluations + len(blocks), desc="forward pass", unit="step", enabled=enabled,
                       bar_format=BAR_FORMAT, postfix="? left, starting")
    countdown = Countdown([Step(DIT)] * evaluations + [Step(VOCODER)] * len(blocks), clock,
                          priors={VOCODER: (DIT, VOCODER_SHARE * evaluations / max(len(blocks), 1))})
    bar = StepBar(raw, countdown, tick if enabled else None)
    marks: dict[str, float] = {}
    calls, ended, stage = [0], [0], [""]

    def dit_starts(*_: Any) -> None:  # a hook that returned a value would replace the module's input or output
        calls[0] += 1
        if countdown.running is None and not countdown.done:  # the first step; the others start as one ends
            countdown.begin(Step(DIT))
        bar.say(f"DiT evaluation {calls[0]} of {evaluations} running")

    per_stage = len(blocks) // len(ups) if ups and len(blocks) % len(ups) == 0 else 0

    def stage_words(index: int) -> str:  # the stage a block belongs to (the next block's, as a block ends)
        return f"upsample stage {index + 1}/{len(ups)} (upsamples ×{rates[index]})"

    def block_words() -> str:
        done = ended[0] - min(calls[0], evaluations)
        if not stage[0]:
            return f"{VOCODER}: mel spectrogram to waveform"
        where = stage_words(min(done, len(blocks) - 1) // per_stage) if per_stage else stage[0]
        if done < len(blocks):
            return f"residual block {done + 1} of {len(blocks)} running in {VOCODER} {where}"
        return f"all {len(blocks)} residual blocks done"  # short: a long last text squeezed Lab's bar to 25 px

    def vocoder_starts(_: nn.Module, args: tuple[Any, ...]) -> None:
        _synchronized(args[0] if args else None)  # the DiT's queued work is its time, not the vocoder's
        marks["vocoder"] = time.perf_counter()
        bar.say(block_words())

    def stage_starts(index: int) -> None:
        stage[0] = stage_words(index)
        bar.say(block_words())

    def counted(module: nn.Module, _: Any, output: Any) -> None:
        _synchronized(output)
        ended[0] += 1
        text = f"DiT evaluation {calls[0]} of {evaluations} done" if module is dit else block_words()
        if countdown.remaining:  # the next step starts as this one ends
            bar.begin(countdown.remaining[0], text)
        else:
            bar.end(text)

    hooks = [dit.register_forward_pre_hook(dit_starts), dit.register_forward_hook(counted),
             vocoder.register_forward_pre_hook(vocoder_starts),
             *(block.register_forward_hook(counted) for block in blocks),
             *(up.register_forward_pre_hook(lambda *_, i=i: stage_starts(i)) for i, up in enumerate(ups))]
    try:
        yield marks
    finally:
        for hook in hooks:
            hook.remove()
        bar.close()
