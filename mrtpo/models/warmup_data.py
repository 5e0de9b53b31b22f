"""The supervised warm-up data of a tiny base (``mrtpo.models.tiny``): the example pool and the batches drawn from it.

Pool (``make_examples``): the task's synthetic examples with reference responses, ``hide_value_frac`` of them
with their needed value only in Z, ``random_value_frac`` of the rest with their copyable values replaced by
random ones. Batch (``sample_batch``), per example:

1. the Z blocks its prompt shows (``shown_blocks``): each independently with probability ``hint_p``, or with
   ``loo_blocks`` the trainer's contexts P_0 / P_all / P_minus_k;
2. its target: the reference with the recipe's gated noise where blocks are absent (``noisy_target``) and,
   with ``robust_p``, corruptions where they are shown whose tokens carry no loss (``robust_target``,
   ``robust_labels``); ``one_site`` puts every corruption at its first candidate site (``FirstSite``);
3. per-token loss weights, ``copy_weight`` on the answer's value tokens (``value_weights``).
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mrtpo.tasks.warmup import VALUE_RE, answer_start, answer_values, random_like, sub_value
from mrtpo.method.regions import token_char_spans

if TYPE_CHECKING:
    from mrtpo.models.recipe import Recipe

SYLLABLES = ("ka", "lo", "mi", "ren", "tu", "vo", "sa", "bel", "dor", "ni", "qu", "ar", "en", "po", "zi", "fa")


def pseudo_words(n: int, seed: int) -> list[str]:
    """``n`` distinct capitalised pseudo-words (never real data values), deterministic in ``seed``."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        if w not in out:
            out.append(w)
    return out


# ----------------------------------------------------------------------------------------------------
# the example pool


@dataclass
class WarmupExample:
    prompt: list  # chat messages, without Z
    response: str
    z: dict[str, str]
    kind: str  # "plain", "random_values" or "hidden_value"
    labels: dict[str, str] = field(default_factory=dict)  # Z block -> what its reward checks (reward_label)


def make_examples(task, recipe: Recipe, seed: int, words: list[str]) -> list[WarmupExample]:
    """The warm-up pool: task examples, some with random values, some with a value only in Z."""
    rng = random.Random(seed)
    n_hidden = int(recipe.n_train * recipe.hide_value_frac)
    rows = list(task.synthetic(recipe.n_train - n_hidden, seed=seed, split="train"))
    kinds = ["plain"] * len(rows)
    hidden = task.hidden_value_split(n_hidden, seed + 1, "train") if n_hidden else None
    if hidden is not None:
        rows += list(hidden[1])
        kinds += ["hidden_value"] * len(hidden[1])
    out = []
    for row, kind in zip(rows, kinds):
        response = task.reference_response(row)
        if not recipe.think_values and task.think_values is not None:
            response = task.think_values.sub("", response)
        end = response.find("</think>")
        if recipe.think_drop and end >= 0:
            response = re.sub(recipe.think_drop, "", response[:end]) + response[end:]
        columns = {k: [v] for k, v in row.items() if k != "prompt"}
        z = task.z_blocks([row["prompt"]], [[{"role": "assistant", "content": response}]], **columns)[0]
        labels = {k: task.reward_label(k, row) for k in z}
        ex = WarmupExample([dict(m) for m in row["prompt"]], response, dict(z), kind, labels)
        if kind == "plain" and rng.random() < recipe.random_value_frac:
            ex = randomise_values(ex, rng, words)
        out.append(ex)
    return out


def randomise_values(ex: WarmupExample, rng: random.Random, words: list[str]) -> WarmupExample:
    """Replace every copyable value, consistently in prompt, Z and target, by a random one."""
    visible = " ".join(m["content"] for m in ex.prompt) + " " + " ".join(ex.z.values())
    values = answer_values(ex.response, visible)
    if not values:
        return ex
    prompt, response, z = [dict(m) for m in ex.prompt], ex.response, dict(ex.z)
    for v in values:
        new = random_like(v, rng, words)
        for m in prompt:
            m["content"] = sub_value(m["content"], v, new)
        response = sub_value(response, v, new)
        z = {k: sub_value(t, v, new) for k, t in z.items()}
    return WarmupExample(prompt, response, z, "random_values", ex.labels)


