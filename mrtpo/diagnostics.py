"""Diagnostics of a policy's relevance profiles, reusable by notebooks and benchmarks.

* ``js_profile``: replay one response under two prompts (with and without Z_k) and return
  ``q_t = sqrt(JS(p_t^with || p_t^without) / ln 2)`` per response token (the trainer's replay, ``mrtpo.replay``).
* ``token_char_spans``: character span of each response token in the decoded text; ``in_region`` and
  ``region_indicator``: which tokens a verifier's check region covers (the one char -> token mapping).
* ``concentration``: fraction of tokens holding ``share`` (0.8) of the total shift (uniform q: 0.8).
* ``sample``: completions from a policy at a temperature (what RL samples), token ids and text.
* ``profile_example``: one sampled response's q per reward with the trainer's replay (``mrtpo.replay``).
* ``localisation``: where each reward's shift lands in saved profiles, one row per (profile, reward) with the
  sums ``shift_inside``, ``shift_total``, ``tokens_inside``, ``tokens_total``;
* ``pooled_shares`` and ``check_region_ratio``: the region's share of the shift and of the tokens, and the
  check-region ratio, of a set of responses (PAPER.md §7) — the one definition every page, benchmark,
  ``mrtpo diagnose`` and the trainer's region log uses (``region_sums``: its sums from profile tensors);
  ``outside_ratio``, the same ratio outside the region; ``region_ratios_se``, the standard errors of both (a
  bootstrap over prompts).
* ``localisation_note`` / ``read_localisation_notes``: the one text format of a localisation row's notes in
  ``results/tiny_models.csv`` (the region's shares and the concentration), written by
  ``benchmarks/tiny_models.py`` and read back by ``mrtpo.dose_response``.
* ``record_entropies``: the sampling distribution's entropy at every generated position, read from the logits
  generation computes anyway (the trainer's entropy arm and ``mrtpo diagnose`` use it).
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager

import numpy as np
import torch

from .relevance import concentration as relevance_concentration
from .relevance import js_relevance, token_entropy
from .replay import replay_hidden
from .stats import cluster_bootstrap_se
from .tokenizer import token_char_spans

__all__ = ["js_profile", "token_char_spans", "in_region", "region_indicator", "region_sums", "concentration", "sample",
           "prompt_ids", "localisation", "pooled_shares", "check_region_ratio", "outside_ratio", "region_ratios_se", "profile_example",
           "profile_tokens", "record_entropies"]


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


def region_ratios_se(responses, prompts, n_boot: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Standard errors of :func:`check_region_ratio` and :func:`outside_ratio` of a set of responses, by a
    bootstrap over their prompts (``stats.cluster_bootstrap_se``: each replicate draws the prompts with
    replacement and pools every response of each drawn prompt). A ratio of pooled sums has no simple analytic
    s.e. (the delta method linearises it; the bootstrap needs no linearisation, and resampling prompts rather than
    responses keeps the correlation of one prompt's responses). ``responses`` as in :func:`pooled_shares`;
    ``prompts``: the prompt of each response. NaN below two prompts."""
    columns = {c: np.asarray(responses[c], dtype=float) for c in ("shift_inside", "shift_total", "tokens_inside", "tokens_total")}

    def both(rows):
        subset = {c: v[rows] for c, v in columns.items()}
        return np.array([check_region_ratio(subset), outside_ratio(subset)])

    se = cluster_bootstrap_se(both, prompts, n_boot, seed)
    return float(se[0]), float(se[1])


def concentration(q, share: float = 0.8) -> float:
    """Fraction of tokens that hold ``share`` of ``sum q`` (``mrtpo.relevance.concentration`` for one response)."""
    q = torch.as_tensor(q, dtype=torch.float32)
    return float(relevance_concentration(q, torch.ones_like(q), share))


#: what ``read_localisation_notes`` reads back of ``localisation_note``'s text
_NOTE = re.compile(r"token share (?P<token_share>[0-9.]+); concentration\(80%\) (?P<concentration80>[0-9.]+)")


def localisation_note(shift_share: float, token_share: float, concentration80: float, se: float, responses: int) -> str:
    """The start of a localisation row's notes: the region's share of the shift and of the tokens (pooled), and the
    mean concentration (share of tokens holding 80% of a response's shift) with its standard error."""
    return (f"shift share {shift_share:.3f} on token share {token_share:.3f}; concentration(80%) "
            f"{concentration80:.3f} ± {se:.3f} over {responses} responses with shift")


def read_localisation_notes(notes: "pd.Series") -> "pd.DataFrame":
    """Columns ``token_share`` and ``concentration80`` of notes that start as ``localisation_note`` writes them
    (NaN where a note lacks them)."""
    return notes.astype(str).str.extract(_NOTE).astype(float)


