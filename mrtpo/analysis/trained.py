"""A real instruct model, trained (issue 40): the arms trained on it beside its untrained scores, and their paired
differences on the real benchmarks.

Reads finished run folders only (:func:`mrtpo.analysis.evidence.finished`; nothing is trained or converted). A run
``mrtpo train --task if --method M --model smollm2 --seed S`` is evaluated greedy on the first prompts of IFEval and
IFBench (the registry's ``eval_limit``) with the official checkers, so each run has one value per benchmark and
accuracy, and the arms are paired by seed:

* the scores: per arm, mean ± s.e. over its seeds of prompt- and instruction-level strict accuracy per benchmark,
  and the change from the untrained model (:func:`mrtpo.analysis.untrained.base_scores`, one greedy evaluation of
  the same prompts, so it has no seed spread): mean of ``run − base`` over seeds with its 95% t interval;
* the verdicts: each pair of :data:`PAIRS` on each benchmark's prompt-level strict accuracy, A − B over the shared
  seeds with its 95% paired t interval and p, Holm's correction over this section's tests (a family of its own:
  another model and other benchmarks than the book's tiny family), a gap only when the adjusted p is below 0.05.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mrtpo.analysis import claims, plots, significance, stats
from mrtpo.analysis.evidence import compare, finished, interval_text, seeds_text
from mrtpo.analysis.multiplicity import family_table
from mrtpo.analysis.report import evaluations, metrics
from mrtpo.analysis.untrained import base_scores
from mrtpo.files.paths import DataNotAvailable
from mrtpo.models.spec import ModelNotAvailable
from mrtpo.runs import runner
from mrtpo.runs.results import Run

#: the arms trained on the real model: the baseline, the method, the positive control (perfect placement) and the
#: entropy placement control
ARMS = ("gdpo", "mrtpo", "region", "entropy")
#: the differences tested: the paper's claim, what perfect placement buys, what uncertainty-weighted placement buys
PAIRS = (("mrtpo", "gdpo"), ("region", "gdpo"), ("entropy", "gdpo"))
#: the accuracies shown per benchmark; the first is the one tested
ACCURACIES = ("prompt_strict", "inst_strict")
DECODING = "greedy"


def trained_arms(task: str, model: str, arms=ARMS) -> dict[str, list[Run]]:
    """Per arm, its finished runs of ``model`` on ``task`` in seed order (the registry's settings for the model)."""
    return {arm: finished(task, arm, model) for arm in arms}


def benchmarks(arms: dict[str, list[Run]]) -> list[str]:
    """The benchmarks the runs were evaluated on, in first-seen order."""
    rows = evaluations([r for runs in arms.values() for r in runs])
    return list(dict.fromkeys(rows.loc[rows.decoding == DECODING, "benchmark"]))


def score_table(arms: dict[str, list[Run]], base: pd.DataFrame | None) -> pd.DataFrame:
    """One row per arm with runs (``base`` first, from :func:`mrtpo.analysis.untrained.base_scores` rows) and one
    column per benchmark x accuracy: ``mean ± s.e.`` over the arm's seeds ("—" for the s.e. of one seed), then the
    change from the base on the tested accuracy, ``+d [lo, hi]`` (mean over seeds of run − base, 95% t interval over
    seeds; no interval with one seed)."""
    runs = {arm: r for arm, r in arms.items() if r}
    base_value = base_values(base)
    shown = list(dict.fromkeys([*benchmarks(runs), *(b for b, _ in base_value)]))
    evals = evaluations([r for rs in runs.values() for r in rs])
    evals = evals[evals.decoding == DECODING]
    rows = []
    if base_value:
        rows.append({"arm": "base (untrained)", "seeds": "—",
                     **{f"{b} {m}": f"{base_value[b, m]:.3f}" for b in shown for m in ACCURACIES if (b, m) in base_value}})
    for arm, rs in runs.items():
        row = {"arm": arm, "seeds": seeds_text(sorted(r.seed for r in rs))}
        mine = evals[evals.run.isin([r.path.name for r in rs])]
        for b in shown:
            for m in ACCURACIES:
                values = mine.loc[(mine.benchmark == b) & (mine.metric == m), "value"].to_numpy(float)
                mean, se, _ = stats.mean_se(values)
                row[f"{b} {m}"] = f"{mean:.3f} ± {'—' if se != se else f'{se:.3f}'}"
                if m == ACCURACIES[0] and (b, m) in base_value:
                    row[f"{b} change from base"] = interval_text(*change_from_base(values, base_value[b, m]))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(dict.fromkeys(["arm", "seeds", *(k for r in rows for k in r)]))).set_index("arm")


