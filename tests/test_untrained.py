"""The untrained real model's figures on the task pages (``mrtpo.analysis.untrained``): base scores of the current
code behaviour only, the reward spread and its sentence, the IFEval check beside the model card."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mrtpo.analysis import untrained
from mrtpo.runs.behaviour import BASE_ARM, record


def _base_folder(root, task, name, value, fingerprint=None):
    folder = root / "base" / task / "smollm2" / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"config": {"task": task, "method": "gdpo"}}))
    summary = record(task, BASE_ARM) | ({"fingerprint": fingerprint} if fingerprint else {})
    (folder / "summary.json").write_text(json.dumps(summary))
    pd.DataFrame([{"run": name, "task": task, "model": "smollm2", "method": "base", "benchmark": "spider_dev",
                   "decoding": "greedy", "metric": metric, "value": v, "n_prompts": 64}
                  for metric, v in (("format", value), ("n", 64.0))]).to_csv(folder / "eval.csv", index=False)


def _diagnosis(root, task, spreads):
    rewards = {name: {"groups_nonzero_std": s, "replay_rate": s} for name, s in spreads.items()}
    (root / "diagnose").mkdir(parents=True, exist_ok=True)
    (root / "diagnose" / f"{task}-smollm2.json").write_text(json.dumps(
        {"rewards": rewards, "samples": 256, "prompts": 64, "num_generations": 4, "temperature": 1.0, "max_new_tokens": 256}))


def test_base_scores_keep_the_current_behaviour_only(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path))
    assert untrained.base_scores("sql", "smollm2") is None and untrained.base_table("sql", "smollm2") is None
    _base_folder(tmp_path, "sql", "base-00000000", 0.5, fingerprint="0" * 16)  # written by code of another behaviour
    assert untrained.base_scores("sql", "smollm2") is None
    _base_folder(tmp_path, "sql", "base-11111111", 0.25)
    rows = untrained.base_scores("sql", "smollm2")
    assert rows.run.unique().tolist() == ["base-11111111"] and rows.value.tolist() == [0.25, 64.0]
    table = untrained.base_table("sql", "smollm2")
    assert table.loc[("spider_dev", "format", 64), "greedy"] == 0.25 and len(table) == 1  # the count is n_prompts


def test_the_spread_sentence_says_whether_any_reward_varies(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path))
    assert untrained.reward_spread("sql", "smollm2") is None
    assert "mrtpo diagnose --task sql --model smollm2" in untrained.missing_sentence("sql", "smollm2")
    _diagnosis(tmp_path, "sql", {"format": 0.0, "executable": 0.0})
    table, settings = untrained.reward_spread("sql", "smollm2")
    flat = untrained.spread_sentence("sql", "smollm2", table, settings)
    assert "no reward of `sql` ever took two values" in flat and "64 groups of G = 4" in flat
    _diagnosis(tmp_path, "if", {"constraint_0": 0.375, "constraint_1": 0.0})
    varied = untrained.spread_sentence("if", "smollm2", *untrained.reward_spread("if", "smollm2"))
    assert "1 of 2 rewards" in varied and "constraint_0 38%" in varied and "nothing to learn" not in varied
    base, spread, sentence = untrained.summary("if", "smollm2")  # no base evaluation of it yet
    assert base is None and list(spread.index) == ["constraint_0", "constraint_1"]
    assert sentence.startswith("In 64 groups") and "mrtpo eval --task if --base --model smollm2" in sentence


def test_the_ifeval_check_sits_beside_the_model_card(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path))
    assert untrained.published_check("smollm2") is None
    scores = {"prompt_strict": 0.2, "inst_strict": 0.3, "prompt_loose": 0.25, "inst_loose": 0.35,
              "average_strict": 25.0, "average_loose": 30.0, "published_average": 29.9}
    (tmp_path / "published_check" / "smollm2-ifeval").mkdir(parents=True)
    (tmp_path / "published_check" / "smollm2-ifeval" / "scores.json").write_text(json.dumps(scores))
    table = untrained.published_table(untrained.published_check("smollm2"))
    assert table.loc["model card: IFEval average prompt/inst (points)", "value"] == pytest.approx(29.9)
    assert table.loc["prompt-level strict", "value"] == pytest.approx(0.2)
    counts = {"prompts": 541, "cut_by_length": 306, "cut_share": 306 / 541, "max_new_tokens": 256}
    assert untrained.length_sentence(counts) == "541 prompts; 306 answers (57%) cut at 256 tokens."
    split = untrained.length_sentence({**counts, "by_length": {
        "ended": {"n": 235, "prompt_strict": 0.204, "inst_strict": 0.317},
        "cut": {"n": 306, "prompt_strict": 0.16, "inst_strict": 0.262}}})
    assert "Over the 235 answers that ended: prompt-level strict 0.204" in split and "Over the 306 answers cut" in split
