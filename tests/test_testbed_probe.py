"""The testbed probe's warm-up options (benchmarks/testbed/probe.py): robust continuations and one site per reward."""

import dataclasses
import importlib.util
import random
from pathlib import Path

import pytest

from mrtpo import tiny
from mrtpo.tasks import get_task
from mrtpo.tasks.base import Noise
from mrtpo.tokenizer import build_tokenizer

PROBE = Path(__file__).resolve().parents[1] / "benchmarks" / "testbed" / "probe.py"


@pytest.fixture(scope="module")
def probe():
    spec = importlib.util.spec_from_file_location("testbed_probe", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sql_setup():
    """(task, recipe with every gated noise at p = 1, examples, words, tokenizer) at smoke size."""
    task = get_task("sql")
    noise = tuple(Noise(n.kind, 1.0, n.gate) for n in task.warmup_noise)
    recipe = dataclasses.replace(tiny.default_recipe(task, "smoke"), n_train=12, think_values=False, noise=noise)
    words = tiny.pseudo_words(400, 0)
    examples = tiny.make_examples(task, recipe, 0, words)
    tok = build_tokenizer([tiny.render_prompt_plain(e) for e in examples] + [" ".join(words)] * 3, vocab_size=4096)
    return task, recipe, examples, words, tok


def test_changed_ranges_of_strings_and_token_lists(probe):
    assert probe.changed_ranges("SELECT a FROM t", "SELECT a FROM t") == []
    assert probe.changed_ranges("WHERE a > 1", "WHERE a < 1") == [(8, 9)]
    assert probe.changed_ranges("SELECT a FROM t", "SELECT a FRO t") == [(12, 12)]  # deletion: empty range
    assert probe.changed_ranges("<think>x</think>", "x</think>") == [(0, 0)]
    assert probe.changed_ranges("a b", "a xx b") == [(2, 5)]  # insertion
    assert probe.changed_ranges([5, 6, 7, 8], [5, 9, 10, 7, 8]) == [(1, 3)]


def test_robust_labels_mask_replaced_and_the_token_standing_for_a_deleted_one(probe):
    assert probe.robust_labels([5, 6, 7, 1], [5, 6, 7, 1]) == [5, 6, 7, 1]
    assert probe.robust_labels([5, 6, 7, 8, 1], [5, 9, 10, 7, 8, 1]) == [5, -100, -100, 7, 8, 1]
    assert probe.robust_labels([3, 5, 6, 1], [5, 6, 1]) == [-100, 6, 1]  # first tag dropped: the first word is the error
    assert probe.robust_labels([5, 6, 7, 1], [5, 6, 1]) == [5, 6, -100]  # last tag dropped: EOS is the error


def test_one_site_puts_each_corruption_in_one_place(probe, sql_setup):
    task, _, examples, words, _ = sql_setup
    for i, ex in enumerate(examples):
        rng = random.Random(i)
        site = probe.FirstSite(rng)
        assert "<answer>SELEC " in task.corrupt(ex.response, "syntax", site, words)
        tagged = task.corrupt(ex.response, "tag", site, words)
        assert tagged == ex.response.replace("<think>", "", 1)
        assert site.random() == random.Random(i).random()  # every other draw is the wrapped rng's


def test_robust_batch_masks_exactly_the_corrupted_tokens_of_shown_blocks(probe, sql_setup):
    task, recipe, examples, words, tok = sql_setup
    eos = tok.eos_token_id
    counts = {"blocks_shown": 0, "blocks_total": 0, "noise_applied": {n.kind: 0 for n in recipe.noise}}

    # every block shown: no gated noise, every kind applied as a robust corruption at its one site
    ids, labels, attention = probe._loo_batch_impl(task, examples, recipe, random.Random(0), words, tok, counts,
                                                   lambda ex: set(ex.z), robust_p=1.0, one_site=True)
    for b, ex in enumerate(examples):
        start = len(tok(tiny.render_prompt(tok, ex.prompt, ex.z), add_special_tokens=False).input_ids)
        n = int(attention[b].sum())
        resp, lab = ids[b, start:n].tolist(), labels[b, start:n].tolist()
        assert labels[b, :start].eq(-100).all()
        text = tok.decode(resp[:-1])
        assert not text.startswith("<think>") and "SELEC " in text and resp[-1] == eos
        clean = tok(ex.response, add_special_tokens=False).input_ids + [eos]
        masked = [j for j, x in enumerate(lab) if x == -100]
        expected = [j for j, x in enumerate(probe.robust_labels(clean, resp)) if x == -100]
        assert masked == expected and 0 in masked  # the word standing where <think> was
        assert all(lab[j] == resp[j] for j in range(len(resp)) if j not in masked)  # normal labels elsewhere
        # the misspelt keyword's every token is masked, even those that keep clean characters ("SEL" of "SELEC")
        sel = text.index("SELEC ")
        spans = [(len(tok.decode(resp[:j])), len(tok.decode(resp[: j + 1]))) for j in range(len(resp))]
        assert all(j in masked for j, (a, e) in enumerate(spans) if a < sel + 5 and e > sel)
    assert counts["noise_applied"]["robust_syntax"] == counts["noise_applied"]["robust_tag"] == len(examples)

    # no block shown: the gated noise as before, loss on every response token
    ids, labels, attention = probe._loo_batch_impl(task, examples, recipe, random.Random(0), words, tok, counts,
                                                   lambda ex: set(), robust_p=1.0, one_site=True)
    for b, ex in enumerate(examples):
        start = len(tok(tiny.render_prompt(tok, ex.prompt, {}), add_special_tokens=False).input_ids)
        n = int(attention[b].sum())
        assert labels[b, start:n].tolist() == ids[b, start:n].tolist()
        assert "SELEC " in tok.decode(ids[b, start : n - 1].tolist())
