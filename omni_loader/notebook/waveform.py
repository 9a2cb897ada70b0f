"""From codec tokens to a waveform: a Token2Wav load and one forward pass, as notebook 04 runs them.

Real tensors, unlike :mod:`~omni_loader.notebook.explore`'s meta trees; a synthetic snapshot's clip is noise, and
what is returned says so.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..formatting import count, short_duration, time_unit
from ..token2wav.options import VLLM_OMNI_HALF_DTYPES, LoadOptions
from .forward_bar import forward_progress
from .showing import unbroken

SAMPLE_RATE = 24_000  # Qwen2.5-Omni's Token2Wav writes 24 kHz audio


def load_model(size: str = "tiny", layout: str = "vllm-omni", checkpoint: str | None = None,
               device: str = "auto") -> LoadedModel:
    """The snapshot loaded with the optimized rule onto ``device`` (``auto``: the GPU when torch sees one)."""
    from ..token2wav.checkpoint import resolve_snapshot
    from ..token2wav.loader import load_token2wav

    snapshot = resolve_snapshot(checkpoint=checkpoint, size=size)
    model, result = load_token2wav(snapshot, "optimized", LoadOptions(layout=layout, device=device))
    return LoadedModel(model, snapshot, result)


@dataclass(frozen=True)
class LoadedModel:
    """Token2Wav with real tensors, its snapshot and what the load cost: 04's forward pass starts here."""

    model: nn.Module
    snapshot: Any
    result: Any  # the loader's LoadResult

    def describe(self) -> str:
        """The snapshot, what the load cost and the persistent buffers found, each name on its own line."""
        snapshot, result = self.snapshot, self.result
        seconds = result.phase_seconds()
        buffers = result.persistent_buffers
        return "\n".join([
            f"snapshot ({snapshot.source}):", f"    {snapshot.root}",
            f"load on {result.device}: {short_duration(seconds['total'])} in total, buffer discovery "
            f"{short_duration(seconds['buffer_discovery'])}, {count(result.state_dict_calls)} state_dict() calls, "
            f"{count(result.weights_loaded)} weights loaded",
            f"persistent buffers ({count(len(buffers))}):" + ("" if buffers else " (none)"),
            *(f"    {name}" for name in buffers)])

    def synthesize(self, **options: Any) -> Waveform:
        """One forward pass from codec tokens to audio (:func:`synthesize_waveform`)."""
        return synthesize_waveform(self.model, self.snapshot, **options)


def clip_length(seconds: float) -> str:
    """How long a clip plays, as its player shows it: ``2.00 s``; a clip under a second in ms."""
    return f"{seconds:,.2f} s" if seconds >= 1 else short_duration(seconds)


PROBE = (128, 7, 1_200)  # the probe convolution: Conv1d(128, 128, kernel 7) over 1,200 samples, BigVGAN-sized


