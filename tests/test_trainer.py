"""MRTPOTrainer on a smoke-size policy: every variant trains, uniform == gdpo, the replay is exact and sparse."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from mrtpo import METHODS, MRTPOConfig, MRTPOTrainer
from mrtpo.method.trainer import Scored
from mrtpo.method.contexts import build_contexts
from mrtpo.method.relevance import js_relevance


def parity(prompts, completions, completion_ids, **kw):
    """Varies within groups: parity of the sum of the sampled token ids."""
    return [float(sum(c) % 2) for c in completion_ids]


def has_a(prompts, completions, completion_ids, **kw):
    return [float(c[0] % 3 == 0) for c in completion_ids]


def constant(prompts, completions, **kw):
    """Zero group std everywhere: must never be replayed."""
    return [1.0 for _ in completions]


def z_blocks(prompts, completions, completion_ids=None, hint=None, **kw):
    return [{"parity": f"length {len(c) % 2}", "has_a": h, "constant": "always one"} for c, h in zip(completions, hint)]


def read_regions(prompts, completions, completion_ids=None, **kw):
    """Check regions: parity reads the first half of the text, has_a all of it (uniform), constant nothing."""
    texts = [c[-1]["content"] for c in completions]
    return [{"parity": [(0, len(t) // 2)], "has_a": [(0, len(t))], "constant": []} for t in texts]


def dataset(n=8):
    return Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"Which city {i} ?"}], "hint": f"city {i}"} for i in range(n)]
    )


def make_trainer(policy, tmp_path, advantage="mrtpo", steps=2, seed=0, **overrides):
    path, tok = policy
    args = dict(
        output_dir=str(tmp_path / advantage), advantage=advantage, use_cpu=True, bf16=False,
        gradient_checkpointing=False, report_to="none", logging_steps=1, max_steps=steps, save_strategy="no",
        num_generations=4, per_device_train_batch_size=8, max_completion_length=10, learning_rate=1e-2,
        seed=seed, beta_warmup_steps=0, disable_tqdm=True,
    )
    args.update(overrides)
    return MRTPOTrainer(
        model=path, processing_class=tok, reward_funcs=[parity, has_a, constant], train_dataset=dataset(),
        args=MRTPOConfig(**args), z_blocks=z_blocks, check_regions=read_regions,
    )


@pytest.mark.parametrize("advantage", METHODS)
def test_every_variant_trains(smoke_policy, tmp_path, advantage):
    trainer = make_trainer(smoke_policy, tmp_path, advantage, saw=advantage == "mrtpo")
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in logs)
    if advantage in ("mrtpo", "joint", "shuffled"):
        assert trainer.replay_forwards > 0 and "mrtpo/s" in logs[0] and "mrtpo/effective_k" in logs[0]
        assert 0 < logs[0]["mrtpo/s"] <= 1
        assert -1 <= logs[0]["mrtpo/entropy_corr"] <= 1  # reward-specificity is logged wherever q is measured
        if advantage != "joint":
            assert -1 <= logs[0]["mrtpo/cross_reward_corr"] <= 1 and "mrtpo/parity/entropy_corr" in logs[0]
    if advantage == "entropy":
        assert trainer.replay_forwards == 0 and 0 < logs[0]["mrtpo/s"] <= 1
    if advantage in ("entropy", "gtpo"):
        # the entropy the weights use is that of the distributions sampled from: TRL's loss pass measures the same
        assert trainer.replay_forwards == 0
        assert logs[0]["mrtpo/entropy_mean"] == pytest.approx(logs[0]["entropy"], rel=1e-4)
    assert logs[0]["mrtpo/constant/frac_groups_nonzero_std"] == 0.0


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo"])
def test_token_advantages_run_with_every_loss_type(smoke_policy, tmp_path, loss_type):
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1, loss_type=loss_type)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    (log,) = [h for h in trainer.state.log_history if "loss" in h]
    assert math.isfinite(log["loss"]) and 0 < log["mrtpo/s"] <= 1  # token-level advantages reached the loss
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))  # and it trained


def test_uniform_trains_exactly_as_gdpo(smoke_policy, tmp_path):
    results = {}
    for advantage in ("gdpo", "uniform"):
        trainer = make_trainer(smoke_policy, tmp_path, advantage, steps=3)
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        results[advantage] = (losses, [p.detach().clone() for p in trainer.model.parameters()])
    assert results["gdpo"][0] == results["uniform"][0]
    for a, b in zip(results["gdpo"][1], results["uniform"][1]):
        assert torch.allclose(a, b, atol=1e-7, rtol=0)


def test_zero_std_rewards_are_not_replayed(smoke_policy, tmp_path):
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1)
    trainer.train()
    inputs, prompts, completions, ids, rewards = trainer._scored
    from mrtpo.method.advantages import replay_needed

    need = replay_needed(rewards, 4)
    assert not need[:, 2].any()  # the constant reward
    expected = int(need.any(1).sum() + need.sum())  # one P_all per replayed response + one P_minus per pair
    assert trainer.replay_forwards == expected


def test_replay_equals_direct_unpadded_forwards(smoke_policy, tmp_path):
    """The batched replay (shared prompt prefix run once, rows packed by length, hidden states) gives the q of
    separate full forwards, up to float reordering."""
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1)
    trainer.train()
    inputs, prompts, completions, ids, rewards = trainer._scored
    path, tok = smoke_policy
    B = len(prompts)
    T = max(len(c) for c in ids)
    out = {"completion_ids": torch.full((B, T), tok.pad_token_id), "completion_mask": torch.zeros(B, T, dtype=torch.long)}
    for j, c in enumerate(ids):
        out["completion_ids"][j, : len(c)] = torch.tensor(c)
        out["completion_mask"][j, : len(c)] = 1
    need = torch.ones(B, 3, dtype=torch.bool)
    q = trainer._relevance(out, need, joint=False)
    model = trainer.model.eval()
    blocks = z_blocks(prompts, completions, hint=[x["hint"] for x in inputs])
    for j in (0, B - 1):
        ctx = build_contexts(prompts[j], blocks[j])
        def logits(p):
            pid = tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
            full = torch.tensor([list(pid) + list(ids[j])])
            with torch.no_grad():
                return model(full).logits[0, len(pid) - 1 : len(pid) - 1 + len(ids[j])]
        ref = logits(ctx.all)
        for k, name in enumerate(["parity", "has_a", "constant"]):
            direct = js_relevance(ref, logits(ctx.minus[name]))
            assert torch.allclose(q[j, k, : len(ids[j])], direct, atol=2e-6)  # float reordering only
            assert (q[j, k, len(ids[j]) :] == 0).all()


def test_profiles_are_saved(smoke_policy, tmp_path):
    trainer = make_trainer(smoke_policy, tmp_path, "mrtpo", steps=1, profile_samples=3)
    trainer.train()
    rows = [json.loads(line) for line in open(Path(trainer.args.output_dir) / "profiles.jsonl")]
    assert len(rows) == 3 and set(rows[0]["q"]) == {"parity", "has_a", "constant"}
    assert all(0 <= v <= 1 for v in rows[0]["q"]["parity"])


def trained_with_generation_entropy(smoke_policy, tmp_path, method: str, **settings):
    """One training step of an arm that reads the sampling entropy, on a sharpened smoke policy (the random one's
    entropy is nearly ln V everywhere): the advantages the trainer computed, the step's rewards, and the entropy of
    each sampled token's distribution and the completion mask, recomputed here by a forward of the sampling policy."""
    from transformers import AutoModelForCausalLM

    from mrtpo.method.relevance import token_entropy

    path, tok = smoke_policy
    sharp = AutoModelForCausalLM.from_pretrained(path)
    with torch.no_grad():
        sharp.model.norm.weight.mul_(8.0)
    sharp.save_pretrained(tmp_path / "sharp")
    tok.save_pretrained(tmp_path / "sharp")
    trainer = make_trainer((str(tmp_path / "sharp"), tok), tmp_path, method, steps=1, **settings)
    seen = {}
    original = trainer._advantages

    def spy(out):
        seen["adv"], seen["out"] = original(out), out
        return seen["adv"]

    trainer._advantages = spy
    trainer.train()
    out = seen["out"]
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    P, T = out["prompt_ids"].shape[1], out["completion_ids"].shape[1]
    mask = out["completion_mask"].float()
    with torch.no_grad():  # the weights have since been updated once: reload the sampling policy from disk
        sampler = AutoModelForCausalLM.from_pretrained(tmp_path / "sharp").eval()
        h = token_entropy(sampler(input_ids=ids, attention_mask=attention).logits[:, P - 1 : P + T - 1], mask)
    return seen["adv"], trainer._scored[4], h, mask


