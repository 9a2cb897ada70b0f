#!/usr/bin/env python3
"""Which transformers versions the kit works on: a compatibility matrix (``make compat``; not part of the test suite).

For each transformers version this script makes (or reuses) a scratch virtual environment with that transformers,
the local CPU torch wheel the kit pins, and the kit's other dependencies from pyproject.toml (read here, never typed),
installs the kit itself into it with ``--no-deps -e``, and runs the kit's own code there, each step in a subprocess:

- ``omni-loader inventory --json`` (full size, ``vllm-omni`` layout, meta device): modules, named buffers,
  persistent buffers, parameter tensors and elements;
- both buffer-discovery rules, ``find_persistent_buffers(model, 'baseline' | 'optimized')``, on that model (meta):
  their results and whether they agree;
- ``omni-loader load --size tiny --json`` with each variant: whether it succeeds, weights loaded, digest;
- ``omni-loader load --size full --variant optimized --json``: the weights a full-size load loads (721 expected)
  and the full digest (skip with ``--no-full-load``);
- the installed torch, transformers, huggingface_hub and safetensors versions.

Each row is compared with what vLLM-Omni's own source gives for the full-size tree (EXPECTED); a difference is
spelled out, a failure is reported as its one-line error. The table goes into docs/compat.md (between the markers:
the prose after the end marker is kept as it is), the raw rows to ``--json``.

    python tests/compat_matrix.py                      # the default versions (see default_versions)
    python tests/compat_matrix.py --versions 4.57.6 5.25.0 --json -
    python tests/compat_matrix.py --out /tmp/compat.md --json rows.json

Scratch venvs are cached under ~/.cache/omni-loader/compat/ (keyed by transformers version; remade when the
requirements, the torch wheel or the Python change), so a rerun only probes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "compat.md"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "omni-loader" / "compat"

# vLLM-Omni's requirements/common.txt ("exactly aligned with the upstream vLLM constraint"), checked 2026-12-06.
VLLM_OMNI_TRANSFORMERS = ">=4.56.0,!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0"

# The full-size Token2Wav as vLLM-Omni builds it (its own source, built on the meta device: the kit's ``vllm-omni``
# layout must match it name for name); weights loaded = 720 parameters + 1 persistent buffer.
EXPECTED: dict[str, Any] = {
    "modules": 1092,
    "named_buffers": 219,
    "persistent_buffers": ["code2wav_dit_model.rotary_embed.inv_freq"],
    "parameters": 720,
    "parameter_elements": 449_051_264,
    "weights_loaded_full": 721,
}
LABELS = {"modules": "modules", "named_buffers": "named buffers", "persistent_buffers": "persistent buffers",
          "parameters": "parameter tensors", "parameter_elements": "parameter elements",
          "weights_loaded_full": "weights loaded (full)"}
PACKAGES = ("torch", "transformers", "huggingface_hub", "safetensors")
BEGIN = "<!-- compat:begin (written by `make compat`: tests/compat_matrix.py; edit the script, not this part) -->"
END = "<!-- compat:end (what follows is written by hand and kept when the table is rewritten) -->"
PROBE_TIMEOUT_S = 600

# Run inside the scratch venv: the installed versions, and both discovery rules on the full model (meta device);
# the tiny inventory gives the weights a tiny load should load (parameters + persistent buffers).
PROBE = r"""
import json, importlib.metadata as md
out = {"versions": {}}
for name in PACKAGES:
    try:
        out["versions"][name] = md.version(name)
    except md.PackageNotFoundError:
        out["versions"][name] = None
