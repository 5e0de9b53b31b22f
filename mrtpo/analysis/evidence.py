"""Seeds and paired comparisons of arms over run folders, with verdicts: what the result pages compute from the runs
(the statistics themselves are ``mrtpo.analysis.stats``; reading runs and the paper's numbers is ``mrtpo.analysis.report``)."""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from mrtpo.runs import runner
from mrtpo.analysis.report import (
    PAPER_METHOD,
    answer_metric,
    beside_paper,
    components,
    evaluations,
    grid,
    metrics,
    number,
    paper,
    summary,
)
from mrtpo.runs.results import Run, run_folders


def arm_settings(arm: str) -> tuple[str, dict]:
    """(method, run overrides) of an arm as the result pages name it: a method as the runner spells it
    (``"gdpo+saw"``), ``"beta <b>"`` for MRTPO at that beta, or ``"<method>-<set>_rewards"`` for a method on the
    task's reward set ``<set>`` (``"mrtpo-sub_rewards"``, the name ``RunConfig.label`` gives such a run)."""
    if arm.startswith("beta "):
        return "mrtpo", {"mrtpo_beta": float(arm.split()[1])}
    if arm.endswith("_rewards"):
        method, reward_set = arm.removesuffix("_rewards").rsplit("-", 1)
        return method, {"rewards": reward_set}
    return arm, {}


def finished(task: str, arm: str, model: str = "tiny", steps: int | None = None, **overrides) -> list[Run]:
    """Every finished run of ``arm`` (:func:`arm_settings`) on ``task`` with these settings, one per seed found;
    never trains."""
    method, settings = arm_settings(arm)
    overrides = {**settings, **overrides}
    label = runner.resolve(task, method, model, steps=steps, **overrides).label
    seeds = sorted({json.loads((p / "config.json").read_text())["config"]["seed"]
                    for p in run_folders(task) if p.parent.name == model and p.name.startswith(f"{label}-")})
    return [r for s in seeds if (r := runner.find(task, method, model, seed=s, steps=steps, **overrides)) is not None]


def arm_runs(task: str, arms, model: str = "tiny", seeds=(0,), steps: int | None = None, force: bool = False,
             processes: int = 1, **overrides) -> dict[str, list[Run]]:
    """Per arm (:func:`arm_settings`), its runs in seed order: the ``seeds`` asked for (trained or reused,
    :func:`grid`; a missing one on ``processes`` processes, ``runner.run``) and every other seed already finished
    with the same settings. Tables show every seed present; nothing else is trained."""
    out = {}
    for arm in arms:
        method, settings = arm_settings(arm)
        asked = grid(task, [method], model, seeds, steps, force, processes=processes, **settings, **overrides)
        by_seed = {r.seed: r for r in finished(task, arm, model, steps, **overrides) + asked}
        out[arm] = [by_seed[s] for s in sorted(by_seed)]
    return out


