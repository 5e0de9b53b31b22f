"""What each of the book's comparisons can detect and what it cost: power tables over run folders (the paired
t-test's power and detectable difference are ``mrtpo.analysis.significance``; the comparisons and their runs,
``mrtpo.analysis.evidence``); the split of each arm's seed spread into evaluation noise and seed noise."""

from __future__ import annotations

import math

import pandas as pd

from mrtpo.analysis.evidence import BOOK_COMPARISONS, finished, paper_claim, run_eval_se, seed_values, seeds_text
from mrtpo.analysis.report import answer_metric, number
from mrtpo.runs.results import Run


def power_table(arms: dict[str, list[Run]], pairs, metric: str, delta: float = 0.05, power: float = 0.8,
                benchmark: str = "synthetic_test", decoding: str = "temp1", at=(3, 5), pooled: float | None = None
                ) -> pd.DataFrame:
    """Per pair (A, B): the standard deviation of A − B over seeds (``stats.sd_of_differences``: paired from two
    shared seeds, otherwise from the arms' own spread, otherwise from ``pooled``, by default the spread pooled over
    every arm of ``arms`` with two seeds or more), its 95% interval where it is paired (``significance.sd_interval``,
    chi-square with n − 1 degrees of freedom: 2 at 3 seeds, where the sd is known to within a factor of about 12),
    the difference detectable with ``power`` (two-sided paired t-test, alpha 0.05; ``significance``: the noncentral
    t) at the seeds shared now and at ``at`` seeds, the power for ``delta`` at the seeds shared now
    (``significance.power``; NaN below two shared seeds: no paired test exists) with that power at the sd interval's
    ends (the high sd gives the low power), and the seeds a difference of ``delta`` needs (at least 3)."""
    from mrtpo.analysis import significance, stats

    values = {m: seed_values(runs, metric, benchmark, decoding) for m, runs in arms.items() if runs}
    if pooled is None:
        pooled = stats.pooled_sd([v.values() for v in values.values()])
    now = f"power for {delta:g} now"
    columns = ["comparison", "sd of the difference", "measured", "sd 95% interval", "shared seeds", now,
               f"{now} (sd interval)", "detectable now", *(f"detectable at {n} seeds" for n in at),
               f"seeds for {delta:g} at {power:.0%} power"]
    rows = []
    for a, b in pairs:
        if a not in values or b not in values:
            continue
        sd, how = stats.sd_of_differences(values[a], values[b], fallback=pooled)
        shared = len(set(values[a]) & set(values[b]))
        sd_lo, sd_hi = significance.sd_interval(sd, shared - 1) if how == "paired" else (math.nan, math.nan)
        need = significance.seeds_for_power(sd, delta, power)
        row = {"comparison": f"{a} − {b}", "sd of the difference": sd, "measured": how, "shared seeds": shared,
               "sd 95% interval": f"[{sd_lo:.3f}, {sd_hi:.3f}], {shared - 1} df" if sd_lo == sd_lo else "—",
               now: significance.power(delta, sd, shared),
               f"{now} (sd interval)": (f"{significance.power(delta, sd_hi, shared):.2f} to "
                                        f"{significance.power(delta, sd_lo, shared):.2f}" if sd_lo == sd_lo else "—"),
               "detectable now": significance.detectable_difference(sd, shared, power)}
        row.update({f"detectable at {n} seeds": significance.detectable_difference(sd, n, power) for n in at})
        row[f"seeds for {delta:g} at {power:.0%} power"] = max(3, need) if need is not None else None
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def power_sentence(power: pd.DataFrame, delta: float = 0.05) -> str:
    """One sentence per row of a :func:`power_table`: the seeds ``delta`` needs, or why the power is unknown."""
    out = []
    for row in power.to_dict("records"):
        need = row.get(f"seeds for {delta:g} at 80% power")
        if need is None or need != need:
            out.append(f"{row['comparison']}: no arm has two seeds yet, so the seed-to-seed spread and the power are unknown.")
        else:
            out.append(f"{row['comparison']}: a difference of {delta:g} needs {int(need)} seeds per arm at 80% power "
                       f"(sd of the difference {row['sd of the difference']:.3f}, {row['measured']}"
                       + (f"; 95% interval {row['sd 95% interval']}" if row.get("sd 95% interval", "—") != "—" else "")
                       + "); "
                       f"3 seeds detect {number(row['detectable at 3 seeds'])}.")
    return "\n".join(out)


