"""LoRA through TRL's ``peft_config`` (issue 41): with adapters the replay reads the adapted policy, OPSD's frozen
teacher and TRL's reference policy are the starting weights (the adapters off, no copy), and a LoRA run writes
merged weights under an identity that names peft."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.method.adapters import has_adapters, initial_policy
from mrtpo.method.replay import relevance
from mrtpo.models.sampling import prompt_ids

LORA = dict(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")


def moved(model, seed: int = 1):
    """``model`` with LoRA adapters whose B is not 0: the adapted policy differs from the starting one."""
    adapted = get_peft_model(model, LoraConfig(**LORA))
    torch.manual_seed(seed)
    for name, p in adapted.named_parameters():
        if "lora_B" in name:
            p.data.normal_(0.0, 0.5)
    return adapted.eval()


def replay(model, tok):
    """q of two responses to one prompt, each reward with its Z block replayed."""
    prompts = [[{"role": "user", "content": "Which city ?"}]] * 2
    blocks = [{"a": "the answer is short", "b": "it names a city"}] * 2
    ids = torch.tensor([[5, 9, 12, 7, 30, 11], [8, 14, 9, 21, 6, 3]])
    q, _ = relevance(model, lambda ps: [prompt_ids(tok, p) for p in ps], tok.pad_token_id, prompts, blocks, ids,
                     torch.ones_like(ids), torch.ones(2, 2, dtype=torch.bool), ["a", "b"])
    return q


def test_the_replay_reads_the_adapters_and_initial_policy_switches_them_off(smoke_policy):
    path, tok = smoke_policy
    adapted = moved(AutoModelForCausalLM.from_pretrained(path))
    assert has_adapters(adapted) and not has_adapters(AutoModelForCausalLM.from_pretrained(path))
    merged = copy.deepcopy(adapted).merge_and_unload()
    base = AutoModelForCausalLM.from_pretrained(path).eval()
    q_adapted, q_merged, q_base = replay(adapted, tok), replay(merged, tok), replay(base, tok)
    assert torch.allclose(q_adapted, q_merged, atol=1e-5)  # the adapters are in every replayed forward
    assert not torch.allclose(q_adapted, q_base, atol=1e-3)
    with initial_policy(adapted):
        assert torch.allclose(replay(adapted, tok), q_base, atol=1e-6)
    assert torch.allclose(replay(adapted, tok), q_adapted)  # back on after the block
    with initial_policy(base):  # no adapters: unchanged
        assert torch.equal(replay(base, tok), q_base)


def rewards(prompts, completions, completion_ids, **kw):
    return [float(sum(c) % 2) for c in completion_ids]


def blocks(prompts, completions, completion_ids=None, **kw):
    return [{"rewards": f"length {len(c) % 2}"} for c in completions]


def lora_trainer(policy, tmp_path, **overrides):
    path, tok = policy
    args = dict(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", logging_steps=1, max_steps=2,
                save_strategy="no", num_generations=4, per_device_train_batch_size=8, max_completion_length=10,
                learning_rate=5e-2, beta_warmup_steps=0, disable_tqdm=True, gradient_checkpointing=False)
    args.update(overrides)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Which city {i} ?"}]} for i in range(8)])
    return MRTPOTrainer(model=path, processing_class=tok, reward_funcs=[rewards], train_dataset=data,
                        args=MRTPOConfig(**args), z_blocks=blocks, peft_config=LoraConfig(**LORA))


def test_opsd_frozen_teacher_is_the_policy_with_its_adapters_off(smoke_policy, tmp_path, monkeypatch):
    import mrtpo.method.trainer as trainer_module

    ids = torch.tensor([[5, 9, 12, 7, 30, 11]])
    base = AutoModelForCausalLM.from_pretrained(smoke_policy[0]).eval()
    seen, original = [], trainer_module.teacher_hidden

    def watched(teacher, *args, **kwargs):  # what the teacher computes at the moment the trainer replays it
        with torch.no_grad():
            seen.append(teacher(input_ids=ids).logits)
        return original(teacher, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "teacher_hidden", watched)
    trainer = lora_trainer(smoke_policy, tmp_path, advantage="opsd")
    assert trainer.teacher is None  # no copy of the weights: the starting policy is the adapters switched off
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs) and logs[1]["opsd/divergence"] > 0
    with torch.no_grad():  # both steps' teacher is the base, though the adapters moved after step 1
        assert len(seen) == 2 and all(torch.allclose(s, base(input_ids=ids).logits, atol=1e-5) for s in seen)
    policy = trainer.accelerator.unwrap_model(trainer.model)
    with torch.no_grad():
        adapted = policy(input_ids=ids).logits
        with initial_policy(policy):
            start = policy(input_ids=ids).logits
        assert not torch.allclose(adapted, start, atol=1e-4)  # training moved the adapters
        assert torch.allclose(start, base(input_ids=ids).logits, atol=1e-5)  # the teacher: the starting weights


def test_the_reference_policy_is_the_starting_one(smoke_policy, tmp_path):
    """TRL's KL term (beta > 0) with adapters keeps no reference copy: the adapters off are the reference, so the
    first step's KL is 0 (the adapters start at B = 0) and the second's is not."""
    trainer = lora_trainer(smoke_policy, tmp_path, advantage="mrtpo", beta=0.1)
    assert trainer.ref_model is None
    trainer.train()
    kl = [h["kl"] for h in trainer.state.log_history if "kl" in h]
    assert len(kl) == 2 and abs(kl[0]) < 1e-6 and kl[1] > 0


def test_a_lora_run_writes_merged_weights_under_an_identity_naming_peft(tmp_path, monkeypatch):
    from mrtpo import runs
    from mrtpo.runs.config import BadRequest

    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    settings = dict(steps=2, prompts_per_step=2, num_generations=4, max_completion_length=12, eval_prompts=2,
                    eval_samples=1, train_size=8, learning_rate=5e-2)
    run = runs.run("sql", "mrtpo", "smoke", lora_rank=4, **settings)
    config = json.loads((run.path / "config.json").read_text())
    assert config["config"]["lora_rank"] == 4 and "peft" in config["packages"]
    full = runs.resolve("sql", "mrtpo", "smoke", **settings)
    assert "peft" not in runs.runner.identity(full)["packages"] and "lora_rank" not in runs.runner.identity(full)["config"]
    base = AutoModelForCausalLM.from_pretrained(runs.base_path(full))
    final = AutoModelForCausalLM.from_pretrained(tmp_path / "cache" / "work" / config["hash"] / "final")
    # a plain model of the base's parameters (the adapters merged in); only the adapted linear layers may have moved
    # (at this size two steps may see no reward spread, hence no update: the trainer tests above see them move)
    assert not has_adapters(final) and [n for n, _ in final.named_parameters()] == [n for n, _ in base.named_parameters()]
    assert all("proj" in n for n, p in final.named_parameters() if not torch.equal(p, base.get_parameter(n)))
    assert run.summary["weights_sha256"] and run.eval
    with pytest.raises(BadRequest, match="lora_rank"):
        runs.resolve("sql", "mrtpo", "smoke", lora_rank=0)
