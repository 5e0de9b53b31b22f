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
# # Table 2: instruction following — one reward per constraint
#
# Each prompt carries several verifiable constraints (IFEval/IFBench registry checkers); each constraint is
# its own reward, and its Z block is the constraint's text. The paper trains Qwen3-4B and Qwen2.5-7B on
# HIR-16K (not available offline) and reports a 7-metric mean. The tiny default trains on synthetic
# multi-constraint prompts; the metric is the mean over constraint slots of the held-out satisfaction rate.

# %% tags=["parameters"]
model = "tiny"  # registry name: tiny (default), 4b, 7b; "smoke" is the test suite's size
seeds = [0]  # RL seeds (the paper: 5)
steps = None  # None: the registry's steps for this model (the paper: 300)
force = False  # retrain instead of reusing cached run folders
task = "if"

# %%
from mrtpo import report

plan = report.check_model(task, model)  # stops here, with the registry's clear error, when weights are absent
table, evals, fig = report.main_table(task, model, seeds, steps, force)
paper = report.paper("table2_instruction_following")

# %%
display(report.main_view(table, paper))
print(report.gap(table))

# %% [markdown]
# **Reading the table.** The paper's gains here are small (about a point) and change sign on one benchmark
# (MulDimIF, 7B): a tiny-scale difference of the same order is within noise unless several seeds agree.
#
# The printed line gives MRTPO − GDPO in evaluation standard errors; the open-questions page sets each task's
# gap beside the localisation measured on the same runs. Nothing here was tuned toward the paper's numbers.
