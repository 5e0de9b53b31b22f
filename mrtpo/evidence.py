"""Seeds, paired comparisons, verdicts and power over run folders: what the result pages compute from the runs
(the statistics themselves are ``mrtpo.stats``; reading runs and the paper's numbers is ``mrtpo.report``)."""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from . import runs as runner
from .report import (PAPER_METHOD, answer_metric, beside_paper, components, estimate, evaluations, first_step_reaching,
                     grid, localisation, metrics, number, paper, summary)
from .results import Run, run_folders


def finished(task: str, method: str, model: str = "tiny", steps: int | None = None, **overrides) -> list[Run]:
    """Every finished run of ``method`` on ``task`` with these settings, one per seed found; never trains."""
    label = runner.resolve(task, method, model, steps=steps, **overrides).label
    seeds = sorted({json.loads((p / "config.json").read_text())["config"]["seed"]
                    for p in run_folders(task) if p.parent.name == model and p.name.startswith(f"{label}-")})
    return [r for s in seeds if (r := runner.find(task, method, model, seed=s, steps=steps, **overrides)) is not None]


def arm_runs(task: str, methods, model: str = "tiny", seeds=(0,), steps: int | None = None, force: bool = False,
             **overrides) -> dict[str, list[Run]]:
    """Per method, its runs in seed order: the ``seeds`` asked for (trained or reused, :func:`grid`) and every other
    seed already finished with the same settings. Tables show every seed present; nothing else is trained."""
    out = {}
    for method in methods:
        asked = grid(task, [method], model, seeds, steps, force, **overrides)
        by_seed = {r.config["config"]["seed"]: r for r in finished(task, method, model, steps, **overrides) + asked}
        out[method] = [by_seed[s] for s in sorted(by_seed)]
    return out


