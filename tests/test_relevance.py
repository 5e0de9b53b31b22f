"""JS relevance and context pairs."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtpo.contexts import SECTION_HEADER, build_contexts
from mrtpo.relevance import (
    concentration,
    js_relevance,
    median_correlations,
    profile_correlation,
    specificity,
    token_entropy,
)


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
