"""Run by test_distributed_fixes.py under ``torchrun --nproc_per_node 2`` (gloo, CPU), and by test_zero3.py under
DeepSpeed ZeRO-3: a non-finite loss on one process skips the micro-batch on every process, without hanging the
others (issue 43, 6).

Two GRPO steps of MRTPOTrainer on the smoke policy; at the second step (global step 1) rank 1's loss is made NaN
(its graph kept, as a broken forward's would be). Each process writes the ``mrtpo/skipped_nonfinite`` it logged at
each step and its final weights."""

import os
import sys

import torch
from datasets import Dataset

from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.method.replay import whole_parameters

policy, out_path = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
rank = int(os.environ["RANK"])


def parity(prompts, completions, completion_ids, **kwargs):
    return [float(sum(c) % 2) for c in completion_ids]


class NaNOnRank1(MRTPOTrainer):
    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        if rank == 1 and self.state.global_step == 1:
            loss = loss * float("nan")
        return loss


args = MRTPOConfig(
    output_dir=f"/tmp/mrtpo_nonfinite_{os.getpid()}", use_cpu=True, bf16=False, report_to="none", advantage="grpo",
    max_steps=2, learning_rate=1e-2, seed=0, max_completion_length=6, num_generations=4, per_device_train_batch_size=4,
    gradient_accumulation_steps=1, save_strategy="no", logging_steps=1, disable_tqdm=True,
)
data = Dataset.from_list([{"prompt": f"question {i} about the alphabet a b c"} for i in range(8)])
trainer = NaNOnRank1(model=policy, reward_funcs=[parity], train_dataset=data, args=args)
trainer.train()
skipped = [h["mrtpo/skipped_nonfinite"] for h in trainer.state.log_history if "mrtpo/skipped_nonfinite" in h]
model = trainer.accelerator.unwrap_model(trainer.model)
with whole_parameters(*model.parameters()):  # under ZeRO-3 the state dict holds empty shards: read them gathered
    weights = {k: v.detach().clone() for k, v in model.named_parameters()}
torch.save({"skipped": skipped, "weights": weights}, f"{out_path}.{rank}")
print(f"rank {rank} skipped_nonfinite per step: {skipped}", flush=True)
