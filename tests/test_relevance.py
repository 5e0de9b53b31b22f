"""JS relevance and context pairs."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtpo.method.contexts import SECTION_HEADER, build_contexts
from mrtpo.method.advantages import token_weights
from mrtpo.method.relevance import (
    concentration,
    js_divergence,
    js_relevance,
    median_correlations,
    profile_correlation,
    rounding_floor,
    specificity,
    token_entropy,
    unit_roundoff,
)
from mrtpo.analysis.diagnostics import median_correlations_se


def test_identical_logits_give_zero_and_disjoint_give_one():
    logits = torch.randn(2, 5, 11)
    assert torch.allclose(js_relevance(logits, logits.clone()), torch.zeros(2, 5), atol=1e-6)
    a = torch.full((3, 4), -1e4)
    b = torch.full((3, 4), -1e4)
    a[:, 0] = 1e4  # all mass on token 0
    b[:, 1] = 1e4  # all mass on token 1
    assert torch.allclose(js_relevance(a, b), torch.ones(3), atol=1e-6)
    a[:, 1:] = float("-inf")  # exactly zero probabilities must not give NaN
    assert torch.allclose(js_relevance(a, b), torch.ones(3), atol=1e-6)


def test_known_value():
    p = torch.tensor([0.5, 0.5])
    q = torch.tensor([1.0, 1e-30])
    q = q / q.sum()
    m = (p + q) / 2
    kl = lambda x, y: (x * (x / y).log()).nansum()  # noqa: E731
    expected = math.sqrt(float(0.5 * kl(p, m) + 0.5 * kl(q, m)) / math.log(2))
    got = js_relevance(p.log(), q.log())
    assert abs(float(got) - expected) < 1e-5


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 7))
def test_symmetric_bounded_chunked_equals_unchunked(seed, chunk):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(2, 6, 13, generator=g) * 3, torch.randn(2, 6, 13, generator=g) * 3
    mask = (torch.rand(2, 6, generator=g) > 0.3).float()
    full = js_relevance(a, b, mask, chunk_tokens=10_000)
    assert torch.allclose(full, js_relevance(b, a, mask), atol=1e-6)
    assert torch.allclose(full, js_relevance(a, b, mask, chunk_tokens=chunk), atol=1e-6)
    assert ((full >= 0) & (full <= 1)).all() and (full[mask == 0] == 0).all()


def test_hidden_state_path_equals_logits_path_and_half_precision():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(50, 8, generator=g)
    bias = torch.randn(50, generator=g)
    h1, h2 = torch.randn(3, 4, 8, generator=g), torch.randn(3, 4, 8, generator=g)
    via_logits = js_relevance(h1 @ W.T + bias, h2 @ W.T + bias, temperature=0.7)
    via_hidden = js_relevance(h1, h2, lm_head=W, lm_head_bias=bias, temperature=0.7, chunk_tokens=5)
    assert torch.allclose(via_logits, via_hidden, atol=1e-5)
    half = js_relevance((h1 @ W.T).to(torch.bfloat16), (h2 @ W.T).to(torch.bfloat16))
    assert torch.isfinite(half).all() and half.dtype == torch.float32


QWEN_VOCAB = 151_936


def _qwen_scale_logits(rows: int, seed: int) -> torch.Tensor:
    """(rows, 151,936) logits from flat (entropy ~11 nats) to peaked (~1 nat), around an offset as real models have."""
    g = torch.Generator().manual_seed(seed)
    scales = torch.linspace(1.0, 8.0, rows).unsqueeze(1)
    return torch.randn(rows, QWEN_VOCAB, generator=g) * scales + 5.0


def test_identical_qwen_vocab_distributions_give_exactly_zero_and_uniform_weights_fp32():
    logits = _qwen_scale_logits(4, seed=0)
    logp = torch.log_softmax(logits, -1)
    assert (js_divergence(logp, logp.clone()) == 0).all()  # the log-ratio form leaves no rounding residue
    q = js_relevance(logits, logits.clone(), chunk_tokens=2)
    assert (q == 0).all()
    g = torch.Generator().manual_seed(1)
    W, h = torch.randn(QWEN_VOCAB, 16, generator=g) * 0.1, torch.randn(4, 16, generator=g) * 3
    assert (js_relevance(h, h.clone(), lm_head=W, chunk_tokens=2) == 0).all()
    w = token_weights(q.reshape(1, 1, 4), torch.ones(1, 4), beta=0.5)
    assert (w == 1).all()


def test_same_distribution_rounded_twice_in_bf16_gives_exactly_zero():
    """Two bf16 replays of one distribution differ by rounding (here: sub-ulp jitter before the cast)."""
    logits = _qwen_scale_logits(4, seed=2)
    g = torch.Generator().manual_seed(3)
    jittered = logits * (1 + torch.empty_like(logits).uniform_(-(2**-8), 2**-8, generator=g))
    a, b = logits.bfloat16(), jittered.bfloat16()
    assert (a != b).any()  # the two replays really differ in their last bits
    raw = js_divergence(torch.log_softmax(a.float(), -1), torch.log_softmax(b.float(), -1))
    assert (raw > 0).all()  # without the floor each position would carry noise-driven relevance
    q = js_relevance(a, b, chunk_tokens=2)
    assert (q == 0).all()
    assert (token_weights(q.reshape(1, 1, 4), torch.ones(1, 4), beta=0.5) == 1).all()
    # hidden-state path: bf16 hidden states rounded twice, projected with a (V, H) head
    W = torch.randn(QWEN_VOCAB, 32, generator=g) * 0.05
    h = torch.randn(4, 32, generator=g) * 4
    hj = h * (1 + torch.empty_like(h).uniform_(-(2**-8), 2**-8, generator=g))
    assert (js_relevance(h.bfloat16(), hj.bfloat16(), lm_head=W, chunk_tokens=2) == 0).all()


def test_a_bf16_runs_floor_does_not_change_with_the_dtype_its_hidden_states_arrive_in():
    """Issue 43 item 7: DDP under autocast hands the replay fp32 hidden states, ZeRO-3's bf16 parameters bf16 ones.
    Both carry bf16 rounding; with the run's precision the floor is bf16's either way (without it, fp32 inputs got
    fp32's floor, ~1e-6 in q, and rounding noise counted as relevance)."""
    g = torch.Generator().manual_seed(5)
    W = torch.randn(QWEN_VOCAB, 32, generator=g) * 0.05
    h = torch.randn(4, 32, generator=g) * 4
    hj = h * (1 + torch.empty_like(h).uniform_(-(2**-8), 2**-8, generator=g))  # bf16-sized rounding differences
    assert (js_relevance(h, hj, lm_head=W) > 0).all()  # read as fp32: noise becomes relevance
    as_zero3 = js_relevance(h.bfloat16(), hj.bfloat16(), lm_head=W)
    as_autocast = js_relevance(h, hj, lm_head=W, precision=torch.bfloat16)
    assert (as_zero3 == 0).all() and (as_autocast == 0).all()
    shifted = h.clone()
    shifted[1] += 2.0  # a real shift survives the bf16 floor
    assert js_relevance(h, shifted, lm_head=W, precision=torch.bfloat16)[1] > 0.01
    # fp32 runs keep the fp32 floor: precision None and float32 are the same
    assert torch.equal(js_relevance(h, hj, lm_head=W), js_relevance(h, hj, lm_head=W, precision=torch.float32))


def test_floor_keeps_real_shifts_and_is_the_documented_formula():
    logits = _qwen_scale_logits(2, seed=4)
    shifted = logits.clone()
    shifted[:, logits[1].argmax()] += 2.0  # row 1: its most likely token gains 2 nats of logit
    for dtype in (torch.float32, torch.bfloat16):
        a, b = logits.to(dtype), shifted.to(dtype)
        # a row at a time, as js_relevance's chunks of 1 (a reduction over 2 rows may split across threads otherwise)
        la = torch.cat([torch.log_softmax(a[i : i + 1].float(), -1) for i in range(2)])
        lb = torch.cat([torch.log_softmax(b[i : i + 1].float(), -1) for i in range(2)])
        js = torch.cat([js_divergence(la[i : i + 1], lb[i : i + 1]) for i in range(2)])
        var = unit_roundoff(dtype) ** 2 / 3 * (a.float() ** 2 + b.float() ** 2)
        floor = torch.cat([rounding_floor(la[i : i + 1], lb[i : i + 1], var[i : i + 1]) for i in range(2)])
        expected = torch.where(js > floor, (js / math.log(2)).sqrt(), torch.zeros_like(js))
        q = js_relevance(a, b, chunk_tokens=1)
        assert torch.equal(q, expected)
        assert q[1] > 0.1 and q[1] == (js[1] / math.log(2)).sqrt()  # a 2-nat move of the top token survives
    assert unit_roundoff(torch.float32) == 2**-24 and unit_roundoff(torch.bfloat16) == 2**-8


def test_concentration():
    mask = torch.ones(2, 10)
    q = torch.stack([torch.ones(10), torch.zeros(10)])
    q[1, 4] = 1.0
    c = concentration(q, mask)
    assert c[0] == 0.8 and c[1] == 0.1
    assert torch.isnan(concentration(torch.zeros(1, 5), torch.ones(1, 5))).all()


def test_contexts_differ_only_by_the_left_out_block_chat_and_text():
    blocks = {"format": "Use <answer> tags.", "execution_match": "SELECT 1", "executable": "no error"}
    chat = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Q?"}]
    ctx = build_contexts(chat, blocks)
    assert ctx.none == chat and chat[1]["content"] == "Q?"  # input untouched, P_none = P_0
    assert ctx.all[1]["content"] == "Q?\n\n" + SECTION_HEADER + "\n[format] Use <answer> tags.\n[execution_match] SELECT 1\n[executable] no error"
    assert ctx.minus["execution_match"][1]["content"] == "Q?\n\n" + SECTION_HEADER + "\n[format] Use <answer> tags.\n[executable] no error"
    assert ctx.all[0] == chat[0]
    text = build_contexts("Q?", {"a": "x"})
    assert text.all == "Q?\n\n" + SECTION_HEADER + "\n[a] x" and text.minus["a"] == "Q?" and text.none == "Q?"


def test_token_entropy_values():
    V = 7
    h = token_entropy(torch.zeros(2, 3, V))
    assert torch.allclose(h, torch.full((2, 3), math.log(V)), atol=1e-6)
    one_hot = torch.full((4, V), float("-inf"))
    one_hot[:, 2] = 0.0
    assert torch.equal(token_entropy(one_hot), torch.zeros(4))  # exactly zero probabilities give 0, not NaN
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, V, generator=g) * 2
    p = torch.softmax(logits / 0.7, -1)
    mask = torch.tensor([[1, 1, 1, 0, 0]] * 3)
    got = token_entropy(logits.to(torch.bfloat16).float(), mask, temperature=0.7)
    expected = -(p * p.log()).sum(-1) * mask
    assert torch.allclose(token_entropy(logits, mask, temperature=0.7), expected, atol=1e-5)
    assert got.dtype == torch.float32 and (got[:, 3:] == 0).all()


