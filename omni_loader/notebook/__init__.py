"""What the notebooks need beyond the rest of the kit: notebook files, the module-tree tables, a waveform.

:mod:`~.files` (executing notebooks, trust, the pre-save hook that keeps outputs out of stored
notebooks), :mod:`~.explore` (tables and figures of the module tree for notebook 04) and
:mod:`~.waveform` (a load and a forward pass).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "results_dir": "files",
    "execute": "files",
    "pre_save_hook": "files",
    "strip_outputs": "files",
})
