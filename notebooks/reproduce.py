# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # How to reproduce
#
# On a Linux machine with Python 3.11 (no GPU needed):
#
# ```bash
# make book   # creates .venv, installs, executes the notebooks at the default (tiny) scale, renders _build/html
# make test   # creates .venv, installs, runs the test suite
# ```
#
# Scales: `model=tiny` (default; a ~2M-parameter Qwen2 policy per task, built here from a seed and cached
# under `~/.cache/mrtpo`), `model=smoke` (seconds; what the test suite renders the book with) and the
# paper's checkpoints `1.5b`, `3b`, `4b`, `7b` (GPU and weights needed). Every notebook takes them as a
# papermill parameter:
#
# ```bash
# papermill notebooks/table5_ablation.ipynb out.ipynb -p model 7b
# mrtpo plan --task sql --model 7b   # what that run needs, without loading weights
# ```
#
# `MRTPOConfig` / `MRTPOTrainer` replace TRL's `GRPOConfig` / `GRPOTrainer`:
#
# ```python
# from mrtpo import MRTPOConfig, MRTPOTrainer
# from mrtpo.tasks import get_task
#
# task = get_task("sql")
# trainer = MRTPOTrainer(
#     model=path_to_policy, reward_funcs=task.reward_funcs(), z_blocks=task.z_blocks,
#     train_dataset=task.synthetic(512, seed=0),
#     args=MRTPOConfig(output_dir="runs/sql", advantage="mrtpo", mrtpo_beta=0.5, num_generations=8),
# )
# trainer.train()
# ```
#
# ## Many GPUs
#
# `accelerate launch train.py` or `torchrun --nproc_per_node N train.py`; the batch-level statistics (GDPO's
# scale, the bound's sums) are computed over the global batch.
#
# ## How long it takes
#
# `make book` on a fresh clone reuses the committed run folders and trains nothing; it builds the text-to-SQL
# tiny base once (the playground page replays real responses with it) and executes every notebook. `make
# reproduce` retrains every run folder, one after another. What the committed runs cost, measured: each run
# folder's training time and evaluation time (`summary.json`), summed per task. The runs were trained one or
# two at a time on the 2-core CPU machine this book is built on.

# %% tags=["parameters"]
model = "tiny"

# %%
from IPython.display import Markdown

from mrtpo.analysis import multiplicity, plots, power_analysis, report
from mrtpo.runs.results import runs_table

runs = runs_table()
runs = runs[runs["model"] == model]
spent = report.compute_spent(runs)
display(spent.round(2).set_index("task"))
print(report.compute_sentence(spent, model))

# %% [markdown]
# Per task and method: the runs (seeds and settings), and the median and longest training time of one run, in
# minutes.

# %%
minutes = runs.assign(train_min=runs["train_s"] / 60)
display(minutes.groupby(["task", "method"])["train_min"].agg(["count", "median", "max"]).round(1))
fig = plots.method_bars(minutes, "method", "train_min", hue="task", ylabel="training time of one run (minutes)",
                        title=f"training time per run, {model}")
plots.save(fig, f"reproduce_train_time_{model}")

# %% [markdown]
# ## What each comparison can detect, and what it cost
#
# Every comparison of the book's verdict tables (the result pages' pairs, on the held-out answer metric), over
# the committed runs: the seeds of each arm, the standard deviation of the paired difference (measured over the
# shared seeds from two on; otherwise from the arms' own seed spread or the spread pooled over the task's arms,
# an upper bound when common seeds make the arms move together), the power of a two-sided paired t-test at the
# seeds both arms share for a difference of 0.05 and for the paper's own gap, the smallest difference it detects
# with 80% power at those seeds and at 3, the seeds 0.05 needs, and the training time of both arms' runs.
# Power is exact for normal differences: the paired t statistic is noncentral t (`significance.power`, integrated
# numerically; it is never below 0.05, the test's level). It rests on an sd measured with n − 1 degrees of freedom
# (2 at 3 seeds), itself uncertain: "sd 95% interval" is its chi-square interval, and the power beside it is the
# power at that interval's ends (the high sd gives the low power).
# The grid (`benchmarks/book_runs.py`, section "powered") trains GDPO and MRTPO up to the seeds 0.05 needs for
# each main table's MRTPO − GDPO where its sd is paired (at most 16 seeds per arm): the sd decides how many seeds,
# never the difference itself.

# %%
power = power_analysis.book_power(model)
short = {"seeds": "seeds", "sd of the difference": "sd", "sd 95% interval": "sd 95% interval (n − 1 df)",
         "power for 0.05 now": "power (0.05)", "power for 0.05 now (sd interval)": "power (0.05) over the sd interval",
         "power for the paper's difference now": "power (paper's gap)", "detectable now": "detectable",
         "detectable at 3 seeds": "detectable (3 seeds)",
         "seeds for 0.05 at 80% power": "seeds for 0.05", "train hours": "hours"}
for page, rows in power.groupby("page", sort=False):  # one table per page: all pages' columns side by side do not fit
    display(Markdown(f"**{page}** (spread: {'; '.join(rows['measured'].unique())})"))
    display(rows.set_index("comparison")[list(short)].rename(columns=short).round(3))
print(power_analysis.book_power_sentence(power))

# %% [markdown]
# ## The family of comparisons
#
# The same comparisons, tested together (`multiplicity`): each distinct (task, A − B) once, its two-sided paired t
# p over the shared seeds, raw and adjusted by Holm's step-down method over every comparison with a test. A result
# page calls a difference a gap only when its adjusted p is below 0.05 (the landing page explains the family).

# %%
family = multiplicity.book_family(model)
display(multiplicity.family_view(family).set_index(["task", "comparison"]))
print(multiplicity.family_sentence(family))

# %% [markdown]
# **Reading the numbers.** A run folder written before evaluation time was recorded has none, so where the count
# of runs with evaluation time is below the runs, the evaluation hours are a lower bound; a run resumed after its
# last step has no training time either. Times on a shared 2-core CPU vary with the machine's other work.

# %% [markdown]
# ## The code behaviour the book was built with
#
# Every run folder records the **behaviour fingerprint** of the code that trained it (`mrtpo.runs.behaviour`): a hash
# of what the code does — every reward function of the task on 480 fixed responses, the tokenizer, the base's
# evaluation, and two training steps of the arm's method and modifiers on the tiny base — pinned in
# `mrtpo/runs/fingerprints.json` with the values it names (`probe_values.json`) and rerun by the test suite, which
# compares the values (the training steps' metrics within 1e-4 relative: another CPU moves their last bits), so that a
# change of behaviour fails the tests until it is recorded under a new results version. A folder of another fingerprint is stale: `mrtpo runs --stale` lists it,
# the comparisons refuse it, and asking for the run retrains it. Folders written before fingerprints were recorded
# carry `fingerprint_evidence`: their first step, replayed by the current code, logged every value the same (the
# sampled batch, its rewards, the loss, the gradient norm), or they were retrained. Per task and arm, the
# fingerprint of the current code, the committed folders and how many of them record it:

# %%
from mrtpo.runs import behaviour as fingerprint
from mrtpo.runs.results import run_folders

behaviour = fingerprint.book_table(run_folders())
print(f"results version {fingerprint.pinned()['results_version']}; {int(behaviour['current'].sum())} of "
      f"{int(behaviour['folders'].sum())} run folders record the current code's fingerprint")
display(behaviour.set_index(["task", "arm"]))
