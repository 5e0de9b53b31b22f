"""The book's evidence from run folders (mrtpo.analysis.report): paired comparisons with intervals, verdict and power tables,
replay rates over the pairs that exist, check-region ratios of mean shares. Run folders are written by hand here
(a few files each), so nothing trains."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from mrtpo.analysis import (
    beta_sweep,
    claims,
    evidence,
    headline,
    localisation,
    multiplicity,
    power_analysis,
    report,
    significance,
)
from mrtpo.runs.behaviour import record
from mrtpo.files.manifest import write_manifest
from mrtpo.runs.results import Run

PROMPTS = 16


def fake_run(root, method, seed, per_prompt: np.ndarray, components=("execution_match",), digest="d0"):
    """A run folder whose temperature-1 evaluation on ``synthetic_test`` has per-prompt values ``per_prompt``
    (P, M) (eval_prompts.csv); eval.csv holds the means over prompts."""
    folder = root / f"{method}-seed{seed}"
    folder.mkdir(parents=True)
    cfg = {"task": "if", "method": method, "model": "tiny", "seed": seed, "mrtpo_beta": 0.5, "steps": 100,
           "eval_samples": 4, "prompts_per_step": 8, "num_generations": 8}
    (folder / "config.json").write_text(json.dumps({"config": cfg, "data": {"synthetic_test": digest}}))
    # written by the current code: its behaviour fingerprint (mrtpo.runs.behaviour), so the runs may be paired
    (folder / "summary.json").write_text(json.dumps({"train_runtime_s": 1.0, **record("if", method)}))
    (folder / "eval.json").write_text(json.dumps({"synthetic_test": {"n_prompts": PROMPTS}}))
    rows, prompt_rows = [], []
    for m, name in enumerate(components):
        rows.append({"run": folder.name, "task": "if", "model": "tiny", "method": method, "mrtpo_beta": 0.5, "seed": seed,
                     "steps": 100, "benchmark": "synthetic_test", "decoding": "temp1", "metric": name,
                     "value": float(np.nanmean(per_prompt[:, m])), "n_prompts": PROMPTS})
        prompt_rows += [{"benchmark": "synthetic_test", "decoding": "temp1", "prompt": p, "metric": name,
                         "value": per_prompt[p, m]} for p in range(PROMPTS)]
    pd.DataFrame(rows).to_csv(folder / "eval.csv", index=False)
    steps = pd.DataFrame({"step": [1, 2, 3], "step_time": [2.0, 2.0, 2.0] if method == "gdpo" else [3.0, 3.0, 3.0]})
    if method == "mrtpo":  # the replay's forwards per response, as the trainer logs them
        steps["mrtpo/replay_forwards_per_response"] = [2.0, 2.5, 3.0]
    steps.to_csv(folder / "metrics.csv", index=False)
    pd.DataFrame(prompt_rows).to_csv(folder / "eval_prompts.csv", index=False)
    write_manifest(folder)
    return Run(folder)


def values(rng, p, components=1):
    return rng.binomial(4, p, size=(PROMPTS, components)) / 4


def test_compare_pairs_per_prompt_values_when_every_shared_run_has_them_and_seed_values_otherwise(tmp_path):
    rng = np.random.default_rng(0)
    a = [fake_run(tmp_path / "a", "mrtpo", s, values(rng, 0.6)) for s in (0, 1, 2)]
    b = [fake_run(tmp_path / "b", "gdpo", s, values(rng, 0.4)) for s in (0, 1, 2, 3)]
    c = evidence.compare(a, b, "execution_match", claimed=0.016)
    va, vb = evidence.seed_values(a, "execution_match"), evidence.seed_values(b, "execution_match")
    d = [va[s] - vb[s] for s in (0, 1, 2)]
    assert c["shared_seeds"] == [0, 1, 2] and c["resampled"] == "seeds (paired t)" and c["prompts"] == PROMPTS
    assert c["diff"] == pytest.approx(np.mean(d)) and c["sd"] == pytest.approx(np.std(d, ddof=1))
    assert c["p"] == pytest.approx(significance.paired_t_p(d))
    assert c["lo"] < c["diff"] < c["hi"] and c["b_seeds"] == [0, 1, 2, 3] and c["a_mean"] == pytest.approx(np.mean(list(va.values())))
    # one shared run without per-prompt results (an older folder): the per-seed values, the same interval
    old = [fake_run(tmp_path / "old", "mrtpo", 0, values(rng, 0.6))] + a[1:]
    (old[0].path / "eval_prompts.csv").unlink()
    write_manifest(old[0].path)
    assert evidence.compare(old, b, "execution_match")["prompts"] == 0
    # other evaluation prompts (a different data digest): never paired prompt by prompt
    other = [fake_run(tmp_path / "other", "gdpo", s, values(rng, 0.4), digest="d1") for s in (0, 1, 2)]
    assert evidence.compare(a, other, "execution_match")["prompts"] == 0


def test_a_component_metric_is_paired_over_its_components(tmp_path):
    """Instruction following's constraint_mean: the mean over constraint slots, a slot NaN where it does not apply."""
    rng = np.random.default_rng(1)
    slots = ("constraint_0", "constraint_1")

    def slot_values(p):
        x = values(rng, p, 2)
        x[::2, 1] = np.nan  # the second constraint applies to every other prompt
        return x

    a = [fake_run(tmp_path / "a", "mrtpo", s, slot_values(0.7), slots) for s in (0, 1)]
    b = [fake_run(tmp_path / "b", "gdpo", s, slot_values(0.3), slots) for s in (0, 1)]
    c = evidence.compare(a, b, "constraint_mean")
    va, vb = evidence.seed_values(a, "constraint_mean"), evidence.seed_values(b, "constraint_mean")
    assert c["prompts"] == PROMPTS and c["diff"] == pytest.approx(np.mean([va[s] - vb[s] for s in (0, 1)]))
    se, how = evidence.run_eval_se(a[0], "constraint_mean")
    assert how == "within prompts" and 0 < se < 0.2
    # an older folder spells mrtpo_beta "beta" in eval.csv: read beside newer ones, each keeps its value
    old = a[0].path / "eval.csv"
    pd.read_csv(old).rename(columns={"mrtpo_beta": "beta"}).to_csv(old, index=False)
    write_manifest(a[0].path)
    assert evidence.seed_values(a, "constraint_mean") == pytest.approx(va)


