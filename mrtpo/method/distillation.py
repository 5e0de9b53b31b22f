"""OPSD, on-policy self-distillation (PAPER.md §7): the divergence between teacher and student per token.

One model is both: the teacher reads P_all (the prompt and every verifier's Z block; the replay's P_all), the
student the plain prompt; both score the student's own sampled response. Pure tensor math: no I/O, no trainer
state. Shapes: logits (B, T, V) at the completion positions, ``mask`` (B, T) 1 on valid completion tokens.

The options follow the public reference implementation (siyan-zhao/OPSD, on TRL's GOLD trainer):

* ``forward_topk`` (the paper's description): forward KL(teacher || student) on the teacher's top-k tokens,
  both distributions renormalised over those k (``OPSDTrainer.generalized_jsd_loss`` with beta = 0, top_k);
* ``reverse``: full reverse KL(student || teacher) over the vocabulary (beta = 1 there, no top-k);
* ``clip``: pointwise clipping: each vocabulary entry's term ``p(v) (log p(v) - log p'(v))`` is capped at
  ``clip`` before the sum over v (the reference's ``jsd_token_clip``, which it adds because style tokens carry
  6–15x the KL of content tokens).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DIVERGENCES = ("forward_topk", "reverse")


def token_divergence(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor,
                     divergence: str = "forward_topk", top_k: int = 64, clip: float | None = None) -> torch.Tensor:
    """Per-token divergence D_t (B, T), 0 on padding.

    ``forward_topk``: with I_t the teacher's top-k token ids at t, ``p = softmax(teacher_logits[I_t])``,
    ``p' = softmax(student_logits[I_t])``: ``D_t = sum_{v in I_t} min(clip, p(v) (log p(v) - log p'(v)))``.
    ``reverse``: ``p = softmax(student_logits)``, ``p' = softmax(teacher_logits)`` over the vocabulary, same sum.
    Gradients flow into the student's logits only (the teacher's are detached).
    """
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence={divergence!r} is not valid; valid values: {', '.join(DIVERGENCES)}")
    teacher_logits = teacher_logits.detach().to(student_logits.dtype)
    if divergence == "forward_topk":
        index = teacher_logits.topk(min(top_k, teacher_logits.shape[-1]), dim=-1).indices
        p_log = F.log_softmax(teacher_logits.gather(-1, index), dim=-1)
        q_log = F.log_softmax(student_logits.gather(-1, index), dim=-1)
    else:
        p_log = F.log_softmax(student_logits, dim=-1)
        q_log = F.log_softmax(teacher_logits, dim=-1)
    pointwise = p_log.exp() * (p_log - q_log)
    if clip is not None:
        pointwise = pointwise.clamp(max=clip)
    return pointwise.sum(-1) * mask.to(pointwise.dtype)


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor,
                      divergence: str = "forward_topk", top_k: int = 64, clip: float | None = None) -> torch.Tensor:
    """``sum_{j,t} D_t / (number of valid tokens)``: the reference's "batchmean" over the batch's valid tokens."""
    return token_divergence(student_logits, teacher_logits, mask, divergence, top_k, clip).sum() / mask.sum().clamp_min(1)