def change_from_base(values, base: float) -> tuple[float, float, float]:
    """(mean of ``values − base``, its 95% t interval over the values, ``stats.t_interval``): the base is one
    evaluation of the same prompts, so all the spread is the seeds'; NaN bounds below two values."""
    d = np.asarray(values, dtype=float) - base
    if len(d) < 2:
        return float(d.mean()) if len(d) else math.nan, math.nan, math.nan
    return (float(d.mean()), *stats.t_interval(d))


def base_values(base: pd.DataFrame | None) -> dict[tuple[str, str], float]:
    """{(benchmark, metric): the untrained model's greedy value} of :func:`mrtpo.analysis.untrained.base_scores`
    rows (empty without them)."""
    if base is None:
        return {}
    base = base[base.decoding == DECODING]
    return dict(zip(zip(base.benchmark, base.metric), base.value))


def verdicts(arms: dict[str, list[Run]], pairs=PAIRS) -> pd.DataFrame:
    """Per pair of ``pairs`` whose arms both have runs and per benchmark: A − B on prompt-level strict accuracy over
    the shared seeds (:func:`mrtpo.analysis.evidence.compare`, greedy) with its 95% paired t interval and p, Holm over
    these tests (:func:`mrtpo.analysis.multiplicity.family_table`), the verdict: "gap" when the Holm-adjusted p is
    below 0.05 (the interval then excludes 0), otherwise "inconclusive": with one shared seed there is no test, with
    more the difference the seeds would detect with 80% power at the family's level."""
    tested = []
    for a, b in pairs:
        if not arms.get(a) or not arms.get(b):
            continue
        for bench in benchmarks({a: arms[a], b: arms[b]}):
            result = compare(arms[a], arms[b], ACCURACIES[0], bench, DECODING)
            tested.append({"task": bench, "comparison": f"{a} − {b}", "pages": [], "result": result})
    family = family_table(tested).rename(columns={"task": "benchmark"})
    family["ours (95% interval)"] = [interval_text(d, lo, hi) for d, lo, hi in zip(family["diff"], family["lo"], family["hi"])]
    family["verdict"] = ["inconclusive: one shared seed, no test" if n < 2 else "gap" if gap else
                         "inconclusive: " + significance.not_distinguishable(detectable)
                         for n, gap, detectable in zip(family["shared seeds"], family["gap"],
                                                       family["detectable in the family"])]
    return family[["comparison", "benchmark", "shared seeds", "ours (95% interval)", "p (paired t)", "p (Holm)",
                   "verdict", "diff", "lo", "hi"]]


def sentence(task: str, model: str, arms: dict[str, list[Run]], table: pd.DataFrame, seeds_planned) -> str:
    """Which runs exist, which of ``seeds_planned`` are still to train, and whether MRTPO beat GDPO: only where a
    benchmark's MRTPO − GDPO is a gap (:func:`verdicts`), never from an interval that holds 0."""
    have = {arm: sorted(r.seed for r in rs) for arm, rs in arms.items()}
    missing = {arm: [s for s in seeds_planned if s not in got] for arm, got in have.items()}
    words = [f"`{model}` on `{task}`: finished runs " + "; ".join(f"{arm} seeds {seeds_text(got)}" for arm, got in have.items())
             + "."]
    todo = {arm: seeds for arm, seeds in missing.items() if seeds}
    if todo:
        words.append(f"Still to train ({sum(map(len, todo.values()))} runs): "
                     + "; ".join(f"{arm} seeds {seeds_text(seeds)}" for arm, seeds in todo.items())
                     + f" (each `mrtpo train --task {task} --method <arm> --model {model} --seed <seed>`; "
                     "`benchmarks/book_runs.sh --section 'real model'` trains them one after another, restartable).")
    mrtpo_gdpo = table[table.comparison == "mrtpo − gdpo"]
    if mrtpo_gdpo.empty:
        words.append("Whether MRTPO beats GDPO on this model: not known, no seed has runs of both.")
    else:
        gap = mrtpo_gdpo.verdict == "gap"
        ahead = mrtpo_gdpo[gap & (mrtpo_gdpo["diff"] > 0)].benchmark.tolist()
        behind = mrtpo_gdpo[gap & (mrtpo_gdpo["diff"] < 0)].benchmark.tolist()
        neither = mrtpo_gdpo[~gap].benchmark.tolist()
        each = "; ".join(f"{r['benchmark']} {r['ours (95% interval)']} over {r['shared seeds']} seed(s), {r['verdict']}"
                         for _, r in mrtpo_gdpo.iterrows())
        # a winner is named per benchmark: a gap on one says nothing about another whose interval holds 0
        parts = ([f"ahead of GDPO on {' and '.join(ahead)}"] if ahead else []) + \
                ([f"behind {'it' if ahead else 'GDPO'} on {' and '.join(behind)}"] if behind else []) + \
                ([f"not distinguishable from it on {' and '.join(neither)}"] if neither else [])
        words.append(("Whether MRTPO beats GDPO on this model: no evidence either way" if not (ahead or behind) else
                      "MRTPO beats GDPO on this model, on every benchmark" if not (behind or neither) else
                      "MRTPO is " + " and ".join(parts))
                     + f" (MRTPO − GDPO, prompt-level strict: {each}).")
    return " ".join(words)


