"""The dial (issue 12): one recipe per setting for any task (``recipes.dial_recipe``), its measurement
(``benchmarks/tiny_models.py --dial``) and the book's reading of its rows (``report.dial_frame``)."""

import dataclasses
import importlib.util
import io
import json
import math
import re
from pathlib import Path

import pandas as pd
import torch
import pytest

from mrtpo.analysis import report
from mrtpo.models import tiny
from mrtpo.tasks import TASKS, get_task
from mrtpo.tasks.base import Noise
from mrtpo.models import recipe as recipes

ROOT = Path(__file__).resolve().parents[1]

#: the text-to-SQL dial series R2-d<d> as the testbed probe built it (benchmarks/testbed/probe.py overrides)
R2 = ('{"parent": {}, "steps": 360, "lr": 0.001, "warmup_steps": 10, "think_values": false, "noise": '
      '[["structure", D, ["execution_match"]], ["syntax", D, ["executable"]], ["tag", D, ["format"]]], '
      '"copy_weight": 4, "loo_blocks": true, "robust_p": 0.5}')
#: their cache names (sql-tiny-0-<hash>), seed 0
SQL_DIAL_HASHES = {0.0: "6a5154a9b7", 0.2: "b859d840bc", 0.5: "2552554ebf", 0.8: "0a6a6ee296"}


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sql_dial_recipes_are_the_testbed_series():
    probe = load(ROOT / "benchmarks" / "testbed" / "probe.py", "probe")
    sql = get_task("sql")
    assert recipes.DIAL_SETTINGS == tuple(SQL_DIAL_HASHES) and recipes.DIAL_DEFAULT in recipes.DIAL_SETTINGS
    for d, digest in SQL_DIAL_HASHES.items():
        recipe = recipes.dial_recipe(sql, d)
        # the JSON the probe was given writes d = 0 as 0: the same recipe, the same base
        for text in (f"{d:g}", repr(d)):
            assert probe.recipe_from(json.loads(R2.replace("D", text)), sql) == recipe
        assert probe.recipe_from({}, sql, dial=d) == recipe  # probe.py NAME --dial d
        assert recipes.recipe_hash("sql", recipe, 0) == digest
        assert tiny.tiny_path(get_task("sql"), recipe=recipe).name == f"sql-tiny-0-{digest}"
    # the parent is the default base, unchanged (tests/test_identity.py pins its hash)
    assert recipes.dial_recipe(sql).parent == recipes.default_recipe(sql)
    assert recipes.recipe_hash("sql", recipes.dial_recipe(sql).parent, 0) == "8a33c97be6"


@pytest.mark.parametrize("task", list(TASKS))
def test_the_dial_turns_every_gated_noise_and_nothing_else(task):
    t = get_task(task)
    default = recipes.default_recipe(t)
    for d in recipes.DIAL_SETTINGS:
        recipe = recipes.dial_recipe(t, d)
        assert recipe.noise == tuple(Noise(n.kind, d, n.gate) for n in t.warmup_noise)  # every kind is gated today
        assert all(n.gated for n in t.warmup_noise)
        same = {f.name for f in dataclasses.fields(recipe)} - {"noise", "parent", *recipes.DIAL_STAGE2, *t.dial_options}
        assert all(getattr(recipe, k) == getattr(default, k) for k in same)
        assert all(getattr(recipe, k) == v for k, v in {**recipes.DIAL_STAGE2, **t.dial_options}.items())
        assert recipe.parent == default and recipe.max_len == default.max_len
    assert len({recipes.recipe_hash(task, recipes.dial_recipe(t, d), 0) for d in recipes.DIAL_SETTINGS}) == len(recipes.DIAL_SETTINGS)
    # an option replaces the dial's default (a control), the smoke size is a few steps
    assert recipes.dial_recipe(t, 0.5, robust_p=0.0).robust_p == 0.0
    assert recipes.dial_recipe(t, 0.5, size="smoke").steps < 10
    with pytest.raises(ValueError, match="noise rate in"):
        recipes.dial_recipe(t, 5)


def test_instruction_following_dial_drops_the_rule_count():
    """IF's ``dial_options``: every setting's stage 2 without the reasoning's rule count; the base at 0.5 is the
    one measured as the second mix before it became the dial (results/testbed/attempts.md), and the mix with the
    count (``think_drop=""``) is the earlier dial's base."""
    t = get_task("if")
    assert t.dial_options == {"think_drop": r" with \d+ rules?"} and get_task("sql").dial_options == {}
    assert recipes.recipe_hash("if", recipes.dial_recipe(t, 0.5), 0) == "1fa4f9d951"
    assert recipes.recipe_hash("if", recipes.dial_recipe(t, 0.5, think_drop=""), 0) == "c478e0a42d"