def test_profile_correlation_ignores_padding_and_flags_constant_profiles():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0, 99.0], [0.3, 0.3, 0.3, 0.3, 0.0], [1.0, 2.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 0, 0, 0, 0]])
    b = torch.tensor([[2.0, 4.0, 6.0, 8.0, float("nan")], [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 0.0, 0.0, 0.0]])
    c = profile_correlation(a, b, mask)
    assert c[0] == pytest.approx(1.0, abs=1e-6)
    assert torch.isnan(c[1]) and torch.isnan(c[2])  # a constant profile; a single valid token
    assert profile_correlation(a[:1], -b[:1], mask[:1])[0] == pytest.approx(-1.0, abs=1e-6)
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    assert profile_correlation(x, torch.tensor([[1.0, 1.0, 0.0, 0.0]]), torch.ones(1, 4))[0] == pytest.approx(0.0, abs=1e-6)


def test_specificity_and_medians():
    T = 6
    base = torch.tensor([0.1, 0.5, 0.2, 0.9, 0.0, 0.3])
    other = torch.tensor([0.9, 0.0, 0.4, 0.1, 0.6, 0.2])
    q = torch.stack([
        torch.stack([base, base * 2, other]),  # reward 0 and 1 identical up to scale; reward 2 different
        torch.stack([other, base, torch.zeros(T)]),  # reward 2 not profiled on this response
    ])
    mask = torch.ones(2, T)
    profiled = torch.tensor([[True, True, True], [True, True, False]])
    entropy = torch.stack([base, base])
    spec = specificity(q, mask, profiled, entropy)
    cross = spec["cross_reward"]
    assert torch.isnan(cross[:, range(3), range(3)]).all() and torch.isnan(cross[1, 2]).all()
    assert cross[0, 0, 1] == pytest.approx(1.0, abs=1e-6) and torch.equal(cross[0, 0, 2], cross[0, 2, 0])
    r = float(profile_correlation(base, other, torch.ones(T)))
    assert cross[1, 0, 1] == pytest.approx(r, abs=1e-6) and cross[0, 0, 2] == pytest.approx(r, abs=1e-6)
    med = median_correlations(spec, ["a", "b", "c"])
    assert med["cross_reward_pairs"] == 4 and med["entropy_profiles"] == 5
    assert med["cross_reward_corr"] == pytest.approx(r, abs=1e-6)  # pairs: 1, r, r, r
    assert med["entropy_corr/b"] == pytest.approx(1.0, abs=1e-6) and med["entropy_corr/c"] == pytest.approx(r, abs=1e-6)
    none = median_correlations(specificity(q, mask, torch.zeros(2, 3, dtype=torch.bool)))
    assert math.isnan(none["cross_reward_corr"]) and none["cross_reward_pairs"] == 0 and "entropy_corr" not in none