def test_verdict_table_power_and_noise(tmp_path):
    rng = np.random.default_rng(2)
    arms = {"gdpo": [fake_run(tmp_path / "g", "gdpo", s, values(rng, 0.4 + 0.05 * s)) for s in (0, 1, 2)],
            "mrtpo": [fake_run(tmp_path / "m", "mrtpo", s, values(rng, 0.9)) for s in (0, 1, 2)],
            "joint": [fake_run(tmp_path / "j", "joint", 0, values(rng, 0.9))], "opsd": []}
    table = evidence.verdict_table(arms, [("mrtpo", "gdpo"), ("mrtpo", "opsd"), ("joint", "gdpo")], "execution_match",
                                 "table5_ablation")
    assert table["comparison"].tolist() == ["mrtpo − gdpo", "joint − gdpo"]  # no opsd runs: no row
    row = table.set_index("comparison").loc["mrtpo − gdpo"]
    assert row["shared seeds"] == "0, 1, 2" and row["interval over"] == "seeds (paired t)"
    # 0.9 against 0.4-0.5 on the same prompts, three seeds (two would leave t_1 = 12.7 times the spread)
    assert row["paper"] == "+1.60 points" and row["verdict"] == "reproduced" and row["p (paired t)"] < 0.05
    assert math.isnan(row["p (Holm)"])  # no family given: judged at 0.05 alone
    # in the book's family, the same difference with an adjusted p above 0.05 is no gap, and says what it could see
    family = pd.DataFrame({"p (Holm)": [0.2], "detectable in the family": [0.5]}, index=["mrtpo − gdpo"])
    held = evidence.verdict_table(arms, [("mrtpo", "gdpo")], "execution_match", "table5_ablation", adjusted=family).iloc[0]
    assert held["p (Holm)"] == 0.2 and held["verdict"] == "inconclusive: not distinguishable at this power (detectable: ±0.500)"
    assert "1 more have a raw p below 0.05 that the family's correction does not keep" in evidence.verdict_sentence(
        evidence.verdict_table(arms, [("mrtpo", "gdpo")], "execution_match", adjusted=family))
    one = table.set_index("comparison").loc["joint − gdpo"]  # as large, but on one shared seed: no seed noise in it
    assert one["interval over"] == "prompts only: one shared seed" and one["lo"] > 0 and one["verdict"] == "inconclusive"
    sentence = evidence.verdict_sentence(table)
    assert "1 of 2 comparisons show a gap" in sentence and "one shared seed (joint − gdpo)" in sentence
    power = power_analysis.power_table(arms | {"solo": [fake_run(tmp_path / "s", "solo", 0, values(rng, 0.5))]},
                               [("mrtpo", "gdpo"), ("joint", "solo")], "execution_match").set_index("comparison")
    v = {m: evidence.seed_values(arms[m], "execution_match") for m in ("gdpo", "mrtpo")}
    assert power.at["mrtpo − gdpo", "measured"] == "paired"
    assert power.at["mrtpo − gdpo", "sd of the difference"] == pytest.approx(np.std([v["mrtpo"][s] - v["gdpo"][s] for s in (0, 1, 2)], ddof=1))
    assert "pooled" in power.at["joint − solo", "measured"]  # neither arm has two seeds: the task's spread
    assert power.at["joint − solo", "seeds for 0.05 at 80% power"] >= 3
    assert power.at["joint − solo", "detectable at 3 seeds"] > power.at["joint − solo", "detectable at 5 seeds"]
    noise = power_analysis.noise_table(arms, "execution_match").set_index("method")
    assert noise.at["gdpo", "seeds"] == "0, 1, 2" and noise.at["gdpo", "evaluation s.e. from"] == "within prompts"
    assert noise.at["gdpo", "seed std (observed)"] == pytest.approx(np.std(list(v["gdpo"].values()), ddof=1))


def test_the_family_is_every_distinct_comparison_of_the_book_adjusted_by_holm():
    members = multiplicity.members()
    assert len(members) == 48  # 54 rows of the pages' tables, 6 of them the same (task, pair) on two pages
    assert ("sql", "mrtpo", "gdpo", ["table1_text_to_sql", "table5_ablation"]) in members
    p = [0.01, 0.04, 0.03, 0.005]
    comparisons = [{"task": "sql", "comparison": f"c{i}", "pages": ["x"],
                    "result": {"shared_seeds": [0, 1, 2], "diff": 0.1, "lo": 0.01, "hi": 0.2, "sd": 0.03, "p": q}}
                   for i, q in enumerate(p)] + [{"task": "sql", "comparison": "none", "pages": ["x"], "result": None}]
    family = multiplicity.family_table(comparisons).set_index("comparison")
    np.testing.assert_allclose(family["p (Holm)"].to_numpy(float), [0.03, 0.06, 0.06, 0.02, np.nan])
    assert family["gap"].tolist() == [True, False, False, True, False]
    assert family.at["c0", "detectable"] == pytest.approx(significance.detectable_difference(0.03, 3))
    assert family.at["c0", "detectable in the family"] == pytest.approx(significance.detectable_difference(0.03, 3, alpha=0.05 / 4))
    sentence = multiplicity.family_sentence(family.reset_index())
    assert sentence.startswith("The book reports 5 distinct comparisons; 4 rest on two shared seeds or more and are tested")
    assert "4 have a raw p below 0.05, where chance alone would give about 0.2; after Holm's correction 2 remain" in sentence
    assert "1 have no test (one shared seed, or an arm without runs: sql none)" in sentence
    assert multiplicity.adjusted(family.reset_index(), "sql").at["c3", "p (Holm)"] == pytest.approx(0.02)


