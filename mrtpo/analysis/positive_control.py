"""The positive control (issue 42): can placing the advantage help at all on a task, and how much of that gain
MRTPO captures.

The ``region`` arm places each reward's advantage on the tokens its verifier reads (the check region), the
placement MRTPO's relevance is meant to find; trained from the same base on the same seeds as GDPO and MRTPO, it
bounds what placement can buy at this scale. Per task, over the seeds the three arms share:

* "can placement help here at all?": region − GDPO, the paired t interval over seeds and its p (``evidence.compare``),
  Holm-adjusted over the tasks shown (its own family, outside the book's: adding it would move every other adjusted
  p). A gap only when the adjusted p is below 0.05;
* "the share of the achievable gain MRTPO captures": ``(MRTPO − GDPO) / (region − GDPO)``, the ratio of the mean
  per-seed differences, with a percentile interval from a bootstrap over the shared seeds (each draw resamples
  the seeds jointly for both differences). Undefined where region − GDPO is not a gap: a ratio over a
  denominator that may be 0 has no interval.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mrtpo.analysis import significance
from mrtpo.analysis.evidence import compare, finished, interval_text, seed_values, seeds_text
from mrtpo.analysis.report import answer_metric
from mrtpo.runs.results import Run

#: the placement dial's settings between MRTPO's relevance (0) and the check region (1): ``MRTPOConfig.region_blend``
BLEND_SETTINGS = (0.25, 0.5, 0.75)
#: bootstrap draws of the share's interval, and their seed (the same draws on every build)
N_BOOT, BOOT_SEED = 4000, 0


def captured_share(gain_mrtpo: np.ndarray, gain_region: np.ndarray, n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                   level: float = 0.95) -> tuple[float, float, float]:
    """(share, lo, hi) of ``mean(gain_mrtpo) / mean(gain_region)`` over paired per-seed differences (S,), with a
    percentile interval from ``n_boot`` draws of the S seeds with replacement (both differences of a seed drawn
    together). Draws whose denominator is 0 have no ratio and are dropped; NaN bounds below two seeds."""
    a, b = np.asarray(gain_mrtpo, float), np.asarray(gain_region, float)
    share = float(a.mean() / b.mean()) if len(b) and b.mean() != 0 else math.nan
    if len(a) < 2:
        return share, math.nan, math.nan
    counts = np.random.default_rng(seed).multinomial(len(a), np.full(len(a), 1 / len(a)), size=n_boot)
    num, den = counts @ a, counts @ b
    ratios = num[den != 0] / den[den != 0]
    if not len(ratios):
        return share, math.nan, math.nan
    lo, hi = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
    return share, float(lo), float(hi)


def positive_control(tasks=("sql", "tool", "if"), model: str = "tiny") -> pd.DataFrame:
    """One row per task: the seeds region, GDPO and MRTPO share, region − GDPO (difference, paired t interval, p,
    Holm-adjusted p over the tasks that have a test, verdict) and MRTPO's captured share with its interval, or why
    it is undefined. Reads finished run folders only (nothing is trained)."""
    rows = []
    for task in tasks:
        arms = {arm: finished(task, arm, model) for arm in ("region", "gdpo", "mrtpo")}
        row = {"task": task, "seeds": "", "region − GDPO": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan,
               "share": math.nan, "share lo": math.nan, "share hi": math.nan}
        missing = [arm for arm, runs in arms.items() if not runs]
        if missing:
            rows.append({**row, "note": f"no finished {', '.join(missing)} runs"})
            continue
        metric = answer_metric(task)
        c = compare(arms["region"], arms["gdpo"], metric)
        values = {arm: seed_values(runs, metric) for arm, runs in arms.items()}
        shared = sorted(set.intersection(*(set(v) for v in values.values())))
        row.update({"seeds": seeds_text(shared), "region − GDPO": c["diff"], "lo": c["lo"], "hi": c["hi"], "p": c["p"]})
        gain = {arm: np.array([values[arm][s] - values["gdpo"][s] for s in shared]) for arm in ("mrtpo", "region")}
        share, lo, hi = captured_share(gain["mrtpo"], gain["region"])
        note = "" if c["p"] == c["p"] else f"no test: the three arms share seed(s) {seeds_text(shared) or 'none'}"
        rows.append({**row, "share": share, "share lo": lo, "share hi": hi, "note": note})
    table = pd.DataFrame(rows)
    tested = table["p"].notna()
    table["p (Holm)"] = math.nan
    if tested.any():
        table.loc[tested, "p (Holm)"] = significance.holm(table.loc[tested, "p"].to_numpy())
    table["placement helps"] = [
        ("no test" if not ok else "yes: a gap" if adj < 0.05 and d > 0 else "no: a gap the other way" if adj < 0.05
         else "not distinguishable at this power")
        for ok, adj, d in zip(tested, table["p (Holm)"], table["region − GDPO"])]
    defined = table["placement helps"].eq("yes: a gap")
    table.loc[~defined, "note"] = [n or "share undefined: region − GDPO is not a gap" for n in table.loc[~defined, "note"]]
    return table


def view(table: pd.DataFrame) -> pd.DataFrame:
    """The landing page's two rows per task: the question, the answer with its interval, the verdict."""
    out = []
    for r in table.to_dict("records"):
        helps = (interval_text(r["region − GDPO"], r["lo"], r["hi"]) + f" over seeds {r['seeds']}; p {r['p']:.4f}, "
                 f"Holm-adjusted {r['p (Holm)']:.4f}" if r["p"] == r["p"] else r["note"] or "no test (one shared seed)")
        share = (interval_text(r["share"], r["share lo"], r["share hi"], 2, sign="") + " (bootstrap over seeds)"
                 if r["placement helps"] == "yes: a gap" else r["note"] or "undefined")
        out.append({"task": r["task"], "question": "can placement help here at all? (region − GDPO)", "answer": helps,
                    "verdict": r["placement helps"]})
        out.append({"task": r["task"], "question": "share of the achievable gain MRTPO captures, "
                    "(MRTPO − GDPO) / (region − GDPO)", "answer": share, "verdict": ""})
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------------------------------
# the placement dial: gain against placement quality at one base

