"""The beta sweep (Tables 6–7): MRTPO's runs at each beta, where each beta sits against the bound, and the algebra's
prediction (PAPER.md §6.2) against the runs (the comparisons themselves are ``mrtpo.analysis.evidence.verdict_table``)."""

from __future__ import annotations

import math

import pandas as pd

from mrtpo.analysis.evidence import arm_runs, seed_values, seeds_text, verdict_table
from mrtpo.analysis.report import delivered_reallocation, estimate, metrics
from mrtpo.runs.results import Run


def beta_arms(task: str, betas, model: str = "tiny", seeds=(0,), steps: int | None = None, force: bool = False,
              processes: int = 1) -> dict[str, list[Run]]:
    """MRTPO's runs at each beta (:func:`arm_runs`, ``processes`` as there), keyed ``"beta 0.5"``."""
    return arm_runs(task, [f"beta {b:g}" for b in betas], model, seeds, steps, force, processes)


def beta_table(arms: dict[str, list[Run]], metric: str, bound: float = 0.9, adjusted: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, verdicts) of a beta sweep (:func:`beta_arms`). The table, per beta: the seeds, ``metric``'s name and
    its held-out value (mean ± s.e. over seeds), and after the warm-up the mean realised bound s, the share of steps
    where it is active (s < 1) and s × beta (``report.delivered_reallocation``). The verdicts: each beta against the
    next smaller one (:func:`verdict_table`, ``adjusted`` as there) and the algebra's prediction (PAPER.md §6.2):
    where the bound is active on at least ``bound`` of the steps at both betas, s × beta is the same and the two
    deliver the same advantages, so their difference should be 0 — "disagrees" where the difference is a gap; an
    interval that holds 0 cannot confirm it, only fail to tell the betas apart ("not distinguishable at this power"
    with the difference the seeds would detect); "cannot tell" with one shared seed."""
    from mrtpo.analysis import stats

    arms = {name: runs for name, runs in arms.items() if runs}
    rows = []
    for name, runs in arms.items():
        values = seed_values(runs, metric)
        mean, se, _ = stats.mean_se(list(values.values()))
        s = delivered_reallocation(metrics(runs))  # empty when no step got past the warm-up
        s = s.iloc[0] if len(s) else pd.Series(math.nan, index=["s_mean", "frac_steps_bound_active", "s_times_beta"])
        rows.append({"beta": float(name.split()[-1]), "seeds": seeds_text(sorted(values)), "metric": metric,
                     "held-out (± s.e.)": estimate(mean, se), "mean s": s["s_mean"],
                     "steps with the bound active": s["frac_steps_bound_active"], "s × beta": s["s_times_beta"]})
    # the metric is a column of its own, so that sweeps of tasks with different answer metrics stack into one table
    table = pd.DataFrame(rows, columns=["beta", "seeds", "metric", "held-out (± s.e.)", "mean s",
                                        "steps with the bound active", "s × beta"])
    names = list(arms)
    verdicts = verdict_table(arms, list(zip(names[1:], names[:-1])), metric, adjusted=adjusted)
    active = dict(zip(names, table["steps with the bound active"]))
    plateau = [all(active[n] >= bound for n in c.split(" − ")) for c in verdicts["comparison"]]
    verdicts["bound active at both"] = ["yes" if p else "no" for p in plateau]
    verdicts["the algebra's prediction"] = [
        "—" if not p else "cannot tell" if r.startswith(("none", "prompts only")) else
        "disagrees (a gap)" if v in ("reproduced", "contradicted") else v.removeprefix("inconclusive: ")
        for p, r, v in zip(plateau, verdicts["interval over"], verdicts["verdict"])]
    return table, verdicts