def test_ungated_noise_keeps_its_rate():
    class Mixed(type(get_task("sql"))):
        warmup_noise = (Noise("tag", 0.1), Noise("syntax", 0.2, ("executable",)))

    assert not Mixed.warmup_noise[0].gated and Noise("constraint", 0.3).gated
    assert recipes.dial_recipe(Mixed(), 0.8).noise == (Noise("tag", 0.1), Noise("syntax", 0.8, ("executable",)))


CSV = """task,criterion,value,target,met,notes
sql,variance/format,0.7,0.5,True,mean reward 0.8
sql,localisation/format,0.6,3.0,False,
sql,dial/0/localisation/format,1.1,3.0,False,
sql,dial/0.5/localisation/format,3.2,3.0,True,
sql,dial/0.8/localisation/format,3.4,3.0,True,
sql,dial/0/localisation_out/execution_match,0.9,<= 0.5,False,
sql,dial/0.5/localisation_out/execution_match,0.4,<= 0.5,True,
sql,dial/0.8/localisation_out/execution_match,0.5,<= 0.5,False,
sql,dial/0.5/localisation/execution_match,1.5,3.0,False,
sql,dial/0.5/specificity/cross_reward_corr,0.6,<= 0.3,False,median over 9 pairs
sql,dial/0.5/reading_hidden/execution_match,0.4,0.5,False,"with Z 0.5, without 0.1"
sql,dial/0.5/budget/build_seconds,900.0,<= 1200 (all bases),False,"base sql-tiny-0-2552554ebf, recipe {}"
sql,dial/0.5/learning/100_gdpo_steps,0.2,0.1,True,base 0.5
sql,dial/0.5/budget/100_step_gdpo_seconds,800.0,<= 360,False,training time of each GDPO run
if,dial/0.2/variance/constraint_0,0.5,0.5,True,
all,budget/all_bases_build_seconds,8119.9,<= 1200,False,
"""


def test_dial_rows_parse_into_a_tidy_frame(tmp_path):
    path = tmp_path / "tiny_models.csv"
    path.write_text(CSV)
    criteria, dial = report.tiny_models(path)
    assert list(criteria["criterion"]) == ["variance/format", "localisation/format", "budget/all_bases_build_seconds"]
    assert len(dial) == 13 and list(dial.columns) == ["task", "setting", "figure", "reward", "value", "se", "target", "met", "notes"]
    assert criteria["se"].isna().all() and dial["se"].isna().all()  # rows written before the column: no s.e.
    assert dial["setting"].dtype == float and set(dial["setting"]) == {0.0, 0.2, 0.5, 0.8}
    first = dial.iloc[0]  # sorted: task, setting, figure, reward
    assert (first["task"], first["setting"], first["figure"], first["reward"], first["value"], first["met"]) == \
        ("if", 0.2, "variance", "constraint_0", 0.5, True)
    row = dial[(dial["figure"] == "specificity")].iloc[0]
    assert (row["reward"], row["value"], row["met"]) == ("cross_reward_corr", 0.6, False)

    checks = report.dial_checks(dial, 0.5).set_index("reward")
    fmt, em = checks.loc["format"], checks.loc["execution_match"]
    assert (fmt["figure"], fmt["settings"], fmt["lowest"], fmt["default"], fmt["highest"]) == ("ratio", 3, 1.1, 3.2, 3.4)
    assert fmt["lowest ≈ 1"] and fmt["highest ≥ default"]
    # a region holding most tokens is judged by the ratio outside it, lower = more localised
    assert (em["figure"], em["lowest"], em["default"], em["highest"]) == ("ratio outside", 0.9, 0.4, 0.5)
    assert em["lowest ≈ 1"] and not em["highest ≥ default"]
    assert "constraint_0" not in checks.index  # no localisation rows
    assert checks[["lowest se", "default se", "highest se"]].isna().all().all()
    # shown without a "±" where there is no s.e.
    assert report.with_se(criteria, {"value": "se"})["value"].tolist() == ["0.700", "0.600", "8119.900"]
    table = report.dial_table(dial[dial["task"] == "sql"])
    assert list(table.columns) == [0.0, 0.5, 0.8] and ("budget", "build_seconds") not in table.index
    # the RL rows of a dial base (tiny_models.py --learning --dial) are shown; the bases' build times are not
    assert table.loc[("learning", "100_gdpo_steps")].tolist() == ["—", "0.200", "—"]
    assert table.loc[("budget", "100_step_gdpo_seconds")].tolist() == ["—", "800.000", "—"]
    assert table.loc[("localisation", "format")].tolist() == ["1.100", "3.200", "3.400"]
    assert table.loc[("localisation", "execution_match")].tolist() == ["—", "1.500", "—"]