def render_prompt_plain(ex: WarmupExample) -> str:
    """Tokenizer-training text of one example: every message, every Z block and the target."""
    return "\n".join([m["content"] for m in ex.prompt] + list(ex.z.values()) + [ex.response])


def render_prompt(tokenizer, prompt: list, blocks: dict[str, str]) -> str:
    """The chat-template text of ``prompt ⊕ blocks`` ending with the assistant marker (as the trainer sees it)."""
    from mrtpo.method.contexts import append_section

    return tokenizer.apply_chat_template(append_section(prompt, blocks), tokenize=False, add_generation_prompt=True)


# ----------------------------------------------------------------------------------------------------
# one batch


def shown_blocks(ex: WarmupExample, recipe: Recipe, step: int, rng: random.Random) -> dict[str, str]:
    """The Z blocks ``ex``'s prompt shows at warm-up ``step``.

    Independent (default): each block with probability ``hint_p[0]`` for the first ``hint_switch`` of the
    steps, then ``hint_p[1]``. ``loo_blocks``: none (P_0), all (P_all) or all but one uniformly drawn block
    (P_minus_k), probability 1/3 each. Independent blocks make "all shown" rare (1/8 of three-block
    examples at p = 0.5), and the gate of region k on block k was then learned loosely: under P_all the
    policy stayed uncertain where the other blocks' noise goes (results/testbed/attempts.md, B1)."""
    if not recipe.loo_blocks:
        p = recipe.hint_p[0] if step < recipe.hint_switch * recipe.steps else recipe.hint_p[1]
        return {k: z for k, z in ex.z.items() if rng.random() < p}
    u, keys = rng.random(), list(ex.z)
    if u < 1 / 3:
        keep = set()
    elif u < 2 / 3 or not keys:
        keep = set(keys)
    else:
        keep = set(keys) - {keys[int(rng.random() * len(keys))]}
    return {k: z for k, z in ex.z.items() if k in keep}


class FirstSite:
    """The rng handed to ``Task.corrupt`` under ``one_site``: ``choice`` always returns the first candidate,
    every other draw is the wrapped rng's. The corruptions of ``mrtpo.tasks.warmup`` draw their site with
    ``rng.choice``, so each noise kind then has one site per response; text-to-SQL: ``syntax`` always
    misspells SELECT (-> SELEC), ``tag`` always drops ``<think>``, ``structure`` applies the first entry of
    ``SQL_SWAPS`` the answer holds. (A ``value`` corruption would always insert ``words[0]``.)"""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def choice(self, seq):
        return seq[0]

    def __getattr__(self, name):
        return getattr(self.rng, name)


def noisy_target(task, ex: WarmupExample, shown: dict, recipe: Recipe, rng, words, counts: dict) -> str:
    """The warm-up target of ``ex`` with the recipe's noise applied: a ``constraint`` corruption for each block
    absent from the prompt (probability ``p`` each), any other kind when none of its gate blocks is shown."""
    target = ex.response
    for nz in recipe.noise:
        if nz.kind == "constraint":
            for k in ex.z:
                if k not in shown and rng.random() < nz.p:
                    noisy = task.corrupt(target, nz.kind, rng, words, ex.labels.get(k, ""))
                    counts["noise_applied"][nz.kind] += noisy != target
                    target = noisy
        elif not any(g in shown for g in nz.gate) and rng.random() < nz.p:
            noisy = task.corrupt(target, nz.kind, rng, words)
            counts["noise_applied"][nz.kind] += noisy != target
            target = noisy
    return target


def robust_target(task, ex: WarmupExample, target: str, shown: dict, recipe: Recipe, rng, words, counts: dict) -> str:
    """``target`` with each noise whose gate block is in ``shown`` (for ``constraint`` noise: each shown block,
    with its label) applied with probability ``recipe.robust_p``: the complement of ``noisy_target``."""
    for nz in recipe.noise:
        if nz.kind == "constraint":
            labels = [ex.labels.get(k, "") for k in ex.z if k in shown]
        else:
            labels = [""] if any(g in shown for g in nz.gate) else []
        for label in labels:
            if rng.random() < recipe.robust_p:
                noisy = task.corrupt(target, nz.kind, rng, words, label)
                key = f"robust_{nz.kind}"
                counts["noise_applied"][key] = counts["noise_applied"].get(key, 0) + (noisy != target)
                target = noisy
    return target


