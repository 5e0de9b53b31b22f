"""The evidence grid (benchmarks/book_runs.py): priority order, paired seeds, arguments `mrtpo train` accepts."""

import importlib.util
import re
import shlex
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from mrtpo.cli import _overrides, build_parser
from mrtpo.runs.config import resolve
from mrtpo.models.recipe import DIAL_SETTINGS

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "book_runs.py"
spec = importlib.util.spec_from_file_location("book_runs", SCRIPT)
book_runs = importlib.util.module_from_spec(spec)
sys.modules["book_runs"] = book_runs  # its dataclass looks its module up there
spec.loader.exec_module(book_runs)


def test_grid_in_priority_order_with_paired_seeds_and_no_duplicates():
    plan = book_runs.grid(seeds=3)
    sections = list(dict.fromkeys(p.section for p in plan))
    assert sections == ["power", "main tables", "convergence", "dose-response", "ablation", "beta sweep", "positive control",
                        "real model"]
    assert [p.section for p in plan] == sorted((p.section for p in plan), key=sections.index)  # no section interleaved
    assert len({p.cli() for p in plan}) == len(plan)
    # power first: GDPO at 5 seeds on every task
    assert {(p.task, p.seed) for p in plan if p.section == "power"} == {(t, s) for t in ("sql", "tool", "if") for s in range(5)}
    # every arm of a task at the tiny default has the same seeds (3; 5 for instruction following), so pairs are paired
    seeds = defaultdict(set)
    for p in plan:
        if p.steps is None and p.model == "tiny":
            seeds[(p.task, p.method, tuple(sorted(p.overrides.items())))].add(p.seed)
    for (task, method, overrides), found in seeds.items():
        dose = "dial" in dict(overrides) or "region_blend" in dict(overrides)  # the seeds asked for (>= 3)
        # the positive control: region, GDPO and MRTPO at 5 seeds on every task (issue 42)
        control = method in ("gdpo", "mrtpo", "region") and not overrides
        expected = set(range(5)) if not dose and (task == "if" or control) else set(range(3))
        assert found == expected, (task, method, found)
    # a run serves the first section that needs it: GDPO's main-table seeds are the power section's
    assert {p.method for p in plan if p.section == "main tables"} == {"mrtpo", "grpo", "opsd", "entropy"}
    assert {p.steps for p in plan if p.section == "convergence" and "constlen" not in p.method} == {300}
    # the fixed-length control is trained where a page reads it: beside text-to-SQL's length curves, default steps
    assert {(p.task, p.steps) for p in plan if "constlen" in p.method} == {("sql", None)}
    # the beta sweep: evidence.BETAS less the main MRTPO run's beta (0.5), which the main tables already train
    assert {(p.task, p.overrides["mrtpo_beta"]) for p in plan if p.section == "beta sweep"} == {
        (t, b) for t in ("sql", "tool", "if") for b in (0.25, 0.75, 1.0)}
    # dose-response: GDPO and MRTPO at every dial setting on text-to-SQL and instruction following, paired seeds
    dose = [p for p in plan if p.section == "dose-response"]
    assert {(p.task, p.method, p.overrides["dial"], p.seed) for p in dose} == {
        (t, m, d, s) for t in ("sql", "if") for m in ("gdpo", "mrtpo") for d in DIAL_SETTINGS for s in range(3)}
    # seeds 0-1 at every setting first (what a slope needs), each seed's two arms together, then seed 2
    sql = [(p.seed, p.overrides["dial"], p.method) for p in dose if p.task == "sql"]
    assert sql[:2 * len(DIAL_SETTINGS) * 2] == [(s, d, m) for d in DIAL_SETTINGS for s in (0, 1) for m in ("gdpo", "mrtpo")]
    assert sql[2 * len(DIAL_SETTINGS) * 2:] == [(2, d, m) for d in DIAL_SETTINGS for m in ("gdpo", "mrtpo")]
    assert len(book_runs.grid(seeds=5)) > len(plan)
    # the real model: its four arms on instruction following at the registry's seeds; GDPO and MRTPO of a seed
    # together, at every seed before either control, then the region control at every seed, then the entropy one
    real = [(p.task, p.seed, p.method) for p in plan if p.section == "real model"]
    assert {p.model for p in plan if p.section == "real model"} == {"smollm2"}
    assert real == ([("if", s, m) for s in (0, 1, 2) for m in ("gdpo", "mrtpo")]
                    + [("if", s, "region") for s in (0, 1, 2)] + [("if", s, "entropy") for s in (0, 1, 2)])


