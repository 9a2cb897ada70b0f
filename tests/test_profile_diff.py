"""``omni-loader profile --diff``: per-function times folded from py-spy's samples, rank tests with
Benjamini-Hochberg, functions.csv, diff.md and the differential flamegraph.

One real end-to-end run (notebook 02's differential profile on the tiny snapshot, 7 sampled loads per
variant, each in a fresh process, made once per suite run) serves every test that needs the real loader; its speedscope files
are the recorded profiles the fold is checked on. The statistics are checked in-process on synthetic
folds and p-values; the refusals in-process through ``cli.main``.
"""

from __future__ import annotations

import re
import tempfile
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from omni_loader import cli
from omni_loader.profiling import diff as pdiff
from omni_loader.profiling import diff_stats as stats
from omni_loader.profiling import diff_words as words
from omni_loader.profiling import flamegraph
from omni_loader.profiling.pyspy import find_py_spy

REAL_RUNS = 7  # sampled loads per variant: 2/C(14,7) = 0.00058, the smallest p a rank test can give, survives BH


@pytest.fixture(scope="module")
def real_diff(executed_notebook) -> pdiff.ProfileDiff:
    """The suite's one differential profile, baseline against optimized on the tiny snapshot with
    ``REAL_RUNS`` sampled loads a variant: notebook 02's last section (``profile_diff``, the function behind
    ``omni-loader profile --diff``), made once per suite run, read back from its files."""
    from test_notebooks import NOTEBOOK_DIR

    if find_py_spy()[0] is None:
        pytest.skip("py-spy is not installed")
    run = executed_notebook(NOTEBOOK_DIR / "02_profiles.ipynb")
    assert (run.parameters["size"], run.parameters["diff_runs"]) == ("tiny", REAL_RUNS)
    if not (run.results / "diff" / "functions.csv").is_file():
        log = run.results / "diff" / "py-spy.log"
        if log.is_file() and "may not trace" in log.read_text():
            pytest.skip("py-spy may not trace processes here (ptrace)")
    return pdiff.read_profile_diff(run.results)


# --------------------------------------------------------------------------- the fold, on the real loader


@pytest.mark.subprocess
@pytest.mark.slow
def test_fold_of_a_recorded_load(real_diff: pdiff.ProfileDiff) -> None:
    """Every speedscope of the run folds into per-function times that add up: the entry's inclusive time
    is every kept sample, self times add up to it, no function exceeds it, the model-code import is out."""
    runs = real_diff.runs[real_diff.runs["sampled"] & (real_diff.runs["status"] == "ok")]
    assert len(runs) == 2 * REAL_RUNS
    with_state_dict = {"baseline": 0, "optimized": 0}
    for _, run in runs.iterrows():
        path = real_diff.directory / run["speedscope"]
        fold = stats.fold_samples(path)
        stacks, _ = flamegraph.load_stacks(path)
        kept = sum(w for _, w in stacks)
        entry = fold[fold["function"] == flamegraph.ENTRY]
        assert len(entry) == 1 and entry["inclusive_s"].iloc[0] == pytest.approx(kept)
        assert entry["inclusive_s"].iloc[0] == pytest.approx(flamegraph.build(path).root.seconds)
        assert fold["self_s"].sum() == pytest.approx(kept)
        assert (fold["inclusive_s"] >= fold["self_s"] - 1e-12).all()
        assert (fold["inclusive_s"] <= kept + 1e-12).all()
        assert not fold["function"].isin(["import_model_code", "_modeling"]).any()
        assert entry["samples"].iloc[0] == len(stacks)
        with_state_dict[run["variant"]] += "Module.state_dict" in set(fold["function"])
        saved = real_diff.folds[real_diff.folds["run_id"] == run["run_id"]]
        assert len(saved) == len(fold)  # run_functions.csv holds each run's fold
    # Only the baseline calls state_dict. On the tiny model its discovery lasts tens of ms, a few samples at 250 Hz,
    # which a busy machine can delay past (CI once saw a baseline run without one): most runs, not every run.
    assert with_state_dict["optimized"] == 0 and with_state_dict["baseline"] > REAL_RUNS // 2, with_state_dict


# --------------------------------------------------------------------------- the real run's files


