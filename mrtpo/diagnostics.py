"""Diagnostics of a policy's relevance profiles, reusable by notebooks and benchmarks.

* ``js_profile``: replay one response under two prompts (with and without Z_k) and return
  ``q_t = sqrt(JS(p_t^with || p_t^without) / ln 2)`` per response token (the trainer's replay, ``mrtpo.replay``).
* ``token_char_spans``: character span of each response token in the decoded text.
* ``region_ratio``: mean q over tokens inside a verifier's read region / mean q over tokens outside it.
* ``region_share``: share of the total shift inside the region, and the region's share of tokens.
* ``concentration``: fraction of tokens holding ``share`` (0.8) of the total shift (uniform q: 0.8).
* ``sample``: completions from a policy at a temperature (what RL samples), token ids and text.
* ``profile_example``: one sampled response's q per reward with the trainer's replay (``mrtpo.replay``).
* ``localisation``: where each reward's shift lands in saved profiles, one row per (profile, reward);
  ``check_region_ratio``: the check-region ratio of a set of those rows (PAPER.md §7).
* ``record_entropies``: the sampling distribution's entropy at every generated position, read from the logits
  generation computes anyway (the trainer's entropy arm and ``mrtpo diagnose`` use it).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch

from .relevance import concentration as relevance_concentration
from .relevance import js_relevance, token_entropy
from .replay import replay_hidden
from .tokenizer import token_char_spans

__all__ = ["js_profile", "token_char_spans", "in_region", "region_ratio", "region_share", "concentration", "sample",
           "prompt_ids", "localisation", "check_region_ratio", "profile_example", "profile_tokens", "record_entropies"]


def prompt_ids(tokenizer, prompt) -> list[int]:
    """Token ids of a prompt as the trainer feeds it: chat messages go through the chat template."""
    if isinstance(prompt, str):
        return tokenizer(prompt, add_special_tokens=False).input_ids
    text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False).input_ids


@torch.no_grad()
def js_profile(model, tokenizer, prompt_with, prompt_without, response_ids: list[int], temperature: float = 1.0):
    """Per-token relevance ``q_t`` (T,) of ``response_ids`` between the two prompts, in [0, 1], with the
    trainer's replay (``mrtpo.replay.replay_hidden`` and ``js_relevance``)."""
    ids = torch.tensor(list(response_ids))
    h = replay_hidden(model, [prompt_ids(tokenizer, prompt_with), prompt_ids(tokenizer, prompt_without)], [ids, ids],
                      tokenizer.pad_token_id, batch_size=2)
    head = model.get_output_embeddings()
    return js_relevance(h[:1], h[1:], torch.ones(1, len(ids)), lm_head=head.weight, lm_head_bias=head.bias,
                        temperature=temperature)[0]


def in_region(token_spans: list[tuple[int, int]], region_spans: list[tuple[int, int]]) -> list[bool]:
    """Whether each token overlaps a region span ``[start, end)`` (empty tokens are never inside)."""
    return [e > s and any(s < re_ and e > rs for rs, re_ in region_spans) for s, e in token_spans]


def region_ratio(q, token_spans, region_spans) -> float:
    """``mean(q | inside) / mean(q | outside)``; NaN when either side is empty or the outside mean is 0."""
    q = torch.as_tensor(q, dtype=torch.float32)
    inside = torch.tensor(in_region(token_spans, region_spans), dtype=torch.bool)
    if inside.all() or not inside.any():
        return math.nan
    out_mean = q[~inside].mean().item()
    return q[inside].mean().item() / out_mean if out_mean > 0 else math.nan


def region_share(q, token_spans, region_spans) -> tuple[float, float]:
    """(share of ``sum q`` inside the region, share of tokens inside the region), as in PAPER.md Table 4."""
    q = torch.as_tensor(q, dtype=torch.float32)
    inside = torch.tensor(in_region(token_spans, region_spans), dtype=torch.bool)
    total = q.sum().item()
    return (q[inside].sum().item() / total if total > 0 else math.nan), inside.float().mean().item()


def concentration(q, share: float = 0.8) -> float:
    """Fraction of tokens that hold ``share`` of ``sum q`` (``mrtpo.relevance.concentration`` for one response)."""
    q = torch.as_tensor(q, dtype=torch.float32)
    return float(relevance_concentration(q, torch.ones_like(q), share))


