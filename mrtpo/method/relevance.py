"""Token relevance: how far each next-token distribution moves when one verifier's information is removed.

``q_t = sqrt( JS(p_t^all || p_t^minus) / ln 2 )`` in [0, 1] (the Jensen–Shannon distance, base 2), set to
exactly 0 where the two distributions agree to within the rounding of their dtype (``js_relevance``); the
policy's token entropy ``h_t``; and how reward-specific the q profiles are (their correlations with each other
and with ``h_t``). Pure tensor math: no model calls, no trainer state.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch

LN2 = math.log(2.0)


def js_divergence(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """``JS(p || q) = 1/2 KL(p || m) + 1/2 KL(q || m)``, ``m = (p + q) / 2``, from log-probabilities, in nats.

    Written through the log-ratio ``d = log q - log p``: ``log(m / p) = log((1 + e^d) / 2) = log1p(expm1(d) / 2)``
    and ``log(m / q)`` the same at ``-d``, so ``JS = -1/2 sum_v [p_v L(d_v) + q_v L(-d_v)]``, ``L(r) =
    log((1 + e^r) / 2)``. Identical inputs give d = 0 and JS = 0 exactly (the form ``log p - log m`` leaves a
    rounding residue of order ``eps * entropy``), and the error stays relative to d for close distributions.
    Disjoint supports give ln 2 rather than NaN; terms with zero probability contribute 0. Last dim is the
    vocabulary. In [0, ln 2].
    """
    d = logq - logp  # NaN only where both are -inf; those terms are dropped below

    def weighted_half_mix(r: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``w L(r)`` where ``w > 0``, else 0; ``L(r) = log((1 + e^r) / 2)``, ``r - ln 2`` once e^-r is negligible.
        In place on one new tensor (the JS works on (positions, V) chunks: every temporary counts)."""
        out = r.clamp(max=20).expm1_().div_(2).log1p_()
        big = r > 20
        out[big] = r[big] - LN2
        return out.mul_(w).masked_fill_(~(w > 0), 0.0)

    terms = weighted_half_mix(d, logp.exp())
    terms += weighted_half_mix(d.neg_(), logq.exp())
    return (-0.5 * terms.sum(-1)).clamp(0.0, LN2)


#: how far above the expected rounding-only JS a position must be to count as a shift (in q units: 4x)
FLOOR_SIGMAS = 4.0


def unit_roundoff(dtype: torch.dtype) -> float:
    """Unit roundoff u of a floating dtype (half its machine epsilon): 2^-24 fp32, 2^-11 fp16, 2^-8 bf16."""
    return torch.finfo(dtype).eps / 2


def rounding_floor(logp_all: torch.Tensor, logp_minus: torch.Tensor, logit_var: torch.Tensor) -> torch.Tensor:
    """JS that rounding alone produces between two replays, ``FLOOR_SIGMAS^2 * 1/8 sum_v m_v (1 - m_v) sigma_v^2``.

    To second order ``JS(p || q) = 1/8 Var_m(d)`` with ``d = log q - log p`` and ``m`` the mixture; if the two
    replays' logits differ only by independent rounding errors of variance ``sigma_v^2`` (``logit_var``,
    broadcastable to (..., V)), ``E[Var_m(d)] = sum_v m_v (1 - m_v) sigma_v^2``. Returns (...,).
    """
    m = 0.5 * (logp_all.exp() + logp_minus.exp())
    spread = m * (1 - m) * logit_var
    expected = 0.125 * torch.where(m > 0, spread, torch.zeros_like(spread)).sum(-1)
    return FLOOR_SIGMAS**2 * expected


def _finite_square(x: torch.Tensor) -> torch.Tensor:
    """x^2, 0 where x is infinite (a masked -inf logit is exact: it carries no rounding error)."""
    return torch.where(torch.isfinite(x), x * x, torch.zeros_like(x))