#: an s.e. for each row of CSV (benchmarks/tiny_models.py writes the column ``se``); none for the build times
SE = [0.09, 0.2, 0.1, 0.3, 0.35, 0.05, 0.06, 0.07, 0.2, 0.03, 0.05, None, 0.01, None, 0.09, None]


def test_standard_errors_are_read_shown_and_drawn(tmp_path):
    from mrtpo.analysis import plots

    path = tmp_path / "tiny_models.csv"
    frame = pd.read_csv(io.StringIO(CSV))
    frame.insert(3, "se", SE)
    frame.to_csv(path, index=False)
    criteria, dial = report.tiny_models(path)
    assert criteria["se"].tolist()[:2] == [0.09, 0.2] and math.isnan(criteria["se"].iloc[2])
    assert report.with_se(criteria, {"value": "se"})["value"].tolist() == ["0.700 ± 0.090", "0.600 ± 0.200", "8119.900"]
    sql = dial[dial["task"] == "sql"]
    assert report.dial_table(sql).loc[("localisation", "format")].tolist() == ["1.100 ± 0.100", "3.200 ± 0.300", "3.400 ± 0.350"]
    checks = report.dial_checks(dial, 0.5).set_index("reward")
    assert tuple(checks.loc["format", ["lowest se", "default se", "highest se"]]) == (0.1, 0.3, 0.35)
    shown = report.with_se(checks.reset_index(), {c: f"{c} se" for c in ("lowest", "default", "highest")})
    assert "lowest se" not in shown and shown.set_index("reward").at["format", "highest"] == "3.400 ± 0.350"
    fig = plots.dial(sql, 0.5, title="sql")
    # one error bar per point with an s.e.: format's 3 settings, execution_match's ratio (1) and outside (3), the
    # correlation (1), the hidden reading (1)
    bars = [sum(len(c.get_segments()) for c in ax.collections) for ax in fig.axes]
    assert bars == [7, 1, 1]


def test_dial_figure_draws_from_the_rows(tmp_path):
    from mrtpo.analysis import plots

    path = tmp_path / "tiny_models.csv"
    path.write_text(CSV)
    _, dial = report.tiny_models(path)
    fig = plots.dial(dial[dial["task"] == "sql"], 0.5, title="sql")
    series = [[(line.get_label(), len(line.get_xdata())) for line in ax.lines if line.get_marker() == "o"] for ax in fig.axes]
    assert sorted(series[0]) == [("execution_match", 1), ("execution_match (outside)", 3), ("format", 3)]
    assert series[1:] == [[("cross_reward_corr", 1)], [("execution_match (fact only in Z)", 1)]]
    assert plots.dial(dial[dial["task"] == "tool"], 0.5, title="tool").axes[0].texts  # "no dial rows for tool"
    # per-type rows (instruction following) get a fourth panel
    typed = pd.concat([dial, dial[dial["figure"] == "localisation"].assign(figure="localisation_type", reward="keywords:existence")])
    fig = plots.dial(typed[typed["task"] == "sql"], 0.5, title="sql")
    assert len(fig.axes) == 4 and [line.get_label() for line in fig.axes[3].lines if line.get_marker() == "o"] == ["keywords:existence"]


