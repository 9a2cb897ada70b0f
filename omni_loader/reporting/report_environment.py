"""report.md's environment table: what ran, where, how, from the benchmark's record.

It reads metadata.json's record only (through :attr:`omni_loader.results.suite.Suite.described`), never runs.csv.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ..formatting import markdown_table
from ..results.spec import BenchmarkSpec
from .measurements import planned_arms
from ..host.machine import describe_activity, describe_machine
from ..host.placement import describe_cpus
from ..names import LEGACY_CONSTRUCT_MODES
from ..results.suite import Record, Suite
from ..token2wav.options import HALF_NAMES, command_words, half_dtypes, option_fields
from ..token2wav.variants import VARIANT_RELEASES

CONSTRUCT_NOTES = {
    "resident": "resident: every parameter written at construction, fused qkv_proj included, so weight loading "
                "copies into resident memory as on a GPU",
    "upstream-cpu": "upstream-cpu: parameters written at construction as vLLM-Omni's constructors do on a CPU "
                    "(fused qkv_proj left empty: its first touches land in load_parameters)",
    "empty": "empty: no parameter written before loading (first touches land in load_parameters)",
    "init": "init: full random init at construction",
}
CONSTRUCT_NOTES.update({old: CONSTRUCT_NOTES[new] for old, new in LEGACY_CONSTRUCT_MODES.items()})
WORKER_NOTES = {
    "forkserver": "a fresh process per run, forked from a server that imported torch and the model code once",
    "spawn": "a fresh interpreter per run (imports included)",
    "in-process": "in-process (later runs see a warm process)",
}
# The spec's settings with a row of their own below; every other option of BenchmarkSpec (a new one
# included, with no edit here) is listed in the row "Other settings", as the command line spells it.
OWN_ROWS = frozenset({"checkpoint", "device", "layout", "dtype", "read", "construct", "threads", "cpus", "warmup",
                      "runs", "order", "workers", "variants"})


def environment_table(suite: Suite) -> str:
    """Machine, versions, settings and command of the benchmark ``suite`` describes (a directory's metadata.json)."""
    record = suite.described
    env, ck, spec = record.get("environment") or {}, record.get("checkpoint") or {}, suite.spec
    mem = env.get("device_memory_bytes")
    gpu = env.get("gpu_backend")
    # schema 1 recorded only in_process, not where each run ran
    workers = str(spec["workers"]) if "workers" in spec else "in-process" if spec.get("in_process") else "spawn"
    threads = "not recorded" if "threads" not in spec else f"{spec['threads']} (intra-op)" if spec["threads"] else \
        "torch's default"
    others = command_words(BenchmarkSpec, {k: v for k, v in spec.items()
                                           if k in option_fields(BenchmarkSpec) and k not in OWN_ROWS})
    rows = [
        ["Model", record.get("model", "")],
        ["Checkpoint", f"{ck.get('checkpoint_source', '?')}: {ck.get('checkpoint_dir', '')}"],
        ["Device", f"{spec.get('device') or env.get('device', '')} ({env.get('device_name', '')}"
                   + (f", {mem / 2**30:.0f} GiB" if mem else "") + ")"],
        ["CPU", f"{env.get('cpu', '')} ({env.get('cpu_count', '?')} cores)"],
        ["Memory", f"{env['memory_bytes'] / 2**30:.0f} GiB" if env.get("memory_bytes") else "?"],
        ["Machine", describe_machine(env.get("machine"))],
        ["During the runs", describe_activity(record.get("activity"))],
        ["PyTorch", env.get("torch", "")],
        ["ROCm (HIP)" if gpu == "rocm" else "CUDA", env.get("rocm_hip") or env.get("cuda") or "none (CPU build)"],
        ["transformers", env.get("transformers", "")],
        ["Python", env.get("python", "")],
        ["omni-loader", f"{env.get('kit_version', '')} ({env.get('kit_commit') or 'no git commit'})"],
        ["Installed from", lock_text(env.get("lock"))],
        ["vLLM-Omni installed", vllm_omni_text(env)],
        ["Variants", variants_text(suite)],
        ["Layout / dtypes", layout_text(record)],
        ["Shards read", spec.get("read", "lazy (not recorded: kits before --read read lazily)")],
        ["Construction", CONSTRUCT_NOTES.get(spec.get("construct", ""), spec.get("construct", "not recorded"))],
        ["Torch threads per load", threads],
        ["CPUs per load", describe_cpus(spec.get("cpus"))],
        ["Warm-ups", f"{record.get('warmup')} per variant"],
        ["Repeats", f"{record.get('repeats')} per variant, order {record.get('order')}, "
                    + WORKER_NOTES.get(workers, workers)],
        ["Other settings", f"`{shlex.join(others)}`" if others else "none"],
        ["Command", command_text(record)],
        ["Started / finished",
         f"{record.get('started_at', '?')} / {record.get('finished_at', record.get('status', '?'))}"],
    ]
    return markdown_table(rows, ["Item", "Value"])


def lock_text(lock: Any) -> str:
    """The lock the environment came from, and what differs from it (a platform's own torch, transformers)."""
    if not isinstance(lock, dict):
        return "not recorded"
    head = f"{lock.get('file')} (sha256 {str(lock.get('sha256', ''))[:12]}…)"
    if lock.get("installed_from") == "own environment":
        head = f"this machine's own packages, the rest from {head}"
    differs = lock.get("differs") or []
    return f"{head}; " + (f"differs: {', '.join(map(str, differs))}" if differs else "matches it")


def vllm_omni_text(env: dict[str, Any]) -> str:
    """The installed vLLM-Omni and its Token2Wav's discovery rule, as recorded (kits before it: not recorded)."""
    if "vllm_omni" not in env:
        return "not recorded"
    found = env["vllm_omni"]
    if not isinstance(found, dict):
        return "none"
    if found.get("error"):
        return f"{found.get('version') or 'a release'} whose find_all_registers could not be read: {found['error']}"
    return (f"{found.get('version')}: find_all_registers is the {found.get('rule')} rule "
            f"({Path(str(found.get('file'))).name}:{found.get('line')})")


def variants_text(suite: Suite) -> str:
    """Each arm with the vLLM-Omni release whose code it stands for."""
    notes = []
    custom = {v["name"]: v for v in suite.spec.get("custom_variants") or [] if isinstance(v, dict)}
    for arm in planned_arms(suite):
        release = VARIANT_RELEASES.get(arm)
        if release:
            notes.append(f"{arm} = {release['releases']} (code: {release['source']})")
        elif (installed := installed_release(custom.get(arm, arm))) is not None:
            notes.append(f"{arm} = {installed}")
        elif not arm.startswith("aa-"):
            notes.append(f"{arm} = your own steps")
    return "; ".join(notes) or "not recorded"


def installed_release(arm: str | dict[str, Any]) -> str | None:
    """Where a variant that ran a release's own discovery comes from in that release, else None."""
    from ..errors import OmniLoaderError
    from ..token2wav.release import read_release
    from ..token2wav.variants import is_installed, variant_from

    try:
        variant = variant_from(arm)
    except (OmniLoaderError, TypeError):
        return None
    if not is_installed(variant.discovery):
        return None
    if variant.release:
        return f"{variant.release['label']} ({variant.release['rule']})"
    try:
        release = read_release(variant.discovery.partition(":")[2] or None)
    except OmniLoaderError as exc:
        return f"a vLLM-Omni release's find_all_registers, not recorded ({exc})"
    return f"{release.label} ({release.rule}; read when this report was drawn)"


def layout_text(record: Record) -> str:
    """The module tree and the dtype of each half's parameters, which the layout and the stage dtype decide
    (:func:`~omni_loader.token2wav.options.half_dtypes`): the vllm-omni layout's BigVGAN is bfloat16 whatever
    ``--dtype`` says."""
    settings = record.settings
    layout, dtype = settings.get("layout", ""), settings.get("dtype", "")
    if not layout or not dtype:
        return f"{layout or '?'} / {dtype or 'not recorded'}"
    halves = ", ".join(f"{HALF_NAMES[name]} {d}" for name, d in half_dtypes(layout, dtype).items())
    return f"{layout} / {halves} (stage dtype {dtype})"


def command_text(record: Record) -> str:
    """The environment table's Command cell: the command line that made a benchmark's record.

    From a notebook (``sys.argv`` the kernel's launcher) it says so and gives the equivalent shell command,
    rebuilt from the spec of ``record`` (one benchmark's).
    """
    cmd = str(record.get("command_line", "") or "")
    if "ipykernel" not in cmd and "kernel" not in cmd.split(" ", 1)[0]:
        return f"`{cmd}`" if cmd else "?"
    spec = Record(record).settings  # a record read as a plain mapping, too
    args = ["omni-loader", str(record.get("kind", "reproduce")), *command_words(BenchmarkSpec, spec)]
    if spec.get("in_process"):  # schema 1 recorded in_process, not workers
        args.append("--in-process")
    return f"a notebook (Jupyter kernel); the same run from a shell: `{shlex.join(args)}`"
