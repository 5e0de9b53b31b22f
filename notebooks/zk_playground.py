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
# a few steps with it.

# %% tags=["parameters"]
model = "tiny"
task = "sql"  # the custom formulation below is written for text-to-SQL
example_index = 0
train_steps = 10  # steps of the short training run with the custom Z_k (0: skip)
force = False  # the book passes it to every page; this page reuses no run folder

# %%
from transformers import AutoModelForCausalLM, AutoTokenizer

from mrtpo import diagnostics, plots, runs
from mrtpo.tasks import get_task

cfg = runs.resolve(task, "mrtpo", model)  # fails fast, with the registry's message, when the weights are absent
the_task = get_task(task)
path = runs.base_path(cfg)
tokenizer = AutoTokenizer.from_pretrained(path)
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
# This one keeps the task's blocks but gives the execution-match verifier only the reference SQL's WHERE
# clause — a sub-verifier-like formulation (PAPER.md §6 suggests splitting the execution reward by check
# action). Edit it and rerun the page.

# %%
def my_z_blocks(prompts, completions, **columns):
    blocks = the_task.z_blocks(prompts=prompts, completions=completions, **columns)
    for block, gold in zip(blocks, columns["gold_sql"]):
        where = gold.upper().find(" WHERE ")
        block["execution_match"] = "Reference filter: " + (gold[where + 1 :] if where >= 0 else "(none)")
    return blocks


mine = diagnostics.profile_example(policy, tokenizer, the_task, example, z_blocks=my_z_blocks)
shown = plots.RelevanceText(mine["tokens"], mine["q"], mine["regions"], title="q per reward (your Z_k)")
shown.save(f"zk_custom_{task}_{model}")
shown

# %% [markdown]
# ## Train with it
#
# The same trainer, with `z_blocks=my_z_blocks`: nothing else changes. The page shows the logged steps as a
# table (the trainer's printed log lines stay in the executed notebook).

# %% tags=["remove-stdout"]
import tempfile

import pandas as pd

from mrtpo import MRTPOConfig, MRTPOTrainer

if train_steps:
    trainer = MRTPOTrainer(
        model=str(path), reward_funcs=the_task.reward_funcs(), z_blocks=my_z_blocks,
        train_dataset=the_task.synthetic(256, seed=0, split="train"),
        args=MRTPOConfig(output_dir=tempfile.mkdtemp(), use_cpu=True, bf16=False, gradient_checkpointing=False,
                         report_to="none", max_steps=train_steps, logging_steps=1, save_strategy="no",
                         num_generations=cfg.num_generations, per_device_train_batch_size=cfg.num_generations * 2,
                         max_completion_length=cfg.max_completion_length, learning_rate=cfg.learning_rate,
                         disable_tqdm=True),
    )
    trainer.train()
    log = [h for h in trainer.state.log_history if "mrtpo/s" in h]
    display(pd.DataFrame(log)[["step", "reward", "mrtpo/effective_k", "mrtpo/s"]])

# %% [markdown]
# **Reading the shading.** Compare the execution-match line between the two renderings: with only the WHERE
# clause as Z_k, the shift should move onto the filter's tokens if the policy reads that block at all. At
# the tiny scale the policy was taught to read Z blocks during its warm-up (see the tiny-models chapter),
# so this shows the mechanism, not what a pretrained LLM would do.
