"""Run by test_distributed_geometry.py, alone or under ``torchrun --nproc_per_node 2``: two optimizer steps of
MRTPOTrainer (MRTPO advantages) with the batch geometry ``mrtpo.models.geometry.plan_batches`` gives for this number of processes.

Greedy generation, a learning rate of 0 and rewards that depend only on (prompt, position in its group) make the
completions and rewards independent of how a step is split over processes, so the gathered prompts, completions
and advantages of every generation round must be the same under 1 and 2 processes."""

import os
import sys

import torch
from accelerate.utils import gather_object
from datasets import Dataset

from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.models.geometry import plan_batches

policy, out_path = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
N = int(os.environ.get("WORLD_SIZE", "1"))
PROMPTS, G = 4, 4
plan = plan_batches(PROMPTS, G, N, max_micro_batch=4)  # 1 process: 4 x 4 accumulation; 2: 4 x 2 each


def reward(k):
    def score(prompts, completions, **kwargs):
        seen, out = {}, []
        for p in prompts:  # the position of each completion within its group (groups are never split)
            seen[p] = seen.get(p, -1) + 1
            out.append(float((seen[p] + k + len(p)) % 3 == 0))
        return out

    score.__name__ = f"r{k}"
    return score


class Recording(MRTPOTrainer):
    """Keeps, per generation round, the gathered (prompt, completion ids, valid advantages) of every row."""

    rounds: list

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        mask = out["completion_mask"].bool()
        adv = out["advantages"]
        rows = []
        for j, x in enumerate(inputs):
            a = adv[j][mask[j]] if adv.dim() == 2 else adv[j].expand(int(mask[j].sum()))
            rows.append((x["prompt"], out["completion_ids"][j][mask[j]].tolist(), a.tolist()))
        self.rounds.append(gather_object(rows))
        return out


data = Dataset.from_list([{"prompt": f"question {i} about the alphabet a b c"} for i in range(16)])
result = {"plan": plan.as_dict()}
for method in ("mrtpo",):  # token-level: geometry and the replay's batch composition both matter
    args = MRTPOConfig(
        output_dir=f"/tmp/mrtpo_geometry_{method}_{N}", use_cpu=True, bf16=False, report_to="none", advantage=method,
        max_steps=2, learning_rate=0.0, seed=0, max_completion_length=6, beta_warmup_steps=0, mrtpo_beta=0.5,
        save_strategy="no", logging_steps=1, disable_tqdm=True, generation_kwargs={"do_sample": False},
        **plan.trainer_args(),
    )
    trainer = Recording(model=policy, reward_funcs=[reward(0), reward(1)], train_dataset=data, args=args,
                        z_blocks=lambda prompts, completions, **kw: [{"r0": "alpha beta", "r1": "gamma delta"}] * len(completions))
    trainer.rounds = []
    trainer.train()
    result[method] = trainer.rounds
if int(os.environ.get("RANK", "0")) == 0:
    torch.save(result, out_path)
