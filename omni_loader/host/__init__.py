"""The machine a load runs on, and the clock that times it: :mod:`~.devices` (device choice, memory peaks),
:mod:`~.machine` (VM, free page reporting, THP, governor, and what the machine did during the runs),
:mod:`~.placement` (threads and CPUs), :mod:`~.procs` (stopping a process group), :mod:`~.timing` (the phase
clock), :mod:`~.residency` (resident pages, a first touch's price) and :mod:`~.pagecache` (the page cache).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "resolve_device": "devices",
    "device_banner": "devices",
    "machine_profile": "machine",
    "machine_warnings": "machine",
    "Activity": "machine",
    "resolve_cpus": "placement",
    "PhaseClock": "timing",
    "parameter_residency": "residency",
    "first_touch_seconds": "residency",
})
