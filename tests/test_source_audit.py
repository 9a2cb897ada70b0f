"""The source audit (``audit --source``, rule OL001): whole-tree module walks evaluated once per loop iteration.

Every shape is a small source snippet written into ``tmp_path`` and read with ``ast`` (nothing is
imported or run): the walk directly in a loop, in a comprehension, behind ``self.method()``, a
module-level function or an import; and the shapes that are not findings (the loop's own item, a
walk hoisted before the loop, the loop's iterable, a loop left right after the walk,
``recurse=False``, an ignore comment). The command line is driven in-process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omni_loader.cli import main
from omni_loader.errors import OmniLoaderError
from omni_loader.lint.findings import Finding, findings_markdown
from omni_loader.sweep.price import COST_FILE, TreeSize, VisitCost, audit_sources, price_findings, visit_cost
from omni_loader.lint.source_audit import SourceAudit, scan_sources
from omni_loader.lint.sources import SourceError

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, code in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code))
    return tmp_path


def scan(tmp_path: Path, code: str, **more: str) -> SourceAudit:
    return scan_sources([write(tmp_path, {"mod.py": code, **more})])


def found(tmp_path: Path, code: str, **more: str) -> list[Finding]:
    return list(scan(tmp_path, code, **more).findings)


def line_of(code: str, marker: str) -> int:
    """The 1-based line of ``marker`` in the dedented ``code``."""
    return next(i for i, line in enumerate(textwrap.dedent(code).splitlines(), 1) if marker in line)


# --------------------------------------------------------------------------- found: direct


def test_direct_for_loop(tmp_path: Path) -> None:
    code = """
    def discover(model, names):
        out = []
        for name in names:
            if name in model.state_dict():  # walk
                out.append(name)
        return out
    """
    [f] = found(tmp_path, code)
    assert (f.line, f.walk, f.function, f.loop_line, f.loop_function, f.loop_kind, f.chain) == (
        line_of(code, "# walk"), "model.state_dict()", "mod.discover", line_of(code, "for name"), "mod.discover",
        "for", ())
    assert f.path == f.loop_path == str(tmp_path / "mod.py") and f.call_line is None and not f.partial


def test_while_loop_test_and_body(tmp_path: Path) -> None:
    code = """
    def drain(model, queue):
        while len(model.state_dict()) > len(queue):  # test
            queue.append(sum(1 for _ in model.named_modules()))  # body
    """
    assert sorted(f.line for f in found(tmp_path, code)) == [line_of(code, "# test"), line_of(code, "# body")]


@pytest.mark.parametrize("expr", [
    "[n for n in names if n in model.state_dict()]",
    "{n for n in names if model.state_dict().get(n) is not None}",
    "{n: model.state_dict()[n] for n in names}",
    "any(n in model.state_dict() for n in names)",
    "[[p for p in model.parameters()] for n in names]",  # an inner iterable, evaluated per outer element
])
def test_comprehensions_and_generators(tmp_path: Path, expr: str) -> None:
    [f] = found(tmp_path, f"def f(model, names):\n    return {expr}\n")
    assert f.loop_kind == "comprehension" and f.loop_line == 2


def test_the_token2wav_baseline_shape_is_found(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    def baseline(model):
        return {name: buf for name, buf in model.named_buffers() if name in model.state_dict()}
    """)
    assert f.walk == "model.state_dict()"  # the comprehension's own iterable, one walk, is not a finding


def test_dict_of_a_named_walk(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    def per_node(model, nodes):
        for node in nodes:
            modules = dict(model.named_modules())
            modules[node].train()
    """)
    assert f.walk == "dict(model.named_modules())" and f.method == "named_modules"


def test_get_submodule_counts_and_says_it_walks_a_path(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    def owners(model, names):
        return [model.get_submodule(n.rpartition(".")[0]) for n in names]
    """)
    assert f.partial and f.method == "get_submodule" and "along a path" in f.message()


def test_get_module_by_name(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    from helpers import get_module_by_name

    def non_persistent(model, buffers):
        for name in buffers:
            owner = get_module_by_name(model, name.rpartition(".")[0])
            if name in owner._non_persistent_buffers_set:
                yield name
    """)
    assert f.method == "get_module_by_name" and f.partial


# --------------------------------------------------------------------------- found: through calls


def test_through_self_method(tmp_path: Path) -> None:
    code = """
    class Loader:
        def params(self):
            return dict(self.named_parameters())  # walk

        def load_weights(self, weights):
            for name, tensor in weights:  # loop
                self.params()[name].copy_(tensor)  # call
    """
    [f] = found(tmp_path, code)
    assert (f.line, f.function, f.loop_line, f.loop_function, f.chain, f.call_line) == (
        line_of(code, "# walk"), "mod.Loader.params", line_of(code, "# loop"), "mod.Loader.load_weights",
        ("mod.Loader.params",), line_of(code, "# call"))
    assert "via mod.Loader.params" in f.message()


def test_through_a_base_class_method(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    class Base:
        def lookup(self, name):
            return self.state_dict()[name]

    class Model(Base):
        def load(self, names):
            return [self.lookup(n) for n in names]
    """)
    assert f.chain == ("mod.Base.lookup",)