def test_median_correlations_se_is_a_bootstrap_over_prompts():
    g = torch.Generator().manual_seed(0)
    B, K, T = 48, 3, 12
    spec = specificity(torch.rand(B, K, T, generator=g), torch.ones(B, T), torch.ones(B, K, dtype=torch.bool),
                       torch.rand(B, T, generator=g))
    se = median_correlations_se(spec, list(range(B)), n_boot=300)
    assert set(se) == {"cross_reward_corr", "entropy_corr"} and 0 < se["cross_reward_corr"] < 0.2 and 0 < se["entropy_corr"] < 0.2
    # the same responses as 12 prompts of 4: the replicates draw whole prompts, a coarser resampling
    clustered = median_correlations_se(spec, [j // 4 for j in range(B)], n_boot=300)
    assert clustered != se and all(0 < v < 0.3 for v in clustered.values())
    assert all(math.isnan(v) for v in median_correlations_se(spec, [0] * B).values())  # one prompt: no s.e.
    without_entropy = {"cross_reward": spec["cross_reward"]}
    assert set(median_correlations_se(without_entropy, list(range(B)), n_boot=50)) == {"cross_reward_corr"}


def test_large_vocabulary_chunks_are_capped_and_exact(monkeypatch):
    """At a large vocabulary the chunk shrinks to ``CHUNK_ELEMENTS / V`` positions (bounded memory); q is the same
    bit for bit as one chunk on the logits path, an expanded input is never copied whole, and a low-precision head
    upcast a slice at a time gives the logits of the head upcast whole."""
    import mrtpo.method.relevance as rel

    g = torch.Generator().manual_seed(3)
    V, H = 40, 6
    a, b = torch.randn(3, 5, V, generator=g) * 3, torch.randn(3, 5, V, generator=g) * 3
    mask = (torch.rand(3, 5, generator=g) > 0.2).float()
    whole = js_relevance(a, b, mask)
    monkeypatch.setattr(rel, "CHUNK_ELEMENTS", 3 * V)  # 3 positions per chunk
    assert rel.js_chunk_positions(V) == 3 and rel.js_chunk_positions(V, chunk_tokens=2) == 2
    assert torch.equal(js_relevance(a, b, mask), whole)
    one = a[:1].expand(3, 5, V)  # three rows sharing one storage: read a chunk at a time, as a view
    assert torch.equal(js_relevance(one, b, mask), js_relevance(one.contiguous(), b, mask))
    W, h = torch.randn(V, H, generator=g).to(torch.bfloat16), torch.randn(7, H, generator=g)
    assert len(list(rel._head_slices(W))) == 2  # CHUNK_ELEMENTS // H = 20 vocabulary rows per slice
    assert torch.equal(rel._project(h, W), h @ W.to(torch.float32).T)
    Wf = W.float()
    assert [w is Wf for w in rel._head_slices(Wf)] == [True]  # an fp32 head is used as it is, never copied


def test_autocast_does_not_reach_the_js_math():
    g = torch.Generator().manual_seed(5)
    W, h1, h2 = torch.randn(40, 8, generator=g), torch.randn(2, 3, 8, generator=g), torch.randn(2, 3, 8, generator=g)
    plain = js_relevance(h1, h2, lm_head=W)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        assert torch.equal(js_relevance(h1, h2, lm_head=W), plain)


def test_zero3_partitioned_head_is_gathered_for_the_replay(monkeypatch):
    """Under DeepSpeed ZeRO-3 a parameter is an empty shard with a ``ds_id``: the replay must read it whole."""
    import sys
    import types

    from mrtpo.method.replay import whole_parameters

    entered = []

    class Gathered:
        def __init__(self, params, modifier_rank=None):
            entered.append((len(params), modifier_rank))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    import enum

    class ZeroParamStatus(enum.Enum):
        AVAILABLE = 1
        NOT_AVAILABLE = 2

    fake = types.ModuleType("deepspeed")
    fake.zero = types.SimpleNamespace(GatheredParameters=Gathered)
    partition = types.ModuleType("deepspeed.runtime.zero.partition_parameters")
    partition.ZeroParamStatus = ZeroParamStatus
    monkeypatch.setitem(sys.modules, "deepspeed", fake)
    monkeypatch.setitem(sys.modules, "deepspeed.runtime.zero.partition_parameters", partition)
    plain = torch.nn.Parameter(torch.ones(2))
    with whole_parameters(plain, None):
        pass
    assert entered == []  # ordinary parameters: nothing to gather
    shard = torch.nn.Parameter(torch.ones(0))
    shard.ds_id, shard.ds_status = 7, ZeroParamStatus.NOT_AVAILABLE
    with whole_parameters(shard, None):
        pass
    assert entered == [(1, None)]  # gathered read-only (no modifier rank)
    with whole_parameters(shard, shard):  # tied: the head and the embedding are one parameter, gathered once
        pass
    assert entered[-1] == (1, None)
    shard.ds_status = ZeroParamStatus.AVAILABLE  # already whole (the embedding holds it): left alone
    with whole_parameters(shard, None):
        pass
    assert len(entered) == 2