import omni_loader
from omni_loader.token2wav.model import build_model, config_dict
model = build_model(config_dict("full"), layout="vllm-omni", device="meta")
rules = {v: sorted(omni_loader.find_persistent_buffers(model, v)) for v in ("baseline", "optimized")}
out["discovery"] = rules
out["discovery_agree"] = rules["baseline"] == rules["optimized"]
tiny = omni_loader.inventory(layout="vllm-omni", size="tiny")
out["tiny_expected_weights"] = tiny.parameters + len(tiny.persistent_buffers)
print(json.dumps(out))
"""


# ----------------------------------------------------------------------------------------------- versions to try

def _specifier(text: str):
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


def index_versions(package: str = "transformers") -> list[str]:
    """Every release of ``package`` on the configured indexes, as ``pip index versions`` lists them."""
    for cmd in ([sys.executable, "-m", "pip"], [shutil.which("pip3") or "pip3"]):
        try:
            done = subprocess.run([*cmd, "index", "versions", package], capture_output=True, text=True, timeout=300)
        except OSError:
            continue
        match = re.search(r"Available versions:\s*(.+)", done.stdout)
        if done.returncode == 0 and match:
            return [v.strip() for v in match.group(1).split(",") if v.strip()]
    raise SystemExit(f"compat: `pip index versions {package}` listed nothing (is pip there, is the index reachable?)")


def default_versions(available: list[str]) -> list[str]:
    """The newest of each 4.x series vLLM-Omni's range allows (4.56.x, 4.57.x), its oldest allowed 5.x, the newest."""
    from packaging.version import Version

    allowed = sorted(Version(v) for v in available if not Version(v).is_prerelease
                     and Version(v) in _specifier(VLLM_OMNI_TRANSFORMERS))
    if not allowed:
        raise SystemExit("compat: no release on the index falls in vLLM-Omni's range " + VLLM_OMNI_TRANSFORMERS)
    newest_per_series: dict[tuple[int, int], Version] = {}
    for v in allowed:
        if v.major == 4:
            newest_per_series[(v.major, v.minor)] = v  # sorted ascending: the last one wins
    chosen = list(newest_per_series.values())
    fives = [v for v in allowed if v.major >= 5]
    if fives:
        chosen.append(fives[0])
    chosen.append(allowed[-1])
    return [str(v) for v in sorted(set(chosen))]


# ------------------------------------------------------------------------------------------------- requirements

def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(path.read_text())


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def torch_requirement(declared: str, find_links: str) -> tuple[str, str | None]:
    """The torch requirement to install: the newest wheel in ``find_links`` (this machine's CPU build) that
    pyproject's requirement allows, pinned exactly (``torch==2.13.0+cpu``) so that no index's build (CUDA, GBs)
    can win; pyproject's requirement as it is where no local wheel fits."""
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion, Version

    if not find_links or not Path(find_links).is_dir():
        return declared, None
    spec = Requirement(declared).specifier
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    fits = []
    for wheel in Path(find_links).glob(f"torch-*-{tag}-*.whl"):
        try:
            version = Version(wheel.name.split("-")[1])
        except InvalidVersion:
            continue
        if spec.contains(version, prereleases=True):
            fits.append((version, wheel.name))
    if not fits:
        return declared, None
    version, name = max(fits)
    return f"torch=={version}", name


def requirements(transformers: str, find_links: str) -> tuple[list[str], str | None]:
    """pyproject.toml's dependencies with transformers replaced by ``transformers==<version>``."""
    deps = _load_toml(ROOT / "pyproject.toml")["project"]["dependencies"]
    by_name = {_name(d): d for d in deps}
    if "torch" not in by_name or "transformers" not in by_name:
        raise SystemExit("compat: pyproject.toml's dependencies name no torch or no transformers")
    torch_req, wheel = torch_requirement(by_name.pop("torch"), find_links)
    by_name.pop("transformers")
    return [torch_req, f"transformers=={transformers}", *by_name.values()], wheel


# ---------------------------------------------------------------------------------------------------- the venvs

