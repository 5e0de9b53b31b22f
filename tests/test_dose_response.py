"""The dose-response analysis (``mrtpo.analysis.dose_response``) on synthetic frames: each setting's localisation from the
dial rows, each gain's paired interval, the slope of gain on localisation with its bootstrap interval, the verdicts
(including "not enough settings/seeds") and the figure."""

import io
import math

import numpy as np
import pandas as pd
import pytest

from mrtpo.analysis import plots, report, stats
from mrtpo.analysis import dose_response as D

#: dial rows as benchmarks/tiny_models.py writes them: a small region (format), a large one (answer, judged
#: outside), notes with the token share and the concentration
CSV = """task,criterion,value,target,met,notes
sql,dial/0/localisation/format,1.0,3.0,False,shift share 0.1 on token share 0.100; concentration(80%) 0.400
sql,dial/0/localisation/answer,1.1,3.0,False,shift share 0.7 on token share 0.700; concentration(80%) 0.200
sql,dial/0/localisation_out/answer,0.8,<= 0.5,False,shift share outside 0.3 on token share outside 0.3
sql,dial/0.2/localisation/format,2.0,3.0,False,shift share 0.2 on token share 0.100; concentration(80%) 0.200
sql,dial/0.5/localisation/format,3.0,3.0,True,shift share 0.3 on token share 0.100; concentration(80%) 0.100
sql,dial/0.8/localisation/format,4.0,3.0,True,shift share 0.4 on token share 0.100; concentration(80%) 0.100
sql,dial/0.8/reading/answer,0.3,> 0,True,"with Z 0.5, without 0.2"
if,dial/0.5/localisation/constraint_0,2.0,3.0,False,shift share 0.4 on token share 0.200; concentration(80%) 0.250
if,dial/0.5/localisation/constraint_1,4.0,3.0,False,shift share 0.4 on token share 0.100; concentration(80%) 0.150
"""


def dial_rows() -> pd.DataFrame:
    return report.tiny_models(io.StringIO(CSV))[1]


def test_each_setting_localisation_comes_from_its_rows():
    loc = D.setting_localisation(dial_rows()).set_index(["task", "setting"])
    assert list(loc.index) == [("if", 0.5), ("sql", 0.0), ("sql", 0.2), ("sql", 0.5), ("sql", 0.8)]
    # the large region (token share 0.7) is left out of the ratio, not of the concentration
    assert loc.at[("sql", 0.0), "ratio"] == 1.0 and loc.at[("sql", 0.0), "ratio_rewards"] == "format"
    assert loc.at[("sql", 0.0), "concentration80"] == pytest.approx(0.3)
    assert loc.at[("sql", 0.0), "concentration_x"] == pytest.approx(0.8 / 0.3)
    # pooled over the two rewards' shares (each reward's shift counted once): 0.8 / 0.3, not their mean ratio 3
    assert loc.at[("if", 0.5), "ratio"] == pytest.approx(0.8 / 0.3)
    assert loc.at[("if", 0.5), "ratio_rewards"] == "constraint_0, constraint_1"
    assert loc.at[("sql", 0.8), "concentration_x"] == pytest.approx(8.0)


def test_slope_and_its_bootstrap_interval():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    exact = stats.slope(x, 2 * x + 1)
    assert (exact["slope"], exact["intercept"], exact["points"]) == (pytest.approx(2.0), pytest.approx(1.0), 4)
    assert math.isnan(exact["lo"])  # no replicates, no interval
    rng = np.random.default_rng(0)
    reps = (2 * x + 1)[:, None] + rng.normal(0, 0.1, (4, 2000))
    fit = stats.slope(x, 2 * x + 1, reps)
    assert fit["lo"] < 2 < fit["hi"] and fit["hi"] - fit["lo"] < 0.5
    # points whose own intervals are wider than their replicates' (few seeds): the slope's interval follows them,
    # half-width z * sqrt(sum dx^2 sigma^2) / sum dx^2 with sigma = 0.5 / z: 0.5 * sqrt(5) / 5 = 0.224
    wide = stats.slope(x, 2 * x + 1, reps, y_intervals=np.stack([2 * x + 0.5, 2 * x + 1.5], axis=1))
    assert (wide["lo"], wide["hi"]) == (pytest.approx(2 - 0.5 * np.sqrt(5) / 5), pytest.approx(2 + 0.5 * np.sqrt(5) / 5))
    assert math.isnan(stats.slope([2.0, 2.0], [0.1, 0.3])["slope"]) and math.isnan(stats.slope([1.0], [0.1])["slope"])


