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
# # Table 1: text-to-SQL — GRPO vs GDPO vs MRTPO (and OPSD, entropy weighting)
#
# Three binary rewards (format, executable, execution match). The paper trains Qwen2.5-Coder-3B/7B on Spider
# for 100 steps and reports the six-benchmark average execution accuracy (mean ± std over 3 seeds).
# Here the default is the embedded tiny policy on synthetic text-to-SQL; `-p model 7b` runs the paper's
# configuration where the weights are available. Beside the paper's arms: OPSD (its Table 1 baseline) and the
# `entropy` arm, an entropy-weighted MRTPO placement control, not GTPO: MRTPO's within-response weights with q
# replaced by the sampling policy's token entropy (w_t = (1 − β) + β h_t / h̄, shared by all rewards, the same for
# correct and wrong responses, no replay). It asks whether relevance is more than this one form of uncertainty; it
# does not test entropy-based token credit in general. GTPO (arXiv 2508.04349), which normalises entropy per position
# across the group and treats correct and wrong responses differently, is the separate `gtpo` arm
# (`advantages.gtpo_advantages`), not trained on this page.

# %% tags=["parameters"]
model = "tiny"  # registry name: tiny (default), 3b, 7b; "smoke" is the test suite's size
seeds = [0]  # RL seeds trained when missing (the paper: 3); every other finished seed of the same settings is shown too
steps = None  # None: the registry's steps for this model (the paper: 100)
force = False  # retrain instead of reusing cached run folders
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
dial = None  # a setting of the testbed's dial (tiny sizes): every run starts from that dial base; None: the default base
task = "sql"
methods = ["grpo", "gdpo", "mrtpo", "opsd", "entropy"]
real_model = "smollm2"  # the real instruct model whose untrained scores and reward spread close the page

# %%
from mrtpo.analysis import evidence, multiplicity, power_analysis, report, untrained

plan = report.check_model(task, model)  # stops here, with the registry's clear error, when weights are absent
table, evals, fig, arms = evidence.main_table(task, model, seeds, steps, force, methods, dial, processes)
paper = report.paper("table1_text_to_sql")
metric = report.answer_metric(task)
comparisons = evidence.book_comparisons("table1_text_to_sql", task)
family = multiplicity.book_family(model)  # every comparison the book reports: Holm's correction is over all of them
verdicts = evidence.verdict_table(arms, comparisons.pairs, metric, comparisons.paper_table, comparisons.paper_metric,
                                  adjusted=multiplicity.adjusted(family, task) if dial is None else None)

# %% [markdown]
# ## Verdicts
#
# Each difference over the seeds both arms share, with its 95% paired t interval over the per-seed differences
# (every run is scored on the same evaluation prompts, so only the seeds and the sampling within prompts vary) and
# the paired t-test's p, raw and adjusted by Holm's method over the book's whole family of comparisons (listed on
# the landing page): a difference is a gap only when its interval excludes 0 and its adjusted p is below 0.05. A
# difference that is not a gap is "not distinguishable at this power", with the difference the seeds would detect
# with 80% power; it is no evidence that the arms are equal. The paper's gaps are in points on real benchmarks,
# ours on a 0–1 scale.

# %%
display(verdicts.drop(columns=["diff", "lo", "hi"]).set_index("comparison"))
print(evidence.verdict_sentence(verdicts))

# %% [markdown]
# ## The table
#
# Held-out accuracy (the answer-judging reward, mean over prompts, sampled at temperature 1), mean ± standard
# error over the seeds listed ("—" with one seed), beside the paper's six-benchmark average (± its std over
# seeds; a different scale and benchmark: compare the order of the rows, not the digits).
# The first row, base, is the untrained policy every arm starts from (RL step 0), evaluated once with the same
# prompts and sampling seed: it has no spread over seeds, only its evaluation s.e.

# %%
display(evidence.main_view(table, paper[paper.metric == "six-benchmark avg execution accuracy"]))

# %% [markdown]
# ## Noise and power
#
# Seed-to-seed spread against the evaluation's own noise, per arm: every run is scored on the same prompts, so
# the evaluation noise that differs between runs is the sampling of responses within each prompt (estimated from
# each prompt's samples; "binomial, upper bound" for a folder without per-prompt results). Then, per comparison,
# the difference the seeds present can detect (paired t-test, 80% power, noncentral t) and the seeds a difference
# of 0.05 needs, from an sd measured with n − 1 degrees of freedom (its chi-square interval, and the power at its
# ends, beside it).

# %%
display(power_analysis.noise_table(arms, metric).round(3).set_index("method"))
power = power_analysis.power_table(arms, comparisons.pairs, metric)
display(power.round(3).set_index("comparison"))
print(power_analysis.power_sentence(power))

# %% [markdown]
# ## A real instruct model, untrained
#
# `real_model` (default SmolLM2-135M-Instruct, `--model smollm2`) before any update: its base scores on the first
# 64 prompts of each benchmark, greedy, at the length its runs would sample (`mrtpo eval --task sql
# --base --model smollm2`), and whether its rewards vary within the groups it samples at the training temperature
# (`mrtpo diagnose`): a reward that is constant within a group gets advantage 0 on every token, in every arm, so
# where no reward varies no arm of this page can learn anything from this model at this geometry.

# %%
base, spread, sentence = untrained.summary(task, real_model)
for shown in (base, spread):
    if shown is not None:
        display(shown)
print(sentence)

# %% [markdown]
# **Reading the page.** The verdicts come from the intervals and the family's adjusted p, not from the means: a
# mean difference whose interval holds 0 is no evidence either way, whatever its sign. Where only one seed is shared, there is no
# seed-to-seed interval at all (the run folders committed before per-prompt results were stored give no
# prompt-level one either), and the power table says how many seeds the book would need. Nothing here was
# tuned toward the paper's numbers.
