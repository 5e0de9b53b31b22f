"""Instruction-following task: registry checkers, slots, regions, loader, synthetic data, robustness."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if (DATA / "nltk_data").is_dir():
    os.environ.setdefault("NLTK_DATA", str(DATA / "nltk_data"))

pytest.importorskip("if_verifiable")

from mrtpo.tasks import get_task  # noqa: E402
from mrtpo.tasks.instruct.checkers import (  # noqa: E402
    MAX_ANSWER_CHARS,
    check_constraint,
    describe,
    evaluate,
    kwargs_list,
    registry,
)
from mrtpo.tasks.instruct.data import load_jsonl  # noqa: E402

IDS = [
    "startend:end_checker",
    "detectable_format:title",
    "detectable_content:postscript",
    "detectable_format:number_bullet_lists",
    "punctuation:no_comma",
    "keywords:existence",
]
KWARGS = [
    {"end_phrase": "Any other questions?"},
    {},
    {"postscript_marker": "P.S."},
    {"num_bullets": 2},
    {},
    {"keywords": ["river", "stone"]},
]
GOOD = (
    "<think>plan, with a comma</think>\n"
    "<<the river>>\n"
    "A stone sits by the river.\n"
    "* first point\n"
    "* second point\n"
    "P.S. see you soon.\n"
    "Any other questions?"
)


@pytest.fixture(scope="module")
def task():
    return get_task("if", num_constraints=(2, 6), max_constraints=7)


def columns(n: int = 1, ids=IDS, kwargs=KWARGS) -> dict:
    return {
        "instruction_id_list": [ids] * n,
        "kwargs": [json.dumps(kwargs)] * n,
        "prompt_text": ["Write about a river."] * n,
    }


def scores(task, text: str, **cols) -> list:
    cols = cols or columns()
    prompts = [[{"role": "user", "content": "Write about a river."}]]
    return [f(prompts, [text], None, **cols)[0] for f in task.reward_funcs()]


# ------------------------------------------------------------------------------------------ rewards


def test_reward_names_and_signature(task):
    funcs = task.reward_funcs()
    assert [f.__name__ for f in funcs] == [f"constraint_{i}" for i in range(7)]
    assert task.reward_names == task.answer_rewards == tuple(f.__name__ for f in funcs)


def test_good_response_passes_every_slot_and_extra_slot_is_none(task):
    assert scores(task, GOOD) == [1.0] * 6 + [None]


def test_each_violation_fails_only_its_slot(task):
    broken = {
        0: GOOD + " Bye.",  # something after the end phrase
        1: GOOD.replace("<<the river>>", "The river"),
        2: GOOD.replace("P.S. see you soon.\n", ""),
        3: GOOD.replace("* second point\n", ""),
        4: GOOD.replace("A stone sits", "A stone, sits"),
        5: GOOD.replace("stone", "rock").replace("Stone", "Rock"),
    }
    for slot, text in broken.items():
        expected = [1.0] * 6 + [None]
        expected[slot] = 0.0
        assert scores(task, text) == expected, slot


def test_answer_after_think_is_judged(task):
    # everything satisfied only inside the reasoning: the answer part fails
    inside = "<think>" + GOOD.split("</think>")[1] + "</think>\nnothing here"
    assert scores(task, inside)[:6] == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    # an unclosed <think> leaves no answer at all
    assert scores(task, GOOD.replace("</think>", ""))[:6] == [0.0] * 6
    # no think block: the whole text is the answer
    assert scores(task, GOOD.split("</think>\n")[1])[:6] == [1.0] * 6


def test_missing_columns_and_chat_completions(task):
    assert scores(task, GOOD, unrelated=["x"]) == [None] * 7
    chat = [{"role": "assistant", "content": GOOD}]
    prompts = [[{"role": "user", "content": "Write about a river."}]]
    assert task.reward_funcs()[0](prompts, [chat], None, **columns()) == [1.0]


def test_overlong_answer_fails(task):
    long = GOOD.replace("A stone sits", "A stone sits " + "very " * (MAX_ANSWER_CHARS // 5))
    assert scores(task, long)[:6] == [0.0] * 6


def test_rewards_agree_with_field_evaluator(task):
    example = {"instruction_id_list": IDS, "kwargs": json.dumps(KWARGS), "prompt_text": "Write about a river."}
    for text in (GOOD, GOOD + " Bye.", GOOD.replace("*", "-"), "<think>x</think>", "plain text, with comma"):
        mine = scores(task, text)[:6]
        field = evaluate([(example, text)])
        assert field["inst_strict"] == pytest.approx(sum(mine) / 6)
        assert field["prompt_strict"] == float(all(mine))


def test_strict_score_reads_the_raw_answer_as_the_official_evaluators():
    """IFEval/IFBench's official strict rule: ``response.strip() and check_following(response)``, no stripping."""
    from if_verifiable.common import evaluate_instructions

    stairs = "first\n second\n  third"
    example = {"instruction_id_list": ["format:line_indent"], "kwargs": "[{}]", "prompt_text": "p"}
    official = registry()["format:line_indent"]("format:line_indent")
    official.build_description()
    for answer in (stairs, stairs + "\n\n"):
        raw = official.check_following(answer)
        assert check_constraint("<think>x</think>\n\n" + answer, "format:line_indent", {}) == raw
        assert check_constraint(answer, "format:line_indent", {}) == raw
        assert evaluate([(example, "<think>x</think>\n" + answer)])["prompt_strict"] == float(raw)
    assert official.check_following(stairs) and not official.check_following(stairs + "\n\n")
    # if_verifiable's wrapper strips the answer first, and so disagrees with the official verdict here
    results, _ = evaluate_instructions(stairs + "\n\n", ["format:line_indent"], [{}], "p", registry())
    assert results[0].strict_pass


