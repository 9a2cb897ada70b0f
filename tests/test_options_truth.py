"""Every option reaches every place that names options (issue 31): the record, the report, the shell command, the
resume check. The lists of options are derived from the dataclasses' fields; these tests walk the fields, so a
field gains its test case here or the walk fails, and a field added to a copy of the dataclass shows up in each
place with no other edit. All in-process; no duration is asserted."""

from __future__ import annotations

import dataclasses
import os
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from omni_loader.bench.runner import started_record
from omni_loader.results.spec import BenchmarkSpec, spec_conflicts
from omni_loader.errors import ResultsError
from omni_loader.reporting import report_environment
from omni_loader.results.suite import Suite, store_benchmark
from omni_loader.startup.serve_ab import StartupSpec, serve_ab_conflicts
from omni_loader.token2wav.options import (NOTED, LoadOptions, command_words, flag, option, option_conflicts,
                                           option_fields, shell_words, spelled)

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)

FIRST_CPU = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
MINE = {"name": "mine", "discovery": "builtin:optimized", "parameters": "my_steps:copy", "memory": "",
        "needs_gpu": False}
BASE = BenchmarkSpec(checkpoint="/snap")
# One value away from its default for every option of BenchmarkSpec (its LoadOptions' among them).
CHANGED: dict[str, Any] = {
    "checkpoint": "/snap/other", "layout": "transformers", "device": "meta", "dtype": "bfloat16",
    "construct": "empty", "read": "eager", "cache": "cold", "warmup": 0, "runs": 3, "design": "fixed", "order": "abba", "seed": 7, "workers": "spawn",
    "worker_timeout": 30.0, "aa": True, "reference_copy": True, "threads": 2, "cpus": (FIRST_CPU,),
    "variants": ("optimized", "mine"), "custom_variants": (MINE,),
}


def test_every_option_has_a_changed_value_here() -> None:
    """The walk below covers every field: a new option must be given a value here, or this fails."""
    fields = option_fields(BenchmarkSpec)
    assert set(CHANGED) == set(fields), f"give these options a changed value: {set(fields) ^ set(CHANGED)}"
    assert all(CHANGED[name] != BASE.value(name) for name in fields)
    assert set(option_fields(LoadOptions)) <= set(fields)


@pytest.fixture
def no_machine_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record's environment without probing this machine (what is checked here is the spec, not the host)."""
    import omni_loader.results.metadata as metadata

    monkeypatch.setattr(metadata, "environment", lambda device="cpu": {"device": str(device), "device_name": "x"})
    monkeypatch.setattr(metadata, "command_line", lambda: "ipykernel_launcher.py -f /tmp/kernel.json")


def saved(spec: BenchmarkSpec, out: Path) -> Suite:
    """metadata.json as the runner writes it for ``spec`` (its own record function), read back."""
    store_benchmark(out, "load", started_record(spec, out, spec.plan(), None))
    return Suite.read(out)


def with_one(name: str) -> BenchmarkSpec:
    return BenchmarkSpec.from_flat({**BASE.flat(), name: CHANGED[name]})


def everything() -> BenchmarkSpec:
    return BenchmarkSpec.from_flat(CHANGED)


def test_the_record_holds_every_option(tmp_path: Path, no_machine_probe: None) -> None:
    spec = everything()
    meta = saved(spec, tmp_path / "r")
    recorded = meta.benchmark("load").settings
    for name in CHANGED:
        assert recorded[name] == (list(CHANGED[name]) if isinstance(CHANGED[name], tuple) else CHANGED[name]), name
    assert BenchmarkSpec.from_metadata(meta) == spec


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_environment_table_shows_every_option(name: str, tmp_path: Path, no_machine_probe: None) -> None:
    """Changing one option changes the report's environment table, which names the new value."""
    base = report_environment.environment_table(saved(BASE, tmp_path / "base"))
    table = report_environment.environment_table(saved(with_one(name), tmp_path / "one"))
    assert table != base, f"{name}: the environment table does not change with it"
    f = option_fields(BenchmarkSpec)[name]
    shown = flag(f) if isinstance(CHANGED[name], bool) else spelled(f, CHANGED[name]).split(",")[-1]
    assert shown in table, f"{name}: {shown!r} is not in the table"