def test_cost_beside_gain(tmp_path):
    rng = np.random.default_rng(3)
    arms = {"gdpo": [fake_run(tmp_path / "g", "gdpo", s, values(rng, 0.4)) for s in (0, 1)],
            "mrtpo": [fake_run(tmp_path / "m", "mrtpo", s, values(rng, 0.6)) for s in (0, 1)],
            "entropy": [fake_run(tmp_path / "e", "entropy", 0, values(rng, 0.5))], "joint": []}
    view = evidence.cost_gain(arms, "execution_match", "table5_ablation")
    assert list(view.index) == ["gdpo", "mrtpo", "entropy"]
    assert view.loc["mrtpo", "extra forwards per response"] == "2.50" and view.loc["entropy", "extra forwards per response"] == "0.00"
    assert view.loc["mrtpo", "step time / gdpo's"] == "1.50" and view.loc["gdpo", "gain over gdpo (95% interval)"] == "—"
    c = evidence.compare(arms["mrtpo"], arms["gdpo"], "execution_match")
    assert view.loc["mrtpo", "gain over gdpo (95% interval)"] == evidence.interval_text(c["diff"], c["lo"], c["hi"])
    assert view.loc["mrtpo", "seed ids"] == "0, 1" and view.loc["mrtpo", "paper: Qwen2.5-Coder-7B (± std)"] == "73.15 ± —"


def test_paper_claims_on_our_scale():
    text, claimed = evidence.paper_claim("table1_text_to_sql", "mrtpo", "gdpo", "six-benchmark avg execution accuracy")
    assert text == "+1.28 (3B); +1.60 (7B) points" and claimed == pytest.approx((1.28 + 1.60) / 200)
    assert evidence.paper_claim("table5_ablation", "mrtpo", "entropy") == ("not in the paper", None)


def test_replay_rate_divides_by_the_pairs_that_exist():
    """Two rewards, 8 responses a step; the second applies to half of them and is replayed on all of those."""
    m = pd.DataFrame({"completions_per_step": [8, 8], "mrtpo/a/frac_replayed": [0.5, 0.25],
                      "mrtpo/b/frac_replayed": [0.5, 0.5], "a/not_applicable": [0.0, 0.0], "b/not_applicable": [4.0, 4.0],
                      "mrtpo/frac_replayed": [0.5, 0.375], "mrtpo/effective_k": [1.0, 0.75],
                      "time/replay": [1.0, 1.0], "step_time": [4.0, 4.0]})
    # the trainer's log (PAPER.md §7): each reward's rate over its pairs, b's over the 4 responses it applies to
    logged = m.assign(**{"mrtpo/b/frac_replayed": [1.0, 1.0], "mrtpo/frac_replayed": [8 / 12, 6 / 12],
                         "mrtpo/rewards_applying": [1.5, 1.5]})
    # run folders written before: frac_replayed over all 8 responses of every reward and step
    for log in (logged, m):
        rates = report.replay_rates(log)
        assert rates["b"] == 1.0 and rates["a"] == pytest.approx(0.375)
        assert rates["pairs replayed (of those that exist)"] == pytest.approx((4 + 2 + 4 + 4) / (16 + 8))
        assert rates["rewards applying per response"] == 1.5 and rates["effective K"] == pytest.approx(0.875)
    assert logged["mrtpo/frac_replayed"].mean() == pytest.approx(rates["pairs replayed (of those that exist)"], abs=0.01)


def test_region_table_pools_each_group_and_brackets_its_ratio():
    """Two constraint states: the ratio of each is its pooled one (PAPER.md §7), inside its bootstrap interval."""
    loc = pd.DataFrame({"state": ["ok", "ok", "ok", "bad", "bad"], "seed": [0, 0, 1, 0, 1],
                        "shift_inside": [1.0, 1.5, 0.5, 2.0, 0.0], "shift_total": [2.0, 6.0, 1.0, 4.0, 4.0],
                        "tokens_inside": [1, 6, 2, 5, 5], "tokens_total": [10, 10, 10, 10, 10],
                        "concentration80": [0.2, 0.4, 0.3, 0.5, 0.5]})
    table = localisation.region_table(loc, ["state"]).set_index("state")
    assert table.loc["ok", "ratio"] == pytest.approx((3 / 9) / (9 / 30)) and table.loc["ok", "profiles"] == 3
    assert table.loc["bad", "shift share"] == pytest.approx(0.25) and table.loc["bad", "token share"] == pytest.approx(0.5)
    assert table.loc["ok", "seeds"] == "0, 1" and table.loc["ok", "concentration80"] == pytest.approx(0.3)
    for row in table.itertuples():
        assert row.lo <= row.ratio <= row.hi
    whole = localisation.region_table(loc)
    assert len(whole) == 1 and whole["ratio"].iloc[0] == pytest.approx((5 / 17) / (19 / 50))


