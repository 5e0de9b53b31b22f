"""What the notebooks call: run (or reuse) a grid of runs, read their results back as tidy tables, and put
the paper's numbers beside them. No number here is typed by hand: everything comes from run folders or from
``results/paper/*.csv`` (the paper's reported numbers, as data)."""

from __future__ import annotations

import itertools
import math

import pandas as pd
from tqdm.auto import tqdm

from . import runs as runner
from .paths import SHIPPED
from .config import arm_label
from .results import Run
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
    """Mean ± std over seeds of one metric, one row per ``by`` value, in first-seen order."""
    sel = df[(df.metric == metric) & (df.benchmark == benchmark) & (df.decoding == decoding)]
    order = list(dict.fromkeys(sel[by]))
    out = sel.groupby(by)["value"].agg(mean="mean", std="std", seeds="count").reindex(order)
    out["std"] = out["std"].fillna(0.0)
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


def localisation(run: Run) -> pd.DataFrame:
    """Where each reward's shift lands in a run's saved profiles (``diagnostics.localisation`` with the run's
    task and tokenizer)."""
    from .diagnostics import localisation as localise

    return localise(run.profiles(), get_task(run.config["config"]["task"]), run.tokenizer())


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


def main_table(task: str, model: str, seeds, steps=None, force: bool = False, methods=("grpo", "gdpo", "mrtpo")):
    """Main-table runs of one task: (table, evaluations, figure). The table has one row per method with the
    held-out answer metric at temperature 1 (mean ± std over seeds) and greedy."""
    from . import plots

    runs = grid(task, methods, model, seeds, steps, force)
    evals = evaluations(runs)
    metric = answer_metric(task)
    table = summary(evals, metric).rename(columns={"mean": "temp1_mean", "std": "temp1_std"})
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