def uv() -> str:
    for candidate in (Path(sys.executable).parent / "uv", ROOT / ".venv" / "bin" / "uv"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("uv")
    if not found:
        raise SystemExit("compat: uv not found (make reproduce puts it into .venv)")
    return found


def one_line(text: str) -> str:
    """The line of a tool's output that says what went wrong: an error line, else the last line."""
    lines = [ln.strip() for ln in re.split(r"[\r\n]+", text or "") if ln.strip()]
    if not lines:
        return "(no output)"
    for ln in lines:  # uv: "× No solution found ..." then the reason on the next lines
        if ln.startswith(("×", "error:")):
            i = lines.index(ln)
            return " ".join(lines[i:i + 3])[:400]
    for ln in reversed(lines):
        if ln.startswith("omni-loader: error") or re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*", ln):
            return ln[:400]
    return lines[-1][:400]


def git(*args: str) -> str:
    """git's output, trailing newline removed (leading spaces kept: ``status --porcelain`` columns)."""
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.rstrip()


def kit_source(rev: str | None) -> tuple[Path, str]:
    """The kit's source tree to install and a line that names it: the working tree (default), or ``rev`` exported
    once with ``git archive`` into the cache (other people's uncommitted edits then change nothing mid-run)."""
    if rev is None:
        try:
            head = git("rev-parse", "--short", "HEAD")
            dirty = git("status", "--porcelain", "--", "omni_loader", "pyproject.toml", "data").splitlines()
        except (OSError, subprocess.CalledProcessError):
            return ROOT, f"the working tree at {ROOT}"
        changed = sorted(line[3:] for line in dirty)
        return ROOT, (f"the working tree: commit {head}"
                      + (f" with uncommitted changes to {', '.join(f'`{c}`' for c in changed)}" if changed else
                         ", no uncommitted changes to the package"))
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    tree = CACHE / f"kit-{sha[:12]}"
    if not (tree / "pyproject.toml").exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", sha], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree, f"commit {sha[:7]} (`--kit {rev}`, exported to the cache)"


def make_venv(version: str, find_links: str, rebuild: bool, kit: Path) -> dict[str, Any]:
    """The scratch venv for ``version``, made or reused, with the kit from ``kit`` installed in it (``--no-deps -e``):
    ``{"python", "made", "seconds", "error"}``."""
    reqs, wheel = requirements(version, find_links)
    key = {"transformers": version, "requirements": sorted(reqs), "torch_wheel": wheel, "find_links": find_links,
           "python": sys.version.split()[0], "base": sys.base_prefix}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    venv = CACHE / f"transformers-{version}"
    python = venv / "bin" / "python"
    stamp = venv / "compat-key.json"
    result: dict[str, Any] = {"venv": str(venv), "python": str(python), "requirements": reqs, "made": False,
                              "seconds": 0.0, "error": None}
    # uv's cache of its own beside the venvs: the user's is shared with every other install on the machine (one that
    # put a stand-in wheel under torch's name into it made uv refuse the CPU wheel here).
    env = {**{k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}, "UV_CACHE_DIR": str(CACHE / "uv-cache")}
    install_kit = [uv(), "pip", "install", "--quiet", "--python", str(python), "--no-deps", "-e", str(kit)]
    start = time.perf_counter()
    if not rebuild and stamp.exists() and python.exists():
        try:
            recorded = json.loads(stamp.read_text())
        except ValueError:
            recorded = {}
        if recorded.get("digest") == digest:
            if recorded.get("kit") != str(kit):  # the same venv, the kit from another tree
                done = subprocess.run(install_kit, capture_output=True, text=True, env=env)
                if done.returncode:
                    result["error"] = f"install: {one_line(done.stderr or done.stdout)}"
                    return result
                stamp.write_text(json.dumps({**recorded, "kit": str(kit)}, indent=1))
            result["seconds"] = round(time.perf_counter() - start, 1)
            return result
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    fl = ["--find-links", find_links] if find_links else []
    steps = [
        [uv(), "venv", "--quiet", "--python", sys.executable, str(venv)],
        [uv(), "pip", "install", "--quiet", "--python", str(python), *fl, *reqs],
        install_kit,
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode and cmd[1] == "pip":  # once more past uv's cache, which other installs share
            done = subprocess.run([*cmd, "--refresh"], capture_output=True, text=True, env=env)
        if done.returncode:
            result["error"] = f"install: {one_line(done.stderr or done.stdout)}"
            result["seconds"] = round(time.perf_counter() - start, 1)
            shutil.rmtree(venv, ignore_errors=True)
            return result
    stamp.write_text(json.dumps({"digest": digest, "key": key, "kit": str(kit)}, indent=1))
    result.update(made=True, seconds=round(time.perf_counter() - start, 1))
    return result


# ------------------------------------------------------------------------------------------------------ probing

def _run(cmd: list[str], cwd: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Run one of the kit's commands in the scratch venv: its JSON, or its one-line error."""
    # With bytecode writing on: the cached venv keeps what this run compiled, so a rerun starts faster.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV",
                                                            "OMNI_LOADER_DEBUG", "PYTHONPATH")}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {PROBE_TIMEOUT_S} s"
    if done.returncode:
        return None, one_line(done.stderr or done.stdout)
    try:
        return json.loads(done.stdout), None
    except ValueError:
        return None, f"no JSON on stdout: {one_line(done.stdout)}"


def probe(version: str, venv: dict[str, Any], full_load: bool) -> dict[str, Any]:
    """The row for ``version``: the kit's own answers in its scratch venv, compared with EXPECTED."""
    row: dict[str, Any] = {"transformers": version, "venv_made": venv["made"], "install_seconds": venv["seconds"],
                           "errors": {}, "differences": []}
    if venv["error"]:
        row["errors"]["install"] = venv["error"]
        return finish(row)
    bindir = Path(venv["python"]).parent
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="omni-compat-") as scratch:
        cwd = Path(scratch)
        code = f"PACKAGES = {PACKAGES!r}\n{PROBE}"
        info, err = _run([str(bindir / "python"), "-c", code], cwd)
        if err:
            row["errors"]["discovery"] = err
            # The versions alone, when the kit's code failed.
            vers, _ = _run([str(bindir / "python"), "-c", "import json, importlib.metadata as m; print(json.dumps("
                            f"{{n: m.version(n) for n in {PACKAGES!r}}}))"], cwd)
            row["versions"] = vers or {}
        else:
            row["versions"] = info["versions"]
            row["discovery"] = info["discovery"]
            row["discovery_agree"] = info["discovery_agree"]
            row["tiny_expected_weights"] = info["tiny_expected_weights"]
        inv, err = _run([str(bindir / "omni-loader"), "inventory", "--layout", "vllm-omni", "--size", "full",
                         "--json"], cwd)
        if err:
            row["errors"]["inventory"] = err
        else:
            row["inventory"] = inv
        loads = [("tiny", "baseline"), ("tiny", "optimized")] + ([("full", "optimized")] if full_load else [])
        row["loads"] = {}
        for size, variant in loads:
            out, err = _run([str(bindir / "omni-loader"), "load", "--size", size, "--variant", variant,
                             "--device", "cpu", "--json"], cwd)
            name = f"{size}/{variant}"
            if err:
                row["errors"][f"load {name}"] = err
                row["loads"][name] = {"ok": False, "error": err}
            else:
                row["loads"][name] = {"ok": True, "weights_loaded": out.get("weights_loaded"),
                                      "digest": out.get("digest"), "state_dict_calls": out.get("state_dict_calls"),
                                      "persistent_buffers": out.get("persistent_buffers")}
    row["probe_seconds"] = round(time.perf_counter() - start, 1)
    return finish(row)


