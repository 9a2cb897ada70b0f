"""The machine a load runs on, and the clock that times it.

:mod:`~.devices` (device choice, memory peaks), :mod:`~.machine` (what the machine is: VM, free
page reporting, THP, governor, and what it did during the runs), :mod:`~.placement` (the threads
and CPUs a load runs on), :mod:`~.procs` (stopping a process group), :mod:`~.timing` (the phase
clock: time, memory, faults and context switches per phase) and :mod:`~.residency` (which pages
are resident, and what a first touch costs here).
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