def conv_seconds(dtype: torch.dtype) -> float:
    """The best of three CPU timings of the :data:`PROBE` convolution in ``dtype``."""
    channels, kernel, samples = PROBE
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(0)
        conv = nn.Conv1d(channels, channels, kernel, padding=kernel // 2).to(dtype)
        x = torch.randn(1, channels, samples).to(dtype)
        conv(x[..., : 4 * kernel])
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            conv(x)
            best = min(best, time.perf_counter() - start)
    return best


@dataclass(frozen=True)
class VocoderPrecision:
    """The dtype BigVGAN is loaded in, the one its forward pass computes in here, and why."""

    loaded: str  # "bfloat16", as torch names it without "torch."
    run: str
    device: str  # "CPU", "GPU"
    probe: tuple[float, float] | None = None  # seconds of the PROBE convolution: (loaded dtype, float32); CPU only
    copy_seconds: float = 0.0  # making the float32 copy, outside the forward pass's time

    def sentence(self) -> str:
        """Markdown: which dtype BigVGAN computed in, and, where it is not the loaded one, why."""
        built = " (as vLLM-Omni builds it)" if self.loaded == VLLM_OMNI_HALF_DTYPES["code2wav_bigvgan_model"] else ""
        measured = ""
        if self.probe is not None:
            (half, single), (channels, kernel, samples) = self.probe, PROBE
            measured = (f"a `Conv1d({channels}, {channels}, {kernel})` over {samples:,} samples took "
                        f"{unbroken(short_duration(half))} in {self.loaded} against "
                        f"{unbroken(short_duration(single))} in float32")
        if self.run == self.loaded:
            why = f": on this {self.device}, {measured}" if measured else ""
            return f"BigVGAN computed in {self.loaded}, the dtype it is loaded in{built}{why}."
        why = (f"on this {self.device} {self.loaded} convolutions are slow ({measured}, {half / single:,.0f}× as "
               "long), so" if measured else 'as asked (`vocoder_dtype="float32"`),')
        return (f"BigVGAN is loaded in {self.loaded}{built}, but {why} this forward pass ran a float32 copy of it "
                f"(made in {unbroken(short_duration(self.copy_seconds))}): the same weights, computed in float32, not "
                f"{self.loaded}. The loaded model keeps its {self.loaded} tensors.")


def vocoder_for_run(model: nn.Module, device: torch.device, dtype: str = "auto") -> tuple[nn.Module, VocoderPrecision]:
    """The BigVGAN a demo forward pass runs: the model's own (``"loaded"``), a float32 copy of a half-dtype one
    (``"float32"``), or (``"auto"``) the copy on a CPU where the :data:`PROBE` convolution is 1.5× slower in half."""
    import copy

    if dtype not in ("auto", "loaded", "float32"):
        raise ValueError(f"vocoder dtype {dtype!r} is not one of 'auto', 'loaded', 'float32'")
    vocoder = model.code2wav_bigvgan_model
    loaded = next(vocoder.parameters()).dtype
    name = str(loaded).removeprefix("torch.")
    half = loaded in (torch.bfloat16, torch.float16)
    where = {"cpu": "CPU", "cuda": "GPU"}.get(device.type, device.type)
    probe = None
    if half and device.type == "cpu" and dtype == "auto":
        probe = (conv_seconds(loaded), conv_seconds(torch.float32))
    if not half or dtype == "loaded" or (dtype == "auto" and (probe is None or probe[0] <= 1.5 * probe[1])):
        return vocoder, VocoderPrecision(loaded=name, run=name, device=where, probe=probe)
    start = time.perf_counter()
    single = copy.deepcopy(vocoder)
    for module in single.modules():
        for hooks in (module._forward_pre_hooks, module._forward_hooks, module._forward_pre_hooks_with_kwargs,
                      module._forward_hooks_with_kwargs, module._forward_hooks_always_called):
            hooks.clear()
    single = single.float()
    return single, VocoderPrecision(loaded=name, run="float32", device=where, probe=probe,
                                    copy_seconds=time.perf_counter() - start)


@dataclass(frozen=True)
class Waveform:
    """What :func:`synthesize_waveform` produced, and whether it can mean anything."""

    audio: Any  # numpy float32, 1-D
    sample_rate: int
    random_weights: bool
    speaker: str
    n_codes: int
    num_steps: int
    seconds: float  # wall time of the forward pass
    device: str
    dit_seconds: float  # the part of ``seconds`` before the vocoder started
    vocoder: VocoderPrecision
    model: str  # which model made it, in words ("tiny Token2Wav")

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate

    def describe(self) -> str:
        """Length, source and cost of the clip, on two lines (whether the weights are random is :meth:`note`)."""
        unit = time_unit(self.seconds)  # the parts in the whole's unit
        return (f"{len(self.audio):,} samples = {clip_length(self.duration)} at {self.sample_rate:,} Hz from "
                f"{self.n_codes:,} codec tokens, speaker {self.speaker}, {self.num_steps} ODE steps, on {self.device}\n"
                f"forward pass {short_duration(self.seconds)}: DiT {short_duration(self.dit_seconds, unit)}, "
                f"BigVGAN {short_duration(self.seconds - self.dit_seconds, unit)} ({self.vocoder.run})")

    def note(self) -> str:
        """Markdown: what the sound can mean, and what BigVGAN computed it in."""
        if self.random_weights:
            text = ("**The weights are random** (a synthetic snapshot: `omni_loader_synthetic` in its config.json). "
                    "The pipeline runs end to end with the released shapes, but what you hear is noise, not speech.")
        else:
            text = "Weights from the checkpoint: with codec tokens from the talker, this is speech."
        return f"{text}\n\n{self.vocoder.sentence()}"

    def plot(self):  # -> Figure
        """The clip against time (seconds), titled with its model, its speaker and whether the weights are random."""
        import numpy as np
        from matplotlib.figure import Figure

        fig = Figure(figsize=(10, 2.6), layout="constrained")
        ax = fig.subplots()
        t = np.arange(len(self.audio)) / self.sample_rate
        ax.plot(t, self.audio, lw=0.5, label=f"speaker {self.speaker}")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("amplitude")
        ax.set_xlim(0, max(self.duration, 1 / self.sample_rate))
        # the speaker in the title, not a legend: a clip fills its axes, and a legend box would sit on the trace
        ax.set_title(f"{self.model} output, speaker {self.speaker}: {clip_length(self.duration)} at "
                     f"{self.sample_rate:,} Hz" + (" (random weights: noise)" if self.random_weights else ""))
        ax.grid(True, alpha=0.3)
        return fig

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


def dit_evaluations(num_steps: int) -> int:
    """How many times the DiT runs for ``num_steps`` ODE steps (RK4: four per interval)."""
    return 4 * max(num_steps - 1, 0)


@contextlib.contextmanager
def _vocoder_swapped(model: nn.Module, vocoder: nn.Module) -> Iterator[None]:
    """``model`` runs ``vocoder`` as its BigVGAN inside the block; its own is back in place after, whatever happened."""
    own = model.code2wav_bigvgan_model
    model.code2wav_bigvgan_model = vocoder
    try:
        yield
    finally:
        model.code2wav_bigvgan_model = own


def synthesize_waveform(
    model: nn.Module,
    snapshot: Any,
    n_codes: int = 50,
    num_steps: int = 4,
    speaker: str | None = None,
    seed: int = 0,
    progress: bool = True,
    vocoder_dtype: str = "auto",
) -> Waveform:
    """Codec tokens -> mel (DiT, ``num_steps`` ODE steps) -> waveform (BigVGAN), as the stage does. The ``n_codes``
    tokens are drawn from ``seed``, as is the DiT's noise (the global RNG untouched); ``vocoder_dtype`` is
    :func:`vocoder_for_run`'s."""
    import numpy as np

    from ..token2wav.steps import load_speaker_dict

    device = next(model.parameters()).device
    speakers = load_speaker_dict(snapshot, torch.device("cpu"))
    speaker = speaker or min(speakers)
    if speaker not in speakers:
        raise ValueError(f"speaker {speaker!r} is not in {snapshot.spk_dict_path} (has {sorted(speakers)})")
    entry = speakers[speaker]
    vocab = int(entry.get("bos_token", model.config.dit_config.num_embeds - 1))
    code = torch.randint(0, vocab, (1, n_codes), generator=torch.Generator().manual_seed(seed))
    conditioning = entry["cond"].float().to(device)
    reference_mel = entry["ref_mel"].float().to(device)
    vocoder, precision = vocoder_for_run(model, device, vocoder_dtype)
    with (torch.random.fork_rng(devices=[]), torch.inference_mode(), _vocoder_swapped(model, vocoder),
          forward_progress(model.code2wav_dit_model, vocoder, progress, dit_evaluations(num_steps)) as marks):
        torch.manual_seed(seed)
        start = time.perf_counter()
        wav = model(code.to(device), conditioning=conditioning, reference_mel=reference_mel, num_steps=num_steps)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # GPU work is queued: wait for it before reading the clock
        seconds = time.perf_counter() - start
    audio = wav.reshape(-1).float().cpu().numpy().astype(np.float32)
    return Waveform(audio=audio, sample_rate=SAMPLE_RATE, random_weights=snapshot.synthetic is not None,
                    speaker=speaker, n_codes=n_codes, num_steps=num_steps, seconds=seconds,
                    device=str(device), dit_seconds=marks["vocoder"] - start, vocoder=precision, model=snapshot.model)

