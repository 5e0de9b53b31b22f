"""The open questions of PAPER.md §6 that no single result page answers, each a table and a sentence computed from
finished run folders (nothing is trained here): where each task's shift lands (§6.1), the gain set beside the
localisation across tasks (§6.4), a comparison per task (§6.7: OPSD against GRPO), and the sign flips an average
can hide (§6.8). The other questions reuse the pages' own analyses (``beta_sweep.beta_table``, ``evidence.cost_gain``,
``report.replay_rates``, ``claims.convergence``)."""

from __future__ import annotations

import math

import pandas as pd

from mrtpo.analysis.evidence import compare, interval_text, seeds_text
from mrtpo.analysis.localisation import region_table, seeds_localisation, small_region_ratio
from mrtpo.analysis.report import answer_metric, evaluations
from mrtpo.runs.results import Run


def where_shift_lands(loc: pd.DataFrame) -> pd.DataFrame:
    """Per reward label of a localisation frame (a run's saved profiles, every seed pooled:
    ``localisation.seeds_localisation``; or the responses ``mrtpo diagnose`` replayed before training:
    ``diagnose.read_diagnosis``): :func:`localisation.region_table` (the region's share of the shift and of the
    tokens, the check-region ratio with its interval, concentration) plus the share of the shift inside the
    ``<think>`` reasoning (pooled: sum of ``think_shift`` / sum of ``shift_total``). Empty for an empty frame."""
    if loc is None or not len(loc):
        return pd.DataFrame(columns=["label", "profiles", "seeds", "shift share", "token share", "ratio", "lo", "hi",
                                     "interval over", "concentration80", "reasoning share"])
    table = region_table(loc, ["label"])
    think = loc.groupby("label")[["think_shift", "shift_total"]].sum()
    return table.assign(**{"reasoning share": table["label"].map(think["think_shift"] / think["shift_total"])})


def sign_of(lo: float, hi: float, shared: int) -> str:
    """What an interval of a difference says, without taking a side: "above 0", "below 0" (the interval excludes
    0, over two shared seeds or more), "holds 0", or "one shared seed" (no seed-to-seed noise in the interval)."""
    if shared < 2 or lo != lo:
        return "one shared seed"
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "holds 0"


def task_comparison(arms: dict[str, dict[str, list[Run]]], better: str, worse: str) -> pd.DataFrame:
    """``better − worse`` on each task's held-out answer metric (``report.answer_metric``), one row per task of
    ``arms`` ({task: {method: runs}}): the seeds each arm has, the difference over the shared seeds with its 95%
    paired interval (:func:`evidence.compare`) and what it says (:func:`sign_of`), or "no runs of ..." where an arm
    has none."""
    rows = []
    for task, runs in arms.items():
        a, b = runs.get(better, []), runs.get(worse, [])
        row = {"task": task, "metric": answer_metric(task), "seeds": f"{seeds_text(sorted(r.seed for r in a))} / "
                                                                    f"{seeds_text(sorted(r.seed for r in b))}"}
        if a and b:
            c = compare(a, b, row["metric"])
            row.update({"shared seeds": len(c["shared_seeds"]), "diff": c["diff"], "lo": c["lo"], "hi": c["hi"],
                        f"{better} − {worse} (95% interval)": interval_text(c["diff"], c["lo"], c["hi"]),
                        "sign": sign_of(c["lo"], c["hi"], len(c["shared_seeds"]))})
        else:
            row.update({"shared seeds": 0, "diff": math.nan, "lo": math.nan, "hi": math.nan,
                        f"{better} − {worse} (95% interval)": "—",
                        "sign": "no runs of " + " or ".join(m for m, x in ((better, a), (worse, b)) if not x)})
        rows.append(row)
    return pd.DataFrame(rows)


def gain_beside_localisation(arms: dict[str, dict[str, list[Run]]], treated: str = "mrtpo", control: str = "gdpo"
                             ) -> pd.DataFrame:
    """§6.4 across tasks: per task, ``treated − control`` (:func:`task_comparison`) beside the localisation of the
    treated arm's saved profiles: the check-region ratio pooled over the rewards whose region holds at most half
    the tokens (:func:`localisation.small_region_ratio`, as the dose-response page) and the concentration
    (``0.8 / concentration80``, Fig. 6's "x", concentration80 the mean over reward labels of their mean)."""
    table = task_comparison(arms, treated, control)
    rows = []
    for task in table["task"]:
        loc = seeds_localisation(arms[task].get(treated, []))
        ratio, names = small_region_ratio(loc) if len(loc) else (math.nan, "")
        c80 = float(loc.groupby("label")["concentration80"].mean().mean()) if len(loc) else math.nan
        rows.append({"check-region ratio": ratio, "ratio over": names, "concentration (x)": 0.8 / c80 if c80 > 0 else math.nan})
    return pd.concat([table, pd.DataFrame(rows, index=table.index, columns=["check-region ratio", "ratio over",
                                                                            "concentration (x)"])], axis=1)