def test_powered_section_adds_the_seeds_mrtpo_minus_gdpo_needs(monkeypatch):
    """The powered section plans MRTPO and GDPO up to the seeds the paired sd asks for (capped), right after the
    main tables, and only where the sd is paired; seeds other sections already plan are not repeated."""
    import pandas as pd

    import mrtpo.analysis.power_analysis

    rows = [("table1_text_to_sql", "sql", "mrtpo − gdpo", "paired", 13.0),
            ("table5_ablation", "sql", "mrtpo − gdpo", "paired", 13.0),
            ("table1_text_to_sql", "sql", "mrtpo − grpo", "paired", 30.0),
            ("table3_tool_calling", "tool", "mrtpo − gdpo", "paired", 40.0),
            ("table2_instruction_following", "if", "mrtpo − gdpo", "unknown (no arm has two seeds)", float("nan"))]
    table = pd.DataFrame(rows, columns=["page", "task", "comparison", "measured", "seeds for 0.05 at 80% power"])
    monkeypatch.setattr(mrtpo.analysis.power_analysis, "book_power", lambda *a, **k: table)
    powered = book_runs.powered_seeds()
    assert powered == {"sql": 13, "tool": book_runs.MAX_POWERED_SEEDS}
    plan = book_runs.grid(seeds=3, powered=powered)
    sections = list(dict.fromkeys(p.section for p in plan))
    assert sections[:3] == ["power", "main tables", "powered"]
    added = {(p.task, p.method, p.seed) for p in plan if p.section == "powered"}
    assert {(m, s) for t, m, s in added if t == "sql"} == {("gdpo", s) for s in range(5, 13)} | {("mrtpo", s) for s in range(3, 13)}
    assert {s for t, m, s in added if t == "tool" and m == "mrtpo"} == set(range(3, book_runs.MAX_POWERED_SEEDS))
    assert len({p.cli() for p in plan}) == len(plan)


def test_every_planned_run_is_a_valid_mrtpo_train_command():
    parser = build_parser()
    for p in book_runs.grid(seeds=3):
        args = parser.parse_args(["train", *shlex.split(p.cli())])
        assert (args.task, args.method, args.seed, args.model) == (p.task, p.method, p.seed, p.model)
        overrides = _overrides(args)  # what `mrtpo train` passes on: --mrtpo-beta, --rewards, --dial, --set
        assert overrides == p.overrides
        resolve(p.task, p.method, p.model, p.seed, args.steps, **overrides)  # raises on an invalid combination


def test_dry_run_lists_the_dose_response_grid_with_estimates(monkeypatch, tmp_path, capsys):
    """The dry run on an empty results folder and model cache: every dial run listed as missing (with no estimate:
    no run of its arm has finished, on a dial base or the default one), and the dial bases neither built nor
    shipped — none while the repository ships them (a shipped base is copied, not built), both without."""
    import mrtpo.models.tiny

    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    plan = [book_runs.Planned("dose-response", "sql", m, 0, overrides={"dial": d}) for d in (0.0, 0.2) for m in ("gdpo", "mrtpo")]
    monkeypatch.setattr(book_runs, "grid", lambda seeds, powered, section=None: plan)
    book_runs.main(["--dry-run"])
    assert "dial bases neither built nor shipped" not in capsys.readouterr().out  # bases/ ships sql dial 0 and 0.2
    monkeypatch.setattr(mrtpo.models.tiny, "shipped_base", lambda name: None)
    book_runs.main(["--dry-run"])
    out = capsys.readouterr().out
    assert all(p.cli() in out for p in plan) and re.search(r"--dial 0\b(?!\.)", out)
    assert re.search(r"dose-response\s+4 runs\s+0.0 h \+ 4 runs without an estimate\n", out)
    assert "dial bases neither built nor shipped (built by their first run, not in the estimates): sql dial 0, sql dial 0.2" in out
    assert "no estimate for:" in out and "needs the testbed's dial" not in out


def test_positive_control_section_pairs_its_arms_and_asks_for_runs_other_sections_plan():
    plan = book_runs.grid(seeds=3)
    control = [p for p in plan if p.section == "positive control"]
    assert {(p.task, p.method) for p in control if p.method == "region"} == {(t, "region") for t in ("sql", "tool", "if")}
    blend = {(p.task, p.overrides["region_blend"], p.seed) for p in control if "region_blend" in p.overrides}
    assert blend == {(t, lam, s) for t in ("sql", "if") for lam in (0.25, 0.5, 0.75) for s in range(3)}
    assert all(p.cli().endswith(f"--set region_blend={p.overrides['region_blend']:g}") for p in control if p.overrides)
    # alone, the section also lists the GDPO and MRTPO seeds an earlier section plans: a stopped queue stays paired
    alone = book_runs.grid(seeds=3, section="positive control")
    assert {(p.task, p.method, p.seed) for p in alone if not p.overrides} == {
        (t, m, s) for t in ("sql", "tool", "if") for m in ("region", "gdpo", "mrtpo") for s in range(5)}
    with pytest.raises(SystemExit, match="no section 'nope'"):
        book_runs.grid(seeds=3, section="nope")
