"""Warm-up batches (``mrtpo.models.warmup_data``): the leave-one-out block schedule, robust continuations, one site
per reward and value-token weights."""

import dataclasses
import random
import re

import pytest
import torch

from mrtpo.models import tiny
from mrtpo.models import warmup_data as W
from mrtpo.tasks import get_task
from mrtpo.tasks.base import Noise
from mrtpo.tasks.warmup import VALUE_RE, answer_start
from mrtpo.models.tokenizer import build_tokenizer
from mrtpo.models import recipe as recipes


@pytest.fixture(scope="module")
def sql_setup():
    """(task, recipe with every gated noise at p = 1, examples, words, tokenizer) at smoke size."""
    task = get_task("sql")
    noise = tuple(Noise(n.kind, 1.0, n.gate) for n in task.warmup_noise)
    recipe = dataclasses.replace(recipes.default_recipe(task, "smoke"), n_train=12, think_values=False, noise=noise)
    words = W.pseudo_words(400, 0)
    examples = W.make_examples(task, recipe, 0, words)
    tok = build_tokenizer([W.render_prompt_plain(e) for e in examples] + [" ".join(words)] * 3, vocab_size=4096)
    return task, recipe, examples, words, tok


def new_counts(recipe):
    return {"blocks_shown": 0, "blocks_total": 0, "noise_applied": {n.kind: 0 for n in recipe.noise}}


def batch(sql_setup, shown, **options):
    """A batch of every example (in order) with the blocks ``shown(ex)`` and the recipe ``options``."""
    task, recipe, examples, words, tok = sql_setup
    recipe = dataclasses.replace(recipe, batch=len(examples), **options)
    counts = new_counts(recipe)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(W, "shown_blocks", lambda ex, *_: {k: z for k, z in ex.z.items() if k in shown(ex)})
        rng = random.Random(0)
        mp.setattr(rng, "sample", lambda seq, k: list(seq)[:k])
        return W.sample_batch(task, examples, recipe, 0, rng, words, tok, counts), counts


def test_leave_one_out_schedule_shows_none_all_or_all_but_one(sql_setup):
    _, recipe, examples, _, _ = sql_setup
    loo, rng = dataclasses.replace(recipe, loo_blocks=True), random.Random(0)
    seen = {"none": 0, "all": 0, "all but one": 0}
    for i in range(600):
        ex = examples[i % len(examples)]
        shown = W.shown_blocks(ex, loo, 0, rng)
        assert list(shown) == [k for k in ex.z if k in shown] and all(shown[k] == ex.z[k] for k in shown)
        seen[{0: "none", len(ex.z): "all", len(ex.z) - 1: "all but one"}[len(shown)]] += 1
    assert all(150 < n < 250 for n in seen.values()), seen
    # the default schedule: each block with probability hint_p[0] before hint_switch, hint_p[1] after
    rng = random.Random(0)
    early = sum(len(W.shown_blocks(examples[0], recipe, 0, rng)) for _ in range(300)) / (300 * len(examples[0].z))
    late = sum(len(W.shown_blocks(examples[0], recipe, recipe.steps - 1, rng)) for _ in range(300)) / (300 * len(examples[0].z))
    assert abs(early - recipe.hint_p[0]) < 0.05 and abs(late - recipe.hint_p[1]) < 0.07


def test_changed_ranges_of_strings_and_token_lists():
    assert W.changed_ranges("SELECT a FROM t", "SELECT a FROM t") == []
    assert W.changed_ranges("WHERE a > 1", "WHERE a < 1") == [(8, 9)]
    assert W.changed_ranges("SELECT a FROM t", "SELECT a FRO t") == [(12, 12)]  # deletion: empty range
    assert W.changed_ranges("<think>x</think>", "x</think>") == [(0, 0)]
    assert W.changed_ranges("a b", "a xx b") == [(2, 5)]  # insertion
    assert W.changed_ranges([5, 6, 7, 8], [5, 9, 10, 7, 8]) == [(1, 3)]


def test_robust_labels_mask_replaced_and_the_token_standing_for_a_deleted_one():
    assert W.robust_labels([5, 6, 7, 1], [5, 6, 7, 1]) == [5, 6, 7, 1]
    assert W.robust_labels([5, 6, 7, 8, 1], [5, 9, 10, 7, 8, 1]) == [5, -100, -100, 7, 8, 1]
    assert W.robust_labels([3, 5, 6, 1], [5, 6, 1]) == [-100, 6, 1]  # first tag dropped: the first word is the error
    assert W.robust_labels([5, 6, 7, 1], [5, 6, 1]) == [5, 6, -100]  # last tag dropped: EOS is the error


def test_one_site_puts_each_corruption_in_one_place(sql_setup):
    task, _, examples, words, _ = sql_setup
    for i, ex in enumerate(examples):
        rng = random.Random(i)
        site = W.FirstSite(rng)
        assert "<answer>SELEC " in task.corrupt(ex.response, "syntax", site, words)
        tagged = task.corrupt(ex.response, "tag", site, words)
        assert tagged == ex.response.replace("<think>", "", 1)
        assert site.random() == random.Random(i).random()  # every other draw is the wrapped rng's