def book_power(model: str = "tiny", delta: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """Every comparison of :data:`BOOK_COMPARISONS` over the finished runs of ``model`` (nothing is trained): its
    :func:`power_table` row (the sd of the difference, how it was measured and its interval, the shared seeds, the
    power for ``delta`` (with its range over the sd's interval) and the difference detectable with ``power`` at those seeds and at 3, the seeds ``delta`` needs), the power
    for the paper's difference on our scale (:func:`paper_claim`; NaN where the paper has none), and what the
    comparison cost: the summed training time of both arms' runs, every seed present (``summary.json``; a run
    shared by several comparisons is counted in each), and how many runs recorded it. A pair with an arm
    without runs gets a row saying so, with NaN numbers. Where neither arm has two seeds, the sd comes from the
    seed spread pooled over every arm of the task in the book (each set of runs once: MRTPO at beta 0.5 is the
    main tables' MRTPO)."""
    from mrtpo.analysis import significance, stats

    task_arms = {}
    for c in BOOK_COMPARISONS:
        for arm in c.arms:
            if (c.task, arm) not in task_arms:
                task_arms[c.task, arm] = finished(c.task, arm, model)
    pooled = {}
    for task in {t for t, _ in task_arms}:
        groups = {tuple(sorted(str(r.path) for r in runs)): seed_values(runs, answer_metric(task)).values()
                  for (t, _), runs in task_arms.items() if t == task and runs}
        pooled[task] = stats.pooled_sd(groups.values())
    rows = []
    for c in BOOK_COMPARISONS:
        arms = {arm: task_arms[c.task, arm] for arm in c.arms}
        table = power_table(arms, c.pairs, answer_metric(c.task), delta, power, pooled=pooled[c.task]).set_index("comparison")
        for a, b in c.pairs:
            name = f"{a} − {b}"
            runs = arms[a] + arms[b]
            times = [r.summary.get("train_runtime_s") for r in runs]
            times = [t for t in times if t is not None and t == t]
            row = {"page": c.page, "task": c.task, "comparison": name,
                   "seeds": f"{seeds_text(sorted(r.seed for r in arms[a]))} / "
                            f"{seeds_text(sorted(r.seed for r in arms[b]))}",
                   "train hours": sum(times) / 3600 if times else math.nan, "runs timed": f"{len(times)} of {len(runs)}"}
            if name in table.index:
                found = table.loc[name]
                claimed = paper_claim(c.paper_table, a, b, c.paper_metric)[1] if c.paper_table else None
                row.update({k: found[k] for k in ("shared seeds", "sd of the difference", "measured", "sd 95% interval",
                                                  f"power for {delta:g} now", f"power for {delta:g} now (sd interval)",
                                                  "detectable now", "detectable at 3 seeds",
                                                  f"seeds for {delta:g} at {power:.0%} power")})
                row["power for the paper's difference now"] = (significance.power(claimed, found["sd of the difference"], int(found["shared seeds"]))
                                                               if claimed is not None else math.nan)
            else:
                row.update({"shared seeds": 0, "measured": "no runs of " + " or ".join(x for x in (a, b) if not arms[x])})
            rows.append(row)
    return pd.DataFrame(rows, columns=["page", "task", "comparison", "seeds", "shared seeds", "sd of the difference", "measured",
                                       "sd 95% interval", f"power for {delta:g} now", f"power for {delta:g} now (sd interval)",
                                       "power for the paper's difference now", "detectable now",
                                       "detectable at 3 seeds", f"seeds for {delta:g} at {power:.0%} power", "train hours",
                                       "runs timed"])


def book_power_sentence(table: pd.DataFrame, delta: float = 0.05) -> str:
    """What :func:`book_power` says in one paragraph: the comparisons with a paired test (two shared seeds or
    more), those with 80% power for ``delta``, the range of differences the book can detect, the comparisons
    without runs, and the summed cost."""
    if table.empty:
        return "The book has no comparison."

    def where(row) -> str:
        return f"{row['comparison']}, {row['page']} on {row['task']}"

    tested = table[table["shared seeds"] >= 2]
    powered = tested[tested[f"power for {delta:g} now"] >= 0.8]
    parts = [f"Of the book's {len(table)} comparisons, {len(tested)} rest on two shared seeds or more (a paired test "
             f"exists) and {len(powered)} of those have 80% power for a difference of {delta:g}"]
    if len(tested):
        lo, hi = tested["detectable now"].idxmin(), tested["detectable now"].idxmax()
        parts.append(f"at the seeds they have, the smallest difference detectable with 80% power runs from "
                     f"{tested.at[lo, 'detectable now']:.3f} ({where(tested.loc[lo])}) to "
                     f"{tested.at[hi, 'detectable now']:.3f} ({where(tested.loc[hi])})")
    one = table[table["shared seeds"] == 1]
    if len(one):
        three = one["detectable at 3 seeds"].dropna()
        parts.append(f"{len(one)} rest on one shared seed, where no paired test exists and the power is not defined"
                     + (f" (at 3 seeds, the measured spreads would detect {three.min():.3f} to {three.max():.3f})" if len(three) else ""))
    missing = table[table["measured"].str.startswith("no runs")]
    if len(missing):
        groups = []
        for (page, task), rows in missing.groupby(["page", "task"], sort=False):
            every = len(rows) == ((table["page"] == page) & (table["task"] == task)).sum()
            groups.append(f"{page} on {task}: " + (f"all {len(rows)}" if every and len(rows) > 1 else ", ".join(rows["comparison"])))
        parts.append(f"{len(missing)} have no runs yet ({'; '.join(groups)})")
    parts.append(f"the comparisons' runs took {table['train hours'].sum():.1f} hours of training, counting a run "
                 "shared by several comparisons in each")
    return "; ".join(parts) + "."


def noise_table(arms: dict[str, list[Run]], metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1") -> pd.DataFrame:
    """Per arm: seeds, seed-to-seed std of the metric, the evaluation's own s.e. (:func:`run_eval_se`: the sampling
    of responses within the shared evaluation prompts, root mean square over runs) and the seed component once that
    noise is taken out (``stats.noise_components``)."""
    from mrtpo.analysis import stats

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
