"""What the machine was and what it was doing: the conditions that make a benchmark noisy.

Why: when the same code on the same machine does not give the same verdicts, the reader needs to know whether
the machine was fit to measure on. The kit records the facts that decided figures on its own development
machine: a virtual machine (steal time), free page reporting (a first touch of freed memory is a host fault
priced differently run to run), transparent huge pages, the CPU frequency policy, the load average, and other
processes' CPU during the runs. :func:`machine_profile` is read once per benchmark, :class:`Activity` brackets
the runs, :func:`machine_warnings` turns a saved record into the report's warnings. Where a Linux file is
missing a field is ``None`` ("not known"), never a guess.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Other processes' CPU (in cores, averaged over the benchmark) above which the machine was busy.
BUSY_CORES = 0.25
# Steal time (share of the CPU time the guest wanted) above which the host was short of CPU.
STEAL_SHARE = 0.02


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _selected(text: str | None) -> str | None:
    """``always [madvise] never`` -> ``madvise``: the bracketed choice of a sysfs setting."""
    chosen = re.search(r"(?<!\S)\[(\S*)\](?!\S)", text or "")
    return chosen.group(1) if chosen else text or None


def virtualisation() -> str | None:
    """'none', or what says the machine is virtual (the CPU's hypervisor flag, the DMI vendor)."""
    cpuinfo = _read("/proc/cpuinfo")
    if cpuinfo is None:
        return None
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    vendor = " ".join(filter(None, (_read("/sys/class/dmi/id/sys_vendor"), _read("/sys/class/dmi/id/product_name"))))
    if "hypervisor" not in flags:
        return "none"
    if not vendor and "firecracker" in (_read("/proc/cmdline") or ""):
        vendor = "Firecracker"
    return f"virtual machine ({vendor})" if vendor else "virtual machine (hypervisor flag)"


def free_page_reporting() -> str | None:
    """'on (order N)' when the kernel hands freed memory back to its host, 'off', or None (not Linux)."""
    cmdline = _read("/proc/cmdline")
    order = _read("/sys/module/page_reporting/parameters/page_reporting_order")
    if cmdline is None:
        return None
    if order is None and "page_reporting" in cmdline:
        order = next((w.split("=", 1)[1] for w in cmdline.split() if "page_reporting_order=" in w), "?")
    return "off" if order is None else f"on (order {order})"


KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def _pairs(text: str | None, sep: str | None = None) -> dict[str, str]:
    """``key value`` lines (sysfs properties, /proc information) as a dict."""
    pairs = [line.split(sep, 1) for line in (text or "").splitlines()]
    return {p[0].strip(): p[1].strip() for p in pairs if len(p) == 2}


def gpus() -> list[dict[str, Any]]:
    """The machine's GPUs as its drivers show them (AMD's KFD topology, NVIDIA's /proc), without torch: what
    ``doctor`` and the device line compare with what torch sees."""
    found: list[dict[str, Any]] = []
    for node in sorted(KFD_NODES.glob("*"), key=lambda p: p.name) if KFD_NODES.is_dir() else []:
        props = _pairs(_read(str(node / "properties")))
        if int(props.get("simd_count", 0)) == 0:  # a CPU node
            continue
        memory = sum(int(_pairs(_read(str(bank / "properties"))).get("size_in_bytes", 0))
                     for bank in (node / "mem_banks").glob("*"))
        found.append({"vendor": "AMD", "name": _read(str(node / "name")) or f"gfx {props.get('gfx_target_version')}",
                      "memory_bytes": memory or None})
    for gpu in sorted(NVIDIA_GPUS.glob("*")) if NVIDIA_GPUS.is_dir() else []:
        found.append({"vendor": "NVIDIA", "name": _pairs(_read(str(gpu / "information")), ":").get("Model", "?"),
                      "memory_bytes": None})
    return found


def machine_profile() -> dict[str, Any]:
    """The machine's standing settings that decide how noisy a measurement is."""
    return {
        "virtualisation": virtualisation(),
        "free_page_reporting": free_page_reporting(),
        "transparent_hugepages": _selected(_read("/sys/kernel/mm/transparent_hugepage/enabled")),
        "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") or "not exposed",
        "cpu_count": os.cpu_count(),
    }


