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
# # What the replay costs
#
# MRTPO adds one forward of P_all per replayed response and one of P_\k per reward whose group varied; the
# paper states +10% to +20% step time. Below: the step-cost benchmark (`benchmarks/step_cost.py`, same model,
# prompts and seed, variants stepping in turn) and, per task, the replay rate of the MRTPO runs over the
# response–reward pairs that exist (a constraint slot a prompt does not have is not a pair; PAPER.md §7) and
# the effective K (PAPER.md §6.5 asks for it per task; the paper pools 12–21% over tasks).

# %% tags=["parameters"]
model = "tiny"
seeds = [0]
steps = None
force = False
tasks = ["sql", "tool", "if"]

# %%
import pandas as pd

from mrtpo import plots, report

bench = pd.read_csv(report.RESULTS / "bench" / "step_cost.csv")
display(bench[["variant", "task", "median_step_s", "ratio_to_gdpo", "replay_share", "effective_k"]].round(3).set_index("variant"))
print("measured on:", "; ".join(bench[["device", "machine", "model"]].drop_duplicates().astype(str).agg(", ".join, axis=1)),
      f"({bench['prompts_x_generations'].iloc[0]} per step, completions up to {bench['max_completion'].iloc[0]} tokens)")

# %%
rates = []
for task in tasks:
    m = report.metrics(report.grid(task, ["mrtpo"], model, seeds, steps, force))
    rates.append({"task": task, **report.replay_rates(m)})
rates = pd.DataFrame(rates).set_index("task")
shared = ["pairs replayed (of those that exist)", "rewards applying per response", "effective K", "replay share of step"]
per_reward = rates.drop(columns=shared).apply(lambda r: ", ".join(f"{k} {v:.2f}" for k, v in r.dropna().items()), axis=1)
with pd.option_context("display.max_colwidth", None):  # the whole text, not cut with "..."
    display(rates[shared].round(3).assign(**{"replayed, per reward": per_reward}))

# %%
fig = plots.method_bars(bench, "variant", "ratio_to_gdpo", ylabel="median step time / GDPO's", title="step cost (benchmark)")
plots.save(fig, "replay_cost_bench")

# %% [markdown]
# ## How long the runs took
#
# Training time of every run folder at this scale (`summary.json`; evaluation not included), in minutes. The
# runs were trained one or two at a time on the 2-core CPU machine this book is built on.

# %%
from mrtpo.results import runs_table

times = runs_table()
times = times[times["model"] == model]
display(times.assign(train_min=times["train_s"] / 60).groupby(["task", "method"])["train_min"].agg(["count", "median", "max"]).round(1))

# %% [markdown]
# **Reading the tables.** The replay's cost scales with the effective K, not with K: rewards whose groups
# all agree are never replayed. The benchmark's machine and sizes are in its CSV; ratios measured on a
# 2-core CPU with a 1.97M-parameter policy are not GPU figures.