def test_through_module_functions_two_deep(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    def is_persistent(model, name):
        return name in model.state_dict()

    def check(model, name):
        return is_persistent(model, name)

    def discover(model, names):
        return [n for n in names if check(model, n)]
    """)
    assert f.chain == ("mod.check", "mod.is_persistent") and f.loop_function == "mod.discover"


@pytest.mark.parametrize("importer", [
    "from pkg.helpers import is_persistent\n\ndef run(model, names):\n    for n in names:\n        is_persistent(model, n)\n",
    "from pkg import helpers\n\ndef run(model, names):\n    for n in names:\n        helpers.is_persistent(model, n)\n",
    "import pkg.helpers as h\n\ndef run(model, names):\n    for n in names:\n        h.is_persistent(model, n)\n",
    "from .helpers import is_persistent\n\ndef run(model, names):\n    for n in names:\n        is_persistent(model, n)\n",
])
def test_through_an_import_across_two_files(tmp_path: Path, importer: str) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": "def is_persistent(model, name):\n"
                     "    return name in model.state_dict()\n", "pkg/loader.py": importer})
    [f] = scan_sources([tmp_path / "pkg"]).findings
    assert f.path.endswith("helpers.py") and f.loop_path.endswith("loader.py")
    assert f.chain == ("pkg.helpers.is_persistent",) and f.loop_function == "pkg.loader.run"


def test_an_unresolved_call_is_not_guessed(tmp_path: Path) -> None:
    audit = scan(tmp_path, """
    class Helper:
        def is_persistent(self, model, name):
            return name in model.state_dict()

    def discover(model, names, helper):
        return [n for n in names if helper.is_persistent(model, n)]
    """)
    assert audit.findings == ()
    [u] = audit.unresolved  # noted, not reported: which class `helper` is cannot be known from the source
    assert u.call == "helper.is_persistent" and u.candidates == ("mod.Helper.is_persistent",)


def test_a_call_on_the_loop_item_is_not_a_finding(tmp_path: Path) -> None:
    assert found(tmp_path, """
    def count(module):
        return sum(1 for _ in module.parameters())

    def sizes(model):
        return {name: count(m) for name, m in model.named_modules()}
    """) == []


def test_recursion_between_functions_ends(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    def a(model, n):
        return b(model, n - 1) if n else model.state_dict()

    def b(model, n):
        return a(model, n)

    def run(model, xs):
        for x in xs:
            a(model, x)
    """)
    assert f.loop_function == "mod.run"


# --------------------------------------------------------------------------- not found


@pytest.mark.parametrize("code", [
    # the loop's own item, or something derived from it
    "def f(model):\n    for m in model.modules():\n        m.named_buffers(recurse=False)\n",
    "def f(model):\n    for name, m in model.named_modules():\n        m.buffers()\n",
    "def f(model, names):\n    for n in names:\n        sub = getattr(model, n)\n        sub.state_dict()\n",
    "def f(model):\n    return [m.state_dict() for m in model.children()]\n",
    # hoisted before the loop
    "def f(model, names):\n    sd = model.state_dict()\n    return [n for n in names if n in sd]\n",
    # the loop's iterable is one walk
    "def f(model):\n    for n, b in model.named_buffers():\n        print(n)\n",
    "def f(model):\n    return [n for n, _ in model.named_parameters()]\n",
    # recurse=False walks one module; named_children() one level
    "def f(model, names):\n    for n in names:\n        model.named_buffers(recurse=False)\n        model.parameters(False)\n",
    "def f(model, names):\n    for n in names:\n        dict(model.named_children())\n",
    # next() on a lazy walk stops at the first item
    "def f(model, xs):\n    return [x.to(next(model.parameters()).device) for x in xs]\n",
    # a result kept on first need: walked once
    "def f(model, names):\n    sd = None\n    for n in names:\n        if sd is None:\n            sd = model.state_dict()\n"
    "        print(sd[n])\n",
    "class C:\n    def sd(self):\n        if self._sd is None:\n            self._sd = self.state_dict()\n"
    "        return self._sd\n\n    def load(self, names):\n        return [self.sd()[n] for n in names]\n",
    # a parameter left at its default (None) is no tree
    "def g(model, extra=None):\n    if extra is not None:\n        extra.state_dict()\n    return model\n\n"
    "def f(model, names):\n    for n in names:\n        g(n)\n",
    # an optimizer's state_dict() walks no module tree
    "def f(self, ranks):\n    for r in ranks:\n        self.optimizer.state_dict()\n",
    # a loop that names no item repeats on purpose (warm-ups, steps): no per-item walk
    "def f(model):\n    for _ in range(5):\n        model.state_dict()\n",
    # a model made anew every iteration
    "def f(configs):\n    for c in configs:\n        Model(c).state_dict()\n",
    "def f(configs):\n    for c in configs:\n        m = build(c)\n        m.state_dict()\n",
])
def test_not_a_finding(tmp_path: Path, code: str) -> None:
    assert found(tmp_path, code) == []


def test_break_after_the_first_match_both_ways(tmp_path: Path) -> None:
    walks_each_time = """
    def first(model, xs, t):
        for x in xs:
            if model.state_dict()[x] is t:
                break
    """
    assert len(found(tmp_path, walks_each_time)) == 1  # the walk runs before the exit is decided
    for once in ("""
    def first(model, xs):
        for x in xs:
            sd = model.state_dict()
            return sd[x]
    """, """
    def first(model, xs, t):
        for x in xs:
            if x == t:
                hit = model.state_dict()[x]
                break
    """, """
    def first(model, xs, t):
        while xs:
            if xs.pop() == t:
                raise KeyError(model.state_dict()[t])
    """):
        assert found(tmp_path, once) == [], once


def test_left_after_an_inner_loop_but_walked_per_outer_iteration(tmp_path: Path) -> None:
    code = """
    def f(model, groups, t):
        for group in groups:  # outer
            for x in group:
                if x == t:
                    hit = model.state_dict()[x]
                    break
    """
    [f] = found(tmp_path, code)
    assert f.loop_line == line_of(code, "# outer")


def test_a_repeat_loop_inside_a_loop_over_items_is_looked_through(tmp_path: Path) -> None:
    code = "def f(model, names):\n    for n in names:\n        for _ in range(3):\n            model.state_dict()\n"
    [f] = found(tmp_path, code)
    assert (f.loop_line, f.loop_kind) == (2, "for")