def test_region_table_counts_profiles_and_resamples_seeds():
    """Two seeds of two profiles, each profile with a row per reward: 4 profiles (not 8 rows), and an interval over
    the seeds, each with all its rows: the two seeds' ratios bound it."""
    loc = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "profile": [0, 0, 1, 1] * 2, "label": ["a", "b"] * 4,
                        "shift_inside": [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0], "shift_total": [4.0] * 8,
                        "tokens_inside": [1] * 8, "tokens_total": [10] * 8, "concentration80": [0.3] * 8})
    row = localisation.region_table(loc).iloc[0]
    assert row["profiles"] == 4 and row["interval over"] == "seeds"
    assert row["ratio"] == pytest.approx((16 / 32) / (8 / 80))
    assert (row["lo"], row["hi"]) == (pytest.approx(2.5), pytest.approx(7.5))  # seed 0 alone, seed 1 alone
    one = localisation.region_table(loc[loc["seed"] == 0]).iloc[0]
    assert one["interval over"] == "profiles of one seed" and one["profiles"] == 2


def test_small_region_ratio_pools_the_small_regions_rows():
    """PAPER.md §7: a ratio of pooled shares. Label "end" holds a tenth of the shift on a fiftieth of the tokens
    (ratio 5) in one row; "title" half the shift on a quarter of the tokens (ratio 2) in three; "body" is large
    and left out. The mean of the labels' ratios is 3.5; pooled over the rows it is
    (0.1 + 3 * 0.5) / 4 ÷ (1 + 3 * 12.5) / 200 = 0.4 / 0.1925 = 2.08."""
    loc = pd.DataFrame({"label": ["end", "title", "title", "title", "body"],
                        "shift_inside": [0.1, 0.5, 0.5, 0.5, 0.9], "shift_total": [1.0] * 5,
                        "tokens_inside": [1, 12.5, 12.5, 12.5, 40], "tokens_total": [50] * 5})
    ratio, names = localisation.small_region_ratio(loc)
    assert names == "end, title" and ratio == pytest.approx(0.4 / 0.1925)
    assert localisation.small_region_ratio(loc[loc["label"] == "body"]) == (pytest.approx(math.nan, nan_ok=True), "")


def test_localisation_verdicts_follow_table4s_rows():
    """Satisfied constraints with their shift on a tenth of the tokens; violated ones with none of it there."""
    n = 6
    loc = pd.DataFrame({"state": ["satisfied"] * n + ["violated"] * n, "seed": [0, 1] * n,
                        "label": ["startend:end_checker"] * n + ["detectable_format:number_bullet_lists"] * n,
                        "shift_inside": [0.5, 0.6, 0.4, 0.5, 0.55, 0.45] + [0.1] * n, "shift_total": [1.0] * 2 * n,
                        "tokens_inside": [1] * n + [5] * n, "tokens_total": [10] * 2 * n, "concentration80": [0.3] * 2 * n})
    v = localisation.localisation_verdicts(loc).set_index("claim")
    assert list(v.index) == list(report.paper("table4_localization")["constraint_state"].unique())
    assert v.loc["all satisfied", "ratio"] == pytest.approx(5.0) and v.loc["all satisfied", "verdict"] == "reproduced"
    assert v.loc["all satisfied", "paper ratio"] == "2.7 (7B); 2.8 (4B)"
    assert v.loc["all violated", "verdict"] == "contradicted"  # 0.2: the shift avoids the region
    assert v.loc["end phrase", "profiles"] == n and v.loc["bullet lines", "verdict"] == "—"


def _curves(slopes: dict, seeds=(0, 1, 2), steps=20) -> pd.DataFrame:
    """Per-step metrics: method m's reward rises by slopes[m] per step from 0, plus a seed offset."""
    return pd.DataFrame([{"method": meth, "seed": s, "step": t, "r": slope * t + 0.01 * s}
                         for meth, slope in slopes.items() for s in seeds for t in range(1, steps + 1)])


def test_convergence_pairs_seeds_and_flags_a_rising_baseline():
    table, verdicts = claims.convergence(_curves({"gdpo": 0.01, "mrtpo": 0.02}), "r", window=1)
    table = table.set_index("method")
    # mrtpo reaches gdpo's final value (0.2 + 0.01 s) at step 10 of 20 on every seed: half the window saved
    assert table.loc["mrtpo", "first step reaching gdpo's final"] == "10.0 ± 0.0"
    v = verdicts.set_index("claim")
    flat = v.loc["gdpo has flattened by the end of the window (PAPER.md §6.6)"]
    assert flat["verdict"] == "contradicted" and flat["est"] == pytest.approx(1.0)  # 0.01 per step = 1 per 100
    saved = v.loc["mrtpo reaches gdpo's final value earlier (share of the window saved)"]
    assert saved["est"] == pytest.approx(0.5) and saved["verdict"] == "reproduced; gdpo still rising"
    assert saved["paper"] == "0.4 (step 60 of 100)"
    # never reaching it saves nothing; a flat baseline is no longer flagged
    table, verdicts = claims.convergence(_curves({"gdpo": 0.0, "mrtpo": -0.01}), "r", window=1)
    assert table.set_index("method").loc["mrtpo", "seeds never reaching it"] == 3
    assert verdicts["verdict"].tolist() == ["inconclusive", "not reproduced"]  # no trend; saves 0, not 0.4
    assert verdicts["est"].iloc[1] == 0.0