def _steal_seconds() -> float | None:
    stat = _read("/proc/stat")
    if not stat:
        return None
    fields = stat.splitlines()[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else None


def _own_cpu_seconds() -> float:
    """CPU used by this process and every process below it, finished children included."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def _busy_cpu_seconds() -> float:
    import psutil

    t = psutil.cpu_times()
    return sum(getattr(t, f) for f in ("user", "nice", "system", "irq", "softirq", "steal") if hasattr(t, f))


@dataclass
class Activity:
    """What the machine did while a benchmark ran: started with :meth:`start`, read with :meth:`finish`."""

    wall: float
    busy: float
    own: float
    steal: float | None
    load_start: float | None

    @classmethod
    def start(cls) -> Activity:
        return cls(time.monotonic(), _busy_cpu_seconds(), _own_cpu_seconds(), _steal_seconds(), _load_average())

    def finish(self) -> dict[str, Any]:
        wall = time.monotonic() - self.wall
        others = max(0.0, (_busy_cpu_seconds() - self.busy) - (_own_cpu_seconds() - self.own))
        steal_now = _steal_seconds()
        steal = steal_now - self.steal if steal_now is not None and self.steal is not None else None
        return {
            "seconds": round(wall, 3),
            "other_cpu_seconds": round(others, 3),
            "other_cores": round(others / wall, 3) if wall > 0 else None,
            "steal_seconds": None if steal is None else round(steal, 3),
            "load_average_start": self.load_start,
            "load_average_end": _load_average(),
        }


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def describe_machine(profile: dict[str, Any] | None) -> str:
    """The environment table's cell for :func:`machine_profile`."""
    if not profile:
        return "not recorded"
    return (f"{profile.get('virtualisation') or 'virtualisation unknown'}; free page reporting "
            f"{profile.get('free_page_reporting') or 'unknown'}; transparent huge pages "
            f"{profile.get('transparent_hugepages') or 'unknown'}; CPU frequency governor "
            f"{profile.get('cpu_governor') or 'unknown'}")


def describe_activity(activity: dict[str, Any] | None) -> str:
    """The environment table's cell for :meth:`Activity.finish`."""
    if not activity:
        return "not recorded"
    steal = activity.get("steal_seconds")
    return (f"other processes used {activity.get('other_cpu_seconds', 0):,.1f} CPU-s "
            f"({activity.get('other_cores') or 0:.2f} of a core on average) over {activity.get('seconds', 0):,.0f} s; "
            f"steal {'not known' if steal is None else f'{steal:,.1f} s'}; load average "
            f"{activity.get('load_average_start')} → {activity.get('load_average_end')}")


def machine_warnings(profile: dict[str, Any] | None, activity: dict[str, Any] | None,
                     construct: str | None = None) -> list[str]:
    """What the report warns about the machine, each with what to do (empty: nothing to say)."""
    warnings = []
    if activity and (activity.get("other_cores") or 0) > BUSY_CORES:
        warnings.append(f"busy: other processes used {activity['other_cores']:.2f} of a core on "
                        "average while the benchmark ran; their work lands in whichever runs they overlap. Run "
                        "again on a quiet machine, or judge the differences against an A/A run (--aa).")
    steal, cores = (activity or {}).get("steal_seconds"), (profile or {}).get("cpu_count", 1)
    if steal and activity.get("seconds") and steal / (activity["seconds"] * cores or 1) > STEAL_SHARE:
        warnings.append(f"the host took {steal:,.1f} s of CPU from this virtual machine (steal time): its other "
                        "guests were busy. Run again later, or on a dedicated machine.")
    fpr = (profile or {}).get("free_page_reporting") or ""
    if fpr.startswith("on") and construct in ("upstream-cpu", "empty"):
        warnings.append(f"this virtual machine hands freed memory back to its host (free page reporting {fpr}) and "
                        f"--construct {construct} leaves first touches inside load_parameters: their price varies "
                        "run to run and can pass for a difference between variants. The default --construct "
                        "resident moves them to construction, as on a GPU.")
    return warnings