def seed_values(runs: list[Run], metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1") -> dict[int, float]:
    """{seed: the run's held-out ``metric``} over these runs of one arm."""
    sel = evaluations(runs)
    sel = sel[(sel.metric == metric) & (sel.benchmark == benchmark) & (sel.decoding == decoding)]
    return {int(seed): float(value) for seed, value in zip(sel["seed"], sel["value"])}


def prompt_values(run: Run, metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1"):
    """(P, M) per-prompt values of ``metric``'s components (:func:`components`) in prompt order, or None for a
    run folder written without per-prompt evaluation (of this cell)."""
    per_prompt = run.eval_prompts
    if per_prompt is None:
        return None
    sel = per_prompt[(per_prompt.benchmark == benchmark) & (per_prompt.decoding == decoding)]
    parts = components(metric, sel.metric.unique())
    if not parts:
        return None
    return sel[sel.metric.isin(parts)].pivot(index="prompt", columns="metric", values="value")[parts].to_numpy(float)


def run_eval_se(run: Run, metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1") -> tuple[float, str]:
    """(evaluation s.e. of one run's ``metric``, how it was measured): the sampling of responses within the
    evaluation's prompts, the only evaluation noise that differs between runs scored on the same prompts. From its
    per-prompt values when the folder has them (``stats.within_prompt_se``, "within prompts"); otherwise the
    binomial s.e. over prompts x samples (``stats.binomial_se``, "binomial, upper bound": it adds the spread of the
    prompts' rates, which all runs share). Greedy decoding samples nothing: 0."""
    from mrtpo.analysis import stats

    cfg = run.settings
    samples = cfg["eval_samples"] if decoding == "temp1" else 1
    x = prompt_values(run, metric, benchmark, decoding)
    if x is not None:
        return stats.within_prompt_se(x, samples), "within prompts"
    if samples == 1:
        return 0.0, "within prompts"
    value = seed_values([run], metric, benchmark, decoding)[cfg["seed"]]
    return stats.binomial_se(value, samples * int(run.eval[benchmark]["n_prompts"])), "binomial, upper bound"


def compare(a: list[Run], b: list[Run], metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1",
            claimed: float | None = None, replicates: bool = False) -> dict:
    """Arm A against arm B on ``metric``: each arm's mean ± s.e. over its seeds, and A − B over the seeds both
    share with its 95% paired t interval over those seeds, the sd of the per-seed differences and the paired t-test's
    p (``stats.paired_difference``; per-prompt values where every shared run has them on the same prompts) and the
    verdict at 0.05 alone, outside any family (``verdict_table`` corrects for the book's), against the ``claimed``
    difference (``stats.verdict``; "inconclusive" with one shared seed, whose interval, if any, holds no
    seed-to-seed noise). ``replicates``: also bootstrap replicates of A − B (``stats.paired_difference``)."""
    from mrtpo.analysis import stats
    from mrtpo.runs.behaviour import check_current

    check_current(a + b)  # never pair a run of another code behaviour: StaleComparison names it
    va, vb = seed_values(a, metric, benchmark, decoding), seed_values(b, metric, benchmark, decoding)
    shared = sorted(set(va) & set(vb))
    ra = {r.seed: r for r in a}
    rb = {r.seed: r for r in b}
    pa = [prompt_values(ra[s], metric, benchmark, decoding) for s in shared]
    pb = [prompt_values(rb[s], metric, benchmark, decoding) for s in shared]
    same_prompts = len({r.config["data"].get(benchmark) for r in [ra[s] for s in shared] + [rb[s] for s in shared]}) == 1
    if shared and same_prompts and all(x is not None for x in pa + pb) and len({x.shape for x in pa + pb}) == 1:
        diff = stats.paired_difference(np.stack(pa), np.stack(pb), replicates=replicates)
    else:
        diff = stats.paired_difference(np.array([va[s] for s in shared]), np.array([vb[s] for s in shared]),
                                       replicates=replicates)
    (ma, sa, _), (mb, sb, _) = stats.mean_se(list(va.values())), stats.mean_se(list(vb.values()))
    # one shared seed: an interval over prompts holds no seed-to-seed noise, the larger part at the tiny scale
    judged = stats.verdict(diff["lo"], diff["hi"], claimed) if len(shared) >= 2 else "inconclusive"
    return {"a_mean": ma, "a_se": sa, "a_seeds": sorted(va), "b_mean": mb, "b_se": sb, "b_seeds": sorted(vb),
            "shared_seeds": shared, **diff, "verdict": judged}


def interval_text(value: float, lo: float, hi: float, digits: int = 3, sign: str = "+") -> str:
    """``+0.030 [-0.050, +0.110]`` (``sign=""`` for a quantity that is not a difference); "[no interval]" where
    there is none."""
    if value != value:
        return "—"
    bounds = f"[{lo:{sign}.{digits}f}, {hi:{sign}.{digits}f}]" if lo == lo and hi == hi else "[no interval]"
    return f"{value:{sign}.{digits}f} {bounds}"


def seeds_text(seeds) -> str:
    return ", ".join(map(str, seeds)) if len(seeds) else "none"


def paper_gaps(name: str, better: str, worse: str, metric: str | None = None) -> dict[str, float]:
    """The paper's ``better`` − ``worse`` in points, per model (and metric) of ``results/paper/<name>.csv`` that
    reports both; ``better``/``worse`` are our method names (:data:`PAPER_METHOD`)."""
    df = paper(name)
    if metric is not None:
        df = df[df.metric == metric]
    better, worse = PAPER_METHOD.get(better, better), PAPER_METHOD.get(worse, worse)
    keys = [k for k in ("model", "metric") if k in df and df[k].nunique() > 1]
    gaps = {}
    for names, part in (df.groupby(keys, sort=False) if keys else [((), df)]):
        by = part.set_index("method")["score"]
        names = names if isinstance(names, tuple) else (names,)
        if better in by.index and worse in by.index:
            gaps[", ".join(map(str, names))] = float(by[better] - by[worse])
    return gaps


def paper_claim(name: str, better: str, worse: str, metric: str | None = None) -> tuple[str, float | None]:
    """(the paper's ``better`` − ``worse`` as text, the claimed difference on our 0–1 scale: the median of its
    gaps / 100, or None where the paper has no such comparison)."""
    gaps = {", ".join(part.split("-")[-1] if part.startswith("Qwen") else part for part in key.split(", ")): g
            for key, g in paper_gaps(name, better, worse, metric).items()}  # "Qwen2.5-Coder-7B" -> "7B"
    if not gaps:
        return "not in the paper", None
    if len(gaps) > 2:
        text = f"{min(gaps.values()):+.2f} to {max(gaps.values()):+.2f} points ({len(gaps)} models x benchmarks)"
    else:
        text = "; ".join(f"{g:+.2f}" + (f" ({k})" if k else "") for k, g in gaps.items()) + " points"
    return text, float(np.median(list(gaps.values()))) / 100


def verdict_table(arms: dict[str, list[Run]], pairs, metric: str, paper_name: str | None = None,
                  paper_metric: str | None = None, benchmark: str = "synthetic_test", decoding: str = "temp1",
                  adjusted: pd.DataFrame | None = None) -> pd.DataFrame:
    """The page's opening table: per pair (A, B) of ``pairs`` whose arms both have runs, the paper's A − B
    (``paper_claim`` of ``results/paper/<paper_name>.csv``), ours A − B with its 95% paired t interval over the
    shared seeds (:func:`compare`), those seeds, the paired t-test's raw p, its p adjusted over the book's family of
    comparisons (``adjusted``: ``multiplicity.adjusted``, indexed by "A − B" with "p (Holm)" and "detectable in the
    family"; NaN where not given) and the verdict (``stats.verdict``): a gap only when the interval excludes 0 and
    the adjusted p is below 0.05; "not reproduced" when the interval excludes the paper's size; otherwise
    "inconclusive: not distinguishable at this power" with the difference detectable with 80% power at those seeds
    (in the family where it is given, at 0.05 alone otherwise; ``significance.not_distinguishable``);
    "inconclusive" with one shared seed."""
    from mrtpo.analysis import significance, stats

    rows = []
    for a, b in pairs:
        if not arms.get(a) or not arms.get(b):
            continue
        name = f"{a} − {b}"
        text, claimed = paper_claim(paper_name, a, b, paper_metric) if paper_name else ("—", None)
        c = compare(arms[a], arms[b], metric, benchmark, decoding, claimed)
        held = adjusted is not None and name in adjusted.index
        p_adjusted = adjusted.at[name, "p (Holm)"] if held else math.nan
        judged = "inconclusive"
        if len(c["shared_seeds"]) >= 2:
            judged = stats.verdict(c["lo"], c["hi"], claimed, p_adjusted=p_adjusted if adjusted is not None else None)
            if judged == "inconclusive":
                detectable = (adjusted.at[name, "detectable in the family"] if held else
                              significance.detectable_difference(c["sd"], len(c["shared_seeds"])))
                judged += ": " + significance.not_distinguishable(detectable)
        rows.append({"comparison": name, "paper": text, "ours (95% interval)": interval_text(c["diff"], c["lo"], c["hi"]),
                     "shared seeds": seeds_text(c["shared_seeds"]), "interval over": c["resampled"],
                     "p (paired t)": c["p"], "p (Holm)": p_adjusted, "verdict": judged,
                     "diff": c["diff"], "lo": c["lo"], "hi": c["hi"]})
    return pd.DataFrame(rows, columns=["comparison", "paper", "ours (95% interval)", "shared seeds", "interval over",
                                       "p (paired t)", "p (Holm)", "verdict", "diff", "lo", "hi"])


def verdict_sentence(table: pd.DataFrame) -> str:
    """One sentence from a :func:`verdict_table`: which comparisons show a gap (interval excluding 0 and, where the
    table has them, Holm-adjusted p below 0.05 over the book's family) and which not."""
    if table.empty:
        return "No comparison has runs of both arms."
    gaps = table[table["verdict"].isin(["reproduced", "weaker than claimed", "contradicted"])]
    rule = ("95% interval excluding 0 and Holm-adjusted p below 0.05 over the book's family"
            if table["p (Holm)"].notna().any() else "95% interval excluding 0")
    parts = [f"{len(gaps)} of {len(table)} comparisons show a gap ({rule})"
             + (": " + "; ".join(f"{r.comparison} {r.diff:+.3f} ({r.verdict})" for r in gaps.itertuples()) if len(gaps) else "")]
    raw = table[(table["p (paired t)"] < 0.05) & ~table.index.isin(gaps.index)]
    if len(raw):
        parts.append(f"{len(raw)} more have a raw p below 0.05 that the family's correction does not keep "
                     f"({', '.join(raw['comparison'])})")
    one = table[table["interval over"].str.startswith(("none", "prompts only"))]
    if len(one):
        parts.append(f"{len(one)} rest on one shared seed ({', '.join(one['comparison'])}), so their interval, if any, "
                     "holds no seed-to-seed noise")
    return "; ".join(parts) + "."


class Comparisons(NamedTuple):
    """One verdict table of the book: the page (notebook) that shows it, the task, its (A, B) pairs (arms as
    :func:`arm_settings` names them), the paper's table that holds their claims (``results/paper/<paper_table>.csv``;
    None where the paper reports no such differences on this task) and that table's metric (None where it has one)."""

    page: str
    task: str
    pairs: tuple[tuple[str, str], ...]
    paper_table: str | None = None
    paper_metric: str | None = None

    @property
    def arms(self) -> list[str]:
        """The arms of the pairs, each once, in the order they first appear."""
        return list(dict.fromkeys(x for pair in self.pairs for x in pair))


#: the main tables' comparisons, the same on every task: a page shows those whose arms both have runs
MAIN_PAIRS = (("mrtpo", "gdpo"), ("mrtpo", "grpo"), ("gdpo", "grpo"), ("mrtpo", "opsd"), ("mrtpo", "entropy"))
#: the ablation's comparisons (Table 5), on every task
ABLATION_PAIRS = (("mrtpo", "gdpo"), ("mrtpo", "joint"), ("mrtpo", "shuffled"), ("mrtpo", "entropy"), ("mrtpo", "gdpo+saw"),
                  ("mrtpo+saw", "mrtpo"), ("joint", "gdpo"), ("entropy", "gdpo"), ("gdpo+saw", "gdpo"))
#: the ablation's sub-verifier arms (text-to-SQL's reward set "sub": the execution reward split by check), against
#: each other and against the same method on the default rewards
SUB_REWARD_PAIRS = (("mrtpo-sub_rewards", "gdpo-sub_rewards"), ("gdpo-sub_rewards", "gdpo"), ("mrtpo-sub_rewards", "mrtpo"))
#: MRTPO's betas of the beta sweep (Tables 6–7): the paper's range, and 1.0 to show the plateau (PAPER.md §6.2)
BETAS = (0.25, 0.5, 0.75, 1.0)
BETA_PAIRS = tuple((f"beta {b:g}", f"beta {a:g}") for a, b in zip(BETAS, BETAS[1:]))
#: the book's verdict tables on the held-out answer metric, one per page and task the issue asks for (a task a page
#: does not show by default has its table here too, so the reproduce page's power table says it has no runs)
BOOK_COMPARISONS = (
    Comparisons("table1_text_to_sql", "sql", MAIN_PAIRS, "table1_text_to_sql", "six-benchmark avg execution accuracy"),
    Comparisons("table2_instruction_following", "if", MAIN_PAIRS, "table2_instruction_following"),
    Comparisons("table3_tool_calling", "tool", MAIN_PAIRS, "table3_tool_calling"),
    Comparisons("table5_ablation", "sql", ABLATION_PAIRS + SUB_REWARD_PAIRS, "table5_ablation"),
    Comparisons("table5_ablation", "tool", ABLATION_PAIRS),
    Comparisons("table5_ablation", "if", ABLATION_PAIRS),
    Comparisons("table6_beta_sweep", "sql", BETA_PAIRS),
    Comparisons("table6_beta_sweep", "tool", BETA_PAIRS),
    Comparisons("table6_beta_sweep", "if", BETA_PAIRS),
)


def book_comparisons(page: str, task: str) -> Comparisons:
    """The verdict table of :data:`BOOK_COMPARISONS` that ``page`` shows for ``task``."""
    for c in BOOK_COMPARISONS:
        if (c.page, c.task) == (page, task):
            return c
    shown = ", ".join(c.task for c in BOOK_COMPARISONS if c.page == page)
    raise ValueError(f"{page} has no verdict table for task {task!r}; it has one for: {shown or 'no task'} "
                     "(add a Comparisons entry to mrtpo.analysis.evidence.BOOK_COMPARISONS)")


def extra_forwards(m: pd.DataFrame) -> pd.Series:
    """Per method, the forwards a step adds per sampled response beyond GDPO's: the replay's
    (``mrtpo/replay_forwards_per_response``) plus OPSD's teacher (``opsd/teacher_forwards_per_response``), mean
    over steps; 0 for a method that logs neither (GRPO, GDPO, the entropy arm: no extra forward)."""
    cols = [c for c in ("mrtpo/replay_forwards_per_response", "opsd/teacher_forwards_per_response") if c in m]
    return m.groupby("method", sort=False)[cols].mean().fillna(0.0).sum(axis=1) if cols else \
        pd.Series(0.0, index=m["method"].unique())


def cost_gain(arms: dict[str, list[Run]], metric: str, paper_name: str | None = None, baseline: str = "gdpo",
              benchmark: str = "synthetic_test", decoding: str = "temp1") -> pd.DataFrame:
    """The ablation's cost beside its gain, one row per method of ``arms`` with runs: the seeds, held-out
    ``metric`` (mean ± s.e. over seeds), the paper's number (``results/paper/<paper_name>.csv``), the gain over
    ``baseline`` with its 95% interval (:func:`compare`), the forwards a step adds per sampled response
    (:func:`extra_forwards`) and the median step time relative to the baseline's; no runs: an empty table."""
    arms = {m: runs for m, runs in arms.items() if runs}
    if not arms:
        return pd.DataFrame(index=pd.Index([], name="method"))
    runs = [r for rs in arms.values() for r in rs]
    table = summary(evaluations(runs), metric, benchmark, decoding)
    steps_df = metrics(runs)
    forwards = extra_forwards(steps_df)
    step_s = steps_df.groupby("method")["step_time"].median()
    view = beside_paper(table, paper(paper_name) if paper_name else pd.DataFrame(columns=["model", "method", "score"]),
                        {f"ours: held-out {metric} (± s.e.)": ("mean", "se")})
    view.insert(1, "seed ids", [seeds_text(sorted(seed_values(arms[m], metric, benchmark, decoding))) for m in table["method"]])
    gains = {m: compare(arms[m], arms[baseline], metric, benchmark, decoding) for m in table["method"] if m != baseline}
    view[f"gain over {baseline} (95% interval)"] = [interval_text(gains[m]["diff"], gains[m]["lo"], gains[m]["hi"])
                                                    if m in gains else "—" for m in table["method"]]
    view["extra forwards per response"] = [number(forwards.get(m), 2) for m in table["method"]]
    view[f"step time / {baseline}'s"] = [number(step_s[m] / step_s[baseline], 2) for m in table["method"]]
    return view


# ----------------------------------------------------------------------------------------------------
# the main tables


def main_view(table: pd.DataFrame, paper_rows: pd.DataFrame) -> pd.DataFrame:
    """A main table as its page shows it: per method, the seeds, ours (held-out answer metric at temperature 1,
    ± s.e. over seeds), the evaluation's own s.e., and the paper's ``paper_rows`` beside them."""
    view = beside_paper(table, paper_rows, {"ours: held-out, temperature 1 (± s.e. over seeds)": ("temp1_mean", "temp1_se")})
    view.insert(1, "seed ids", table["seed ids"].to_numpy())
    view.insert(3, "evaluation s.e.", [number(se) for se in table["temp1_eval_se"]])
    return view


def main_table(task: str, model: str, seeds, steps=None, force: bool = False, methods=("grpo", "gdpo", "mrtpo"),
               dial: float | None = None, processes: int = 1):
    """Main-table runs of one task: (table, evaluations, figure, arms). The table has a first row "base" (the
    untrained base policy, :func:`mrtpo.runs.runner.base_evaluation`: one evaluation, so no spread over seeds) and one row
    per method with the held-out answer metric at temperature 1 (mean, std and s.e. over every seed present, the
    seeds) and greedy, and the evaluation's own s.e. (:func:`run_eval_se`, mean over the method's runs); ``arms``
    maps each method to its runs (:func:`arm_runs`), for :func:`verdict_table`. ``dial``: every run starts from the
    testbed's dial base at that setting (``RunConfig.dial``) instead of the default base; ``processes``: as
    :func:`arm_runs`."""
    from mrtpo.analysis import plots

    on_dial = {} if dial is None else {"dial": dial}
    arms = arm_runs(task, methods, model, seeds, steps, force, processes, **on_dial)
    base = runner.base_evaluation(task, model, **on_dial)
    evals = evaluations([base] + [r for runs in arms.values() for r in runs])
    metric = answer_metric(task)
    table = summary(evals, metric).rename(columns={"mean": "temp1_mean", "std": "temp1_std", "se": "temp1_se"})
    greedy = summary(evals, metric, decoding="greedy")[["method", "mean"]].rename(columns={"mean": "greedy"})
    order = [m for m in ["base", *methods] if m in set(table["method"])]  # derived metrics come back sorted by name
    table = table.merge(greedy, on="method").set_index("method").loc[order].reset_index()
    rows = {"base": [base], **arms}
    table["seed ids"] = ["untrained" if m == "base" else seeds_text(sorted(seed_values(rows[m], metric)))
                         for m in table["method"]]
    table["temp1_eval_se"] = [float(np.mean([run_eval_se(r, metric)[0] for r in rows[m]])) for m in table["method"]]
    sel = evals[(evals.metric == metric) & (evals.benchmark == "synthetic_test") & (evals.decoding == "temp1")]
    title = f"{task}, {model}" + ("" if dial is None else f", dial {dial:g}")
    fig = plots.method_bars(sel, "method", "value", ylabel=f"held-out {metric} (temperature 1)", title=title)
    plots.save(fig, f"main_table_{task}_{model}" + ("" if dial is None else f"_dial{dial:g}"))
    return table, evals, fig, arms