def test_reproduce_read_eager_reports_eager(tmp_path: Path, no_machine_probe: None) -> None:
    """``reproduce --read eager``: the record and the report say eager (a hand list once made it say lazy)."""
    from omni_loader.cli import parse_args
    from omni_loader.cli.reproduce import new_spec

    args = parse_args(["reproduce", "--checkpoint", "/snap", "--device", "cpu", "--read", "eager", "--runs", "3",
                       "--warmup", "0"])
    spec = new_spec(args, SimpleNamespace(root=Path("/snap")))
    table = report_environment.environment_table(saved(spec, tmp_path / "r"))
    assert "| Shards read | eager |" in table


def shell_command(meta: Suite) -> list[str]:
    text = report_environment.command_text(meta.benchmark("load"))
    assert text.startswith("a notebook (Jupyter kernel); the same run from a shell: `")
    return shlex.split(text.split("`")[1])


@pytest.mark.parametrize("spec", [BASE, everything()], ids=["defaults", "every-option-changed"])
def test_the_shell_command_parses_back_to_the_same_spec(spec: BenchmarkSpec, tmp_path: Path,
                                                        no_machine_probe: None) -> None:
    """The command a notebook run's report prints, parsed by the CLI's own parser, makes the same spec."""
    from omni_loader.cli import parse_args
    from omni_loader.cli.reproduce import new_spec

    words = shell_command(saved(spec, tmp_path / "r"))
    assert words[:2] == ["omni-loader", "reproduce"]
    args = parse_args(words[1:])
    assert new_spec(args, SimpleNamespace(root=Path(args.checkpoint))) == spec


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_resume_names_every_changed_option(name: str, tmp_path: Path, no_machine_probe: None) -> None:
    """``--resume`` with one option changed is refused, naming that option as the user typed it."""
    from omni_loader.cli import parse_args
    from omni_loader.cli.reproduce import resume_spec

    out = tmp_path / "r"
    saved(BASE, out)
    f = option_fields(BenchmarkSpec)[name]
    words = shell_words(f, CHANGED[name])
    assert spec_conflicts(BASE, {name: CHANGED[name]})[0].startswith(flag(f))
    with pytest.raises(ResultsError, match="contradict the saved benchmark") as refused:
        resume_spec(parse_args(["reproduce", "--resume", "--out", str(out), *words]), out)
    assert f": {flag(f)} " in str(refused.value), (words, str(refused.value))


def compare_entry(label: str, meta: Suite) -> Any:
    """compare's entry of a results directory holding ``meta`` and no runs: what its checks read of the spec."""
    from omni_loader.compare.side_by_side import Entry
    from omni_loader.reporting.measurements import planned_arms

    return Entry(label, Path(label), False, meta, (), {},
                 variants=tuple(v for v in planned_arms(meta) if not v.startswith("aa-")))


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_compare_checks_every_option_that_changes_what_is_measured(name: str, tmp_path: Path,
                                                                   no_machine_probe: None) -> None:
    """Two reproductions alike but for one option: compare names it in a mismatch (``compared=True``: it times
    another load), explains it in a note (``NOTED``: another module tree, another page cache, other arms), or says
    nothing (``False``: runs, seeds, the machine's own values may differ). Every option declares which, so a new
    one is neither checked nor let through by omission."""
    from omni_loader.compare.side_by_side import consistency_checks

    f = option_fields(BenchmarkSpec)[name]
    assert f.metadata.get("compared") in (True, NOTED, False), f"{name}: declare option(compared=True, NOTED or False)"
    anchor = compare_entry("base", saved(BASE, tmp_path / "base"))
    other = compare_entry("one", saved(with_one(name), tmp_path / "one"))
    found = [(c.kind, c.what) for c in consistency_checks([anchor, other], anchor)]
    if f.metadata["compared"] is True:
        assert found == [("mismatch", flag(f))], name
    elif f.metadata["compared"] == NOTED:
        assert found and {kind for kind, _ in found} == {"note"}, (name, found)
    else:
        assert found == [], (name, found)