def test_a_loop_left_after_the_call_is_once_per_call(tmp_path: Path) -> None:
    assert found(tmp_path, """
    def lookup(model, name):
        for n in [name]:
            return model.state_dict()[n]
    """) == []


@pytest.mark.parametrize("comment,where", [("# omni-loader: ignore", "walk"), ("# noqa: OL001", "walk"),
                                           ("# noqa: E501, OL001", "loop"), ("# omni-loader: ignore", "loop")])
def test_suppression_comment(tmp_path: Path, comment: str, where: str) -> None:
    walk_comment, loop_comment = (comment, "") if where == "walk" else ("", comment)
    audit = scan(tmp_path, f"def f(model, names):\n    for n in names:  {loop_comment}\n"
                           f"        model.state_dict()  {walk_comment}\n")
    assert audit.findings == () and audit.suppressed == 1


def test_a_noqa_for_another_rule_does_not_silence(tmp_path: Path) -> None:
    assert len(found(tmp_path, "def f(model, names):\n    for n in names:\n        model.state_dict()  # noqa: E501\n")) == 1


def test_the_kits_own_token2wav_baseline_is_found() -> None:
    hits = [f for f in scan_sources([REPO / "omni_loader" / "token2wav"]).findings if f.path.endswith("discovery.py")]
    assert [f.function for f in hits] == ["omni_loader.token2wav.discovery._baseline"]


# --------------------------------------------------------------------------- the command line


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["audit", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


WALKING = "def f(model, names):\n    for n in names:\n        model.state_dict()\n"


def test_cli_exit_0_when_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"clean.py": "def f(model):\n    sd = model.state_dict()\n    return list(sd)\n"})
    rc, out, err = cli(capsys, "--source", str(tmp_path))
    assert (rc, out) == (0, "") and "0 findings in 1 files" in err


def test_cli_text_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"walk.py": WALKING}) / "walk.py"
    rc, out, _ = cli(capsys, "--source", str(path))
    [line] = out.splitlines()
    assert rc == 1 and line.startswith(f"{path}:3: OL001 model.state_dict() walks the whole module tree")
    assert "unpriced" in line


def test_cli_json_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"walk.py": WALKING})
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--json")
    [f] = json.loads(out)
    assert rc == 1 and {"path", "line", "function", "walk", "loop_path", "loop_line", "loop_function", "chain",
                        "message", "priced"} <= set(f)
    assert (f["line"], f["loop_line"], f["chain"], f["priced"]) == (3, 2, [], False)
    assert cli(capsys, "--source", str(tmp_path), "--format", "json")[1] == out


def test_cli_sarif(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"walk.py": WALKING})
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--format", "sarif")
    sarif = json.loads(out)
    assert rc == 1 and sarif["version"] == "2.1.0" and "sarif" in sarif["$schema"]
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "omni-loader" and run["tool"]["driver"]["rules"][0]["id"] == "OL001"
    [result] = run["results"]
    assert result["ruleId"] == "OL001" and "state_dict()" in result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("walk.py") and location["region"]["startLine"] == 3
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 2


@pytest.mark.parametrize("argv,says", [
    (["--source", "no/such/file.py"], "no/such/file.py"),
    (["--source", "{bad}"], "bad.py:2: cannot parse"),
    (["--source", "{ok}", "--arch", "bert"], "does not combine with --arch"),
    (["--modules", "10", "--items", "3"], "--modules belongs to a source audit"),
    (["--arch", "bert", "--format", "github"], "--format belongs to a source audit"),
    (["--arch", "bert", "--select", "OL002"], "--select belongs to a source audit"),
    (["--source", "{ok}", "--modules", "10"], "give both --modules N and --items M"),
    (["--source", "{ok}", "--modules", "0", "--items", "3"], "--modules must be at least 1"),
])
def test_cli_bad_input_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    write(tmp_path, {"bad.py": "x = 1\ndef f(:\n", "ok.py": "x = 1\n"})
    argv = [a.format(bad=tmp_path / "bad.py", ok=tmp_path / "ok.py") for a in argv]
    rc, out, err = cli(capsys, *argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("omni-loader: error: ") and says in err


# --------------------------------------------------------------------------- pricing


def test_pricing_with_a_given_per_visit_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"walk.py": WALKING})
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--modules", "1092", "--items", "219",
                     "--visit-cost", "0.000002", "--json")
    [f] = json.loads(out)
    assert rc == 1 and f["priced"] and (f["modules"], f["items"], f["visits"]) == (1092, 219, 1092 * 219)
    assert f["seconds_total"] == pytest.approx(1092 * 219 * 2e-6)
    assert f["seconds_per_iteration"] == pytest.approx(1092 * 2e-6)
    assert "B·N = 239,148 module visits ≈ 478 ms here" in f["message"]
    # the same through the library call a notebook makes
    [g] = audit_sources(tmp_path, modules=1092, items=219, seconds_per_visit=2e-6)
    assert g.price is not None and g.price.visits == 239_148 and "B·N = 239,148" in g.message()
    assert "239,148" in findings_markdown([g])
    assert "| 478\u00a0ms |" in findings_markdown([g])  # the time never breaks between number and unit


def test_a_path_walk_is_priced_as_an_upper_bound(tmp_path: Path) -> None:
    [f] = found(tmp_path, "def f(model, names):\n    return [model.get_submodule(n) for n in names]\n")
    [priced] = price_findings([f], TreeSize("given", 100, 10), VisitCost(1e-6, "given"))
    assert "at most B·N = 1,000 module visits" in priced.message()


