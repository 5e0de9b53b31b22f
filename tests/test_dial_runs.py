"""Runs on the testbed's dial bases: ``RunConfig.dial`` enters a run's identity only when set, names the dial
recipe's base (its hash in the model identity, the one resolution ``models.resolve_model``) and shows in the folder
name; bad requests fail before any work with what to do."""

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from mrtpo.analysis import evidence
from mrtpo.models import tiny
from mrtpo.runs import runner as R
from mrtpo.cli import _overrides, build_parser, main
from mrtpo.runs.config import OPTIONAL_FIELDS, BadRequest, resolve
from mrtpo.models import resolve_model
from mrtpo.runs.results import runs_table
from mrtpo.tasks import TASKS, get_task
from mrtpo.models import recipe as recipes

#: the text-to-SQL dial bases' cache names (tests/test_dial.py pins the same series)
SQL_DIAL_HASHES = {0.0: "6a5154a9b7", 0.2: "b859d840bc", 0.5: "2552554ebf", 0.8: "0a6a6ee296"}


def test_dial_enters_the_identity_only_when_set_and_names_the_dial_base():
    assert OPTIONAL_FIELDS["dial"] is None
    default, unset = resolve("sql", "gdpo"), resolve("sql", "gdpo", dial=None)
    assert default == unset and default.dial is None and "dial" not in R.identity(default)["config"]
    assert default.base_recipe == recipes.default_recipe(get_task("sql"))
    assert default.base_identity == {"tiny_size": "tiny", "recipe": "8a33c97be6"}  # the default base, as before
    names = set()
    for setting, digest in SQL_DIAL_HASHES.items():
        cfg = resolve("sql", "gdpo", seed=1, dial=setting)
        assert cfg.dial == setting and cfg.base_recipe == recipes.dial_recipe(get_task("sql"), setting)
        ident, _, folder = R.locate(cfg)
        assert ident["config"]["dial"] == setting and ident["model"] == {"tiny_size": "tiny", "recipe": digest}
        assert folder.name.startswith(f"gdpo-dial{setting:g}-seed1-") and cfg.label == "gdpo"  # the arm, whatever the base
        names.add(folder.name)
    assert len(names) == len(SQL_DIAL_HASHES)
    # 0 is a setting (no gated noise), not "unset"; an int and a float are the same setting
    assert R.locate(resolve("sql", "gdpo", dial=0))[1] == R.locate(resolve("sql", "gdpo", dial=0.0))[1] != R.locate(default)[1]
    mrtpo = R.locate(resolve("sql", "mrtpo+saw", dial=0.5, mrtpo_beta=0.25))[2].name
    assert mrtpo.startswith("mrtpo+saw-dial0.5-beta0.25-seed0-")
    assert resolve("sql", "gdpo", "smoke", dial=0.5).base_recipe == recipes.dial_recipe(get_task("sql"), 0.5, size="smoke")


def test_a_bad_dial_request_fails_before_any_work_saying_what_to_do(tmp_path):
    for bad in (1.5, -0.1, "high", True, float("nan")):
        with pytest.raises(BadRequest, match=r"dial=.* is not valid; valid values: a gated-noise rate in \[0, 1\]; "
                                             r"the measured settings are 0.0, 0.2, 0.5, 0.8"):
            resolve("sql", "gdpo", dial=bad)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_text("")
    for model in ("7b", str(tmp_path)):
        with pytest.raises(BadRequest, match="is not a tiny size: use --model tiny or smoke, or leave dial unset"):
            resolve("sql", "gdpo", model, dial=0.2)
    # the one resolution refuses a recipe of another size rather than building the wrong base
    with pytest.raises(ValueError, match="builds the tiny base 'smoke', not model 'tiny'"):
        resolve_model(get_task("sql"), "tiny", recipe=recipes.dial_recipe(get_task("sql"), 0.2, size="smoke"))


def test_the_cli_takes_a_dial_setting(capsys):
    args = build_parser().parse_args(["train", "--task", "sql", "--method", "mrtpo", "--dial", "0.2"])
    assert _overrides(args) == {"dial": 0.2}
    assert "dial" not in _overrides(build_parser().parse_args(["train", "--task", "sql", "--method", "mrtpo"]))
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--task", "sql", "--method", "gdpo", "--dial", "2"])
    assert "mrtpo: error: dial=2.0 is not valid" in str(exit_.value)
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--dial SETTING" in capsys.readouterr().out