def js_relevance(
    all_: torch.Tensor,
    minus: torch.Tensor,
    mask: torch.Tensor | None = None,
    lm_head: torch.Tensor | None = None,
    lm_head_bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    precision: torch.dtype | None = None,
) -> torch.Tensor:
    """Relevance ``q_t = sqrt(JS(p_t^all || p_t^minus) / ln 2)`` at every position, in [0, 1], with a rounding floor.

    all_, minus: logits (..., T, V) of the two replays at the same completion positions, or — when
    ``lm_head`` (V, H) is given — final hidden states (..., T, H), so that full (T, V) logits are never held
    for the whole sequence. Logits are divided by ``temperature`` (the sampling temperature, as TRL does for
    log-probs) and upcast to fp32 before the log-softmax. Work proceeds in chunks of ``js_chunk_positions(V,
    chunk_tokens)`` positions, so the extra memory is about eight fp32 (chunk, V) temporaries (~36 MiB each)
    whatever T, V and the number of rows: 0.28 GiB at V = 151,936 (``benchmarks/js_memory.py``). The inputs are
    read a chunk at a time, never copied whole (expanded views stay views); a low-precision ``lm_head`` is upcast a
    slice of vocabulary rows at a time. Positions where ``mask`` is 0 get 0 and cost nothing.

    **Floor.** Two replays of the same distribution in a finite dtype do not give identical logits (padding and
    batch shape change the reduction order), and the JS of such a pair is rounding, not relevance. So
    ``q_t = 0`` exactly wherever ``JS_t <= FLOOR_SIGMAS^2 * 1/8 sum_v m_v (1 - m_v) sigma_v^2``
    (``rounding_floor``): each input rounded once in its dtype (unit roundoff u, uniform error of variance
    ``u^2 x^2 / 3`` on a value x), i.e. ``sigma_v^2 = u^2 (a_v^2 + b_v^2) / (3 tau^2)`` for logits a, b and
    ``sigma_v^2 = u^2 ||W_v||^2 (||h_a||^2 + ||h_b||^2) / (3 H tau^2)`` for hidden states (rounding spread
    evenly over the H dimensions), tau the temperature. In fp32 the floor is ~1e-6 in q; in bf16 it is
    ~1e-3..1e-2 (hidden states) and up to ~0.05 (bf16 logits, whose spacing near |x| = 20 is 0.125). A response
    whose every position is under the floor has qbar = 0 and so ``w = 1`` exactly (``advantages.token_weights``).
    ``precision``, the dtype the forwards that made the inputs computed in, raises u to its roundoff: a bf16 run's
    hidden states carry bf16 rounding whether they arrive in fp32 (autocast) or bf16 (ZeRO-3's bf16 parameters),
    so its q, sparsity and concentration do not change with the launcher.
    """
    lead = all_.shape[:-1]
    u = max(unit_roundoff(all_.dtype), unit_roundoff(minus.dtype), unit_roundoff(precision or torch.float32))
    out = torch.zeros(lead.numel(), dtype=torch.float32, device=all_.device)
    keep = mask.reshape(-1).bool() if mask is not None else torch.ones(lead.numel(), dtype=torch.bool, device=all_.device)
    rows = keep.nonzero(as_tuple=True)[0]
    vocab = lm_head.shape[0] if lm_head is not None else all_.shape[-1]
    # fp32 math even when the caller runs under autocast (the replay's forwards do), so the floor's u is the inputs'
    with torch.autocast(device_type=all_.device.type, enabled=False):
        _js_chunks(all_, minus, rows, out, u, lm_head, lm_head_bias, temperature, js_chunk_positions(vocab, chunk_tokens))
    return out.reshape(lead)


#: fp32 elements of one (positions, V) temporary of ``js_relevance`` (36 MiB; it keeps about eight at once): just
#: above glibc's largest mmap threshold (32 MiB), so that on a CPU each freed temporary goes back to the system;
#: smaller ones are recycled inside the heap, whose resident set then grows to several times the live temporaries
CHUNK_ELEMENTS = 9 * 2**20