def seed_values(runs: list[Run], metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1") -> dict[int, float]:
    """{seed: the run's held-out ``metric``} over these runs of one arm."""
    sel = evaluations(runs)
    sel = sel[(sel.metric == metric) & (sel.benchmark == benchmark) & (sel.decoding == decoding)]
    return {int(seed): float(value) for seed, value in zip(sel["seed"], sel["value"])}


def prompt_values(run: Run, metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1"):
    """(P, M) per-prompt values of ``metric``'s components (:func:`components`) in prompt order, or None for a
    run folder written without per-prompt evaluation."""
    per_prompt = run.eval_prompts
    if per_prompt is None:
        return None
    sel = per_prompt[(per_prompt.benchmark == benchmark) & (per_prompt.decoding == decoding)]
    parts = components(metric, sel.metric.unique())
    return sel[sel.metric.isin(parts)].pivot(index="prompt", columns="metric", values="value")[parts].to_numpy(float)


def run_eval_se(run: Run, metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1") -> tuple[float, str]:
    """(evaluation s.e. of one run's ``metric``, how it was measured): from its evaluation prompts
    (``stats.evaluation_se``, a bootstrap over prompts) when the folder has them; otherwise the binomial s.e. over
    prompts x samples (``stats.binomial_se``), a lower bound since samples of one prompt are correlated."""
    from . import stats

    x = prompt_values(run, metric, benchmark, decoding)
    if x is not None:
        return stats.evaluation_se(x), "prompts"
    cfg = run.config["config"]
    value = seed_values([run], metric, benchmark, decoding)[cfg["seed"]]
    draws = (cfg["eval_samples"] if decoding == "temp1" else 1) * int(run.eval[benchmark]["n_prompts"])
    return stats.binomial_se(value, draws), "binomial"


def compare(a: list[Run], b: list[Run], metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1",
            claimed: float | None = None) -> dict:
    """Arm A against arm B on ``metric``: each arm's mean ± s.e. over its seeds, and A − B over the seeds both
    share with its 95% paired-bootstrap interval (``stats.paired_difference``: over seeds and evaluation prompts
    when every shared run has per-prompt evaluation on the same prompts, over seeds only otherwise) and the
    verdict against the ``claimed`` difference (``stats.verdict``; "inconclusive" with one shared seed, whose
    interval, if any, holds no seed-to-seed noise)."""
    from . import stats

    va, vb = seed_values(a, metric, benchmark, decoding), seed_values(b, metric, benchmark, decoding)
    shared = sorted(set(va) & set(vb))
    ra = {r.config["config"]["seed"]: r for r in a}
    rb = {r.config["config"]["seed"]: r for r in b}
    pa = [prompt_values(ra[s], metric, benchmark, decoding) for s in shared]
    pb = [prompt_values(rb[s], metric, benchmark, decoding) for s in shared]
    same_prompts = len({r.config["data"].get(benchmark) for r in [ra[s] for s in shared] + [rb[s] for s in shared]}) == 1
    if shared and same_prompts and all(x is not None for x in pa + pb) and len({x.shape for x in pa + pb}) == 1:
        diff = stats.paired_difference(np.stack(pa), np.stack(pb))
    else:
        diff = stats.paired_difference(np.array([va[s] for s in shared]), np.array([vb[s] for s in shared]))
    (ma, sa, na), (mb, sb, nb) = stats.mean_se(list(va.values())), stats.mean_se(list(vb.values()))
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
                  paper_metric: str | None = None, benchmark: str = "synthetic_test", decoding: str = "temp1") -> pd.DataFrame:
    """The page's opening table: per pair (A, B) of ``pairs`` whose arms both have runs, the paper's A − B
    (``paper_claim`` of ``results/paper/<paper_name>.csv``), ours A − B with its 95% interval over the shared seeds,
    those seeds, what the interval resamples, and the verdict (:func:`compare`: a gap only when the interval
    excludes 0; "not reproduced" when it holds 0 and excludes the paper's size; "inconclusive" otherwise and with
    one shared seed)."""
    rows = []
    for a, b in pairs:
        if not arms.get(a) or not arms.get(b):
            continue
        text, claimed = paper_claim(paper_name, a, b, paper_metric) if paper_name else ("—", None)
        c = compare(arms[a], arms[b], metric, benchmark, decoding, claimed)
        rows.append({"comparison": f"{a} − {b}", "paper": text, "ours (95% interval)": interval_text(c["diff"], c["lo"], c["hi"]),
                     "shared seeds": seeds_text(c["shared_seeds"]), "interval over": c["resampled"], "verdict": c["verdict"],
                     "diff": c["diff"], "lo": c["lo"], "hi": c["hi"]})
    return pd.DataFrame(rows, columns=["comparison", "paper", "ours (95% interval)", "shared seeds", "interval over",
                                       "verdict", "diff", "lo", "hi"])


def verdict_sentence(table: pd.DataFrame) -> str:
    """One sentence from a :func:`verdict_table`: which comparisons show a gap (interval excluding 0) and which not."""
    if table.empty:
        return "No comparison has runs of both arms."
    gaps = table[table["verdict"].isin(["reproduced", "weaker than claimed", "contradicted"])]
    parts = [f"{len(gaps)} of {len(table)} comparisons show a gap (95% interval excluding 0)"
             + (": " + "; ".join(f"{r.comparison} {r.diff:+.3f} ({r.verdict})" for r in gaps.itertuples()) if len(gaps) else "")]
    one = table[table["interval over"].str.startswith(("none", "prompts only"))]
    if len(one):
        parts.append(f"{len(one)} rest on one shared seed ({', '.join(one['comparison'])}), so their interval, if any, "
                     "holds no seed-to-seed noise")
    return "; ".join(parts) + "."


def power_table(arms: dict[str, list[Run]], pairs, metric: str, delta: float = 0.05, power: float = 0.8,
                benchmark: str = "synthetic_test", decoding: str = "temp1", at=(3, 5), pooled: float | None = None
                ) -> pd.DataFrame:
    """Per pair (A, B): the standard deviation of A − B over seeds (``stats.sd_of_differences``: paired from two
    shared seeds, otherwise from the arms' own spread, otherwise from ``pooled``, by default the spread pooled over
    every arm of ``arms`` with two seeds or more), the difference detectable with ``power`` (two-sided paired t-test, alpha
    0.05) at the seeds shared now and at ``at`` seeds, the power for ``delta`` at the seeds shared now
    (``stats.power``; NaN below two shared seeds: no paired test exists), and the seeds a difference of ``delta``
    needs (at least 3)."""
    from . import stats

    values = {m: seed_values(runs, metric, benchmark, decoding) for m, runs in arms.items() if runs}
    if pooled is None:
        pooled = stats.pooled_sd([v.values() for v in values.values()])
    rows = []
    for a, b in pairs:
        if a not in values or b not in values:
            continue
        sd, how = stats.sd_of_differences(values[a], values[b], fallback=pooled)
        shared = len(set(values[a]) & set(values[b]))
        need = stats.seeds_for_power(sd, delta, power)
        row = {"comparison": f"{a} − {b}", "sd of the difference": sd, "measured": how, "shared seeds": shared,
               f"power for {delta:g} now": stats.power(delta, sd, shared), "detectable now": stats.detectable_difference(sd, shared, power)}
        row.update({f"detectable at {n} seeds": stats.detectable_difference(sd, n, power) for n in at})
        row[f"seeds for {delta:g} at {power:.0%} power"] = max(3, need) if need is not None else None
        rows.append(row)
    return pd.DataFrame(rows)


def power_sentence(power: pd.DataFrame, delta: float = 0.05) -> str:
    """One sentence per row of a :func:`power_table`: the seeds ``delta`` needs, or why the power is unknown."""
    out = []
    for row in power.to_dict("records"):
        need = row.get(f"seeds for {delta:g} at 80% power")
        if need is None or need != need:
            out.append(f"{row['comparison']}: no arm has two seeds yet, so the seed-to-seed spread and the power are unknown.")
        else:
            out.append(f"{row['comparison']}: a difference of {delta:g} needs {int(need)} seeds per arm at 80% power "
                       f"(sd of the difference {row['sd of the difference']:.3f}, {row['measured']}); "
                       f"3 seeds detect {number(row['detectable at 3 seeds'])}.")
    return "\n".join(out)


class Comparisons(NamedTuple):
    """The comparisons of one page's verdict table: the task the page runs by default, its (A, B) pairs (an arm is
    a method, or ``"beta <b>"`` for MRTPO at that beta, as :func:`beta_arms` names it), the paper's table that
    holds their claims (``results/paper/<paper_table>.csv``; None where it reports no differences of methods) and
    that table's metric (None where it has one)."""

    task: str
    pairs: tuple[tuple[str, str], ...]
    paper_table: str | None = None
    paper_metric: str | None = None


MAIN_PAIRS = (("mrtpo", "gdpo"), ("mrtpo", "grpo"), ("gdpo", "grpo"))
#: MRTPO's betas of the beta sweep (Tables 6–7)
BETAS = (0.25, 0.5, 0.75)
#: the book's verdict tables on the held-out answer metric, keyed by page (notebook); the pages take their pairs
#: from here
BOOK_COMPARISONS = {
    "table1_text_to_sql": Comparisons("sql", MAIN_PAIRS + (("mrtpo", "opsd"), ("mrtpo", "entropy")), "table1_text_to_sql",
                                      "six-benchmark avg execution accuracy"),
    "table2_instruction_following": Comparisons("if", MAIN_PAIRS, "table2_instruction_following"),
    "table3_tool_calling": Comparisons("tool", MAIN_PAIRS, "table3_tool_calling"),
    "table5_ablation": Comparisons("sql", (("mrtpo", "gdpo"), ("mrtpo", "joint"), ("mrtpo", "shuffled"), ("mrtpo", "entropy"),
                                           ("mrtpo", "gdpo+saw"), ("mrtpo+saw", "mrtpo"), ("joint", "gdpo"),
                                           ("entropy", "gdpo"), ("gdpo+saw", "gdpo")), "table5_ablation"),
    "table6_beta_sweep": Comparisons("sql", tuple((f"beta {b:g}", f"beta {a:g}") for a, b in zip(BETAS, BETAS[1:]))),
}


def finished_arm(task: str, arm: str, model: str = "tiny") -> list[Run]:
    """:func:`finished` runs of one arm of :data:`BOOK_COMPARISONS` (``"beta 0.25"``: MRTPO at that beta)."""
    if arm.startswith("beta "):
        return finished(task, "mrtpo", model, mrtpo_beta=float(arm.split()[1]))
    return finished(task, arm, model)


def book_power(model: str = "tiny", delta: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """Every comparison of :data:`BOOK_COMPARISONS` over the finished runs of ``model`` (nothing is trained): its
    :func:`power_table` row (the sd of the difference, how it was measured, the shared seeds, the power for
    ``delta`` and the difference detectable with ``power`` at those seeds and at 3, the seeds ``delta`` needs), the power
    for the paper's difference on our scale (:func:`paper_claim`; NaN where the paper has none), and what the
    comparison cost: the summed training time of both arms' runs, every seed present (``summary.json``; a run
    shared by several comparisons is counted in each), and how many runs recorded it. A pair with an arm
    without runs gets a row saying so, with NaN numbers. Where neither arm has two seeds, the sd comes from the
    seed spread pooled over every arm of the task in the book (each set of runs once: MRTPO at beta 0.5 is the
    main tables' MRTPO)."""
    from . import stats

    task_arms = {}
    for c in BOOK_COMPARISONS.values():
        for arm in (x for pair in c.pairs for x in pair):
            if (c.task, arm) not in task_arms:
                task_arms[c.task, arm] = finished_arm(c.task, arm, model)
    pooled = {}
    for task in {t for t, _ in task_arms}:
        groups = {tuple(sorted(str(r.path) for r in runs)): seed_values(runs, answer_metric(task)).values()
                  for (t, _), runs in task_arms.items() if t == task and runs}
        pooled[task] = stats.pooled_sd(groups.values())
    rows = []
    for page, c in BOOK_COMPARISONS.items():
        arms = {arm: task_arms[c.task, arm] for arm in dict.fromkeys(x for pair in c.pairs for x in pair)}
        table = (power_table(arms, c.pairs, answer_metric(c.task), delta, power, pooled=pooled[c.task]).set_index("comparison")
                 if any(arms.values()) else pd.DataFrame())
        for a, b in c.pairs:
            name = f"{a} − {b}"
            runs = arms[a] + arms[b]
            times = [r.summary.get("train_runtime_s") for r in runs]
            times = [t for t in times if t is not None and t == t]
            row = {"page": page, "task": c.task, "comparison": name,
                   "seeds": f"{seeds_text(sorted(r.config['config']['seed'] for r in arms[a]))} / "
                            f"{seeds_text(sorted(r.config['config']['seed'] for r in arms[b]))}",
                   "train hours": sum(times) / 3600 if times else math.nan, "runs timed": f"{len(times)} of {len(runs)}"}
            if name in table.index:
                found = table.loc[name]
                claimed = paper_claim(c.paper_table, a, b, c.paper_metric)[1] if c.paper_table else None
                row.update({k: found[k] for k in ("shared seeds", "sd of the difference", "measured", f"power for {delta:g} now",
                                                  "detectable now", "detectable at 3 seeds",
                                                  f"seeds for {delta:g} at {power:.0%} power")})
                row["power for the paper's difference now"] = (stats.power(claimed, found["sd of the difference"], int(found["shared seeds"]))
                                                               if claimed is not None else math.nan)
            else:
                row.update({"shared seeds": 0, "measured": "no runs of " + " or ".join(x for x in (a, b) if not arms[x])})
            rows.append(row)
    return pd.DataFrame(rows, columns=["page", "task", "comparison", "seeds", "shared seeds", "sd of the difference", "measured",
                                       f"power for {delta:g} now", "power for the paper's difference now", "detectable now",
                                       "detectable at 3 seeds", f"seeds for {delta:g} at {power:.0%} power", "train hours",
                                       "runs timed"])


def book_power_sentence(table: pd.DataFrame, delta: float = 0.05) -> str:
    """What :func:`book_power` says in one paragraph: the comparisons with a paired test (two shared seeds or
    more), those with 80% power for ``delta``, the range of differences the book can detect, the comparisons
    without runs, and the summed cost."""
    if table.empty:
        return "The book has no comparison."
    tested = table[table["shared seeds"] >= 2]
    powered = tested[tested[f"power for {delta:g} now"] >= 0.8]
    parts = [f"Of the book's {len(table)} comparisons, {len(tested)} rest on two shared seeds or more (a paired test "
             f"exists) and {len(powered)} of those have 80% power for a difference of {delta:g}"]
    if len(tested):
        lo, hi = tested["detectable now"].idxmin(), tested["detectable now"].idxmax()
        parts.append(f"at the seeds they have, the smallest difference detectable with 80% power runs from "
                     f"{tested.at[lo, 'detectable now']:.3f} ({tested.at[lo, 'comparison']}, {tested.at[lo, 'page']}) to "
                     f"{tested.at[hi, 'detectable now']:.3f} ({tested.at[hi, 'comparison']}, {tested.at[hi, 'page']})")
    one = table[table["shared seeds"] == 1]
    if len(one):
        three = one["detectable at 3 seeds"].dropna()
        parts.append(f"{len(one)} rest on one shared seed, where no paired test exists and the power is not defined"
                     + (f" (at 3 seeds, the measured spreads would detect {three.min():.3f} to {three.max():.3f})" if len(three) else ""))
    missing = table[table["measured"].str.startswith("no runs")]
    if len(missing):
        parts.append(f"{len(missing)} have no runs yet ({', '.join(missing['comparison'] + ' on ' + missing['page'])})")
    parts.append(f"the comparisons' runs took {table['train hours'].sum():.1f} hours of training, counting a run "
                 "shared by several comparisons in each")
    return "; ".join(parts) + "."


def noise_table(arms: dict[str, list[Run]], metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1") -> pd.DataFrame:
    """Per arm: seeds, seed-to-seed std of the metric, the evaluation's own s.e. (:func:`run_eval_se`, mean over
    runs) and the seed component once the evaluation noise is taken out (``stats.noise_components``)."""
    from . import stats

    rows = []
    for method, runs in arms.items():
        if not runs:
            continue
        values = seed_values(runs, metric, benchmark, decoding)
        ses = [run_eval_se(r, metric, benchmark, decoding) for r in runs]
        noise = stats.noise_components(list(values.values()), [se for se, _ in ses])
        rows.append({"method": method, "seeds": seeds_text(sorted(values)), "seed std (observed)": noise["sd_observed"],
                     "evaluation s.e.": noise["eval_se"], "evaluation s.e. from": "/".join(sorted({h for _, h in ses})),
                     "seed std (evaluation noise removed)": noise["sd_seed"]})
    return pd.DataFrame(rows)


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
    (:func:`extra_forwards`) and the median step time relative to the baseline's."""
    arms = {m: runs for m, runs in arms.items() if runs}
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


def main_table(task: str, model: str, seeds, steps=None, force: bool = False, methods=("grpo", "gdpo", "mrtpo")):
    """Main-table runs of one task: (table, evaluations, figure, arms). The table has one row per method with the
    held-out answer metric at temperature 1 (mean, std and s.e. over every seed present, the seeds) and greedy,
    and the evaluation's own s.e. (:func:`run_eval_se`, mean over the method's runs); ``arms`` maps each method
    to its runs (:func:`arm_runs`), for :func:`verdict_table`."""
    from . import plots

    arms = arm_runs(task, methods, model, seeds, steps, force)
    evals = evaluations([r for runs in arms.values() for r in runs])
    metric = answer_metric(task)
    table = summary(evals, metric).rename(columns={"mean": "temp1_mean", "std": "temp1_std", "se": "temp1_se"})
    greedy = summary(evals, metric, decoding="greedy")[["method", "mean"]].rename(columns={"mean": "greedy"})
    table = table.merge(greedy, on="method")
    table["seed ids"] = [seeds_text(sorted(seed_values(arms[m], metric))) for m in table["method"]]
    table["temp1_eval_se"] = [float(np.mean([run_eval_se(r, metric)[0] for r in arms[m]])) for m in table["method"]]
    sel = evals[(evals.metric == metric) & (evals.benchmark == "synthetic_test") & (evals.decoding == "temp1")]
    fig = plots.method_bars(sel, "method", "value", ylabel=f"held-out {metric} (temperature 1)", title=f"{task}, {model}")
    plots.save(fig, f"main_table_{task}_{model}")
    return table, evals, fig, arms


# ----------------------------------------------------------------------------------------------------
# the beta sweep (Tables 6-7)


def beta_arms(task: str, betas, model: str = "tiny", seeds=(0,), steps: int | None = None, force: bool = False
              ) -> dict[str, list[Run]]:
    """MRTPO's runs at each beta (:func:`arm_runs` with ``mrtpo_beta``), keyed ``"beta 0.5"``."""
    return {f"beta {b:g}": arm_runs(task, ["mrtpo"], model, seeds, steps, force, mrtpo_beta=b)["mrtpo"] for b in betas}


def beta_table(arms: dict[str, list[Run]], metric: str, bound: float = 0.9) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, verdicts) of a beta sweep (:func:`beta_arms`). The table, per beta: the seeds, held-out ``metric``
    (mean ± s.e. over seeds), and after the warm-up the mean realised bound s, the share of steps where it is
    active (s < 1) and s × beta (``report.delivered_reallocation``). The verdicts: each beta against the next
    smaller one (:func:`verdict_table`) and the algebra's prediction (PAPER.md §6.2): where the bound is active on
    at least ``bound`` of the steps at both betas, s × beta is the same and the two deliver the same advantages, so
    their difference should be 0 — "agrees" when the interval holds 0, "disagrees" when it excludes it, "cannot
    tell" with one shared seed."""
    from . import stats
    from .report import delivered_reallocation

    arms = {name: runs for name, runs in arms.items() if runs}
    rows = []
    for name, runs in arms.items():
        values = seed_values(runs, metric)
        mean, se, _ = stats.mean_se(list(values.values()))
        s = delivered_reallocation(metrics(runs))  # empty when no step got past the warm-up
        s = s.iloc[0] if len(s) else pd.Series(math.nan, index=["s_mean", "frac_steps_bound_active", "s_times_beta"])
        rows.append({"beta": float(name.split()[-1]), "seeds": seeds_text(sorted(values)), f"held-out {metric} (± s.e.)":
                     estimate(mean, se), "mean s": s["s_mean"], "steps with the bound active": s["frac_steps_bound_active"],
                     "s × beta": s["s_times_beta"]})
    table = pd.DataFrame(rows, columns=["beta", "seeds", f"held-out {metric} (± s.e.)", "mean s",
                                        "steps with the bound active", "s × beta"])
    names = list(arms)
    verdicts = verdict_table(arms, list(zip(names[1:], names[:-1])), metric)
    active = dict(zip(names, table["steps with the bound active"]))
    plateau = [all(active[n] >= bound for n in c.split(" − ")) for c in verdicts["comparison"]]
    verdicts["bound active at both"] = ["yes" if p else "no" for p in plateau]
    verdicts["the algebra's prediction"] = [
        "—" if not p else "cannot tell" if r.startswith(("none", "prompts only")) else
        "agrees (interval holds 0)" if lo <= 0 <= hi else "disagrees (interval excludes 0)"
        for p, r, lo, hi in zip(plateau, verdicts["interval over"], verdicts["lo"], verdicts["hi"])]
    return table, verdicts


# ----------------------------------------------------------------------------------------------------
# convergence (Fig. 5)


def smoothed(m: pd.DataFrame, column: str, window: int = 10) -> pd.Series:
    """``column`` of per-step metrics as a trailing mean over ``window`` steps, per (method, seed)."""
    return m.groupby(["method", "seed"])[column].transform(lambda x: x.rolling(window, min_periods=1).mean())


def tail_slope(curve: pd.Series, tail: float = 0.2) -> float:
    """Least-squares slope per step of a per-step curve (indexed by step) over its last ``tail`` share of steps."""
    last = curve.iloc[-max(2, int(round(tail * len(curve)))):].dropna()
    if len(last) < 2:
        return math.nan
    return float(np.polyfit(last.index.to_numpy(float), last.to_numpy(float), 1)[0])


def _over_seeds(x) -> tuple[float, float, float, int]:
    """(mean, 95% bootstrap interval over seeds, seeds) of per-seed values; NaN values left out, no interval
    below two seeds."""
    from . import stats

    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    lo, hi = stats.bootstrap_interval(lambda i: x[i].mean(), len(x))
    return (float(x.mean()) if len(x) else math.nan), lo, hi, len(x)


def convergence(m: pd.DataFrame, column: str, baseline: str = "gdpo", window: int = 10, tail: float = 0.2
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, verdicts) of "reaches the baseline's final value earlier" (Fig. 5), paired by seed.

    Per (method, seed): ``column`` smoothed over ``window`` steps (:func:`smoothed`); its final value; the slope
    of the raw per-step values over the last ``tail`` of the steps (:func:`tail_slope`, per 100 steps); and the
    first step where the smoothed curve reaches the baseline's final smoothed value *of the same seed*. The table,
    per method: seeds, final value, tail slope and first step (mean ± s.e. over seeds; seeds that never reach it
    are counted). The verdicts: (1) whether the baseline has flattened — its mean tail slope with a 95% bootstrap
    interval over seeds (PAPER.md §6.6: a claim judged against a still-rising curve says little); (2) per other
    method, the share of the window it saves (``(last step − first step) / last step``; never reaching counts as
    saving nothing) with its interval over seeds, against the paper's (``results/paper/fig5_convergence.csv``:
    MRTPO reaches GDPO's step-100 accuracy at step 60, a share of 0.4)."""
    from . import stats

    f5 = paper("fig5_convergence").set_index("quantity")["value"]
    paper_step = float(f5["step reaching GDPO's step-100 accuracy"])
    claimed = 1 - paper_step / 100

    m = m.assign(_smooth=smoothed(m, column, window))
    per_seed = []
    finals = {(meth, seed): g.set_index("step")["_smooth"].iloc[-1] for (meth, seed), g in m.groupby(["method", "seed"])}
    for (meth, seed), g in m.groupby(["method", "seed"], sort=False):
        g = g.set_index("step")
        last = float(g.index.max())
        target = finals.get((baseline, seed), math.nan)
        reach = first_step_reaching(g["_smooth"], target) if target == target else math.nan
        per_seed.append({"method": meth, "seed": seed, "final": g["_smooth"].iloc[-1], "slope": 100 * tail_slope(g[column], tail),
                         "reach": reach, "never": target == target and reach != reach,
                         "saved": (last - reach) / last if reach == reach else (0.0 if target == target else math.nan)})
    seeds = pd.DataFrame(per_seed)
    rows = []
    for meth, g in seeds.groupby("method", sort=False):
        final, slope, reach = (stats.mean_se(g[c]) for c in ("final", "slope", "reach"))
        rows.append({"method": meth, "seeds": seeds_text(sorted(g["seed"])), "final (smoothed)": estimate(*final[:2]),
                     f"slope over the last {tail:.0%} (per 100 steps)": estimate(*slope[:2]),
                     f"first step reaching {baseline}'s final": estimate(*reach[:2], digits=1) if reach[2] else "—",
                     "seeds never reaching it": int(g["never"].sum())})
    table = pd.DataFrame(rows)

    verdicts = []
    est, lo, hi, n = _over_seeds(seeds.loc[seeds.method == baseline, "slope"])
    state = ("still rising" if lo > 0 else "falling" if hi < 0 else "no trend detected") if lo == lo else "no interval (one seed)"
    verdicts.append({"claim": f"{baseline} has flattened by the end of the window (PAPER.md §6.6)", "paper": "not reported",
                     "ours (95% interval)": f"slope {interval_text(est, lo, hi, 3)} per 100 steps: {state}",
                     "seeds": n, "verdict": {"still rising": "contradicted", "falling": "reproduced",
                                             "no trend detected": "inconclusive"}.get(state, "inconclusive"),
                     "est": est, "lo": lo, "hi": hi})
    rising = state == "still rising"
    for meth in seeds.method.unique():
        if meth == baseline:
            continue
        est, lo, hi, n = _over_seeds(seeds.loc[seeds.method == meth, "saved"])
        judged = stats.verdict(lo, hi, claimed if meth == "mrtpo" else None) if n >= 2 else "inconclusive"
        verdicts.append({"claim": f"{meth} reaches {baseline}'s final value earlier (share of the window saved)",
                         "paper": f"{claimed:g} (step {paper_step:g} of 100)" if meth == "mrtpo" else "—",
                         "ours (95% interval)": interval_text(est, lo, hi, 2), "seeds": n,
                         "verdict": judged + (f"; {baseline} still rising" if rising else ""),
                         "est": est, "lo": lo, "hi": hi})
    return table, pd.DataFrame(verdicts)


def length_change(m: pd.DataFrame, column: str = "completions/mean_length", steps: int = 10,
                  control: str = "+constlen") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, verdicts) of Fig. 5's length claim: responses shorten from about 330 to 130–150 tokens in 100 steps
    (``results/paper/fig5_convergence.csv``, every method), i.e. a relative change of ``mid / start − 1`` with
    ``mid`` the middle of 130–150 (−0.58). The tiny scale's responses are far shorter than the paper's, so the
    change is compared relative to each run's start, never in tokens.

    Per (method, seed): the mean of ``column`` over the first ``k`` and the last ``k`` steps, ``k = min(steps,
    steps run // 2)`` (the two windows never overlap), and the relative change ``last / first − 1``. The table,
    per method: seeds, first and last (mean ± s.e. over seeds), the relative change with its 95% bootstrap
    interval over seeds. The verdicts: each arm without the ``control`` suffix against the paper's change
    (``stats.verdict``; inconclusive below two seeds); and each arm beside its fixed-length control (``gdpo`` and
    ``gdpo+constlen``, where both have runs): the control's change minus the arm's over the seeds both share
    (``stats.paired_difference``, seeds only). The control normalises the loss by a constant, removing the
    token-mean loss's pull toward short responses; a difference above 0 is the part of the fall that pull
    explains (the paper ran no control: no claimed value)."""
    from . import stats

    f5 = paper("fig5_convergence").set_index("quantity")["value"]
    start = float(f5["response length start (tokens)"])
    end = (float(f5["response length after 100 steps low (tokens)"]) + float(f5["response length after 100 steps high (tokens)"])) / 2
    claimed = end / start - 1

    per_seed = []
    for (meth, seed), g in m.groupby(["method", "seed"], sort=False):
        x = g.sort_values("step")[column].to_numpy(float)
        k = min(steps, len(x) // 2)
        first, last = (float(x[:k].mean()), float(x[-k:].mean())) if k else (math.nan, math.nan)
        per_seed.append({"method": meth, "seed": seed, "first": first, "last": last, "k": k,
                         "change": last / first - 1 if first else math.nan})
    seeds = pd.DataFrame(per_seed, columns=["method", "seed", "first", "last", "k", "change"])
    rows, verdicts = [], []
    for meth, g in seeds.groupby("method", sort=False):
        est, lo, hi, n = _over_seeds(g["change"])
        rows.append({"method": meth, "seeds": seeds_text(sorted(g["seed"])), "steps averaged": int(g["k"].min()),
                     "first steps (tokens)": estimate(*stats.mean_se(g["first"])[:2], digits=1),
                     "last steps (tokens)": estimate(*stats.mean_se(g["last"])[:2], digits=1),
                     "relative change (95% interval over seeds)": interval_text(est, lo, hi, 2)})
        if meth.endswith(control):
            continue
        verdicts.append({"claim": f"{meth}'s responses shorten (relative change, last vs first steps)",
                         "paper": f"{start:g} → {end:g} tokens: {claimed:+.2f}", "ours (95% interval)": interval_text(est, lo, hi, 2),
                         "seeds": n, "verdict": stats.verdict(lo, hi, claimed) if n >= 2 else "inconclusive",
                         "est": est, "lo": lo, "hi": hi})
    by = {meth: g.set_index("seed")["change"] for meth, g in seeds.groupby("method")}
    for meth in [x for x in by if not x.endswith(control) and x + control in by]:
        shared = sorted(set(by[meth].index) & set(by[meth + control].index))
        d = stats.paired_difference(by[meth + control][shared].to_numpy(float), by[meth][shared].to_numpy(float))
        verdicts.append({"claim": f"{meth}'s fall is the token-mean loss's pull ({meth + control}'s change − {meth}'s)",
                         "paper": "not run", "ours (95% interval)": interval_text(d["diff"], d["lo"], d["hi"], 2),
                         "seeds": len(shared), "verdict": stats.verdict(d["lo"], d["hi"]) if len(shared) >= 2 else "inconclusive",
                         "est": d["diff"], "lo": d["lo"], "hi": d["hi"]})
    return pd.DataFrame(rows), pd.DataFrame(verdicts, columns=["claim", "paper", "ours (95% interval)", "seeds", "verdict",
                                                              "est", "lo", "hi"])


# ----------------------------------------------------------------------------------------------------
# the tool-format claim (Fig. 5's text, PAPER.md §7)

#: the per-step column of the format reward's batch mean (a binary reward: the share of well-formatted responses)
FORMAT_REWARD = "rewards/format/mean"


def format_claim(m: pd.DataFrame, column: str = FORMAT_REWARD, threshold: float = 0.8, at_step: int = 10,
                 window: int = 1, pairs=(("mrtpo", "gdpo"), ("mrtpo", "grpo"), ("gdpo", "grpo"))
                 ) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(table, verdicts, sentence) of the tool-format claim: the format reward reaches ``threshold`` at step 13
    (GDPO 19, GRPO 34) and after ``at_step`` steps the format rate is 97% (GDPO 2%, GRPO 4%)
    (``results/paper/fig5_convergence.csv``).

    Read from per-step training metrics ``m`` (:func:`report.metrics`): step t's row holds the batch sampled at
    step t by the policy after t − 1 updates (TRL's logging; the paper's curves are TRL logs too, so its steps
    are read the same way). The curve is ``column`` per step (``window`` = 1, the default: a single batch, as
    "the rate after 10 steps" is) or its trailing mean over ``window`` steps (:func:`smoothed`). Per (method,
    seed): the base's rate (the first step's batch, sampled before any update), the first step where the curve
    is >= ``threshold`` (a run that never gets there counts as reaching it one step after its last — a lower
    bound, which shrinks any gap it is part of) and the curve at ``at_step`` (NaN for a shorter run).

    The table, per method: seeds, those three (mean ± s.e. over seeds), the seeds never reaching the threshold
    and the paper's numbers. The verdicts, per pair (A, B) of ``pairs`` with runs: A − B in steps and in rate
    over the seeds both share (``stats.paired_difference``, seeds only) against the paper's A − B
    (``stats.verdict``), "inconclusive" below two shared seeds — and "inconclusive: untestable" where the two
    arms' runs start (base rate, mean) at or above ``threshold``: the claim is about learning a format the base
    lacks (PAPER.md §7), which such a base cannot show. The sentence says which case holds, from the numbers."""
    from . import stats

    f5 = paper("fig5_convergence")
    f5 = f5[f5["task"] == "tool calling"].set_index(["quantity", "method"])["value"]
    steps_q, rate_q = f"step format reward reaches {threshold:g}", f"format rate after {at_step} steps (%)"

    def paper_value(quantity, method, scale=1.0):
        key = (quantity, PAPER_METHOD.get(method, method))
        return float(f5[key]) * scale if key in f5.index else math.nan

    curve = smoothed(m, column, window) if window > 1 else m[column]
    per_seed = []
    for (meth, seed), g in m.assign(_curve=curve).groupby(["method", "seed"], sort=False):
        g = g.set_index("step").sort_index()["_curve"]
        reach = first_step_reaching(g, threshold) if len(g) else math.nan
        per_seed.append({"method": meth, "seed": seed, "start": float(g.iloc[0]) if len(g) else math.nan,
                         "never": reach != reach, "reach": reach if reach == reach else float(g.index.max()) + 1,
                         "rate": float(g.get(at_step, math.nan))})
    seeds = pd.DataFrame(per_seed, columns=["method", "seed", "start", "never", "reach", "rate"])
    what = "per step" if window == 1 else f"{window}-step mean"
    reach_col, rate_col = f"first step ≥ {threshold:g} ({what})", f"format rate at step {at_step} ({what})"
    rows = []
    for meth, g in seeds.groupby("method", sort=False):
        rows.append({"method": meth, "seeds": seeds_text(sorted(g["seed"])),
                     "base rate (step 1)": estimate(*stats.mean_se(g["start"])[:2]),
                     reach_col: estimate(*stats.mean_se(g["reach"])[:2], digits=1), "seeds never reaching it": int(g["never"].sum()),
                     rate_col: estimate(*stats.mean_se(g["rate"])[:2]),
                     "paper: step": number(paper_value(steps_q, meth), 0), "paper: rate": number(paper_value(rate_q, meth, 0.01), 2)})
    table = pd.DataFrame(rows)

    verdicts = []
    by = {meth: g.set_index("seed") for meth, g in seeds.groupby("method")}
    for a, b in pairs:
        if a not in by or b not in by:
            continue
        shared = sorted(set(by[a].index) & set(by[b].index))
        start = float(pd.concat([by[a]["start"], by[b]["start"]]).mean())
        for quantity, col, scale, unit, digits in ((steps_q, "reach", 1.0, " steps", 1), (rate_q, "rate", 0.01, "", 2)):
            claimed = paper_value(quantity, a, scale) - paper_value(quantity, b, scale)
            d = stats.paired_difference(by[a].loc[shared, col].to_numpy(float), by[b].loc[shared, col].to_numpy(float))
            if start >= threshold:
                judged = f"inconclusive: untestable, the runs start at {start:.2f} ≥ {threshold:g}"
            elif len(shared) < 2:
                judged = "inconclusive"
            else:
                judged = stats.verdict(d["lo"], d["hi"], claimed if claimed == claimed else None)
            name = (f"{a} reaches {threshold:g} before {b} ({a} − {b}, steps)" if col == "reach"
                    else f"{a}'s format rate at step {at_step} above {b}'s ({a} − {b})")
            verdicts.append({"claim": name, "paper": f"{claimed:+.{digits}f}{unit}",
                             "ours (95% interval)": interval_text(d["diff"], d["lo"], d["hi"], digits),
                             "shared seeds": seeds_text(shared), "verdict": judged, "testable": start < threshold,
                             "est": d["diff"], "lo": d["lo"], "hi": d["hi"], "claimed": claimed})
    verdicts = pd.DataFrame(verdicts, columns=["claim", "paper", "ours (95% interval)", "shared seeds", "verdict", "testable",
                                               "est", "lo", "hi", "claimed"])

    starts = seeds["start"].dropna()
    if starts.empty:
        sentence = "No run has a format curve, so the claim cannot be read here."
    else:
        base = (f"The base's format rate (the first step's batch, before any update) is {starts.mean():.2f} on average "
                f"over {len(starts)} runs (from {starts.min():.2f} to {starts.max():.2f})")
        if starts.mean() >= threshold:
            sentence = (f"{base}: already at or above {threshold:g} before training, so the steps to reach {threshold:g} "
                        f"and the rate after {at_step} steps measure nothing the claim is about (learning a format the "
                        "base lacks, PAPER.md §7): the claim cannot be tested on this base.")
        else:
            sentence = f"{base}: below {threshold:g}, so the claim is testable on this base."
        if seeds["never"].any():
            sentence += (f" {int(seeds['never'].sum())} of {len(seeds)} runs never reach {threshold:g}; they count as "
                         "reaching it one step after their last.")
    return table, verdicts, sentence


# ----------------------------------------------------------------------------------------------------
# localisation (Table 4, Fig. 6)


def seeds_localisation(runs: list[Run]) -> pd.DataFrame:
    """:func:`report.localisation` of every run, one frame with a ``seed`` column (the runs of one arm)."""
    frames = [localisation(r).assign(seed=r.config["config"]["seed"]) for r in runs]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["seed"])


def region_table(loc: pd.DataFrame, by=(), level: float = 0.95) -> pd.DataFrame:
    """Where the shift lands, per group of the ``by`` columns of a localisation frame (one row for all of it when
    ``by`` is empty): profiles, seeds, the region's share of the shift and of the tokens pooled over the group's
    responses (``diagnostics.pooled_shares``), the check-region ratio (``diagnostics.check_region_ratio``,
    PAPER.md §7) with its ``level`` percentile interval from a bootstrap over the group's profiles (seeds pooled;
    ``stats.bootstrap_interval``), and the mean concentration (share of tokens holding 80% of the shift)."""
    from . import stats
    from .diagnostics import check_region_ratio, pooled_shares

    columns = ("shift_inside", "shift_total", "tokens_inside", "tokens_total")
    rows = []
    for key, g in (loc.groupby(list(by), sort=True) if len(by) else [((), loc)]):
        arrays = {c: g[c].to_numpy(float) for c in columns}
        shift, tokens = pooled_shares(arrays)
        lo, hi = stats.bootstrap_interval(lambda i: check_region_ratio({c: a[i] for c, a in arrays.items()}), len(g),
                                          level=level)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "profiles": len(g),
                     "seeds": seeds_text(sorted(g["seed"].unique())) if "seed" in g else "—",
                     "shift share": shift, "token share": tokens, "ratio": check_region_ratio(arrays), "lo": lo, "hi": hi,
                     "concentration80": float(g["concentration80"].mean()) if len(g) else math.nan})
    return pd.DataFrame(rows, columns=[*by, "profiles", "seeds", "shift share", "token share", "ratio", "lo", "hi",
                                       "concentration80"])


