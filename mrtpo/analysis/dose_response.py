"""Does localisation buy gain? The dose-response experiment of the evidence issue on the testbed's dial.

GDPO and MRTPO are trained on the dial bases (``RunConfig.dial``: one base per gated-noise rate of
``tiny.DIAL_SETTINGS``), and each setting's gain, MRTPO − GDPO on the held-out answer metric, is set against the
localisation measured on that setting's base (``benchmarks/tiny_models.py --dial``, rows ``dial/<setting>/...``
of ``results/tiny_models.csv``, read by ``report.dial_frame``):

* the setting's **check-region ratio** (PAPER.md §7): the ratio of pooled shares over the rewards whose check
  region holds at most half the response's tokens, each reward's shares counted once (a region holding more cannot
  exceed 1 / its token share, so those rewards are judged by the ratio outside their region and left out, as in
  the dial's own acceptance, ``report.dial_checks``);
* its **concentration**: the mean over the rewards of the smallest share of tokens holding 80% of the shift
  (``concentration80``), and ``concentration_x = 0.8 / concentration80`` (Fig. 6's "3x").

Each gain is ``evidence.compare`` (the paired t interval over the shared seeds, ``stats.paired_difference``); the
dependence of gain on localisation is the least-squares slope over settings (``stats.slope``) with a percentile
interval from bootstrap replicates over seeds (every setting is resampled with the same draws of seeds, since the
seeds are common to all settings), widened to hold the slope's normal interval from the points' own intervals (at
three seeds the bootstrap alone is too narrow). The dial's dose also lowers the base's quality (its reward at step
1, :func:`base_reward`), so the slope cannot isolate the placement of the advantage (:func:`base_sentence`). A setting enters the slope only with at
least two shared seeds (with one, its interval holds no seed-to-seed noise). The page also checks the reader's
rule of thumb (``mrtpo diagnose``): below 3x concentration and 2x ratio expect about half a point, i.e. a gain not
clearly above ``diagnose.RULE_GAIN``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from mrtpo.analysis.diagnose import RULE_CONCENTRATION_X, RULE_GAIN, RULE_RATIO
from mrtpo.analysis.diagnostics import read_localisation_notes
from mrtpo.analysis.evidence import compare, finished, seeds_text
from mrtpo.analysis.localisation import small_region_ratio
from mrtpo.analysis.report import answer_metric
from mrtpo.runs.results import Run

#: the issue's design: GDPO and MRTPO at >= 4 settings, >= 3 seeds each
DESIGN_SETTINGS, DESIGN_SEEDS = 4, 3
#: a setting enters the slope with at least this many shared seeds (with one, its interval holds no seed noise) ...
MIN_SHARED_SEEDS = 2
#: ... and no slope verdict is given on fewer such settings
MIN_SETTINGS = 3


def reward_localisation(dial: pd.DataFrame) -> pd.DataFrame:
    """Per task, setting and reward of a ``report.dial_frame``: the check-region ratio, the region's token share
    and the concentration (read from the ``localisation`` rows and their notes; NaN where the notes lack them)."""
    rows = dial[dial["figure"] == "localisation"]
    parsed = read_localisation_notes(rows["notes"])
    out = rows[["task", "setting", "reward"]].assign(ratio=rows["value"].astype(float), **parsed)
    return out.reset_index(drop=True)


def setting_localisation(dial: pd.DataFrame) -> pd.DataFrame:
    """Per task and setting of a ``report.dial_frame``: ``ratio`` (the check-region ratio pooled over the rewards
    whose region holds at most half the tokens, :func:`localisation.small_region_ratio`; NaN when none does),
    ``ratio_rewards`` (those rewards), ``concentration80`` (mean over the rewards) and ``concentration_x``
    (0.8 / concentration80)."""
    per = reward_localisation(dial)
    # a dial row holds one reward's pooled shares over the replayed responses, not its sums: each reward's shift
    # and tokens count once (the rewards are measured on the same responses)
    per = per.assign(label=per["reward"], shift_inside=per["ratio"] * per["token_share"], shift_total=1.0,
                     tokens_inside=per["token_share"], tokens_total=1.0)
    rows = []
    for (task, setting), g in per.groupby(["task", "setting"], sort=True):
        ratio, names = small_region_ratio(g)
        c80 = float(g["concentration80"].mean())
        rows.append({"task": task, "setting": float(setting), "ratio": ratio, "ratio_rewards": names, "concentration80": c80,
                     "concentration_x": 0.8 / c80 if c80 > 0 else math.nan})
    return pd.DataFrame(rows, columns=["task", "setting", "ratio", "ratio_rewards", "concentration80", "concentration_x"])


def dial_runs(task: str, settings, model: str = "tiny", steps: int | None = None, methods=("gdpo", "mrtpo"),
              **overrides) -> dict[float, dict[str, list[Run]]]:
    """{setting: {method: its finished runs on that dial base, in seed order}}; never trains
    (``benchmarks/book_runs.sh`` trains the grid)."""
    return {float(d): {m: finished(task, m, model, steps, dial=float(d), **overrides) for m in methods} for d in settings}


def rule_of_thumb(ratio: float, concentration_x: float, lo: float, hi: float, detectable: float = math.nan) -> str:
    """The reader's rule (``mrtpo diagnose``) at one setting: below both thresholds it expects about half a point
    (``RULE_GAIN``). It did not hold where the gain's interval lies wholly above that; where it lies below 0 the
    gain is below the rule's half a point; otherwise the runs cannot tell, which confirms nothing: "not
    distinguishable at this power" with the difference they would detect (``detectable``, e.g. at 80% power)."""
    from mrtpo.analysis.significance import not_distinguishable

    if ratio != ratio or concentration_x != concentration_x:
        return "localisation not measured"
    if ratio >= RULE_RATIO or concentration_x >= RULE_CONCENTRATION_X:
        return (f"does not apply (ratio {ratio:.2f}x, concentration {concentration_x:.1f}x: not below both "
                f"{RULE_RATIO:g}x and {RULE_CONCENTRATION_X:g}x)")
    if lo != lo or hi != hi:
        return "applies; no interval to judge it"
    if lo > RULE_GAIN:
        return f"did not hold: the gain is above {RULE_GAIN:g} (half a point)"
    if hi < 0:
        return f"below the rule's {RULE_GAIN:g}: MRTPO below GDPO"
    return not_distinguishable(detectable)


