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
# # Table 1: text-to-SQL — GRPO vs GDPO vs MRTPO
#
# Three binary rewards (format, executable, execution match). The paper trains Qwen2.5-Coder-3B/7B on Spider
# for 100 steps and reports the six-benchmark average execution accuracy (mean ± std over 3 seeds).
# Here the default is the embedded tiny policy on synthetic text-to-SQL; `-p model 7b` runs the paper's
# configuration where the weights are available.

# %% tags=["parameters"]
model = "tiny"  # registry name: tiny (default), 3b, 7b; "smoke" is the test suite's size
seeds = [0]  # RL seeds (the paper: 3)
steps = None  # None: the registry's steps for this model (the paper: 100)
force = False  # retrain instead of reusing cached run folders
task = "sql"

# %%
from mrtpo import report

plan = report.check_model(task, model)  # stops here, with the registry's clear error, when weights are absent
table, evals, fig = report.main_table(task, model, seeds, steps, force)
paper = report.paper("table1_text_to_sql")

# %% [markdown]
# Held-out accuracy (the answer-judging reward, mean over prompts, sampled at temperature 1), mean ± standard
# error over seeds ("—" with one seed), beside the paper's six-benchmark average (± its std over seeds; a
# different scale and benchmark: compare the order of the rows, not the digits).

# %%
display(report.main_view(table, paper[paper.metric == "six-benchmark avg execution accuracy"]))

# %%
ours = table.set_index("method")["temp1_mean"]
theirs = paper[paper.model == "Qwen2.5-Coder-7B"].set_index("method")["score"]
print(report.gap(table), f"; paper 7B: {theirs['MRTPO'] - theirs['GDPO']:+.2f} points")
print(f"GDPO - GRPO here: {ours['gdpo'] - ours['grpo']:+.3f}; paper 7B: {theirs['GDPO'] - theirs['GRPO']:+.2f} points")

# %% [markdown]
# **Reading the table.** The ordering of the methods is what can be compared with the paper; the size of
# the gap cannot, because the tiny policy and its synthetic benchmark are far from a 7B coder on Spider.
# `evaluation s.e.` is the evaluation's own sampling noise (binomial, a lower bound); with one seed, a gap
# smaller than about two of those, or than the seed spread the paper itself reports, is not evidence either
# way.
#
# The printed line gives MRTPO − GDPO in evaluation standard errors; the open-questions page sets each task's
# gap beside the localisation measured on the same runs. Nothing here was tuned toward the paper's numbers.
