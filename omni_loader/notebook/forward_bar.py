"""04's forward-pass bar: the DiT's evaluations, then BigVGAN's residual blocks, each part at its own pace.

Why not tqdm's time left (steps left / steps a second): a pass's 30 steps are 12 DiT evaluations and 18 residual
blocks that take far less each, so a bar that priced the blocks at the evaluations' rate said "00:44 left" at 00:06
of a 23 s pass (the Lab pass: DiT 18.7 s, BigVGAN 4.94 s), 2.6 to 5.6 times the time left. Here
(:class:`PartClock`) each step to come is priced at the measured steps of its own part: the DiT's evaluations at
the evaluations so far, the vocoder's blocks at its blocks so far. Until a vocoder block has ended, its blocks are
not priced and the bar says so (``at least 00:08 left``, the kit's words for a bar with steps it cannot price yet),
rather than guess them from the DiT. Why not a guess from the model's arithmetic: multiply-accumulates (parameters
times positions) price the full vocoder at a tenth of the DiT, and its blocks at halving costs stage after stage;
measured on a 2-core CPU, the vocoder took 40% of the DiT's time and its 18 blocks 0.6 to 2.1 s each with no such
trend (its anti-aliasing moves memory more than it multiplies), so that guess was a fifth of the truth there.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

DIT, VOCODER = "DiT", "BigVGAN"


def vocoder_steps(vocoder: nn.Module) -> list[nn.Module]:
    """The modules whose ends the progress bar counts in the vocoder: BigVGAN's residual blocks (3 an
    upsample stage, 18 in the full model), the vocoder itself for one without them."""
    return list(getattr(vocoder, "resblocks", [])) or [vocoder]


def upsample_layers(vocoder: nn.Module) -> list[nn.Module]:
    """BigVGAN's upsampling convolutions, one a stage (``ups`` is ``[[ConvTranspose1d]]`` in transformers' tree)."""
    return [up[0] if isinstance(up, nn.ModuleList) else up for up in getattr(vocoder, "ups", [])]


class PartClock:
    """The time left of a run of steps, each of a part (``"DiT"``, ``"BigVGAN"``), whose ends are timed
    (:meth:`ended`): each step to come at the mean seconds of the ended steps of its part; a part none of whose steps
    has ended is not priced (the time left is then a lower bound). ``clock``: a seconds counter (a fake one in the
    tests)."""

    def __init__(self, parts: Sequence[str], clock: Callable[[], float] = time.perf_counter) -> None:
        self.parts, self.clock, self.ends = list(parts), clock, []
        self.began: float | None = None

    def start(self) -> None:
        """The first step starts now (a second call changes nothing)."""
        if self.began is None:
            self.began = self.clock()

    def ended(self) -> None:
        """The step that ran has ended now."""
        if self.began is not None:
            self.ends.append(self.clock())

    def step_seconds(self, part: str) -> float | None:
        """The mean seconds of ``part``'s ended steps (a step from the previous step's end to its own); None
        before one has ended."""
        starts = [self.began, *self.ends]
        timed = [end - start for kind, start, end in zip(self.parts, starts, self.ends) if kind == part]
        return sum(timed) / len(timed) if timed else None

    def left(self) -> tuple[float, int] | None:
        """``(seconds, steps not priced)`` for the steps to come, the running one less its time so far (once it is
        overdue, the steps after it: :func:`~omni_loader.progress.counted_down`); None before a step has ended (nothing
        to price by)."""
        from ..progress import counted_down

        if self.began is None or not self.ends:
            return None
        coming = self.parts[len(self.ends):]
        price = {part: self.step_seconds(part) for part in set(coming)}
        seconds = [price[part] or 0.0 for part in coming]
        left = counted_down(sum(seconds), self.clock() - self.ends[-1], sum(seconds[1:])) if coming else 0.0
        return left, sum(price[part] is None for part in coming)

    def words(self) -> str:
        """The time left as the kit's bars say it: ``00:17 left``; ``at least 00:08 left`` while a part to come has
        no ended step (the vocoder's blocks during the DiT); ``? left`` before a step has ended, or when only such
        steps are left (:func:`~omni_loader.progress.left_words`)."""
        from ..progress import left_words

        left = self.left()
        return left_words(None) if left is None else left_words(left[0], at_least=bool(left[1]))


class ForwardBar:
    """A progress bar whose postfix is the :class:`PartClock`'s time left, then the step now; redrawn every ``tick``
    seconds by the kit's :class:`~omni_loader.progress.Redrawer` (its elapsed time and time left move through a
    long step)."""

    def __init__(self, bar: Any, clock: PartClock, tick: float | None = 1.0) -> None:
        from ..progress import Redrawer

        self.bar, self.clock, self.text, self.lock = bar, clock, "starting", threading.RLock()
        self.redrawer = Redrawer(self, tick) if tick else None

    @property
    def disable(self) -> bool:
        return bool(getattr(self.bar, "disable", True))

    def say(self, text: str | None = None, refresh: bool = True) -> None:
        with self.lock:
            self.text = self.text if text is None else text
            self.bar.set_postfix_str(f"{self.clock.words()}, {self.text}", refresh=refresh)

    def refresh(self) -> None:
        self.say()

    def close(self) -> None:
        if self.redrawer is not None:
            self.redrawer.close()
        self.say(refresh=False)
        self.bar.close()


def _synchronized(value: Any) -> None:
    """Wait for a GPU's queued work before reading the clock: the step's time is when it is done, not queued."""
    if isinstance(value, torch.Tensor) and value.is_cuda:
        torch.cuda.synchronize(value.device)


@contextlib.contextmanager
def forward_progress(dit: nn.Module, vocoder: nn.Module, enabled: bool, evaluations: int, tick: float = 1.0,
                     clock: Callable[[], float] = time.perf_counter) -> Iterator[dict[str, float]]:
    """A bar over the whole forward pass, in steps: the DiT's evaluations, then BigVGAN's residual blocks (forward
    hooks count both), its count the steps done and its postfix the time left (:class:`PartClock`, each part at its
    own pace) and the step running now, in words that say so ("DiT evaluation 8 of 12 running" beside "7/30").
    Yields a dict that gets ``"vocoder"``: the clock when the vocoder started."""
    from ..profiling.time_left import BAR_FORMAT
    from ..progress import progress_bar, rate_from_now

    blocks, ups = vocoder_steps(vocoder), upsample_layers(vocoder)
    rates = list(getattr(getattr(vocoder, "config", None), "upsample_rates", [])) or ["?"] * len(ups)
    raw = progress_bar(total=evaluations + len(blocks), desc="forward pass", unit="step", enabled=enabled,
                       bar_format=BAR_FORMAT, postfix="? left, starting")
    parts = PartClock([DIT] * evaluations + [VOCODER] * len(blocks), clock)
    bar = ForwardBar(raw, parts, tick if enabled else None)
    marks: dict[str, float] = {}
    calls, ended, stage = [0], [0], [""]

    def dit_starts(*_: Any) -> None:  # a hook that returned a value would replace the module's input or output
        parts.start()
        calls[0] += 1
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
        parts.start()
        rate_from_now(raw, forget=True)  # tqdm's own rate (not shown) restarts too
        bar.say(block_words())

    def stage_starts(index: int) -> None:
        stage[0] = stage_words(index)
        bar.say(block_words())

    def counted(module: nn.Module, _: Any, output: Any) -> None:
        _synchronized(output)
        parts.ended()
        ended[0] += 1
        with bar.lock:
            if module is dit:
                bar.say(f"DiT evaluation {calls[0]} of {evaluations} done", refresh=False)
            else:
                bar.say(block_words(), refresh=False)
            raw.update(1)

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
