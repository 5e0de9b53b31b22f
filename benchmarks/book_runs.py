"""The book's evidence grid (issue 19) at the tiny default, then the real instruct model's runs (issue 40), in
priority order: which runs, which are finished, and what the missing ones will cost.

    python benchmarks/book_runs.py --dry-run            # the plan: every run, done or missing, estimated minutes
    python benchmarks/book_runs.py --missing            # the missing runs as `mrtpo train` arguments, one a line
    python benchmarks/book_runs.py --dry-run --seeds 5  # the same grid at 5 seeds per arm

``benchmarks/book_runs.sh`` trains the missing runs one at a time in this order (2 cores: never two trainings at
once); a run folder that exists is reused and a killed run resumes from its last checkpoint, so the script can be
stopped and restarted at any point. The estimate of a missing run is its steps times the median training time per
step of the finished runs of the same task, method and kind of base (the default base or a dial base; else on
either; else of the task's other methods on that kind of base); evaluation is not included.

Priority: (1) power — GDPO at 5 seeds on every task, the seed-to-seed spread every other number is judged
against; (2) the main tables — GRPO, GDPO, MRTPO, OPSD and the entropy control (issue 18); (2b) powered — GDPO
and MRTPO at the seeds the paper's claim MRTPO − GDPO needs for a difference of 0.05 at 80% power, where the
finished runs measure it (``powered_seeds``: an internal pilot — the sd of the paired difference over the seeds
present, never the difference itself; at most ``MAX_POWERED_SEEDS``); (3) convergence — GDPO and MRTPO for
300 steps (``claims.LONG_STEPS``) on text-to-SQL, and its fixed-length control (``+constlen``, the default steps)
beside the length curves; (4) dose-response — GDPO and MRTPO on the testbed's dial bases
(``--dial``, every setting of ``recipe.DIAL_SETTINGS``) for text-to-SQL and instruction following, two seeds at
every setting before the third (a setting enters the slope with two shared seeds), analysed by
``mrtpo.analysis.dose_response`` (ahead of the ablation: it is the experiment the paper could not run, and the one the book
exists to answer); (5) the ablation — joint, shuffled, SAW alone, MRTPO + SAW and (text-to-SQL)
sub-verifier rewards; (6) the beta sweep (``evidence.BETAS``; the main MRTPO run is its default
beta); (7) the positive control — the ``region`` arm beside GDPO and MRTPO, and the placement dial
(``region_blend``, issue 42); (8) the real model — GDPO, MRTPO, ``region`` and ``entropy`` on SmolLM2-135M-Instruct
(``--model smollm2``) at its registry settings and seeds, instruction following only, GDPO and MRTPO at every seed
before either control (``--section 'real model'``;
about an hour a run alone on 2 threads, three or more beside other work on one). Every arm uses the same seeds, so every comparison is paired. A dial base is built
by the first run that needs it (a stage 2 of the task's default base, or copied from ``bases/`` when the repository ships it; its build
time is not in the estimates, and the dry run lists the bases that are neither built nor shipped).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mrtpo.analysis.claims import LONG_STEPS
from mrtpo.analysis.dose_response import MIN_SHARED_SEEDS
from mrtpo.analysis.evidence import BETAS
from mrtpo.analysis.positive_control import BLEND_SETTINGS
from mrtpo.analysis.trained import ARMS as REAL_ARMS
from mrtpo.models import model_spec
from mrtpo.models.recipe import DIAL_SETTINGS
from mrtpo.tasks import get_task

TASKS = ("sql", "tool", "if")
#: instruction following gets 5 seeds per arm, as the paper
TASK_SEEDS = {"if": 5}
POWER_SEEDS = 5
#: the dose-response grid's tasks (issue 19: at least instruction following and text-to-SQL)
DOSE_TASKS = ("sql", "if")
#: the comparison the "powered" section sizes (the paper's claim on every main table), and its seeds' ceiling: beyond
#: it the page states the difference the seeds present can detect
POWERED = ("mrtpo", "gdpo")
MAX_POWERED_SEEDS = 16
#: the positive control (issue 42): the region arm with GDPO and MRTPO on shared seeds on every task, and the
#: placement dial (MRTPO's relevance blended with the check region) on the dose-response tasks
CONTROL_SEEDS, BLEND_SEEDS = 5, 3
#: the real instruct model's grid (issue 40): its arms (``mrtpo.analysis.trained.ARMS``) on the tasks whose rewards vary
#: within its groups (its diagnosis: none does on text-to-SQL or tool calling), at the seeds its registry entry plans
REAL_MODEL, REAL_TASKS = "smollm2", ("if",)


@dataclass(frozen=True)
class Planned:
    """One run of the grid: ``mrtpo train`` arguments and the section of the book it serves."""

    section: str
    task: str
    method: str
    seed: int
    steps: int | None = None
    overrides: dict = field(default_factory=dict, hash=False, compare=False)
    model: str = "tiny"

    def cli(self) -> str:
        args = [f"--task {self.task}", f"--method {self.method}", f"--seed {self.seed}", f"--model {self.model}"]
        if self.steps is not None:
            args.append(f"--steps {self.steps}")
        if "mrtpo_beta" in self.overrides:
            args.append(f"--mrtpo-beta {self.overrides['mrtpo_beta']:g}")
        if "rewards" in self.overrides:
            args.append(f"--rewards {self.overrides['rewards']}")
        if "dial" in self.overrides:
            args.append(f"--dial {self.overrides['dial']:g}")
        if "region_blend" in self.overrides:
            args.append(f"--set region_blend={self.overrides['region_blend']:g}")
        return " ".join(args)


def powered_seeds(model: str = "tiny", delta: float = 0.05, power: float = 0.8, cap: int = MAX_POWERED_SEEDS) -> dict[str, int]:
    """Per task, the seeds per arm that MRTPO − GDPO needs for a difference of ``delta`` at ``power``
    (``power_analysis.book_power`` over the finished runs), capped at ``cap``; only tasks where that sd is paired
    (two shared seeds or more) — elsewhere it is unknown or borrowed, and the grid's own seeds stand."""
    from mrtpo.analysis.power_analysis import book_power

    table = book_power(model, delta, power)
    rows = table[(table["comparison"] == " − ".join(POWERED)) & (table["measured"] == "paired")].drop_duplicates("task")
    return {row.task: min(cap, int(row[f"seeds for {delta:g} at {power:.0%} power"])) for _, row in rows.iterrows()}