def finish(row: dict[str, Any]) -> dict[str, Any]:
    """Spell out every difference from EXPECTED and between the variants; set the row's status."""
    diffs: list[str] = row["differences"]
    inv = row.get("inventory") or {}
    for key in ("modules", "named_buffers", "parameters", "parameter_elements"):
        if inv and inv.get(key) != EXPECTED[key]:
            diffs.append(f"{LABELS[key]} {fmt(inv.get(key))} (expected {fmt(EXPECTED[key])})")
    if inv and inv.get("persistent_buffers") != EXPECTED["persistent_buffers"]:
        diffs.append(f"persistent buffers {inv.get('persistent_buffers')} (expected {EXPECTED['persistent_buffers']})")
    if "discovery" in row:
        rules = row["discovery"]
        if not row["discovery_agree"]:
            diffs.append(f"discovery rules disagree: baseline {rules['baseline']}, optimized {rules['optimized']}")
        if rules["optimized"] != EXPECTED["persistent_buffers"]:
            diffs.append(f"optimized rule finds {rules['optimized']} (expected {EXPECTED['persistent_buffers']})")
    loads = row.get("loads") or {}
    full = loads.get("full/optimized")
    if full and full["ok"] and full["weights_loaded"] != EXPECTED["weights_loaded_full"]:
        diffs.append(f"full load loaded {fmt(full['weights_loaded'])} weights (expected "
                     f"{fmt(EXPECTED['weights_loaded_full'])})")
    tiny = [loads.get("tiny/baseline"), loads.get("tiny/optimized")]
    if all(t and t["ok"] for t in tiny):
        if tiny[0]["digest"] != tiny[1]["digest"]:
            diffs.append(f"tiny digests differ: baseline {tiny[0]['digest']}, optimized {tiny[1]['digest']}")
        if tiny[0]["weights_loaded"] != tiny[1]["weights_loaded"]:
            diffs.append(f"tiny weights loaded differ: {tiny[0]['weights_loaded']} / {tiny[1]['weights_loaded']}")
        want = row.get("tiny_expected_weights")
        if want is not None and tiny[1]["weights_loaded"] != want:
            diffs.append(f"tiny load loaded {tiny[1]['weights_loaded']} weights (its inventory: {want})")
    row["status"] = "fails" if row["errors"] else ("differs" if diffs else "ok")
    return row