def localisation_gain_sentence(table: pd.DataFrame, treated: str = "mrtpo", control: str = "gdpo") -> str:
    """Whether the paper's cross-task pattern (§6.4: the best-localised task gains least) shows in a
    :func:`gain_beside_localisation` table: which task localises best, and where its gain stands against the other
    tasks' by their intervals — below every other (the pattern shows), above some other (it is contradicted), or
    overlapping (the runs cannot order the gains: point estimates alone say nothing)."""
    known = table.dropna(subset=["check-region ratio", "diff"])
    if len(known) < 2:
        return (f"Fewer than two tasks have both a localisation and {treated} − {control} runs: the cross-task "
                "pattern cannot be checked.")
    best = known.loc[known["check-region ratio"].idxmax()]
    others = known[known["task"] != best["task"]]
    below = (best["hi"] < others["lo"]).all()
    above = (best["lo"] > others["hi"]).any()
    return (f"The best-localised task here is {best['task']} (check-region ratio {best['check-region ratio']:.2f}); "
            f"its gain {interval_text(best['diff'], best['lo'], best['hi'])} "
            + ("lies below every other task's interval, so the paper's pattern shows here." if below else
               "lies above another task's interval, so the paper's pattern (the best-localised task gains least) is "
               "contradicted here." if above else
               f"overlaps the other tasks' intervals, so the gains of the {len(known)} tasks are not distinguishable "
               "at this power and their order is not known.")
            + " Gains on different tasks are on different metrics; the dose-response page asks the question on one task.")


def sign_flips(a: list[Run], b: list[Run], headline: str) -> pd.DataFrame:
    """§6.8: ``A − B`` in every (benchmark, decoding, metric) cell both arms were evaluated on (each with its 95%
    paired interval, :func:`evidence.compare`), marking the cells whose difference has the opposite sign to the
    headline's (``headline`` on ``synthetic_test`` at temperature 1), and whether such a flip's interval excludes
    0 (a flip the seeds support, not noise around 0)."""
    ea, eb = evaluations(a), evaluations(b)
    cells = ea[["benchmark", "decoding", "metric"]].drop_duplicates().merge(
        eb[["benchmark", "decoding", "metric"]].drop_duplicates())
    rows = []
    for bench, decoding, metric in cells.itertuples(index=False):
        c = compare(a, b, metric, bench, decoding)
        rows.append({"benchmark": bench, "decoding": decoding, "metric": metric, "shared seeds": len(c["shared_seeds"]),
                     "diff": c["diff"], "lo": c["lo"], "hi": c["hi"],
                     "difference (95% interval)": interval_text(c["diff"], c["lo"], c["hi"]),
                     "headline": (bench, decoding, metric) == ("synthetic_test", "temp1", headline)})
    table = pd.DataFrame(rows, columns=["benchmark", "decoding", "metric", "shared seeds", "diff", "lo", "hi",
                                        "difference (95% interval)", "headline"])
    head = table.loc[table["headline"], "diff"]
    sign = math.copysign(1.0, float(head.iloc[0])) if len(head) and head.iloc[0] == head.iloc[0] else math.nan
    table["flipped"] = ~table["headline"] & (table["diff"] * sign < 0)
    table["flip excludes 0"] = table["flipped"] & ((table["hi"] < 0) | (table["lo"] > 0))
    return table


def sign_flip_sentence(table: pd.DataFrame, task: str, name: str) -> str:
    """One sentence on a :func:`sign_flips` table: how many cells other than the headline flip its sign, and how
    many of those flips the intervals support."""
    head = table[table["headline"]]
    if not len(head) or head["diff"].isna().all():
        return f"{task}: no headline difference for {name}, so no sign to flip."
    others = table[~table["headline"]]
    flips = others[others["flipped"]]
    real = flips[flips["flip excludes 0"]]
    listed = "; ".join(f"{r['benchmark']} / {r['decoding']} / {r['metric']} {r['difference (95% interval)']}"
                       for _, r in real.iterrows())
    return (f"{task}: headline {name} {head['difference (95% interval)'].iloc[0]}; {len(flips)} of {len(others)} other "
            f"cells have the opposite sign, {len(real)} of them with an interval excluding 0"
            + (f" ({listed})." if listed else "."))


def shift_sentence(table: pd.DataFrame, task: str) -> str:
    """One sentence on a :func:`where_shift_lands` table: the rewards whose ratio interval lies above 1 (the shift
    favours the checker's region), the largest ratio, and the range of the reasoning's share of the shift."""
    if not len(table):
        return f"{task}: no saved relevance profiles."
    above = table[table["lo"] > 1]
    top = table.loc[table["ratio"].idxmax()]
    reasoning = (f"the reasoning holds {table['reasoning share'].min():.0%}–{table['reasoning share'].max():.0%} of a "
                 "reward's shift" if table["reasoning share"].max() > 0 else "none of the shift lands in a <think> reasoning")
    return (f"{task}: {len(above)} of {len(table)} rewards have a check-region ratio whose interval lies above 1 "
            f"(largest: {top['label']} {interval_text(top['ratio'], top['lo'], top['hi'], 2, sign='')}); {reasoning}.")


def comparison_sentence(table: pd.DataFrame, better: str, worse: str) -> str:
    """One sentence on a :func:`task_comparison` table: on how many tasks ``better − worse`` is below 0 or above 0
    (:func:`sign_of`: an interval over two shared seeds or more that excludes 0) or undecided (it holds 0, or one
    shared seed), and the tasks without runs."""
    tested = table[table["shared seeds"] > 0]
    below = tested[tested["sign"] == "below 0"]["task"].tolist()
    above = tested[tested["sign"] == "above 0"]["task"].tolist()
    unsure = [t for t in tested["task"] if t not in below + above]
    missing = table[table["shared seeds"] == 0]["task"].tolist()
    parts = [f"{better} − {worse}: below 0 on {len(below)} of {len(tested)} tasks with runs"
             + (f" ({', '.join(below)})" if below else ""),
             f"above 0 on {len(above)}" + (f" ({', '.join(above)})" if above else ""),
             f"undecided on {len(unsure)}" + (f" ({', '.join(unsure)}: the interval holds 0 or rests on one shared seed)"
                                              if unsure else "")]
    return "; ".join(parts) + (f"; no runs on {', '.join(missing)}." if missing else ".")