def change_figure(arms: dict[str, list[Run]], base: pd.DataFrame | None, title: str = ""):
    """Each run's change from the untrained model on the tested accuracy, per arm and benchmark (bars: mean ± sd
    over seeds, a dot per seed; a dashed line at no change); a placeholder figure before any run or base."""
    evals = evaluations([r for rs in arms.values() for r in rs])
    base_value = base_values(base)
    arm_of = {r.path.name: arm for arm, rs in arms.items() for r in rs}
    rows = [{"arm": arm_of[e.run], "benchmark": e.benchmark, "change": e.value - base_value[e.benchmark, e.metric]}
            for e in evals[(evals.decoding == DECODING) & (evals.metric == ACCURACIES[0])].itertuples()
            if (e.benchmark, e.metric) in base_value]
    fig = plots.method_bars(pd.DataFrame(rows), "arm", "change", hue="benchmark",
                            ylabel=f"{ACCURACIES[0]} − untrained ({DECODING})", title=title)
    if rows:
        fig.axes[0].axhline(0, color="grey", linestyle="--", linewidth=1)
    return fig


def training_figure(arms: dict[str, list[Run]], title: str = ""):
    """Each arm's training reward per step (``reward``: the sum of a prompt's reward functions, mean over the step's
    batch of training prompts), as a trailing mean over a tenth of the steps like Fig. 5's, mean over seeds with a
    band of ± one sd: whether the policy moved on what it was trained on, which the held-out scores then test; a
    placeholder figure before any run."""
    m = metrics([r for rs in arms.values() for r in rs])
    if len(m):
        m = m.assign(smoothed=claims.smoothed(m, "reward"))
    return plots.curves(m, "smoothed", ylabel=f"training reward ({claims.smoothing_window(m)}-step mean)", title=title)


def summary(task: str, model: str):
    """What the page shows of the trained real model: (:func:`score_table`, :func:`verdicts`, :func:`change_figure`
    saved as ``trained_<task>_<model>``, :func:`training_figure` saved as ``trained_reward_<task>_<model>``,
    :func:`sentence` against the seeds the model's registry entry plans).
    Where the model is not installed, or the benchmark files are not on this machine, its runs cannot be looked up
    (a run's identity holds its weights' and its data's content): the untrained scores alone, and the message on
    how to provide what is missing."""
    base = base_scores(task, model)
    try:
        planned = runner.resolve(task, ARMS[0], model).spec.seeds
        arms = trained_arms(task, model)
    except (ModelNotAvailable, DataNotAvailable) as exc:
        return (score_table({}, base), verdicts({}), change_figure({}, base), training_figure({}),
                f"No trained run of `{model}` can be looked up here: {exc}")
    table = verdicts(arms)
    fig = change_figure(arms, base, title=f"{task}, {model}: trained against untrained")
    plots.save(fig, f"trained_{task}_{model}")
    curves = training_figure(arms, title=f"{task}, {model}: training reward")
    plots.save(curves, f"trained_reward_{task}_{model}")
    return score_table(arms, base), table, fig, curves, sentence(task, model, arms, table, planned)