@pytest.mark.subprocess
@pytest.mark.slow
def test_functions_csv_and_diff_md(real_diff: pdiff.ProfileDiff) -> None:
    d = real_diff.directory
    table = pd.read_csv(d / pdiff.FUNCTIONS_CSV, keep_default_na=False, na_values=[""])
    for column in ("function", "file", "a_median_s", "b_median_s", "delta_s", "ci_low", "ci_high", "q", "verdict"):
        assert column in table.columns
    assert set(table["verdict"]) <= {stats.FASTER, stats.SLOWER, stats.NO_CLAIM}
    assert np.allclose(table["delta_s"], table["b_median_s"] - table["a_median_s"])
    assert table.loc[table["tested"], "q"].notna().all() and table.loc[~table["tested"], "q"].isna().all()
    claimed = table[table["verdict"] != stats.NO_CLAIM]
    state_dict = table[table["function"] == "Module.state_dict"].iloc[0]
    assert state_dict["verdict"] == stats.FASTER and state_dict["b_median_s"] == 0  # the PR's change, found

    text = (d / pdiff.DIFF_MD).read_text()
    bullets = [line[2:] for line in text.split("\n\n")[1].splitlines()]
    assert len(bullets) == len(claimed)  # it opens with one sentence per claimed function, in the table's order
    for sentence, (_, row) in zip(bullets, claimed.iterrows()):
        assert sentence.startswith(f"`{row['function']}` ({row['file']}): ")
        assert row["verdict"] in sentence
    assert re.search(r"51 calls per load removed", bullets[list(claimed["function"]).index("Module.state_dict")])
    counts = re.search(r"(\d+) of (\d+) functions sampled under `load_token2wav` were tested.*?; (\d+) moved", text)
    assert counts and tuple(map(int, counts.groups())) == (int(table["tested"].sum()), len(table), len(claimed))
    assert "py-spy's cost on baseline" in text

    svg = (d / pdiff.FLAME_DIFF_SVG).read_text()
    assert stats.FASTER in svg and "Module.state_dict" in svg and stats.NO_CLAIM in svg
    html = real_diff.flamegraph()._repr_html_()
    assert "<svg" in html and "<script>" in html and "functions.csv" in html


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_entrys_sampled_time_and_the_sampled_load_are_told_apart(real_diff: pdiff.ProfileDiff,
                                                                     executed_notebook) -> None:
    """02 showed ``load_token2wav`` "2,694 → 1,710" ms from the samples beside a sampled median load of 2,557.819 /
    1,529.022 ms with no word why. The sentence under py-spy's cost says it, every figure from the run's files
    (``runs.csv``, ``run_functions.csv``, recomputed here by a join of their own), in ``diff.md`` and in the
    notebook's output."""
    import nbformat
    from test_notebooks import NOTEBOOK_DIR

    from omni_loader.token2wav.loader import tensor_digest

    assert words.DIGEST == tensor_digest.__name__ and flamegraph.ENTRY == "load_token2wav"
    runs = real_diff.runs.query("sampled and not warmup and status == 'ok'")
    calls = real_diff.folds[real_diff.folds["function"].isin([flamegraph.ENTRY, words.DIGEST])].pivot_table(
        index="run_id", columns="function", values="inclusive_s", aggfunc="sum", fill_value=0.0)
    joined = runs.join(calls, on="run_id").fillna({words.DIGEST: 0.0}) if words.DIGEST in calls else \
        runs.join(calls, on="run_id").assign(**{words.DIGEST: 0.0})
    joined = joined[joined[flamegraph.ENTRY] > 0]
    joined = joined.assign(extra=joined[flamegraph.ENTRY] - joined["load_s"])
    joined = joined.assign(rest=joined["extra"] - joined[words.DIGEST])

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:,.0f}\u00a0ms".replace("-", "\u2212")  # number and unit kept together

    by = {v: joined[joined["variant"] == v] for v in ("baseline", "optimized")}
    entry = real_diff.functions.set_index("function").loc[flamegraph.ENTRY]
    sentence = real_diff.entry_sentence()
    assert sentence is not None
    assert sentence.startswith(f"Why `load_token2wav`'s sampled time ({ms(entry['a_median_s'])} → "
                               f"{ms(entry['b_median_s'])}, medians) is not the sampled median loads "
                               f"({ms(by['baseline']['load_s'].median())} → {ms(by['optimized']['load_s'].median())}): "
                               "the first is the whole call, the second the call's timed phase "
                               "“Whole Token2Wav load”"), sentence
    assert (f"less the run's load was {ms(by['baseline']['extra'].mean())} (baseline) and "
            f"{ms(by['optimized']['extra'].mean())} (optimized)") in sentence, sentence
    if (joined[words.DIGEST] > 0).any():
        assert (f": {ms(by['baseline'][words.DIGEST].mean())} and {ms(by['optimized'][words.DIGEST].mean())} of it "
                f"the tensor digest (`tensor_digest`, which the call computes after that phase), "
                f"{ms(by['baseline']['rest'].mean())} and {ms(by['optimized']['rest'].mean())} the call's other "
                "steps") in sentence, sentence
    assert "one period at 250 Hz" in sentence
    text = (real_diff.directory / pdiff.DIFF_MD).read_text()
    assert f"- {sentence}\n" in text and text.index("py-spy's cost on optimized") < text.index(sentence)
    copy = executed_notebook(NOTEBOOK_DIR / "02_profiles.ipynb").copy
    shown = "\n".join(str(o.get("data", {}).get("text/markdown", "")) for c in nbformat.read(copy, 4).cells
                      if c.cell_type == "code" for o in c.get("outputs", []))
    assert sentence in shown


# --------------------------------------------------------------------------- statistics, in-process


def test_benjamini_hochberg_matches_the_step_up_rule() -> None:
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216, np.nan])
    q = stats.benjamini_hochberg(p)
    finite = p[:-1]
    order = np.argsort(finite)
    ranked = finite[order] * len(finite) / np.arange(1, len(finite) + 1)
    expected = np.minimum.accumulate(ranked[::-1])[::-1]
    assert np.allclose(q[:-1][order], np.minimum(expected, 1))
    assert np.isnan(q[-1])
    assert (q[:-1] >= finite).all()


def _synthetic_folds(null_functions: int, shift: float, runs: int = 12, seed: int = 1) -> pd.DataFrame:
    """Folds of ``runs`` runs per arm: ``null_functions`` functions alike in both arms (noisy, present in
    every run) and ``moved``, ``shift`` seconds slower in B."""
    rng = np.random.default_rng(seed)
    rows = []
    for run_id in range(2 * runs):
        variant = "A" if run_id % 2 == 0 else "B"
        for i in range(null_functions):
            t = float(rng.gamma(4.0, 0.005))
            rows.append((run_id, variant, f"f{i}", "m.py", t, t / 2, 1))
        t = 0.05 + rng.normal(0, 0.002) + (shift if variant == "B" else 0.0)
        rows.append((run_id, variant, "moved", "m.py", t, t, 1))
    return pd.DataFrame(rows, columns=["run_id", "variant", "function", "file", "inclusive_s", "self_s", "samples"])


def test_fdr_control_claims_the_shift_and_no_null_function() -> None:
    """400 functions alike in both arms (800 tests with self time) and one 150 ms slower: the one is
    claimed slower; uncorrected, a few of the 800 null p-values fall under 5% by chance and would be."""
    folds = _synthetic_folds(400, 0.15)
    table = stats.compare_functions(folds, "A", "B")
    claimed = table[table["verdict"] != stats.NO_CLAIM]
    assert list(claimed["function"]) == ["moved"] and claimed["verdict"].iloc[0] == stats.SLOWER
    assert claimed["ci_low"].iloc[0] > 0.1
    assert (table.loc[table["function"] != "moved", "self_verdict"] == stats.NO_CLAIM).all()
    nulls = table[table["function"] != "moved"]
    assert (nulls["p"] < 0.05).sum() > 0  # the chance p-values that BH is there to discount


def test_aa_synthetic_claims_nothing() -> None:
    table = stats.compare_functions(_synthetic_folds(200, 0.0, seed=7), "A", "B")
    assert (table["verdict"] == stats.NO_CLAIM).all()


def test_a_function_absent_from_some_runs_counts_zero_there() -> None:
    folds = _synthetic_folds(3, 0.0)
    folds = folds[~((folds["function"] == "f0") & (folds["variant"] == "B"))]  # never sampled in B
    row = stats.compare_functions(folds, "A", "B").set_index("function").loc["f0"]
    assert row["b_median_s"] == 0 and row["a_present"] == 1 and row["b_present"] == 0 and row["tested"]


# --------------------------------------------------------------------------- the A/A floor, in-process

AA = ("aa-1", "aa-2")  # the A/A arms' names (results.spec.AA_ARMS)