def test_paired_difference_replicates_resample_seeds_and_are_shared_by_equal_designs():
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 8)), rng.random((3, 8))
    out = stats.paired_difference(a, b, n_boot=500, replicates=True)
    assert out["replicates"].shape == (500,)
    d = stats.run_metric(a) - stats.run_metric(b)  # every replicate is a mean of three drawn per-seed differences
    assert out["replicates"].min() >= d.min() - 1e-12 and out["replicates"].max() <= d.max() + 1e-12
    # the same seeds: the same draws, so two settings are resampled jointly
    other = stats.paired_difference(a + 0.1, b, n_boot=500, replicates=True)
    assert other["replicates"] == pytest.approx(out["replicates"] + 0.1)
    assert "replicates" not in stats.paired_difference(a, b, n_boot=10)
    assert stats.paired_difference(a[:1, 0], b[:1, 0], replicates=True)["replicates"].size == 0  # one seed: none


def gain(shift: float, seeds: int = 3, prompts: int = 16, seed: int = 0) -> dict:
    """A comparison as ``evidence.compare(..., replicates=True)`` returns it: MRTPO = GDPO + ``shift`` + noise on
    per-prompt success values of ``seeds`` shared seeds."""
    rng = np.random.default_rng(seed)
    b = rng.random((seeds, prompts))
    a = np.clip(b + shift + rng.normal(0, 0.02, b.shape), 0, 1)
    ids = list(range(seeds))
    return {**stats.paired_difference(a, b, n_boot=1000, replicates=True), "a_seeds": ids, "b_seeds": ids, "shared_seeds": ids}


def test_a_gain_growing_with_the_ratio_is_found_with_its_interval():
    loc = D.setting_localisation(dial_rows())
    gains = {d: gain(0.05 * r, seed=i) for i, (d, r) in enumerate(((0.0, 1.0), (0.2, 2.0), (0.5, 3.0), (0.8, 4.0)))}
    result = D.dose_response("sql", gains, loc)
    t = result.table.set_index("setting")
    assert list(t.index) == [0.0, 0.2, 0.5, 0.8] and (t["shared seeds"] == 3).all()
    assert t.at[0.8, "gain"] == pytest.approx(0.2, abs=0.02) and (t["lo"] < t["gain"]).all() and (t["gain"] < t["hi"]).all()
    assert t.at[0.0, "interval over"] == "seeds (paired t)" and t.at[0.0, "mrtpo seeds"] == "0, 1, 2"
    s = result.slopes.set_index("against")
    assert s.at["ratio", "slope"] == pytest.approx(0.05, abs=0.01) and 0 < s.at["ratio", "lo"] < s.at["ratio", "hi"]
    assert s.at["ratio", "points"] == 4 and s.at["ratio", "settings"] == "0, 0.2, 0.5, 0.8"
    assert result.verdict.startswith(f"sql: the gain grows with localisation: slope {s.at['ratio', 'slope']:+.3f} per unit of ratio [")
    assert "below the design" not in result.verdict
    flat = D.dose_response("sql", {d: gain(0.0, seed=i) for i, d in enumerate((0.0, 0.2, 0.5, 0.8))}, loc)
    assert "no dependence of the gain on localisation detected" in flat.verdict and "an interval holding 0" in flat.verdict
    assert "no evidence either way" in flat.verdict and "confirm" not in flat.verdict  # a null interval confirms nothing


def test_not_enough_settings_or_seeds_is_said_and_missing_settings_are_kept():
    loc = D.setting_localisation(dial_rows())
    few = D.dose_response("sql", {0.0: gain(0.0), 0.5: gain(0.1), 0.8: gain(0.1, seeds=1)}, loc)
    t = few.table.set_index("setting")
    assert t.at[0.2, "interval over"] == "no runs" and math.isnan(t.at[0.2, "gain"]) and t.at[0.2, "shared seeds"] == 0
    assert t.at[0.8, "interval over"] == "prompts only: one shared seed"
    assert few.slopes.set_index("against").at["ratio", "points"] == 2  # one shared seed: not in the slope
    assert few.verdict.startswith("sql: not enough settings/seeds to judge whether the gain grows with localisation: "
                                  "2 of 4 settings have mrtpo and gdpo runs on at least 2 shared seeds")
    assert "settings short of seeds: 0.2 (0 shared), 0.8 (1 shared)" in few.verdict
    nothing = D.dose_response("if", {}, loc)
    assert list(nothing.table["setting"]) == [0.5] and "0 of 1 settings" in nothing.verdict
    unmeasured = D.dose_response("tool", {}, loc, settings=(0.0, 0.2))  # no dial rows, no runs: the settings asked
    assert list(unmeasured.table["setting"]) == [0.0, 0.2] and unmeasured.table["ratio"].isna().all()
    assert set(unmeasured.table["rule of thumb"]) == {"localisation not measured"} and "0 of 2 settings" in unmeasured.verdict
    assert list(D.dose_response("tool", {}, loc).table.columns) == list(few.table.columns)  # empty, same columns