#: a binary verifier's reward -> the constraint state of Table 4
STATES = {1.0: "satisfied", 0.0: "violated"}
#: Table 4's rows named by a constraint type -> that type's ``label`` (``task.reward_label``)
TABLE4_TYPES = {"bullet lines": "detectable_format:number_bullet_lists", "end phrase": "startend:end_checker"}


def localisation_verdicts(loc: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Table 4's claims against a localisation frame with a ``state`` column (:data:`STATES`): per row of
    ``results/paper/table4_localization.csv`` — "all satisfied" / "all violated" (every constraint type in that
    state) and the rows named by one constraint type (:data:`TABLE4_TYPES`, both states) — the paper's ratios, ours
    with its interval (:func:`region_table`), the profiles and seeds, and the verdict against no localisation
    (ratio 1; ``stats.verdict`` with the paper's median ratio as the claim). A paper row whose ratio is 1 (the
    region is the whole response) claims nothing: its verdict is "—"."""
    from . import stats

    rows = []
    for name, g in paper("table4_localization").groupby("constraint_state", sort=False):
        if name.startswith("all "):
            sel = loc[loc["state"] == name.removeprefix("all ")]
        else:
            sel = loc[loc["label"] == TABLE4_TYPES[name]]
        r = region_table(sel, level=level).iloc[0] if len(sel) else None
        claimed = float(g["ratio"].median())
        text = "; ".join(f"{ratio:g}" + (f" ({m.split('-')[-1]})" if isinstance(m, str) else "")
                         for ratio, m in zip(g["ratio"], g["model"]))
        ratio, lo, hi = (r["ratio"], r["lo"], r["hi"]) if r is not None else (math.nan,) * 3
        rows.append({"claim": name, "paper ratio": text, "ours (95% interval)": interval_text(ratio, lo, hi, 2, sign=""),
                     "profiles": len(sel), "seeds": r["seeds"] if r is not None else "none",
                     "verdict": stats.verdict(lo, hi, claimed, 1.0) if claimed > 1 else "—",
                     "ratio": ratio, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------
# the landing page: the paper's claims against the committed runs


def verdicts(model: str = "tiny") -> pd.DataFrame:
    """The paper's headline claims, each against this repository's finished runs of ``model`` (every seed present;
    nothing is trained here): claim, source (the paper's table or figure), the paper's number, ours with its 95%
    interval, the interval (``est``, ``lo``, ``hi``), the null value (no effect) and the paper's value on our
    scale (``claimed``), the verdict (``stats.verdict``) and the book page (notebook name) that shows it."""
    from . import stats

    rows = []

    def add(claim, source, paper_says, ours, est, lo, hi, null, claimed, judged=None):
        name, page = source.split("|")
        rows.append({"claim": claim, "source": name, "paper": paper_says, "ours": ours, "est": est, "lo": lo, "hi": hi,
                     "null": null, "claimed": claimed, "verdict": judged or stats.verdict(lo, hi, claimed, null), "page": page})

    def gap(task, better, worse, name, page, metric=None):
        text, claimed = paper_claim(name, better, worse, metric)
        a, b = finished(task, better, model), finished(task, worse, model)
        if not a or not b:
            return text, "no runs", math.nan, math.nan, math.nan, claimed
        c = compare(a, b, answer_metric(task), claimed=claimed)
        ours = (f"{interval_text(c['diff'], c['lo'], c['hi'])} over seed{'s' * (len(c['shared_seeds']) > 1)} "
                f"{seeds_text(c['shared_seeds'])} ({c['resampled']}); {better} {estimate(c['a_mean'], c['a_se'])} "
                f"({len(c['a_seeds'])} seeds), {worse} {estimate(c['b_mean'], c['b_se'])} ({len(c['b_seeds'])} seeds)")
        return text, ours, c["diff"], c["lo"], c["hi"], claimed

    for task, what, name, page, metric in (
            ("sql", "text-to-SQL", "table1_text_to_sql", "Table 1", "six-benchmark avg execution accuracy"),
            ("if", "instruction following", "table2_instruction_following", "Table 2", None),
            ("tool", "tool calling", "table3_tool_calling", "Table 3", None)):
        text, ours, est, lo, hi, claimed = gap(task, "mrtpo", "gdpo", name, page, metric)
        add(f"MRTPO above GDPO ({what})", f"{page}|{name}", text, ours, est, lo, hi, 0.0, claimed)
    runs = finished("tool", "mrtpo", model) + finished("tool", "gdpo", model)
    fmt = format_claim(metrics(runs), pairs=[("mrtpo", "gdpo")])[1] if runs else pd.DataFrame()
    for row, what in zip(fmt.to_dict("records"), ("MRTPO's format reward reaches 0.8 in fewer steps than GDPO's",
                                                  "MRTPO's format rate after 10 steps above GDPO's")):
        seeds = row["shared seeds"]
        why = "" if row["testable"] else f"; untestable: {row['verdict'].split(', ')[-1]}"
        add(f"{what} (tool calling)", "Fig. 5|table3_tool_calling",
            row["paper"], f"{row['ours (95% interval)']} over seed{'s' * (',' in seeds)} {seeds}{why}", row["est"], row["lo"],
            row["hi"], 0.0, row["claimed"], judged=None if row["testable"] else "inconclusive")
    if fmt.empty:
        add("MRTPO learns the tool-call format faster than GDPO (tool calling)", "Fig. 5|table3_tool_calling",
            "steps to a format reward of 0.8; format rate after 10 steps", "no runs", math.nan, math.nan, math.nan, 0.0, None)
    text, ours, est, lo, hi, claimed = gap("sql", "mrtpo", "joint", "table5_ablation", "Table 5")
    add("per-reward replay above joint replay (text-to-SQL)", "Table 5|table5_ablation", text, ours, est, lo, hi, 0.0, claimed)
    text, ours, est, lo, hi, _ = gap("sql", "mrtpo", "entropy", "table5_ablation", "Table 5")
    add("per-reward relevance above entropy weighting (text-to-SQL; not tested by the paper)", "issue 18|table5_ablation",
        "not tested", ours, est, lo, hi, 0.0, None)

    runs = finished("if", "mrtpo", model)
    loc = seeds_localisation(runs)
    t4 = paper("table4_localization").set_index("constraint_state")["ratio"]
    groups = t4[t4.index.str.startswith("all ")]
    if len(loc) > 1:
        r = region_table(loc).iloc[0]
        ratio, lo, hi = r["ratio"], r["lo"], r["hi"]
        ours = (f"ratio {interval_text(ratio, lo, hi, 2, sign='')}: {100 * r['shift share']:.1f}% of the shift "
                f"on {100 * r['token share']:.1f}% of the tokens ({len(loc)} profiles, seed{'s' * (len(runs) > 1)} "
                f"{r['seeds']}; interval over profiles)")
    else:
        ratio = lo = hi = math.nan
        ours = "no saved profiles"
    add("each constraint's shift lands where its checker reads (instruction following)", "Table 4|table4_localization",
        f"ratio {groups.min():g} to {groups.max():g} (all constraints); {t4['end phrase']:g} (end phrase)",
        ours, ratio, lo, hi, 1.0, float(groups.min()))

    runs = finished("sql", "mrtpo", model)
    f6 = paper("fig6_concentration").set_index("task")
    low, high = f6.at["text-to-SQL", "tokens_for_80pct_low"], f6.at["text-to-SQL", "tokens_for_80pct_high"]
    conc = seeds_localisation(runs)["concentration80"].dropna().to_numpy() if runs else np.array([])
    if len(conc) > 1:
        m = float(conc.mean())
        lo, hi = stats.bootstrap_interval(lambda i: conc[i].mean(), len(conc))
        ours = (f"{100 * m:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] of the tokens hold 80% of the shift (uniform: 80%; "
                f"{len(conc)} profiles, interval over profiles)")
    else:
        m = lo = hi = math.nan
        ours = "no saved profiles"
    add("a reward's shift is concentrated on few tokens (text-to-SQL)", "Figure 6|fig6_concentration",
        f"{low:g}–{high:g}% of the tokens hold 80% of the shift", ours, m, lo, hi, 0.8, (low + high) / 200)
    return pd.DataFrame(rows)