def test_the_per_visit_cost_from_a_saved_sweep(tmp_path: Path) -> None:
    rows = ["experiment,source,N,B,x,repeat,seconds,cpu_seconds,number"]
    for n in (16, 64, 256, 1024):
        for b in (4, 16):
            rows.append(f"state_dict,synthetic,{n},{b},{n},0,{3e-6 * n:.12g},{3e-6 * n:.12g},1")
    (tmp_path / "traversal.csv").write_text("\n".join(rows) + "\n")
    cost = visit_cost(results=tmp_path)
    assert cost.seconds == pytest.approx(3e-6, rel=1e-6) and "traversal.csv" in cost.basis


def test_the_per_visit_cost_is_cached_per_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omni_loader.sweep import price

    calls = []
    monkeypatch.setattr(price, "measure_cost", lambda: calls.append(1) or VisitCost(5e-6, "measured"))
    assert visit_cost(cache_dir=tmp_path).seconds == 5e-6 and calls == [1]
    assert visit_cost(cache_dir=tmp_path).seconds == 5e-6 and calls == [1]  # read back, not measured again
    saved = json.loads((tmp_path / COST_FILE).read_text())
    saved["machine"]["node"] = "another-machine"
    (tmp_path / COST_FILE).write_text(json.dumps(saved))
    visit_cost(cache_dir=tmp_path)
    assert calls == [1, 1]


@pytest.mark.slow
def test_like_token2wav_prices_with_its_own_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from omni_loader.token2wav.model import inventory

    inv = inventory("vllm-omni", "full")
    write(tmp_path, {"walk.py": WALKING})
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--like", "token2wav", "--visit-cost", "1e-6", "--json")
    [f] = json.loads(out)
    assert rc == 1 and (f["modules"], f["items"]) == (inv.modules, inv.named_buffers)
    assert f["visits"] == inv.modules * inv.named_buffers and "token2wav" in f["basis"]


def test_pre_commit_hook_is_declared() -> None:
    """Read as plain ``key: value`` lines (PyYAML is not a dependency of the kit)."""
    lines = [ln.strip().lstrip("- ") for ln in (REPO / ".pre-commit-hooks.yaml").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    hook = dict(ln.split(": ", 1) for ln in lines)
    assert hook["id"] == "omni-loader-audit" and hook["entry"] == "omni_loader/__main__.py audit --source"
    assert hook["language"] == "script" and hook["types"] == "[python]"
    assert (REPO / hook["entry"].split()[0]).is_file()


def test_the_findings_price_is_set_beside_the_sweeps_line_and_its_measured_model(tmp_path: Path) -> None:
    """05 showed three prices for B·N = 239,148 (the line 775 ms, Token2Wav measured 1,005 ms, the finding
    "≈ 833 ms") and no word on why: one computed line says what the finding's figure rests on (visits × state_dict()'s
    per-module cost on the same sweep's synthetic trees), what the line's rests on (a power law of its slope, extended
    past its range) and how the measured model compares."""
    import math
    from types import SimpleNamespace

    import pandas as pd

    from omni_loader.sweep.price import Findings, cost_from_rows
    from omni_loader.sweep.fits import LogLogFit

    rows = pd.DataFrame([{"experiment": "state_dict", "source": "synthetic", "N": n, "B": b, "x": n, "repeat": 0,
                          "seconds": 3.5e-6 * n, "cpu_seconds": 3.5e-6 * n, "number": 1}
                         for n in (16, 64, 256, 1024) for b in (4, 16)])
    fit = LogLogFit(0.953, math.log10(0.775031) - 0.953 * math.log10(239_148), 0.99, 0.03, 12, 64, 65_536)
    placement = pd.DataFrame([{"experiment": "baseline", "source": "token2wav-full", "N": 1092, "B": 219,
                               "x": 239_148, "median_seconds": 1.004619, "predicted_seconds": 0.775031,
                               "measured_over_fit": 1.30, "inside_fitted_range": False}])
    sweep = SimpleNamespace(rows=rows, fits={"baseline": fit}, placement=placement)
    [f] = price_findings(found(tmp_path, WALKING), TreeSize("token2wav", 1092, 219),
                         cost_from_rows(rows, "fitted from traversal.csv"))
    line = Findings([f]).price_beside(sweep)
    assert line.startswith("The finding's ≈ 837 ms is 239,148 module visits × 3.50 µs (state_dict()'s cost per "
                           "module, fitted on this sweep's synthetic trees)")
    assert "The sweep's B·N line predicts 775 ms at the same B·N: a power law of slope 0.95, extended 3.65× past " \
           "the 65,536 its fit ends at." in line
    assert "Measured, full-size Token2Wav took 1,005 ms, 1.20× the finding's price: 4.20 µs per visit, its modules " \
           "dearer to visit" in line
    assert Findings(found(tmp_path, WALKING)).price_beside(sweep) == ""  # no price, no line


# --------------------------------------------------------------------------- cannot be hung or exhausted


def run_cli(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """The command in its own process, with a deadline: a read that hangs fails the test instead of the suite."""
    return subprocess.run([sys.executable, "-m", "omni_loader", "audit", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


@pytest.mark.subprocess
def test_a_fifo_a_device_and_a_socket_are_refused_not_read(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/walk.py": WALKING})
    os.mkfifo(tmp_path / "pkg" / "pipe.py")  # met in a walk
    os.mkfifo(tmp_path / "named_pipe.py")  # named on the command line
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "pkg" / "sock.py"))
    try:
        done = run_cli("--source", str(tmp_path / "pkg"), str(tmp_path / "named_pipe.py"), "/dev/zero",
                       "--max-file-size", "0", "--no-cache")
    finally:
        sock.close()
    errors = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(errors) == 4, done.stderr
    for name, kind in (("pipe.py", "a FIFO"), ("named_pipe.py", "a FIFO"), ("/dev/zero", "a character device"),
                       ("sock.py", "a socket")):
        [line] = [e for e in errors if Path(e.split(": ")[2]).name == Path(name).name]
        assert line.endswith(f"{name}: {kind}, not a regular file: refused")
        assert line.startswith("omni-loader: error: ")
    assert "walk.py:3: OL001" in done.stdout  # the rest is still audited


def test_a_file_over_the_size_cap_is_refused_and_the_cap_can_be_lifted(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"big.py": WALKING + "x = 1\n" * 400}) / "big.py"
    rc, out, err = cli(capsys, "--source", str(path), "--max-file-size", "1000")
    assert (rc, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert f"{path}: {path.stat().st_size:,} bytes, over the 1,000-byte cap: refused (--max-file-size BYTES raises it" in err
    assert cli(capsys, "--source", str(path), "--max-file-size", "0")[0] == 1
    assert cli(capsys, "--source", str(path))[0] == 1  # the 5 MB default


def test_a_file_that_grows_past_the_cap_while_read_is_cut_off(tmp_path: Path) -> None:
    from omni_loader.lint.sources import SourceError, read_bounded

    path = write(tmp_path, {"f.py": "x = 1\n" * 100}) / "f.py"
    assert len(read_bounded(path, 600)) == 600
    with pytest.raises(SourceError, match="over the 599-byte cap"):
        read_bounded(path, 599)


@pytest.mark.parametrize("code,says", [
    ("x = " + "a+" * 100_000 + "a\n", "too deeply nested for Python's parser"),
    ("x = a" + ".b" * 100_000 + "\n", "too deeply nested for Python's parser"),
    ("x = f" + "()" * 100_000 + "\n", "too deeply nested for Python's parser"),
    ("def g(xs, model):\n    for x in xs:\n        a" + ".b" * 400 + ".c()\n", "too deeply nested for the audit"),
])
def test_deep_nesting_is_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str], code: str,
                                                  says: str) -> None:
    path = write(tmp_path, {"deep.py": code, "walk.py": WALKING}) / "deep.py"
    rc, out, err = cli(capsys, "--source", str(tmp_path), "--no-cache")
    assert rc == 2 and err == f"omni-loader: error: {path}: {says}: not audited\n"
    assert "walk.py:3: OL001" in out


def test_an_unreadable_file_and_folder_are_listed_not_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"walk.py": WALKING, "secret/a.py": "x = 1\n", "locked.py": "x = 1\n"})
    real_scandir, real_open = os.scandir, os.open

    def scandir(path=".", *a):
        if Path(path).name == "secret":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *a)

    def os_open(path, *a, **k):
        if Path(path).name == "locked.py":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "scandir", scandir)  # what os.walk lists a folder with (root reads every file)
    monkeypatch.setattr(os, "open", os_open)
    rc, out, err = cli(capsys, "--source", str(tmp_path), "--no-cache")
    assert rc == 2 and "walk.py:3: OL001" in out
    assert sorted(err.strip().splitlines()) == [
        f"omni-loader: error: {tmp_path / 'locked.py'}: cannot read: Permission denied",
        f"omni-loader: error: {tmp_path / 'secret'}: cannot list this folder: Permission denied"]