def test_beta_table_checks_the_plateau_where_the_bound_binds(monkeypatch):
    """Two betas with the bound active on every step after the warm-up: the algebra predicts no difference."""
    arms = {"beta 0.25": ["a"], "beta 0.5": ["b"]}
    s = {"a": 0.9, "b": 0.45}
    monkeypatch.setattr(beta_sweep, "seed_values", lambda runs, metric: {0: 0.30, 1: 0.32} if runs == ["a"] else {0: 0.31, 1: 0.33})
    monkeypatch.setattr(beta_sweep, "metrics", lambda runs: pd.DataFrame(
        {"mrtpo/s": [s[runs[0]]] * 3, "mrtpo/beta_t": [0.25 if runs == ["a"] else 0.5] * 3,
         "mrtpo_beta": [0.25 if runs == ["a"] else 0.5] * 3}))
    monkeypatch.setattr(evidence, "compare", lambda a, b, metric, benchmark, decoding, claimed: {
        "diff": 0.01, "lo": -0.02, "hi": 0.04, "sd": 0.002, "p": 0.3, "shared_seeds": [0, 1],
        "resampled": "seeds (paired t)", "verdict": "inconclusive"})
    table, verdicts = beta_sweep.beta_table(arms, "m")
    assert table["beta"].tolist() == [0.25, 0.5] and table["s × beta"].tolist() == pytest.approx([0.225, 0.225])
    assert table["steps with the bound active"].tolist() == [1.0, 1.0]
    assert table["metric"].tolist() == ["m", "m"] and table["held-out (± s.e.)"].tolist() == ["0.310 ± 0.010", "0.320 ± 0.010"]
    assert verdicts["comparison"].tolist() == ["beta 0.5 − beta 0.25"]
    # an interval holding 0 confirms nothing: the runs only fail to tell the betas apart
    detectable = significance.detectable_difference(0.002, 2)
    assert verdicts["the algebra's prediction"].tolist() == [f"not distinguishable at this power (detectable: ±{detectable:.3f})"]


def test_compute_spent_sums_recorded_times_and_counts_the_missing():
    runs = pd.DataFrame({"task": ["sql", "sql", "if"], "train_s": [3600.0, 1800.0, float("nan")],
                         "eval_s": [360.0, float("nan"), 720.0]})
    spent = report.compute_spent(runs).set_index("task")
    assert spent.loc["sql", "train hours"] == 1.5 and spent.loc["sql", "evaluation hours"] == pytest.approx(0.1)
    assert spent.loc["sql", "runs with evaluation time"] == 1 and spent.loc["if", "runs with train time"] == 0
    assert spent.loc["all", "runs"] == 3 and spent.loc["all", "total hours"] == pytest.approx(1.5 + 0.3)
    assert report.compute_sentence(spent.reset_index(), "tiny") == (
        "The 3 committed tiny run folders took 1.5 hours of training (recorded for 2 of them); 0.3 hours of evaluation "
        "(recorded for 2 of them), 1.8 hours in all at least.")
    none = report.compute_spent(runs.assign(eval_s=float("nan")))
    assert "evaluation time is not recorded" in report.compute_sentence(none, "tiny")
    assert report.compute_sentence(report.compute_spent(runs.iloc[:0]), "tiny") == "No tiny run folder is committed yet."


def _format_curves(rise: dict, start: float = 0.1, seeds=(0, 1, 2), steps=40) -> pd.DataFrame:
    """Per-step format rate: ``start`` until method m's step rise[m] (+ seed), 0.95 from then on (None: never)."""
    return pd.DataFrame([{"method": meth, "seed": s, "step": t,
                          claims.FORMAT_REWARD: 0.95 if at is not None and t >= at + s else start}
                         for meth, at in rise.items() for s in seeds for t in range(1, steps + 1)])


def test_format_claim_reads_steps_to_the_threshold_and_the_rate_at_step_10():
    table, verdicts, sentence = claims.format_claim(_format_curves({"mrtpo": 5, "gdpo": 12, "grpo": None}))
    table = table.set_index("method")
    assert table.loc["mrtpo", "first step ≥ 0.8 (per step)"] == "6.0 ± 0.6"  # steps 5, 6, 7 over the seeds
    assert table.loc["grpo", "seeds never reaching it"] == 3 and table.loc["grpo", "first step ≥ 0.8 (per step)"] == "41.0 ± 0.0"
    assert table.loc["gdpo", "format rate at step 10 (per step)"] == "0.100 ± 0.000"
    assert table.loc["mrtpo", "paper: step"] == "13" and table.loc["gdpo", "paper: rate"] == "0.02"
    v = verdicts.set_index("claim")
    steps = v.loc["mrtpo reaches 0.8 before gdpo (mrtpo − gdpo, steps)"]
    assert steps["est"] == pytest.approx(-7.0) and steps["paper"] == "-6.0 steps" and steps["verdict"] == "reproduced"
    rate = v.loc["mrtpo's format rate at step 10 above gdpo's (mrtpo − gdpo)"]
    assert rate["est"] == pytest.approx(0.85) and rate["claimed"] == pytest.approx(0.95) and rate["verdict"] == "weaker than claimed"
    # grpo never reaches 0.8: counted at step 41, a gap of at least 29 steps against the paper's 15
    assert v.loc["gdpo reaches 0.8 before grpo (gdpo − grpo, steps)", "est"] == pytest.approx(-28.0)
    assert "below 0.8, so the claim is testable" in sentence and "3 of 9 runs never reach 0.8" in sentence
    # a base already formatting 90% of its responses: nothing to learn, nothing to test
    _, verdicts, sentence = claims.format_claim(_format_curves({"mrtpo": 5, "gdpo": 12}, start=0.9))
    assert verdicts["verdict"].str.startswith("inconclusive: untestable").all() and not verdicts["testable"].any()
    assert "cannot be tested on this base" in sentence
    # one seed: no interval, inconclusive; a 3-step mean delays the crossing
    table, verdicts, _ = claims.format_claim(_format_curves({"mrtpo": 5, "gdpo": 12}, seeds=(0,)), window=3)
    assert (verdicts["verdict"] == "inconclusive").all()
    assert table.set_index("method").loc["mrtpo", "first step ≥ 0.8 (3-step mean)"] == "7.0 ± —"  # (0.1 + 2 × 0.95) / 3
    # a run shorter than 10 steps (the test suite's smoke size) has no rate at step 10, and says so
    table, verdicts, _ = claims.format_claim(_format_curves({"mrtpo": 1, "gdpo": None}, steps=3))
    assert table.set_index("method").loc["mrtpo", "format rate at step 10 (per step)"] == "—"
    assert verdicts.set_index("claim").loc["mrtpo's format rate at step 10 above gdpo's (mrtpo − gdpo)", "verdict"] == "inconclusive"


