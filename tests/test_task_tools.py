"""Tool-calling task: format/correctness rewards, BFCL conformance, loaders, regions, robustness."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

pytest.importorskip("bfcl_eval", reason="pip install --no-deps bfcl-eval")

from mrtpo.tasks import get_task  # noqa: E402
from mrtpo.tasks.tools.calls import TEMPLATE, format_ok, parse_calls  # noqa: E402
from mrtpo.tasks.tools.checker import check_calls, reference_calls  # noqa: E402
from mrtpo.tasks.tools.data import LIVE, NON_LIVE, load_bfcl  # noqa: E402
from mrtpo.tasks.tools.rlla import load_rlla  # noqa: E402

FUNCTIONS = [
    {"name": "get_weather", "description": "weather", "parameters": {"type": "dict", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "set_alarm", "description": "alarm", "parameters": {"type": "dict", "properties": {
        "hour": {"type": "integer"}}, "required": ["hour"]}},
]
GROUND_TRUTH = [{"get_weather": {"city": ["Paris", "paris, france"], "unit": ["", "celsius"], "days": [3]}}]
COLUMNS = {"functions": [json.dumps(FUNCTIONS)], "ground_truth": [json.dumps(GROUND_TRUTH)], "category": ["multiple"]}
GOOD = '<think>weather please</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'


@pytest.fixture(scope="module")
def task():
    return get_task("tool")


def rewards(task, text, **cols) -> tuple:
    fmt, cor = task.reward_funcs()
    cols = cols or COLUMNS
    return fmt([[]], [text], None, **cols)[0], cor([[]], [text], None, **cols)[0]


# ------------------------------------------------------------------------------------------ rewards


def test_names_and_attributes(task):
    assert [f.__name__ for f in task.reward_funcs()] == ["format", "correctness"]
    assert task.reward_names == ("format", "correctness") and task.answer_rewards == ("correctness",)


@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD, (1.0, 1.0)),
        (GOOD.replace('"Paris"', '"PARIS"'), (1.0, 1.0)),  # BFCL compares strings case-insensitively
        (GOOD.replace('"days": 3', '"days": 3, "unit": "celsius"'), (1.0, 1.0)),
        (GOOD.replace('"arguments"', '"parameters"'), (1.0, 1.0)),  # ToolRL's key
        (GOOD.replace("{", "[{", 1).replace("}}\n", "}}]\n"), (1.0, 1.0)),  # a list of one call
        (GOOD.replace("get_weather", "set_alarm"), (1.0, 0.0)),
        (GOOD.replace('"days": 3', '"days": 4'), (1.0, 0.0)),
        (GOOD.replace('"days": 3', '"days": "3"'), (1.0, 0.0)),  # wrong type
        (GOOD.replace('"city": "Paris", ', ""), (1.0, 0.0)),  # missing required
        (GOOD.replace('"days": 3', '"days": 3, "extra": 1'), (1.0, 0.0)),
        (GOOD.replace("}}\n", "}\n"), (1.0, 0.0)),  # broken JSON
        (GOOD.replace("<think>", ""), (0.0, 1.0)),  # correctness reads only the call
        (GOOD + " trailing words", (0.0, 1.0)),
        (GOOD.replace("</tool_call>", ""), (0.0, 0.0)),
        ("<think>a</think><think>b</think>" + GOOD.split("</think>")[1], (0.0, 1.0)),
        ("", (0.0, 0.0)),
    ],
)
def test_rewards_on_hand_made_responses(task, text, expected):
    assert rewards(task, text) == expected


def test_parallel_calls_are_order_free(task):
    gt = [{"set_alarm": {"hour": [7]}}, {"set_alarm": {"hour": [8]}}]
    cols = {"functions": [json.dumps(FUNCTIONS)], "ground_truth": [json.dumps(gt)], "category": ["parallel"]}
    two = '<think>x</think><tool_call>[{"name": "set_alarm", "arguments": {"hour": 8}}, {"name": "set_alarm", "arguments": {"hour": 7}}]</tool_call>'
    lines = '<think>x</think><tool_call>\n{"name": "set_alarm", "parameters": {"hour": 7}}\n{"name": "set_alarm", "parameters": {"hour": 8}}\n</tool_call>'
    one = '<think>x</think><tool_call>{"name": "set_alarm", "arguments": {"hour": 8}}</tool_call>'
    assert rewards(task, two, **cols) == (1.0, 1.0)
    assert rewards(task, lines, **cols) == (1.0, 1.0)
    assert rewards(task, one, **cols) == (1.0, 0.0)


def _blocks(*calls) -> str:
    return "\n".join(f'<tool_call>\n{{"name": "set_alarm", "arguments": {{"hour": {h}}}}}\n</tool_call>' for h in calls)


def test_one_block_per_call_is_read_in_full(task):
    """Qwen's layout: one <tool_call> block per call; both rewards read every block."""
    gt = [{"set_alarm": {"hour": [h]}} for h in (6, 7, 8)]
    cols = {"functions": [json.dumps(FUNCTIONS)], "ground_truth": [json.dumps(gt)], "category": ["parallel"]}
    assert rewards(task, "<think>x</think>\n" + _blocks(8, 6, 7), **cols) == (1.0, 1.0)
    assert rewards(task, "<think>x</think>\n" + _blocks(8, 6), **cols) == (1.0, 0.0)  # a call missing
    assert rewards(task, "<think>x</think>\n" + _blocks(8, 6, 7, 9), **cols) == (1.0, 0.0)  # a wrong extra block
    assert rewards(task, "<think>x</think>\n" + _blocks(8, 6) + " and " + _blocks(7), **cols) == (0.0, 1.0)
    unclosed = "<think>x</think>\n" + _blocks(8, 6) + '<tool_call>{"name": "set_alarm", "arguments": {"hour": 7}}'
    assert rewards(task, unclosed, **cols) == (0.0, 0.0)
    # one expected call: a second, wrong block is no longer unnoticed by correctness
    single = {"functions": [json.dumps(FUNCTIONS)], "ground_truth": [json.dumps(gt[:1])], "category": ["multiple"]}
    assert rewards(task, "<think>x</think>" + _blocks(6), **single) == (1.0, 1.0)
    assert rewards(task, "<think>x</think>" + _blocks(6, 9), **single) == (1.0, 0.0)
    assert parse_calls("<think>x</think>" + _blocks(6, 9)) == [{"set_alarm": {"hour": 6}}, {"set_alarm": {"hour": 9}}]
    text = "<think>x</think>\n" + _blocks(8, 6)
    regions = task.check_regions(text, {})["correctness"]
    assert [text[a:b] for a, b in regions] == ['{"name": "set_alarm", "arguments": {"hour": %d}}' % h for h in (8, 6)]


