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
# # Tables 6–7: beta sweep, with the realised bound s
#
# PAPER.md §6.2: with `w - 1 = beta (q/qbar - 1)`, the bound gives `s = min(1, sqrt(A/B1) / beta)`; when it is
# active, `s * beta` is fixed and beta cancels. The paper never reports s and says only that the best beta
# depends on the task. Every run here logs s at every step, so the page shows where each beta sits and tests
# the algebra's prediction: two betas whose bound is active deliver the same advantages, so their accuracies
# differ by seed noise only.

# %% tags=["parameters"]
model = "tiny"
seeds = [0]  # trained when missing; every other finished seed of the same settings is shown too
steps = None
force = False
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
tasks = ["sql", "tool", "if"]
betas = [0.25, 0.5, 0.75, 1.0]  # the paper's range, and 1.0 where the algebra predicts the plateau goes on

# %%
import pandas as pd

from mrtpo.analysis import beta_sweep, evidence, multiplicity, plots, report

plan = report.check_model(tasks[0], model)
tables, verdicts, curves = [], [], []
family = multiplicity.book_family(model)  # every comparison the book reports: Holm's correction is over all of them
for task in tasks:
    arms = beta_sweep.beta_arms(task, betas, model, seeds, steps, force, processes)
    table, verdict = beta_sweep.beta_table(arms, report.answer_metric(task), adjusted=multiplicity.adjusted(family, task))
    tables.append(table.assign(task=task))
    verdicts.append(verdict.assign(task=task))
    curves.append(report.metrics([r for runs in arms.values() for r in runs]))
table, verdicts = pd.concat(tables, ignore_index=True), pd.concat(verdicts, ignore_index=True)

# %% [markdown]
# ## Verdicts
#
# Each beta against the next smaller one: the difference in held-out accuracy over the seeds both share, with its
# 95% paired t interval and the paired t-test's p, raw and adjusted by Holm's method over the book's family of
# comparisons (the landing page lists it); and, where the bound is active on at least 90% of the steps after the
# warm-up at both betas, what the runs say of the predicted difference of 0: "disagrees" where the difference is a
# gap, and otherwise "not distinguishable at this power" with the difference the seeds would detect. An interval
# that holds 0 cannot confirm the prediction: a plateau is shown only by seeds enough to detect a small difference.

# %%
display(verdicts.drop(columns=["paper", "diff", "lo", "hi"]).set_index(["task", "comparison"]))
print(evidence.verdict_sentence(verdicts))

# %% [markdown]
# ## The sweep

# %%
display(table.round(3).set_index(["task", "beta"]))

# %%
for task, m in zip(tasks, curves):  # one figure per task: pooled, a curve would average processes that share only beta
    fig = plots.curves(m, "mrtpo/s", hue="mrtpo_beta", ylabel="realised bound s", title=f"s per step, by beta: {task}")
    plots.save(fig, f"table6_s_{task}_{model}")

# %% [markdown]
# **Reading the page.** Where the share of steps with the bound active is near 1, the delivered advantages of
# two betas are the same up to the warm-up (the test suite proves the cancellation exactly), so the prediction
# column says whether the runs contradict it or how large a difference they could have seen; a beta whose bound is
# rarely active is the only place where beta can
# matter. The paper's "best beta depends on the task" should be read against that plateau.