def test_length_change_is_relative_and_set_beside_the_fixed_length_control():
    rows = []
    for meth, fall in {"gdpo": 0.5, "gdpo+constlen": 0.1, "mrtpo": 0.5}.items():
        for s in (0, 1, 2):
            start = 100.0 + 10 * s
            rows += [{"method": meth, "seed": s, "step": t, "completions/mean_length": start * (1 - fall * (t > 20))}
                     for t in range(1, 41)]
    table, verdicts = claims.length_change(pd.DataFrame(rows))
    table = table.set_index("method")
    assert table.loc["gdpo", "first steps (tokens)"] == "110.0 ± 5.8" and table.loc["gdpo", "last steps (tokens)"] == "55.0 ± 2.9"
    assert table.loc["gdpo", "relative change (95% interval over seeds)"] == "-0.50 [-0.50, -0.50]"
    v = verdicts.set_index("claim")
    assert v.loc["gdpo's responses shorten (relative change, last vs first steps)", "verdict"] == "weaker than claimed"  # -0.5, not -0.58
    assert "gdpo+constlen's responses shorten (relative change, last vs first steps)" not in v.index  # the control claims nothing
    pull = v.loc["gdpo's fall is the token-mean loss's pull (gdpo+constlen's change − gdpo's)"]
    assert pull["est"] == pytest.approx(0.4) and pull["verdict"] == "reproduced" and pull["seeds"] == 3
    assert not any("mrtpo+constlen" in c for c in v.index)  # no control runs for mrtpo: no row
    # short runs: the two windows never overlap
    table, _ = claims.length_change(pd.DataFrame(rows).query("step <= 6"))
    assert table["steps averaged"].tolist() == [3, 3, 3]


def test_book_power_states_each_comparisons_power_and_cost(tmp_path, monkeypatch):

    rng = np.random.default_rng(4)
    arms = {"gdpo": [fake_run(tmp_path / "g", "gdpo", s, values(rng, 0.4 + 0.05 * s)) for s in (0, 1, 2)],
            "mrtpo": [fake_run(tmp_path / "m", "mrtpo", s, values(rng, 0.5 + 0.02 * s)) for s in (0, 1, 2)],
            "joint": [fake_run(tmp_path / "j", "joint", 0, values(rng, 0.5))]}
    monkeypatch.setattr(power_analysis, "BOOK_COMPARISONS", (
        evidence.Comparisons("table5_ablation", "sql", (("mrtpo", "gdpo"), ("joint", "gdpo"), ("beta 0.5", "beta 0.25")),
                             "table5_ablation"),
        evidence.Comparisons("table5_ablation", "if", (("mrtpo", "joint"), ("joint", "gdpo")))))
    monkeypatch.setattr(power_analysis, "finished", lambda task, arm, model: arms.get(arm, []) if task == "sql" else [])
    alone = power_analysis.power_table({"mrtpo": arms["mrtpo"]}, [("mrtpo", "joint")], "execution_match")
    assert alone.empty and "comparison" in alone  # an arm with runs, but no pair with both: a table with no rows
    table = power_analysis.book_power()
    assert table[table.task == "if"]["measured"].tolist() == ["no runs of mrtpo or joint", "no runs of joint or gdpo"]
    table = table[table.task == "sql"].set_index("comparison")
    v = {m: evidence.seed_values(arms[m], "execution_match") for m in ("gdpo", "mrtpo")}
    sd = np.std([v["mrtpo"][s] - v["gdpo"][s] for s in (0, 1, 2)], ddof=1)
    row = table.loc["mrtpo − gdpo"]
    assert row["measured"] == "paired" and row["sd of the difference"] == pytest.approx(sd) and row["shared seeds"] == 3
    assert row["power for 0.05 now"] == pytest.approx(significance.power(0.05, sd, 3))
    assert row["power for the paper's difference now"] == pytest.approx(significance.power(0.016, sd, 3))  # +1.60 points
    assert row["detectable now"] == pytest.approx(significance.detectable_difference(sd, 3))
    assert row["train hours"] == pytest.approx(6 / 3600) and row["runs timed"] == "6 of 6" and row["seeds"] == "0, 1, 2 / 0, 1, 2"
    one = table.loc["joint − gdpo"]  # one shared seed: no paired test, but what 3 seeds would detect at gdpo's spread
    assert one["shared seeds"] == 1 and math.isnan(one["power for 0.05 now"]) and one["detectable at 3 seeds"] > 0
    none = table.loc["beta 0.5 − beta 0.25"]
    assert none["measured"] == "no runs of beta 0.5 or beta 0.25" and math.isnan(none["train hours"])
    sentence = power_analysis.book_power_sentence(power_analysis.book_power())
    assert sentence.startswith("Of the book's 5 comparisons, 1 rest on two shared seeds or more")
    assert "(mrtpo − gdpo, table5_ablation on sql)" in sentence and "1 rest on one shared seed" in sentence
    assert "3 have no runs yet (table5_ablation on sql: beta 0.5 − beta 0.25; table5_ablation on if: all 2)" in sentence


