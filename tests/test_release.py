"""A vLLM-Omni release's own find_all_registers: read from a package, a wheel or the file, never imported, run on
the kit's model with the same buffers and state_dict() calls as the kit's copy of its rule."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import torch

from omni_loader.bench.runner import check_variants
from omni_loader.errors import OmniLoaderError
from omni_loader.reporting.report_environment import variants_text
from omni_loader.results.suite import Suite
from omni_loader.token2wav import release as release_module
from omni_loader.token2wav.discovery import count_state_dict_calls, find_persistent_buffers
from omni_loader.token2wav.model import build_model, config_dict
from omni_loader.token2wav.release import MODULE, PER_BUFFER, WALK, read_release
from omni_loader.token2wav.variants import parse_variant, resolve_step, resolve_variants, variant_from, variant_text

BODIES = {
    PER_BUFFER: '''registers = {}
        for name, buf in self.named_buffers():
            if name in self.state_dict():
                registers[name] = {"name": name, "buffer": buf}
        return registers''',
    WALK: '''registers = {}
        non_persistent_names = set()
        for module_name, module in self.named_modules():
            for buffer_name in getattr(module, "_non_persistent_buffers_set", set()):
                non_persistent_names.add(f"{module_name}.{buffer_name}" if module_name else buffer_name)
        for name, buffer in self.named_buffers():
            if name not in non_persistent_names:
                registers[name] = {"name": name, "buffer": buffer}
        return registers''',
}
KIT_RULE = {PER_BUFFER: "baseline", WALK: "optimized"}


def module_text(rule: str) -> str:
    """The release's layout in small: vllm imported at the top (so importing it would fail here), a decorated
    method in a wrapper class."""
    return f'''import vllm
import torch
from torch import nn
from vllm.config import VllmConfig


class Qwen2_5OmniToken2WavForConditionalGenerationVLLM(nn.Module):
    def __init__(self, vllm_config: VllmConfig):
        super().__init__()

    @torch.no_grad()
    def find_all_registers(self):
        """Find all registered buffers."""
        {BODIES[rule]}
'''


def def_line(text: str) -> int:
    return text.splitlines().index("    def find_all_registers(self):") + 1


def make_site(root: Path, rule: str, version: str | None = "9.9.9") -> Path:
    """A site-packages folder holding vllm_omni/ and, with a version, its dist-info."""
    (root / MODULE).parent.mkdir(parents=True)
    (root / "vllm_omni" / "__init__.py").write_text("import vllm\n")
    (root / MODULE).write_text(module_text(rule))
    if version:
        (root / f"vllm_omni-{version}.dist-info").mkdir()
        (root / f"vllm_omni-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.4\nName: vllm-omni\nVersion: {version}\n")
    return root


def make_wheel(site: Path, wheel: Path) -> Path:
    with zipfile.ZipFile(wheel, "w") as zf:
        for f in sorted(site.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(site).as_posix())
    return wheel


@pytest.fixture(params=[PER_BUFFER, WALK])
def rule(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.mark.parametrize("form", ["site", "package", "wheel", "bare", "installed"])
def test_reads_version_file_line_and_rule_without_importing(tmp_path: Path, rule: str, form: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_site(tmp_path / "site", rule)
    text = (site / MODULE).read_text()
    if form == "installed":
        monkeypatch.syspath_prepend(str(site))
    given, file, version = {
        "site": (site, site / MODULE, "9.9.9"),
        "package": (site / "vllm_omni", site / MODULE, "9.9.9"),
        "wheel": (wheel := make_wheel(site, tmp_path / "vllm_omni-9.9.8-py3-none-any.whl"), wheel / MODULE, "9.9.9"),
        "bare": (bare := tmp_path / "token2wav.py", bare, None),
        "installed": (None, site / MODULE, "9.9.9"),
    }[form]
    if form == "bare":
        bare.write_text(text)
    release = read_release(given)
    assert (release.version, release.file, release.line, release.rule) == (version, file, def_line(text), rule)
    assert release.source.startswith("def find_all_registers(self):\n")  # the def line on, decorator left out
    assert release.to_dict()["label"] == (f"vLLM-Omni {version or '(version unknown)'}'s find_all_registers, "
                                          f"{file.name}:{def_line(text)}")
    assert "vllm" not in sys.modules and "vllm_omni" not in sys.modules


def test_the_version_comes_from_the_wheels_name_without_metadata(tmp_path: Path) -> None:
    wheel = make_wheel(make_site(tmp_path / "site", WALK, version=None), tmp_path / "vllm_omni-1.2.3-py3-none-any.whl")
    assert read_release(wheel).version == "1.2.3"


def test_discovery_finds_the_kits_buffers_with_the_rules_state_dict_calls(tmp_path: Path, rule: str) -> None:
    discover = read_release(make_site(tmp_path / "site", rule)).discovery()
    model = build_model(config_dict("tiny"))
    with count_state_dict_calls(model) as calls:
        found = discover(model)
    kit = find_persistent_buffers(model, KIT_RULE[rule])
    assert found.keys() == kit.keys() and len(found) == 1
    assert all(found[k] is kit[k] and torch.equal(found[k], kit[k]) for k in kit)
    buffers = sum(1 for _ in model.named_buffers())
    assert buffers > 1 and calls.calls == (buffers if rule == PER_BUFFER else 0)
    assert "vllm" not in sys.modules


def test_each_failure_is_one_line_naming_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_site(tmp_path / "site", WALK)
    (tmp_path / "empty").mkdir()
    (tmp_path / "no_function.py").write_text("def find_persistent(self):\n    return {}\n")
    (tmp_path / "broken.py").write_text("def find_all_registers(self:\n")
    (tmp_path / "junk.whl").write_bytes(b"not a zip")
    (tmp_path / "notes.txt").write_text("")
    other = make_wheel(tmp_path / "empty", tmp_path / "other-1.0-py3-none-any.whl")
    (site / MODULE).rename(tmp_path / "moved.py")
    cases = {tmp_path / "missing.whl": "does not exist", tmp_path / "empty": "holds no vllm_omni/",
             tmp_path / "no_function.py": "defines no find_all_registers",
             tmp_path / "broken.py": "is not valid Python (line 1", tmp_path / "junk.whl": "cannot read the wheel",
             other: "has no vllm_omni/model_executor", tmp_path / "notes.txt": "is not a .whl, a folder or a .py",
             site: "not found: this vLLM-Omni has no Qwen2.5-Omni Token2Wav"}
    for path, said in cases.items():
        with pytest.raises(OmniLoaderError) as err:
            read_release(path)
        assert said in str(err.value) and path.name in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setattr(release_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(OmniLoaderError, match=r"^no vLLM-Omni installed for .*--variant NAME=installed:PATH"):
        read_release()


def test_installed_variant_travels_as_a_string_and_names_its_release(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    site = make_site(tmp_path / "site", PER_BUFFER)
    make_wheel(site, tmp_path / "vllm_omni-9.9.9-py3-none-any.whl")
    monkeypatch.chdir(tmp_path)
    v = parse_variant("rel=installed:vllm_omni-9.9.9-py3-none-any.whl")
    assert v.discovery == f"installed:{tmp_path.resolve()}/vllm_omni-9.9.9-py3-none-any.whl"
    assert v.release and v.release["line"] == def_line(module_text(PER_BUFFER)) and v.release["rule"] == PER_BUFFER
    again = variant_from(v.to_dict())
    assert again == v and again.release == v.release and parse_variant(variant_text(v.to_dict())) == v
    assert callable(resolve_step(v.discovery, "discovery"))
    with pytest.raises(OmniLoaderError, match="only the discovery step"):
        resolve_step(v.discovery, "parameters")
    meta = Suite({"kind": "reproduce", "spec": {"variants": ["baseline", "rel"], "custom_variants": [v.to_dict()]}})
    assert ("rel = vLLM-Omni 9.9.9's find_all_registers, qwen2_5_omni_token2wav.py:" in variants_text(meta)
            and "(per-buffer state_dict())" in variants_text(meta))


def test_installed_without_vllm_omni_is_refused_before_any_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_variants is the job's first step; it refuses before it would start the step-import probe."""
    monkeypatch.setattr(release_module.importlib.util, "find_spec", lambda name: None)
    for call in (lambda: resolve_variants(["baseline", "optimized", "installed"]),
                 lambda: check_variants(("baseline", "optimized", "installed"), (), "cpu")):
        with pytest.raises(OmniLoaderError) as err:
            call()
        assert str(err.value).startswith("variant installed: no vLLM-Omni installed") and "\n" not in str(err.value)