def test_entropy_arm_places_advantage_by_generation_entropy(smoke_policy, tmp_path):
    """The entropy arm's token advantages are MRTPO's composition with w = (1 - beta) + beta h / hbar, h the
    entropy of each sampled token's distribution, recomputed here by a forward over prompt + completion."""
    from mrtpo.method.advantages import entropy_weights, gdpo_advantages, token_advantages

    adv, rewards, h, mask = trained_with_generation_entropy(smoke_policy, tmp_path, "entropy")
    A_k, _ = gdpo_advantages(rewards, 4)
    expected, _ = token_advantages(A_k, entropy_weights(h, mask, 0.5), mask)
    assert torch.allclose(adv, expected, atol=1e-4)
    assert not torch.allclose(adv, adv[:, :1] * mask, atol=1e-3)  # not the response-level GDPO


def test_gtpo_arm_shapes_gdpo_by_generation_entropy(smoke_policy, tmp_path):
    """The gtpo arm's token advantages are ``gtpo_advantages`` of GDPO's advantages (S the outcome, the trainer's
    alphas) with the entropy of each sampled token's distribution, recomputed here by a forward."""
    from mrtpo.method.advantages import gdpo_advantages, summed_advantage
    from mrtpo.method.gtpo import gtpo_advantages

    adv, rewards, h, mask = trained_with_generation_entropy(smoke_policy, tmp_path, "gtpo", gtpo_alpha1=1.0,
                                                            gtpo_alpha2=0.5)
    A_k, A = gdpo_advantages(rewards, 4)
    expected = gtpo_advantages(A, h, mask, 4, 1.0, 0.5, outcome=summed_advantage(A_k))
    assert torch.allclose(adv, expected, atol=1e-4)
    assert not torch.allclose(adv, A.unsqueeze(1) * mask, atol=1e-3)  # not the response-level GDPO


