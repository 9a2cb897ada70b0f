"""``omni-loader compare`` and ``pack`` on real tiny-model reproductions made here (in-process, seconds each)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from omni_loader.results.archive import pack
from omni_loader.cli import main
from omni_loader.compare.side_by_side import NOT_RECORDED
from omni_loader.compare.compare_render import REFERENCE_LABEL, render, render_markdown, write_compare
from omni_loader.compare.reproductions import compare_results
from omni_loader.errors import ResultsError
from omni_loader.reporting.measurements import comparisons, load_reference
from omni_loader.reporting.report import write_report
from omni_loader.results.rows import RUN_COLUMNS, read_runs
from omni_loader.results.spec import BenchmarkSpec
from omni_loader.token2wav.options import option_fields
from omni_loader.bench.runner import run_benchmark
from omni_loader.reporting.stats import mann_whitney

# Every test reads `runs`: three in-process reproductions (about 30 s here), so none is in the fast lane.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three real reproductions: alternate and abba orders (same layout), and the transformers layout."""
    root = tmp_path_factory.mktemp("compare")
    made = {}
    for name, extra in (("alt", {}), ("abba", {"order": "abba"}), ("tf", {"layout": "transformers"})):
        spec = BenchmarkSpec.from_flat({"checkpoint": str(tiny_snapshot), "warmup": 0, "runs": 3,
                                        "workers": "in-process", **extra})
        made[name] = run_benchmark(spec, root / name, progress=False)
    write_report(made["alt"])  # report.md and plots/, for the archive
    return made


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _rewrite_runs(directory: Path, column: str, value: str) -> None:
    path = directory / "runs.csv"
    rows = list(csv.DictReader(path.open()))
    for row in rows:
        row[column] = value
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _set_model(directory: Path, model: str) -> None:
    from omni_loader.results.suite import benchmark, read_metadata, store_benchmark

    store_benchmark(directory, "load", {**benchmark(read_metadata(directory), "load"), "model": model})


def _as_flat_schema(directory: Path, version: int) -> None:
    """Rewrite a directory's metadata.json as schemas 1 and 2 laid it out: the load record at the top, its load
    options flat in the spec; schema 1 recorded no construction mode."""
    from omni_loader.results.suite import benchmark, read_metadata

    record = benchmark(read_metadata(directory), "load")
    spec = {k: v for k, v in record["spec"].items() if k != "load"} | record["spec"].get("load", {})
    if version == 1:
        spec.pop("construct", None)
        record = {k: v for k, v in record.items() if k != "construct"}
    (directory / "metadata.json").write_text(json.dumps({"schema_version": version, **record, "spec": spec}))


def _samples(directory: Path, phase: str, variant: str) -> list[float]:
    frame = read_runs(directory)
    rows = frame[(~frame["warmup"]) & (frame["status"] == "ok") & (frame["phase"] == phase)
                 & (frame["variant"] == variant) & (frame["source"] == "load")]
    return list(rows["seconds"])


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("omni-loader: error: ")
    return lines[0]


