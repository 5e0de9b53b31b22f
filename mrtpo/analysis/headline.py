"""The landing page's table: each of the paper's headline claims against the committed runs, with the verdict
(the comparisons of arms are ``mrtpo.analysis.evidence`` and ``mrtpo.analysis.multiplicity``; the curves' claims ``mrtpo.analysis.claims``;
localisation ``mrtpo.analysis.localisation``)."""

from __future__ import annotations

import math

import pandas as pd

from mrtpo.analysis.claims import LONG_STEPS, convergence, format_claim, paper_convergence, training_reward_column
from mrtpo.analysis.evidence import compare, finished, interval_text, paper_claim, seeds_text
from mrtpo.analysis.localisation import profile_count, region_table, seeds_localisation
from mrtpo.analysis.report import answer_metric, estimate, metrics, paper


def with_profiles(loc: pd.DataFrame, measure) -> tuple[float, float, float, str]:
    """``measure(loc)`` -- (estimate, lo, hi, text) -- where ``loc`` holds two rows of saved profiles or more; NaNs and
    "no saved profiles" otherwise."""
    return measure(loc) if len(loc) > 1 else (math.nan, math.nan, math.nan, "no saved profiles")


def verdicts(model: str = "tiny", family: pd.DataFrame | None = None) -> pd.DataFrame:
    """The paper's headline claims, each against this repository's finished runs of ``model`` (every seed present;
    nothing is trained here): claim, source (the paper's table or figure), the paper's number, ours with its 95%
    interval, the interval (``est``, ``lo``, ``hi``), the null value (no effect) and the paper's value on our
    scale (``claimed``), the verdict (``stats.verdict``) and the book page (notebook name) that shows it. A
    difference between arms is one of the book's family of comparisons (``family``: ``multiplicity.book_family``,
    computed when not given): it is a gap only when its Holm-adjusted p is below 0.05, and otherwise "not
    distinguishable at this power" with the difference its seeds would detect in the family. The other claims (format speed,
    convergence, localisation) are outside that family, each at 0.05."""
    from mrtpo.analysis import multiplicity, significance, stats

    family = multiplicity.book_family(model) if family is None else family

    rows = []

    def add(claim, source, paper_says, ours, est, lo, hi, null, claimed, judged=None):
        name, page = source.split("|")
        rows.append({"claim": claim, "source": name, "paper": paper_says, "ours": ours, "est": est, "lo": lo, "hi": hi,
                     "null": null, "claimed": claimed, "verdict": judged or stats.verdict(lo, hi, claimed, null), "page": page})

    def gap(task, better, worse, name, page, metric=None):
        text, claimed = paper_claim(name, better, worse, metric)
        a, b = finished(task, better, model), finished(task, worse, model)
        if not a or not b:
            return text, "no runs", math.nan, math.nan, math.nan, claimed, None
        c = compare(a, b, answer_metric(task), claimed=claimed)
        held = family[(family["task"] == task) & (family["comparison"] == f"{better} − {worse}")]
        p_adjusted = float(held["p (Holm)"].iloc[0]) if len(held) else math.nan
        detectable = float(held["detectable in the family"].iloc[0]) if len(held) else math.nan
        ours = (f"{interval_text(c['diff'], c['lo'], c['hi'])} over seed{'s' * (len(c['shared_seeds']) > 1)} "
                f"{seeds_text(c['shared_seeds'])} ({c['resampled']}"
                + (f"; p {c['p']:.4f}, Holm-adjusted {p_adjusted:.4f}" if c["p"] == c["p"] else "")
                + f"); {better} {estimate(c['a_mean'], c['a_se'])} "
                f"({len(c['a_seeds'])} seeds), {worse} {estimate(c['b_mean'], c['b_se'])} ({len(c['b_seeds'])} seeds)")
        if len(c["shared_seeds"]) < 2:
            return text, ours, c["diff"], c["lo"], c["hi"], claimed, "inconclusive"
        judged = stats.verdict(c["lo"], c["hi"], claimed, p_adjusted=p_adjusted)
        if judged == "inconclusive":
            judged += ": " + significance.not_distinguishable(detectable)
        return text, ours, c["diff"], c["lo"], c["hi"], claimed, judged

    for task, what, name, page, metric in (
            ("sql", "text-to-SQL", "table1_text_to_sql", "Table 1", "six-benchmark avg execution accuracy"),
            ("if", "instruction following", "table2_instruction_following", "Table 2", None),
            ("tool", "tool calling", "table3_tool_calling", "Table 3", None)):
        text, ours, est, lo, hi, claimed, judged = gap(task, "mrtpo", "gdpo", name, page, metric)
        add(f"MRTPO above GDPO ({what})", f"{page}|{name}", text, ours, est, lo, hi, 0.0, claimed, judged)
    runs = finished("tool", "mrtpo", model) + finished("tool", "gdpo", model)
    fmt = format_claim(metrics(runs), pairs=[("mrtpo", "gdpo")])[1] if runs else pd.DataFrame()
    for row, what in zip(fmt.to_dict("records"), ("MRTPO's format reward reaches 0.8 in fewer steps than GDPO's",
                                                  "MRTPO's format rate after 10 steps above GDPO's")):
        seeds = row["shared seeds"]
        why = "" if row["testable"] else f"; untestable: {row['verdict'].split(', ')[-1]}"
        add(f"{what} (tool calling)", "Fig. 5|table3_tool_calling",
            row["paper"], f"{row['ours (95% interval)']} over seed{'s' * (',' in seeds)} {seeds}{why}", row["est"], row["lo"],
            row["hi"], 0.0, row["claimed"], judged=None if row["testable"] else "inconclusive")
    if fmt.empty:
        add("MRTPO learns the tool-call format faster than GDPO (tool calling)", "Fig. 5|table3_tool_calling",
            "steps to a format reward of 0.8; format rate after 10 steps", "no runs", math.nan, math.nan, math.nan, 0.0, None)
    runs = [r for m in ("gdpo", "mrtpo") for r in finished("sql", m, model, LONG_STEPS)]
    m = metrics(runs)
    conv = convergence(m, training_reward_column(m, answer_metric("sql")))[1] if runs else pd.DataFrame(columns=["claim"])
    row = conv[conv["claim"].str.startswith("mrtpo")]
    if len(row):
        row = row.iloc[0]
        add(f"MRTPO reaches GDPO's final value earlier (text-to-SQL, {LONG_STEPS} steps; share of the window saved)",
            "Fig. 5|fig5_convergence", row["paper"], f"{row['ours (95% interval)']} over {row['seeds']} seeds",
            row["est"], row["lo"], row["hi"], 0.0, paper_convergence()[1], judged=row["verdict"])
    else:
        add(f"MRTPO reaches GDPO's final value earlier (text-to-SQL, {LONG_STEPS} steps)", "Fig. 5|fig5_convergence",
            f"step {paper_convergence()[0]:g} of 100", "no runs", math.nan, math.nan, math.nan, 0.0, None)
    text, ours, est, lo, hi, claimed, judged = gap("sql", "mrtpo", "joint", "table5_ablation", "Table 5")
    add("per-reward replay above joint replay (text-to-SQL)", "Table 5|table5_ablation", text, ours, est, lo, hi, 0.0, claimed,
        judged)
    text, ours, est, lo, hi, _, judged = gap("sql", "mrtpo", "entropy", "table5_ablation", "Table 5")
    add("per-reward relevance above one entropy weighting (a symmetric within-response weighting by the sampling "
        "policy's token entropy; text-to-SQL; not tested by the paper)", "issue 18|table5_ablation",
        "not tested", ours, est, lo, hi, 0.0, None, judged)

    runs = finished("if", "mrtpo", model)
    loc = seeds_localisation(runs)
    t4 = paper("table4_localization").set_index("constraint_state")["ratio"]
    groups = t4[t4.index.str.startswith("all ")]

    def region_ratio(loc):
        r = region_table(loc).iloc[0]
        return r["ratio"], r["lo"], r["hi"], (
            f"ratio {interval_text(r['ratio'], r['lo'], r['hi'], 2, sign='')}: {100 * r['shift share']:.1f}% of the shift "
            f"on {100 * r['token share']:.1f}% of the tokens ({r['profiles']} profiles, seed{'s' * (len(runs) > 1)} "
            f"{r['seeds']}; interval over {r['interval over']})")

    ratio, lo, hi, ours = with_profiles(loc, region_ratio)
    add("each constraint's shift lands where its checker reads (instruction following)", "Table 4|table4_localization",
        f"ratio {groups.min():g} to {groups.max():g} (all constraints); {t4['end phrase']:g} (end phrase)",
        ours, ratio, lo, hi, 1.0, float(groups.min()))

    runs = finished("sql", "mrtpo", model)
    f6 = paper("fig6_concentration").set_index("task")
    low, high = f6.at["text-to-SQL", "tokens_for_80pct_low"], f6.at["text-to-SQL", "tokens_for_80pct_high"]
    loc = seeds_localisation(runs).dropna(subset=["concentration80"]) if runs else pd.DataFrame()

    def concentration(loc):
        conc = loc["concentration80"].to_numpy(float)
        m, seeds = float(conc.mean()), loc["seed"].nunique()
        # a seed's profiles come from one run: the interval resamples seeds where there are two
        lo, hi = stats.cluster_bootstrap_interval(lambda i: conc[i].mean(), loc["seed" if seeds > 1 else "profile"].to_numpy())
        return m, lo, hi, (f"{100 * m:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] of the tokens hold 80% of a reward's shift "
                           f"(uniform: 80%; {len(conc)} (profile, reward) rows of {profile_count(loc)} profiles, interval "
                           f"over {'seeds' if seeds > 1 else 'profiles of one seed'})")

    m, lo, hi, ours = with_profiles(loc, concentration)
    add("a reward's shift is concentrated on few tokens (text-to-SQL)", "Figure 6|fig6_concentration",
        f"{low:g}–{high:g}% of the tokens hold 80% of the shift", ours, m, lo, hi, 0.8, (low + high) / 200)
    return pd.DataFrame(rows)