@pytest.mark.parametrize("option", [["--out", "x"], ["--top", "3"], ["--repeats", "2"]])
def test_options_of_the_architecture_audit_are_refused_with_source(tmp_path: Path, capsys, option) -> None:
    write(tmp_path, {"ok.py": "x = 1\n"})
    rc, out, err = cli(capsys, "--source", str(tmp_path), *option)
    assert (rc, out) == (2, "") and err == (f"omni-loader: error: {option[0]} belongs to the architecture audit "
                                            "(--arch/--all): a source audit does not use it\n")


def test_exit_status_2_beats_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"walk.py": WALKING, "bad.py": "def f(:\n"})
    rc, out, err = cli(capsys, "--source", str(tmp_path))
    assert rc == 2 and "OL001" in out and "bad.py:1: cannot parse" in err and "audit --source:" not in err
    with pytest.raises(SourceError, match="bad.py:1: cannot parse"):  # the library call raises rather than hide it
        audit_sources(tmp_path)


# --------------------------------------------------------------------------- bounds on the pricing inputs


@pytest.mark.parametrize("argv,says", [
    (["--visit-cost", "nan"], "--visit-cost nan: must be a finite number of seconds above 0 and at most 1"),
    (["--visit-cost", "inf"], "--visit-cost inf: must be a finite"),
    (["--visit-cost=-1e-6"], "--visit-cost -1e-6: must be"),
    (["--visit-cost", "0"], "--visit-cost 0: must be"),
    (["--visit-cost", "2"], "--visit-cost 2: must be"),
    (["--modules", "100000001", "--items", "3"], "--modules must be at least 1 and at most 10,000,000"),
    (["--modules", "10", "--items", "1e3"], "--items must be at least 1 and at most 10,000,000 (a whole number), "
                                            "not 1e3"),
    (["--modules", "10", "--items", "-4"], "--items must be at least 1"),
])
def test_pricing_inputs_out_of_bounds_are_one_line(tmp_path: Path, capsys, argv: list[str], says: str) -> None:
    write(tmp_path, {"walk.py": WALKING})
    rc, out, err = cli(capsys, "--source", str(tmp_path), *argv)
    assert (rc, out) == (2, "") and err.startswith(f"omni-loader: error: {says}") and len(err.splitlines()) == 1
    with pytest.raises(OmniLoaderError):  # the library call holds to the same bounds
        audit_sources(tmp_path, modules=10**8, items=3, seconds_per_visit=1e-6)
    with pytest.raises(OmniLoaderError, match="--visit-cost"):
        audit_sources(tmp_path, modules=10, items=3, seconds_per_visit=float("inf"))