def test_the_rule_of_thumb_is_judged_only_below_both_thresholds():
    # an interval that holds half a point confirms nothing: the runs cannot tell, and say how much they could
    assert D.rule_of_thumb(1.2, 2.0, -0.01, 0.004, 0.03) == "not distinguishable at this power (detectable: ±0.030)"
    assert D.rule_of_thumb(1.2, 2.0, -0.05, -0.01).endswith("MRTPO below GDPO")
    assert D.rule_of_thumb(1.2, 2.0, 0.01, 0.05).startswith("did not hold")
    assert D.rule_of_thumb(2.5, 2.0, 0.01, 0.05).startswith("does not apply (ratio 2.50x")
    assert D.rule_of_thumb(1.2, 3.5, 0.01, 0.05).startswith("does not apply")
    assert D.rule_of_thumb(1.2, 2.0, math.nan, math.nan) == "applies; no interval to judge it"
    assert D.rule_of_thumb(math.nan, 2.0, 0.0, 0.1) == "localisation not measured"
    table = pd.DataFrame({"setting": [0.0, 0.2, 0.5, 0.8], "rule of thumb": [
        D.rule_of_thumb(1.0, 2.0, -0.01, 0.004), D.rule_of_thumb(1.5, 2.5, 0.01, 0.05),
        D.rule_of_thumb(1.8, 2.9, math.nan, math.nan), D.rule_of_thumb(3.0, 5.0, 0.0, 0.1)]})
    assert D.rule_sentence(table) == ("The reader's rule of thumb (below 3x concentration and 2x ratio, about half a point) "
                                      "applies at settings 0, 0.2, 0.5: did not hold at 0.2; not distinguishable at this "
                                      "power at 0; not judged (no interval) at 0.5.")
    assert D.rule_sentence(table.iloc[3:]).endswith("applies at no measured setting.")


def test_the_figure_draws_gains_against_the_ratio_and_marks_settings_without_runs():
    loc = D.setting_localisation(dial_rows())
    sql = D.dose_response("sql", {0.0: gain(0.0), 0.5: gain(0.1, seed=1), 0.8: gain(0.15, seed=2)}, loc)
    ifr = D.dose_response("if", {}, loc)
    fig = plots.dose_response(pd.concat([sql.table, ifr.table]), {"sql": sql.slopes, "if": ifr.slopes},
                              {"sql": "execution_match"})
    ax_sql, ax_if = fig.axes
    points = [c for c in ax_sql.containers]  # the error bars
    assert len(points) == 1 and len(points[0].lines[0].get_xdata()) == 3
    assert sorted(points[0].lines[0].get_xdata()) == pytest.approx([1.0, 3.0, 4.0])
    assert any("dial 0.2: no runs" in t.get_text() for t in ax_sql.texts)
    assert any(line.get_label().startswith("slope +") for line in ax_sql.lines)
    assert ax_sql.get_title() == "sql: execution_match" and any("no runs" in t.get_text() for t in ax_if.texts)
    assert plots.dose_response(pd.DataFrame(columns=sql.table.columns)).axes[0].texts  # "no dial settings ..."
    tool = D.dose_response("tool", {}, loc, settings=(0.0, 0.2)).table
    assert [t.get_text() for t in plots.dose_response(tool).axes[0].texts] == ["no measured ratio for dial 0, 0.2"]
    part = sql.table.assign(ratio=np.where(sql.table["setting"] == 0.8, np.nan, sql.table["ratio"]))
    ax = plots.dose_response(part).axes[0]  # beside measured points: said under the axis, where no legend covers it
    assert ax.get_xlabel().endswith("(no measured ratio for dial 0.8)") and not any("measured" in t.get_text() for t in ax.texts)


def test_localisation_notes_read_back_what_the_benchmark_writes():
    """The notes' format has one home (``diagnostics.localisation_note``): what the benchmark writes, the analysis
    reads; a note without the figures reads as NaN."""
    from mrtpo.analysis import diagnostics

    note = diagnostics.localisation_note(0.4567, 0.1234, 0.2109, 0.011, 198) + "; 198 responses with the region"
    got = diagnostics.read_localisation_notes(pd.Series([note, "measured before concentrations were recorded"]))
    assert got.loc[0, "token_share"] == 0.123 and got.loc[0, "concentration80"] == 0.211
    assert got.loc[1].isna().all()


