"""The family of comparisons the book reports, tested together: every distinct (task, A − B) of the result pages'
verdict tables (``evidence.BOOK_COMPARISONS``; a pair shown on two pages is one comparison), each with its paired
t-test over the seeds both arms share, and Holm's correction over those with a test (``significance.holm``).

With m comparisons tested at 0.05 each and no effect anywhere, about 0.05 m of them would show a "gap" by chance;
Holm keeps the chance of even one false gap in the family at or below 0.05. A difference is therefore called a gap
only when its Holm-adjusted p is below 0.05 (and its 95% interval excludes 0, which a raw p below 0.05 implies).
A comparison resting on one shared seed has no test and is not counted in m.
"""

from __future__ import annotations

import math

import pandas as pd

from mrtpo.analysis.evidence import BOOK_COMPARISONS, compare, finished, interval_text
from mrtpo.analysis.report import answer_metric

#: the family's error rate: a gap needs a Holm-adjusted p below it
ALPHA = 0.05
#: the power at which the detectable difference of a comparison is stated
POWER = 0.8

COLUMNS = ["task", "comparison", "pages", "shared seeds", "diff", "lo", "hi", "sd", "p (paired t)", "p (Holm)", "gap",
           "detectable", "detectable in the family"]


def members() -> list[tuple[str, str, str, list[str]]]:
    """The family's comparisons in the order the book first shows them: (task, A, B, the pages that show it)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for c in BOOK_COMPARISONS:
        for a, b in c.pairs:
            pages = found.setdefault((c.task, a, b), [])
            if c.page not in pages:
                pages.append(c.page)
    return [(task, a, b, pages) for (task, a, b), pages in found.items()]


def family_table(comparisons: list[dict]) -> pd.DataFrame:
    """The family from each comparison's ``evidence.compare`` result plus ``task``, ``comparison`` ("A − B") and
    ``pages`` (None in place of a result: an arm without runs): per row the difference, its 95% paired t interval,
    the sd of the per-seed differences, the raw two-sided paired t p, Holm's adjusted p over the rows with a
    p (``significance.holm``), whether it is a gap (adjusted p < :data:`ALPHA`), and the difference detectable with
    :data:`POWER` at the shared seeds (``significance.detectable_difference`` from the measured sd: two-sided at
    0.05, and at 0.05 / m, the level Holm's first step tests at, where m is the number of tests in the family)."""
    from mrtpo.analysis import significance

    rows = []
    for c in comparisons:
        r = c.get("result") or {}
        rows.append({"task": c["task"], "comparison": c["comparison"], "pages": ", ".join(c["pages"]),
                     "shared seeds": len(r.get("shared_seeds", [])), "diff": r.get("diff", math.nan),
                     "lo": r.get("lo", math.nan), "hi": r.get("hi", math.nan), "sd": r.get("sd", math.nan),
                     "p (paired t)": r.get("p", math.nan)})
    table = pd.DataFrame(rows, columns=COLUMNS[:9])
    table["p (Holm)"] = significance.holm(table["p (paired t)"].to_numpy(float))
    table["gap"] = table["p (Holm)"] < ALPHA
    m = int(table["p (paired t)"].notna().sum())
    table["detectable"] = [significance.detectable_difference(sd, n, POWER, ALPHA)
                           for sd, n in zip(table["sd"], table["shared seeds"])]
    table["detectable in the family"] = [significance.detectable_difference(sd, n, POWER, ALPHA / m) if m else math.nan
                                         for sd, n in zip(table["sd"], table["shared seeds"])]
    return table[COLUMNS]


def book_family(model: str = "tiny") -> pd.DataFrame:
    """:func:`family_table` of every comparison of :func:`members` over the finished runs of ``model`` (nothing is
    trained), on each task's held-out answer metric at temperature 1."""
    runs: dict[tuple[str, str], list] = {}
    comparisons = []
    for task, a, b, pages in members():
        for arm in (a, b):
            if (task, arm) not in runs:
                runs[task, arm] = finished(task, arm, model)
        both = runs[task, a] and runs[task, b]
        comparisons.append({"task": task, "comparison": f"{a} − {b}", "pages": pages,
                            "result": compare(runs[task, a], runs[task, b], answer_metric(task)) if both else None})
    return family_table(comparisons)


def adjusted(family: pd.DataFrame, task: str) -> pd.DataFrame:
    """``task``'s comparisons in the family, indexed by "A − B", with their Holm-adjusted p and the difference
    detectable in the family (for ``evidence.verdict_table``)."""
    return family[family["task"] == task].set_index("comparison")[["p (Holm)", "detectable in the family"]]


def family_view(family: pd.DataFrame) -> pd.DataFrame:
    """The family as the landing and reproduce pages show it, one row per comparison (short headers: the text column
    is narrow; the pages each comparison appears on are in ``family["pages"]``): shared seeds, the sd of the
    differences with its degrees of freedom, A − B with its 95% paired t interval, raw and Holm-adjusted p, whether
    it is a gap, the difference detectable with 80% power alone and within the family."""
    return pd.DataFrame({
        "task": family["task"], "comparison": family["comparison"], "seeds": family["shared seeds"],
        "sd (df)": [f"{sd:.3f} ({n - 1})" if sd == sd else "—" for sd, n in zip(family["sd"], family["shared seeds"])],
        "A − B [95%]": [interval_text(d, lo, hi) for d, lo, hi in zip(family["diff"], family["lo"], family["hi"])],
        "p": family["p (paired t)"].round(4), "p Holm": family["p (Holm)"].round(4),
        "gap": family["gap"].map({True: "yes", False: "no"}).where(family["p (paired t)"].notna(), "no test"),
        "detectable": family["detectable"].round(3), "in family": family["detectable in the family"].round(3)})


def family_sentence(family: pd.DataFrame) -> str:
    """What the family says: its size, the tests in it, the raw p below 0.05 (and how many of those chance alone
    would give), the gaps after Holm, the smallest raw and adjusted p, the range of differences detectable at the
    family's level, and the comparisons without a test."""
    tested = family[family["p (paired t)"].notna()]
    m = len(tested)
    if not m:
        return f"The book reports {len(family)} comparisons; none has two shared seeds, so none is tested."
    raw = tested[tested["p (paired t)"] < ALPHA]
    gaps = tested[tested["gap"]]
    best = tested.loc[tested["p (paired t)"].idxmin()]
    untested = family[family["p (paired t)"].isna()]
    parts = [f"The book reports {len(family)} distinct comparisons; {m} rest on two shared seeds or more and are tested "
             f"(two-sided paired t over the shared seeds)",
             f"{len(raw)} have a raw p below {ALPHA:g}, where chance alone would give about {ALPHA * m:.1f}",
             f"after Holm's correction {len(gaps)} remain"
             + (": " + "; ".join(f"{r['task']} {r['comparison']} {r['diff']:+.3f} (p {r['p (paired t)']:.4f}, "
                                 f"adjusted {r['p (Holm)']:.4f})" for _, r in gaps.iterrows()) if len(gaps) else ""),
             f"the smallest raw p is {best['p (paired t)']:.4f} ({best['task']} {best['comparison']}), "
             f"{best['p (Holm)']:.4f} once adjusted"]
    sizes = tested.dropna(subset=["detectable in the family"])
    if len(sizes):
        lo, hi = sizes.loc[sizes["detectable in the family"].idxmin()], sizes.loc[sizes["detectable in the family"].idxmax()]
        parts.append(f"at the family's level (0.05 / {m}) the seeds present detect with 80% power differences from "
                     f"{lo['detectable in the family']:.3f} ({lo['task']} {lo['comparison']}, {lo['shared seeds']} seeds) "
                     f"to {hi['detectable in the family']:.3f} ({hi['task']} {hi['comparison']}, {hi['shared seeds']} seeds)")
    if len(untested):
        parts.append(f"{len(untested)} have no test (one shared seed, or an arm without runs: "
                     + ", ".join(f"{r.task} {r.comparison}" for r in untested.itertuples()) + ")")
    return "; ".join(parts) + "."
