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
# # Z_k playground: what each verifier's information moves, and a formulation of your own
#
# MRTPO's relevance for reward k is the Jensen–Shannon shift between replaying a sampled response under
# P_all (every Z block) and under P_\k (all but Z_k). This page samples one response from the policy on a
# held-out prompt, replays it leave-one-out, and shows the response once per reward with each token shaded
# by q, the tokens each verifier reads underlined. Then it swaps in a different Z_k — edit that one cell — and trains
# with it through the runner: a run folder like every other run's (seed, cache, held-out evaluation), keyed by
# the function's source.

# %% tags=["parameters"]
model = "tiny"
task = "sql"  # any task: sql, tool, if
example_index = 0
train_steps = 10  # steps of the short training run with the custom Z_k (0: skip)
force = False  # retrain the custom-Z_k run even when its folder exists
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (your Z_k function then lives in a module)

# %%
from transformers import AutoModelForCausalLM

from mrtpo.analysis import diagnostics, plots
from mrtpo import runs
from mrtpo.models.tokenizer import load_tokenizer
from mrtpo.tasks import get_task

cfg = runs.resolve(task, "mrtpo", model)  # fails fast, with the registry's message, when the weights are absent
the_task = get_task(task)
path = runs.base_path(cfg)
tokenizer = load_tokenizer(path)
policy = AutoModelForCausalLM.from_pretrained(path).eval()
example = the_task.synthetic(16, seed=123, split="test")[example_index]
print(example["prompt"][-1]["content"])

# %% [markdown]
# ## The task's own Z blocks

# %%
profile = diagnostics.profile_example(policy, tokenizer, the_task, example)
shown = plots.RelevanceText(profile["tokens"], profile["q"], profile["regions"], title="q per reward (task's Z blocks)")
shown.save(f"zk_default_{task}_{model}")
shown

# %% [markdown]
# ## Your own Z_k
#
# A Z-block function has a reward function's signature and returns, per response, `{reward name: text}`.
# This one keeps the task's blocks but shows each answer verifier only the first half of its block (the
# reference SQL, tool call or constraint), for any task: does the shift follow the part of the reference the
# policy is shown? Edit it and rerun the page; its source is part of the training run's key, so an edit trains
# a new run and an unchanged one reuses its folder. (For text-to-SQL, `rewards="sub"` splits the execution reward
# into four sub-verifiers with their own blocks: `runs.run("sql", "mrtpo", rewards="sub")`.)

# %%
def my_z_blocks(prompts, completions, **columns):
    blocks = the_task.z_blocks(prompts=prompts, completions=completions, **columns)
    for block in blocks:
        for name in the_task.answer_rewards:
            if name in block:
                block[name] = block[name][: len(block[name]) // 2]
    return blocks


mine = diagnostics.profile_example(policy, tokenizer, the_task, example, z_blocks=my_z_blocks)
shown = plots.RelevanceText(mine["tokens"], mine["q"], mine["regions"], title="q per reward (your Z_k)")
shown.save(f"zk_custom_{task}_{model}")
shown

# %% [markdown]
# ## Train with it
#
# The runner with `z_blocks=my_z_blocks` (the CLI: `--z-blocks module:function`): nothing else changes.

# %%
from mrtpo.analysis import report

if train_steps:
    run = runs.run(task, "mrtpo", model, steps=train_steps, force=force, processes=processes, z_blocks=my_z_blocks)
    print(run.path.name)
    display(run.metrics[["step", "reward", "mrtpo/effective_k", "mrtpo/s"]])
    display(report.summary(report.evaluations([run]), report.answer_metric(task)))

# %% [markdown]
# **Reading the shading.** Compare each answer verifier's line between the two renderings: with half of the
# reference as Z_k, the shift should move toward the tokens that half covers if the policy reads that block at all. At
# the tiny scale the policy was taught to read Z blocks during its warm-up (see the tiny-models chapter),
# so this shows the mechanism, not what a pretrained LLM would do.
