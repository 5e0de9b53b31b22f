"""What the notebooks call: run (or reuse) a grid of runs, read their results back as tidy tables, and put
the paper's numbers beside them. No number here is typed by hand: everything comes from run folders or from
``results/paper/*.csv`` (the paper's reported numbers, as data)."""

from __future__ import annotations

import itertools
import json
import math

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


def evaluations(runs: list[Run]) -> pd.DataFrame:
    """Tidy evaluation rows of these runs (one per run x benchmark x decoding x metric), plus, for
    instruction following, ``constraint_mean`` = mean over the constraint slots."""
    df = pd.concat([pd.read_csv(r.path / "eval.csv") for r in runs], ignore_index=True).rename(columns=RENAMED_COLUMNS)
    slots = df[df.metric.str.startswith("constraint_")]
    if len(slots):
        keys = [c for c in df.columns if c not in ("metric", "value")]
        mean = slots.groupby(keys, dropna=False, as_index=False)["value"].mean().assign(metric="constraint_mean")
        df = pd.concat([df, mean], ignore_index=True)
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
    """Per-step training metrics of these runs, with method, mrtpo_beta and seed columns (for curves and s)."""
    frames = []
    for r in runs:
        cfg = r.config["config"]
        m = r.metrics.rename(columns=RENAMED_COLUMNS).assign(method=arm_label(cfg), mrtpo_beta=cfg["mrtpo_beta"],
                             seed=cfg["seed"], task=cfg["task"])
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
    """Mean replay rates of one run's metrics: share of (response, reward) pairs replayed, effective K (pairs
    replayed per response), the replay's median share of a step's time, and the share replayed per reward."""
    per_reward = [c for c in m.columns if c.startswith("mrtpo/") and c.endswith("/frac_replayed") and c.count("/") == 2]
    row = {"pairs replayed (all)": m["mrtpo/frac_replayed"].mean(), "effective K": m["mrtpo/effective_k"].mean(),
           "replay share of step": (m["time/replay"] / m["step_time"]).median()}
    row.update({c.split("/")[1]: m[c].mean() for c in per_reward})
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
                "shuffled": "shuffled positions", "mrtpo+saw": "MRTPO + SAW"}


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


def gap(table) -> str:
    """MRTPO - GDPO on a main table, in units of the evaluation s.e. of the difference, and the best method."""
    t = table.set_index("method")
    diff = t.at["mrtpo", "temp1_mean"] - t.at["gdpo", "temp1_mean"]
    se = (t.at["mrtpo", "temp1_eval_se"] ** 2 + t.at["gdpo", "temp1_eval_se"] ** 2) ** 0.5
    return (f"MRTPO - GDPO here: {diff:+.3f} ({diff / se:+.1f} evaluation s.e. of the difference); "
            f"best method here: {t['temp1_mean'].idxmax()}")


def main_view(table: pd.DataFrame, paper_rows: pd.DataFrame) -> pd.DataFrame:
    """A main table as its page shows it: per method, the seeds, ours (held-out answer metric at temperature 1,
    ± s.e. over seeds), the evaluation's own binomial s.e., and the paper's ``paper_rows`` beside them."""
    view = beside_paper(table, paper_rows, {"ours: held-out, temperature 1 (± s.e.)": ("temp1_mean", "temp1_se")})
    view.insert(2, "evaluation s.e.", [f"{se:.3f}" for se in table["temp1_eval_se"]])
    return view