def test_reference_response_writes_one_block_per_call(task):
    gt = [{"set_alarm": {"hour": [7]}}, {"set_alarm": {"hour": [8]}}]
    ex = {"functions": json.dumps(FUNCTIONS), "ground_truth": json.dumps(gt), "category": "parallel"}
    ref = task.reference_response(ex)
    assert ref.count("<tool_call>") == 2 and format_ok(ref)
    assert rewards(task, ref, **{k: [v] for k, v in ex.items()}) == (1.0, 1.0)


def test_missing_columns_and_chat_completions(task):
    assert rewards(task, GOOD, other=[1]) == (1.0, None)
    fmt, cor = task.reward_funcs()
    assert cor([[]], [[{"role": "assistant", "content": GOOD}]], None, **COLUMNS) == [1.0]


def test_tool_call_mentioned_in_reasoning_is_not_the_call():
    text = '<think>I will write <tool_call> next</think><tool_call>{"name": "set_alarm", "arguments": {"hour": 7}}</tool_call>'
    assert parse_calls(text) == [{"set_alarm": {"hour": 7}}]
    assert not format_ok(text)  # the extra tag in the reasoning still breaks the format



@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"name": "set_alarm", "arguments": "' + "[" * 5000 + "]" * 5000 + '"}'])
def test_json_nested_too_deeply_is_a_parse_failure(content):
    """The JSON decoder raises RecursionError past Python's recursion limit; the parser reads that as malformed."""
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_calls("<think>x</think><tool_call>" + content + "</tool_call>")


# ---------------------------------------------------------------------------------- z blocks, regions