def test_a_constraints_words_are_literal():
    """Keywords, forbidden words, frequency keywords: ``re``'s special characters mean themselves (the registry's
    checkers compile these words unescaped: ``a(b`` raised re.error, ``e.g.`` matched ``eXgY``); the postscript
    markers the checker knows by name keep their own patterns, and the Z block shows the words as written."""
    think = "<think>x</think>"
    assert check_constraint(think + "see a(b here", "keywords:existence", {"keywords": ["a(b"]})
    assert not check_constraint(think + "see eXgY here", "keywords:existence", {"keywords": ["e.g."]})
    assert check_constraint(think + "c++, then c++", "keywords:frequency", {"keyword": " c++ ", "frequency": 2, "relation": "at least"})
    assert check_constraint(think + "I wrote aXb", "keywords:forbidden_words", {"forbidden_words": ["a.b"]})
    assert not check_constraint(think + "I wrote a.b", "keywords:forbidden_words", {"forbidden_words": ["a.b"]})
    assert check_constraint(think + "hi\nP. S. bye", "detectable_content:postscript", {"postscript_marker": "P.S."})
    assert check_constraint(think + "hi\nNB(1) bye", "detectable_content:postscript", {"postscript_marker": "NB(1)"})
    assert "a(b" in describe("keywords:existence", {"keywords": ["a(b"]})


def test_evaluate_pools_instructions():
    one = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": "[{}]", "prompt_text": "p"}
    three = {"instruction_id_list": IDS[:3], "kwargs": json.dumps(KWARGS[:3]), "prompt_text": "p"}
    result = evaluate([(one, "no commas here"), (three, "no, title")])
    # 1 of 4 instructions (pooled, not averaged per prompt); 1 of 2 prompts
    assert result["inst_strict"] == pytest.approx(0.25)
    assert result["prompt_strict"] == pytest.approx(0.5)
    assert result["n"] == 2


# ---------------------------------------------------------------------------------- z blocks, regions


def test_z_blocks_are_registry_descriptions(task):
    blocks = task.z_blocks([[]], [GOOD], **columns())
    assert list(blocks[0]) == [f"constraint_{i}" for i in range(6)]
    assert blocks[0]["constraint_0"] == describe(IDS[0], KWARGS[0])
    assert "Any other questions?" in blocks[0]["constraint_0"]
    assert "<<" in blocks[0]["constraint_1"]
    assert task.z_blocks([[]], [GOOD], other=[1]) == [{}]


