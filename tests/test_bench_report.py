"""The replay_cost page's tables from the benchmarks' CSVs (``mrtpo.analysis.report``)."""

import math

import pandas as pd

from mrtpo.analysis import report


def test_step_split_and_replay_limits():
    bench = pd.DataFrame({
        "task": ["sql", "sql"], "variant": ["gdpo", "mrtpo"], "median_step_s": [2.0, 4.0],
        "generation_s": [1.0, 1.0], "rewards_s": [0.2, 0.2], "replay_s": [0.0, 2.0], "loss_s": [0.6, 0.6],
        "other_s": [0.2, 0.2], "effective_k": [math.nan, 1.5], "forwards_per_response": [math.nan, 2.5],
        "forward_s": [math.nan, 0.5], "limit_s": [math.nan, 1.25], "replay_to_limit": [math.nan, 1.6],
    })
    split = report.step_split(bench)
    assert len(split) == 10 and list(split["phase"].unique()) == list(report.STEP_PHASES)
    mrtpo = split[split.variant == "mrtpo"].set_index("phase")
    assert mrtpo.loc["replay", "share"] == 0.5 and mrtpo.loc["generation", "seconds"] == 1.0
    limits = report.replay_limits(bench)
    assert list(limits["variant"]) == ["mrtpo"] and not limits["met"].iloc[0]


def test_run_time_table_speedup_goal_and_missing_versions():
    runs = pd.DataFrame({
        "task": ["sql", "sql", "tool"], "version": ["before", "after", "before"], "wall_s": [600.0, 240.0, 300.0],
        "load_start": [2.0, 2.0, 3.0], "load_end": [2.0, 3.0, 3.0], "run_folder": ["m-1a", "m-1a", "m-2b"],
    })
    table = report.run_time_table(runs).set_index("task")
    assert table.loc["sql", "before_min"] == 10 and table.loc["sql", "speedup"] == 2.5
    assert table.loc["sql", "halved"] == True and table.loc["sql", "same_run_hash"] == True  # noqa: E712
    assert table.loc["sql", "after_load"] == 2.5
    assert math.isnan(table.loc["tool", "after_min"]) and pd.isna(table.loc["tool", "halved"])


def test_bench_rows_keep_one_models_rows(tmp_path, monkeypatch):
    (tmp_path / "bench").mkdir()
    pd.DataFrame({"task": ["if", "if", "sql"], "model": ["if-tiny-0-b6a605e99a", "smollm2-b179c9523d0e", "sql-tiny-0-8a"],
                  "variant": ["gdpo"] * 3}).to_csv(tmp_path / "bench" / "step_cost.csv", index=False)
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    assert list(report.bench_rows("step_cost", "tiny")["task"]) == ["if", "sql"]
    assert list(report.bench_rows("step_cost", "smollm2")["model"]) == ["smollm2-b179c9523d0e"]
    assert report.bench_rows("decode_speed", "smollm2").empty  # not measured yet: an empty frame, no error


def test_a_lora_step_is_its_own_row(tmp_path, monkeypatch):
    (tmp_path / "bench").mkdir()
    pd.DataFrame({"task": ["if"] * 3, "model": ["smollm2-b179c9523d0e"] * 3, "variant": ["gdpo", "gdpo", "mrtpo"],
                  "lora_rank": [None, 16, 16]}).to_csv(tmp_path / "bench" / "step_cost.csv", index=False)
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    assert list(report.bench_rows("step_cost", "smollm2")["variant"]) == ["gdpo", "gdpo, LoRA r16", "mrtpo, LoRA r16"]