def _arms(functions: dict[str, tuple[float, float]], arms: tuple[str, str], runs: int = 12, seed: int = 5,
          first_id: int = 0) -> pd.DataFrame:
    """Folds of ``runs`` runs per arm, alternating: each function 50 ms plus normal noise (``functions[name]``:
    (B's shift, the noise's sd)), its own time all of it."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(2 * runs):
        for name, (shift, sd) in functions.items():
            t = 0.05 + rng.normal(0, sd) + (shift if i % 2 else 0.0)
            rows.append((first_id + i, arms[i % 2], name, "m.py", t, t, 1))
    return pd.DataFrame(rows, columns=["run_id", "variant", "function", "file", "inclusive_s", "self_s", "samples"])


def _with_floor() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A/B folds and A/A folds: ``within`` moves 10 ms but its A/A noise is wide, ``beyond`` moves 150 ms over a
    narrow A/A noise, ``no_floor`` moves 150 ms and is never sampled in the A/A, ``null`` does not move."""
    ab = _arms({"within": (0.01, 0.002), "beyond": (0.15, 0.002), "no_floor": (0.15, 0.002), "null": (0.0, 0.002)},
               ("A", "B"))
    aa = _arms({"within": (0.0, 0.03), "beyond": (0.0, 0.002), "null": (0.0, 0.002)}, AA, seed=6, first_id=1000)
    return ab, aa


def test_a_difference_within_its_aa_floor_is_not_claimed() -> None:
    ab, aa = _with_floor()
    floors = stats.function_floors(aa, AA)
    plain = stats.compare_functions(ab, "A", "B").set_index("function")
    held = stats.compare_functions(pd.concat([ab, aa]), "A", "B", floors=floors).set_index("function")
    within = held.loc["within"]
    assert plain.loc["within", "verdict"] == stats.SLOWER  # the test and the interval alone claim it
    assert abs(within["delta_s"]) <= within["aa_floor_s"]  # ... and it is within its floor
    assert within["verdict"] == stats.NO_CLAIM and within["within_aa_floor"]
    assert within["self_verdict"] == stats.NO_CLAIM and within["self_within_aa_floor"]
    assert within["a_median_s"] == plain.loc["within", "a_median_s"]  # the A/A runs are neither A nor B
    beyond = held.loc["beyond"]
    assert beyond["verdict"] == stats.SLOWER and beyond["delta_s"] > beyond["aa_floor_s"] > 0
    assert not beyond["within_aa_floor"]
    assert np.isnan(held.loc["no_floor", "aa_floor_s"]) and held.loc["no_floor", "verdict"] == stats.SLOWER
    assert held.loc["null", "verdict"] == stats.NO_CLAIM and not held.loc["null", "within_aa_floor"]
    assert list(held.columns) == list(stats.FUNCTION_COLUMNS[1:])


def test_a_functions_floor_is_reproduce_aa_noise_floor_per_function() -> None:
    """The larger of the A/A difference of medians and the half-width of its 95% interval (NoiseFloor's rule);
    none for a function sampled in under half of both A/A arms' runs."""
    from omni_loader.reporting.stats import bootstrap_median_difference

    aa = _arms({"f": (0.0, 0.01)}, AA)
    rare = aa[aa["run_id"] < 4].assign(function="rare")  # 2 of 12 runs of each arm
    floors = stats.function_floors(pd.concat([aa, rare]), AA).set_index("function")
    one, two = (tuple(aa[aa["variant"] == arm].sort_values("run_id")["inclusive_s"]) for arm in AA)
    low, high = bootstrap_median_difference(one, two)
    expected = max(abs(np.median(two) - np.median(one)), (high - low) / 2)
    assert floors.loc["f", "aa_floor_s"] == pytest.approx(expected) and expected > 0
    assert floors.loc["f", "self_aa_floor_s"] == pytest.approx(expected)
    assert np.isnan(floors.loc["rare", "aa_floor_s"]) and np.isnan(floors.loc["rare", "self_aa_floor_s"])


def _in_process_diff(folds: pd.DataFrame, functions: pd.DataFrame, settings: dict, tmp_path: Path) -> pdiff.ProfileDiff:
    runs = folds.drop_duplicates("run_id")[["run_id", "variant"]].assign(
        sampled=True, warmup=False, status="ok", error="", load_s=1.0, state_dict_calls=np.nan, speedscope="")
    return pdiff.ProfileDiff("A", "B", stats.assign_roles(functions, []), runs.reset_index(drop=True), folds, tmp_path,
                             {"fdr": stats.FDR, **settings})


def test_a_sampling_cost_under_one_is_said_to_be_within_the_spread(tmp_path: Path) -> None:
    """The sixth Lab pass read "py-spy's cost on optimized: ... (0.98×)" with no word: a profiler that seemed to speed
    a load up. A ratio under 1 says the sampled loads were no slower, the cost within the loads' spread."""
    ab, _ = _with_floor()
    diff = _in_process_diff(ab, stats.compare_functions(ab, "A", "B"), {"aa": False}, tmp_path)
    diff.runs = pd.concat([diff.runs, diff.runs.assign(sampled=False, load_s=1.02, run_id=diff.runs["run_id"] + 10**4)])
    text = diff.markdown(with_table=False)
    assert re.search(r"py-spy's cost on B: .*\(0\.98×: no slower sampled, its cost within the loads' spread\)\.", text), text


def test_diff_md_says_which_floor_was_used_or_that_there_was_none(tmp_path: Path) -> None:
    ab, aa = _with_floor()
    folds = pd.concat([ab, aa], ignore_index=True)
    held = stats.compare_functions(folds, "A", "B", floors=stats.function_floors(aa, AA))
    text = _in_process_diff(folds, held, {"aa": True, "aa_variant": "optimized"}, tmp_path).markdown()
    assert "A/A floor: optimized in two more arms of the same blocks (12 and 12 sampled loads)" in text
    assert "3 of the 4 tested functions have one" in text
    assert "1 difference that the test and the interval would claim was within it (`within`)" in text
    sentences = [line for line in text.split("\n\n")[1].splitlines()]
    assert [s.split("`")[1] for s in sentences] == ["beyond", "no_floor"]
    assert "beyond its A/A floor of" in sentences[0] and "A/A floor" not in sentences[1]
    assert "| A/A floor |" in text

    plain = stats.compare_functions(ab, "A", "B")
    text = _in_process_diff(ab, plain, {"aa": False}, tmp_path).markdown()
    assert "No A/A floor: no A/A arms ran beside this diff (`--aa` adds them)" in text
    assert "| A/A floor |" not in text and "`within`" in text.split("\n\n")[1]
    # B slower where nothing says B adds work: the other explanations, with the false discoveries the rate allows
    slower = int((plain["verdict"] == stats.SLOWER).sum())
    assert (f"B slower in {slower} functions (`beyond`, `no_floor`, `within`): unless B adds work there, what else "
            f"explains it is chance (a 5% false discovery rate lets about 1 false claim in 20 through; this diff made "
            f"{slower}) or the machine changing between blocks; an A/A in the same blocks (`--aa`) would hold each to "
            "its own noise floor.") in text, text