def test_the_cost_cache_is_never_written_through_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omni_loader.sweep import price

    monkeypatch.setattr(price, "measure_cost", lambda: VisitCost(5e-6, "measured"))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / COST_FILE).symlink_to(victim)
    with pytest.raises(OmniLoaderError, match="is a symbolic link"):
        visit_cost(cache_dir=tmp_path / "cache")
    assert victim.read_text() == "keep me"
    (tmp_path / "cache" / COST_FILE).unlink()
    visit_cost(cache_dir=tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [COST_FILE]  # written by a rename, no litter
    (tmp_path / "cache" / COST_FILE).write_text('{"machine": 1, "seconds_per_visit": "nan"}')
    assert visit_cost(cache_dir=tmp_path / "cache").seconds == 5e-6  # a cached nan is measured again


# --------------------------------------------------------------------------- rules, selection, baselines, formats


PATH_WALK = "def f(model, names):\n    return [model.get_submodule(n) for n in names]\n"


def test_a_path_walk_is_ol002_and_reported_only_when_selected(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"path.py": PATH_WALK, "walk.py": WALKING})
    rc, out, _ = cli(capsys, "--source", str(tmp_path))
    assert rc == 1 and [ln.split(": ")[1].split()[0] for ln in out.splitlines()] == ["OL001"]

    def rules(*argv: str) -> list[str]:
        return sorted(f["rule"] for f in json.loads(cli(capsys, "--source", str(tmp_path), "--json", *argv)[1]))

    assert rules("--select", "OL002") == ["OL002"]
    assert rules("--select", "OL001,OL002") == rules("--select", "OL") == rules("--select", "ALL") == ["OL001", "OL002"]
    assert rules("--select", "OL", "--ignore", "OL001") == ["OL002"]
    assert cli(capsys, "--source", str(tmp_path), "--ignore", "OL001")[0] == 0
    rc, _, err = cli(capsys, "--source", str(tmp_path), "--select", "E501")
    assert rc == 2 and "--select E501: no rule begins so" in err


def test_a_noqa_names_the_rule_it_silences(tmp_path: Path) -> None:
    code = ("def f(model, names):\n    for n in names:\n        model.get_submodule(n)  # noqa: OL002\n"
            "        model.state_dict()  # noqa: OL002\n")
    [f] = found(tmp_path, code)
    assert (f.rule, f.line) == ("OL001", 4)


def test_a_baseline_lets_known_findings_through_even_when_lines_move(tmp_path: Path, capsys,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"src/walk.py": WALKING})
    rc, out, err = cli(capsys, "--source", "src", "--write-baseline", "base.json")
    assert (rc, out) == (0, "") and "1 written to base.json" in err
    [entry] = json.loads((tmp_path / "base.json").read_text())["findings"]
    assert entry == {"path": "src/walk.py", "rule": "OL001", "code": "model.state_dict()", "count": 1}
    write(tmp_path, {"src/walk.py": "import os\n\n\n" + WALKING})  # the finding moves down three lines
    rc, out, err = cli(capsys, "--source", "src", "--baseline", "base.json")
    assert (rc, out) == (0, "") and "1 known from the baseline" in err
    write(tmp_path, {"src/walk.py": WALKING + "        model.named_modules()\n"})  # a new finding
    rc, out, _ = cli(capsys, "--source", "src", "--baseline", "base.json")
    [line] = out.splitlines()
    assert rc == 1 and line.startswith("src/walk.py:4: OL001 model.named_modules()")
    (tmp_path / "bad.json").write_text("[]")
    rc, _, err = cli(capsys, "--source", "src", "--baseline", "bad.json")
    assert rc == 2 and "--baseline bad.json: not a baseline written by --write-baseline" in err


def test_github_annotations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"walk,1.py": WALKING}) / "walk,1.py"
    rc, out, _ = cli(capsys, "--source", str(path), "--format", "github")
    [line] = out.splitlines()
    assert rc == 1 and line.startswith(f"::warning file={str(path).replace(',', '%2C')},line=3,col=9,title=OL001::"
                                       "model.state_dict() walks the whole module tree once per iteration")


def test_sarif_names_every_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"path.py": PATH_WALK})
    sarif = json.loads(cli(capsys, "--source", str(tmp_path), "--select", "OL002", "--format", "sarif")[1])
    run = sarif["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["OL001", "OL002", "OL003"]
    [result] = run["results"]
    assert (result["ruleId"], result["ruleIndex"], result["properties"]["severity"]) == ("OL002", 1, "low")


# --------------------------------------------------------------------------- severity from what the code tells


QUADRATIC = """
class Loader:
    def discover(self):
        out = []
        for name, buf in self.named_buffers():
            if name in self.state_dict():
                out.append(name)
        return out
"""


def test_a_walk_inside_a_loop_over_the_same_tree_is_quadratic(tmp_path: Path) -> None:
    [f] = found(tmp_path, QUADRATIC)
    assert f.quadratic and f.severity == "high" and f.over == "self.named_buffers()"
    assert "quadratic in the tree's size (the loop goes over self.named_buffers(), a walk of the same tree" in \
        f.message() and "unpriced" not in f.message()


def test_quadratic_through_a_helper_and_not_for_another_tree(tmp_path: Path) -> None:
    [f] = found(tmp_path, """
    def is_persistent(module, name):
        return name in module.state_dict()

    def discover(model):
        return [n for n, _ in model.named_buffers() if is_persistent(model, n)]
    """)
    assert f.chain and f.quadratic
    [g] = found(tmp_path, """
    def discover(model, other):
        return [n for n, _ in other.named_buffers() if n in model.state_dict()]
    """)
    assert not g.quadratic and g.severity == "medium" and "[unpriced: B is the loop's length" in g.message()


def test_no_quadratic_claim_for_an_argument_after_a_starred_one(tmp_path: Path) -> None:
    """After ``*extra`` an argument lands on a parameter the code does not tell (``model`` is ``module`` only when
    ``extra`` holds one item): the walk is found, through ``extra``, but not said to walk the loop's tree."""
    [f] = found(tmp_path, """
    def is_persistent(prefix, module, name):
        return name in module.state_dict()

    def discover(model, extra):
        return [n for n, _ in model.named_buffers() if is_persistent(*extra, model, n)]
    """)
    assert f.chain and not f.quadratic and f.severity == "medium" and "[unpriced: B is the loop's length" in f.message()


def test_findings_are_ordered_by_severity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"a.py": WALKING, "b.py": PATH_WALK, "c.py": textwrap.dedent(QUADRATIC)})
    findings = json.loads(cli(capsys, "--source", str(tmp_path), "--select", "ALL", "--json")[1])
    assert [(Path(f["path"]).name, f["severity"]) for f in findings] == [("c.py", "high"), ("a.py", "medium"),
                                                                         ("b.py", "low")]


