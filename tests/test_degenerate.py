"""Degenerate batches (issue 7) never put NaN or inf in advantages, loss or logs.

Cases: every reward equal in every group; empty completions (eos first: one valid token); completions that hit
the length limit without eos, also with truncated completions masked out (no valid token at all); q = 0 at
every position. Each runs through the real trainer on the smoke policy of ``test_trainer``.
"""

import math

import pytest
import torch
from test_trainer import make_trainer

from mrtpo import MRTPOTrainer


def constant_a(prompts, completions, **kw):
    return [1.0 for _ in completions]


def constant_b(prompts, completions, **kw):
    return [0.0 for _ in completions]


def finite_run(trainer) -> list[torch.Tensor]:
    """Train, recording every advantage tensor; assert loss and every logged number are finite."""
    seen = []
    original = trainer._advantages

    def record(out):
        adv = original(out)
        seen.append(adv.detach().clone())
        return adv

    trainer._advantages = record
    trainer.train()
    for adv in seen:
        assert torch.isfinite(adv).all(), adv
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert logs
    for h in logs:
        for key, value in h.items():
            if isinstance(value, (int, float)):
                assert math.isfinite(value), (key, value)
    return seen


@pytest.mark.parametrize("advantage", ["grpo", "gdpo", "mrtpo", "joint"])
def test_all_rewards_equal_in_every_group(smoke_policy, tmp_path, advantage):
    trainer = make_trainer(smoke_policy, tmp_path, advantage, steps=1)
    trainer.reward_funcs = [constant_a, constant_b, constant_a]
    for adv in finite_run(trainer):
        assert (adv == 0).all()


def _all_but(tok, keep: int) -> list[int]:
    return [i for i in range(len(tok)) if i != keep]


@pytest.mark.parametrize("advantage", ["gdpo", "mrtpo"])
def test_empty_completions(smoke_policy, tmp_path, advantage):
    """Only eos can be sampled: every completion is empty text with one valid token."""
    tok = smoke_policy[1]
    trainer = make_trainer(smoke_policy, tmp_path, advantage, steps=1,
                           generation_kwargs={"suppress_tokens": _all_but(tok, tok.eos_token_id)})
    finite_run(trainer)
    assert trainer.state.log_history[0]["completions/mean_length"] == 1


@pytest.mark.parametrize("mask_truncated", [False, True])
def test_no_eos_within_the_length_limit(smoke_policy, tmp_path, mask_truncated):
    """eos can never be sampled; masked out, the batch has no valid token at all."""
    tok = smoke_policy[1]
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1, mask_truncated_completions=mask_truncated,
                           generation_kwargs={"suppress_tokens": [tok.eos_token_id]})
    finite_run(trainer)
    assert trainer.state.log_history[0]["completions/clipped_ratio"] == 1


def test_zero_relevance_everywhere(smoke_policy, tmp_path, monkeypatch):
    """q = 0 at every position (no reward's Z moves the policy): weights fall back to uniform, nothing blows up."""
    def no_shift(self, out, need, joint):
        B, T = out["completion_ids"].shape
        return torch.zeros(B, 1 if joint else need.shape[1], T)

    monkeypatch.setattr(MRTPOTrainer, "_relevance", no_shift)
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1, beta_warmup_steps=0)
    finite_run(trainer)
    assert trainer.state.log_history[0]["mrtpo/frac_qbar_zero"] == 1


def test_nonfinite_logits_skip_the_step_and_count_it(smoke_policy, tmp_path):
    """A model whose training forward returns NaN logits: the step is skipped (weights unchanged), counted, and
    nothing non-finite reaches the logs."""
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=2, learning_rate=1e-2, weight_decay=0.0)
    norm = trainer.model.get_decoder().norm  # final hidden states (TRL fuses the lm_head, so hook before it)
    norm.register_forward_hook(lambda mod, inp, out: out * float("nan") if torch.is_grad_enabled() else out)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    after = list(trainer.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["mrtpo/skipped_nonfinite"] for h in logs] == [1.0, 1.0]
    for h in trainer.state.log_history:
        for k, v in h.items():
            if isinstance(v, float) and k != "grad_norm":
                assert math.isfinite(v), (k, v)


def test_z_block_builder_that_raises_never_crashes_a_step(smoke_policy, tmp_path):
    """Responses whose Z blocks cannot be built are not replayed (uniform weights); the rest are; errors counted."""
    from test_trainer import z_blocks

    def fragile(prompts, completions, completion_ids=None, **kw):
        if any(c[0] % 2 for c in completion_ids):
            raise ValueError("cannot build a block for this text")
        return z_blocks(prompts, completions, completion_ids, **kw)

    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=2)
    trainer.z_blocks = fragile
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert sum(h.get("mrtpo/z_block_errors", 0) for h in logs) > 0
    assert all(math.isfinite(h["loss"]) for h in logs) and trainer.replay_forwards > 0


def test_nonfinite_micro_batch_keeps_the_other_micro_batches_gradient(smoke_policy, tmp_path):
    """Under gradient accumulation, a micro-batch with NaN logits adds nothing, and the step still trains on the
    finite micro-batch (a zero_grad would have wiped its gradient too: the weights would not move)."""
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1, learning_rate=1e-2, weight_decay=0.0,
                           gradient_accumulation_steps=2)
    calls = []

    def every_second_training_forward(mod, inp, out):
        if not torch.is_grad_enabled():
            return out
        calls.append(1)
        return out * float("nan") if len(calls) % 2 == 0 else out

    trainer.model.get_decoder().norm.register_forward_hook(every_second_training_forward)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert len(calls) == 2
    (log,) = [h for h in trainer.state.log_history if "loss" in h]
    assert log["mrtpo/skipped_nonfinite"] == 0.5 and math.isfinite(log["loss"])
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