def localisation(profiles: list[dict], task, tokenizer) -> "pd.DataFrame":
    """Where each reward's shift lands, one row per (saved profile, reward with a check region).

    Columns: ``profile`` (the profile's index in ``profiles``: a profile has a row per reward), ``step``,
    ``reward``, ``label`` (``task.reward_label``, e.g. the constraint type), ``reward_value``
    (1 satisfied / 0 violated for binary verifiers), ``shift_inside`` (sum of q over the tokens of the region the
    verifier reads), ``shift_total`` (sum of q), ``tokens_inside``, ``tokens_total`` (the set's shares and check-region ratio:
    :func:`pooled_shares`, :func:`check_region_ratio`), ``concentration80``, ``think_shift`` (sum of q inside
    ``<think>``: the set's share is ``sum think_shift / sum shift_total``),
    ``cross_reward_corr`` (median correlation over tokens of this q with the other rewards' q on the same
    response) and ``entropy_corr`` (correlation of q with the sampling entropy, for profiles that saved it); the
    two NaN where undefined. Profiles are the trainer's ``profiles.jsonl`` rows (``profile_samples``).
    """
    import pandas as pd

    from .relevance import nan_median, profile_correlation
    from .tasks.base import completion_text

    rows = []
    for i, p in enumerate(profiles):
        text = completion_text(p["completion"])
        spans = token_char_spans(tokenizer, p["completion_ids"])
        regions = task.check_regions(text, p["example"])
        profiled = {name: torch.tensor(q) for name, q in p["q"].items() if sum(q) > 0}
        ones = torch.ones(len(p["completion_ids"]))
        for name, q in p["q"].items():
            if name not in regions or not regions[name] or sum(q) <= 0:
                continue
            qt = torch.tensor(q, dtype=torch.float32)
            inside = torch.tensor(in_region(spans, regions[name]), dtype=torch.bool)
            think = torch.tensor(in_region(spans, regions.get("think", [])), dtype=torch.bool)
            label = task.reward_label(name, p["example"])
            rows.append({
                "profile": i, "step": p["step"], "reward": name, "label": label, "reward_value": p["rewards"].get(name),
                "shift_inside": float(qt[inside].sum()), "shift_total": float(qt.sum()), "tokens_inside": int(inside.sum()),
                "tokens_total": len(q), "concentration80": concentration(q), "think_shift": float(qt[think].sum()),
                "cross_reward_corr": nan_median(torch.tensor([float(profile_correlation(profiled[name], other, ones))
                                                              for o, other in profiled.items() if o != name]))
                if len(profiled) > 1 else math.nan,
                "entropy_corr": float(profile_correlation(profiled[name], torch.tensor(p["entropy"]), ones))
                if "entropy" in p else math.nan,
            })
    columns = ["profile", "step", "reward", "label", "reward_value", "shift_inside", "shift_total", "tokens_inside", "tokens_total",
               "concentration80", "think_shift", "cross_reward_corr", "entropy_corr"]
    return pd.DataFrame(rows, columns=columns)


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


def decoding_config(temperature: float, max_new_tokens: int, pad_token_id: int, eos_token_id: int) -> "GenerationConfig":
    """The explicit decoding of :func:`sample`: greedy at ``temperature`` 0, else sampling at ``temperature`` alone
    (top-k 0, top-p 1, as TRL samples in training); no other logits processor either way (repetition penalty 1, no
    n-gram blocking, no typical/min-p/epsilon/eta cut, one beam). A checkpoint's ``generation_config.json`` holds its
    chat defaults (Qwen2.5-Instruct: repetition_penalty 1.05, top_k 20, top_p 0.8, temperature 0.7); ``generate``
    would apply them wherever the call leaves a setting unset, so :func:`sample` decodes with this and nothing of
    the checkpoint's. The tiny bases' generation configs set none of these, so their decodings are unchanged."""
    from transformers import GenerationConfig

    neutral = dict(max_new_tokens=max_new_tokens, pad_token_id=pad_token_id, eos_token_id=eos_token_id, num_beams=1,
                   repetition_penalty=1.0, no_repeat_ngram_size=0, typical_p=1.0, epsilon_cutoff=0.0, eta_cutoff=0.0)
    if temperature > 0:
        return GenerationConfig(do_sample=True, temperature=temperature, top_k=0, top_p=1.0, **neutral)
    return GenerationConfig(do_sample=False, **neutral)


@torch.no_grad()
def sample(model, tokenizer, prompts: list, n: int = 1, temperature: float = 1.0, max_new_tokens: int = 96,
           seed: int | None = None) -> list[list[tuple[list[int], str]]]:
    """``n`` completions per prompt at ``temperature`` (no top-k/top-p, as RL samples; greedy at 0): (ids, text) each.

    ids exclude padding and the final eos; text is ``decode(ids, skip_special_tokens=True)`` as TRL decodes. The
    decoding is :func:`decoding_config`'s whatever the checkpoint's ``generation_config.json`` says.
    """
    if seed is not None:
        torch.manual_seed(seed)
    encoded = [prompt_ids(tokenizer, p) for p in prompts for _ in range(n)]
    width = max(len(e) for e in encoded)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    from transformers import GenerationConfig

    config = decoding_config(temperature, max_new_tokens, pad, eos)
    checkpoint_defaults = model.generation_config
    model.generation_config = GenerationConfig()  # generate fills what ``config`` leaves unset from here: nothing
    try:
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:]
    finally:
        model.generation_config = checkpoint_defaults
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
