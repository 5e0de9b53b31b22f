# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Table 5: ablation — where does the gain come from, and what does it cost?
#
# GDPO, MRTPO (per-reward leave-one-out replay, K_x extra forwards), joint replay (one profile from P_all vs
# P_0, one extra forward), shuffled positions (MRTPO's weight values at random positions), the `entropy` arm (an
# entropy-weighted MRTPO placement control, not GTPO: MRTPO's within-response weights with q replaced by the sampling
# policy's token entropy, shared by all rewards and the same for correct and wrong responses: no replay at all),
# SAW alone (GDPO + SAW) and MRTPO + SAW. PAPER.md §6.3: of the paper's 1.60-point gain, 1.01 already comes from joint replay; so the
# table shows each arm's cost beside its gain, and the entropy arm asks whether relevance is more than this one
# form of uncertainty (one variant only: entropy credit that normalises across the group and treats correct and
# wrong responses differently, as GTPO does, is not tested by it; that is the separate `gtpo` arm,
# `advantages.gtpo_advantages`, not in this table).

# %% tags=["parameters"]
model = "tiny"  # registry name: tiny (default), 7b (the paper's ablation model); "smoke" for tests
seeds = [0]  # trained when missing; every other finished seed of the same settings is shown too
steps = None
force = False
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
# None: all three tasks at the tiny sizes, text-to-SQL (the paper's Table 5) at any other scale
tasks = None
# the arms; each task trains those its verdict table compares (the sub-verifier arms: text-to-SQL only)
methods = ["gdpo", "mrtpo", "joint", "shuffled", "entropy", "gdpo+saw", "mrtpo+saw", "gdpo-sub_rewards", "mrtpo-sub_rewards"]

# %%
import pandas as pd

from mrtpo.analysis import evidence, multiplicity, plots, power_analysis, report
from mrtpo.models import TINY_SIZES

tasks = tasks or (["sql", "tool", "if"] if model in TINY_SIZES else ["sql"])
plan = report.check_model(tasks[0], model)
verdicts, noise, power, costs = [], [], [], {}
family = multiplicity.book_family(model)  # every comparison the book reports: Holm's correction is over all of them
for task in tasks:
    comparisons = evidence.book_comparisons("table5_ablation", task)
    arms = evidence.arm_runs(task, [m for m in methods if m in comparisons.arms], model, seeds, steps, force, processes)
    evals = report.evaluations([r for rs in arms.values() for r in rs])
    metric = report.answer_metric(task)
    # headline: the synthetic test split at temperature 1 (tiny); the first benchmark, greedy (real scale)
    bench, decoding = evals.benchmark.iloc[0], ("temp1" if "temp1" in set(evals.decoding) else "greedy")
    verdicts.append(evidence.verdict_table(arms, comparisons.pairs, metric, comparisons.paper_table, comparisons.paper_metric,
                                           benchmark=bench, decoding=decoding,
                                           adjusted=multiplicity.adjusted(family, task)).assign(task=task))
    costs[task] = evidence.cost_gain(arms, metric, comparisons.paper_table, "gdpo", bench, decoding)
    noise.append(power_analysis.noise_table(arms, metric, bench, decoding).assign(task=task))
    power.append(power_analysis.power_table(arms, comparisons.pairs, metric, benchmark=bench, decoding=decoding).assign(task=task))
    sel = evals[(evals.metric == metric) & (evals.benchmark == bench) & (evals.decoding == decoding)]
    fig = plots.method_bars(sel, "method", "value", ylabel=f"{bench} {metric} ({decoding})", title=f"ablation, {task}, {model}")
    plots.save(fig, f"table5_{task}_{model}")
verdicts, noise, power = (pd.concat(t, ignore_index=True) for t in (verdicts, noise, power))

# %% [markdown]
# ## Verdicts
#
# Each difference over the seeds both arms share, with its 95% paired t interval over the per-seed differences
# (every run is scored on the same evaluation prompts, so only the seeds and the sampling within prompts vary) and
# the paired t-test's p, raw and adjusted by Holm's method over the book's whole family of comparisons (listed on
# the landing page): a difference is a gap only when its interval excludes 0 and its adjusted p is below 0.05. A
# difference that is not a gap is "not distinguishable at this power", with the difference the seeds would detect
# with 80% power; it is no evidence that the arms are equal. The paper's
# Table 5 is text-to-SQL only. "mrtpo − entropy" answers whether MRTPO beats this one entropy weighting, and the
# sub-verifier rows (text-to-SQL's execution reward split into its four checks, each its own reward and Z_k)
# whether finer rewards change either method: comparisons the paper did not make.

# %%
display(verdicts.drop(columns=["diff", "lo", "hi"]).set_index(["task", "comparison"]))
for task in tasks:
    print(f"{task}: {evidence.verdict_sentence(verdicts[verdicts.task == task])}")

# %% [markdown]
# ## Cost beside gain
#
# Per arm: held-out accuracy (mean ± s.e. over the seeds listed), its gain over GDPO with the 95% interval,
# the forwards a step adds per sampled response (the replay's; the entropy arm reads the entropies from the
# logits generation already computes) and the median step time relative to GDPO's (runs trained at different
# times on a shared machine: indicative only). The figures above show each arm's seeds.

# %%
for task, cost in costs.items():
    print(f"{task}:")
    display(cost)

# %% [markdown]
# ## Noise and power
#
# As on the main tables: each arm's seed spread against the sampling of responses within the shared evaluation
# prompts; each comparison's power (noncentral t) from an sd with n − 1 degrees of freedom, its interval beside it.

# %%
display(noise.round(3).set_index(["task", "method"]))
short = {"shared seeds": "seeds", "sd of the difference": "sd", "sd 95% interval": "sd 95% (df)",
         "power for 0.05 now": "power (0.05)", "detectable now": "detectable", "seeds for 0.05 at 80% power": "seeds for 0.05"}
display(power.round(3).set_index(["task", "comparison"])[list(short)].rename(columns=short))  # the rest: power_analysis
for task in tasks:
    rows = power[(power.task == task) & power["comparison"].isin(["mrtpo − gdpo", "mrtpo − entropy"])]
    print(f"{task}: {power_analysis.power_sentence(rows)}")

# %% [markdown]
# **Reading the page.** "extra forwards per response" is the replay's cost in forwards per sampled response
# (joint: P_all and P_0 for each response whose rewards varied; MRTPO: P_all plus one P_\k per reward whose
# group varied; entropy: none). A variant is worth its cost only if its gain over GDPO has an interval that
# excludes 0 and exceeds the cheaper arms' gains; the verdicts and the power table say whether the seeds present
# can tell.