def _add_cell(run: Run, benchmark: str, decoding: str, metric: str, value: float):
    """One more evaluation cell in a fake run's eval.csv (no per-prompt rows: compared over seeds only)."""
    df = pd.read_csv(run.path / "eval.csv")
    row = df.iloc[0].to_dict() | {"benchmark": benchmark, "decoding": decoding, "metric": metric, "value": value}
    pd.concat([df, pd.DataFrame([row])], ignore_index=True).to_csv(run.path / "eval.csv", index=False)
    write_manifest(run.path)


def test_sign_flips_mark_cells_against_the_headline_and_whether_their_interval_excludes_0(tmp_path):
    from mrtpo.analysis import open_questions

    rng = np.random.default_rng(5)
    a = [fake_run(tmp_path / "a", "mrtpo", s, values(rng, 0.7)) for s in (0, 1, 2)]
    b = [fake_run(tmp_path / "b", "gdpo", s, values(rng, 0.3)) for s in (0, 1, 2)]
    for s, (x, y) in enumerate(zip(a, b)):  # greedy: a clear flip; hide-value: a flip inside the noise
        _add_cell(x, "synthetic_test", "greedy", "execution_match", 0.2 + 0.01 * s)
        _add_cell(y, "synthetic_test", "greedy", "execution_match", 0.6 + 0.01 * s)
        _add_cell(x, "synthetic_hide_value", "temp1", "execution_match", (0.50, 0.40, 0.51)[s])
        _add_cell(y, "synthetic_hide_value", "temp1", "execution_match", (0.40, 0.55, 0.52)[s])
    table = open_questions.sign_flips(a, b, "execution_match").set_index(["benchmark", "decoding"])
    assert table.loc[("synthetic_test", "temp1"), "headline"] and table.loc[("synthetic_test", "temp1"), "diff"] > 0
    greedy, hidden = table.loc[("synthetic_test", "greedy")], table.loc[("synthetic_hide_value", "temp1")]
    assert greedy["flipped"] and greedy["flip excludes 0"] and greedy["diff"] == pytest.approx(-0.4)
    assert hidden["flipped"] and not hidden["flip excludes 0"]
    sentence = open_questions.sign_flip_sentence(table.reset_index(), "sql", "MRTPO − GDPO")
    assert "2 of 2 other cells have the opposite sign, 1 of them with an interval excluding 0 (synthetic_test / greedy" in sentence


def test_task_comparison_and_the_cross_task_localisation_pattern(tmp_path, monkeypatch):
    from mrtpo.analysis import open_questions

    rng = np.random.default_rng(6)
    arms = {task: {"mrtpo": [fake_run(tmp_path / task / "m", "mrtpo", s, values(rng, p)) for s in (0, 1, 2)],
                   "gdpo": [fake_run(tmp_path / task / "g", "gdpo", s, values(rng, 0.4)) for s in (0, 1, 2)]}
            for task, p in (("sql", 0.6), ("tool", 0.45))}
    arms["if"] = {"mrtpo": arms["sql"]["mrtpo"]}  # no GDPO runs: a row that says so
    monkeypatch.setattr(open_questions, "answer_metric", lambda task: "execution_match")
    ratios = {id(arms["sql"]["mrtpo"]): 1.4, id(arms["tool"]["mrtpo"]): 3.0}
    # one profile's rows: a small region (a tenth of the tokens) with the task's ratio, a large one (left out)
    monkeypatch.setattr(open_questions, "seeds_localisation", lambda runs: pd.DataFrame(
        {"label": ["small", "large"], "seed": [0, 0], "profile": [0, 0],
         "shift_inside": [ratios.get(id(runs), 2.0) * 0.1, 0.88], "shift_total": [1.0, 1.0],
         "tokens_inside": [1, 8], "tokens_total": [10, 10], "concentration80": [0.2, 0.2]}))
    table = open_questions.gain_beside_localisation(arms).set_index("task")
    c = evidence.compare(arms["sql"]["mrtpo"], arms["sql"]["gdpo"], "execution_match")
    assert table.loc["sql", "diff"] == pytest.approx(c["diff"]) and table.loc["sql", "lo"] == pytest.approx(c["lo"])
    assert table.loc["sql", "check-region ratio"] == pytest.approx(1.4) and table.loc["sql", "ratio over"] == "small"  # the large region is left out
    assert table.loc["tool", "concentration (x)"] == pytest.approx(4.0)
    assert table.loc["if", "sign"] == "no runs of gdpo" and table.loc["if", "shared seeds"] == 0
    assert table.loc["sql", "sign"] == open_questions.sign_of(c["lo"], c["hi"], 3)
    sentence = open_questions.localisation_gain_sentence(table.reset_index())
    assert sentence.startswith("The best-localised task here is tool (check-region ratio 3.00)")
    # tool's gain is the smaller, but the intervals overlap: the order is not known, and nothing "does not hold"
    assert "overlaps the other tasks' intervals, so the gains of the 2 tasks are not distinguishable" in sentence
    separated = table.reset_index().assign(lo=[0.15, -0.05, np.nan], hi=[0.25, 0.05, np.nan])
    assert "lies below every other task's interval" in open_questions.localisation_gain_sentence(separated)
    reversed_ = separated.assign(diff=[0.0, 0.3, np.nan], lo=[-0.05, 0.25, np.nan], hi=[0.05, 0.35, np.nan])
    assert "is contradicted here" in open_questions.localisation_gain_sentence(reversed_)