def test_two_reproductions_side_by_side(runs):
    result = compare_results([runs["alt"], runs["abba"]])
    alt, abba = result.entries
    assert (alt.label, abba.label) == ("alt", "abba")
    assert result.anchor == "alt" and result.against is None
    assert result.pr_rows == ("state_dict_calls", "buffer_discovery", "weight_loading")  # no startup measured
    for entry, directory in ((alt, runs["alt"]), (abba, runs["abba"])):
        assert entry.runs == {"baseline": 3, "optimized": 3}
        assert (entry.layout, entry.setting("construct"), entry.workers) == ("vllm-omni", "resident", "in-process")
        own = {c.phase: c for c in comparisons(read_runs(directory))}
        for phase in ("buffer_discovery", "weight_loading"):
            c = entry.comparison(phase)
            for variant in ("baseline", "optimized"):
                assert getattr(c, variant).median == pytest.approx(statistics.median(_samples(directory, phase,
                                                                                              variant)))
            assert c.ratio == pytest.approx(own[phase].ratio)
            assert c.verdict() == own[phase].verdict()  # the directory's own statistics, not re-derived
            low, high = entry.intervals[phase]
            assert 0 < low <= high
        assert entry.comparison("state_dict_calls").baseline.median > 0
    assert len(set(alt.digests)) == 1 and alt.digests == abba.digests
    assert result.checks == ()  # same model, digest and counts: nothing to say

    text = render_markdown(result)
    # which releases the arms are, once: both directories ran baseline and optimized
    assert text.split("\n\n")[2] == ("**Variants**: baseline = vLLM-Omni 0.28.0 and the earlier releases that ship "
                                      "find_all_registers (code: be81443c, December 2025); optimized = vLLM-Omni "
                                      "0.30.0, the first release with the fix (code: PR 7061).")
    header, reference, *rows = [line for line in text.split("\n\n")[3].splitlines() if "---" not in line]
    assert header.startswith("| Results | Machine | torch | transformers | Kit commit | Layout | Construction | Runs")
    assert reference.startswith(f"| {REFERENCE_LABEL} | 1 AMD Instinct MI300X VF (ROCm 7.2.53211) | 2.12.0+git6bbd260")
    assert "456.946 ms → 1.564 ms; 292.16×" in reference and "219 → 0" in reference
    assert [r.split(" | ")[0] for r in rows] == ["| alt", "| abba"]
    assert "ok: same model, digest and counts" in rows[1]

    records = list(csv.DictReader(io.StringIO(render(result, "csv"))))
    assert [r["results"] for r in records] == [REFERENCE_LABEL, "alt", "abba"]
    pr = {m["measurement"]: m for m in load_reference()["measurements"]}
    assert float(records[0]["buffer_discovery_ratio"]) == pytest.approx(pr["buffer_discovery"]["baseline"]
                                                                       / pr["buffer_discovery"]["optimized"])
    assert float(records[2]["buffer_discovery_ratio"]) == pytest.approx(abba.comparison("buffer_discovery").ratio)
    assert records[2]["layout"] == "vllm-omni" and records[2]["runs_baseline"] == "3"
    assert json.loads(render(result, "json"))["results"][1]["results"] == "alt"
    assert json.loads(render(result, "json"))["results"][1]["variants"].startswith("baseline = vLLM-Omni 0.28.0")


def test_every_benchmark_setting_is_a_csv_column(runs):
    """compare's CSV has a column for every BenchmarkSpec field (the load options flat) holding the record's value: a
    hand-written list once left out --read, --threads, --cpus and the design."""
    result = compare_results([runs["alt"]])
    row = list(csv.DictReader(io.StringIO(render(result, "csv"))))[1]
    spec = result.entry("alt").spec
    for name in option_fields(BenchmarkSpec):
        if name in ("checkpoint", "variants"):  # the snapshot is `source`; `variants` says which releases the arms are
            continue
        value = spec[name]
        shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else "" if value is None else str(value)
        assert row[name] == shown, name
    assert row["variants"].startswith("baseline = vLLM-Omni 0.28.0")


def test_other_layout_is_explained_never_mixed(runs):
    result = compare_results([runs["alt"], runs["tf"]], against=runs["alt"])
    tf = result.entry("tf")
    assert tf.layout == "transformers" and tf.digests != result.entry("alt").digests
    # another module tree loads other tensors: said once, digest and counts not compared, not a mismatch
    assert [(c.kind, c.what) for c in result.checks_for("tf")] == [("note", "layout")]
    assert not result.mismatched("tf")
    (row,) = result.against_rows
    assert row.comparison is None and row.verdict().startswith("not compared: layout differs")
    text = render_markdown(result)
    assert "note (layout)" in text and "digest and counts are not compared" in text