def base_reward(runs: dict[str, list[Run]], metric: str) -> tuple[float, int]:
    """(the base's training reward on ``metric`` at one dial setting, the runs it is read from): the mean over every
    run of the setting (both arms, every seed) of the reward's batch mean at its first step, the batch sampled by
    the dial base before any update (``rewards/<metric>/mean``; for a metric that is the mean of components, such
    as ``constraint_mean``, the mean of the components' columns, ``report.components``); NaN without runs."""
    from mrtpo.analysis.report import components, metrics

    found = [r for arm in runs.values() for r in arm]
    if not found:
        return math.nan, 0
    m = metrics(found)
    logged = [c.split("/")[1] for c in m.columns if c.startswith("rewards/") and c.endswith("/mean")]
    columns = [f"rewards/{name}/mean" for name in components(metric, logged)]
    if not columns:
        return math.nan, len(found)
    first = m[m["step"] == m.groupby(["method", "seed"])["step"].transform("min")]
    return float(first[columns].mean(axis=1).mean()), len(found)


class DoseResponse(NamedTuple):
    """One task's dose-response: ``table`` (one row per setting), ``slopes`` (gain against the ratio and against
    the concentration) and ``verdict`` (one sentence)."""

    table: pd.DataFrame
    slopes: pd.DataFrame
    verdict: str