ONCE = """
def first(model, xs, t):
    for x in xs:
        if x == t:
            hit = model.state_dict()[x]
            break
"""


def test_a_walk_that_runs_at_most_once_is_a_note_on_request(tmp_path: Path, capsys) -> None:
    write(tmp_path, {"once.py": textwrap.dedent(ONCE)})
    assert cli(capsys, "--source", str(tmp_path))[0] == 0  # left out by default
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--once", "--json")
    [f] = json.loads(out)
    assert rc == 1 and f["severity"] == "note" and f["once"]
    assert "runs at most once per call of once.first: the loop is left right after it" in f["message"]
    assert "::notice " in cli(capsys, "--source", str(tmp_path), "--once", "--format", "github")[1]


# --------------------------------------------------------------------------- speed: processes and the cache


def test_an_unchanged_file_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omni_loader.lint import sources

    monkeypatch.setenv("OMNI_LOADER_CACHE", str(tmp_path / "cache"))
    write(tmp_path, {"src/walk.py": WALKING, "src/clean.py": "x = 1\n"})
    parsed = []
    real = sources.build
    monkeypatch.setattr(sources, "build", lambda *job: parsed.append(Path(job[0]).name) or real(*job))
    first = scan_sources([tmp_path / "src"])
    second = scan_sources([tmp_path / "src"])
    assert sorted(parsed) == ["clean.py", "walk.py"] and second.cached == 2 and second.findings == first.findings
    write(tmp_path, {"src/clean.py": "x = 2\n"})
    assert scan_sources([tmp_path / "src"]).cached == 1 and parsed[-1] == "clean.py"
    scan_sources([tmp_path / "src"], cache=False)
    assert len(parsed) == 5
    assert oct((tmp_path / "cache" / "audit").stat().st_mode & 0o777) == "0o700"
    (tmp_path / "cache" / "audit").chmod(0o777)  # others could plant a pickle: not read
    audit = scan_sources([tmp_path / "src"])
    assert audit.cached == 0 and "writable by others" in audit.cache_problem


@pytest.mark.subprocess
def test_files_parsed_in_processes_are_the_same_as_parsed_here(tmp_path: Path) -> None:
    import pickle

    from omni_loader.lint.sources import PARALLEL_MIN, scan_jobs

    write(tmp_path, {f"pkg/m{i}.py": WALKING if i % 7 == 0 else "def f():\n    return 1\n"
                     for i in range(PARALLEL_MIN + 8)})
    write(tmp_path, {"pkg/__init__.py": "", "pkg/bad.py": "def f(:\n"})
    serial = scan_sources([tmp_path / "pkg"], workers=1, cache=False)
    parallel = scan_sources([tmp_path / "pkg"], workers=2, cache=False)
    assert serial.findings == parallel.findings and len(serial.findings) == 5
    assert serial.failures == parallel.failures and len(parallel.failures) == 1
    jobs = [(str(p), p.stem, False, p.read_bytes(), frozenset()) for p in sorted((tmp_path / "pkg").glob("m*.py"))]
    pickled = scan_jobs(jobs, workers=2)  # from the workers, each scan comes back pickled
    assert all(isinstance(r, bytes) for r in pickled)
    assert [pickle.loads(r).scan.top.local_roots for r in pickled] == [s.scan.top.local_roots
                                                                       for s in scan_jobs(jobs, workers=1)]


def test_the_audit_imports_only_the_standard_library_at_module_level() -> None:
    """The pre-commit hook runs the audit where torch (or pandas) is not installed: every module of the lint
    package imports, at its top, the standard library and the kit's own stdlib-only helpers only."""
    import ast

    kit = {"errors", "formatting", "lazy", "names", None}  # `from .. import __version__`: the lazy package itself
    for path in sorted((REPO / "omni_loader" / "lint").glob("*.py")):
        if path.name == "__main__.py":  # the entry point, which starts the command line, not a module of the audit
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names), path
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    assert node.module.split(".")[0] in sys.stdlib_module_names | {"__future__"}, (path, node.module)
                elif node.level == 2:
                    assert node.module in kit, (path, node.module)


# --------------------------------------------------------------------------- precision: shapes a labelled corpus showed
# (docs/audit-precision.md: each was an OL001 finding whose walk does not run once per item)

PINNED = """
class Talker:
    def load_weights(self, weights):
        for name, tensor in weights:
            if name in ("audio_lm_head.weight", "model.audio_lm_head.weight"):
                self._consume_head(tensor)  # the branch
                continue
            self.other(name)

    def _consume_head(self, tensor):
        return dict(self.named_parameters())["audio_lm_head.weight"].copy_(tensor)
"""