def test_a_setting_with_one_arm_trained_shows_its_seeds_and_no_gain(monkeypatch):
    """The grid trains one run at a time: a setting where only GDPO has finished is listed, with no gain."""
    from types import SimpleNamespace

    monkeypatch.setattr(D, "base_reward", lambda arms, metric: (math.nan, 0))  # no training curves here

    run = lambda seed: SimpleNamespace(seed=seed)  # noqa: E731  (the fields analyse reads of a Run)
    dial = report.dial_frame(pd.read_csv(io.StringIO(CSV)))
    result = D.analyse("sql", dial, {0.5: {"mrtpo": [], "gdpo": [run(0), run(1), run(2)]}, 0.8: {"mrtpo": [], "gdpo": []}})
    row = result.table.set_index("setting").loc[0.5]
    assert row["gdpo seeds"] == D.seeds_text([0, 1, 2]) and row["shared seeds"] == 0 and math.isnan(row["gain"])
    assert row["interval over"] == "one arm only" and result.table.set_index("setting").loc[0.8, "interval over"] == "no runs"
    labels = [t.get_text() for t in plots.dose_response(result.table).axes[0].texts]
    assert "dial 0.5: one arm only" in labels and "dial 0.8: no runs" in labels  # the figure says what each lacks


def test_labels_of_settings_with_close_ratios_stay_apart_and_inside_the_panel():
    """Two settings measured at almost the same ratio (instruction following's 0.5 and 0.8) get two legible labels."""
    import matplotlib.text

    fig, ax = plots.plt.subplots(figsize=(6, 4))
    ax.errorbar([1.34, 1.512, 1.515], [0.01, -0.06, 0.05], yerr=0.7, fmt="o")
    plots._labels_apart(ax, [(1.34, 0.01), (1.512, -0.06), (1.515, 0.05)], ["dial 0\nconc. 4.2x", "dial 0.5\nconc. 3.9x",
                                                                            "dial 0.8\nconc. 4.4x"])
    renderer = fig.canvas.get_renderer()
    boxes = [matplotlib.text.Text.get_window_extent(t, renderer) for t in ax.texts]
    frame = ax.get_window_extent(renderer)
    assert len(boxes) == 3 and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)


def test_the_dial_moves_the_base_reward_and_the_page_says_so(monkeypatch):
    """The base's reward at a setting is the first batch of its runs (both arms, every seed), sampled before any
    update; a table whose settings differ in it says that the slope cannot isolate placement."""
    frames = {"a": (0.9, 0.8), "b": (0.5, 0.45)}  # (step 1, step 2) of each run's answer reward
    monkeypatch.setattr(report, "metrics", lambda runs: pd.DataFrame(
        [{"method": r, "seed": 0, "step": step + 1, "rewards/execution_match/mean": v}
         for r in runs for step, v in enumerate(frames[r])]))
    assert D.base_reward({"gdpo": ["a"], "mrtpo": ["b"]}, "execution_match") == (pytest.approx(0.7), 2)
    assert D.base_reward({"gdpo": [], "mrtpo": []}, "execution_match")[1] == 0
    # instruction following's constraint_mean: the mean of its slots' rewards, not the summed total
    monkeypatch.setattr(report, "metrics", lambda runs: pd.DataFrame(
        {"method": "gdpo", "seed": 0, "step": [1, 2], "reward": [1.5, 1.8], "rewards/constraint_0/mean": [1.0, 0.9],
         "rewards/constraint_1/mean": [0.5, 0.9]}))
    assert D.base_reward({"gdpo": ["a"]}, "constraint_mean") == (pytest.approx(0.75), 1)
    loc = D.setting_localisation(dial_rows())
    result = D.dose_response("sql", {0.0: gain(0.0), 0.5: gain(0.1, seed=1)}, loc, base={0.0: 0.871, 0.5: 0.188})
    t = result.table.set_index("setting")
    assert t.at[0.0, "base reward"] == 0.871 and math.isnan(t.at[0.2, "base reward"])
    assert result.verdict.endswith("The dial moves the base's quality with the dose: its reward on the first batch "
                                   "(step 1, before any update) is 0.871 / 0.188 at settings 0, 0.5, so the gain is "
                                   "measured from bases of different quality and its slope on the ratio cannot isolate "
                                   "the placement of the advantage.")
    assert D.base_sentence(t.reset_index().iloc[:1]) == ""