def dose_response(task: str, gains: dict[float, dict], localisation: pd.DataFrame, treated: str = "mrtpo",
                  control: str = "gdpo", settings=(), base: dict[float, float] | None = None) -> DoseResponse:
    """The analysis from each setting's comparison (``gains``: setting -> ``evidence.compare(treated, control, ...,
    replicates=True)``; a setting without runs may be left out) and the task's rows of
    :func:`setting_localisation`. Every setting of either, and of ``settings``, appears in the table, with the
    base's reward there (``base``: setting -> :func:`base_reward`; NaN where not given)."""
    from mrtpo.analysis.significance import detectable_difference

    loc = localisation[localisation["task"] == task].set_index("setting")
    settings = sorted(set(loc.index) | set(gains) | {float(d) for d in settings})
    rows, reps = [], {}
    for d in settings:
        c = gains.get(d, {})
        ratio, cx = (float(loc.at[d, "ratio"]), float(loc.at[d, "concentration_x"])) if d in loc.index else (math.nan,) * 2
        lo, hi = c.get("lo", math.nan), c.get("hi", math.nan)
        shared = list(c.get("shared_seeds", []))
        rows.append({"task": task, "setting": d, "base reward": (base or {}).get(d, math.nan), "ratio": ratio,
                     "concentration80": float(loc.at[d, "concentration80"]) if d in loc.index else math.nan,
                     "concentration_x": cx, f"{treated} seeds": seeds_text(c.get("a_seeds", [])),
                     f"{control} seeds": seeds_text(c.get("b_seeds", [])), "shared seeds": len(shared),
                     "gain": c.get("diff", math.nan), "lo": lo, "hi": hi, "interval over": c.get("resampled", "no runs"),
                     "rule of thumb": rule_of_thumb(ratio, cx, lo, hi,
                                                    detectable_difference(c.get("sd", math.nan), len(shared)))})
        if len(shared) >= MIN_SHARED_SEEDS and len(c.get("replicates", [])):
            reps[d] = c["replicates"]
    columns = ["task", "setting", "base reward", "ratio", "concentration80", "concentration_x", f"{treated} seeds", f"{control} seeds",
               "shared seeds", "gain", "lo", "hi", "interval over", "rule of thumb"]
    table = pd.DataFrame(rows, columns=columns)
    slopes = _slopes(table, reps)
    verdict = " ".join(x for x in (_verdict(task, table, slopes, treated, control), base_sentence(table)) if x)
    return DoseResponse(table, slopes, verdict)


def _slopes(table: pd.DataFrame, reps: dict[float, np.ndarray]) -> pd.DataFrame:
    """Gain against each localisation figure over the settings that have replicates and that figure."""
    from mrtpo.analysis.stats import slope

    rows = []
    for x in ("ratio", "concentration_x"):
        use = table[table["setting"].isin(reps) & table[x].notna()]
        fit = slope(use[x], use["gain"], np.stack([reps[d] for d in use["setting"]]) if len(use) else None,
                    y_intervals=use[["lo", "hi"]].to_numpy(float))
        rows.append({"against": x, **fit, "settings": ", ".join(f"{d:g}" for d in use["setting"])})
    return pd.DataFrame(rows, columns=["against", "slope", "intercept", "lo", "hi", "points", "settings"])


def _verdict(task: str, table: pd.DataFrame, slopes: pd.DataFrame, treated: str, control: str) -> str:
    """One sentence: does the gain grow with the check-region ratio, or why that cannot be said yet."""
    judged = int(slopes.set_index("against").at["ratio", "points"])
    design = (len(table) >= DESIGN_SETTINGS and (table["shared seeds"] >= DESIGN_SEEDS).sum() >= DESIGN_SETTINGS)
    short = [f"{d:g} ({n} shared)" for d, n in zip(table["setting"], table["shared seeds"]) if n < DESIGN_SEEDS]
    below = ("" if design else f" (below the design of {DESIGN_SETTINGS} settings x {DESIGN_SEEDS} seeds per arm"
             + (f"; settings short of seeds: {', '.join(short)}" if short else "") + ")")
    if judged < MIN_SETTINGS:
        return (f"{task}: not enough settings/seeds to judge whether the gain grows with localisation: {judged} of "
                f"{len(table)} settings have {treated} and {control} runs on at least {MIN_SHARED_SEEDS} shared seeds "
                f"with a measured ratio, and a slope needs {MIN_SETTINGS}{below}.")
    s = slopes.set_index("against").loc["ratio"]
    if s["slope"] != s["slope"]:
        return f"{task}: no slope: the {judged} settings with runs measured the same ratio{below}."
    fit = f"slope {s['slope']:+.3f} per unit of ratio [{s['lo']:+.3f}, {s['hi']:+.3f}] over settings {s['settings']}"
    if s["lo"] > 0:
        head = f"the gain grows with localisation: {fit}"
    elif s["hi"] < 0:
        head = f"the gain shrinks as localisation grows: {fit}"
    else:
        head = (f"no dependence of the gain on localisation detected: {fit}, an interval holding 0 (not "
                "distinguishable from no dependence at this power: no evidence either way)")
    return f"{task}: {head}{below}."


