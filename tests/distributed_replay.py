"""Run by test_distributed_replay.py under ``torchrun --nproc_per_node 2`` (gloo, CPU): the leave-one-out replay
makes the same number of decoder forwards on every process, whatever each process has to replay (issue 43, 1).

Under ZeRO-3 each decoder forward is a collective, so unequal counts hang the run or gather the wrong layer; on the
CPU a forward hook counts them. Three cases, each writing this process's count:

* ``none``: ``replay.relevance`` with rank 0 replaying two prompts' groups and rank 1 nothing to replay;
* ``fewer``: rank 0 two groups, rank 1 one group;
* ``teacher``: OPSD's ``replay.teacher_hidden`` with rank 0's rows sharing a prompt prefix and rank 1's not;
* ``trainer``: one MRTPOTrainer step whose first reward varies within rank 0's groups and is constant on rank 1's
  (so rank 1 needs no replay); only the forwards inside ``relevance`` are counted.
"""

import os
import sys

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

import mrtpo.method.trainer as trainer_module
from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.method.replay import relevance, teacher_hidden

policy, out_path = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
torch.distributed.init_process_group("gloo")
rank = torch.distributed.get_rank()
counts: dict[str, int] = {}
counting: list[str] = []  # the case being counted (empty: not counting)


def count(module, args, kwargs=None):
    if counting:
        counts[counting[0]] = counts.get(counting[0], 0) + 1


tok = AutoTokenizer.from_pretrained(policy)
model = AutoModelForCausalLM.from_pretrained(policy)
model.get_decoder().register_forward_pre_hook(count)
names = ["r0", "r1"]
blocks = {"r0": "alpha beta", "r1": "gamma delta"}


def replay(case: str, prompts: list[str], need_rows: int) -> None:
    """relevance() over 4 responses per prompt; the first ``need_rows`` responses need both rewards replayed."""
    B, T = 4 * len(prompts), 5
    g = torch.Generator().manual_seed(rank)
    completion_ids = torch.randint(3, len(tok), (B, T), generator=g)
    need = torch.zeros(B, 2, dtype=torch.bool)
    need[:need_rows] = True
    counting[:] = [case]
    counts[case] = 0
    relevance(model, lambda ps: [tok(p)["input_ids"] for p in ps], tok.pad_token_id,
              [p for p in prompts for _ in range(4)], [blocks] * B, completion_ids, torch.ones(B, T, dtype=torch.long),
              need, names, batch_size=2)
    counting[:] = []


two = ["question one about a b c", "question two about d e f"]
replay("none", two, 8 if rank == 0 else 0)
replay("fewer", two, 8 if rank == 0 else 4)

# OPSD's teacher: rank 0's four responses answer one prompt (a shared prefix, run once: 1 + 2 forwards), rank 1's
# four different prompts (no shared prefix: 2 forwards)
teacher_prompts = ["question one about a b c"] * 4 if rank == 0 else ["alpha one", "beta two", "gamma three", "delta four"]
counting[:] = ["teacher"]
counts["teacher"] = 0
teacher_hidden(model, lambda ps: [tok(p)["input_ids"] for p in ps], tok.pad_token_id, teacher_prompts, [blocks] * 4,
               torch.randint(3, len(tok), (4, 5), generator=torch.Generator().manual_seed(rank)), batch_size=2)
counting[:] = []

# the trainer's path: rank 1's responses need no replay (zero group std), rank 0's do
torch.manual_seed(0)


def r0(prompts, completions, **kwargs):
    return [float(rank == 0 and i % 2 == 0) for i in range(len(completions))]


def r1(prompts, completions, **kwargs):
    return [0.0 for _ in completions]


original = trainer_module.relevance


def counted(*args, **kwargs):
    counting[:] = ["trainer"]
    counts.setdefault("trainer", 0)
    try:
        return original(*args, **kwargs)
    finally:
        counting[:] = []


trainer_module.relevance = counted
args = MRTPOConfig(
    output_dir=f"/tmp/mrtpo_replay_{os.getpid()}", use_cpu=True, bf16=False, report_to="none", advantage="mrtpo",
    max_steps=1, learning_rate=0.0, seed=0, max_completion_length=4, beta_warmup_steps=0, mrtpo_beta=0.5,
    num_generations=4, per_device_train_batch_size=4, gradient_accumulation_steps=1, save_strategy="no",
    logging_steps=1, disable_tqdm=True, replay_batch_size=2,
)
data = Dataset.from_list([{"prompt": f"question {i} about the alphabet a b c"} for i in range(8)])
trainer = MRTPOTrainer(model=policy, reward_funcs=[r0, r1], train_dataset=data, args=args,
                       z_blocks=lambda prompts, completions, **kw: [blocks] * len(completions))
model = trainer.accelerator.unwrap_model(trainer.model)
model.get_decoder().register_forward_pre_hook(count)
trainer.train()
torch.save(counts, f"{out_path}.{rank}")
print(f"rank {rank} decoder forwards: {counts}", flush=True)