def test_z_blocks(task):
    (block,) = task.z_blocks([[]], [GOOD], **COLUMNS)
    assert block["format"] == TEMPLATE
    assert json.loads(block["correctness"]) == {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
    assert task.z_blocks([[]], [GOOD], other=[1]) == [{"format": TEMPLATE}]


def test_check_regions_exact(task):
    regions = task.check_regions(GOOD, {})
    spans = [(GOOD.index(tag), GOOD.index(tag) + len(tag)) for tag in ("<think>", "</think>", "<tool_call>", "</tool_call>")]
    assert regions["format"] == spans
    call = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    assert regions["correctness"] == [(GOOD.index(call), GOOD.index(call) + len(call))]
    assert regions["think"] == [(len("<think>"), GOOD.index("</think>"))]
    assert task.check_regions("no tags at all", {}) == {"format": [], "correctness": [], "think": []}


# --------------------------------------------------------------------------------- BFCL conformance

#: BFCL gold entries no output can satisfy (a required argument whose only options are empty, or an
#: answer for an argument the function does not declare); the official checker rejects them all
UNSATISFIABLE = {"live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_507-149-4",
                 "live_multiple_862-181-3", "live_multiple_964-207-0"}


@pytest.fixture(scope="module")
def bfcl():
    return load_bfcl()


def test_official_checker_is_used_and_stub_removed():
    from mrtpo.tasks.tools.checker import _ast_checker

    checker, _ = _ast_checker()
    assert checker.__module__ == "bfcl_eval.eval_checker.ast_eval.ast_checker"
    assert "bfcl_eval.constants.model_config" not in sys.modules


def test_bfcl_categories_load(bfcl):
    counts = {c: bfcl["category"].count(c) for c in NON_LIVE + LIVE}
    assert counts["simple_python"] == 400 and counts["multiple"] == 200 and counts["live_simple"] == 258
    assert all(n > 0 for n in counts.values())
    assert bfcl[0]["prompt"][0]["role"] == "system" and bfcl[0]["prompt"][-1]["role"] == "user"
    with pytest.raises(ValueError, match="unsupported BFCL category"):
        load_bfcl(("simple_java",))


def test_every_bfcl_gold_answer_is_accepted(task, bfcl):
    rejected = set()
    for ex in bfcl:
        fmt, cor = rewards(task, task.reference_response(ex), **{k: [ex[k]] for k in COLUMNS})
        assert fmt == 1.0
        if cor != 1.0:
            rejected.add(ex["id"])
    assert rejected == UNSATISFIABLE


def _perturbations(call: dict, functions: list[dict]):
    """Wrong name, wrong value, wrong type, missing required argument: each must be rejected."""
    name, args = call["name"], call["arguments"]
    yield "name", {"name": name + "_x", "arguments": args}
    required = next(f for f in functions if f["name"] == name)["parameters"].get("required", [])
    for p, v in args.items():
        if isinstance(v, bool):
            yield "value", {"name": name, "arguments": {**args, p: not v}}
        elif isinstance(v, (int, float)):
            yield "value", {"name": name, "arguments": {**args, p: v + 7}}
            yield "type", {"name": name, "arguments": {**args, p: [v]}}
        elif isinstance(v, str):
            yield "value", {"name": name, "arguments": {**args, p: v + " qqq"}}
            yield "type", {"name": name, "arguments": {**args, p: 12345}}
        if p in required:
            yield "missing", {"name": name, "arguments": {k: x for k, x in args.items() if k != p}}
        break  # one argument per call keeps the test fast


def test_perturbed_bfcl_answers_are_rejected(bfcl):
    checked = 0
    for ex in bfcl.select(range(0, len(bfcl), 7)):
        if ex["id"] in UNSATISFIABLE:
            continue
        functions, gt = json.loads(ex["functions"]), json.loads(ex["ground_truth"])
        gold = reference_calls(gt, functions)
        for i, call in enumerate(gold):
            for kind, bad in _perturbations(call, functions):
                calls = copy.deepcopy(gold)
                calls[i] = bad
                model = [{c["name"]: c["arguments"]} for c in calls]
                verdict = check_calls(model, functions, gt, ex["category"])
                assert not verdict["valid"], (ex["id"], kind, bad)
                checked += 1
    assert checked > 500


# --------------------------------------------------------------------------------------------- RLLA


@pytest.mark.parametrize("name, total, kept", [("rlla/rlla_sft.json", 400, 345), ("rlla/test.parquet", 80, 70)])
def test_rlla_loads_and_gold_is_accepted(task, name, total, kept):
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    data = load_rlla(path)
    assert len(data) == kept  # the rest answer without a tool call, or have a broken gold call
    assert set(data["category"]) == {"multiple", "parallel_multiple"}
    for ex in data:
        assert rewards(task, task.reference_response(ex), **{k: [ex[k]] for k in COLUMNS}) == (1.0, 1.0), ex["id"]


def test_rlla_values_are_typed_by_gold(task, tmp_path):
    instruction = (
        "**Available Tools**\n1. Name: GetNews\nDescription: news\nParameters: "
        '{"page": {"description": "p", "type": "int", "default": ""}, "lang": {"type": "str", "default": "en"}}\n'
    )
    output = '<think>x</think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": "1"}}\n</tool_call>'
    path = tmp_path / "r.json"
    path.write_text(json.dumps([{"instruction": instruction, "input": "<user> news </user>", "output": output}]))
    ex = load_rlla(path)[0]
    cols = {k: [ex[k]] for k in COLUMNS}
    call = '<think>x</think><tool_call>{"name": "GetNews", "arguments": {%s}}</tool_call>'
    assert rewards(task, call % '"page": "1"', **cols) == (1.0, 1.0)
    assert rewards(task, call % '"page": "1", "lang": "en"', **cols) == (1.0, 1.0)  # the default may be spelled out
    assert rewards(task, call % '"page": 1', **cols) == (1.0, 0.0)
    path.write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match="not ToolRL data"):
        load_rlla(path)


