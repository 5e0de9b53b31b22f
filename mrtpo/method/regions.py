"""Check regions: which response tokens a verifier reads, and how much of a profile lands there (PAPER.md §7).

* ``token_char_spans``: the character span of each response token in the decoded text, the one char -> token
  mapping; ``in_region`` and ``region_indicator``: which tokens a verifier's check region covers.
* ``region_sums``: a profile's sums inside and outside the regions, per (response, reward), from tensors.
* ``pooled_shares`` and ``check_region_ratio``: the region's share of the shift and of the tokens, and the
  check-region ratio, of a set of responses — the one definition every page, benchmark, ``mrtpo diagnose`` and
  the trainer's region log uses; ``outside_ratio``, the same ratio outside the region.

Pure functions of tensors, arrays and a tokenizer object: no I/O.
"""

from __future__ import annotations

import math

import numpy as np
import torch

def in_region(token_spans: list[tuple[int, int]], region_spans: list[tuple[int, int]]) -> list[bool]:
    """Whether each token overlaps a region span ``[start, end)`` (empty tokens are never inside)."""
    return [e > s and any(s < re_ and e > rs for rs, re_ in region_spans) for s, e in token_spans]


def region_indicator(tokenizer, completion_ids: list, regions: list[dict], names: list[str], T: int) -> torch.Tensor:
    """(B, K, T) float indicator m: ``m[j, k, t] = 1`` where token t of response j overlaps a span of
    ``regions[j][names[k]]`` (char spans of the decoded response, as ``Task.check_regions`` gives them), mapped as
    :func:`localisation` maps them (:func:`in_region` on :func:`token_char_spans`); 0 for a reward without a region
    and past a response's tokens. A region holding every token that has characters holds the tokens without any
    (eos, other special tokens) too: it is the whole response. ``completion_ids``: token ids per response, unpadded.
    What the ``region`` method and the placement dial place by (``advantages.placement``)."""
    m = torch.zeros(len(completion_ids), len(names), T)
    for j, (ids, spans) in enumerate(zip(completion_ids, regions)):
        if any(spans.get(name) for name in names):  # decoding every prefix costs O(T^2): only where a region exists
            chars = token_char_spans(tokenizer, list(ids)[:T])
            for k, name in enumerate(names):
                inside = in_region(chars, spans.get(name) or [])
                # a whole-response region must give uniform weights, not move weight off the eos token it cannot hold
                whole = any(inside) and all(a or e <= s for a, (s, e) in zip(inside, chars))
                m[j, k, : len(chars)] = 1.0 if whole else torch.tensor(inside, dtype=torch.float32)
    return m


def region_sums(profile: torch.Tensor, region: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """The sums :func:`pooled_shares` and :func:`check_region_ratio` read, per (response, reward), of a profile p
    (B, K, T) against the check-region indicator m (B, K, T) (:func:`region_indicator`) on the valid tokens (mask
    (B, T)): ``shift_inside = sum_t p m``, ``shift_total = sum_t p``, ``tokens_inside = sum_t m``, ``tokens_total``
    the valid tokens; each (B, K). Pure."""
    valid = mask.unsqueeze(1).to(profile.dtype)
    inside = region.to(profile.dtype) * valid
    return {"shift_inside": (profile * inside).sum(-1), "shift_total": (profile * valid).sum(-1),
            "tokens_inside": inside.sum(-1), "tokens_total": valid.sum(-1).expand(-1, region.shape[1])}


def pooled_shares(responses) -> tuple[float, float]:
    """(share of the shift inside the region, share of the tokens inside it) of a set of responses, pooled:

        shift share = sum_j shift_inside_j / sum_j shift_total_j,    token share = sum_j tokens_inside_j / sum_j tokens_total_j

    ``responses`` maps ``shift_inside`` (sum of q over the region's tokens), ``shift_total`` (sum of q over
    all tokens), ``tokens_inside`` and ``tokens_total`` to one value per response (a :func:`localisation` frame, or a
    dict of arrays or tensors). NaN where the set has no shift or no tokens. Pure."""
    total = {c: float(np.sum(np.asarray(responses[c], dtype=float))) for c in ("shift_inside", "shift_total", "tokens_inside", "tokens_total")}
    return (total["shift_inside"] / total["shift_total"] if total["shift_total"] > 0 else math.nan,
            total["tokens_inside"] / total["tokens_total"] if total["tokens_total"] > 0 else math.nan)


def check_region_ratio(responses) -> float:
    """Check-region ratio of a set of responses (PAPER.md §7, the paper's Table 4), pooled over the responses:

        ratio = (sum_j shift_inside_j / sum_j shift_total_j) / (sum_j tokens_inside_j / sum_j tokens_total_j)

    which is also (mean q over every region token of the set) / (mean q over every token of the set). Not the
    mean of per-response ratios (which small regions inflate), nor the ratio of per-response shares averaged
    over responses (which weighs a response with almost no shift like one with much). 1 = no better than
    uniform; NaN without shift or without region tokens. ``responses`` as in :func:`pooled_shares`. Pure."""
    shift, tokens = pooled_shares(responses)
    return shift / tokens if tokens > 0 else math.nan


def outside_ratio(responses) -> float:
    """The check-region ratio of the rest of the response: ``(1 − shift share) / (1 − token share)``
    (:func:`pooled_shares`). For a region holding more than half the tokens, whose ratio cannot exceed 1 / its
    token share, this shows the localisation instead: lower is more localised, 1 = uniform. Pure."""
    shift, tokens = pooled_shares(responses)
    return (1 - shift) / (1 - tokens) if tokens < 1 else math.nan


def token_char_spans(tokenizer, ids: list[int]) -> list[tuple[int, int]]:
    """Character span ``[start, end)`` of every token in ``tokenizer.decode(ids, skip_special_tokens=True)``.

    Computed from decoded prefixes, so it is exact for any tokenizer whose decoding is prefix-stable
    (byte-level BPE is); special tokens get an empty span.
    """
    spans, prev = [], 0
    for i in range(len(ids)):
        end = len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True))
        spans.append((prev, max(prev, end)))
        prev = max(prev, end)
    return spans
