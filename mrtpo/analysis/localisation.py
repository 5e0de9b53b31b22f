"""Localisation claims (Table 4, Fig. 6): the check-region ratio of PAPER.md §7 per constraint type and state,
with a bootstrap interval over the seeds (clusters of saved relevance profiles), and Table 4's rows as verdicts."""

from __future__ import annotations

import math

import pandas as pd

from mrtpo.analysis.evidence import interval_text, seeds_text
from mrtpo.analysis.report import localisation, paper
from mrtpo.runs.results import Run


def seeds_localisation(runs: list[Run]) -> pd.DataFrame:
    """:func:`report.localisation` of every run, one frame with a ``seed`` column (the runs of one arm)."""
    frames = [localisation(r).assign(seed=r.seed) for r in runs]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["seed"])


def _interval_clusters(g: pd.DataFrame) -> tuple[pd.Series, str]:
    """(the cluster of each row for a bootstrap interval, what the interval covers): the seeds where the rows hold
    two or more (a seed's profiles share its run, so the seed-to-seed spread is only in a bootstrap over seeds);
    otherwise the profiles (a profile's rows, one per reward, share its response)."""
    if "seed" in g and g["seed"].nunique() >= 2:
        return g["seed"], "seeds"
    if "profile" in g:
        return g["profile"], "profiles of one seed"
    return pd.Series(range(len(g)), index=g.index), "rows of one seed"


def profile_count(g: pd.DataFrame) -> int:
    """The profiles a localisation frame's rows come from (a profile has a row per reward): distinct (seed,
    profile) where the frame has those columns, otherwise its rows."""
    keys = [c for c in ("seed", "profile") if c in g]
    return len(g.drop_duplicates(keys)) if "profile" in g else len(g)


def region_table(loc: pd.DataFrame, by=(), level: float = 0.95) -> pd.DataFrame:
    """Where the shift lands, per group of the ``by`` columns of a localisation frame (one row for all of it when
    ``by`` is empty): profiles (:func:`profile_count`), seeds, the region's share of the shift and of the tokens
    pooled over the group's responses (``diagnostics.pooled_shares``), the check-region ratio
    (``diagnostics.check_region_ratio``, PAPER.md §7) with its ``level`` percentile interval from a bootstrap over
    clusters of the group's rows (``stats.cluster_bootstrap_interval``: over seeds where the group has two or more,
    otherwise over profiles; "interval over" says which), and the mean concentration (share of tokens holding 80%
    of the shift)."""
    from mrtpo.analysis import stats
    from mrtpo.method.regions import check_region_ratio, pooled_shares

    columns = ("shift_inside", "shift_total", "tokens_inside", "tokens_total")
    rows = []
    for key, g in (loc.groupby(list(by), sort=True) if len(by) else [((), loc)]):
        arrays = {c: g[c].to_numpy(float) for c in columns}
        shift, tokens = pooled_shares(arrays)
        clusters, over = _interval_clusters(g)
        lo, hi = stats.cluster_bootstrap_interval(lambda i: check_region_ratio({c: a[i] for c, a in arrays.items()}),
                                                  clusters.to_numpy(), level=level)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "profiles": profile_count(g),
                     "seeds": seeds_text(sorted(g["seed"].unique())) if "seed" in g else "—",
                     "shift share": shift, "token share": tokens, "ratio": check_region_ratio(arrays), "lo": lo, "hi": hi,
                     "interval over": over, "concentration80": float(g["concentration80"].mean()) if len(g) else math.nan})
    return pd.DataFrame(rows, columns=[*by, "profiles", "seeds", "shift share", "token share", "ratio", "lo", "hi",
                                       "interval over", "concentration80"])