# --------------------------------------------------------------------------------------- synthetic


@pytest.mark.parametrize("hide_value", [False, True])
def test_synthetic(hide_value):
    task = get_task("tool", hide_value=hide_value)
    data = task.synthetic(40, seed=1)
    assert data.to_list() == task.synthetic(40, seed=1).to_list()
    hidden_somewhere = False
    for ex in data:
        ref = task.reference_response(ex)
        assert rewards(task, ref, **{k: [ex[k]] for k in COLUMNS}) == (1.0, 1.0)
        call = json.loads(task.z_blocks([ex["prompt"]], [ref], **{k: [ex[k]] for k in COLUMNS})[0]["correctness"])
        query = ex["prompt"][-1]["content"]
        missing = [v for v in call["arguments"].values() if str(v) not in query]
        assert len(ex["prompt"][0]["content"]) < 600 and len(ref) < 250
        if hide_value:
            assert len(missing) == 1  # the one value only the Z block carries
            hidden_somewhere = True
        else:
            assert not missing
    assert hidden_somewhere == hide_value


# --------------------------------------------------------------------------------------- robustness

SLOW_CALL_S = 5.0
TRICKY = [
    "",
    "<tool_call>",
    "<tool_call></tool_call>",
    "<think></think><tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>",
    "<think></think><tool_call>" + '{"a":' * 50_000 + "1" + "}" * 50_000 + "</tool_call>",
    "<think></think><tool_call>" + '{"name": "get_weather", "arguments": {"city": ' + "[" * 5000 + "]" * 5000 + "}}</tool_call>",
    "<think></think><tool_call>" + '{"name": "get_weather", "arguments": "not json"}' + "</tool_call>",
    "<think></think><tool_call>" + '[{"name": 1}, 2, null]' + "</tool_call>",
    "<think>" * 20_000 + "<tool_call>" * 20_000 + "</tool_call>" * 20_000,
    "<think></think><tool_call>" + "\n".join(['{"name": "set_alarm", "arguments": {"hour": 7}}'] * 20_000) + "</tool_call>",
    "x" * 3_000_000,
    "\ud800\x00\U0010ffff" * 1000,
]


def _run_everything(task, text):
    """Every reward and the check regions on ``text``: bounded time, valid values, and no checker raised (a
    raising checker scores 0 without crashing, so the value alone would not show it: its count is logged)."""
    logged = {}
    for f in task.reward_funcs():
        start = time.perf_counter()
        value = f([[]], [text], None, log_metric=logged.__setitem__, **COLUMNS)[0]
        assert time.perf_counter() - start < SLOW_CALL_S, f.__name__
        assert value in (0.0, 1.0)
        assert logged[f"{f.__name__}/checker_errors"] == 0.0, f.__name__
    start = time.perf_counter()
    regions = task.check_regions(text, {})
    assert time.perf_counter() - start < SLOW_CALL_S
    assert all(0 <= a <= b <= len(text) for spans in regions.values() for a, b in spans)


@pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
def test_tricky_inputs_never_raise(task, text):
    _run_everything(task, text)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(max_size=300)
    | st.lists(st.sampled_from(["<think>", "</think>", "<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name"', ":", ",",
                                '"get_weather"', '"arguments"', '"city"', '"Paris"', "3", "null", "\n"]), max_size=60).map("".join)
    | st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                   lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3))
    .map(lambda obj: "<think>x</think><tool_call>" + json.dumps(obj) + "</tool_call>")
)
def test_fuzzed_garbage_never_raises(task, text):
    _run_everything(task, text)
