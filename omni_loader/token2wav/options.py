"""``LoadOptions``: how one Token2Wav load is set up, as one frozen value; and how a spec's fields are options.

Why one value: the command layer or a notebook builds a ``LoadOptions`` once, checks it here (one line naming
the wrong option) and hands it down unchanged through CLI → runner → worker → loader; the benchmark spec
embeds it, so ``metadata.json`` records exactly what every load was told.

Why the field helpers live here too: each field of ``LoadOptions``, ``BenchmarkSpec`` and ``StartupSpec`` is
declared with :func:`option`, and everything that lists options (the parser, a report's shell command, the
stage server's argv, ``--resume``'s conflict check, compare) walks :func:`option_fields`: a list kept by hand
once dropped ``--read``. This module imports no torch: a spec can be read and compared without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields, replace
from typing import Any

from ..errors import check_choice
from ..names import CONSTRUCT_MODES, DTYPE_NAMES, LAYOUTS, LEGACY_CONSTRUCT_MODES, READ_STRATEGIES, SIZES

NOTED = "noted"  # option(compared=NOTED): a difference compare explains in a note of its own


def option(default: Any = MISSING, *, default_factory: Any = MISSING, flag: str | None = None, help: str = "",
           choices: tuple[str, ...] | None = None, spell: Callable[[Any], str] | None = None,
           shell: Callable[[Any], list[str]] | None = None, same: Callable[[Any, Any], bool] | None = None,
           nested: type | None = None, compared: bool | str | None = None, column: str | None = None) -> Any:
    """A dataclass field that is an option: ``flag`` (default ``--<name>``), ``help``, ``choices``; ``spell``
    (value -> its argument, default :func:`spelled`), ``shell`` (value -> its words, default :func:`shell_words`),
    ``same`` (when two values are the same setting), ``nested`` (a dataclass whose fields stand in this one's
    place). ``compared``: what ``compare`` makes of two reproductions that differ in it (``True``: a mismatch;
    ``NOTED``: a difference it explains; ``False``: may differ, as runs or seeds); ``column``: its table title."""
    meta = {"flag": flag, "help": help, "choices": choices, "spell": spell, "shell": shell, "same": same,
            "nested": nested, "compared": compared, "column": column}
    return field(default=default, default_factory=default_factory,
                 metadata={k: v for k, v in meta.items() if v is not None and v != ""})


def option_fields(cls: Any) -> dict[str, Field]:
    """Every option of the dataclass ``cls`` (or of an instance's class) by its flat name, in declaration order:
    a nested dataclass's fields (``load``'s ``layout``, ``read``...) in the place of the field that holds it."""
    found: dict[str, Field] = {}
    for f in fields(cls):
        if f.metadata.get("nested"):
            found.update(option_fields(f.metadata["nested"]))
        else:
            found[f.name] = f
    return found


def flag(f: Field) -> str:
    """The option that sets field ``f``: ``--order-seed`` for ``seed``, ``--worker-timeout`` for ``worker_timeout``."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def dest(f: Field) -> str:
    """The dest (the parsed attribute) of :func:`flag` (``--order-seed`` -> ``order_seed``)."""
    return flag(f).lstrip("-").replace("-", "_")


def spelled(f: Field, value: Any) -> str:
    """``value`` as the option's argument spells it (``0,2`` for CPUs (0, 2)); ``none`` for no value."""
    if f.metadata.get("spell"):
        return f.metadata["spell"](value)
    if value is None:
        return "none"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "none"
    return str(value)


def shell_words(f: Field, value: Any) -> list[str]:
    """The words that set field ``f`` to ``value`` on a command line (none when absent or off)."""
    if f.metadata.get("shell"):
        return list(f.metadata["shell"](value))
    if value is None or value is False:
        return []
    return [flag(f)] if value is True else [flag(f), spelled(f, value)]


def command_words(cls: Any, values: Mapping[str, Any]) -> list[str]:
    """Every option of ``cls`` that ``values`` (flat name -> value) holds, as a command line spells it."""
    return [w for name, f in option_fields(cls).items() if name in values for w in shell_words(f, values[name])]


def same_setting(f: Field | None, value: Any, old: Any) -> bool:
    """Equal as settings: lists and tuples alike, dicts by content, or as the field's ``same`` says."""
    if f is not None and f.metadata.get("same"):
        return f.metadata["same"](value, old)

    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(norm(x) for x in v)
        if isinstance(v, Mapping):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        return v

    return norm(value) == norm(old)