def test_bad_config_fails_early():
    with pytest.raises(ValueError, match="grpo, gdpo, mrtpo"):
        MRTPOConfig(output_dir="x", advantage="nope", use_cpu=True)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        MRTPOConfig(output_dir="x", mrtpo_beta=1.5, use_cpu=True)
    with pytest.raises(ValueError, match="gtpo_alpha"):
        MRTPOConfig(output_dir="x", advantage="gtpo", gtpo_alpha2=-0.1, use_cpu=True)


def test_resume_continues_beta_schedule(smoke_policy, tmp_path):
    kwargs = dict(beta_warmup_steps=4, save_strategy="steps", save_steps=2)
    full = make_trainer(smoke_policy, tmp_path / "full", "mrtpo", steps=4, **kwargs)
    full.train()
    first = make_trainer(smoke_policy, tmp_path / "resumed", "mrtpo", steps=2, **kwargs)
    first.train()
    resumed = make_trainer(smoke_policy, tmp_path / "resumed", "mrtpo", steps=4, **kwargs)
    resumed.train(resume_from_checkpoint=True)
    betas = lambda t: [h["mrtpo/beta_t"] for h in t.state.log_history if "mrtpo/beta_t" in h]  # noqa: E731
    assert betas(full) == [0.0, pytest.approx(0.078125), pytest.approx(0.25), pytest.approx(0.421875)]
    assert betas(resumed)[-2:] == betas(full)[-2:]


