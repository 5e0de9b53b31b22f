"""Run by test_trainer.py, alone or under ``torchrun --nproc_per_node 2``: the trainer's own advantage code on
one fixed global batch (16 responses, 3 rewards), each process holding its slice. Writes the gathered
advantages and the realised bound s."""

import sys

import torch
from datasets import Dataset

from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.method.trainer import Scored

policy, out_path = sys.argv[1], sys.argv[2]
g = torch.Generator().manual_seed(11)
B, K, T = 16, 3, 9
rewards = torch.randint(0, 2, (B, K), generator=g).float()
mask = (torch.arange(T) < torch.randint(2, T + 1, (B, 1), generator=g)).long()
q = torch.zeros(B, K, T)
q[..., 1] = 1.0  # concentrated shift: the bound is active
q += 0.05 * torch.rand(B, K, T, generator=g)

args = MRTPOConfig(output_dir="/tmp/mrtpo_dist", use_cpu=True, bf16=False, report_to="none", num_generations=4,
                   per_device_train_batch_size=8, beta_warmup_steps=0, mrtpo_beta=0.75)
data = Dataset.from_list([{"prompt": "x"}] * 4)
reward = lambda prompts, completions, **kw: [0.0] * len(completions)  # noqa: E731 (never called here)
trainer = MRTPOTrainer(model=policy, reward_funcs=[reward] * K, train_dataset=data, args=args,
                       z_blocks=lambda **kw: [])
world, rank = trainer.accelerator.num_processes, trainer.accelerator.process_index
local = slice(rank * B // world, (rank + 1) * B // world)
n = local.stop - local.start
trainer._scored = Scored([{"prompt": "x"}] * n, ["x"] * n, ["y"] * n, [[0]] * n, rewards)
trainer._relevance = lambda out, need, joint: q[local]
adv = trainer._advantages({"completion_mask": mask[local], "completion_ids": torch.zeros(n, T, dtype=torch.long)})
full = trainer.accelerator.gather(adv)
if trainer.accelerator.is_main_process:
    torch.save({"adv": full, "s": trainer._metrics["train"]["mrtpo/s"][-1]}, out_path)