def cross_check(rows: list[dict[str, Any]]) -> None:
    """A digest that differs from the other versions' is a difference too (same seeded snapshot, same tree)."""
    for size in ("tiny", "full"):
        digests = {r["transformers"]: r.get("loads", {}).get(f"{size}/optimized", {}).get("digest") for r in rows}
        seen = [d for d in digests.values() if d]
        if not seen:
            continue
        common = max(set(seen), key=seen.count)
        for row in rows:
            d = digests[row["transformers"]]
            if d and d != common:
                row["differences"].append(f"{size} digest {short(d)} differs from the other versions' {short(common)}")
                if row["status"] == "ok":
                    row["status"] = "differs"


# ------------------------------------------------------------------------------------------------------ writing

def fmt(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def short(digest: str | None) -> str:
    return digest.split(":")[-1][:8] if digest else "–"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kib / 1024 ** 2:.0f} GiB memory"
    except (OSError, AttributeError):
        pass
    return (f"{platform.system()} {platform.release()} ({platform.machine()}), {cpu}, {os.cpu_count()} cores{mem}; "
            f"Python {platform.python_version()}")


def cell_load(row: dict[str, Any]) -> str:
    loads = row.get("loads") or {}
    parts = []
    for variant in ("baseline", "optimized"):
        t = loads.get(f"tiny/{variant}")
        parts.append("–" if t is None else ("ok" if t["ok"] else "fails"))
    tiny = [loads.get("tiny/baseline"), loads.get("tiny/optimized")]
    if all(t and t["ok"] for t in tiny):
        same = "same" if tiny[0]["digest"] == tiny[1]["digest"] else "**differ**"
        return f"{parts[0]} / {parts[1]}, {fmt(tiny[1]['weights_loaded'])} weights, digests {same} ({short(tiny[1]['digest'])})"
    return " / ".join(parts)


def cell_full(row: dict[str, Any]) -> str:
    full = (row.get("loads") or {}).get("full/optimized")
    if full is None:
        return "–"
    return f"{fmt(full['weights_loaded'])} ({short(full['digest'])})" if full["ok"] else "fails"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["transformers", "torch", "huggingface_hub", "safetensors", "modules", "named buffers",
            "persistent buffers", "parameter tensors", "parameter elements", "weights loaded (full load, digest)",
            "discovery rules (baseline = optimized)", "tiny load baseline / optimized", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    expected = ["**expected** (vLLM-Omni's tree)", "", "", "", fmt(EXPECTED["modules"]), fmt(EXPECTED["named_buffers"]),
                "1: `" + EXPECTED["persistent_buffers"][0] + "`", fmt(EXPECTED["parameters"]),
                fmt(EXPECTED["parameter_elements"]), fmt(EXPECTED["weights_loaded_full"]), "agree", "both load, same digest",
                ""]
    lines.append("| " + " | ".join(expected) + " |")
    for row in rows:
        v = row.get("versions") or {}
        inv = row.get("inventory") or {}
        pb = inv.get("persistent_buffers")
        persistent = "–" if pb is None else (f"{len(pb)}" + (" (as expected)" if pb == EXPECTED["persistent_buffers"]
                                                              else ": " + ", ".join(f"`{n}`" for n in pb)))
        if "discovery" in row:
            rules = f"{'agree' if row['discovery_agree'] else '**disagree**'} ({len(row['discovery']['optimized'])} found)"
        else:
            rules = "–"
        if row["status"] == "ok":
            result = "ok"
        elif row["status"] == "differs":
            result = "**differs**: " + "; ".join(row["differences"])
        else:
            errors = row["errors"]
            if len(errors) > 1 and len(set(errors.values())) == 1:  # one cause stopped every step
                result = f"**fails** (every step): `{next(iter(errors.values()))}`"
            else:
                result = "**fails**: " + "; ".join(f"{k}: `{e}`" for k, e in errors.items())
            if row["differences"]:
                result += "; also " + "; ".join(row["differences"])
        cells = [f"{row['transformers']}", v.get("torch") or "–", v.get("huggingface_hub") or "–",
                 v.get("safetensors") or "–", fmt(inv["modules"]) if inv else "–",
                 fmt(inv["named_buffers"]) if inv else "–", persistent, fmt(inv["parameters"]) if inv else "–",
                 fmt(inv["parameter_elements"]) if inv else "–", cell_full(row), rules, cell_load(row), result]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def render(rows: list[dict[str, Any]], seconds: float, kit_line: str) -> str:
    made = sum(1 for r in rows if r.get("venv_made"))
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        BEGIN,
        "# Compatibility: transformers versions",
        "",
        "Written by `make compat` (`tests/compat_matrix.py`): each transformers version in its own scratch venv "
        "(cached under `~/.cache/omni-loader/compat/`) with the CPU torch wheel and the kit's other dependencies "
        "from pyproject.toml; the kit's own code run there in subprocesses: `omni-loader inventory --json` (full "
        "size, `vllm-omni` layout, meta device), both discovery rules (`find_persistent_buffers`, meta), "
        "`omni-loader load --size tiny --json` with each variant and `omni-loader load --size full --variant "
        "optimized --json` (seeded synthetic snapshots, CPU). Digests are xxh3-128 of the loaded tensors, first 8 "
        "hex digits.",
        "",
        f"- Date: {when}",
        f"- Machine: {machine()}",
        f"- Kit: {kit_line}",
        f"- vLLM-Omni's transformers range: `{VLLM_OMNI_TRANSFORMERS}`",
        f"- Run: {len(rows)} versions, {made} venvs made, {len(rows) - made} reused from the cache, "
        f"{seconds:.0f} s in all",
        "",
        table(rows),
        "",
        END,
    ])