def test_gdpo_equals_trl_normalize_then_sum(smoke_policy, tmp_path):
    """Our gdpo_advantages on TRL's gathered rewards equals TRL's own normalize_then_sum advantages."""
    from mrtpo.method.advantages import gdpo_advantages
    from trl import GRPOConfig, GRPOTrainer

    path, tok = smoke_policy
    g = torch.Generator().manual_seed(7)
    table = torch.randint(0, 3, (8, 3), generator=g).float()
    table[1, 2] = float("nan")
    table[5] = float("nan")  # an unscorable response

    def col(k):
        def f(prompts, completions, **kw):
            return [None if v != v else float(v) for v in table[:, k].tolist()]
        f.__name__ = f"r{k}"
        return f

    trainer = GRPOTrainer(
        model=path, processing_class=tok, reward_funcs=[col(0), col(1), col(2)], train_dataset=dataset(2),
        args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", num_generations=4,
                        per_device_train_batch_size=8, max_completion_length=4,
                        multi_objective_aggregation="normalize_then_sum"),
    )
    batch = [{"prompt": [{"role": "user", "content": "q"}]}] * 8
    out = trainer._generate_and_score_completions(batch)
    assert torch.equal(out["advantages"], gdpo_advantages(table, 4)[1])


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_two_processes_equal_one(smoke_policy, tmp_path):
    script = Path(__file__).with_name("distributed_advantages.py")
    policy = smoke_policy[0]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, str(script), policy, str(tmp_path / "one.pt")], env=env, capture_output=True, text=True)
    assert one.returncode == 0, one.stderr[-2000:]
    two = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533",
         str(script), policy, str(tmp_path / "two.pt")], env=env, capture_output=True, text=True,
    )
    assert two.returncode == 0, two.stderr[-2000:]
    a, b = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert a["s"] < 1  # the bound is active, so its global sums matter
    assert torch.allclose(a["adv"], b["adv"], atol=1e-6) and abs(a["s"] - b["s"]) < 1e-6