def test_serve_ab_names_every_changed_option() -> None:
    spec = StartupSpec("true a", "true b", "http://127.0.0.1:1/health").to_dict()
    changed = {"baseline_cmd": "true c", "optimized_cmd": "true d", "health_url": "http://127.0.0.1:2/health",
               "warmup": 0, "runs": 9, "order": "blocks", "timeout_s": 5.0, "grace_s": 1.0, "poll_interval_s": 0.5,
               "port_wait_s": 2.0, "patterns": {"x": "y(1)"}}
    assert set(changed) == set(option_fields(StartupSpec))
    for name, value in changed.items():
        assert value != spec[name]
        (line,) = serve_ab_conflicts(spec, {name: value})
        assert line.startswith(flag(option_fields(StartupSpec)[name]) + " "), line


def test_a_new_load_option_appears_everywhere_with_no_other_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 no_machine_probe: None) -> None:
    """A field added to (a copy of) LoadOptions reaches the parser, the stage server's argv, the record, the
    report, the shell command and the conflict check: each walks the fields, none lists them."""
    import argparse

    from omni_loader.cli.options import add_field_options

    grown = dataclasses.make_dataclass("LoadOptions", [("prefetch", str, option("off", help="read ahead"))],
                                       bases=(LoadOptions,), frozen=True)
    spec_cls = dataclasses.make_dataclass(
        "BenchmarkSpec", [("load", grown, option(default_factory=lambda: grown(device="cpu"), nested=grown))],
        bases=(BenchmarkSpec,), frozen=True)
    load = grown(device="cpu", prefetch="on")
    spec = spec_cls(checkpoint="/snap", load=load)

    parser = argparse.ArgumentParser()
    add_field_options(parser, spec_cls)
    assert parser.parse_args(["--checkpoint", "/s", "--prefetch", "on"]).prefetch == "on"  # the parser
    assert load.argv()[-2:] == ["--prefetch", "on"]  # the stage server's argv
    meta = saved(spec, tmp_path / "r")  # the record
    assert meta.benchmark("load").settings["prefetch"] == "on"
    assert "--prefetch on" in " ".join(command_words(spec_cls, spec.flat()))  # the shell command
    assert option_conflicts(spec_cls, spec.flat(), {"prefetch": "off"}) == ["--prefetch off (saved: on)"]
    monkeypatch.setattr(report_environment, "BenchmarkSpec", spec_cls)  # the report's class, as if grown in place
    table = report_environment.environment_table(meta)
    assert "--prefetch on" in table.split("| Other settings |")[1].splitlines()[0]  # the environment table
    assert "--prefetch on" in " ".join(shell_command(meta))


def test_profile_diff_aa_is_reproduce_aa(capsys: pytest.CaptureFixture[str]) -> None:
    """``profile --diff --aa`` is declared from BenchmarkSpec's ``aa`` field, as reproduce's: its flag, and its help
    words, which the profile's help then says of functions."""
    from omni_loader.cli import parse_args

    f = option_fields(BenchmarkSpec)["aa"]
    assert parse_args(["profile", "--diff", flag(f), "--out", "x"]).aa is True
    assert parse_args(["profile", "--diff", "--out", "x"]).aa is False
    assert parse_args(["reproduce", flag(f)]).aa is True
    with pytest.raises(SystemExit):
        parse_args(["profile", "--help"])
    assert f"{flag(f)} {f.metadata['help']}, per function" in " ".join(capsys.readouterr().out.split())