def test_robust_batch_masks_exactly_the_corrupted_tokens_of_shown_blocks(sql_setup):
    _, _, examples, _, tok = sql_setup
    eos = tok.eos_token_id

    # every block shown: no gated noise, every kind applied as a robust corruption at its one site
    (ids, labels, attention, weights), counts = batch(sql_setup, lambda ex: set(ex.z), robust_p=1.0, one_site=True)
    assert weights is None  # copy_weight 1: the model's own loss
    for b, ex in enumerate(examples):
        start = len(tok(W.render_prompt(tok, ex.prompt, ex.z), add_special_tokens=False).input_ids)
        n = int(attention[b].sum())
        resp, lab = ids[b, start:n].tolist(), labels[b, start:n].tolist()
        assert labels[b, :start].eq(-100).all()
        text = tok.decode(resp[:-1])
        assert not text.startswith("<think>") and "SELEC " in text and resp[-1] == eos
        clean = tok(ex.response, add_special_tokens=False).input_ids + [eos]
        masked = [j for j, x in enumerate(lab) if x == -100]
        expected = [j for j, x in enumerate(W.robust_labels(clean, resp)) if x == -100]
        assert masked == expected and 0 in masked  # the word standing where <think> was
        assert all(lab[j] == resp[j] for j in range(len(resp)) if j not in masked)  # normal labels elsewhere
        # the misspelt keyword's every token is masked, even those that keep clean characters ("SEL" of "SELEC")
        sel = text.index("SELEC ")
        spans = [(len(tok.decode(resp[:j])), len(tok.decode(resp[: j + 1]))) for j in range(len(resp))]
        assert all(j in masked for j, (a, e) in enumerate(spans) if a < sel + 5 and e > sel)
    assert counts["noise_applied"]["robust_syntax"] == counts["noise_applied"]["robust_tag"] == len(examples)

    # no block shown: the gated noise as before, loss on every response token
    (ids, labels, attention, _), _ = batch(sql_setup, lambda ex: set(), robust_p=1.0, one_site=True)
    for b, ex in enumerate(examples):
        start = len(tok(W.render_prompt(tok, ex.prompt, {}), add_special_tokens=False).input_ids)
        n = int(attention[b].sum())
        assert labels[b, start:n].tolist() == ids[b, start:n].tolist()
        assert "SELEC " in tok.decode(ids[b, start : n - 1].tolist())


def test_value_weights_weight_exactly_the_answer_values(sql_setup):
    _, _, examples, _, tok = sql_setup
    (ids, labels, attention, weights), _ = batch(sql_setup, lambda ex: set(ex.z), copy_weight=4.0)
    assert weights.shape == labels.shape and set(weights.unique().tolist()) == {1.0, 4.0}
    n_values = 0
    for b, ex in enumerate(examples):
        start = answer_start(ex.response)
        values = [m.group() for m in VALUE_RE.finditer(ex.response, start)]
        heavy = tok.decode(labels[b][weights[b] == 4.0].tolist())
        # every value of the answer is weighted, in order, and nothing else (values may share a token)
        assert heavy.replace(" ", "") == "".join(values).replace(" ", ""), (heavy, values)
        n_values += len(values)
        assert weights[b][labels[b] == -100].eq(1).all()
    assert n_values >= len(examples) // 2


def test_weighted_loss_with_unit_weights_is_the_mean_cross_entropy():
    logits, labels = torch.randn(2, 5, 7), torch.tensor([[-100, 1, 2, 3, -100], [-100, -100, 4, 5, 6]])
    ce = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 7), labels[:, 1:].reshape(-1), ignore_index=-100)
    assert torch.allclose(tiny.weighted_lm_loss(logits, labels, torch.ones(2, 5)), ce)
    w = torch.ones(2, 5)
    w[0, 2] = 3.0  # label 2 at position 2 is predicted by the logits at position 1
    per = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 7), labels[:, 1:].reshape(-1).clamp_min(0), reduction="none")
    mask = (labels[:, 1:] != -100).reshape(-1).float()
    wt = w[:, 1:].reshape(-1) * mask
    assert torch.allclose(tiny.weighted_lm_loss(logits, labels, w), (per * wt).sum() / wt.sum())
    assert wt.sum() == mask.sum() + 2


def test_think_drop_removes_its_matches_from_the_reasoning_only():
    """``Recipe.think_drop``: instruction following's rule count leaves the ``<think>``; the answer is untouched."""
    task = get_task("if")
    recipe = dataclasses.replace(recipes.default_recipe(task, "smoke"), n_train=8, random_value_frac=0.0)
    words = W.pseudo_words(50, 0)
    plain = W.make_examples(task, recipe, 0, words)
    dropped = W.make_examples(task, dataclasses.replace(recipe, think_drop=r" with \d+ rules?"), 0, words)
    assert all(" rules</think>" in e.response for e in plain)
    for a, b in zip(plain, dropped):
        think, answer = a.response.split("</think>")
        assert b.response == re.sub(r" with \d+ rules?", "", think) + "</think>" + answer != a.response