def test_a_smoke_run_on_a_dial_base_starts_from_it(monkeypatch, tmp_path):
    """The toy task: a 2-step run on the smoke dial base at 0.8 builds that base (a stage 2 of the smoke base),
    trains from it, records its recipe, and is found by its dial only."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setitem(TASKS, "repeat", "toy_task:RepeatWord")
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    run = R.run("repeat", "gdpo", "smoke", dial=0.8)
    recipe = recipes.dial_recipe(get_task("repeat"), 0.8, size="smoke")
    assert run.trained and run.path.name.startswith("gdpo-dial0.8-seed0-")
    assert R.base_path(resolve("repeat", "gdpo", "smoke", dial=0.8)) == tiny.tiny_path(get_task("repeat"), "smoke", recipe=recipe)
    assert recipes.Recipe.from_dict(run.base_recipe["recipe"]) == recipe
    assert run.base_recipe["parent_base"] == tiny.tiny_path(get_task("repeat"), "smoke").name
    assert json.loads((run.path / "config.json").read_text())["model"]["recipe"] == recipes.recipe_hash("repeat", recipe, 0)
    assert R.find("repeat", "gdpo", "smoke", dial=0.8).path == run.path
    assert R.find("repeat", "gdpo", "smoke") is None and R.find("repeat", "gdpo", "smoke", dial=0.5) is None
    assert [r.path for r in evidence.finished("repeat", "gdpo", "smoke", dial=0.8)] == [run.path]
    assert evidence.finished("repeat", "gdpo", "smoke") == []
    assert dataclasses.asdict(resolve("repeat", "gdpo", "smoke", dial=0.8))["dial"] == 0.8
    # the dose-response analysis reads such runs, and says which are missing; it trains nothing
    from mrtpo.analysis import dose_response, report

    mrtpo = R.run("repeat", "mrtpo", "smoke", dial=0.8)
    rows = report.dial_frame(pd.DataFrame({
        "task": "repeat", "criterion": [f"dial/{d:g}/localisation/match" for d in (0.5, 0.8)], "value": [1.5, 3.0],
        "target": 3.0, "met": False, "notes": ["shift share 0.3 on token share 0.2; concentration(80%) 0.3"] * 2}))
    found = dose_response.dial_runs("repeat", [0.5, 0.8], "smoke")
    assert {m: [r.path for r in rs] for m, rs in found[0.8].items()} == {"gdpo": [run.path], "mrtpo": [mrtpo.path]}
    assert found[0.5] == {"gdpo": [], "mrtpo": []}
    result = dose_response.analyse("repeat", rows, found)
    t = result.table.set_index("setting")
    assert t.at[0.8, "interval over"] == "prompts only: one shared seed" and t.at[0.8, "ratio"] == pytest.approx(3.0)
    assert t.at[0.8, "gain"] == pytest.approx(mrtpo.eval["synthetic_test"]["temp1"]["match"]
                                              - run.eval["synthetic_test"]["temp1"]["match"])
    assert t.at[0.5, "interval over"] == "no runs" and result.verdict.startswith("repeat: not enough settings/seeds")
    missing = dose_response.missing_runs("repeat", found, seeds=[0, 1], model="smoke")
    assert len(missing) == 6 and "--task repeat --method gdpo --seed 1 --model smoke --dial 0.8" in set(missing["mrtpo train"])
    # a main table on a dial base (the table notebooks' ``dial`` parameter) reuses the same runs
    table, _, _, arms = evidence.main_table("repeat", "smoke", [0], methods=("gdpo", "mrtpo"), dial=0.8)
    assert [r.path for r in arms["gdpo"] + arms["mrtpo"]] == [run.path, mrtpo.path] and not any(r.trained for r in arms["gdpo"])
    assert list(table["method"]) == ["base", "gdpo", "mrtpo"]  # base: the dial base itself, untrained
    assert any(p.name.startswith("base-dial0.8-") for p in (tmp_path / "results" / "base" / "repeat" / "smoke").iterdir())
    listed = runs_table("repeat").set_index("method")
    assert listed.at["gdpo", "dial"] == 0.8 and listed.at["mrtpo", "path"].startswith("runs/repeat/smoke/mrtpo-dial0.8-beta0.5-")
