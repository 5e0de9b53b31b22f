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
# # The missing arms: OPSD, SAW alone, a fixed-length control, sub-verifier rewards
#
# Arms the paper reports or a careful reader asks for (PAPER.md §6–7), each a method of the runner:
#
# * **OPSD** (`opsd`): one model is teacher (the prompt and every verifier's Z block, i.e. MRTPO's P_all) and
#   student (the plain prompt); the loss is forward KL(teacher ‖ student) on the teacher's top-64 tokens of the
#   student's own samples, teacher frozen at the initial weights (the paper's variant). No reward enters the loss.
#   `gdpo+opsd` adds that term to GDPO's loss.
# * **SAW alone** (`gdpo+saw`): SAW's reward reweighting without MRTPO's token placement.
# * **Fixed-length control** (`gdpo+constlen`, `mrtpo+constlen`): see below.
# * **Sub-verifier rewards** (`rewards="sub"`): the execution reward replaced by its four check actions (right
#   tables, selected columns, WHERE predicates, joins), each with its own Z block (the reference's items), K = 3 → 6.
#   Evaluation always scores the default rewards, so every arm is read on the same held-out metric.
#
# **Why the fixed-length control normalises the loss by a constant instead of fixing the decoding length.** The
# question is whether the paper's length collapse (330 → 130 tokens) is "cutting waste" or an artefact of the
# loss. A per-response or per-batch token mean (GRPO's, DAPO's — TRL's default) makes every token of a short
# response weigh more than one of a long response, a pressure toward shorter responses that exists whatever the
# rewards say. Dr. GRPO's constant normaliser (`loss_type="dr_grpo"`: divide by batch size × maximum completion
# length) removes exactly that pressure and changes nothing else: the samples, the rewards and the advantages are
# the same. Forcing every response to one decoding length would do the opposite: it changes what is sampled and
# what the verifiers score (text after `</answer>` breaks the format reward), so "shorter" and "better" would be
# confounded with a different task. With the control, a length that still falls is chosen by the rewards.

# %% tags=["parameters"]
model = "tiny"  # registry name; "smoke" for tests
seeds = [0]  # trained when missing; every other finished seed of the same settings is shown too
steps = None
force = False
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
task = "sql"
methods = ["gdpo", "mrtpo", "gdpo+saw", "opsd", "gdpo+constlen", "mrtpo+constlen"]  # arms shown
sub_rewards = True  # also GDPO and MRTPO on the sub-verifier reward set, where the task has one

# %%
import pandas as pd

from mrtpo.analysis import claims, evidence, plots, report
from mrtpo.tasks import get_task

plan = report.check_model(task, model)
metric = report.answer_metric(task)
shown = methods + (["gdpo-sub_rewards", "mrtpo-sub_rewards"] if sub_rewards and "sub" in get_task(task).reward_sets else [])
arms = evidence.arm_runs(task, shown, model, seeds, steps, force, processes)
runs = [r for rs in arms.values() for r in rs]
evals = report.evaluations(runs)
steps_df = report.metrics(runs)

# %% [markdown]
# ## Held-out answer reward of every arm
#
# Mean ± s.e. over the seeds of each arm (the seed ids beside it), and the mean response length over the first and
# the last 10 steps. The paired comparisons of these arms with GDPO and MRTPO, with intervals, are on the ablation
# page (SAW alone, the sub-verifier rewards), the main tables (OPSD) and the convergence page (the fixed-length
# control).

# %%
table = report.summary(evals, metric)
table.insert(1, "seed ids", [evidence.seeds_text(sorted(evidence.seed_values(arms[m], metric))) for m in table["method"]])
length = claims.length_change(steps_df)[0].drop(columns=["seeds"])  # mean length over the first and last 10 steps
display(table.merge(length, on="method", how="left").round(3))
fig = plots.method_bars(evals[(evals.metric == metric) & (evals.benchmark == "synthetic_test") & (evals.decoding == "temp1")],
                        "method", "value", ylabel=f"held-out {metric} (temperature 1)", title=f"arms, {task}, {model}")
plots.save(fig, f"arms_{task}_{model}")

# %% [markdown]
# ## Response length with and without the fixed-length control

# %%
control = steps_df[steps_df.method.isin(["gdpo", "mrtpo", "gdpo+constlen", "mrtpo+constlen"])]
fig = plots.curves(control, "completions/mean_length", ylabel="mean response length (tokens)",
                   title="length: token-mean loss vs constant normaliser")
plots.save(fig, f"arms_length_{task}_{model}")

# %% [markdown]
# **Reading this page.** OPSD is the paper's weakest baseline (59.02 on 3B text-to-SQL, below GRPO); here it is
# read on the same held-out metric as the RL arms. If `+constlen` leaves the length curve where the plain arm
# has it, the length change is not the loss's normaliser at work. Differences between arms smaller than the seed
# spread of GDPO (table 1's page) are noise; the pages named above say which ones have an interval excluding 0.
