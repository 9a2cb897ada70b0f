"""``LoadOptions``: how one Token2Wav load is set up, as one frozen value.

Why one value: the module tree, device, dtype and construction mode used to travel as four loose
arguments through some fifteen signatures (CLI → runner → worker → loader, and the profilers and
the stage server beside them). Now the command layer or a notebook builds a ``LoadOptions`` once,
checks it here (one line naming the option that is wrong), and hands it down unchanged; the
benchmark spec embeds it, so ``metadata.json`` records exactly what every load was told.
This module imports no torch: a spec can be read and compared without it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import check_choice
from ..names import CONSTRUCT_MODES, DTYPE_NAMES, LAYOUTS, LEGACY_CONSTRUCT_MODES, READ_STRATEGIES


@dataclass(frozen=True)
class LoadOptions:
    """What a load is told: the module tree, the device, the stage dtype, where parameters are first written.

    ``device`` is ``auto`` (the GPU torch sees, else the CPU), ``cpu``, ``cuda``, ``cuda:N`` or
    ``meta``; a benchmark resolves ``auto`` once (:meth:`resolved`) so that its records name the
    device used. ``construct`` is ``upstream`` (parameters resident before weight loading, as
    vLLM-Omni's constructors leave them; the fused ``qkv_proj`` left empty), ``empty`` or ``init``.
    """

    layout: str = "vllm-omni"
    device: str = "auto"
    dtype: str = "float32"
    construct: str = "resident"
    read: str = "lazy"  # how shards are read: vLLM's --safetensors-load-strategy (names.READ_STRATEGIES)

    def __post_init__(self) -> None:
        object.__setattr__(self, "construct", LEGACY_CONSTRUCT_MODES.get(self.construct, self.construct))
        for option, value, allowed in (("--layout", self.layout, LAYOUTS), ("--dtype", self.dtype, DTYPE_NAMES),
                                       ("--construct", self.construct, CONSTRUCT_MODES),
                                       ("--read", self.read, READ_STRATEGIES)):
            check_choice(option, value, allowed)
        object.__setattr__(self, "device", str(self.device))

    def replace(self, **changes: Any) -> LoadOptions:
        """A copy with ``changes`` applied (``None`` values are ignored: "not given")."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def resolved(self) -> LoadOptions:
        """The same options with ``device`` resolved (``auto`` → ``cpu`` or ``cuda``); fails fast on a bad device."""
        from ..host.devices import resolve_device  # imports torch: only when a device must be known

        return self.replace(device=str(resolve_device(self.device)))

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def argv(self) -> list[str]:
        """The options as the command line spells them (``--layout vllm-omni --device cpu ...``): each field
        is the option of its name, so a command that starts another load (a stage server) passes them all."""
        return [part for name, value in asdict(self).items() for part in (f"--{name}", str(value))]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadOptions:
        """The options saved by :meth:`to_dict` (or the same keys among a flat spec's); unknown keys ignored."""
        return cls(**{k: data[k] for k in (f.name for f in fields(cls)) if k in data})
