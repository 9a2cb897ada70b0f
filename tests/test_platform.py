"""A GPU machine's own Python: set-up keeps its torch and transformers, refuses one out of range, and runs.

The machine's Python is a stand-in (``stand_ins.platform_python``): torch relabelled as a ROCm build
(``2.13.0+rocm7.1``, with a HIP version) and transformers 4.57.x. The commands are docs/gpu.md's own, read
from its first block, with the stand-in's path for ``/path/to/python`` and a scratch venv and results folder.
The in-process checks of the range rule and the one-line messages are in the fast lane.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from stand_ins import HIP_VERSION, ROCM_TORCH, _rewrite, platform_python, tree_fingerprint

from omni_loader.cli import main
from omni_loader.host import requirements

REPO = Path(__file__).resolve().parent.parent
PLACEHOLDER = "/path/to/python"


def documented_commands() -> list[str]:
    """The first ``sh`` block of docs/gpu.md, one command a line."""
    text = (REPO / "docs" / "gpu.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


def _site(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.compat
@pytest.mark.slow
@pytest.mark.subprocess
def test_documented_gpu_setup_keeps_the_platforms_torch_and_transformers(tmp_path: Path) -> None:
    python = platform_python(tmp_path / "platform")
    site = _site(python)
    before = {name: tree_fingerprint(site / name) for name in ("torch", "transformers")}
    versions = subprocess.run([str(python), "-c", "import torch, transformers; print(torch.__version__, "
                               "transformers.__version__)"], capture_output=True, text=True, check=True).stdout.split()
    assert versions[0] == ROCM_TORCH and versions[1].startswith("4.57.")

    first, doctor = documented_commands()[:2]
    assert first.startswith("make reproduce") and PLACEHOLDER in first and "--size tiny" in first
    venv, out = tmp_path / "kit-venv", tmp_path / "out"
    argv = shlex.split(first.replace(PLACEHOLDER, str(python)))
    argv = [f"{a} --out {out}" if a.startswith("ARGS=") else a for a in argv] + [f"VENV={venv}"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"keeping torch {ROCM_TORCH}, transformers {versions[1]}" in done.stdout

    # nothing of the platform's was replaced: same files, same sizes, same times
    assert {name: tree_fingerprint(site / name) for name in before} == before
    record = json.loads((out / "metadata.json").read_text())
    (bench,) = record["benchmarks"].values()
    env = bench["environment"]
    assert (env["torch"], env["rocm_hip"], env["gpu_backend"]) == (ROCM_TORCH, HIP_VERSION, "rocm")
    assert env["transformers"] == versions[1]
    assert env["lock"]["installed_from"] == "own environment"
    assert any(d.startswith(f"transformers {versions[1]}") for d in env["lock"]["differs"])
    assert bench["status"] == "complete"

    # the second documented command: doctor names the ROCm build and says what a run will use
    assert doctor.endswith("omni-loader doctor")
    seen = subprocess.run([str(venv / "bin" / "omni-loader"), "doctor", "--json"], capture_output=True, text=True)
    checks = {c["what"]: c for c in json.loads(seen.stdout)["checks"]}
    assert f"ROCm (HIP {HIP_VERSION})" in checks["torch"]["found"]
    assert "layered over" in checks["Python"]["found"]

    # a transformers outside the kit's range: refused in one line, before anything is installed
    (meta,) = site.glob("transformers-*.dist-info/METADATA")
    _rewrite(meta, re.sub(r"(?m)^Version: .*$", "Version: 5.3.0", meta.read_text(), count=1))
    refused = subprocess.run([*argv[:-1], f"VENV={tmp_path / 'refused-venv'}"], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode != 0
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("set-up: refused")]
    assert "transformers 5.3.0" in line and "outside omni-loader's range" in line
    assert not list((tmp_path / "refused-venv").glob("lib/*/site-packages/omni_loader*"))


def test_the_range_rule_reads_a_build_label_as_its_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ROCm build (``2.13.0+rocm7.1``) is torch 2.13.0; a transformers vLLM-Omni excludes is one line."""
    class Dist:
        def __init__(self, name: str, version: str) -> None:
            self.metadata, self.version = {"Name": name}, version

        def locate_file(self, _: str) -> str:
            return "/opt/platform/site-packages"

    def fake(torch: str, transformers: str):
        return lambda: {"torch": Dist("torch", torch), "transformers": Dist("transformers", transformers)}

    monkeypatch.setattr(requirements, "installed", fake(ROCM_TORCH, "4.57.6"))
    assert requirements.problems(names=("torch", "transformers")) == []
    monkeypatch.setattr(requirements, "installed", fake("2.1.2+rocm5.6", "5.3.0"))
    found = requirements.problems(names=("torch", "transformers"))
    assert [(p.name, p.have) for p in found] == [("torch", "2.1.2+rocm5.6"), ("transformers", "5.3.0")]
    assert found[1].line().startswith("transformers 5.3.0 in /opt/platform/site-packages is outside omni-loader's "
                                      "range")