#: the dial's settings with its two ends: MRTPO's relevance (0, the mrtpo arm) and the check region (1, the region arm)
DIAL = (0.0, *BLEND_SETTINGS, 1.0)


def blend_runs(task: str, model: str = "tiny") -> dict[float, dict[str, list[Run]]]:
    """{lambda: {"placed": the finished runs placed at lambda, "gdpo": GDPO's}} for every setting of :data:`DIAL`:
    ``mrtpo`` at lambda 0, ``mrtpo`` with ``region_blend=lambda`` between, ``region`` at 1; never trains."""
    gdpo = finished(task, "gdpo", model)
    placed = {lam: (finished(task, "mrtpo", model) if lam == 0 else finished(task, "region", model) if lam == 1
                    else finished(task, "mrtpo", model, region_blend=lam)) for lam in DIAL}
    return {lam: {"placed": runs, "gdpo": gdpo} for lam, runs in placed.items()}


def placement_ratio(runs: list[Run], lam: float) -> tuple[float, str]:
    """(the check-region ratio of the placement at ``lam``, where it was measured). Above 0 the trainer logs the
    ratio of the weights' placement on every step (``mrtpo/region_ratio``: pooled over the rewards, over the pairs
    whose advantage varies): the mean over steps, then over seeds. At 0 (MRTPO, which reads no region while
    training) the ratio of the shift in its saved profiles, pooled over seeds (``localisation.region_table``)."""
    if not runs:
        return math.nan, "no runs"
    if lam > 0:
        per_seed = [float(r.metrics["mrtpo/region_ratio"].mean()) for r in runs if "mrtpo/region_ratio" in r.metrics]
        return (float(np.mean(per_seed)), "logged in training") if per_seed else (math.nan, "not logged")
    from mrtpo.analysis.localisation import region_table, seeds_localisation

    return float(region_table(seeds_localisation(runs))["ratio"].iloc[0]), "saved profiles"


def placement_dial(task: str, model: str = "tiny"):
    """The placement dial of ``task`` as a ``dose_response.DoseResponse``: per setting, placed − GDPO on the answer
    metric (paired t interval over the shared seeds, bootstrap replicates) against the placement's measured
    check-region ratio (:func:`placement_ratio`), the least-squares slope of gain on ratio with its interval and
    the verdict; every setting starts from the same base, so unlike the testbed's dial the slope is not confounded
    by the base's quality. Reads finished runs only."""
    from mrtpo.analysis.dose_response import dose_response

    metric = answer_metric(task)
    runs = blend_runs(task, model)
    gains, loc = {}, []
    for lam, arms in runs.items():
        if arms["placed"] and arms["gdpo"]:
            gains[lam] = compare(arms["placed"], arms["gdpo"], metric, replicates=True)
        ratio, where = placement_ratio(arms["placed"], lam)
        loc.append({"task": task, "setting": lam, "ratio": ratio, "measured": where, "concentration80": math.nan,
                    "concentration_x": math.nan})
    result = dose_response(task, gains, pd.DataFrame(loc), treated="placed", settings=DIAL)
    measured = pd.DataFrame(loc).set_index("setting")["measured"]
    return result._replace(table=result.table.assign(**{"ratio measured on": result.table["setting"].map(measured)}))
