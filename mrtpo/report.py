"""What the notebooks call: run (or reuse) a grid of runs, read their results back as tidy tables, and put
the paper's numbers beside them. No number here is typed by hand: everything comes from run folders or from
``results/paper/*.csv`` (the paper's reported numbers, as data)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from . import runs as runner
from .paths import SHIPPED
from .config import arm_label
from .results import Run, run_folders
from .tasks import get_task

#: the paper's reported numbers, as data (shipped with the repository)
PAPER = SHIPPED / "paper"
#: committed measurement files (``bench/``, ``tiny_models.csv``)
RESULTS = SHIPPED


#: column names of run folders written before a rename -> today's name (the committed runs keep their files,
#: and their hashes: the names are not part of a run's identity)
RENAMED_COLUMNS = {"mrtpo/beta": "mrtpo/beta_t", "beta": "mrtpo_beta"}


def answer_metric(task: str) -> str:
    """The metric that judges the answer (the tables' headline metric at the tiny scale): ``Task.answer_metric``."""
    return get_task(task).answer_metric


def check_model(task: str, model: str, method: str = "mrtpo") -> dict:
    """Fail fast with the registry's clear error when ``model``'s weights are absent; return the run plan."""
    from .models import dry_run

    runner.resolve(task, method, model)
    return dry_run(task, model, method, print_plan=False)


def grid(task: str, methods, model: str = "tiny", seeds=(0,), steps: int | None = None, force: bool = False,
         **overrides) -> list[Run]:
    """Run (or reuse from the cache) every method x seed; methods may carry ``+saw``."""
    runs = []
    for method, seed in tqdm(list(itertools.product(methods, seeds)), desc=f"{task} runs"):
        runs.append(runner.run(task, method, model, seed=seed, steps=steps, force=force, **overrides))
    return runs


#: headline metrics that are the mean of component metrics: name -> prefix of the components' names
#: (instruction following: ``constraint_mean`` = mean over the constraint slots)
COMPONENT_METRICS = {"constraint_mean": "constraint_"}


def components(metric: str, available) -> list[str]:
    """The evaluated metrics a headline ``metric`` is the mean of (itself when it is evaluated directly)."""
    if metric in set(available):
        return [metric]
    prefix = COMPONENT_METRICS.get(metric)
    return sorted(m for m in set(available) if prefix and m.startswith(prefix) and m != metric)


def evaluations(runs: list[Run]) -> pd.DataFrame:
    """Tidy evaluation rows of these runs (one per run x benchmark x decoding x metric), plus each
    :data:`COMPONENT_METRICS` metric as the mean of its components."""
    df = pd.concat([pd.read_csv(r.path / "eval.csv") for r in runs], ignore_index=True).rename(columns=RENAMED_COLUMNS)
    for derived in COMPONENT_METRICS:
        parts = components(derived, df.metric.unique())
        if parts and parts != [derived]:
            keys = [c for c in df.columns if c not in ("metric", "value")]
            mean = df[df.metric.isin(parts)].groupby(keys, dropna=False, as_index=False)["value"].mean()
            df = pd.concat([df, mean.assign(metric=derived)], ignore_index=True)
    return df


def summary(df: pd.DataFrame, metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1",
            by: str = "method") -> pd.DataFrame:
    """Mean, std and standard error ``se = std / sqrt(seeds)`` over seeds of one metric, one row per ``by`` value,
    in first-seen order. With one seed there is no spread: std and se are NaN (shown as "—"), never 0."""
    sel = df[(df.metric == metric) & (df.benchmark == benchmark) & (df.decoding == decoding)]
    order = list(dict.fromkeys(sel[by]))
    out = sel.groupby(by)["value"].agg(mean="mean", std="std", seeds="count").reindex(order)
    out["se"] = out["std"] / out["seeds"] ** 0.5
    return out.reset_index()




def metrics(runs: list[Run]) -> pd.DataFrame:
    """Per-step training metrics of these runs, with method, mrtpo_beta, seed, task and completions_per_step
    columns (for curves, s and replay rates)."""
    frames = []
    for r in runs:
        cfg = r.config["config"]
        m = r.metrics.rename(columns=RENAMED_COLUMNS).assign(method=arm_label(cfg), mrtpo_beta=cfg["mrtpo_beta"],
                             seed=cfg["seed"], task=cfg["task"],
                             completions_per_step=cfg["prompts_per_step"] * cfg["num_generations"])
        frames.append(m)
    return pd.concat(frames, ignore_index=True)


def delivered_reallocation(m: pd.DataFrame) -> pd.DataFrame:
    """Per ``mrtpo_beta``, over the steps after the warm-up (``mrtpo/beta_t`` reached ``mrtpo_beta``): mean
    realised bound ``s``, the share of steps where the bound is active (``s < 1``) and the delivered reallocation
    ``s * beta`` (PAPER.md §6.2: where the bound is active, ``s * beta`` is fixed and beta cancels)."""
    warm = m[m["mrtpo/beta_t"] >= m["mrtpo_beta"] - 1e-9].assign(s_times_beta=lambda d: d["mrtpo/s"] * d["mrtpo_beta"])
    return warm.groupby("mrtpo_beta").agg(s_mean=("mrtpo/s", "mean"),
                                          frac_steps_bound_active=("mrtpo/s", lambda x: float((x < 1).mean())),
                                          s_times_beta=("s_times_beta", "mean"))


def replay_rates(m: pd.DataFrame) -> dict[str, float]:
    """Replay rates of one run's metrics (PAPER.md §7): over the response–reward pairs that exist (a reward that
    does not apply to a prompt is not a pair), the share replayed (non-zero group std), pooled over steps, overall
    and per reward; effective K (pairs replayed per response); the replay's median share of a step's time.

    A step has ``completions_per_step`` responses (:func:`metrics` adds the column; one process, one generation
    round per step, as at the tiny scale); ``<reward>/not_applicable`` counts the responses the reward does not
    apply to, so reward k's pairs are ``completions_per_step − not_applicable_k`` and its replayed pairs
    ``mrtpo/<k>/frac_replayed × completions_per_step``."""
    per_reward = [c.split("/")[1] for c in m.columns
                  if c.startswith("mrtpo/") and c.endswith("/frac_replayed") and c.count("/") == 2]
    B = m["completions_per_step"]
    replayed = {k: (m[f"mrtpo/{k}/frac_replayed"] * B).sum() for k in per_reward}
    pairs = {k: (B - m.get(f"{k}/not_applicable", 0.0)).sum() for k in per_reward}
    row = {"pairs replayed (of those that exist)": sum(replayed.values()) / sum(pairs.values()) if per_reward else math.nan,
           "effective K": m["mrtpo/effective_k"].mean(),
           "rewards applying per response": sum(pairs.values()) / B.sum() if per_reward else math.nan,
           "replay share of step": (m["time/replay"] / m["step_time"]).median()}
    row.update({k: replayed[k] / pairs[k] if pairs[k] > 0 else math.nan for k in per_reward})
    return row


#: the step phases of ``benchmarks/step_cost.py``, in the order a step runs them
STEP_PHASES = ("generation", "rewards", "replay", "loss", "other")


def step_split(bench: pd.DataFrame) -> pd.DataFrame:
    """The step-cost benchmark's rows as one row per (task, arm, phase): median seconds of the phase and its share
    of the arm's median step (``results/bench/step_cost.csv``; the phases' medians need not add up to the step's)."""
    long = bench.melt(id_vars=["task", "variant", "median_step_s"], value_vars=[f"{p}_s" for p in STEP_PHASES],
                      var_name="phase", value_name="seconds")
    long["phase"] = long["phase"].str.removesuffix("_s")
    return long.assign(share=long["seconds"] / long["median_step_s"])


def replay_limits(bench: pd.DataFrame, goal: float = 1.2) -> pd.DataFrame:
    """Per task and replaying arm: replay time, the limit (forwards per response x one forward over the step's rows
    under P_all) and their ratio against the goal; plus our GDPO's step over TRL's own (goal 1.02)."""
    replaying = bench[bench["limit_s"].notna()]
    out = replaying[["task", "variant", "effective_k", "forwards_per_response", "replay_s", "forward_s", "limit_s",
                     "replay_to_limit"]].assign(goal=goal, met=lambda d: d["replay_to_limit"] <= goal)
    return out.reset_index(drop=True)


def run_time_table(runs: pd.DataFrame, goal: float = 2.0) -> pd.DataFrame:
    """``results/bench/run_time.csv`` as one row per task: wall time of the 100-step MRTPO run before and after (in
    minutes), the speed-up before / after, whether it reaches ``goal`` (halved wall time), whether the run's
    content hash is unchanged, and the machine's load during each run. Tasks with one version only show NaN."""
    wide = runs.pivot_table(index="task", columns="version", values=["wall_s", "load_start", "load_end"], aggfunc="first")
    out = pd.DataFrame(index=wide.index)
    for version in ("before", "after"):
        if ("wall_s", version) in wide:
            out[f"{version}_min"] = wide[("wall_s", version)] / 60
            out[f"{version}_load"] = (wide[("load_start", version)] + wide[("load_end", version)]) / 2
        else:
            out[f"{version}_min"] = out[f"{version}_load"] = float("nan")
    out["speedup"] = out["before_min"] / out["after_min"]
    measured = out["speedup"].notna()
    out["halved"] = (out["speedup"] >= goal).where(measured)
    out["same_run_hash"] = (runs.groupby("task")["run_folder"].nunique() == 1).where(measured)
    return out.reset_index()


def relevance_text(run: Run, profile: dict | None = None):
    """One profile the run saved, as coloured text (``plots.RelevanceText``); by default the one where the most
    rewards moved the policy (the latest among those). None when the run saved no profiles."""
    from .plots import RelevanceText

    profiles = run.profiles()
    if profile is None and profiles:
        profile = max(reversed(profiles), key=lambda p: sum(sum(q) > 0 for q in p["q"].values()))
    if profile is None:
        return None
    return RelevanceText.from_profile(profile, get_task(run.config["config"]["task"]), run.tokenizer())


def localisation(run: Run) -> pd.DataFrame:
    """Where each reward's shift lands in a run's saved profiles (``diagnostics.localisation`` with the run's
    task and tokenizer)."""
    from .diagnostics import localisation as localise

    return localise(run.profiles(), get_task(run.config["config"]["task"]), run.tokenizer())


#: our method names -> the paper's row names in ``results/paper/*.csv``
PAPER_METHOD = {"grpo": "GRPO", "gdpo": "GDPO", "mrtpo": "MRTPO", "joint": "joint replay",
                "shuffled": "shuffled positions", "mrtpo+saw": "MRTPO + SAW", "opsd": "OPSD"}


def number(value: float | None, digits: int = 3) -> str:
    """A number as text, "—" where there is none (None or NaN)."""
    return "—" if value is None or value != value else f"{value:.{digits}f}"


def estimate(mean: float, spread: float | None = None, digits: int = 3) -> str:
    """``mean ± spread`` as text, with "—" for a spread there is not (one seed; the paper reports none)."""
    return "—" if mean is None or mean != mean else f"{number(mean, digits)} ± {number(spread, digits)}"


def beside_paper(ours: pd.DataFrame, paper: pd.DataFrame, columns: dict[str, tuple[str, str | None]],
                 key: str = "method", digits: int = 3) -> pd.DataFrame:
    """Ours and the paper's numbers in one table, one row per ``key`` value of ``ours``.

    ``columns``: heading -> (mean column, s.e. column or None) of ``ours``, shown as ``mean ± s.e.``. The paper's
    ``score`` (± its reported ``std``) gets one column per paper model (and metric, when ``paper`` has several),
    matched to our rows through :data:`PAPER_METHOD`; "—" where the paper has no such row. ``seeds`` is kept.
    """
    rows = ours.reset_index(drop=True)
    out = pd.DataFrame(index=pd.Index(rows[key], name=key))
    if "seeds" in rows:
        out["seeds"] = rows["seeds"].to_numpy()
    for heading, (mean, se) in columns.items():
        out[heading] = [estimate(m, s, digits) for m, s in zip(rows[mean], rows[se] if se else [None] * len(rows))]
    groups = ["model"] + (["metric"] if "metric" in paper and paper["metric"].nunique() > 1 else [])
    for names, part in paper.groupby(groups, sort=False):
        names = names if isinstance(names, tuple) else (names,)
        by = part.set_index("method")
        spread = by["std"] if "std" in by else pd.Series(float("nan"), index=by.index)
        out[f"paper: {', '.join(map(str, names))} (± std)"] = [
            estimate(by.at[PAPER_METHOD.get(k, k), "score"], spread.get(PAPER_METHOD.get(k, k)), 2)
            if PAPER_METHOD.get(k, k) in by.index else "—" for k in rows[key]]
    return out


def paper(name: str) -> pd.DataFrame:
    """The paper's reported numbers of one table or figure (``results/paper/<name>.csv``)."""
    return pd.read_csv(PAPER / f"{name}.csv")


def first_step_reaching(curve: pd.Series, threshold: float) -> float:
    """First step whose value is >= threshold (NaN when never reached); curve indexed by step."""
    hit = curve[curve >= threshold]
    return float(hit.index[0]) if len(hit) else math.nan


# ----------------------------------------------------------------------------------------------------
# seeds, paired comparisons, verdicts, power (the statistics are mrtpo.stats)


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
    gaps = table[table["verdict"].isin(["reproduced", "contradicted"])]
    parts = [f"{len(gaps)} of {len(table)} comparisons show a gap (95% interval excluding 0)"
             + (": " + "; ".join(f"{r.comparison} {r.diff:+.3f} ({r.verdict})" for r in gaps.itertuples()) if len(gaps) else "")]
    one = table[table["interval over"].str.startswith(("none", "prompts only"))]
    if len(one):
        parts.append(f"{len(one)} rest on one shared seed ({', '.join(one['comparison'])}), so their interval, if any, "
                     "holds no seed-to-seed noise")
    return "; ".join(parts) + "."


def power_table(arms: dict[str, list[Run]], pairs, metric: str, delta: float = 0.05, power: float = 0.8,
                benchmark: str = "synthetic_test", decoding: str = "temp1", at=(3, 5)) -> pd.DataFrame:
    """Per pair (A, B): the standard deviation of A − B over seeds (``stats.sd_of_differences``: paired from two
    shared seeds, otherwise from the arms' own spread, otherwise from the spread pooled over every arm of
    ``arms`` with two seeds or more), the difference detectable with ``power`` (two-sided paired t-test, alpha
    0.05) at the seeds shared now and at ``at`` seeds, and the seeds a difference of ``delta`` needs (at least 3)."""
    from . import stats

    values = {m: seed_values(runs, metric, benchmark, decoding) for m, runs in arms.items() if runs}
    pooled = stats.pooled_sd([v.values() for v in values.values()])
    rows = []
    for a, b in pairs:
        if a not in values or b not in values:
            continue
        sd, how = stats.sd_of_differences(values[a], values[b], fallback=pooled)
        shared = len(set(values[a]) & set(values[b]))
        need = stats.seeds_for_power(sd, delta, power)
        row = {"comparison": f"{a} − {b}", "sd of the difference": sd, "measured": how, "shared seeds": shared,
               "detectable now": stats.detectable_difference(sd, shared, power)}
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
# the landing page: the paper's claims against the committed runs


def verdicts(model: str = "tiny") -> pd.DataFrame:
    """The paper's headline claims, each against this repository's finished runs of ``model`` (every seed present;
    nothing is trained here): claim, source (the paper's table or figure), the paper's number, ours with its 95%
    interval, the interval (``est``, ``lo``, ``hi``), the null value (no effect) and the paper's value on our
    scale (``claimed``), the verdict (``stats.verdict``) and the book page (notebook name) that shows it."""
    from . import stats
    from .diagnostics import check_region_ratio

    rows = []

    def add(claim, source, paper_says, ours, est, lo, hi, null, claimed):
        name, page = source.split("|")
        rows.append({"claim": claim, "source": name, "paper": paper_says, "ours": ours, "est": est, "lo": lo, "hi": hi,
                     "null": null, "claimed": claimed, "verdict": stats.verdict(lo, hi, claimed, null), "page": page})

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
    text, ours, est, lo, hi, claimed = gap("sql", "mrtpo", "joint", "table5_ablation", "Table 5")
    add("per-reward replay above joint replay (text-to-SQL)", "Table 5|table5_ablation", text, ours, est, lo, hi, 0.0, claimed)
    text, ours, est, lo, hi, _ = gap("sql", "mrtpo", "entropy", "table5_ablation", "Table 5")
    add("per-reward relevance above entropy weighting (text-to-SQL; not tested by the paper)", "issue 18|table5_ablation",
        "not tested", ours, est, lo, hi, 0.0, None)

    runs = finished("if", "mrtpo", model)
    loc = localisation(runs[0]) if runs else pd.DataFrame()
    t4 = paper("table4_localization").set_index("constraint_state")["ratio"]
    groups = t4[t4.index.str.startswith("all ")]
    if len(loc) > 1:
        ratio = check_region_ratio(loc)
        lo, hi = stats.bootstrap_interval(lambda i: check_region_ratio(loc.iloc[i]), len(loc))
        ours = (f"ratio {interval_text(ratio, lo, hi, 2, sign='')}: {100 * loc['shift_share'].mean():.1f}% of the shift "
                f"on {100 * loc['token_share'].mean():.1f}% of the tokens ({len(loc)} profiles, seed "
                f"{runs[0].config['config']['seed']}; interval over profiles)")
    else:
        ratio = lo = hi = math.nan
        ours = "no saved profiles"
    add("each constraint's shift lands where its checker reads (instruction following)", "Table 4|table4_localization",
        f"ratio {groups.min():g} to {groups.max():g} (all constraints); {t4['end phrase']:g} (end phrase)",
        ours, ratio, lo, hi, 1.0, float(groups.min()))

    runs = finished("sql", "mrtpo", model)
    f6 = paper("fig6_concentration").set_index("task")
    low, high = f6.at["text-to-SQL", "tokens_for_80pct_low"], f6.at["text-to-SQL", "tokens_for_80pct_high"]
    conc = localisation(runs[0])["concentration80"].dropna().to_numpy() if runs else np.array([])
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
