"""Token relevance: how far each next-token distribution moves when one verifier's information is removed.

``q_t = sqrt( JS(p_t^all || p_t^minus) / ln 2 )`` in [0, 1] (the Jensen–Shannon distance, base 2).
Pure tensor math: no model calls, no trainer state.
"""

from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)


def js_divergence(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """``JS(p || q) = 1/2 KL(p || m) + 1/2 KL(q || m)``, ``m = (p + q) / 2``, from log-probabilities, in nats.

    Computed in log space (``log m = logaddexp(log p, log q) - ln 2``) so that disjoint supports give ln 2
    rather than NaN; terms with zero probability contribute 0. Last dim is the vocabulary. In [0, ln 2].
    """
    logm = torch.logaddexp(logp, logq) - LN2

    def kl_to_m(logx: torch.Tensor) -> torch.Tensor:
        x = logx.exp()
        return torch.where(x > 0, x * (logx - logm), torch.zeros_like(x)).sum(-1)

    return (0.5 * (kl_to_m(logp) + kl_to_m(logq))).clamp(0.0, LN2)


def js_relevance(
    all_: torch.Tensor,
    minus: torch.Tensor,
    mask: torch.Tensor | None = None,
    lm_head: torch.Tensor | None = None,
    lm_head_bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
) -> torch.Tensor:
    """Relevance ``q_t = sqrt(JS(p_t^all || p_t^minus) / ln 2)`` at every position, in [0, 1].

    all_, minus: logits (..., T, V) of the two replays at the same completion positions, or — when
    ``lm_head`` (V, H) is given — final hidden states (..., T, H), so that full (T, V) logits are never held
    for the whole sequence. Logits are divided by ``temperature`` (the sampling temperature, as TRL does for
    log-probs) and upcast to fp32 before the log-softmax. Work proceeds in chunks of ``chunk_tokens``
    positions, so peak extra memory is O(chunk_tokens * V), not O(T * V). Positions where ``mask`` is 0 get 0.
    """
    lead = all_.shape[:-1]
    a = all_.reshape(-1, all_.shape[-1])
    b = minus.reshape(-1, minus.shape[-1])
    out = torch.zeros(a.shape[0], dtype=torch.float32, device=a.device)
    keep = mask.reshape(-1).bool() if mask is not None else torch.ones(a.shape[0], dtype=torch.bool, device=a.device)
    rows = keep.nonzero(as_tuple=True)[0]
    for start in range(0, rows.numel(), chunk_tokens):
        idx = rows[start : start + chunk_tokens]
        la, lb = a[idx], b[idx]
        if lm_head is not None:
            w = lm_head.to(torch.float32)
            la = la.to(torch.float32) @ w.T
            lb = lb.to(torch.float32) @ w.T
            if lm_head_bias is not None:
                la = la + lm_head_bias.to(torch.float32)
                lb = lb + lm_head_bias.to(torch.float32)
        la = torch.log_softmax(la.to(torch.float32) / temperature, dim=-1)
        lb = torch.log_softmax(lb.to(torch.float32) / temperature, dim=-1)
        out[idx] = (js_divergence(la, lb) / LN2).sqrt()
    return out.reshape(lead)


def concentration(q: torch.Tensor, mask: torch.Tensor, share: float = 0.8) -> torch.Tensor:
    """Fraction of a response's valid tokens that hold ``share`` of its total shift ``sum_t q_t``.

    q, mask (..., T) -> (...). Tokens are taken in decreasing q until their sum reaches ``share`` of the
    total; uniform q gives ``share``, a single spike gives ``1 / T``. NaN where the response has no shift.
    """
    qm = (q * mask).to(torch.float32)
    total = qm.sum(-1, keepdim=True)
    sorted_q, _ = qm.sort(dim=-1, descending=True)
    cum = sorted_q.cumsum(-1)
    needed = (cum < share * total - 1e-12).sum(-1) + 1
    frac = needed.to(torch.float32) / mask.sum(-1).clamp_min(1)
    return torch.where(total.squeeze(-1) > 0, frac, torch.full_like(frac, float("nan")))