def test_relevance_peaks_where_the_left_out_block_can_reach(smoke_policy, tmp_path):
    """A one-layer policy with sliding-window attention (window W) sees only its last W tokens, so removing the
    last Z block can move exactly the first W - tail completion positions (tail = template tokens after the
    block) and removing an earlier block can move none: q must be positive exactly there and ~0 elsewhere."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    _, tok = smoke_policy
    W = 6
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, use_sliding_window=True, sliding_window=W,
                         max_window_layers=0, tie_word_embeddings=True, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id)
    path = tmp_path / "window_policy"
    Qwen2ForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)

    def blocks(prompts, completions, **kw):
        return [{"parity": "city 1 2 3", "has_a": "count rows 4 5"} for _ in completions]

    trainer = MRTPOTrainer(
        model=str(path), processing_class=tok, reward_funcs=[parity, has_a], train_dataset=dataset(),
        args=MRTPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none",
                         num_generations=4, per_device_train_batch_size=8), z_blocks=blocks,
    )
    prompt = [{"role": "user", "content": "Which city ?"}]
    completion = tok("SELECT name FROM city WHERE pop > 5", add_special_tokens=False)["input_ids"]
    T = len(completion)
    trainer._scored = Scored([{"prompt": prompt}], [prompt], ["x"], [completion], None)
    out = {"completion_ids": torch.tensor([completion]), "completion_mask": torch.ones(1, T, dtype=torch.long)}
    q = trainer._relevance(out, torch.ones(1, 2, dtype=torch.bool), joint=False)[0]

    from mrtpo.method.contexts import build_contexts

    ctx = build_contexts(prompt, blocks(None, [None])[0])
    ids_all = trainer._tokenize_prompts([ctx.all])[0][0]
    ids_minus = trainer._tokenize_prompts([ctx.minus["has_a"]])[0][0]
    tail = next(i for i in range(1, len(ids_minus)) if ids_all[-i] != ids_minus[-i]) - 1  # shared template tokens
    reach = W - tail  # completion positions whose window still contains the last block
    assert 0 < reach < T
    assert (q[1, :reach] > 1e-3).all(), q[1]  # "has_a" is the last block
    assert (q[1, reach:] < 1e-4).all(), q[1]
    assert (q[0] < 1e-4).all(), q[0]  # the earlier block is out of every completion position's window


def no_blocks(prompts, completions, **kw):
    return [{} for _ in completions]


def test_opsd_current_teacher_without_blocks_is_the_student(smoke_policy, tmp_path):
    """Teacher = the current weights and P_all = P_0: the divergence and its gradient are 0 (to rounding)."""
    path, tok = smoke_policy
    trainer = MRTPOTrainer(
        model=path, processing_class=tok, reward_funcs=[parity, has_a], train_dataset=dataset(), z_blocks=no_blocks,
        args=MRTPOConfig(output_dir=str(tmp_path), advantage="opsd", opsd_teacher="current", use_cpu=True,
                         bf16=False, report_to="none", logging_steps=1, max_steps=1, save_strategy="no",
                         num_generations=4, per_device_train_batch_size=8, max_completion_length=10,
                         learning_rate=1e-2, disable_tqdm=True),
    )
    trainer.train()
    (log,) = [h for h in trainer.state.log_history if "loss" in h]
    assert abs(log["opsd/divergence"]) < 1e-6 and log["grad_norm"] < 1e-6 and trainer.teacher is None


@pytest.mark.parametrize("options", [
    dict(advantage="opsd", opsd_divergence="reverse", opsd_clip=0.05),
    dict(advantage="opsd", opsd_teacher="current", opsd_top_k=3),
    dict(advantage="gdpo", opsd=True, opsd_coef=0.5),
])
def test_opsd_options_train(smoke_policy, tmp_path, options):
    trainer = make_trainer(smoke_policy, tmp_path, **options)
    teacher = None if trainer.teacher is None else [p.detach().clone() for p in trainer.teacher.parameters()]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) and h["opsd/divergence"] >= 0 for h in logs)
    assert logs[1]["opsd/divergence"] > 0  # the teacher sees Z blocks the student does not
    if teacher is not None:  # the initial-weights teacher stays frozen
        assert all(torch.equal(a, b) for a, b in zip(teacher, trainer.teacher.parameters()))


def test_opsd_term_changes_gdpo(smoke_policy, tmp_path):
    losses = {}
    for opsd in (False, True):
        trainer = make_trainer(smoke_policy, tmp_path / str(opsd), "gdpo", steps=1, opsd=opsd)
        trainer.train()
        losses[opsd] = [h for h in trainer.state.log_history if "loss" in h][0]["loss"]
    assert losses[True] > losses[False]  # the same samples (same seed); the added divergence is positive


def test_logged_replay_rate_divides_by_the_pairs_that_exist():
    """The per-step log (PAPER.md §7): a reward that does not apply to a response is no pair."""
    from collections import defaultdict
    from types import SimpleNamespace

    from mrtpo.method.advantages import replay_needed

    nan = float("nan")
    rewards = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, nan], [0.0, nan]])
    me = SimpleNamespace(_metrics={"train": defaultdict(list)}, num_generations=2, reward_func_names=["a", "b"],
                         args=SimpleNamespace(advantage="mrtpo"))
    MRTPOTrainer._log_reward_variance(me, rewards, replay_needed(rewards, 2))
    logged = {k: v[0] for k, v in me._metrics["train"].items()}
    assert logged["mrtpo/a/frac_replayed"] == 1.0 and logged["mrtpo/b/frac_replayed"] == 1.0  # b: 2 of its 2 pairs
    assert logged["mrtpo/frac_replayed"] == 1.0 and logged["mrtpo/rewards_applying"] == 1.5
    assert logged["mrtpo/effective_k"] == 1.5 and logged["mrtpo/b/frac_groups_nonzero_std"] == 0.5


@pytest.mark.parametrize("advantage, options", [("region", {}), ("region", {"saw": True}), ("mrtpo", {"region_blend": 0.5})],
                         ids=["region", "region+saw", "mrtpo-blend0.5"])
def test_region_placement_trains(smoke_policy, tmp_path, advantage, options):
    """The positive control and the dial train; the weights place by the check regions (``placement``, mapped onto
    the tokens by ``diagnostics.region_indicator``), and the check-region ratio of that placement is logged."""
    from mrtpo.method.advantages import gdpo_advantages, placement, saw_weights, token_advantages, token_weights
    from mrtpo.method.regions import region_indicator

    trainer = make_trainer(smoke_policy, tmp_path, advantage, steps=1, **options)
    seen = []
    original = trainer._advantages
    trainer._advantages = lambda out: seen.append((out, trainer._scored, original(out))) or seen[-1][2]
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 1 and math.isfinite(logs[0]["loss"]) and 0 < logs[0]["mrtpo/s"] <= 1
    assert (trainer.replay_forwards > 0) == (advantage == "mrtpo")
    assert logs[0]["mrtpo/parity/region_ratio"] > 1  # the first half holds more than its share of the placement
    assert logs[0].get("mrtpo/has_a/region_ratio", 1.0) == pytest.approx(1.0)  # the whole response: uniform
    (out, scored, adv), = seen  # recomputed from its parts (the region method: no q needed)
    mask = out["completion_mask"].float()
    region = region_indicator(smoke_policy[1], scored.completion_ids, read_regions(None, scored.completions),
                              ["parity", "has_a", "constant"], mask.shape[1])
    assert region[:, 0].sum() > 0 and torch.equal(region[:, 1], mask) and region[:, 2].sum() == 0
    if advantage == "region":
        A_k, _ = gdpo_advantages(scored.rewards, 4, reward_weights=saw_weights(scored.rewards) if options else None)
        want, _ = token_advantages(A_k, token_weights(placement(region, mask), mask, 0.5), mask)
        assert torch.allclose(adv, want, atol=1e-5)


def test_region_needs_its_regions(smoke_policy, tmp_path):
    path, tok = smoke_policy
    args = MRTPOConfig(output_dir=str(tmp_path), advantage="region", use_cpu=True, report_to="none", num_generations=4,
                       per_device_train_batch_size=8)
    with pytest.raises(ValueError, match="check_regions"):
        MRTPOTrainer(model=path, processing_class=tok, reward_funcs=[parity], train_dataset=dataset(), args=args)
    with pytest.raises(ValueError, match="region_blend"):
        MRTPOConfig(output_dir="x", advantage="joint", region_blend=0.5, use_cpu=True)


def test_region_indicator_maps_char_spans_onto_tokens(smoke_policy):
    """A token is in a region when its decoded characters overlap a span (the localisation metric's mapping)."""
    from mrtpo.method.regions import region_indicator

    tok = smoke_policy[1]
    ids = tok("SELECT name FROM city", add_special_tokens=False)["input_ids"]
    text = tok.decode(ids)
    start = text.index("name")
    eos = ids + [tok.eos_token_id]
    regions = [{"a": [(start, start + 4)], "b": [(0, len(text))]}, {}]
    m = region_indicator(tok, [eos, ids[:2]], regions, ["a", "b", "c"], len(eos) + 2)
    ends = [len(tok.decode(ids[: t + 1])) for t in range(len(ids))]
    overlaps = [start < end and begin < start + 4 for begin, end in zip([0] + ends, ends)]
    assert m[0, 0, : len(ids)].bool().tolist() == overlaps and sum(overlaps) >= 1
    assert m[0, 0, len(ids)] == 0 and (m[0, 1, : len(eos)] == 1).all()  # the whole text: eos included
    assert m[0, 2].sum() == 0 and m[1].sum() == 0 and (m[0, :, len(eos):] == 0).all()


@pytest.mark.parametrize("name", ["sql", "if", "tool"])
def test_read_regions_is_check_regions_per_response(name):
    """``Task.read_regions`` (what the runner passes as ``check_regions=``) gives each response the spans
    ``check_regions`` gives it with its dataset row."""
    from mrtpo.method.replay import safe_z_blocks
    from mrtpo.tasks import get_task

    task = get_task(name)
    rows = list(task.synthetic(3, seed=0, split="test"))
    completions = [[{"role": "assistant", "content": task.reference_response(r)}] for r in rows]
    regions, errors = safe_z_blocks(task.read_regions, rows, [r["prompt"] for r in rows], completions, [[1]] * 3)
    assert errors is None and regions == [task.check_regions(c, r) for c, r in zip(completions, rows)]
    assert any(spans for region in regions for reward, spans in region.items() if reward in task.reward_names)