def write_doc(path: Path, generated: str) -> None:
    """Replace the generated part of ``path``, keeping what is written by hand after it."""
    tail = "\n"
    if path.exists():
        text = path.read_text()
        if END in text:
            tail = text.split(END, 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(generated + tail)


# --------------------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", nargs="+", metavar="V",
                        help="transformers versions (default: the newest 4.56.x and 4.57.x, the oldest 5.x "
                             "vLLM-Omni allows, the newest on the index)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown file (default docs/compat.md); "
                        "'-' writes no file")
    parser.add_argument("--json", metavar="PATH", nargs="?", const="-",
                        help="also write the raw rows as JSON to PATH ('-' or no PATH: stdout)")
    parser.add_argument("--find-links", default=os.environ.get("OMNI_COMPAT_FIND_LINKS"),
                        help="where the local torch wheel lies (default: pip's own find-links, as `make` reads them)")
    parser.add_argument("--no-full-load", dest="full_load", action="store_false",
                        help="skip the full-size load (1.7 GB snapshot; about 10 s a version)")
    parser.add_argument("--rebuild", action="store_true", help="remake the scratch venvs even when cached")
    parser.add_argument("--kit", metavar="REV", help="probe the kit as committed at REV (git archive into the cache) "
                        "instead of the working tree")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a version fails or differs (default: 0 once the table is written)")
    args = parser.parse_args(argv)
    if args.find_links is None:
        from stand_ins import pip_configuration

        args.find_links = pip_configuration().get("find-links", "").split(" ")[0]

    start = time.perf_counter()
    versions = args.versions or default_versions(index_versions("transformers"))
    log = sys.stderr
    kit, kit_line = kit_source(args.kit)
    print(f"compat: transformers {', '.join(versions)}; venvs under {CACHE}; kit: {kit_line}", file=log)
    rows = []
    for version in versions:
        t = time.perf_counter()
        venv = make_venv(version, args.find_links, args.rebuild, kit)
        state = "failed" if venv["error"] else "made" if venv["made"] else "reused"
        print(f"compat: {version}: venv {state} in {venv['seconds']:.1f} s", file=log, flush=True)
        row = probe(version, venv, args.full_load)
        row["seconds"] = round(time.perf_counter() - t, 1)
        print(f"compat: {version}: {row['status']} ({row['seconds']} s)"
              + "".join(f"\n    {k}: {e}" for k, e in row["errors"].items())
              + "".join(f"\n    {d}" for d in row["differences"]), file=log, flush=True)
        rows.append(row)
    cross_check(rows)
    seconds = time.perf_counter() - start
    if str(args.out) != "-":
        write_doc(args.out, render(rows, seconds, kit_line))
        print(f"compat: wrote {args.out} ({seconds:.0f} s)", file=log)
    if args.json:
        payload = json.dumps({"kit": kit_line, "vllm_omni_range": VLLM_OMNI_TRANSFORMERS, "expected": EXPECTED, "machine": machine(),
                              "seconds": round(seconds, 1), "rows": rows}, indent=1)
        if args.json == "-":
            print(payload)
        else:
            Path(args.json).write_text(payload + "\n")
    return 1 if args.strict and any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
