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
# # Table 4: does each constraint's shift land where its checker reads?
#
# For instruction following, each constraint's verifier reads a region of the response (the end phrase, the
# title, the bullet lines, the keyword occurrences, ...). For every saved profile of the MRTPO run: the share
# of that constraint's shift inside its read region, the region's share of tokens, and their ratio (1 =
# no better than uniform), split by whether the constraint was satisfied. Paper (Table 4): ratios 1.9–5.1,
# bullet lines 1.0, end phrase 9.1.

# %% tags=["parameters"]
model = "tiny"
seeds = [0]
steps = None
force = False
task = "if"

# %%
import pandas as pd

from mrtpo import plots, report

plan = report.check_model(task, model)
run = report.grid(task, ["mrtpo"], model, seeds, steps, force)[0]
loc = report.localisation(run)
loc["state"] = loc["reward_value"].map({1.0: "satisfied", 0.0: "violated"})

# %%
shares = {"n": ("step", "count"), "shift %": ("shift_share", lambda x: 100 * x.mean()),
          "token %": ("token_share", lambda x: 100 * x.mean())}
table = pd.concat([loc.assign(label="all").groupby(["label", "state"]).agg(**shares),
                   loc.groupby(["label", "state"]).agg(**shares)]).reset_index()
table["ratio"] = table["shift %"] / table["token %"]
# the paper's rows: both constraint states pooled ("all ..."), and two constraint types by their own names
paper = report.paper("table4_localization").assign(model=lambda d: d["model"].fillna("text"))
paper_row = {"detectable_format:number_bullet_lists": "bullet lines", "startend:end_checker": "end phrase"}
keys = [f"all {s}" if label == "all" else paper_row.get(label, label) for label, s in zip(table["label"], table["state"])]
ratios = {k: ", ".join(f"{m.split('-')[-1]}: {r:g}" for r, m in zip(g["ratio"], g["model"]))
          for k, g in paper.groupby("constraint_state")}
table["paper ratio"] = [ratios.get(k, "—") for k in keys]
table["label"] = table["label"].str.split(":").str[-1]  # the constraint's name without its group
display(table.round(2).set_index(["label", "state"]))

# %%
fig = plots.method_bars(loc, "label", "ratio", hue="state", ylabel="shift share / token share in the read region",
                        title="check-region ratio per constraint type (1 = uniform)")
fig.axes[0].tick_params(axis="x", rotation=60)
plots.save(fig, f"table4_{model}")

# %% [markdown]
# One profile the trainer saved, as text: each constraint's line shaded by its q, the tokens its checker
# reads underlined.

# %%
shown = report.relevance_text(run)  # the saved profile where the most constraints moved the policy
if shown is not None:
    shown.save(f"table4_profile_{model}")
    display(shown)

# %% [markdown]
# **Reading the table.** A ratio near 1 for a region that covers most of the response (bullet lines, whole-
# response checks) says nothing: the region is the response. The informative rows are small regions (end
# phrase, title, keywords); the paper's largest ratio is on such a row.
#
# `ratio` above 1 marks a row whose shift favours the checker's region. The instruction-following warm-up edits
# exactly these regions when a constraint's block is absent (`mrtpo.tasks.warmup.IF_VIOLATIONS`), so at the tiny scale
# any such row is partly designed.