def test_where_shift_lands_pools_the_reasoning_share():
    from mrtpo.analysis import open_questions

    loc = pd.DataFrame({"label": ["a", "a", "b"], "seed": [0, 1, 0], "shift_inside": [1.0, 1.0, 2.0],
                        "shift_total": [4.0, 2.0, 4.0], "tokens_inside": [2, 2, 5], "tokens_total": [10, 10, 10],
                        "concentration80": [0.2, 0.3, 0.4], "think_shift": [3.0, 0.0, 1.0]})
    table = open_questions.where_shift_lands(loc).set_index("label")
    assert table.loc["a", "reasoning share"] == pytest.approx(3.0 / 6.0) and table.loc["b", "reasoning share"] == pytest.approx(0.25)
    assert table.loc["a", "ratio"] == pytest.approx((2.0 / 6.0) / (4 / 20))


def test_shift_and_comparison_sentences_count_what_the_intervals_say():
    from mrtpo.analysis import open_questions

    shift = pd.DataFrame({"label": ["format", "match"], "ratio": [2.5, 1.05], "lo": [1.8, 0.9], "hi": [3.1, 1.2],
                          "reasoning share": [0.2, 0.6]})
    assert open_questions.shift_sentence(shift, "sql") == (
        "sql: 1 of 2 rewards have a check-region ratio whose interval lies above 1 (largest: format 2.50 [1.80, 3.10]); "
        "the reasoning holds 20%–60% of a reward's shift.")
    assert open_questions.shift_sentence(shift.assign(**{"reasoning share": 0.0}), "if").endswith(
        "none of the shift lands in a <think> reasoning.")
    table = pd.DataFrame({"task": ["sql", "tool", "if", "x"], "shared seeds": [3, 3, 1, 0],
                          "sign": ["below 0", "holds 0", "one shared seed", "no runs of opsd"]})
    assert [open_questions.sign_of(lo, hi, n) for lo, hi, n in ((-0.2, -0.05, 3), (-0.1, 0.1, 3), (-0.3, -0.1, 1))] == \
        ["below 0", "holds 0", "one shared seed"]
    assert open_questions.comparison_sentence(table, "opsd", "grpo") == (
        "opsd − grpo: below 0 on 1 of 3 tasks with runs (sql); above 0 on 0; undecided on 2 (tool, if: the interval "
        "holds 0 or rests on one shared seed); no runs on x.")


def test_headline_verdicts_judge_convergence_on_the_long_runs(tmp_path, monkeypatch):
    """The landing page's convergence row reads the LONG_STEPS runs only: MRTPO rising twice as fast as GDPO on
    every seed saves part of the window; with no long runs the row says so."""
    rng = np.random.default_rng(7)
    steps = np.arange(1, 41)
    long = {}
    for method, rate in (("gdpo", 0.01), ("mrtpo", 0.02)):
        long[method] = [fake_run(tmp_path / method, method, s, values(rng, 0.5)) for s in (0, 1, 2)]
        for r in long[method]:
            reward = np.minimum(0.2 + rate * steps, 0.6) + 0.001 * r.seed
            pd.DataFrame({"step": steps, "step_time": 1.0, "rewards/execution_match/mean": reward}).to_csv(
                r.path / "metrics.csv", index=False)
            write_manifest(r.path)
    monkeypatch.setattr(headline, "finished", lambda task, method, model="tiny", steps=None, **k:
                        long.get(method, []) if steps == claims.LONG_STEPS else [])
    name = f"MRTPO reaches GDPO's final value earlier (text-to-SQL, {claims.LONG_STEPS} steps; share of the window saved)"
    no_family = multiplicity.family_table([])
    row = headline.verdicts(family=no_family).set_index("claim").loc[name]
    assert row["est"] > 0.3 and row["claimed"] == pytest.approx(0.4) and row["page"] == "fig5_convergence"
    assert row["ours"].endswith("over 3 seeds") and row["verdict"] != "inconclusive"
    monkeypatch.setattr(headline, "finished", lambda *a, **k: [])
    v = headline.verdicts(family=no_family).set_index("claim")
    assert v.loc[f"MRTPO reaches GDPO's final value earlier (text-to-SQL, {claims.LONG_STEPS} steps)", "ours"] == "no runs"


def test_arm_names_resolve_to_the_runs_the_pages_compare():
    """A page's arm name says which runs it means (a method, "beta <b>", "<method>-<set>_rewards"), and every arm of
    every verdict table in the book resolves to a run configuration its task accepts, named as the tables show it."""
    from mrtpo import runs as runner

    assert evidence.arm_settings("beta 0.25") == ("mrtpo", {"mrtpo_beta": 0.25})
    assert evidence.arm_settings("mrtpo+saw-sub_rewards") == ("mrtpo+saw", {"rewards": "sub"})
    assert evidence.arm_settings("gdpo+constlen") == ("gdpo+constlen", {})
    for c in evidence.BOOK_COMPARISONS:
        for arm in c.arms:
            method, settings = evidence.arm_settings(arm)
            cfg = runner.resolve(c.task, method, "tiny", **settings)
            assert cfg.label == (method if arm.startswith("beta ") else arm), (c.page, c.task, arm)
            assert cfg.mrtpo_beta == settings.get("mrtpo_beta", cfg.mrtpo_beta) and cfg.rewards == settings.get("rewards", "default")
    with pytest.raises(ValueError, match="rewards='sub' is not valid"):
        runner.resolve("tool", "gdpo", "tiny", **evidence.arm_settings("gdpo-sub_rewards")[1])
    assert evidence.book_comparisons("table5_ablation", "tool").paper_table is None  # the paper's Table 5 is text-to-SQL
    with pytest.raises(ValueError, match="table1_text_to_sql has no verdict table for task 'tool'; it has one for: sql"):
        evidence.book_comparisons("table1_text_to_sql", "tool")