def test_check_regions_exact(task):
    example = {"instruction_id_list": IDS, "kwargs": json.dumps(KWARGS)}
    regions = task.check_regions(GOOD, example)

    def at(sub: str, occurrence: int = 0) -> tuple[int, int]:
        start = -1
        for _ in range(occurrence + 1):
            start = GOOD.index(sub, start + 1)
        return (start, start + len(sub))

    assert regions["think"] == [at("plan, with a comma")]
    assert regions["constraint_0"] == [at("Any other questions?")]
    assert regions["constraint_1"] == [at("<<the river>>")]
    assert regions["constraint_2"] == [(at("P.S.")[0], len(GOOD))]
    assert regions["constraint_3"] == [at("* first point"), at("* second point")]
    answer_start = GOOD.index("<<")
    assert regions["constraint_4"] == [(answer_start, len(GOOD))]  # a count: the whole answer
    assert regions["constraint_5"] == sorted([at("river"), at("river", 1), at("stone")])


def test_check_regions_more_kinds(task):
    text = '<think>t</think> "Now *one* and *two* words."'
    ids = ["startend:quotation", "length_constraints:nth_paragraph_first_word",
           "detectable_format:number_highlighted_sections", "length_constraints:number_words"]
    kws = [{}, {"num_paragraphs": 1, "nth_paragraph": 1, "first_word": "now"}, {"num_highlights": 2},
           {"num_words": 10, "relation": "less than"}]
    regions = task.check_regions(text, {"instruction_id_list": ids, "kwargs": kws})
    q = text.index('"')
    assert regions["constraint_0"] == [(q, q + 1), (len(text) - 1, len(text))]
    assert regions["constraint_1"] == [(q, q + len('"Now'))]
    assert regions["constraint_2"] == [(text.index("*one*"), text.index("*one*") + 5), (text.index("*two*"), text.index("*two*") + 5)]
    assert regions["constraint_3"] == [(q, len(text))]
    # absent elements give empty regions; so does an empty answer
    assert task.check_regions("<think>x</think>no title", {"instruction_id_list": IDS[1:2], "kwargs": "[{}]"})["constraint_0"] == []
    assert task.check_regions("<think>x", {"instruction_id_list": IDS[:1], "kwargs": json.dumps(KWARGS[:1])}) == {"think": [], "constraint_0": []}


# --------------------------------------------------------------------------------------------- data


@pytest.mark.parametrize("name", ["ifeval/input_data.jsonl", "ifbench/IFBench_test.jsonl"])
def test_real_files_load_and_every_constraint_checks(name, task):
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    data = load_jsonl(path)
    assert len(data) == {"ifeval/input_data.jsonl": 541, "ifbench/IFBench_test.jsonl": 300}[name]
    assert data[0]["prompt"][0]["role"] == "user"
    response = "<think>x</think>Hello world. This is a short answer.\n* one\n* two\nP.S. bye"
    for row in data:
        for iid, kw in zip(row["instruction_id_list"], kwargs_list(row["kwargs"])):
            # called directly (not through safe_reward) so that any checker error fails the test
            assert check_constraint(response, iid, kw, row["prompt_text"]) in (True, False)
            assert describe(iid, kw)
    wide = get_task("if", max_constraints=2, num_constraints=(1, 2))
    if name.startswith("ifeval"):
        with pytest.raises(ValueError, match="max_constraints >= 3"):
            wide.load(path)
    else:
        assert len(wide.load(path)) == 300


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "invalid JSON"),
        ('["a list"]', "not a JSON object"),
        ('{"prompt": "p", "instruction_id_list": ["punctuation:no_comma"]}', "'kwargs'"),
        ('{"prompt": "p", "instruction_id_list": ["no:such_id"], "kwargs": [{}]}', "unknown instruction id"),
        ('{"prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}', "one per instruction"),
        ('{"prompt": "p", "instruction_id_list": ["startend:end_checker"], "kwargs": [{"bogus": 1}]}', "rejects its kwargs"),
    ],
)
def test_loader_names_file_and_line(tmp_path, line, message):
    good = '{"prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}'
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n\n" + line + "\n")
    with pytest.raises(ValueError, match=f"bad.jsonl:3: .*{message}"):
        load_jsonl(path)


def nltk_has(resource: str) -> bool:
    import nltk

    try:
        nltk.data.find(resource)
        return True
    except LookupError:
        return False