def changed_ranges(a, b) -> list[tuple[int, int]]:
    """Ranges ``[j1, j2)`` of ``b`` that differ from ``a`` (``difflib.SequenceMatcher`` opcodes other than
    equal): character ranges for two strings, token ranges for two id lists. A pure deletion is the empty
    range ``(j1, j1)`` at the place in ``b`` where the deleted part of ``a`` was."""
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(j1, j2) for tag, _, _, j1, j2 in ops if tag != "equal"]


def robust_labels(clean_ids: list[int], noisy_ids: list[int]) -> list[int]:
    """Labels of ``noisy_ids`` (a corrupted target) with -100 on the tokens the corruption changed.

    Compared token by token, not by character spans: ``FROM`` -> ``FRO`` tokenises as ``FR`` ``O`` and
    ``</answer>`` -> ``</answer`` as ``<`` ``/`` ``answer``, so the first token of a corrupted word can keep
    every character of the clean text and still not be the clean token at that place. A deletion masks the
    token that stands where the deleted ones were (dropping ``<think>`` makes the first word the error;
    dropping the last tag makes EOS the error, so the ids include EOS)."""
    labels = list(noisy_ids)
    for j1, j2 in changed_ranges(clean_ids, noisy_ids):
        for j in range(j1, min(max(j2, j1 + 1), len(labels))):
            labels[j] = -100
    return labels


def value_weights(tokenizer, labels, copy_weight: float):
    """(B, T) loss weights: ``copy_weight`` on every labelled token whose characters overlap a value
    (``VALUE_RE``) of the answer region (after ``answer_start``), 1 elsewhere.

    The text searched is the decoding of a row's labelled tokens (those != -100), so tokens a robust
    continuation masked are left out of it. A copied value is one or two tokens of ~40: unweighted, its
    gradient is lost among the boilerplate tokens the policy learns first (results/testbed/attempts.md, A2)."""
    import torch

    weights = torch.ones(labels.shape, dtype=torch.float32)
    for b in range(labels.shape[0]):
        pos = (labels[b] != -100).nonzero().flatten()
        ids = labels[b, pos].tolist()
        text = tokenizer.decode(ids, skip_special_tokens=True)
        values = [m.span() for m in VALUE_RE.finditer(text, answer_start(text))]
        for j, (a, e) in enumerate(token_char_spans(tokenizer, ids)):
            if any(a < ve and e > vs for vs, ve in values):
                weights[b, pos[j]] = copy_weight
    return weights


def sample_batch(task, examples, recipe: Recipe, step: int, rng: random.Random, words, tokenizer, counts: dict):
    """One warm-up batch: ``(input_ids, labels, attention_mask, weights)``, labels -100 on prompt, padding and
    robust corruptions; ``weights`` from ``value_weights``, None when ``copy_weight`` is 1 (unweighted loss)."""
    import torch

    site_rng = FirstSite(rng) if recipe.one_site else rng
    seqs = []
    for ex in rng.sample(examples, recipe.batch):
        shown = shown_blocks(ex, recipe, step, rng)
        counts["blocks_shown"] += len(shown)
        counts["blocks_total"] += len(ex.z)
        target = noisy_target(task, ex, shown, recipe, site_rng, words, counts)
        p_ids = tokenizer(render_prompt(tokenizer, ex.prompt, shown), add_special_tokens=False).input_ids
        r_ids = tokenizer(target, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        r_labels = r_ids
        if recipe.robust_p > 0:
            robust = robust_target(task, ex, target, shown, recipe, site_rng, words, counts)
            if robust != target:
                noisy_ids = tokenizer(robust, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
                r_ids, r_labels = noisy_ids, robust_labels(r_ids, noisy_ids)
        seqs.append(((p_ids + r_ids)[: recipe.max_len], ([-100] * len(p_ids) + r_labels)[: recipe.max_len]))
    width = max(len(s[0]) for s in seqs)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([s[0] + [pad] * (width - len(s[0])) for s in seqs])
    labels = torch.tensor([s[1] + [-100] * (width - len(s[1])) for s in seqs])
    attention = torch.tensor([[1] * len(s[0]) + [0] * (width - len(s[0])) for s in seqs])
    weights = value_weights(tokenizer, labels, recipe.copy_weight) if recipe.copy_weight != 1 else None
    return input_ids, labels, attention, weights