def test_profile_diff_aa_reaches_profile_diff(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``profile --diff --aa`` asks profile_diff for the A/A arms; without --aa it does not."""
    import omni_loader.cli.profile as cli_profile
    from types import SimpleNamespace

    asked = []

    def fake(snapshot, spec, **kw):
        asked.append(spec.aa)
        raise pdiff.OmniLoaderError("stopped here")

    monkeypatch.setattr(pdiff, "profile_diff", fake)
    monkeypatch.setattr(cli_profile, "snapshot_from_args", lambda args: SimpleNamespace(root=tmp_path, source="test"))
    for extra in (["--aa"], []):
        assert cli.main(["profile", "--diff", *extra, "--out", str(tmp_path)]) == 2
    assert asked == [True, False]


# --------------------------------------------------------------------------- refusals, in-process


@pytest.mark.parametrize("argv, words", [
    (["--diff", "--runs", "1"], "--runs 1: must be a whole number from 2"),
    (["--diff", "--runs", "many"], "--runs many"),
    (["--diff", "--tool", "cprofile"], "--tool cannot be used with it"),
    (["--diff", "--reference-runs", "5"], "--reference-runs cannot be used with it"),
    (["--diff", "--variants", "baseline,optimized,assign"], "compares two variants"),
    (["--diff", "--variants", "baseline,optimized", "--variant", "optimized"], "--diff --variant optimized: name the two variants with --variants A,B"),
    (["--runs", "5"], "--runs: only with --diff"),
    (["--aa"], "--aa: only with --diff"),
    (["--variant", "mine=discovery:builtin:optimized"], "--variant NAME=STEP:REF: only with --diff"),
    (["--variant", "sometimes"], "--variant sometimes: choose one of"),
    (["--diff", "--variant", "bad"], "--variants A,B"),
    # py-spy's rate: 0 never started sampling (a 30 s wait, then a traceback), 1e9 gave every function 0.0 ms
    (["--diff", "--rate", "0"], "--rate 0: must be a whole number from 1 to 10,000 samples per second"),
    (["--diff", "--rate", "1000000000"], "--rate 1000000000: must be a whole number from 1 to 10,000"),
    (["--rate", "-5"], "--rate -5: must be a whole number from 1"),
    (["--top", "0"], "--top 0: must be a whole number from 1 to 10,000"),
    (["--repeat", "100000"], "--repeat 100000: must be a whole number from 1 to 1,000"),
    (["--diff", "--warmup", "-1"], "--warmup -1: must be a whole number from 0"),
    (["--reference-runs", "0"], "--reference-runs 0: must be a whole number from 1"),
    (["--diff", "--order-seed", "-1"], "--order-seed -1: must be a whole number from 0"),
    (["--diff", "--worker-timeout", "1e300"], "--worker-timeout 1e300: must be a number of seconds above 0 and at "
                                              "most 604,800 (a week)"),
    (["--diff", "--worker-timeout", "nan"], "--worker-timeout nan: must be a number of seconds"),
])
def test_refusals(argv: list[str], words: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["profile", *argv, "--checkpoint", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err


def test_the_entry_sentence_tells_the_sampled_call_from_the_timed_load(tmp_path: Path) -> None:
    """The sentence beside py-spy's cost, on made-up runs whose figures are known: per sampled run the call's
    sampled time less the run's load, the digest's share of it and the rest, their means (which add up); an
    unsampled or warm-up run counts for nothing; a negative mean has a minus sign."""
    entry, digest = flamegraph.ENTRY, words.DIGEST
    sampled = {  # run_id: (variant, load_s, the call's sampled seconds, the digest's)
        1: ("A", 1.0, 1.1, 0.08), 2: ("B", 0.5, 0.55, 0.03), 3: ("A", 1.2, 1.3, 0.09), 4: ("B", 0.6, 0.58, 0.03),
        5: ("A", 1.1, 1.24, 0.10), 6: ("B", 0.7, 0.72, 0.03)}
    folds = pd.DataFrame([(i, v, f, "loader.py", t, 0.0, 1) for i, (v, _, call, dig) in sampled.items()
                          for f, t in ((entry, call), (digest, dig))],
                         columns=["run_id", "variant", "function", "file", "inclusive_s", "self_s", "samples"])
    runs = pd.DataFrame([(i, v, True, False, load) for i, (v, load, _, _) in sampled.items()]
                        + [(7, "A", False, False, 9.0), (8, "B", False, False, 9.0), (0, "A", True, True, 9.0)],
                        columns=["run_id", "variant", "sampled", "warmup", "load_s"]).assign(status="ok")
    functions = stats.compare_functions(folds, "A", "B")
    diff = pdiff.ProfileDiff("A", "B", functions, runs, folds, tmp_path, {"rate": 250})
    sentence = diff.entry_sentence()
    # every duration keeps its number and unit together (a no-break space: Lab broke "−2,256 / ms" in the fourth pass)
    assert "1,240\u00a0ms → 580\u00a0ms" in sentence and "\u221213\u00a0ms" in sentence
    assert sentence.replace("\u00a0", " ") == (
        "Why `load_token2wav`'s sampled time (1,240 ms → 580 ms, medians) is not the sampled median loads (1,100 ms → "
        "600 ms): the first is the whole call, the second the call's timed phase “Whole Token2Wav load”, which leaves "
        "out the call's "
        "work outside it. On average per sampled run (a mean, which the two medians' gap need not equal), the call's "
        "sampled time less the run's load was 113 ms (A) and 17 ms (B): 90 ms and 30 ms of it the tensor digest "
        "(`tensor_digest`, which the call computes after that phase), 23 ms and \u221213 ms the call's other steps "
        "outside that phase and sampling noise (py-spy counts every sample as 4 ms, one period at 250 Hz).")
    assert f"- {sentence}" in diff.markdown(with_table=False)
    no_digest = pdiff.ProfileDiff("A", "B", functions, runs, folds[folds["function"] == entry], tmp_path, {"rate": 250})
    assert "`total`" not in sentence  # the phase in words (the Lab pass read its raw id)
    assert "was 113 ms (A) and 17 ms (B), all of it the call's other steps outside that phase" in \
        no_digest.entry_sentence().replace("\u00a0", " ")
    never = pdiff.ProfileDiff("A", "B", functions, runs, folds[folds["variant"] == "A"], tmp_path, {"rate": 250})
    assert never.entry_sentence() is None  # B's call was never sampled: nothing to compare


def test_the_notebook_diff_table_keeps_each_interval_on_one_line(tmp_path: Path) -> None:
    """02's differential table: the 95% interval of B − A is one cell whose ends are joined by non-breaking spaces
    (as 01's ranges), so it never breaks across lines; the verdict is 01's short word ("no claim"), unbroken."""
    import re
    from html import unescape

    from omni_loader.notebook.profiles import Diff

    ab, _ = _with_floor()
    diff = Diff.of(_in_process_diff(ab, stats.compare_functions(ab, "A", "B"), {"aa": False}, tmp_path))
    html = diff.table().to_html()
    header = [unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<th[^>]*col_heading[^>]*>(.*?)</th>", html)]
    column = next(i for i, h in enumerate(header) if h.startswith("95% interval of B − A"))
    cells = [unescape(c) for c in re.findall(rf'<td[^>]*class="data row\d+ col{column}"[^>]*>(.*?)</td>', html)]
    assert cells and all(re.fullmatch(r"−?[\d,.]+\u00a0…\u00a0−?[\d,.]+", c) for c in cells), cells
    assert "q (BH-adjusted p)" in header and "q" not in header
    verdicts = [unescape(c) for c in re.findall(rf'<td[^>]*class="data row\d+ col{header.index("verdict")}"[^>]*>(.*?)</td>',
                                                html)]
    assert verdicts and set(verdicts) <= {"faster", "slower", "no\u00a0claim"}, verdicts  # 01's words, never wrapped
    from dataclasses import replace

    quiet = replace(diff, functions=diff.functions.assign(verdict=stats.NO_CLAIM))  # nothing claimed: the largest
    html = quiet.table().to_html()  # tested differences are shown, each "no difference claimed" in diff.md
    verdicts = [unescape(c) for c in re.findall(rf'<td[^>]*class="data row\d+ col{header.index("verdict")}"[^>]*>(.*?)</td>',
                                                html)]
    assert "no\u00a0claim" in verdicts and set(verdicts) <= {"faster", "slower", "no\u00a0claim"}, verdicts

    faster = _arms({"faster": (-0.03, 0.002), "null": (0.0, 0.002)}, ("A", "B"))  # B 30 ms faster: negative ends
    faster_diff = Diff.of(_in_process_diff(faster, stats.compare_functions(faster, "A", "B"), {"aa": False}, tmp_path))
    sentence, = faster_diff.sentences()
    # a range as the kit writes it ("a … b", non-breaking spaces), not "a to b" (the Lab pass)
    assert re.search(r"95% interval of B − A −\d+\u00a0ms\u00a0…\u00a0−\d+\u00a0ms,", sentence) and "-" not in sentence, sentence
    assert " to " not in sentence, sentence
    html = faster_diff.table().to_html()
    cells = [unescape(c) for c in re.findall(rf'<td[^>]*class="data row\d+ col{column}"[^>]*>(.*?)</td>', html)]
    delta = [unescape(c) for c in re.findall(rf'<td[^>]*class="data row\d+ col{header.index("B − A (ms)")}"[^>]*>(.*?)'
                                             r'</td>', html)]
    assert re.fullmatch(r"−\d+\u00a0…\u00a0−\d+", cells[0]) and delta[0].startswith("−"), (cells, delta)
    assert "-" not in "".join(cells + delta)  # a minus sign, as the sentences write it, never a hyphen


@pytest.mark.parametrize("rate, digits", [(250, 0), (20_000, 1)])
def test_the_notebook_diff_table_shows_times_to_the_sampling_resolution(tmp_path: Path, rate: int,
                                                                        digits: int) -> None:
    """02's differential table once showed three decimals of a ms beside py-spy's 4 ms between samples: every time is
    shown to the decimals one sample resolves at the rate the diff recorded (whole ms at 250 Hz, a tenth at 20 kHz),
    and the caption says that resolution once; the sentences' heading sits under the notebook's (``###``)."""
    from html import unescape

    from omni_loader.formatting import short_duration
    from omni_loader.notebook.profiles import Diff

    def cells_of(styler) -> list[str]:
        return re.findall(r"<td[^>]*>(.*?)</td>", styler.to_html())

    ab, _ = _with_floor()
    diff = Diff.of(_in_process_diff(ab, stats.compare_functions(ab, "A", "B"), {"aa": False, "rate": rate}, tmp_path))
    styler = diff.table()
    html = styler.to_html()
    header = [unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<th[^>]*col_heading[^>]*>(.*?)</th>", html)]
    rows = [[unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]]
    shown = diff.shown().reset_index(drop=True)
    assert len(rows) == len(shown) >= 2
    for (_, r), row in zip(shown.iterrows(), rows):
        cells = dict(zip(header, row))
        for name, column in (("A median (ms)", "a_median_s"), ("B median (ms)", "b_median_s"),
                             ("B − A (ms)", "delta_s")):
            shown_value = f"{round(r[column] * 1e3, digits) + 0.0:,.{digits}f}".replace("-", "−")
            assert cells[name] == shown_value, (name, cells[name])
        low, high = cells["95% interval of B − A (ms)"].split("\u00a0…\u00a0")
        assert low == f"{round(r['ci_low'] * 1e3, digits) + 0.0:,.{digits}f}".replace("-", "−")
        assert high == f"{round(r['ci_high'] * 1e3, digits) + 0.0:,.{digits}f}".replace("-", "−")
    caption = re.search(r"<caption>(.*?)</caption>", html).group(1)
    assert caption == (f"Times to the nearest {10.0 ** -digits:g} ms: py-spy sampled at {rate:,} Hz, one sample every "
                       f"{short_duration(1 / rate)}")
    assert html.count("sampled at") == 1
    diff.flamegraph = lambda: "the flamegraph"  # drawn from speedscope files, which these folds have none of
    sentences, table, flame = diff.section()
    assert sentences.startswith("### Differential profile: A (A) against B (B)\n")
    assert not re.search(r"^#{1,2} ", sentences, re.M) and flame == "the flamegraph"
    assert cells_of(table) == cells_of(styler)


# --------------------------------------------------------------------------- what the runs can claim; appeared, gone


def _present_folds(runs: int = 6, seed: int = 3, where: str = "B", counts: tuple[int, int] = (25, 45),
                   nulls: int = 60) -> pd.DataFrame:
    """Folds with sample counts at 250 Hz: ``nulls`` functions in every run of both arms (Poisson counts, their
    times the counts' periods), the entry holding every sample, and ``spin`` only in the runs of ``where``, with
    ``counts`` samples a run (low, high): a 134 ms step of its own."""
    rng = np.random.default_rng(seed)
    rows = []
    for run_id in range(2 * runs):
        variant = "AB"[run_id % 2]
        per = {f"f{i}": int(rng.poisson(8)) for i in range(nulls)}
        if variant == where:
            per["spin"] = int(rng.integers(*counts, endpoint=True))
        per["load_token2wav"] = sum(per.values()) + 10
        rows += [(run_id, variant, name, "m.py", n / 250, n / 250, n) for name, n in per.items() if n]
    return pd.DataFrame(rows, columns=["run_id", "variant", "function", "file", "inclusive_s", "self_s", "samples"])


def test_what_a_number_of_runs_can_claim() -> None:
    """The smallest p is the kit's own rank test's at complete separation (exact 2/924 at 6 runs untied; a tied
    arm, under the normal approximation, lower); BH's smallest q is it times the tests; the runs a variant needed
    are the first whose q is under the rate. At 6 runs over ~100 tests nothing can be claimed by its rank test."""
    from math import comb

    from omni_loader.reporting.stats import mann_whitney

    p = stats.smallest_p(6, 6)
    assert p == min(2 / comb(12, 6), mann_whitney((0.0,) * 6, (1.0,) * 6)) and p <= 2 / 924
    assert stats.smallest_q(6, 6, 93) == pytest.approx(93 * p) and stats.smallest_q(6, 6, 93) > stats.FDR
    need = stats.runs_needed(93)
    assert stats.smallest_q(need, need, 93) <= stats.FDR < stats.smallest_q(need - 1, need - 1, 93) and need > 6
    assert stats.smallest_p(1, 6) == 1.0
    six = words.reach_words(6, 6, 93, "how it is known")
    assert "over 93 tests (how it is known) the smallest q one function can reach is 0.12" in six, six
    assert f"no function can be claimed faster or slower by its rank test alone; {need} sampled loads" in six
    assert "appeared or to be gone" in six
    assert "can be claimed faster or slower" in words.reach_words(15, 15, 93, "x") and "test alone" not in \
        words.reach_words(15, 15, 93, "x")


def test_a_function_in_every_run_of_b_and_none_of_a_appeared() -> None:
    """A 134 ms step of its own, in every run of B (25-45 samples each) and none of A, 6 runs a side among 60
    functions that do not move: its rank test cannot pass BH (q > 5%), its sample counts can: claimed slower,
    it appeared. Swapped, it is gone (faster). A function in 5 of B's 6 runs, or with under MIN_SAMPLES samples
    a run, is not said to have appeared."""
    table = stats.compare_functions(_present_folds(), "A", "B").set_index("function")
    spin = table.loc["spin"]
    assert spin["q"] > stats.FDR  # the rank test alone: nothing
    assert spin["verdict"] == stats.SLOWER and spin["presence"] == stats.APPEARED and spin["presence_q"] <= stats.FDR
    assert spin["presence_q"] == pytest.approx(min(1, spin["presence_p"] * len(table)))
    assert (table.drop(index=["spin", "load_token2wav"])["verdict"] == stats.NO_CLAIM).all()
    gone = stats.compare_functions(_present_folds(where="A"), "A", "B").set_index("function").loc["spin"]
    assert gone["verdict"] == stats.FASTER and gone["presence"] == stats.GONE
    folds = _present_folds()
    few = stats.compare_functions(_present_folds(counts=(2, 4)), "A", "B").set_index("function").loc["spin"]
    assert few["verdict"] == stats.NO_CLAIM and np.isnan(few["presence_p"])
    once = folds[~((folds["function"] == "spin") & (folds["run_id"] == 1))]  # B's first run without it
    assert stats.compare_functions(once, "A", "B").set_index("function").loc["spin", "verdict"] == stats.NO_CLAIM
    stray = pd.concat([folds, pd.DataFrame([(0, "A", "spin", "m.py", 0.004, 0.004, 1)], columns=folds.columns)])
    assert np.isnan(stats.compare_functions(stray, "A", "B").set_index("function").loc["spin", "presence_p"])


def test_the_presence_test_is_a_binomial_tail_on_pooled_counts() -> None:
    """None of the S samples that caught it fell in A, whose share of all samples is s: (1 - s)^S, doubled;
    the counts' dispersion (variance over mean, at least 1) divides S."""
    steady = stats.presence_test(np.zeros(6), np.array([33] * 6), 150.0, 350.0)
    assert steady["presence"] == stats.APPEARED and steady["dispersion"] == 1.0 and steady["least_samples"] == 33
    assert steady["presence_p"] == pytest.approx(2 * 0.7 ** 198)
    spread = np.array([23, 48, 30, 46, 35, 38])
    uneven = stats.presence_test(np.zeros(6), spread, 150.0, 350.0)
    phi = np.var(spread, ddof=1) / spread.mean()
    assert uneven["dispersion"] == pytest.approx(phi) and uneven["presence_p"] == pytest.approx(2 * 0.7 ** (220 / phi))
    gone = stats.presence_test(np.array([33] * 6), np.zeros(6), 350.0, 150.0)
    assert gone["presence"] == stats.GONE and gone["presence_p"] == pytest.approx(steady["presence_p"])
    assert np.isnan(stats.presence_test(np.array([0, 0, 1]), np.array([9, 9, 9]), 10.0, 30.0)["presence_p"])


def test_null_diffs_say_nothing_appeared_but_where_samples_are_not_independent() -> None:
    """5 synthetic A/A diffs at 6 runs a side, 20 functions in every run (Poisson counts) and 20 that some runs
    call a few times (1 to 4 samples when they do): nothing is claimed. The test's blind spot, measured: a
    function that some processes run for 80 ms and others not at all (all-or-nothing, a run probability of 1/2,
    20 samples when it does) splits perfectly by arm 2 / 4^6 = 1/2,048 of the time, and is then said to have
    appeared or to be gone (the binomial takes samples for independent draws): in 8,192 such function-diffs,
    about 4, as diff.md says."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        folds = _present_folds(seed=seed, where="none", nulls=20)
        rare = [(r, "AB"[r % 2], f"r{i}", "m.py", n / 250, n / 250, n) for r in range(12) for i in range(20)
                if rng.random() < 0.5 and (n := int(rng.integers(1, 4, endpoint=True)))]
        table = stats.compare_functions(pd.concat([folds, pd.DataFrame(rare, columns=folds.columns)]), "A", "B")
        assert (table["verdict"] == stats.NO_CLAIM).all(), (seed, table[table["verdict"] != stats.NO_CLAIM])
    rng = np.random.default_rng(0)
    runs = rng.random((8192, 12)) < 0.5
    said = sum(stats.presence_test(20.0 * r[:6], 20.0 * r[6:], 1000.0, 1000.0)["presence_p"] < 1e-4 for r in runs)
    assert 0 < said <= 12, said


def test_diff_md_says_it_appeared_and_what_the_runs_could_claim(tmp_path: Path) -> None:
    folds = _present_folds()
    diff = _in_process_diff(folds, stats.compare_functions(folds, "A", "B"), {"aa": False}, tmp_path)
    text = diff.markdown()
    spin = next(line for line in text.splitlines() if line.startswith("- `spin`"))
    b_runs = folds[(folds["variant"] == "B") & (folds["function"] == "spin")]["samples"]
    a_total = int(folds[(folds["variant"] == "A") & (folds["function"] == "load_token2wav")]["samples"].sum())
    assert (f"it appeared in B: sampled in all 6 runs of B (at least {b_runs.min()} samples each, {b_runs.sum()} in "
            f"all) and in none of A's 6 (0 of their {a_total:,} samples); were a sample of either variant as likely "
            "to catch it, the chance of that is p < 0.000001 (") in spin, spin
    assert not re.search(r"\d[eE][+-]\d", text)  # no scientific notation: the notebooks show this text
    assert "binomial test on the pooled sample counts" in spin and "with Bonferroni over the 62 functions" in spin
    assert "Appeared or gone: 1 of the claims" in text
    assert "splits so by chance at most once in 2,048 such functions at these runs" in text
    assert "With 6 sampled loads a variant, a rank test's smallest p is 0.0013" in text
    assert "no function can be claimed faster or slower by its rank test alone" in text


def test_the_claim_the_runs_allow_is_said_before_the_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Before any run: the smallest q and the runs needed, over an estimate of the tests (said as one), or over
    the tests the last diff into the same --out ran."""
    import json

    import omni_loader.cli.profile as cli_profile
    from types import SimpleNamespace

    def fake(*args, **kw):
        raise pdiff.OmniLoaderError("stopped here")

    monkeypatch.setattr(pdiff, "profile_diff", fake)
    monkeypatch.setattr(cli_profile, "snapshot_from_args", lambda args: SimpleNamespace(root=tmp_path, source="test"))
    assert cli.main(["profile", "--diff", "--runs", "6", "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert (f"over {words.ESTIMATED_TESTS} tests (an estimate: diffs of the tiny model ran 93 to 137; the number "
            "is known only after the runs)") in out, out
    assert "no function can be claimed faster or slower by its rank test alone" in out
    (tmp_path / "diff").mkdir()
    (tmp_path / "diff" / "diff.json").write_text(json.dumps({"a": "x", "b": "y", "tests": 40}))
    assert cli.main(["profile", "--diff", "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "With 15 sampled loads a variant" in out and "over 40 tests (as many as the last diff" in out, out
    assert "can be claimed faster or slower" in out and "test alone" not in out


# --------------------------------------------------------------------------- real processes: the planted step, the
# writer lock, SIGTERM, a full disk

SPIN_STEP = '''
import time
from omni_loader.token2wav.discovery import find_persistent_buffers


def spin_a_while():
    end = time.perf_counter() + 0.134
    while time.perf_counter() < end:
        pass


def find(model):
    found = find_persistent_buffers(model, "optimized")
    spin_a_while()
    return found
'''
SLEEPY_STEP = "import time\n\ndef find(model):\n    time.sleep(120)\n"


def _diff_argv(python: str, snapshot: Path, out: Path, *extra: str) -> list[str]:
    return [python, "-m", "omni_loader", "profile", "--diff", "--checkpoint", str(snapshot), "--out", str(out), *extra]


def _children(pid: int) -> list[tuple[int, list[str]]]:
    """The live children of ``pid``, each with its command line."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append((int(stat.parent.name), (stat.parent / "cmdline").read_text().split("\0")))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _sampling_diff(python: str, snapshot: Path, tmp_path: Path, request: pytest.FixtureRequest) -> tuple:
    """A real ``profile --diff`` whose first run is sampled and sleeps 120 s in its load: started, and waited on
    until py-spy samples that load. Returns the process, py-spy's pid, the load's pid, the temp folder and --out."""
    import os
    import subprocess
    import time

    from omni_loader.bench.worker import RUN_DIR_PREFIX
    from omni_loader.results.planner import plan_runs

    step = tmp_path / "sleepy_step.py"
    step.write_text(SLEEPY_STEP)
    labels = ("sleepy", "sleepy-again", "sleepy" + pdiff.UNSAMPLED, "sleepy-again" + pdiff.UNSAMPLED)
    seed = next(s for s in range(50) if not plan_runs(0, 2, "blocks", s, variants=labels)[0].variant.endswith(
        pdiff.UNSAMPLED))  # the first run is a sampled one
    # TMPDIR holds the fork server's socket: a short path of its own (a socket's path is at most 107 bytes, and a
    # pytest worker's tmp_path is longer than that beside the server's own name)
    tmp, out = Path(tempfile.mkdtemp(prefix="ol-")), tmp_path / "out"
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    proc = subprocess.Popen(_diff_argv(python, snapshot, out, "--runs", "2", "--warmup", "0", "--order-seed",
                                       str(seed), "--variant", f"sleepy=discovery:{step}:find",
                                       "--variants", "sleepy,sleepy"),
                            env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        spies = [argv for _, argv in _children(proc.pid) if argv[0].endswith("py-spy")]
        if spies and any(p.name.startswith(RUN_DIR_PREFIX) for p in tmp.iterdir()):
            time.sleep(2)  # py-spy said it samples; the load is let go and sleeps
            spy = next(pid for pid, argv in _children(proc.pid) if argv[0].endswith("py-spy"))
            return proc, spy, int(spies[0][spies[0].index("--pid") + 1]), tmp, out
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"py-spy never sampled the load: {proc.communicate()}")


@pytest.mark.subprocess
@pytest.mark.slow
def test_sigterm_stops_py_spy_and_its_load_and_removes_the_temp_folder(tiny_snapshot: Path, tmp_path: Path,
                                                                      python: str, request: pytest.FixtureRequest) -> None:
    """SIGTERM to profile's main process (what ``timeout`` and a batch system send) stops it as SIGINT does:
    py-spy and the sampled load stopped, the private temporary folder removed, "interrupted", exit 130. Left to
    SIGTERM's default, py-spy and the load were left running and the folder behind."""
    import signal
    import time

    from omni_loader.bench.worker import RUN_DIR_PREFIX

    if find_py_spy()[0] is None:
        pytest.skip("py-spy is not installed")
    proc, spy, load, tmp, _ = _sampling_diff(python, tiny_snapshot, tmp_path, request)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_running(spy) or _running(load)):
        time.sleep(0.1)
    assert proc.returncode == 130 and "interrupted" in err, err
    assert not _running(spy) and not _running(load)
    assert not [p for p in tmp.iterdir() if p.name.startswith(RUN_DIR_PREFIX)]


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_second_diff_into_the_same_out_is_refused(tiny_snapshot: Path, tmp_path: Path, python: str,
                                                    request: pytest.FixtureRequest) -> None:
    """Two ``profile --diff`` into one --out both ran and mixed their files: the second is refused in one line
    naming the first, and the first goes on."""
    import signal
    import subprocess

    if find_py_spy()[0] is None:
        pytest.skip("py-spy is not installed")
    first, *_, out = _sampling_diff(python, tiny_snapshot, tmp_path, request)
    try:
        second = subprocess.run(_diff_argv(python, tiny_snapshot, out, "--runs", "2", "--variants",
                                           "optimized,optimized"), capture_output=True, text=True, timeout=120)
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert f"{out / 'diff'} is being written by process {first.pid}" in lines[0]
    assert "choose another --out" in lines[0] and not (out / "diff" / "functions.csv").exists()


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_full_disk_is_blamed_on_the_disk(tiny_snapshot: Path, tmp_path: Path, python: str) -> None:
    """--out on an 8 KiB tmpfs: py-spy cannot write its samples there ("No space left on device (os error 28)"), nor
    the kit its log after it; said as the disk's, in one line, naming the folder (not "--diff: py-spy wrote no
    speedscope file", nor a bare "OSError: [Errno 28]")."""
    import subprocess

    if find_py_spy()[0] is None:
        pytest.skip("py-spy is not installed")
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(full)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (not root)")
    try:
        proc = subprocess.run(_diff_argv(python, tiny_snapshot, full, "--runs", "2", "--warmup", "0",
                                         "--variants", "optimized,optimized"), capture_output=True, text=True,
                              timeout=300)
    finally:
        subprocess.run(["umount", str(full)], check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines, proc.stderr
    assert lines[-1].startswith(f"omni-loader: error: no space left on the disk of {full / 'diff'}"), lines[-1]
    assert "free some space, or choose another --out" in lines[-1] and "py-spy wrote no" not in proc.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_step_of_its_own_at_6_runs_appeared(tiny_snapshot: Path, tmp_path: Path, python: str) -> None:
    """A user step that spends 134 ms in a function of its own, 6 runs a variant: before the runs, that no
    function can be claimed by its rank test at 6 runs; in diff.md, that the function appeared, with its
    evidence, and what the runs could claim (its rank test's q was 0.063, and nothing was said)."""
    import subprocess

    if find_py_spy()[0] is None:
        pytest.skip("py-spy is not installed")
    step = tmp_path / "spin_step.py"
    step.write_text(SPIN_STEP)
    out = tmp_path / "out"
    proc = subprocess.run(_diff_argv(python, tiny_snapshot, out, "--runs", "6", "--variant",
                                     f"spin=discovery:{step}:find", "--variants", "optimized,spin"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    before = proc.stdout.split("# Differential profile")[0]  # printed before the runs
    assert "no function can be claimed faster or slower by its rank test alone" in before, proc.stdout
    text = (out / "diff" / pdiff.DIFF_MD).read_text()
    spin = next(line for line in text.splitlines() if line.startswith("- `spin_a_while`"))
    assert "slower by" in spin and "it appeared in spin: sampled in all 6 runs of spin" in spin, text
    assert "and in none of optimized's 6 (0 of their" in spin and "with Bonferroni over the" in spin
    assert "With 6 sampled loads a variant, a rank test's smallest p is" in text


# --------------------------------------------------------------------------- interrupted, then continued


def _verdicts(functions: pd.DataFrame) -> dict[str, str]:
    return dict(zip(functions["function"], functions["verdict"]))


@pytest.mark.subprocess
@pytest.mark.slow
def test_an_interrupted_diff_is_continued_with_resume(tiny_snapshot: Path, tmp_path: Path, python: str,
                                                      request: pytest.FixtureRequest, real_diff) -> None:
    """SIGTERM once runs.csv holds some runs: exit 130 and the one line that continues it, shell-quoted (an --out
    with a space); the same command without --resume is refused (it would throw the runs away); with --resume it
    runs the others, each planned run once in runs.csv, and its verdicts are the ones its saved rows give. The
    baseline's state_dict discovery is gone from optimized in it, and claimed by the suite's diff that ran straight
    through (02's, with more runs: three a side here can claim it only by its presence test), as the fixture read it:
    its folder is notebook 02's, which another suite run may have executed anew, or be executing, by now."""
    import os
    import shlex
    import signal
    import subprocess
    import time

    from omni_loader.results.planner import plan_runs

    if find_py_spy()[0] is None:
        pytest.skip("py-spy is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="ol-"))  # the fork server's socket: a short path (see _sampling_diff)
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    env = {**os.environ, "TMPDIR": str(tmp), "OMNI_LOADER_PROGRESS": "lines"}
    settings = ("--runs", "3", "--warmup", "0", "--rate", "1000")
    out = tmp_path / "out dir"
    proc = subprocess.Popen(_diff_argv(python, tiny_snapshot, out, *settings), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    runs_csv, deadline = out / "diff" / pdiff.RUNS_CSV, time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if runs_csv.is_file() and runs_csv.read_text().count("\n") > 4:  # the header and at least 4 runs
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=120)
    saved = pd.read_csv(runs_csv)
    command = shlex.join(["omni-loader", "profile", "--diff", "--resume", "--out", str(out)])
    assert proc.returncode == 130, err
    assert f"\ninterrupted: {len(saved)} runs saved in {out / 'diff'}; continue with: {command}\n" in err, err
    assert "Traceback" not in err, err
    plan = plan_runs(0, 3, "blocks", 0, variants=("baseline", "optimized", "baseline" + pdiff.UNSAMPLED,
                                                   "optimized" + pdiff.UNSAMPLED))
    assert 4 <= len(saved) < len(plan)

    again = subprocess.run(_diff_argv(python, tiny_snapshot, out, *settings), env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 2 and f"continue with: {command}" in again.stderr, again.stderr
    resumed = subprocess.run(_diff_argv(python, tiny_snapshot, out, *settings, "--resume"), env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    runs = pd.read_csv(runs_csv)
    assert sorted(runs["run_id"]) == [r.run_id for r in plan]  # each planned run once
    assert list(runs["run_id"][: len(saved)]) == list(saved["run_id"])  # the saved runs kept, not run again

    folds = pd.read_csv(out / "diff" / pdiff.RUN_FUNCTIONS_CSV, keep_default_na=False, na_values=[""])
    assert set(folds["run_id"]) == set(runs.loc[runs["sampled"], "run_id"])
    again = stats.compare_functions(folds.assign(file=folds["file"].fillna("").astype(str)), "baseline", "optimized")
    assert _verdicts(pdiff.read_profile_diff(out).functions) == _verdicts(again)

    sampled = folds[folds["function"] == "Module.state_dict"]
    assert set(sampled["variant"]) == {"baseline"} and sampled["run_id"].nunique() == 3, sampled  # gone from B
    assert _verdicts(real_diff.functions)["Module.state_dict"] == stats.FASTER


def test_a_resume_with_other_settings_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--resume takes the settings saved in plan.json; one typed that differs is refused in one line naming it, and
    a folder with no diff to continue is said to have none."""
    import json

    from omni_loader.profiling.spec import ProfileSpec

    assert cli.main(["profile", "--diff", "--resume", "--out", str(tmp_path)]) == 2
    assert "holds no differential profile to continue" in capsys.readouterr().err
    (tmp_path / "diff").mkdir()
    spec = ProfileSpec(diff=True, runs=4, checkpoint=str(tmp_path))
    (tmp_path / "diff" / pdiff.PLAN_JSON).write_text(json.dumps({"status": "running", "spec": spec.record()}))
    assert cli.main(["profile", "--diff", "--resume", "--runs", "5", "--aa", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runs 5 (saved: 4), --aa (saved: off)" in err, err
    assert cli.main(["profile", "--resume", "--out", str(tmp_path)]) == 2
    assert "--resume: only with --diff" in capsys.readouterr().err
