"""A fourth task registers itself in one file (``toy_task.py``) and one ``TASKS`` entry, and the runner builds
its tiny base, trains, evaluates and renders it without any other module knowing it."""

import pandas as pd
import pytest

from mrtpo.analysis import evidence, report
from mrtpo.tasks import TASKS

@pytest.fixture
def toy(monkeypatch, tmp_path):
    monkeypatch.setitem(TASKS, "repeat", "toy_task:RepeatWord")
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    return tmp_path


def test_a_fourth_task_trains_evaluates_and_renders(toy, capsys):
    from mrtpo.runs import runner as runs

    run = runs.run("repeat", "mrtpo", model="smoke")  # the smoke size: a seconds-to-build base, 2 steps
    assert run.trained and run.path.parent == toy / "results" / "runs" / "repeat" / "smoke"
    assert set(run.eval) == {"synthetic_test", "synthetic_hide_value"}
    assert set(run.eval["synthetic_test"]["temp1"]) == {"format", "match"}
    assert run.base_recipe["recipe"]["noise"] == [{"kind": "tag", "p": 0.2, "gate": ["format"]}]
    assert {"mrtpo/s", "mrtpo/match/frac_groups_nonzero_std"} <= set(run.metrics.columns)
    table, evals, fig, arms = evidence.main_table("repeat", "smoke", seeds=[0], methods=("gdpo", "mrtpo"))
    assert list(table["method"]) == ["base", "gdpo", "mrtpo"] and table["temp1_mean"].between(0, 1).all()
    base = runs.base_evaluation("repeat", "smoke")  # the "base" row: evaluated once, then read back
    assert not base.trained and base.path.parent == toy / "results" / "base" / "repeat" / "smoke"
    assert table.set_index("method").at["base", "seed ids"] == "untrained"
    assert pd.isna(table.set_index("method").at["base", "temp1_se"])  # one evaluation: no spread over seeds
    assert set(pd.read_csv(base.path / "eval.csv")["method"]) == {"base"}
    assert set(arms) == {"gdpo", "mrtpo"}  # the base is shown, never paired with an arm
    from mrtpo.cli import main

    capsys.readouterr()
    main(["eval", "--task", "repeat", "--model", "smoke", "--base"])  # the same folder, from the command line
    assert capsys.readouterr().out.splitlines()[0] == str(base.path)
    verdicts = evidence.verdict_table(arms, [("mrtpo", "gdpo")], "match")
    assert verdicts["interval over"].tolist() == ["prompts only: one shared seed"]  # a new run stores per-prompt results
    assert isinstance(report.localisation(run), pd.DataFrame)
    assert report.check_model("repeat", "smoke")["data"] == "synthetic words to repeat"
