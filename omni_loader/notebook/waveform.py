"""From codec tokens to a waveform: a Token2Wav load and one forward pass, as notebook 04 runs them.

Why apart from the structure tables of :mod:`~omni_loader.notebook.explore`: those study the module tree on
the meta device; this loads real tensors (1.8 GB for the full model), runs the DiT and the
vocoder, and writes audio. What it returns says whether the sound can mean anything: a synthetic
snapshot (``Snapshot.synthetic``) has the released shapes but random weights, so its clip is noise.
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

from ..formatting import short_duration
from ..token2wav.options import LoadOptions

SAMPLE_RATE = 24_000  # Qwen2.5-Omni's Token2Wav writes 24 kHz audio


def load_model(size: str = "tiny", layout: str = "vllm-omni", checkpoint: str | None = None,
               model_id: str | None = None, device: str = "auto"):
    """``(model, snapshot, load_result)``: the snapshot (``checkpoint``, ``model_id`` in the local
    cache, or the embedded synthetic one of ``size``) loaded with the optimized rule onto ``device``
    (``auto``: the GPU when torch sees one; the forward pass then runs there too)."""
    from ..token2wav.checkpoint import resolve_snapshot
    from ..token2wav.loader import load_token2wav

    snapshot = resolve_snapshot(checkpoint=checkpoint, model_id=model_id, size=size)
    model, result = load_token2wav(snapshot, "optimized", LoadOptions(layout=layout, device=device))
    return model, snapshot, result


def describe_load(snapshot: Any, result: Any) -> str:
    """Two lines: which snapshot was loaded, and what the load cost and found."""
    from ..formatting import count

    seconds = result.phase_seconds()
    return (f"snapshot: {snapshot.root} ({snapshot.source})\n"
            f"load on {result.device}: {short_duration(seconds['total'])} in total, buffer discovery "
            f"{short_duration(seconds['buffer_discovery'])}, {count(result.state_dict_calls)} state_dict() calls, "
            f"{count(result.weights_loaded)} weights loaded, persistent buffers: "
            f"{', '.join(result.persistent_buffers) or '(none)'}")


def clip_length(seconds: float) -> str:
    """How long a clip plays, as its player shows it: ``2.00 s``; a clip under a second in ms."""
    return f"{seconds:,.2f} s" if seconds >= 1 else short_duration(seconds)


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
    device: str = "cpu"

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate

    def describe(self) -> str:
        """Length, source and cost of the clip (whether the weights are random is :meth:`note`)."""
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


def dit_evaluations(num_steps: int) -> int:
    """How many times the DiT runs for ``num_steps`` ODE steps: transformers' sampler integrates over
    ``num_steps`` time points (``num_steps - 1`` intervals) with a Runge-Kutta 4 solver, four evaluations
    an interval. The progress bar's total; the bar counts the real calls, so a sampler that changed
    would show in the bar's last line."""
    return 4 * max(num_steps - 1, 0)


@contextlib.contextmanager
def _forward_progress(model: nn.Module, enabled: bool, total: int | None = None) -> Iterator[None]:
    """A bar that counts the DiT's evaluations (forward hooks) and names the vocoder when it starts."""
    from ..progress import progress_bar

    bar = progress_bar(total=total, desc="forward pass", unit=" DiT evaluation", enabled=enabled)  # "6.70s/ DiT evaluation"

    def counted(*_: Any) -> None:  # a hook that returned a value would replace the module's output
        bar.update(1)

    def vocoder(*_: Any) -> None:
        bar.set_postfix_str("BigVGAN: mel spectrogram to waveform")

    hooks = [model.code2wav_dit_model.register_forward_hook(counted),
             model.code2wav_bigvgan_model.register_forward_pre_hook(vocoder)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        bar.close()


def synthesize_waveform(
    model: nn.Module,
    snapshot: Any,
    n_codes: int = 50,
    num_steps: int = 4,
    speaker: str | None = None,
    seed: int = 0,
    code: torch.Tensor | None = None,
    progress: bool = True,
) -> Waveform:
    """Codec tokens -> mel (DiT, ``num_steps`` ODE steps) -> waveform (BigVGAN), as the stage does.

    Conditioning vector and reference mel come from the snapshot's ``spk_dict.pt``. Without
    ``code``, ``n_codes`` tokens are drawn from ``seed``; the DiT's initial noise is drawn from
    ``seed`` too, without disturbing the global RNG. ``progress`` counts the DiT's evaluations as
    they happen and says when the vocoder runs: on a 2-core CPU the full model's forward pass takes
    minutes, which a silent cell made look hung.
    """
    import numpy as np

    from ..token2wav.steps import load_speaker_dict

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
    with torch.random.fork_rng(devices=[]), torch.inference_mode(), _forward_progress(model, progress, dit_evaluations(num_steps)):
        torch.manual_seed(seed)
        start = time.perf_counter()
        wav = model(code.to(device), conditioning=conditioning, reference_mel=reference_mel, num_steps=num_steps)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # GPU work is queued: wait for it before reading the clock
        seconds = time.perf_counter() - start
    audio = wav.reshape(-1).float().cpu().numpy().astype(np.float32)
    return Waveform(audio=audio, sample_rate=SAMPLE_RATE, random_weights=snapshot.synthetic is not None,
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
    # the speaker in the title, not a legend: a clip fills its axes, and a legend box would sit on the trace
    ax.set_title(f"Token2Wav output, speaker {wave.speaker}: {clip_length(wave.duration)} at {wave.sample_rate:,} Hz"
                 + (" (random weights: noise)" if wave.random_weights else ""))
    ax.grid(True, alpha=0.3)
    return fig