def grid(seeds: int = 3, powered: dict[str, int] | None = None, section: str | None = None) -> list[Planned]:
    """The issue-19 grid in priority order (duplicates dropped: a run serves the first section that needs it);
    ``powered``: seeds per arm of :data:`POWERED` per task (:func:`powered_seeds`), planned after the main tables;
    ``section``: only the runs that section needs (also those an earlier section plans)."""
    def n(task: str) -> range:
        return range(max(seeds, TASK_SEEDS.get(task, 0)))

    plan: list[Planned] = []
    for task in TASKS:
        plan += [Planned("power", task, "gdpo", s) for s in range(max(POWER_SEEDS, len(n(task))))]
    for task in TASKS:
        plan += [Planned("main tables", task, m, s) for s in n(task) for m in ("gdpo", "mrtpo", "grpo", "opsd", "entropy")]
    for task, count in (powered or {}).items():
        plan += [Planned("powered", task, m, s) for s in range(count) for m in POWERED]
    plan += [Planned("convergence", "sql", m, s, steps=LONG_STEPS) for s in range(seeds) for m in ("gdpo", "mrtpo")]
    # the fixed-length control beside the length curves (fig5 and the arms page read it on text-to-SQL only)
    plan += [Planned("convergence", "sql", m, s) for s in range(seeds) for m in ("gdpo+constlen", "mrtpo+constlen")]
    for task in DOSE_TASKS:  # both arms of a seed together, so a stopped grid leaves paired runs; every setting
        # gets the seeds that let it enter the slope (MIN_SHARED_SEEDS) before any setting gets more
        blocks = (range(min(seeds, MIN_SHARED_SEEDS)), range(MIN_SHARED_SEEDS, seeds))
        plan += [Planned("dose-response", task, m, s, overrides={"dial": d})
                 for block in blocks for d in DIAL_SETTINGS for s in block for m in ("gdpo", "mrtpo")]
    for task in TASKS:
        arms = ["joint", "shuffled", "gdpo+saw", "mrtpo+saw"]
        plan += [Planned("ablation", task, m, s) for s in n(task) for m in arms]
        if task == "sql":
            plan += [Planned("ablation", task, m, s, overrides={"rewards": "sub"}) for s in n(task) for m in ("mrtpo", "gdpo")]
    for task in TASKS:
        betas = [b for b in BETAS if b != model_spec(get_task(task)).mrtpo_beta]  # the main MRTPO run is the sweep's default beta
        plan += [Planned("beta sweep", task, "mrtpo", s, overrides={"mrtpo_beta": b}) for s in n(task) for b in betas]
    for task in TASKS:  # the three arms of a seed together, so that a stopped grid leaves paired runs; then the dial
        plan += [Planned("positive control", task, m, s) for s in range(max(CONTROL_SEEDS, len(n(task))))
                 for m in ("region", "gdpo", "mrtpo")]
        if task in DOSE_TASKS:
            plan += [Planned("positive control", task, "mrtpo", s, overrides={"region_blend": lam})
                     for s in range(BLEND_SEEDS) for lam in BLEND_SETTINGS]
    # the real instruct model (issue 40) at its registry settings and seeds: the paper's claim first (GDPO and MRTPO,
    # both arms of a seed together, so a stopped grid leaves paired runs), then each control at every seed; a run
    # costs about an hour, so the pair that answers "did MRTPO beat GDPO?" gets its seeds before any control does
    for task in REAL_TASKS:
        seeds_planned = model_spec(get_task(task), REAL_MODEL).seeds
        blocks = (REAL_ARMS[:2],) + tuple((arm,) for arm in REAL_ARMS[2:])
        plan += [Planned("real model", task, m, s, model=REAL_MODEL) for block in blocks for s in seeds_planned for m in block]
    if section is not None:
        if section not in {p.section for p in plan}:
            raise SystemExit(f"no section {section!r}; sections: {', '.join(dict.fromkeys(p.section for p in plan))}")
        plan = [p for p in plan if p.section == section]
    seen, out = set(), []
    for p in plan:
        key = p.cli()
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def status(plan: list[Planned]) -> list[dict]:
    """Each planned run with whether its folder exists (same config hash) and its estimated training minutes."""
    from tqdm.auto import tqdm

    from mrtpo import runs as runner
    from mrtpo.runs.results import runs_table

    done = runs_table().assign(base=lambda d: d["dial"].notna().map({True: "dial", False: "default"}),
                               per_step=lambda d: d["train_s"] / d["steps"])
    by_base = done.groupby(["model", "task", "method", "base"])["per_step"].median()
    by_method = done.groupby(["model", "task", "method"])["per_step"].median()
    by_task_base = done.groupby(["model", "task", "base"])["per_step"].median()
    rows = []
    for p in tqdm(plan, desc="checking run folders"):
        found = runner.find(p.task, p.method, p.model, seed=p.seed, steps=p.steps, **p.overrides)
        cfg = runner.resolve(p.task, p.method, p.model, steps=p.steps, **p.overrides)
        base = "dial" if cfg.dial is not None else "default"
        per_step = by_base.get((p.model, p.task, cfg.label, base), by_method.get(
            (p.model, p.task, cfg.label), by_task_base.get((p.model, p.task, base), float("nan"))))
        rows.append({"section": p.section, "run": p.cli(), "done": found is not None, "est_min": per_step * cfg.steps / 60})
    return rows


