"""Batch geometry: the step is prompts x G completions whatever the processes and the memory budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtpo.runs.config import resolve
from mrtpo.models.geometry import ARCHITECTURES, Architecture, memory_estimate, plan_batches

SEVEN_B = ARCHITECTURES["Qwen/Qwen2.5-Coder-7B-Instruct"]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2, 4, 8]),
       st.floats(20, 200) | st.none())
def test_a_step_is_prompts_times_generations_over_the_whole_job(prompts, G, N, budget):
    if (prompts * G) % N:
        with pytest.raises(ValueError, match="cannot split a step"):
            plan_batches(prompts, G, N)
        return
    plan = plan_batches(prompts, G, N, arch=SEVEN_B, budget_gib=budget, zero3=N > 1)
    assert plan.completions_per_step == plan.generation_batch_size == prompts * G
    assert plan.steps_per_generation == plan.gradient_accumulation_steps  # one generation round per optimizer step
    if budget is None:
        assert plan.fits is None and plan.gradient_accumulation_steps == 1
    elif plan.fits:
        assert plan.memory_gib_per_device <= budget + 0.05
    else:
        assert plan.per_device_train_batch_size == 1 and plan.memory_gib_per_device > budget


def test_budget_sets_micro_batch_and_accumulation():
    free = plan_batches(32, 8, 1)
    assert (free.per_device_train_batch_size, free.gradient_accumulation_steps) == (256, 1)  # no budget: one pass
    eight = plan_batches(32, 8, 8, arch=SEVEN_B, budget_gib=64, completion_len=1024, zero3=True)
    assert eight.completions_per_step == 256 and eight.per_device_train_batch_size * eight.gradient_accumulation_steps == 32
    tighter = plan_batches(32, 8, 8, arch=SEVEN_B, budget_gib=40, completion_len=1024, zero3=True)
    assert tighter.per_device_train_batch_size < eight.per_device_train_batch_size
    assert tighter.trainer_args()["gradient_accumulation_steps"] > eight.gradient_accumulation_steps
    one_gpu = plan_batches(32, 8, 1, arch=SEVEN_B, budget_gib=72)  # 7B states alone (~114 GiB) exceed 80 GB
    assert one_gpu.fits is False and one_gpu.per_device_train_batch_size == 1 and one_gpu.completions_per_step == 256


def test_memory_terms():
    one = memory_estimate(SEVEN_B, micro=1, rollout_rows=0, prompt_len=0, completion_len=1024, replay_chunk_tokens=0)
    assert one["states"] == pytest.approx(7.62e9 * 16 / 2**30)
    per_seq = (28 * 1024 * 3584 * 4 + 1024 * (4 * 3584 + 3 * 18944) * 4 + 1024 * 152_064 * 6) / 2**30
    assert one["training"] == pytest.approx(per_seq) and one["peak"] == pytest.approx(one["states"] + per_seq)
    sharded = memory_estimate(SEVEN_B, 1, 0, 0, 1024, num_processes=8, zero3=True, replay_chunk_tokens=0)
    assert sharded["states"] == pytest.approx(one["states"] / 8)
    assert sharded["generation"] == pytest.approx(7.62e9 * 4 / 2**30)  # ZeRO-3 gathers the weights to generate
    two = memory_estimate(SEVEN_B, micro=2, rollout_rows=0, prompt_len=0, completion_len=1024, replay_chunk_tokens=0)
    assert two["training"] == pytest.approx(2 * one["training"]) and two["states"] == one["states"]


def test_architecture_from_config_counts_parameters():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False)
    arch = Architecture.from_config(config.to_dict())
    model = Qwen2ForCausalLM(config)
    biases = sum(p.numel() for n, p in model.named_parameters() if n.endswith(".bias"))  # Qwen2's q/k/v biases
    assert arch.params == sum(p.numel() for p in model.parameters()) - biases
    assert (arch.kv_heads, arch.head_dim, arch.vocab) == (2, 8, 300)


def test_plan_for_job_reads_the_launcher(monkeypatch):
    from mrtpo.models.geometry import plan_for_job

    monkeypatch.setenv("WORLD_SIZE", "2")
    plan = plan_for_job(8, 8, 96)  # CPU: no budget, each process takes its half of the step at once
    assert (plan.num_processes, plan.per_device_train_batch_size, plan.gradient_accumulation_steps) == (2, 32, 1)
    monkeypatch.delenv("WORLD_SIZE")
    assert plan_for_job(8, 8, 96).per_device_train_batch_size == 64  # the tiny runs' geometry, unchanged


def test_opsd_frozen_teacher_adds_a_copy_of_the_weights_to_the_plan():
    """OPSD's teacher frozen at the starting weights is a second, bf16 copy (2 B/param) on every process."""
    plain = memory_estimate(SEVEN_B, 1, 0, 0, 1024, num_processes=8, zero3=True, replay_chunk_tokens=0)
    teacher = memory_estimate(SEVEN_B, 1, 0, 0, 1024, num_processes=8, zero3=True, replay_chunk_tokens=0,
                              frozen_teacher=True)
    assert teacher["states"] - plain["states"] == pytest.approx(SEVEN_B.params * 2 / 2**30)
    assert resolve("sql", "opsd", "smoke").frozen_teacher and resolve("sql", "gdpo+opsd", "smoke").frozen_teacher
    assert not resolve("sql", "opsd", "smoke", opsd_teacher="current").frozen_teacher
    assert not resolve("sql", "mrtpo", "smoke").frozen_teacher