def test_a_command_refuses_an_out_of_range_transformers_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(requirements, "problems", lambda names=None, extras=(): [
        requirements.Problem("transformers", ">=4.56", "5.3.0", "/x")])
    assert main(["inventory", "--size", "tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "transformers 5.3.0 in /x is outside omni-loader's range" in err
    assert main(["audit", "--source", str(REPO / "omni_loader" / "names.py")]) == 0  # reads source only


def test_a_missing_dependency_is_one_line_naming_it_and_how_to_install(monkeypatch, capsys) -> None:
    import omni_loader.cli.model as model

    def missing(args):
        raise ModuleNotFoundError("No module named 'xxhash'", name="xxhash")

    monkeypatch.setattr(model, "cmd_inventory", missing)
    assert main(["inventory", "--size", "tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("omni-loader: error: omni-loader needs xxhash>=") and "pip install 'xxhash>=" in err
    assert requirements.missing_module_line(ModuleNotFoundError(name="somewhere_else")) is None


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_pre_commit_hook_installs_nothing_and_finds_the_mistake(tmp_path: Path) -> None:
    """pre-commit runs the audit hook from the kit's checkout with no environment of its own: no torch, no wait."""
    import os
    import sys

    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "--quiet", str(tmp_path / "pc")], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(tmp_path / "pc" / "bin" / "python"), "pre-commit"],
                   check=True)
    user = tmp_path / "user-repo"
    user.mkdir()
    (user / "loader.py").write_text("def find(model):\n    for name, buf in model.named_buffers():\n"
                                    "        if name in model.state_dict():\n            yield name\n")
    subprocess.run(["git", "init", "-q"], cwd=user, check=True)
    subprocess.run(["git", "add", "loader.py"], cwd=user, check=True)
    home = tmp_path / "pre-commit-home"
    done = subprocess.run([str(tmp_path / "pc" / "bin" / "pre-commit"), "try-repo", str(REPO), "omni-loader-audit",
                           "--files", "loader.py"], cwd=user, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PRE_COMMIT_HOME": str(home)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "loader.py:3: OL001" in done.stdout
    assert not [p for p in home.rglob("*") if p.name in ("torch", "transformers")]  # nothing installed for it


def _amd_topology(root: Path) -> Path:
    """A KFD topology as an MI300X machine's /sys/class/kfd/kfd/topology/nodes shows it: a CPU node and a GPU node."""
    (root / "0").mkdir(parents=True)
    (root / "0" / "properties").write_text("cpu_cores_count 2\nsimd_count 0\n")
    gpu = root / "1"
    (gpu / "mem_banks" / "0").mkdir(parents=True)
    (gpu / "properties").write_text("cpu_cores_count 0\nsimd_count 1216\ngfx_target_version 90402\n")
    (gpu / "name").write_text("gfx942\n")
    (gpu / "mem_banks" / "0" / "properties").write_text(f"heap_type 1\nsize_in_bytes {192 * 2**30}\n")
    return root


def test_a_cpu_torch_on_a_gpu_machine_is_said_before_a_run_and_by_doctor(tmp_path, monkeypatch) -> None:
    import torch

    from omni_loader import doctor
    from omni_loader.host import devices, machine

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here")
    monkeypatch.setattr(machine, "KFD_NODES", _amd_topology(tmp_path / "nodes"))
    assert machine.gpus() == [{"vendor": "AMD", "name": "gfx942", "memory_bytes": 192 * 2**30}]
    banner = devices.device_banner("auto")
    assert "though this machine has AMD gfx942: it is a CPU build; `omni-loader doctor` says what to fix" in banner
    checks = {c.what: c for c in doctor.diagnose()}
    assert "AMD gfx942 (192.0 GiB)" in checks["GPUs"].found
    assert "cannot use this machine's AMD GPU; install a ROCm build of torch" in checks["GPUs"].fix
    assert doctor.verdict(list(checks.values())).startswith("fix first (GPUs)")
    monkeypatch.setattr(machine, "KFD_NODES", tmp_path / "absent")
    assert "though this machine has" not in devices.device_banner("auto")


@pytest.mark.parametrize("rule", ["per-buffer state_dict()", "one module walk"])
def test_doctor_names_the_installed_releases_rule_with_its_file_and_line(tmp_path, monkeypatch, rule) -> None:
    """A vLLM-Omni installed beside the kit (its module imports vllm, which is not there): read, never imported."""
    import importlib
    import sys

    from test_release import def_line, make_site, module_text

    from omni_loader import doctor

    make_site(tmp_path, rule, "0.28.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    check = next(c for c in doctor.diagnose() if c.what == "vLLM-Omni")
    line = def_line(module_text(rule))
    assert check.found.startswith(f"0.28.0: its Token2Wav's find_all_registers (qwen2_5_omni_token2wav.py:{line}) "
                                  f"is the {rule} rule")
    state_dict_line = line + next(i for i, text in enumerate(module_text(rule).splitlines()[line - 1:])
                                  if "state_dict()" in text) if "state_dict" in rule else None
    assert (f"the audit flags line {state_dict_line}" if state_dict_line else "the audit flags nothing in it") \
        in check.found
    assert "vllm_omni" not in sys.modules and "vllm" not in sys.modules


def test_the_record_names_the_installed_release_and_the_report_says_it(tmp_path, monkeypatch) -> None:
    import importlib

    from test_release import def_line, make_site, module_text

    from omni_loader.reporting.report_environment import vllm_omni_text
    from omni_loader.results.metadata import installed_vllm_omni

    assert installed_vllm_omni() is None and vllm_omni_text({"vllm_omni": None}) == "none"
    make_site(tmp_path, "per-buffer state_dict()", "0.28.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    found = installed_vllm_omni()
    line = def_line(module_text("per-buffer state_dict()"))
    assert (found["version"], found["line"], found["rule"]) == ("0.28.0", line, "per-buffer state_dict()")
    assert vllm_omni_text({"vllm_omni": found}) == ("0.28.0: find_all_registers is the per-buffer state_dict() "
                                                    f"rule (qwen2_5_omni_token2wav.py:{line})")