def js_chunk_positions(vocab: int, chunk_tokens: int = 1024) -> int:
    """Positions per chunk of ``js_relevance``: ``min(chunk_tokens, CHUNK_ELEMENTS // V)``, at least 1, so that
    its (positions, V) temporaries stay ~36 MiB each at any vocabulary (62 positions at V = 151,936; a vocabulary
    of up to 9,216 keeps ``chunk_tokens``)."""
    return max(1, min(chunk_tokens, CHUNK_ELEMENTS // vocab))


def _head_slices(lm_head: torch.Tensor):
    """The lm_head (V, H) as fp32 slices of vocabulary rows: the head itself when it is fp32 (no copy), else
    ``CHUNK_ELEMENTS`` elements at a time (an fp32 copy of a 7B's bf16 head would be 2.2 GB). Each row's value
    is the same either way: a slice's rows are upcast exactly as the whole head's would be."""
    if lm_head.dtype == torch.float32:
        yield lm_head
        return
    step = max(1, CHUNK_ELEMENTS // lm_head.shape[1])
    for start in range(0, lm_head.shape[0], step):
        yield lm_head[start : start + step].to(torch.float32)


def _project(hidden: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
    """fp32 logits ``hidden @ W^T`` (positions, V), W upcast a slice of vocabulary rows at a time."""
    parts = [hidden @ w.T for w in _head_slices(lm_head)]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


def _js_chunks(all_, minus, rows, out, u, lm_head, lm_head_bias, temperature, chunk) -> None:
    """``js_relevance``'s loop over chunks of positions (flat indices ``rows`` into the leading dims), writing q
    into ``out``."""
    lead = all_.shape[:-1]
    if lm_head is not None:  # ||W_v||^2 (V,), row by row: no (V, H) temporary
        row_norm2 = torch.cat([torch.linalg.vector_norm(w, dim=-1) for w in _head_slices(lm_head)]).square()
    for start in range(0, rows.numel(), chunk):
        at = torch.unravel_index(rows[start : start + chunk], lead)  # the chunk's positions, as leading indices
        la, lb = all_[at].to(torch.float32), minus[at].to(torch.float32)
        if lm_head is not None:
            hidden_norm2 = (la * la).sum(-1, keepdim=True) + (lb * lb).sum(-1, keepdim=True)
            logit_var = (u**2 / (3 * la.shape[-1] * temperature**2)) * hidden_norm2 * row_norm2
            la, lb = _project(la, lm_head), _project(lb, lm_head)
            if lm_head_bias is not None:
                la = la + lm_head_bias.to(torch.float32)
                lb = lb + lm_head_bias.to(torch.float32)
        else:
            logit_var = (u**2 / (3 * temperature**2)) * (_finite_square(la) + _finite_square(lb))
        la = torch.log_softmax(la / temperature, dim=-1)
        lb = torch.log_softmax(lb / temperature, dim=-1)
        js = js_divergence(la, lb)
        out[rows[start : start + chunk]] = torch.where(js > rounding_floor(la, lb, logit_var), (js / LN2).sqrt(), torch.zeros_like(js))


def concentration(q: torch.Tensor, mask: torch.Tensor, share: float = 0.8) -> torch.Tensor:
    """Fraction of a response's valid tokens that hold ``share`` of its total shift ``sum_t q_t``.

    q, mask (..., T) -> (...). Tokens are taken in decreasing q until their sum reaches ``share`` of the
    total; uniform q gives ``share``, a single spike gives ``1 / T``. NaN where the response has no shift.
    Computed on the CPU: CUDA's floating-point ``cumsum`` raises under ``torch.use_deterministic_algorithms``
    (the runner's default), and this is a logged figure, not part of any gradient.
    """
    device = q.device
    qm = (q * mask).detach().to("cpu", torch.float32)
    mask = mask.detach().to("cpu")
    total = qm.sum(-1, keepdim=True)
    sorted_q, _ = qm.sort(dim=-1, descending=True)
    cum = sorted_q.cumsum(-1)
    needed = (cum < share * total - 1e-12).sum(-1) + 1
    frac = needed.to(torch.float32) / mask.sum(-1).clamp_min(1)
    return torch.where(total.squeeze(-1) > 0, frac, torch.full_like(frac, float("nan"))).to(device)


def token_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """Entropy ``h_t = -sum_v p_t(v) log p_t(v)`` of ``p_t = softmax(logits_t / temperature)``, in nats.

    logits (..., V) -> (...), computed in fp32 (the sampling distribution when ``temperature`` is the sampling
    temperature, as TRL's log-probs are). In [0, ln V]; positions where ``mask`` is 0 get 0.
    """
    logp = torch.log_softmax(logits.to(torch.float32) / temperature, dim=-1)
    h = -torch.where(logp > float("-inf"), logp.exp() * logp, torch.zeros_like(logp)).sum(-1)
    h = h.clamp_min(0.0)
    return torch.where(mask.bool(), h, torch.zeros_like(h)) if mask is not None else h


def profile_correlation(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of two per-token profiles over each response's valid tokens: (..., T) x 2 -> (...).

    ``corr = sum_t (a_t - abar)(b_t - bbar) / sqrt(sum_t (a_t - abar)^2 sum_t (b_t - bbar)^2)``, t over the
    positions where ``mask`` is 1. NaN where a response has fewer than two valid tokens or either profile is
    constant on them (no correlation is defined).
    """
    m = mask.to(torch.float32)
    n = m.sum(-1, keepdim=True)

    def centred(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.where(m > 0, x.to(torch.float32), torch.zeros((), device=x.device))  # padding may hold anything
        d = (x - x.sum(-1, keepdim=True) / n.clamp_min(1)) * m
        ss = (d**2).sum(-1)
        # constant up to rounding: the centred sum of squares is a rounding residue of the raw one
        return d, torch.where(ss > 1e-10 * (x**2).sum(-1), ss, torch.zeros_like(ss))

    (da, ssa), (db, ssb) = centred(a), centred(b)
    corr = (da * db).sum(-1) / (ssa * ssb).sqrt().clamp_min(1e-30)
    defined = (n.squeeze(-1) > 1) & (ssa > 0) & (ssb > 0)
    return torch.where(defined, corr.clamp(-1.0, 1.0), torch.full_like(corr, float("nan")))


def specificity(q: torch.Tensor, mask: torch.Tensor, profiled: torch.Tensor,
                entropy: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """How reward-specific the relevance profiles are (issue 18), per response.

    q (B, K, T) relevance per reward; mask (B, T); profiled (B, K) bool, True where q_k of response j was
    measured (replayed); entropy (B, T) the policy's token entropy, optional. Returns

    * ``cross_reward`` (B, K, K): ``corr_t(q_k, q_l)`` on the same response for k != l both profiled, NaN
      elsewhere (the diagonal included). Near 1: every reward moves the same tokens, i.e. no reward-specific
      placement is left for MRTPO to exploit.
    * ``entropy`` (B, K): ``corr_t(q_k, h)``, NaN where k is not profiled (absent without ``entropy``). Near 1:
      "relevant" means "uncertain", and MRTPO acts as an entropy-weighted GDPO.

    ``median_correlations`` summarises them.
    """
    B, K, _ = q.shape
    pair = profile_correlation(q.unsqueeze(2), q.unsqueeze(1), mask[:, None, None, :])
    keep = profiled.unsqueeze(2) & profiled.unsqueeze(1) & ~torch.eye(K, dtype=torch.bool, device=q.device)
    out = {"cross_reward": torch.where(keep, pair, torch.full_like(pair, float("nan")))}
    if entropy is not None:
        ent = profile_correlation(q, entropy.unsqueeze(1).expand(-1, K, -1), mask.unsqueeze(1))
        out["entropy"] = torch.where(profiled, ent, torch.full_like(ent, float("nan")))
    return out


def nan_median(x: torch.Tensor) -> float:
    """Median of x ignoring NaN, the two middle values averaged (as numpy, unlike
    ``torch.median``); NaN when nothing is left."""
    x = x[~torch.isnan(x)].to(torch.float32)
    return float(torch.quantile(x, 0.5)) if x.numel() else float("nan")


def median_correlations(spec: dict[str, torch.Tensor], names: list[str] | None = None) -> dict[str, float]:
    """Medians of ``specificity``'s correlations, ignoring undefined ones (NaN).

    ``cross_reward_corr``: median over every unordered pair of rewards profiled on the same response, with
    ``cross_reward_pairs`` their number; ``entropy_corr``: median over profiled (response, reward) pairs, with
    ``entropy_profiles``; with ``names`` (K), also ``entropy_corr/<name>`` per reward. A median over nothing is NaN.
    """
    cross = spec["cross_reward"]
    upper = torch.triu(torch.ones(cross.shape[1:], dtype=torch.bool, device=cross.device), diagonal=1)
    pairs = cross[:, upper]
    out = {"cross_reward_corr": nan_median(pairs), "cross_reward_pairs": int((~torch.isnan(pairs)).sum())}
    if "entropy" in spec:
        ent = spec["entropy"]
        out["entropy_corr"] = nan_median(ent)
        out["entropy_profiles"] = int((~torch.isnan(ent)).sum())
        for k, name in enumerate(names or []):
            out[f"entropy_corr/{name}"] = nan_median(ent[:, k])
    return out



@contextmanager
def record_entropies(model, temperature: float = 1.0):
    """Within the block, record ``h_t = H(softmax(logits_t / temperature))`` of every forward's last position.

    A forward hook on the output embeddings reads the logits that ``generate`` computes for each new token
    anyway (no extra forward): after a ``generate`` call inside the block, the yielded list holds one (N,) tensor
    per generated position, so ``torch.stack(steps, 1)[j, t]`` is the entropy of the distribution response j's
    token t was sampled from — exactly, when no logits processor other than the temperature is active (TRL's
    defaults: top_k 0, top_p 1, no repetition penalty). Any other forward inside the block is recorded too.
    """
    steps: list[torch.Tensor] = []

    def hook(module, args, output):
        steps.append(token_entropy(output[:, -1].detach(), temperature=temperature))

    handle = model.get_output_embeddings().register_forward_hook(hook)
    try:
        yield steps
    finally:
        handle.remove()