def missing_dial_bases(plan: list[Planned]) -> list[str]:
    """``<task> dial <setting>`` for every dial base the plan needs that is neither in the model cache nor shipped
    under ``bases/`` (a shipped base is copied into the cache by its first run, not built)."""
    from mrtpo.models.recipe import dial_recipe
    from mrtpo.models.tiny import shipped_base, tiny_path

    def available(path) -> bool:
        return (path / "mrtpo_recipe.json").exists() or shipped_base(path.name) is not None

    needed = dict.fromkeys((p.task, p.overrides["dial"]) for p in plan if "dial" in p.overrides)
    return [f"{task} dial {d:g}" for task, d in needed
            if not available(tiny_path(get_task(task), recipe=dial_recipe(get_task(task), d)))]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per arm (instruction following: at least 5)")
    parser.add_argument("--no-powered", action="store_true", help="leave out the powered section (the seeds MRTPO − GDPO needs)")
    parser.add_argument("--section", help="only this section of the grid (e.g. 'positive control')")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--dry-run", action="store_true", help="print the plan and its estimated compute")
    what.add_argument("--missing", action="store_true", help="print the missing runs' `mrtpo train` arguments")
    args = parser.parse_args(argv)
    plan = grid(args.seeds, None if args.no_powered else powered_seeds(), args.section)
    rows = status(plan)
    if args.missing:
        print("\n".join(r["run"] for r in rows if not r["done"]))
        return
    import pandas as pd

    table = pd.DataFrame(rows)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", None):
        print(table.assign(est_min=table["est_min"].round(1)).to_string(index=False))
    missing = table[~table["done"]]
    per_section = missing.groupby("section", sort=False)["est_min"].agg(["size", "sum", lambda x: int(x.isna().sum())])
    print("\nmissing runs per section (estimated training hours, one run at a time):")

    def unestimated(n) -> str:  # the hours are those of the runs with an estimate
        return f" + {int(n)} runs without an estimate" if n else ""

    for section, (count, minutes, without) in per_section.iterrows():
        print(f"  {section:14s} {int(count):4d} runs  {minutes / 60:6.1f} h{unestimated(without)}")
    print(f"  {'total':14s} {len(missing):4d} runs  {missing['est_min'].sum() / 60:6.1f} h"
          f"{unestimated(int(missing['est_min'].isna().sum()))} ({int(table['done'].sum())} of {len(table)} finished)")
    bases = missing_dial_bases(plan)
    if bases:
        print("dial bases neither built nor shipped (built by their first run, not in the estimates): " + ", ".join(bases))
    print("not a run: the main tables' base row is the untrained base's evaluation (`mrtpo eval --base --task <task>`, "
          "kept under results/base/; the pages evaluate a missing one: 25-97 s for the tiny tasks' committed ones)")
    if missing["est_min"].isna().any():
        print("no estimate for:", ", ".join(missing[missing["est_min"].isna()]["run"]))


if __name__ == "__main__":
    main()