def option_conflicts(cls: Any, saved: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """One phrase per setting of ``given`` that differs from ``saved`` (flat name -> value, options of ``cls``),
    named by its option: ``--runs 6 (saved: 5)``, ``--aa (saved: off)``; settings absent from ``given`` are not
    compared."""
    known = option_fields(cls)
    lines = []
    for name, value in given.items():
        f, old = known.get(name), saved.get(name)
        if same_setting(f, value, old):
            continue
        option_name = flag(f) if f is not None else name
        if isinstance(value, bool) or isinstance(old, bool):
            lines.append(f"{option_name} (saved: off)" if value else f"no {option_name} (saved: on)")
        elif f is None:
            lines.append(f"{option_name} {value} (saved: {old})")
        else:
            lines.append(f"{option_name} {spelled(f, value)} (saved: {spelled(f, old)})")
    return lines


# The dtype vLLM-Omni 0.30.0's code2wav stage builds each Token2Wav half in (token2wav.model says why): the
# vllm-omni layout's, whatever the stage dtype; the transformers layout builds both halves in the stage dtype.
VLLM_OMNI_HALF_DTYPES = {"code2wav_dit_model": "float32", "code2wav_bigvgan_model": "bfloat16"}
HALF_NAMES = {"code2wav_dit_model": "DiT", "code2wav_bigvgan_model": "BigVGAN"}


def half_dtypes(layout: str, dtype: str) -> dict[str, str]:
    """The dtype of each Token2Wav half's parameters that a load of ``layout`` under stage dtype ``dtype`` builds
    (what ``LoadResult.parameter_dtypes`` then reports), without torch: a report can say it of a saved record."""
    return dict(VLLM_OMNI_HALF_DTYPES) if layout == "vllm-omni" else dict.fromkeys(VLLM_OMNI_HALF_DTYPES, dtype)


@dataclass(frozen=True)
class LoadOptions:
    """What a load is told, each field the option of its name (``--layout`` sets ``layout``); a benchmark resolves
    ``device`` ``auto`` once (:meth:`resolved`) so that its records name the device used."""

    layout: str = option("vllm-omni", choices=LAYOUTS, help="module tree to build (default vllm-omni)",
                         compared=NOTED, column="Layout")
    device: str = option("auto", compared=False, help="auto (default: the GPU when torch sees one, else the CPU), "
                                                      "cpu, cuda or cuda:N (ROCm GPUs are cuda)")
    dtype: str = option("float32", choices=DTYPE_NAMES, compared=NOTED,
                        help="stage dtype (default float32): every parameter's in the transformers layout; the "
                             "vllm-omni layout builds each half in vLLM-Omni's (DiT float32, BigVGAN bfloat16)")
    construct: str = option("resident", choices=CONSTRUCT_MODES, compared=True, column="Construction",
                            same=lambda a, b: LEGACY_CONSTRUCT_MODES.get(a, a) == LEGACY_CONSTRUCT_MODES.get(b, b),
                            help="where parameter memory is first written: resident (default: every parameter at "
                                 "construction, as GPU memory is resident when the allocator hands it out), "
                                 "upstream-cpu (as vLLM-Omni's constructors do on a CPU: fused qkv_proj left empty), "
                                 "empty (nothing written: first touches land in load_parameters) or init (full "
                                 "random init)")
    read: str = option("lazy", choices=READ_STRATEGIES, compared=True,
                       help="how the shards are read, as vLLM's --safetensors-load-strategy: lazy (default: "
                            "memory-mapped, each tensor read on first use) or eager (each shard read whole into "
                            "memory first)")
    cache: str = option("warm", choices=("warm", "cold"), compared=NOTED, column="Page cache",
                        help="the checkpoint's page-cache condition before each load: warm (default, the PR's: "
                             "left as it is, its residency measured and a run that finds it not resident named) "
                             "or cold (its pages evicted before each run of a benchmark, so each load reads from "
                             "storage)")

    def __post_init__(self) -> None:
        object.__setattr__(self, "construct", LEGACY_CONSTRUCT_MODES.get(self.construct, self.construct))
        for f in fields(self):
            if f.metadata.get("choices"):
                check_choice(flag(f), getattr(self, f.name), f.metadata["choices"])
        object.__setattr__(self, "device", str(self.device))

    def replace(self, **changes: Any) -> LoadOptions:
        """A copy with ``changes`` applied (``None`` values are ignored: "not given")."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def resolved(self) -> LoadOptions:
        """The same options with ``device`` resolved (``auto`` → ``cpu`` or ``cuda``); fails fast on a bad device."""
        from ..host.devices import resolve_device  # imports torch: only when a device must be known

        return self.replace(device=str(resolve_device(self.device)))

    def to_dict(self) -> dict[str, str]:
        """The options as ``metadata.json`` records them (a benchmark spec's ``load``)."""
        return asdict(self)

    def argv(self) -> list[str]:
        """The options as the command line spells them (``--layout vllm-omni --device cpu ...``), every field
        (:func:`command_words`), so a command that starts another load (a stage server) passes them all."""
        return command_words(type(self), self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadOptions:
        """The options saved by :meth:`to_dict` (or the same keys among a flat spec's); unknown keys ignored."""
        return cls(**{k: data[k] for k in option_fields(cls) if k in data})


@dataclass(frozen=True)
class CheckpointOptions:
    """Which snapshot a command loads (a directory, a model id in the Hugging Face cache, or the synthetic one of
    ``size`` and ``seed``), one option per field, :func:`~.checkpoint.resolve_snapshot`'s keywords. A choice, not a
    snapshot: a stage server resolves it after binding its port, a time ``/health`` must already cover."""

    checkpoint: str | None = option(None, help="a snapshot directory in the Hub layout")
    model_id: str | None = option(None, flag="--model",
                                  help="a model id resolved in the local Hugging Face cache, offline")
    size: str = option("full", choices=SIZES, help="synthetic snapshot size (default full)")
    seed: int = option(0, help="synthetic snapshot seed (default 0)")
    cache_dir: str | None = option(None, flag="--hf-cache", help="Hugging Face cache directory for --model")
    download: bool = option(False, help="allow --model to download the Token2Wav shards")