RELEASES = {"0.28.0": (1511, PER_BUFFER), "0.30.0": (1514, WALK)}


@pytest.fixture(scope="session")
def real_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The released wheels from PyPI, downloaded once per session (skipped when the index cannot be reached)."""
    folder = tmp_path_factory.mktemp("wheels")
    for version in RELEASES:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"vllm-omni=={version}",
                               "-d", str(folder)], capture_output=True, text=True, timeout=300)
        if proc.returncode:
            pytest.skip(f"cannot download vllm-omni=={version}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return {v: next(folder.glob(f"vllm_omni-{v}-*.whl")) for v in RELEASES}


@pytest.mark.compat  # the released wheels from the package index: `make compat`, beside the other real environments
@pytest.mark.slow
@pytest.mark.subprocess
def test_real_releases_read_and_run_in_a_tiny_reproduce(real_wheels: dict[str, Path], tmp_path: Path) -> None:
    for version, (line, rule) in RELEASES.items():
        release = read_release(real_wheels[version])
        assert (release.version, release.line, release.rule) == (version, line, rule)
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "omni_loader", "reproduce", "--size", "tiny", "--runs", "3",
                           "--warmup", "0", "--variants", "baseline,optimized,r28,r30",
                           "--variant", f"r28=installed:{real_wheels['0.28.0']}",
                           "--variant", f"r30=installed:{real_wheels['0.30.0']}", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_csv(out / "runs.csv").drop_duplicates("run_id")
    calls = runs.groupby("variant")["state_dict_calls"].agg(set).to_dict()
    buffers = sum(1 for _ in build_model(config_dict("tiny"), device="meta").named_buffers())
    assert calls == {"baseline": {buffers}, "optimized": {0}, "r28": {buffers}, "r30": {0}}
    report = (out / "report.md").read_text()
    assert ("r28 = vLLM-Omni 0.28.0's find_all_registers, qwen2_5_omni_token2wav.py:1511 (per-buffer state_dict())"
            in report)
    assert "r30 = vLLM-Omni 0.30.0's find_all_registers, qwen2_5_omni_token2wav.py:1514 (one module walk)" in report
    assert "all 12 runs of all 4 variants (baseline, optimized, r28, r30) loaded identical tensors" in report