def localisation(profiles: list[dict], task, tokenizer) -> "pd.DataFrame":
    """Where each reward's shift lands, one row per (saved profile, reward with a check region).

    Columns: ``step``, ``reward``, ``label`` (``task.reward_label``, e.g. the constraint type), ``reward_value`` (1 satisfied / 0 violated for binary verifiers), ``shift_share`` (share of
    ``sum q`` inside the region the verifier reads), ``token_share`` (that region's share of tokens),
    ``ratio`` (shift_share / token_share of this one response; the ratio of a *set* of responses is
    :func:`check_region_ratio`, never the mean of this column), ``inside_outside`` (mean q inside / mean q
    outside), ``concentration80``, ``think_shift_share`` (share of the shift inside ``<think>``),
    ``cross_reward_corr`` (median correlation over tokens of this q with the other rewards' q on the same
    response) and ``entropy_corr`` (correlation of q with the sampling entropy, for profiles that saved it); the
    two NaN where undefined. Profiles are the trainer's ``profiles.jsonl`` rows (``profile_samples``).
    """
    import pandas as pd

    from .relevance import nan_median, profile_correlation
    from .tasks.base import completion_text

    rows = []
    for p in profiles:
        text = completion_text(p["completion"])
        spans = token_char_spans(tokenizer, p["completion_ids"])
        regions = task.check_regions(text, p["example"])
        profiled = {name: torch.tensor(q) for name, q in p["q"].items() if sum(q) > 0}
        ones = torch.ones(len(p["completion_ids"]))
        for name, q in p["q"].items():
            if name not in regions or not regions[name] or sum(q) <= 0:
                continue
            shift, tokens = region_share(q, spans, regions[name])
            label = task.reward_label(name, p["example"])
            rows.append({
                "step": p["step"], "reward": name, "label": label, "reward_value": p["rewards"].get(name),
                "shift_share": shift, "token_share": tokens, "ratio": shift / tokens if tokens > 0 else math.nan,
                "inside_outside": region_ratio(q, spans, regions[name]), "concentration80": concentration(q),
                "think_shift_share": region_share(q, spans, regions.get("think", []))[0],
                "cross_reward_corr": nan_median(torch.tensor([float(profile_correlation(profiled[name], other, ones))
                                                              for o, other in profiled.items() if o != name]))
                if len(profiled) > 1 else math.nan,
                "entropy_corr": float(profile_correlation(profiled[name], torch.tensor(p["entropy"]), ones))
                if "entropy" in p else math.nan,
            })
    columns = ["step", "reward", "label", "reward_value", "shift_share", "token_share", "ratio", "inside_outside",
               "concentration80", "think_shift_share", "cross_reward_corr", "entropy_corr"]
    return pd.DataFrame(rows, columns=columns)


def check_region_ratio(loc) -> float:
    """Check-region ratio of a set of :func:`localisation` rows (PAPER.md §7, the paper's Table 4):
    ``mean(shift_share) / mean(token_share)``, the share of the shift inside the verifier's region over the
    region's share of tokens, each averaged over the responses. A ratio of mean shares, not the mean of the
    per-response ratios (which small regions inflate). 1 = no better than uniform; NaN for no rows."""
    tokens = float(loc["token_share"].mean()) if len(loc) else math.nan
    return float(loc["shift_share"].mean()) / tokens if tokens > 0 else math.nan


def profile_tokens(profile: dict, task, tokenizer) -> dict:
    """A saved profile (a row of the trainer's ``profiles.jsonl``) in :func:`profile_example`'s form:
    ``{"text", "tokens", "q", "regions"}``, ready for ``plots.RelevanceText``."""
    from .tasks.base import completion_text

    text = completion_text(profile["completion"])
    ids = profile["completion_ids"]
    spans = token_char_spans(tokenizer, ids)
    regions = task.check_regions(text, profile["example"])
    return {
        "text": text,
        "tokens": [tokenizer.decode([i]) for i in ids],
        "q": profile["q"],
        "regions": {name: [i for i, inside in enumerate(in_region(spans, regions.get(name, []))) if inside]
                    for name in profile["q"]},
    }


@torch.no_grad()
def sample(model, tokenizer, prompts: list, n: int = 1, temperature: float = 1.0, max_new_tokens: int = 96,
           seed: int | None = None) -> list[list[tuple[list[int], str]]]:
    """``n`` completions per prompt at ``temperature`` (no top-k/top-p, as RL samples): (ids, text) each.

    ids exclude padding and the final eos; text is ``decode(ids, skip_special_tokens=True)`` as TRL decodes.
    """
    if seed is not None:
        torch.manual_seed(seed)
    encoded = [prompt_ids(tokenizer, p) for p in prompts for _ in range(n)]
    width = max(len(e) for e in encoded)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    kwargs = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 else dict(do_sample=False)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, pad_token_id=pad,
                         eos_token_id=eos, **kwargs)[:, width:]
    results = []
    for row in out.tolist():
        if eos in row:
            row = row[: row.index(eos)]
        row = [t for t in row if t != pad]
        results.append((row, tokenizer.decode(row, skip_special_tokens=True)))
    return [results[i * n : (i + 1) * n] for i in range(len(prompts))]


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


def profile_example(model, tokenizer, task, example: dict, z_blocks=None, temperature: float = 1.0, seed: int = 0,
                    max_new_tokens: int = 96) -> dict:
    """Sample one response to ``example`` and replay it leave-one-out for every reward with a Z block, with the
    trainer's replay (``mrtpo.replay.relevance``): the heat maps show the q that training uses.

    ``z_blocks`` defaults to ``task.z_blocks`` (pass your own formulation, same signature). Returns
    ``{"text", "tokens", "q": {reward: [q_t]}, "regions": {reward: [token indices its verifier reads]}}``.
    """
    from .replay import relevance

    ids, text = sample(model, tokenizer, [example["prompt"]], n=1, temperature=temperature, seed=seed,
                       max_new_tokens=max_new_tokens)[0][0]
    columns = {k: [v] for k, v in example.items() if k != "prompt"}
    blocks = (z_blocks or task.z_blocks)(prompts=[example["prompt"]], completions=[text], **columns)[0]
    names = list(blocks)
    spans = token_char_spans(tokenizer, ids)
    regions = task.check_regions(text, example)
    q = torch.zeros(len(names), len(ids))
    if ids and names:
        q = relevance(model, lambda prompts: [prompt_ids(tokenizer, p) for p in prompts], tokenizer.pad_token_id,
                      [example["prompt"]], [blocks], torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long),
                      torch.ones(1, len(names), dtype=torch.bool), names, temperature=temperature)[0][0]
    return {
        "text": text,
        "tokens": [tokenizer.decode([i]) for i in ids],
        "q": {name: q[k].tolist() for k, name in enumerate(names)},
        "regions": {name: [i for i, inside in enumerate(in_region(spans, regions.get(name, []))) if inside] for name in blocks},
    }
