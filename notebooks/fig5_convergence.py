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
# # Figure 5: convergence — reward curves, steps to GDPO's final value, response length
#
# The paper: 7B MRTPO reaches GDPO's step-100 accuracy at step 60; response length falls from about 330 to
# 130–150 tokens in 100 steps. PAPER.md §6.6: that is judged inside a 100-step window against a GDPO curve
# that is still rising. These curves come from the main-table runs (same run folders); every seed present is
# used, and each method is compared with GDPO *of the same seed*.

# %% tags=["parameters"]
model = "tiny"
seeds = [0]  # trained when missing; every other finished seed of the same settings is shown too
steps = None
force = False
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
task = "sql"
controls = ["gdpo+constlen", "mrtpo+constlen"]  # fixed-length control arms, shown where their runs exist (never trained here)
long_steps = 300  # claims.LONG_STEPS; GDPO and MRTPO run this long (benchmarks/book_runs.py, "convergence"): shown where finished, never trained here

# %%
from mrtpo.analysis import claims, evidence, plots, report

plan = report.check_model(task, model)
arms = evidence.arm_runs(task, ["grpo", "gdpo", "mrtpo"], model, seeds, steps, force, processes)
m = report.metrics([r for runs in arms.values() for r in runs])
metric = report.answer_metric(task)
reward_col = claims.training_reward_column(m, metric)
table, verdicts = claims.convergence(m, reward_col)
control_runs = [r for arm in controls for r in evidence.finished(task, arm, model, steps)]
lengths = m if not control_runs else report.metrics([r for runs in arms.values() for r in runs] + control_runs)
length_table, length_verdicts = claims.length_change(lengths)

# %% [markdown]
# ## Verdicts
#
# First: has GDPO's curve flattened — the slope of its per-step training reward over the last 20% of the steps,
# with a 95% t interval over seeds? Then, per method: the share of the window it saves in reaching GDPO's
# final value (the mean over its last 10% of steps) of the same seed, with its interval over seeds, against the paper's 0.4.

# %%
display(verdicts.drop(columns=["est", "lo", "hi"]).set_index("claim"))

# %% [markdown]
# ## Per method (mean ± s.e. over seeds)

# %%
display(table.set_index("method"))

# %%
m["smoothed"] = claims.smoothed(m, reward_col)
fig = plots.curves(m, "smoothed", ylabel=f"training {reward_col} ({claims.smoothing_window(m)}-step mean)", title=f"{task}, {model}")
plots.save(fig, f"fig5_reward_{task}_{model}")

# %% [markdown]
# ## Response length
#
# The paper: responses shorten from about 330 to 130–150 tokens in 100 steps. Ours are far shorter, so the
# change is relative: the mean length over the last 10 steps over that of the first 10, minus 1, per run, with
# a 95% t interval over seeds, against the paper's. Beside each arm, its fixed-length control
# (`+constlen`: the loss divided by a constant instead of each response's length, which removes the token-mean
# loss's pull toward short responses; the arms page explains the choice), where those runs exist: the control's
# change minus the arm's, paired over the seeds both share. Above 0, the loss's normaliser explains part of the
# fall; around 0 with a fall that persists under the control, the rewards chose the shorter responses.

# %%
display(length_verdicts.drop(columns=["est", "lo", "hi"]).set_index("claim"))
display(length_table.set_index("method"))

# %%
fig = plots.curves(lengths, "completions/mean_length", ylabel="mean completion length (tokens)", title=f"response length, {task}, {model}")
plots.save(fig, f"fig5_length_{task}_{model}")
display(report.paper("fig5_convergence"))

# %% [markdown]
# ## Over a longer window: is GDPO still rising, and does MRTPO still arrive first?
#
# The same two verdicts on GDPO and MRTPO trained for `long_steps` steps (same seeds, same settings otherwise; the
# linear learning-rate decay spans the longer run): GDPO's final value, the mean over its last 10% of steps, is
# now that of a curve given three times the steps to flatten.

# %%
long = {m: evidence.finished(task, m, model, long_steps) for m in ("gdpo", "mrtpo")}
long_runs = [r for runs in long.values() for r in runs]
if long_runs:
    ml = report.metrics(long_runs)
    long_table, long_verdicts = claims.convergence(ml, reward_col)
    display(long_verdicts.drop(columns=["est", "lo", "hi"]).set_index("claim"))
    display(long_table.set_index("method"))
    ml["smoothed"] = claims.smoothed(ml, reward_col)
    fig = plots.curves(ml, "smoothed", ylabel=f"training {reward_col} ({claims.smoothing_window(ml)}-step mean)",
                       title=f"{task}, {model}, {long_steps} steps")
    plots.save(fig, f"fig5_reward_{task}_{model}_{long_steps}steps")
else:
    print(f"No {long_steps}-step runs of {task} at {model} yet: benchmarks/book_runs.sh trains them (section \"convergence\").")

# %% [markdown]
# **Reading the page.** "Reaches GDPO's final value earlier" means something only against a GDPO curve that has
# flattened: where the first verdict says GDPO is still rising, a method that saves part of the window may only
# be ahead on the same rising curve, and the second verdict carries that note. The curves show the mean over
# seeds with a band of ± one std.
