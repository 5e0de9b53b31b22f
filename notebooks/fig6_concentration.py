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
# # Figure 6: how concentrated is each reward's shift, and where does it land?
#
# From the per-token relevance profiles the MRTPO runs save (responses sampled by the policy during
# training): the share of tokens holding 80% of each reward's shift (uniform: 80%), and the share of the
# shift inside `<think>` vs in the region the verifier reads. The paper: text-to-SQL 26–29% of tokens
# (about 3x), tool calling 13–15% (about 6x), and over 80% of text-to-SQL's shift in `<think>`.
#
# At the tiny scale, where the shift lands is partly designed by the warm-up (the noise mix recorded with
# each tiny base, shown below); it must not be read as emerging on its own.

# %% tags=["parameters"]
model = "tiny"
seeds = [0]
steps = None
force = False
tasks = ["sql", "tool", "if"]

# %%
import json

import pandas as pd

from mrtpo.analysis import plots, report
from mrtpo.method.regions import check_region_ratio

plan = report.check_model(tasks[0], model)
frames, recipes, runs = [], {}, {}
for task in tasks:
    run = runs[task] = report.grid(task, ["mrtpo"], model, seeds, steps, force)[0]
    loc = report.localisation(run)
    frames.append(loc.assign(task=task))
    recipes[task] = run.base_recipe["recipe"]["noise"] if run.base_recipe else "paper checkpoint"
loc = pd.concat(frames, ignore_index=True)

# %%
groups = loc.groupby(["task", "reward"])
table = groups.agg(**{"responses": ("step", "count"), "tokens holding 80% of the shift": ("concentration80", "mean")})
# PAPER.md §7: shares pooled over the responses, not the mean of per-response ratios
table["check-region ratio"] = [check_region_ratio(group) for _, group in groups]  # in the table's (sorted) order
table = table.assign(**{"shift in <think>": groups["think_shift"].sum() / groups["shift_total"].sum()}).reset_index()
f6 = report.paper("fig6_concentration").set_index("task")
paper_task = {"sql": "text-to-SQL", "tool": "tool calling"}  # the paper's Fig. 6 has no instruction following
table["paper: tokens holding 80%"] = [
    f"{f6.at[paper_task[t], 'tokens_for_80pct_low'] / 100:.3f}–{f6.at[paper_task[t], 'tokens_for_80pct_high'] / 100:.3f}"
    if t in paper_task else "—" for t in table["task"]]
display(table.round(3).set_index(["task", "reward"]))
print("warm-up noise mix of each tiny base:", json.dumps(recipes))

# %%
fig = plots.method_bars(loc, "reward", "concentration80", hue="task", ylabel="share of tokens holding 80% of the shift",
                        title="concentration (uniform = 0.8)")
fig.axes[0].tick_params(axis="x", rotation=30)
fig.tight_layout()
plots.save(fig, f"fig6_concentration_{model}")

# %% [markdown]
# Where the shift lands on one response: a profile the first task's run saved (where the most rewards moved
# the policy), each reward's line shaded by its q, the tokens its verifier reads underlined.

# %%
shown = report.relevance_text(runs[tasks[0]])
if shown is not None:
    shown.save(f"fig6_profile_{tasks[0]}_{model}")
    display(shown)

# %% [markdown]
# **Reading the figure.** Lower is more concentrated. PAPER.md §6.1 asks for check-region ratios and region
# shares for every task: the check-region ratio is the share of the shift inside the verifier's region over the
# region's share of tokens, both pooled over the responses (PAPER.md §7); above 1 the shift favours the tokens
# the verifier reads; "shift in <think>" (pooled the same way) shows how much of it lands in the reasoning instead.