def main_table(task: str, model: str, seeds, steps=None, force: bool = False, methods=("grpo", "gdpo", "mrtpo")):
    """Main-table runs of one task: (table, evaluations, figure). The table has one row per method with the
    held-out answer metric at temperature 1 (mean ± std over seeds) and greedy."""
    from . import plots

    runs = grid(task, methods, model, seeds, steps, force)
    evals = evaluations(runs)
    metric = answer_metric(task)
    table = summary(evals, metric).rename(columns={"mean": "temp1_mean", "std": "temp1_std", "se": "temp1_se"})
    greedy = summary(evals, metric, decoding="greedy")[["method", "mean"]].rename(columns={"mean": "greedy"})
    table = table.merge(greedy, on="method")
    # sampling noise of one evaluation: binomial standard error over prompts x samples (a lower bound, since
    # samples of one prompt are correlated); a gap smaller than ~2 of these is not a difference
    draws = len(runs) and runs[0].config["config"]["eval_samples"] * int(evals["n_prompts"].iloc[0])
    table["temp1_eval_se"] = (table["temp1_mean"] * (1 - table["temp1_mean"]) / draws) ** 0.5
    sel = evals[(evals.metric == metric) & (evals.benchmark == "synthetic_test") & (evals.decoding == "temp1")]
    fig = plots.method_bars(sel, "method", "value", ylabel=f"held-out {metric} (temperature 1)", title=f"{task}, {model}")
    plots.save(fig, f"main_table_{task}_{model}")
    return table, evals, fig


# ----------------------------------------------------------------------------------------------------
# the landing page: the paper's claims against the committed runs


def finished(task: str, method: str, model: str = "tiny", **overrides) -> list[Run]:
    """Every finished run of ``method`` on ``task`` at the registry's settings, one per seed found; never trains."""
    label = runner.resolve(task, method, model, **overrides).label
    seeds = sorted({json.loads((p / "config.json").read_text())["config"]["seed"]
                    for p in run_folders(task) if p.parent.name == model and p.name.startswith(f"{label}-")})
    return [r for s in seeds if (r := runner.find(task, method, model, seed=s, **overrides)) is not None]


def method_mean(runs: list[Run], metric: str) -> tuple[float, float, int]:
    """(mean, s.e., seeds) of the held-out ``metric`` at temperature 1 over these runs. The s.e. is the spread
    over seeds (std / sqrt(seeds)) from two seeds on; with one seed, the evaluation's binomial s.e.
    sqrt(p (1 - p) / (prompts x samples)), a lower bound."""
    evals = evaluations(runs)
    row = summary(evals, metric).iloc[0]
    if row["seeds"] >= 2:
        return float(row["mean"]), float(row["se"]), int(row["seeds"])
    draws = runs[0].config["config"]["eval_samples"] * int(evals["n_prompts"].iloc[0])
    return float(row["mean"]), (row["mean"] * (1 - row["mean"]) / draws) ** 0.5, 1


def verdict(z: float, contradicted_below: float = -2.0) -> str:
    """The claim's direction measured ``z`` standard errors away from no effect: reproduced at z >= 2,
    contradicted at z <= -2, otherwise not reproduced (the difference is within the noise)."""
    if z != z:
        return "not measured"
    return "reproduced" if z >= 2 else "contradicted" if z <= contradicted_below else "not reproduced (within noise)"


def _paper_gap(name: str, better: str, worse: str, metric: str | None = None) -> str:
    df = paper(name)
    if metric is not None:
        df = df[df.metric == metric]
    keys = [k for k in ("model", "metric") if k in df and df[k].nunique() > 1]
    gaps = {}
    for names, part in (df.groupby(keys, sort=False) if keys else [((), df)]):
        by = part.set_index("method")["score"]
        names = names if isinstance(names, tuple) else (names,)
        gaps[", ".join(map(str, names))] = by[better] - by[worse]
    if len(gaps) > 2:
        return f"{min(gaps.values()):+.2f} to {max(gaps.values()):+.2f} points ({len(gaps)} models x benchmarks)"
    return "; ".join(f"{g:+.2f}" + (f" ({k})" if k else "") for k, g in gaps.items()) + " points"