def test_a_smoke_dial_base_is_measured_like_the_default_base(monkeypatch, tmp_path):
    """Any task (here the toy fourth task): build the smoke dial base, measure it with ``measure``, write the rows."""
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    monkeypatch.setitem(TASKS, "repeat", "toy_task:RepeatWord")
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    bench = load(ROOT / "benchmarks" / "tiny_models.py", "tiny_models_bench")
    rows = bench.measure_dial("repeat", 0.5, n_prompts=2, group=2, max_new_tokens=16, size="smoke")
    assert rows and all(r["criterion"].startswith("dial/0.5/") for r in rows)
    budget = next(r for r in rows if r["criterion"] == "dial/0.5/budget/build_seconds")
    dial_base = tiny.tiny_path(get_task("repeat"), recipe=recipes.dial_recipe(get_task("repeat"), 0.5, size="smoke"))
    assert f"base {dial_base.name}, stage 2 of repeat-smoke-0-" in budget["notes"] and '"robust_p": 0.5' in budget["notes"]
    # a second mix: the same setting with a changed stage 2 is another base, its change in the notes
    second = bench.measure_dial("repeat", 0.5, {"think_drop": "copy"}, n_prompts=2, group=2, max_new_tokens=16, size="smoke")
    notes = next(r for r in second if r["criterion"] == "dial/0.5/budget/build_seconds")["notes"]
    assert dial_base.name not in notes and '"think_drop": "copy"' in notes
    out = tmp_path / "tiny_models.csv"
    bench.write(rows, out)
    bench.write(rows[:1], out)  # replaced by key, not appended
    _, dial = report.tiny_models(out)
    # (a smoke policy's samples seldom hold a check region, so localisation rows may be absent)
    assert len(dial) == len(rows) and set(dial["figure"]) >= {"variance", "specificity", "reading", "budget"}
    # every figure but a build time with its standard error, and its counts in the notes
    measured = dial[dial["figure"] != "budget"]
    assert measured["se"].notna().all() and dial.loc[dial["figure"] == "budget", "se"].isna().all()
    assert all("2 prompts" in n for n in measured.loc[measured["figure"].str.startswith("reading"), "notes"])
    assert re.search(r"\d+ responses \([\d.]+ of each group of 2, 2 prompts\) replayed",
                     measured.loc[measured["figure"] == "specificity", "notes"].iloc[0])
    # a new measurement replaces every row of the earlier one, also those it does not produce (here all but one);
    # other settings and tasks stay
    other = [{**rows[0], "criterion": "dial/0.8/variance/format"}, {**rows[0], "task": "sql"}]
    bench.write(other, out)
    bench.write(rows[:1], out, tuple(f"dial/0.5/{c}" for c in bench.MEASURED))
    left = pd.read_csv(out)
    assert sorted(zip(left["task"], left["criterion"])) == sorted((r["task"], r["criterion"]) for r in rows[:1] + other)


def test_localisation_is_also_reported_per_label(monkeypatch, tmp_path):
    """Where what a reward checks varies by example (``Task.reward_label``; instruction following: the constraint
    type), ``replayed`` adds rows ``localisation_type/<label>`` pooling that label's responses; one label's row
    equals the reward's own when every response has that label."""
    from transformers import AutoModelForCausalLM

    from mrtpo.models.tokenizer import load_tokenizer

    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    monkeypatch.setitem(TASKS, "repeat", "toy_task:RepeatWord")
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    bench = load(ROOT / "benchmarks" / "tiny_models.py", "tiny_models_bench")
    path = tiny.tiny_base(get_task("repeat"), size="smoke")
    tok, model = load_tokenizer(path), AutoModelForCausalLM.from_pretrained(path).eval()
    task = get_task("repeat")
    rows = list(task.synthetic(4, seed=1, split="test"))
    texts = [task.reference_response(r) for r in rows]
    samples = [[(tok(t, add_special_tokens=False).input_ids, t)] for t in texts]  # one teacher-forced "sample" each
    entropy = torch.zeros(len(rows), 1, max(len(s[0][0]) for s in samples))
    picked = [(i, 0) for i in range(len(rows))]

    def by_word(name, example):
        return example["word"] if name == "match" else name

    monkeypatch.setattr(type(task), "reward_label", staticmethod(by_word))
    out = {r["criterion"]: r for r in bench.replayed(model, tok, task, rows, samples, entropy, picked, n_boot=20)}
    words = {r["word"] for r in rows}
    assert {c for c in out if c.startswith("localisation_type/")} == {f"localisation_type/{w}" for w in words}
    assert "localisation_type/format" not in out  # a reward whose label is its name has no second row

    monkeypatch.setattr(type(task), "reward_label", staticmethod(lambda name, example: "all" if name == "match" else name))
    same = {r["criterion"]: r for r in bench.replayed(model, tok, task, rows, samples, entropy, picked, n_boot=20)}
    assert same["localisation_type/all"]["value"] == same["localisation/match"]["value"]
