"""The positive control's two questions (issue 42): region − GDPO, and the share of it MRTPO captures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mrtpo.analysis import positive_control as pc
from mrtpo.analysis.significance import holm


def test_captured_share_is_the_ratio_of_mean_gains_with_a_seed_bootstrap():
    share, lo, hi = pc.captured_share(np.array([0.1, 0.2, 0.3]), np.array([0.2, 0.4, 0.6]))
    assert share == pytest.approx(0.5) and lo == pytest.approx(0.5) and hi == pytest.approx(0.5)  # proportional seeds
    rng = np.random.default_rng(1)
    region = 0.2 + 0.05 * rng.standard_normal(8)
    mrtpo = 0.1 + 0.05 * rng.standard_normal(8)
    share, lo, hi = pc.captured_share(mrtpo, region)
    assert share == pytest.approx(mrtpo.mean() / region.mean())
    assert lo < share < hi and hi - lo > 0.1
    assert math.isnan(pc.captured_share(np.array([0.1]), np.array([0.2]))[1])  # one seed: no interval


def fake_arms(monkeypatch, values: dict[str, dict[str, dict[int, float]]]):
    """Per task and arm, per-seed values; compare() is the real paired t over them."""
    from mrtpo.analysis import stats

    monkeypatch.setattr(pc, "finished", lambda task, arm, model: [(task, arm)] if values[task].get(arm) else [])
    monkeypatch.setattr(pc, "seed_values", lambda runs, metric: values[runs[0][0]][runs[0][1]])
    monkeypatch.setattr(pc, "answer_metric", lambda task: "answer")

    def compare(a, b, metric):
        va, vb = values[a[0][0]][a[0][1]], values[b[0][0]][b[0][1]]
        shared = sorted(set(va) & set(vb))
        return stats.paired_difference(np.array([va[s] for s in shared]), np.array([vb[s] for s in shared]))

    monkeypatch.setattr(pc, "compare", compare)


def test_share_is_defined_only_where_region_beats_gdpo_after_the_correction(monkeypatch):
    seeds = range(5)
    values = {
        # region clearly above GDPO; MRTPO half-way
        "sql": {"gdpo": {s: 0.30 + 0.01 * s for s in seeds}, "region": {s: 0.50 + 0.01 * s + 0.002 * (s % 2) for s in seeds},
                "mrtpo": {s: 0.40 + 0.01 * s - 0.002 * (s % 2) for s in seeds}},
        # region no different from GDPO: the share is undefined, whatever MRTPO does
        "tool": {"gdpo": {s: 0.30 + 0.02 * (s % 2) for s in seeds}, "region": {s: 0.30 + 0.02 * ((s + 1) % 2) for s in seeds},
                 "mrtpo": {s: 0.40 for s in seeds}},
        "if": {"gdpo": {s: 0.3 for s in seeds}, "mrtpo": {s: 0.3 for s in seeds}, "region": {0: 0.4}},  # one seed
    }
    fake_arms(monkeypatch, values)
    table = pc.positive_control(("sql", "tool", "if"))
    sql, tool, if_ = (table[table["task"] == t].iloc[0] for t in ("sql", "tool", "if"))
    assert sql["placement helps"] == "yes: a gap" and sql["region − GDPO"] == pytest.approx(0.2 + 0.0008, abs=1e-3)
    assert sql["share lo"] <= sql["share"] <= sql["share hi"] and sql["share"] == pytest.approx(0.5, abs=0.02)
    assert tool["placement helps"] == "not distinguishable at this power" and "undefined" in tool["note"]
    assert if_["placement helps"] == "no test" and if_["note"] == "no test: the three arms share seed(s) 0"
    tested = table[table["p"].notna()]
    assert np.allclose(tested["p (Holm)"], holm(tested["p"].to_numpy()))  # the tasks are one family
    view = pc.view(table)
    assert len(view) == 6 and view["answer"].str.contains("undefined|no test").sum() == 3
    assert view.iloc[4]["answer"].startswith("no test")  # not "share undefined" for the first question


def test_placement_dial_reads_each_setting_from_its_own_arm_at_one_base():
    """On the committed text-to-SQL runs: the dial's ends are the mrtpo and region arms, whose gains over GDPO are the
    positive control's; the ratio is measured where each arm measures it; the base is the same at every setting."""
    from mrtpo.analysis.evidence import finished

    result = pc.placement_dial("sql")
    t = result.table.set_index("setting")
    assert list(t.index) == [0.0, 0.25, 0.5, 0.75, 1.0]
    region = finished("sql", "region")
    assert region, "the committed text-to-SQL region runs"
    assert t.at[1.0, "ratio measured on"] == "logged in training"
    assert t.at[1.0, "ratio"] == pytest.approx(np.mean([r.metrics["mrtpo/region_ratio"].mean() for r in region]))
    assert t.at[0.0, "ratio measured on"] == "saved profiles" and 1.0 < t.at[0.0, "ratio"] < t.at[1.0, "ratio"]
    control = pc.positive_control(("sql",)).iloc[0]
    assert t.at[1.0, "gain"] == pytest.approx(control["region − GDPO"])
    assert t["base reward"].isna().all() and "base" not in result.verdict  # no dial base: nothing confounds the dose
    blended = finished("sql", "mrtpo", region_blend=0.25)
    assert t.at[0.25, "placed seeds"] == (", ".join(str(r.seed) for r in blended) or "none")


def test_a_real_model_is_judged_per_benchmark_with_the_trained_sections_verdict(tmp_path, monkeypatch):
    """Run folders of a real model (written by hand): one row per benchmark, region − GDPO with the same adjusted p
    as Table 2's trained section (one comparison, one verdict), the share from the same per-seed values."""
    from types import SimpleNamespace

    from test_trained import fake_run, scores

    from mrtpo.analysis import trained

    gdpo = [0.20, 0.22, 0.21, 0.23]
    arms = {"gdpo": [fake_run(tmp_path, "gdpo", s, scores(v)) for s, v in enumerate(gdpo)],
            "region": [fake_run(tmp_path, "region", s, scores(v + 0.10 + 0.002 * s)) for s, v in enumerate(gdpo)],
            "mrtpo": [fake_run(tmp_path, "mrtpo", s, scores(v + 0.05 + 0.001 * (s % 2))) for s, v in enumerate(gdpo)],
            "entropy": []}
    monkeypatch.setattr(pc, "runner", SimpleNamespace(resolve=lambda *a, **k: SimpleNamespace(scale="real")))
    monkeypatch.setattr(trained, "trained_arms", lambda task, model: arms)
    table = pc.positive_control(("if",), "smollm2")
    assert table.benchmark.tolist() == ["ifeval", "ifbench"]
    section = trained.verdicts(arms).query("comparison == 'region − gdpo'").set_index("benchmark")
    for row in table.to_dict("records"):
        assert row["p (Holm)"] == pytest.approx(section.at[row["benchmark"], "p (Holm)"])
        assert row["region − GDPO"] == pytest.approx(0.103, abs=1e-3) and row["placement helps"] == "yes: a gap"
        assert row["share lo"] <= row["share"] <= row["share hi"]
        assert row["share"] == pytest.approx((0.05 + 0.0005) / 0.103, abs=1e-3)
    monkeypatch.setattr(trained, "trained_arms", lambda task, model: {**arms, "region": []})
    assert pc.positive_control(("if",), "smollm2").iloc[0]["note"] == "no finished region runs"