def verdicts(model: str = "tiny") -> pd.DataFrame:
    """The paper's headline claims, each against this repository's finished runs of ``model`` (nothing is
    trained here): claim, source (the paper's table or figure), the paper's number, ours (with the standard
    errors it is measured in), ``z`` (ours in standard errors of the claimed effect), the verdict
    (:func:`verdict`) and the book page (notebook name) that shows it."""
    rows = []

    def add(claim, source, paper_says, ours, z):
        name, page = source.split("|")
        rows.append({"claim": claim, "source": name, "paper": paper_says, "ours": ours, "z": z, "verdict": verdict(z),
                     "page": page})

    def gap(task, better, worse):
        a, b = finished(task, better, model), finished(task, worse, model)
        if not a or not b:
            return "no runs", math.nan
        (ma, sa, na), (mb, sb, nb) = method_mean(a, answer_metric(task)), method_mean(b, answer_metric(task))
        z = (ma - mb) / (sa ** 2 + sb ** 2) ** 0.5 if sa or sb else math.nan
        return (f"{ma - mb:+.3f} {answer_metric(task)} ({better} {estimate(ma, sa)}, {na} seed{'s' * (na > 1)}; "
                f"{worse} {estimate(mb, sb)}, {nb} seed{'s' * (nb > 1)})"), z

    for task, what, name, page, metric in (
            ("sql", "text-to-SQL", "table1_text_to_sql", "Table 1", "six-benchmark avg execution accuracy"),
            ("if", "instruction following", "table2_instruction_following", "Table 2", None),
            ("tool", "tool calling", "table3_tool_calling", "Table 3", None)):
        ours, z = gap(task, "mrtpo", "gdpo")
        add(f"MRTPO above GDPO ({what})", f"{page}|{name}", _paper_gap(name, "MRTPO", "GDPO", metric), ours, z)
    ours, z = gap("sql", "mrtpo", "joint")
    add("per-reward replay above joint replay (text-to-SQL)", "Table 5|table5_ablation",
        _paper_gap("table5_ablation", "MRTPO", "joint replay"), ours, z)

    runs = finished("if", "mrtpo", model)
    loc = localisation(runs[0]) if runs else pd.DataFrame()
    if len(loc) > 1:
        diff = loc["shift_share"] - loc["token_share"]
        ratio = loc["shift_share"].mean() / loc["token_share"].mean()
        z = diff.mean() / (diff.std() / len(diff) ** 0.5) if diff.std() > 0 else math.nan
        ours = (f"ratio {ratio:.2f}: {100 * loc['shift_share'].mean():.1f}% of the shift on "
                f"{100 * loc['token_share'].mean():.1f}% of the tokens ({len(loc)} profiles)")
    else:
        ours, z = "no saved profiles", math.nan
    t4 = paper("table4_localization").set_index("constraint_state")["ratio"]
    groups = t4[t4.index.str.startswith("all ")]
    add("each constraint's shift lands where its checker reads (instruction following)", "Table 4|table4_localization",
        f"ratio {groups.min():g} to {groups.max():g} (all constraints); {t4['end phrase']:g} (end phrase)", ours, z)

    runs = finished("sql", "mrtpo", model)
    f6 = paper("fig6_concentration").set_index("task")
    low, high = f6.at["text-to-SQL", "tokens_for_80pct_low"], f6.at["text-to-SQL", "tokens_for_80pct_high"]
    conc = (localisation(runs[0])["concentration80"].dropna()
            if runs else pd.Series(dtype=float))
    if len(conc) > 1:
        m, se = conc.mean(), conc.std() / len(conc) ** 0.5
        # the claim: concentrated (well below uniform's 0.8); z measures the distance from uniform
        z = (0.8 - m) / se if se > 0 else math.nan
        ours = f"{100 * m:.1f}% ± {100 * se:.1f} of the tokens hold 80% of the shift (uniform: 80%; {len(conc)} profiles)"
    else:
        ours, z = "no saved profiles", math.nan
    add("a reward's shift is concentrated on few tokens (text-to-SQL)", "Figure 6|fig6_concentration",
        f"{low:g}–{high:g}% of the tokens hold 80% of the shift", ours, z)
    return pd.DataFrame(rows)
