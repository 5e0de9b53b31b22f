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
display(table.round(3))
display(paper)
ours = table.set_index("method")["temp1_mean"]
print(f"MRTPO - GDPO here: {ours['mrtpo'] - ours['gdpo']:+.3f} (satisfaction rate, 0-1)")

# %% [markdown]
# **Reading the table.** The paper's gains here are small (about a point) and change sign on one benchmark
# (MulDimIF, 7B): a tiny-scale difference of the same order is within noise unless several seeds agree.
#
# **What the committed tiny runs show** (one seed each): on tool calling and instruction following MRTPO
# ends *below* GDPO by more than two evaluation standard errors, and GRPO is the best of the three; on
# text-to-SQL MRTPO is above GDPO by less than that. The paper has MRTPO above GDPO everywhere, by about a
# point. We did not tune anything toward agreement. One measured fact bears on it: the tiny policies'
# leave-one-out shift is barely concentrated where each verifier reads (region ratios near 1 on the
# tiny-models and concentration pages, against about 3 or more in the paper's Table 4), so the reallocation
# moves advantage onto tokens a reward did not judge. One seed per method cannot separate this from seed
# noise; more seeds are the next runs to add.
