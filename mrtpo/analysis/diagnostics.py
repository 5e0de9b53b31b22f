"""Diagnostics of a policy's relevance profiles, reusable by notebooks and benchmarks (the definitions they read,
check regions and their ratio, are the method's: ``mrtpo.method.regions``).

* ``js_profile``: replay one response under two prompts (with and without Z_k) and return
  ``q_t = sqrt(JS(p_t^with || p_t^without) / ln 2)`` per response token (the trainer's replay, ``mrtpo.method.replay``).
* ``concentration``: fraction of tokens holding ``share`` (0.8) of the total shift (uniform q: 0.8).
* ``profile_example``: one sampled response's q per reward with the trainer's replay (``mrtpo.method.replay``).
* ``localisation``: where each reward's shift lands in saved profiles, one row per (profile, reward) with the
  sums ``shift_inside``, ``shift_total``, ``tokens_inside``, ``tokens_total``; ``region_ratios_se``, the
  standard errors of the check-region and outside ratios (a bootstrap over prompts); ``median_correlations_se``,
  those of the profiles' median correlations.
* ``localisation_note`` / ``read_localisation_notes``: the one text format of a localisation row's notes in
  ``results/tiny_models.csv`` (the region's shares and the concentration), written by
  ``benchmarks/tiny_models.py`` and read back by ``mrtpo.analysis.dose_response``.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch

from mrtpo.analysis.stats import cluster_bootstrap_se
from mrtpo.method.regions import check_region_ratio, in_region, outside_ratio, token_char_spans
from mrtpo.method.relevance import concentration as relevance_concentration
from mrtpo.method.relevance import js_relevance, median_correlations
from mrtpo.method.replay import replay_hidden
from mrtpo.models.sampling import prompt_ids, sample



@torch.no_grad()
def js_profile(model, tokenizer, prompt_with, prompt_without, response_ids: list[int], temperature: float = 1.0):
    """Per-token relevance ``q_t`` (T,) of ``response_ids`` between the two prompts, in [0, 1], with the
    trainer's replay (``mrtpo.method.replay.replay_hidden`` and ``js_relevance``)."""
    ids = torch.tensor(list(response_ids))
    h = replay_hidden(model, [prompt_ids(tokenizer, prompt_with), prompt_ids(tokenizer, prompt_without)], [ids, ids],
                      tokenizer.pad_token_id, batch_size=2)
    head = model.get_output_embeddings()
    return js_relevance(h[:1], h[1:], torch.ones(1, len(ids)), lm_head=head.weight, lm_head_bias=head.bias,
                        temperature=temperature)[0]



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
    """Fraction of tokens that hold ``share`` of ``sum q`` (``mrtpo.method.relevance.concentration`` for one response)."""
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

    from mrtpo.method.relevance import nan_median, profile_correlation
    from mrtpo.tasks.base import completion_text

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
    from mrtpo.tasks.base import completion_text

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



def profile_example(model, tokenizer, task, example: dict, z_blocks=None, temperature: float = 1.0, seed: int = 0,
                    max_new_tokens: int = 96) -> dict:
    """Sample one response to ``example`` and replay it leave-one-out for every reward with a Z block, with the
    trainer's replay (``mrtpo.method.replay.relevance``): the heat maps show the q that training uses.

    ``z_blocks`` defaults to ``task.z_blocks`` (pass your own formulation, same signature). Returns
    ``{"text", "tokens", "q": {reward: [q_t]}, "regions": {reward: [token indices its verifier reads]}}``.
    """
    from mrtpo.method.replay import relevance

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


def median_correlations_se(spec: dict[str, torch.Tensor], prompts, n_boot: int = 1000, seed: int = 0) -> dict[str, float]:
    """Standard errors of :func:`median_correlations`' ``cross_reward_corr`` and ``entropy_corr`` (when ``spec``
    has ``entropy``), by a bootstrap over the responses' prompts (``stats.cluster_bootstrap_se``: each replicate
    draws the prompts with replacement and takes the medians over every response of each drawn prompt; a median
    has no simple analytic s.e.). ``prompts``: the prompt of each response (B). NaN below two prompts."""
    keys = ["cross_reward_corr"] + (["entropy_corr"] if "entropy" in spec else [])

    def medians(rows):
        rows = torch.as_tensor(rows, dtype=torch.long)
        med = median_correlations({name: v[rows] for name, v in spec.items()})
        return [med[k] for k in keys]

    se = cluster_bootstrap_se(medians, prompts, n_boot, seed)
    return {k: float(s) for k, s in zip(keys, se)}