def test_against_phase_by_phase(runs, capsys):
    result = compare_results([runs["abba"]], against=runs["alt"])
    assert [e.label for e in result.entries] == ["alt", "abba"] and result.against == "alt"
    rows = {(r.phase, r.variant): r for r in result.against_rows}
    assert {"buffer_discovery", "weight_loading", "total"} <= {p for p, _ in rows}
    for variant in ("baseline", "optimized"):
        r = rows[("buffer_discovery", variant)]
        mine, theirs = _samples(runs["alt"], "buffer_discovery", variant), _samples(runs["abba"], "buffer_discovery",
                                                                                    variant)
        assert r.ratio == pytest.approx(statistics.median(theirs) / statistics.median(mine))
        assert r.comparison.p_value == pytest.approx(mann_whitney(tuple(mine), tuple(theirs)))
        change = f"{r.ratio:.2f}× slower" if r.ratio > 1 else f"{1 / r.ratio:.2f}× faster"
        significant = r.comparison.p_value < 0.05
        assert r.verdict() == (f"{change} (significant, Mann-Whitney p={r.comparison.p_value:.3g})" if significant
                               else f"not significant (p={r.comparison.p_value:.3g}; {change})")

    assert main(["compare", str(runs["abba"]), "--against", str(runs["alt"]), "--format", "csv"]) == 0
    directories, against = capsys.readouterr().out.split("\n\n")
    assert [r["results"] for r in csv.DictReader(io.StringIO(directories))] == [REFERENCE_LABEL, "alt", "abba"]
    table = list(csv.DictReader(io.StringIO(against)))
    assert len(table) == len(result.against_rows)
    first = next(r for r in table if r["phase"] == "buffer_discovery" and r["variant"] == "baseline")
    assert float(first["ratio"]) == pytest.approx(rows[("buffer_discovery", "baseline")].ratio)


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_packed_archive_compares_like_its_directory(runs, tmp_path, fmt, capsys):
    out = tmp_path / "sent" / f"alt.{fmt}"
    assert main(["pack", str(runs["alt"]), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    if fmt == "zip":
        names = zipfile.ZipFile(out).namelist()
    else:
        names = tarfile.open(out).getnames()
    assert {"alt/metadata.json", "alt/runs.csv", "alt/report.md", "alt/plots/phases.png"} <= set(names)
    assert all(n.startswith("alt/") and (n.count("/") == 1 or n.startswith("alt/plots/")) for n in names)

    before = sorted(p.name for p in out.parent.iterdir())
    result = compare_results([runs["alt"], out])
    assert sorted(p.name for p in out.parent.iterdir()) == before  # read without unpacking beside it
    directory, archive = result.entries
    assert archive.label == f"alt.{fmt}" and archive.archive and not directory.archive
    assert result.checks == ()
    for phase in ("buffer_discovery", "weight_loading", "total"):
        assert archive.comparison(phase).baseline.samples == directory.comparison(phase).baseline.samples
    table = render_markdown(result)
    assert f"| alt.{fmt} (archive) |" in table


def test_digest_or_counts_that_differ_are_flagged(runs, tmp_path):
    other = _copy(runs["alt"], tmp_path / "other-checkpoint")
    _rewrite_runs(other, "digest", "xxh3-128:" + "f" * 32)
    _set_model(other, "Qwen/Qwen2.5-Omni-7B Token2Wav")
    counts = _copy(runs["alt"], tmp_path / "other-counts")
    _rewrite_runs(counts, "persistent_buffers", "7")
    renamed = _copy(runs["alt"], tmp_path / "renamed")  # reproduce records "(synthetic weights)"; run_benchmark not
    _set_model(renamed, "Qwen/Qwen2.5-Omni-3B Token2Wav (synthetic weights)")
    result = compare_results([runs["alt"], other, counts, renamed])
    assert [(c.kind, c.what) for c in result.checks_for("other-checkpoint")] == [("mismatch", "model"),
                                                                                 ("mismatch", "digest")]
    assert [(c.kind, c.what) for c in result.checks_for("other-counts")] == [("mismatch", "counts")]
    assert [(c.kind, c.what) for c in result.checks_for("renamed")] == [("note", "model")]
    assert not result.mismatched("renamed")  # named otherwise, but the same bytes
    assert "persistent buffers 7 / 7 here, 1 / 1 in alt" in result.checks_for("other-counts")[0].message
    text = render_markdown(result)
    assert "| other-checkpoint ✗ |" in text and "✗ MISMATCH (digest)" in text
    assert "tensor digest xxh3-128 ffffffffffff… differs from alt's" in text

    written = write_compare(result, tmp_path / "cmp")
    shown = list(csv.DictReader((tmp_path / "cmp" / "plots" / "compare_ratios.csv").open()))
    name = {r["title"]: r["title"].split("\n")[0] for r in shown}  # the panel's row; the PR's figure under it
    flagged = {(name[r["title"]], float(r["x"])) for r in shown if r["kind"] == "point" and "check failed" in r["label"]}
    assert flagged == {(t, x) for t in ("Buffer discovery", "Token2Wav weight loading") for x in (1.0, 2.0)}
    drawn = {(name[r["title"]], float(r["x"])) for r in shown if r["kind"] == "point" and r["label"] == "ratio of medians"}
    assert drawn == {(t, x) for t in ("Buffer discovery", "Token2Wav weight loading") for x in (0.0, 3.0)}
    assert tmp_path / "cmp" / "compare.md" in written

    against = compare_results([other], against=runs["alt"])
    (row,) = against.against_rows
    assert row.verdict() == "not compared: model differs; digest differs (see the checks)"


def _set_spec(directory: Path, **changes: Any) -> None:
    """Rewrite a directory's load record as if it had run with other load options (``construct="empty"``...)."""
    from omni_loader.results.suite import benchmark, read_metadata, store_benchmark

    record = benchmark(read_metadata(directory), "load")
    spec = {**record["spec"], "load": {**record["spec"]["load"], **changes}}
    store_benchmark(directory, "load", {**record, "spec": spec})


def test_another_construction_mode_is_a_mismatch_named_by_its_flag(runs, tmp_path):
    """Two directories alike but for --construct time different loads: compare says so, naming the option, and sets
    no ratio of one beside the other's. The checked settings are the options declared compared, not a list here."""
    empty = _copy(runs["alt"], tmp_path / "empty")
    _set_spec(empty, construct="empty")
    result = compare_results([runs["alt"], empty], against=runs["alt"])
    (check,) = result.checks_for("empty")
    assert (check.kind, check.what) == ("mismatch", "--construct") and result.mismatched("empty")
    assert check.message.startswith("--construct empty here, resident in alt: ")
    (row,) = result.against_rows
    assert row.verdict() == "not compared: --construct differs (see the checks)"
    text = render_markdown(result)
    assert "| empty ✗ |" in text and "✗ MISMATCH (--construct)" in text
    assert "- **empty**: ✗ mismatch (--construct): --construct empty here, resident in alt: " in text


def test_digests_of_another_algorithm_are_a_note_not_a_mismatch(runs, tmp_path):
    """Results of an older omni-loader hold bare SHA-256 digests: they cannot equal an xxh3 digest, so comparing
    them would flag every old directory as another checkpoint. Said once, as a note; the counts are still compared."""
    older = _copy(runs["alt"], tmp_path / "older")
    _rewrite_runs(older, "digest", "f" * 64)
    result = compare_results([runs["alt"], older])
    assert [(c.kind, c.what) for c in result.checks_for("older")] == [("note", "digest")]
    assert "made with sha256, alt's with xxh3-128" in result.checks_for("older")[0].message
    assert not result.mismatched("older")
    _rewrite_runs(older, "persistent_buffers", "7")
    assert ("mismatch", "counts") in [(c.kind, c.what) for c in compare_results([runs["alt"], older]).checks_for("older")]


def test_unknown_schema_is_refused_in_one_line(runs, tmp_path, capsys):
    newer = _copy(runs["alt"], tmp_path / "newer")
    meta = json.loads((newer / "metadata.json").read_text())
    (newer / "metadata.json").write_text(json.dumps({**meta, "schema_version": 99}))
    assert main(["compare", str(runs["alt"]), str(newer)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "schema_version 99" in line and "newer" in line
    # the same directory sent as an archive is refused the same way
    archive = tmp_path / "newer.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(newer, arcname="newer")
    assert main(["compare", str(archive)]) == 2
    assert "schema_version 99" in _one_error_line(capsys.readouterr().err)
    assert main(["pack", str(newer)]) == 2
    assert "schema_version 99" in _one_error_line(capsys.readouterr().err)


def test_schema_2_and_3_directories_are_read_alike(runs, tmp_path):
    """Model, machine and settings come from each directory's load record (results.benchmark), whatever its schema."""
    old = _copy(runs["alt"], tmp_path / "schema2")
    _as_flat_schema(old, 2)
    result = compare_results([runs["alt"], old])
    assert result.checks_for("schema2") == []
    new, flat = result.entry("alt"), result.entry("schema2")
    assert (new.schema_version, flat.schema_version) == (3, 2)
    described = ("model", "machine", "layout", "dtype", "workers", "kit_commit")
    assert [getattr(flat, k) for k in described] == [getattr(new, k) for k in described]
    assert NOT_RECORDED not in [getattr(new, k) for k in described]
    assert flat.setting("construct") == new.setting("construct") == "resident"
    assert new.layout == "vllm-omni" and new.dtype == "float32"
    rows = list(csv.DictReader(io.StringIO(render(result, "csv"))))
    keep = ("model", "device", "cpu", "torch", "layout", "dtype", "construct", "workers", "kit_commit")
    assert [{k: r[k] for k in keep} for r in rows[1:]] == [{k: rows[1][k] for k in keep}] * 2


def test_schema_1_directory_is_read_construction_not_recorded(runs, tmp_path):
    old = _copy(runs["alt"], tmp_path / "schema1")
    _as_flat_schema(old, 1)
    frame = read_runs(old)
    frame[list(RUN_COLUMNS[: RUN_COLUMNS.index("minor_faults")])].to_csv(old / "runs.csv", index=False)
    result = compare_results([runs["alt"], old])
    entry = result.entry("schema1")
    assert entry.schema_version == 1 and entry.setting("construct") == NOT_RECORDED
    assert entry.comparison("buffer_discovery").baseline.samples == \
        result.entry("alt").comparison("buffer_discovery").baseline.samples
    assert f"| {NOT_RECORDED} |" in render_markdown(result)


@pytest.mark.parametrize("fmt", ["tar.gz", "zip"])
def test_archive_members_outside_their_folder_are_refused(runs, tmp_path, fmt):
    archive = tmp_path / "inside" / f"evil.{fmt}"
    archive.parent.mkdir()
    members = {"res/metadata.json": (runs["alt"] / "metadata.json").read_bytes(),
               "res/runs.csv": (runs["alt"] / "runs.csv").read_bytes(), "../escaped.txt": b"gotcha"}
    if fmt == "zip":
        with zipfile.ZipFile(archive, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
    else:
        with tarfile.open(archive, "w:gz") as tf:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    with pytest.raises(ResultsError, match="unsafe archive member refused"):
        compare_results([archive])
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "inside" / "escaped.txt").exists()


def test_plot_shows_each_ratio_its_interval_and_the_prs(runs, tmp_path, capsys):
    assert main(["compare", str(runs["alt"]), str(runs["abba"]), "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "![ratios](" in printed
    for name in ("compare.md", "compare.csv", "compare.json", "plots/compare_ratios.png", "plots/compare_ratios.svg"):
        assert (tmp_path / "cmp" / name).is_file(), name
    assert not (tmp_path / "cmp" / "against.csv").exists()
    assert "![ratios](plots/compare_ratios.png)" in (tmp_path / "cmp" / "compare.md").read_text()

    result = compare_results([runs["alt"], runs["abba"]])
    shown = list(csv.DictReader((tmp_path / "cmp" / "plots" / "compare_ratios.csv").open()))
    pr = {m["label"]: m["baseline"] / m["optimized"] for m in load_reference()["measurements"] if m["optimized"]}
    for title, phase in (("Buffer discovery", "buffer_discovery"), ("Token2Wav weight loading", "weight_loading")):
        panel = [r for r in shown if r["title"].split("\n")[0] == title]  # the PR's figure on its second line
        ticks = sorted((float(r["x"]), r["text"]) for r in panel if r["kind"] == "xtick")
        assert ticks == [(0.0, "alt"), (1.0, "abba")]
        points = {float(r["x"]): float(r["y"]) for r in panel if r["kind"] == "point"}
        assert points == pytest.approx({i: e.comparison(phase).ratio for i, e in enumerate(result.entries)})
        for i, e in enumerate(result.entries):
            ends = sorted(float(r["y"]) for r in panel if r["kind"] == "line" and r["label"] == "95% interval"
                          and float(r["x"]) == i)
            assert ends == pytest.approx(sorted(e.intervals[phase]))
        pr_line = [float(r["y"]) for r in panel if r["kind"] == "line" and r["label"].startswith("PR 7061")]
        assert pr_line == pytest.approx([pr[title]] * 2)  # a horizontal line: both ends at the PR's ratio
        assert {float(r["y"]) for r in panel if r["kind"] == "line" and r["label"] == "no change (1×)"} == {1.0}


def test_the_plots_labels_stay_inside_each_panel(runs):
    """01's Lab run: with this run's ratio below the PR's 292x, the PR's line was the top of the range and the
    frame struck its label through. The PR's figure is in each panel's title; every label lies inside its panel."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from omni_loader.compare.ratio_plot import directories_ratio_figure

    ratio = {m["label"]: m["baseline"] / m["optimized"] for m in load_reference()["measurements"] if m["optimized"]}
    fig = directories_ratio_figure(compare_results([runs["alt"], runs["abba"]]))
    fig.set_size_inches(fig.get_size_inches()[0], 2.4)  # a short panel: autoscaling's margin alone is a few pixels
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        assert ax.get_title().endswith(f"\nPR 7061: {ratio[ax.get_title().split(chr(10))[0]]:.3g}×")
        for t in ax.texts:
            box = t.get_window_extent(renderer)
            assert frame.y0 <= box.y0 and box.y1 <= frame.y1 and box.x1 <= frame.x1, (ax.get_title(), t.get_text())


def test_pack_names_and_refuses_to_overwrite(runs, tmp_path):
    directory = _copy(runs["alt"], tmp_path / "mine")
    archive = pack(directory)
    assert archive == tmp_path / "mine.tar.gz" and tarfile.is_tarfile(archive)
    with pytest.raises(ResultsError, match="already exists"):
        pack(directory)
    assert pack(directory, overwrite=True) == archive
    assert zipfile.is_zipfile(pack(directory, out=tmp_path / "mine.zip"))
    with pytest.raises(ResultsError, match="must end in"):
        pack(directory, out=tmp_path / "mine.zip", fmt="tar.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "mine.tar.gz", "mine.zip"]  # no temporary left


def test_pack_refuses_a_symlinked_report_in_one_line(runs, tmp_path):
    """A linked report.md would be stored as a link to an absolute path, which compare then refuses."""
    directory = _copy(runs["alt"], tmp_path / "mine")
    elsewhere = tmp_path / "elsewhere.md"
    (directory / "report.md").rename(elsewhere)
    (directory / "report.md").symlink_to(elsewhere)
    with pytest.raises(ResultsError, match=r"report.md is a symbolic link \(to .*elsewhere.md\): pack stores"):
        pack(directory)
    assert not (tmp_path / "mine.tar.gz").exists()


def test_a_directorys_own_problems_are_shown(runs, tmp_path):
    torn = _copy(runs["alt"], tmp_path / "torn")
    with (torn / "runs.csv").open("a") as fh:
        fh.write("6,baseline,False,4,construct,total,0.1")  # a crash cut the last line short
    result = compare_results([runs["alt"], torn])
    (problem,) = result.checks_for("torn")
    assert (problem.kind, problem.what) == ("problem", "results") and "torn" in problem.message
    assert not result.mismatched("torn")  # the rows it kept are still the same model
    assert result.entry("torn").runs == {"baseline": 3, "optimized": 3}
    text = render_markdown(result)
    assert "problem (results)" in text and f"- **torn**: problem in the directory (results): {problem.message}" in text


def test_startup_to_health_column_when_a_directory_measured_it(runs, tmp_path):
    """serve-ab rows (source server) in a reproduce directory add the PR's startup row, in seconds."""
    from omni_loader.results.rows import append_rows
    from omni_loader.results.suite import store_benchmark
    from omni_loader.results.planner import plan_runs

    startup = _copy(runs["alt"], tmp_path / "with-startup")
    plan = plan_runs(0, 3, "alternate", first_id=100, source="server")
    store_benchmark(startup, "startup", {"kind": "serve-ab", "status": "complete", "plan": [
        {"run_id": r.run_id, "variant": r.variant, "warmup": r.warmup, "order": r.order} for r in plan]})
    seconds = {"baseline": [1021.0, 1022.0, 1023.0], "optimized": [1020.0, 1020.5, 1021.5]}  # thousands separated
    append_rows(startup, [{"run_id": r.run_id, "variant": r.variant, "warmup": False, "order": r.order,
                           "phase": "startup_to_health", "parent": "", "seconds": seconds[r.variant][r.order - 1],
                           "status": "ok", "error": "", "source": "server"} for r in plan])
    result = compare_results([runs["alt"], startup])
    assert result.pr_rows[-1] == "startup_to_health"
    assert result.checks_for("with-startup") == []
    c = result.entry("with-startup").comparison("startup_to_health")
    assert (c.baseline.median, c.optimized.median) == (1022.0, 1020.5)
    assert c.pr_rule() == "ranges overlap: no claim" and c.verdict().startswith("no difference claimed")
    text = render_markdown(result)
    header = next(line for line in text.splitlines() if line.startswith("| Results |"))
    assert header.endswith("| Token2Wav weight loading | Startup to /health | Checks |")
    assert "105.738 s → 104.322 s; 1.01×; ranges overlapped" in text
    assert "1,022.000 s [1,021.000–1,023.000] → 1,020.500 s [1,020.000–1,021.500]; 1.00×" in text
    assert "| alt |" in text and text.split("| alt |")[1].split("\n")[0].rstrip().endswith(
        "| not measured | reference for the checks |")


def test_pack_keeps_what_the_report_links_to(runs, tmp_path):
    """plots/ and profiles/ travel with the archive (report.md links into both); other files stay behind."""
    directory = _copy(runs["alt"], tmp_path / "mine")
    (directory / "profiles" / "torch").mkdir(parents=True)
    (directory / "profiles" / "profile.md").write_text("# where the time goes\n")
    (directory / "profiles" / "torch" / "trace.json").write_text("{}")
    (directory / "scratch.txt").write_text("not a result")
    with tarfile.open(pack(directory)) as tf:
        names = set(tf.getnames())
    assert {"mine/profiles/profile.md", "mine/profiles/torch/trace.json", "mine/report.md"} <= names
    assert any(n.startswith("mine/plots/") for n in names) and "mine/scratch.txt" not in names


def test_a_serve_ab_directory_without_a_model_says_what_is_missing_and_how_to_give_it(runs, tmp_path):
    """serve-ab run without --model records no model: compare says which directory lacks it and how to record it,
    not "model 'not recorded' is not ...'s"."""
    from omni_loader.results.rows import append_rows
    from omni_loader.results.suite import store_benchmark
    from omni_loader.results.planner import plan_runs

    startup = tmp_path / "serve-ab"
    plan = plan_runs(0, 3, "alternate", source="server")
    store_benchmark(startup, "startup", {"kind": "serve-ab", "status": "complete", "plan": [
        {"run_id": r.run_id, "variant": r.variant, "warmup": r.warmup, "order": r.order} for r in plan]})
    append_rows(startup, [{"run_id": r.run_id, "variant": r.variant, "warmup": False, "order": r.order,
                           "phase": "startup_to_health", "parent": "", "seconds": 10.0 + r.order, "status": "ok",
                           "error": "", "source": "server"} for r in plan])
    result = compare_results([runs["alt"], startup])
    model = next(c for c in result.checks_for("serve-ab") if c.what == "model")
    assert model.kind == "mismatch" and NOT_RECORDED not in model.message
    assert model.message.startswith(f"serve-ab records no model, so it cannot be matched with alt's "
                                    f"{result.entry('alt').model!r}: it was run without --model: run serve-ab again "
                                    "with --model NAME")
