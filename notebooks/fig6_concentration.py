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
real_model = "smollm2"  # the real instruct model measured before training (mrtpo diagnose), shown at the end
seeds = [0]
steps = None
force = False
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
tasks = ["sql", "tool", "if"]

# %%
import json

import pandas as pd

from IPython.display import Markdown

from mrtpo.analysis import diagnose, localisation, plots, report

plan = report.check_model(tasks[0], model)
frames, recipes, runs = [], {}, {}
for task in tasks:
    run = runs[task] = report.grid(task, ["mrtpo"], model, seeds, steps, force, processes=processes)[0]
    loc = report.localisation(run)
    frames.append(loc.assign(task=task))
    recipes[task] = run.base_recipe["recipe"]["noise"] if run.base_recipe else "paper checkpoint"
loc = pd.concat(frames, ignore_index=True)

# %%
table = localisation.concentration_table(loc)
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

# %% [markdown]
# ## A real instruct model before training
#
# The same figures for `real_model` (default SmolLM2-135M-Instruct), from the responses `mrtpo diagnose` sampled
# to each task's training prompts and replayed leave-one-out before any update, beside the default tiny base's
# and the paper's; then each diagnosis' overall figures (PAPER.md §7): the share of response–reward pairs
# replayed, effective K, concentration, the pooled check-region ratio, how alike two rewards' profiles are on one
# response (cross-reward correlation: near 1, not reward-specific) and how much they follow the sampling entropy,
# the realised bound s at the registry's beta, and the reader's verdict.

# %%
real = {t: diagnose.diagnosis_localisation(t, real_model) for t in tasks}
measured = [r.assign(task=t) for t, r in real.items() if r is not None and len(r)]
if measured:
    display(localisation.concentration_table(pd.concat(measured, ignore_index=True)).round(3).set_index(["task", "reward"]))
mechanism = diagnose.mechanism_table(tasks, ["tiny", real_model]).set_index(["task", "model"])
display(mechanism.drop(columns="verdict").T.round(3))  # one column per task and model: fits the page
for (t, m), verdict in mechanism["verdict"].items():
    print(f"{t}, {m}: {verdict}")
missing = [t for t, r in real.items() if r is None]
if missing:
    display(Markdown(f"Not measured with per-response rows for `{real_model}` yet: {', '.join(missing)} "
                     f"(`mrtpo diagnose --task <task> --model {real_model}`)."))