@pytest.mark.parametrize("num_constraints", [(2, 4), (5, 13)])
def test_synthetic_references_satisfy_every_constraint(num_constraints):
    if num_constraints == (5, 13) and not nltk_has("tokenizers/punkt_tab/english/"):
        pytest.skip("the full constraint pool counts sentences with nltk punkt_tab (../shared/data/nltk_data)")
    task = get_task("if", num_constraints=num_constraints)
    data = task.synthetic(60, seed=3, split="train")
    assert data.to_list() == task.synthetic(60, seed=3, split="train").to_list()
    assert data[0]["key"] != task.synthetic(1, seed=3, split="test")[0]["key"]
    sizes = [len(ids) for ids in data["instruction_id_list"]]
    assert min(sizes) >= num_constraints[0] and max(sizes) <= num_constraints[1]
    assert evaluate([(ex, task.reference_response(ex)) for ex in data])["prompt_strict"] == 1.0
    for ex in data:
        ref = task.reference_response(ex)
        assert ref.startswith("<think>") and "</think>" in ref
        blocks = task.z_blocks([ex["prompt"]], [ref], **{k: [v] for k, v in ex.items()})[0]
        assert all(z in ex["prompt_text"] for z in blocks.values())  # Z blocks repeat the prompt's text
    if num_constraints == (2, 4):
        assert max(len(task.reference_response(ex).split()) for ex in data) < 80  # ~100 tokens


def test_reference_missing_for_real_rows(task):
    with pytest.raises(ValueError):
        task.reference_response({"prompt_text": "p"})


# --------------------------------------------------------------------------------------- robustness

SLOW_CALL_S = 5.0
TRICKY = [
    "",
    "<think>",
    "</think>",
    "<think><think></think></think>" * 50,
    "<think>" + "\n" * 15_000 + "</think>" + "\n" * 15_000,
    "</think>" + " \n\t" * 5000,
    "*" * 16_000,
    "[" * 10_000 + "]" * 10_000,
    "P.S. " * 3000,
    "\x00\ud7ff\U0010ffff" * 1000,
    "x" * 2_000_000,
]
ALL_IDS = [
    (["detectable_format:number_bullet_lists", "detectable_content:postscript", "keywords:existence"],
     [{"num_bullets": 3}, {"postscript_marker": "P.P.S"}, {"keywords": ["a(b", "c"]}]),
    (["detectable_format:json_format", "change_case:english_lowercase", "startend:end_checker"], [{}, {}, {"end_phrase": "bye"}]),
]


def _run_everything(task, text: str) -> None:
    """Every reward and the check regions on ``text``: bounded time, valid values, and no checker raised (a
    raising checker scores 0 without crashing, so the value alone would not show it: its count is logged)."""
    logged = {}
    for ids, kws in ALL_IDS:
        cols = columns(ids=ids, kwargs=kws)
        for f in task.reward_funcs():
            start = time.perf_counter()
            value = f([[]], [text], None, log_metric=logged.__setitem__, **cols)[0]
            assert time.perf_counter() - start < SLOW_CALL_S, f.__name__
            assert value in (0.0, 1.0, None)
            assert logged[f"{f.__name__}/checker_errors"] == 0.0, (f.__name__, ids)
        start = time.perf_counter()
        regions = task.check_regions(text, {"instruction_id_list": ids, "kwargs": kws})
        assert time.perf_counter() - start < SLOW_CALL_S
        assert all(0 <= a <= b <= len(text) for spans in regions.values() for a, b in spans)


@pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
def test_tricky_inputs_never_raise(task, text):
    _run_everything(task, text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300) | st.lists(st.sampled_from(["<think>", "</think>", "\n", "*", "<<", ">>", "P.S.", '"', "a b", ","]), max_size=40).map("".join))
def test_fuzzed_garbage_never_raises(task, text):
    _run_everything(task, text)


def test_the_checkers_find_nltk_resources_in_the_data_folder_without_nltk_data(shared_data):
    """A script run by hand has no NLTK_DATA (the Makefile sets it): IFEval's word count still finds punkt_tab."""
    import os
    import subprocess
    import sys

    code = ("from mrtpo.tasks.instruct.checkers import check_constraint as c; "
            "print(c('one two three four. five six.', 'length_constraints:number_words', "
            "{'relation': 'at least', 'num_words': 3}, 'p'))")
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    for environment in (env, {**env, "NLTK_DATA": str(shared_data / "nltk_data")}):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=300)
        assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
        assert "[nltk_data]" not in done.stderr  # the offline download attempts of IFBench's import stay quiet
