"""The positive control (issue 42): can placing the advantage help at all on a task, and how much of that gain
MRTPO captures.

The ``region`` arm places each reward's advantage on the tokens its verifier reads (the check region), the
placement MRTPO's relevance is meant to find; trained from the same base on the same seeds as GDPO and MRTPO, it
bounds what placement can buy at this scale. Per task, over the seeds the three arms share:

* "can placement help here at all?": region − GDPO, the paired t interval over seeds and its p (``evidence.compare``),
  Holm-adjusted over the tasks shown (its own family, outside the book's: adding it would move every other adjusted
  p); for a real model, per real benchmark, with the adjusted p of the trained section (``trained.verdicts``), whose
  family already holds region − GDPO. A gap only when the adjusted p is below 0.05;
* "the share of the achievable gain MRTPO captures": ``(MRTPO − GDPO) / (region − GDPO)``, the ratio of the mean
  per-seed differences, with a percentile interval from a bootstrap over the shared seeds (each draw resamples
  the seeds jointly for both differences). Undefined where region − GDPO is not a gap: a ratio over a
  denominator that may be 0 has no interval.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mrtpo.analysis import significance, trained
from mrtpo.analysis.evidence import compare, finished, interval_text, seed_values, seeds_text
from mrtpo.analysis.report import answer_metric
from mrtpo.files.paths import DataNotAvailable
from mrtpo.models.spec import ModelNotAvailable
from mrtpo.runs import runner
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
    """One row per task and benchmark its runs are judged on: the seeds region, GDPO and MRTPO share, region − GDPO
    (difference, paired t interval, p, Holm-adjusted p, verdict) and MRTPO's captured share with its interval, or
    why it is undefined. At the tiny scale a task is judged on its ``answer_metric`` on the synthetic test split and
    the tasks are one family (Holm over those that have a test); at the real scale on each real benchmark's tested
    accuracy, with region − GDPO read from the trained section's verdicts (:func:`mrtpo.analysis.trained.verdicts`)
    and so adjusted over that section's family: the same comparison gets one verdict wherever it is shown. Reads
    finished run folders only (nothing is trained)."""
    table = pd.DataFrame([row for task in tasks for row in task_rows(task, model)])
    over_tasks = table["p"].notna() & table["p (Holm)"].isna()
    if over_tasks.any():
        table.loc[over_tasks, "p (Holm)"] = significance.holm(table.loc[over_tasks, "p"].to_numpy())
    table["placement helps"] = [
        ("no test" if p != p else "yes: a gap" if adj < 0.05 and d > 0 else "no: a gap the other way" if adj < 0.05
         else "not distinguishable at this power")
        for p, adj, d in zip(table["p"], table["p (Holm)"], table["region − GDPO"])]
    defined = table["placement helps"].eq("yes: a gap")
    table.loc[~defined, "note"] = [n or "share undefined: region − GDPO is not a gap" for n in table.loc[~defined, "note"]]
    return table


def task_rows(task: str, model: str) -> list[dict]:
    """:func:`tiny_rows` or :func:`real_rows` by the scale ``model`` runs ``task`` at; one row saying what is missing
    where the model or the benchmark files are not on this machine (a run's identity holds their content)."""
    try:
        real = runner.resolve(task, "gdpo", model).scale != "tiny"
        return real_rows(task, model) if real else tiny_rows(task, model)
    except (ModelNotAvailable, DataNotAvailable) as exc:
        return [{**empty_row(task, ""), "note": f"no run can be looked up here: {exc}"}]


def empty_row(task: str, benchmark: str) -> dict:
    """A row of :func:`positive_control` with nothing measured yet (NaN numbers, no seeds, no note)."""
    return {"task": task, "benchmark": benchmark, "seeds": "", "region − GDPO": math.nan, "lo": math.nan,
            "hi": math.nan, "p": math.nan, "p (Holm)": math.nan, "share": math.nan, "share lo": math.nan,
            "share hi": math.nan, "note": ""}


def share_of(arms: dict[str, list[Run]], *judged) -> dict:
    """The seeds the three arms share on ``judged`` (``seed_values``' metric, benchmark, decoding) and
    :func:`captured_share` of the per-seed gains over GDPO on them."""
    values = {arm: seed_values(runs, *judged) for arm, runs in arms.items()}
    shared = sorted(set.intersection(*(set(v) for v in values.values())))
    gain = {arm: np.array([values[arm][s] - values["gdpo"][s] for s in shared]) for arm in ("mrtpo", "region")}
    share, lo, hi = captured_share(gain["mrtpo"], gain["region"])
    return {"seeds": seeds_text(shared), "share": share, "share lo": lo, "share hi": hi,
            "note": "" if len(shared) >= 2 else f"no test: the three arms share seed(s) {seeds_text(shared) or 'none'}"}


def tiny_rows(task: str, model: str) -> list[dict]:
    """The task's one row at the tiny scale: region − GDPO on ``answer_metric`` (``evidence.compare``), no
    adjusted p yet (the tasks are corrected together)."""
    arms = {arm: finished(task, arm, model) for arm in ("region", "gdpo", "mrtpo")}
    row = empty_row(task, "synthetic_test")
    if missing := [arm for arm, runs in arms.items() if not runs]:
        return [{**row, "note": f"no finished {', '.join(missing)} runs"}]
    metric = answer_metric(task)
    c = compare(arms["region"], arms["gdpo"], metric)
    return [{**row, **share_of(arms, metric), "region − GDPO": c["diff"], "lo": c["lo"], "hi": c["hi"], "p": c["p"]}]


def real_rows(task: str, model: str) -> list[dict]:
    """One row per real benchmark the task's runs of ``model`` were evaluated on: region − GDPO as the trained
    section tests it (prompt-level strict, greedy; its Holm-adjusted p over that section's tests)."""
    arms = trained.trained_arms(task, model)
    placed = {arm: arms[arm] for arm in ("region", "gdpo", "mrtpo")}
    if missing := [arm for arm, runs in placed.items() if not runs]:
        return [{**empty_row(task, ""), "note": f"no finished {', '.join(missing)} runs"}]
    tested = trained.verdicts(arms).query("comparison == 'region − gdpo'")
    return [{**empty_row(task, t["benchmark"]), **share_of(placed, trained.ACCURACIES[0], t["benchmark"], trained.DECODING),
             "region − GDPO": t["diff"], "lo": t["lo"], "hi": t["hi"], "p": t["p (paired t)"], "p (Holm)": t["p (Holm)"]}
            for t in tested.to_dict("records")]


def view(table: pd.DataFrame) -> pd.DataFrame:
    """The landing page's two rows per task and benchmark: the question, the answer with its interval, the verdict."""
    out = []
    for r in table.to_dict("records"):
        helps = (interval_text(r["region − GDPO"], r["lo"], r["hi"]) + f" over seeds {r['seeds']}; p {r['p']:.4f}, "
                 f"Holm-adjusted {r['p (Holm)']:.4f}" if r["p"] == r["p"] else r["note"] or "no test (one shared seed)")
        share = (interval_text(r["share"], r["share lo"], r["share hi"], 2, sign="") + " (bootstrap over seeds)"
                 if r["placement helps"] == "yes: a gap" else r["note"] or "undefined")
        out.append({"task": r["task"], "benchmark": r["benchmark"], "question": "can placement help here at all? "
                    "(region − GDPO)", "answer": helps, "verdict": r["placement helps"]})
        out.append({"task": r["task"], "benchmark": r["benchmark"], "question": "share of the achievable gain MRTPO captures, "
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