def constraint_table(loc: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Table 4's rows of a localisation frame with a ``state`` column: :func:`region_table` over all constraints,
    then per constraint type (its name without its group), each split by state."""
    table = pd.concat([region_table(loc.assign(label="all"), ["label", "state"], level),
                       region_table(loc, ["label", "state"], level)], ignore_index=True)
    return table.assign(label=table["label"].str.split(":").str[-1])


def concentration_table(loc: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6's rows of a localisation frame with a ``task`` column, per task and reward: the responses, the mean
    share of tokens holding 80% of the shift, the check-region ratio and the share of the shift inside
    ``<think>`` (both pooled over the responses, PAPER.md §7), and the paper's range of the share of tokens."""
    from mrtpo.method.regions import check_region_ratio

    groups = loc.groupby(["task", "reward"])
    table = groups.agg(**{"responses": ("step", "count"), "tokens holding 80% of the shift": ("concentration80", "mean")})
    table["check-region ratio"] = [check_region_ratio(group) for _, group in groups]  # in the table's (sorted) order
    table = table.assign(**{"shift in <think>": groups["think_shift"].sum() / groups["shift_total"].sum()}).reset_index()
    f6 = paper("fig6_concentration").set_index("task")
    paper_task = {"sql": "text-to-SQL", "tool": "tool calling"}  # the paper's Fig. 6 has no instruction following
    table["paper: tokens holding 80%"] = [
        f"{f6.at[paper_task[t], 'tokens_for_80pct_low'] / 100:.3f}–{f6.at[paper_task[t], 'tokens_for_80pct_high'] / 100:.3f}"
        if t in paper_task else "—" for t in table["task"]]
    return table


#: a region holding more than this share of the tokens cannot show localisation by its ratio (which cannot
#: exceed 1 / its token share): such rewards are judged by the ratio outside their region instead
SMALL_REGION = 0.5


def small_region_ratio(loc: pd.DataFrame, by: str = "label") -> tuple[float, str]:
    """(the check-region ratio pooled over the rows of every ``by`` group whose region holds at most
    :data:`SMALL_REGION` of the tokens, those groups' names joined by ", "); NaN and "" when no region is that
    small. ``loc``: a localisation frame (``shift_inside``, ``shift_total``, ``tokens_inside``, ``tokens_total`` per
    row, e.g. per (profile, reward)). A group's token share is pooled over its rows, and the ratio is
    ``diagnostics.check_region_ratio`` of the small groups' rows together, the ratio of pooled shares of PAPER.md
    §7 — not the mean of the groups' ratios, in which the smallest regions weigh as much as the rest."""
    from mrtpo.method.regions import check_region_ratio

    totals = loc.groupby(by, sort=True)[["tokens_inside", "tokens_total"]].sum()
    small = totals.index[totals["tokens_inside"] <= SMALL_REGION * totals["tokens_total"]]
    if not len(small):
        return math.nan, ""
    return check_region_ratio(loc[loc[by].isin(small)]), ", ".join(map(str, small))


#: a binary verifier's reward -> the constraint state of Table 4
STATES = {1.0: "satisfied", 0.0: "violated"}
#: Table 4's rows named by a constraint type -> that type's ``label`` (``task.reward_label``)
TABLE4_TYPES = {"bullet lines": "detectable_format:number_bullet_lists", "end phrase": "startend:end_checker"}


def localisation_verdicts(loc: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Table 4's claims against a localisation frame with a ``state`` column (:data:`STATES`): per row of
    ``results/paper/table4_localization.csv`` — "all satisfied" / "all violated" (every constraint type in that
    state) and the rows named by one constraint type (:data:`TABLE4_TYPES`, both states) — the paper's ratios, ours
    with its interval (:func:`region_table`: over seeds where there are two), the profiles and seeds, and the verdict against no localisation
    (ratio 1; ``stats.verdict`` with the paper's median ratio as the claim). A paper row whose ratio is 1 (the
    region is the whole response) claims nothing: its verdict is "—"."""
    from mrtpo.analysis import stats

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
                     "profiles": profile_count(sel), "seeds": r["seeds"] if r is not None else "none",
                     "interval over": r["interval over"] if r is not None else "—",
                     "verdict": stats.verdict(lo, hi, claimed, 1.0) if claimed > 1 else "—",
                     "ratio": ratio, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)