def base_sentence(table: pd.DataFrame) -> str:
    """What the dial does besides localising: the base's reward (:func:`base_reward`) at each setting of a
    :class:`DoseResponse` table that has it. The dial's dose is the rate at which the warm-up corrupts a region,
    so it also lowers the base's quality; a gain set against the dose then varies with both, and the slope
    cannot isolate where the advantage is placed. "" with fewer than two settings measured."""
    known = table.dropna(subset=["base reward"])
    if len(known) < 2:
        return ""
    values = " / ".join(f"{v:.3f}" for v in known["base reward"])
    return (f"The dial moves the base's quality with the dose: its reward on the first batch (step 1, before any "
            f"update) is {values} at settings {', '.join(f'{d:g}' for d in known['setting'])}, so the gain is measured "
            "from bases of different quality and its slope on the ratio cannot isolate the placement of the advantage.")


def rule_sentence(table: pd.DataFrame) -> str:
    """One sentence from a :class:`DoseResponse` table: at how many settings the reader's rule of thumb applies
    (below both thresholds), and at which of those it did not hold, the gain fell below it, the runs could not
    tell, or there was no interval."""
    rule = table["rule of thumb"]
    applies = table[~rule.str.startswith(("does not apply", "localisation not measured"))]
    if applies.empty:
        return (f"The reader's rule of thumb (below {RULE_CONCENTRATION_X:g}x concentration and {RULE_RATIO:g}x ratio, "
                "about half a point) applies at no measured setting.")
    parts = [f"{label} at {', '.join(f'{d:g}' for d in applies[applies['rule of thumb'].str.startswith(key)]['setting'])}"
             for key, label in (("did not hold", "did not hold"), ("below the rule's", "below it (MRTPO below GDPO)"),
                                ("not distinguishable", "not distinguishable at this power"),
                                ("applies;", "not judged (no interval)"))
             if applies["rule of thumb"].str.startswith(key).any()]
    return (f"The reader's rule of thumb (below {RULE_CONCENTRATION_X:g}x concentration and {RULE_RATIO:g}x ratio, about "
            f"half a point) applies at setting{'s' if len(applies) > 1 else ''} {', '.join(f'{d:g}' for d in applies['setting'])}: "
            + "; ".join(parts) + ".")


def analyse(task: str, dial: pd.DataFrame, runs: dict[float, dict[str, list[Run]]], metric: str | None = None,
            treated: str = "mrtpo", control: str = "gdpo") -> DoseResponse:
    """:func:`dose_response` of the finished runs ``runs`` (:func:`dial_runs`; its settings are the table's) on
    ``metric`` (default the task's answer metric), against ``dial`` (a ``report.dial_frame``); trains nothing."""
    metric = metric or answer_metric(task)
    seeds = lambda found: sorted(r.seed for r in found)  # noqa: E731
    gains = {}
    for d, arms in runs.items():
        if arms[treated] and arms[control]:
            gains[d] = compare(arms[treated], arms[control], metric, replicates=True)
        elif arms[treated] or arms[control]:  # one arm trained so far: its seeds, no gain
            gains[d] = {"a_seeds": seeds(arms[treated]), "b_seeds": seeds(arms[control]), "resampled": "one arm only"}
    base = {d: base_reward(arms, metric)[0] for d, arms in runs.items()}
    return dose_response(task, gains, setting_localisation(dial), treated, control, settings=runs, base=base)


def missing_runs(task: str, runs: dict[float, dict[str, list[Run]]], seeds, model: str = "tiny",
                 steps: int | None = None) -> pd.DataFrame:
    """The planned runs, every setting and method of ``runs`` (:func:`dial_runs`) at each of ``seeds``, that have no
    finished folder, as `mrtpo train` arguments."""
    rows = [{"task": task, "setting": d, "method": m, "seed": s,
             "mrtpo train": f"--task {task} --method {m} --seed {s} --model {model} --dial {d:g}"
                            + (f" --steps {steps}" if steps else "")}
            for d, arms in runs.items() for m, found in arms.items() for s in seeds
            if s not in {r.seed for r in found}]
    return pd.DataFrame(rows, columns=["task", "setting", "method", "seed", "mrtpo train"])
