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
# # Table 3: tool calling — format and correctness
#
# Two rewards: the format of `<think>…</think><tool_call>JSON</tool_call>` and correctness as BFCL's AST
# checker judges it (Z blocks: the output template and the reference call). The paper trains
# Qwen2.5-1.5B/3B on RLLA and evaluates on BFCL-v4 single turn. The tiny default trains and evaluates on
# synthetic tool specs and queries.

# %% tags=["parameters"]
model = "tiny"  # registry name: tiny (default), 1.5b, 3b; "smoke" is the test suite's size
seeds = [0]  # RL seeds
steps = None  # None: the registry's steps for this model
force = False  # retrain instead of reusing cached run folders
task = "tool"

# %%
from mrtpo import report

plan = report.check_model(task, model)  # stops here, with the registry's clear error, when weights are absent
table, evals, fig = report.main_table(task, model, seeds, steps, force)
paper = report.paper("table3_tool_calling")

# %%
display(table.round(3))
display(paper)
ours = table.set_index("method")["temp1_mean"]
print(f"MRTPO - GDPO here: {ours['mrtpo'] - ours['gdpo']:+.3f} (correctness, 0-1)")

# %% [markdown]
# **Reading the table.** Tool calling is where the paper's relevance is best localised (about 6x uniform,
# Fig. 6) and where its gain is smallest (PAPER.md §6.4); compare with the localisation measured in
# `fig6_concentration` for the same runs.
#
# **What the committed tiny runs show** (one seed each): on tool calling and instruction following MRTPO
# ends *below* GDPO by more than two evaluation standard errors, and GRPO is the best of the three; on
# text-to-SQL MRTPO is above GDPO by less than that. The paper has MRTPO above GDPO everywhere, by about a
# point. We did not tune anything toward agreement. One measured fact bears on it: the tiny policies'
# leave-one-out shift is barely concentrated where each verifier reads (region ratios near 1 on the
# tiny-models and concentration pages, against about 3 or more in the paper's Table 4), so the reallocation
# moves advantage onto tokens a reward did not judge. One seed per method cannot separate this from seed
# noise; more seeds are the next runs to add.