def test_a_branch_holding_the_loops_item_to_constants_runs_that_many_times(tmp_path: Path, capsys) -> None:
    assert found(tmp_path, PINNED) == []  # at most 2 walks whatever the checkpoint's length: not OL001
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--once", "--json")
    [f] = json.loads(out)
    assert (rc, f["rule"], f["severity"], f["pinned"]) == (1, "OL001", "note", 2)
    assert "runs at most 2 times per call of mod.Talker.load_weights: only for the loop's items its branch names" \
        in f["message"]
    assert found(tmp_path, "def f(model, names):\n    for n in names:\n        if n == 'lm_head.weight':\n"
                           "            model.state_dict()\n") == []


@pytest.mark.parametrize("test", [
    "n != 'lm_head.weight'",  # every other item
    "n == other",  # not a constant
    "m == 'lm_head.weight'",  # derived from the item: two items may map to it
    "n in names_wanted",  # not a literal
    "n == 'a' or n.endswith('.bias')",  # one side holds nothing
    "style == 'keep_full_weight'",  # a value: many keys share it
])
def test_a_branch_that_does_not_hold_the_item_still_walks_per_item(tmp_path: Path, test: str) -> None:
    code = (f"def f(model, names, other, names_wanted):\n    for n, style in names.items():\n"
            f"        m = n.removeprefix('x.')\n"
            f"        if {test}:\n            model.state_dict()\n")
    assert len(found(tmp_path, code)) == 1, test
    orelse = "def f(model, names):\n    for n in names:\n        if n == 'a':\n            pass\n        else:\n" \
             "            model.state_dict()\n"
    assert len(found(tmp_path, orelse)) == 1


def test_a_module_moved_or_cast_is_the_same_tree_whatever_the_device(tmp_path: Path) -> None:
    built_here = """
    def adjust(decoder):
        for module in decoder.modules():
            module.padding = 1

    def build(config, device):
        decoder = Codec(config).decoder.to(device)
        adjust(decoder)
        return decoder

    def decode_all(configs, device):
        return [build(c, device) for c in configs]
    """
    assert found(tmp_path, built_here) == []  # a decoder built anew on each call, walked once when built
    [f] = found(tmp_path, "def f(model, devices):\n    for d in devices:\n        model.to(d).state_dict()\n")
    assert f.walk == "model.to(d).state_dict()"  # the same model on every device: walked per item


DEFAULT_GIVEN = """
def unique_device(model):
    return {p.device for p in model.parameters()}

def insert(model, node, device=None):
    if device is None:
        device = unique_device(model)
    return node.to(device)

def observe(model, nodes):
    device = unique_device(model)
    for node in nodes:
        insert(model, node, device)  # given

def observe_slowly(model, nodes):
    for node in nodes:
        insert(model, node)  # left out
"""


def test_a_default_computed_only_when_left_out_is_not_walked_where_the_caller_gives_it(tmp_path: Path) -> None:
    [f] = found(tmp_path, DEFAULT_GIVEN)
    assert (f.loop_function, f.call_line) == ("mod.observe_slowly", line_of(DEFAULT_GIVEN, "# left out"))
    by_keyword = DEFAULT_GIVEN.replace("insert(model, node, device)", "insert(model, node, device=device)")
    assert [f.loop_function for f in found(tmp_path, by_keyword)] == ["mod.observe_slowly"]
    as_none = DEFAULT_GIVEN.replace("insert(model, node, device)", "insert(model, node, None)")
    assert len(found(tmp_path, as_none)) == 2  # a literal None is no value


DEAD = """
import torch

class Codec(torch.nn.Module):
    pass

def load_weights(model, weights):
    for name, tensor in weights.items():
        if name in model.state_dict():
            model.state_dict()[name].copy_(tensor)
    raise ValueError("load_weights: bad")  # a name in a string calls nothing
"""


def test_a_function_nothing_calls_in_a_module_others_import_from_is_ol003(tmp_path: Path, capsys) -> None:
    files = {"pkg/__init__.py": "", "pkg/codec.py": DEAD, "pkg/model.py": "from .codec import Codec\n"}
    write(tmp_path, files)
    assert scan_sources([tmp_path], rules=["OL001"]).findings == ()
    rc, out, _ = cli(capsys, "--source", str(tmp_path), "--select", "OL003", "--json")
    hits = json.loads(out)
    assert rc == 1 and {(f["rule"], f["severity"]) for f in hits} == {("OL003", "low")} and len(hits) == 2
    assert "pkg.codec.load_weights is neither called nor imported in the audited sources" in hits[0]["message"]
    assert cli(capsys, "--source", str(tmp_path))[0] == 0  # off by default


@pytest.mark.parametrize("other", [
    "from .codec import Codec, load_weights\n",  # imported by name
    "from . import codec\n",  # the module whole: codec.load_weights() may follow
    "import pkg.codec\n",
    "from .codec import *\n",
    "",  # nobody imports from the module: its users are outside the sources
])
def test_a_function_that_may_be_reached_stays_ol001(tmp_path: Path, other: str) -> None:
    user = {"pkg/user.py": "from .codec import Codec\n"} if other else {}
    write(tmp_path, {"pkg/__init__.py": "", "pkg/codec.py": DEAD, "pkg/model.py": other, **user})
    assert {f.rule for f in scan_sources([tmp_path], rules=["OL001", "OL003"]).findings} == {"OL001"}, other
    called = DEAD + "\ndef load(model, weights):\n    return load_weights(model, weights)\n"
    write(tmp_path, {"pkg/codec.py": called, "pkg/model.py": "from .codec import Codec\n"})
    assert {f.rule for f in scan_sources([tmp_path], rules=["OL001", "OL003"]).findings} == {"OL001"}
