"""Tool calling: a format reward and a correctness reward judged by BFCL's official AST checker.

Layout of a response: ``<think>…</think><tool_call>JSON</tool_call>``, JSON being one call
``{"name": ..., "arguments": {...}}`` or a list of calls (parallel calls). Several calls may also come as
one ``<tool_call>`` block per call — the layout Qwen models are trained on (Qwen2.5/Qwen3 chat templates) —
and every block is read. One JSON object per line inside a block (ToolRL's layout) and ``"parameters"`` for
``"arguments"`` (ToolRL's key) are accepted too.

Rewards, both binary:

* ``format``: the tags alone. Exactly one ``<think>…</think>`` first, then one or more
  ``<tool_call>…</tool_call>`` blocks, nothing else around or between them but whitespace (tags are counted in
  the whole response, so a tag mentioned inside the reasoning breaks the format). It does not parse the JSON:
  that is what ``correctness`` reads, so each reward keeps its own tokens.
* ``correctness``: 1.0 when ``bfcl_eval``'s ``ast_checker`` accepts the calls of all ``<tool_call>`` blocks
  after ``</think>`` taken together (function name, required arguments, type-aware value match against the list
  of possible answers, order-free for parallel calls; a wrong or extra call in any block fails), else 0.0. The checker is the official one,
  imported with one stub module (see ``_ast_checker``).

Every example, whatever its source, carries BFCL's own shapes: ``functions`` (JSON list of function
descriptions) and ``ground_truth`` (JSON list of ``{name: {param: [possible values]}}``), plus the
BFCL ``category`` that picks the checker (simple / multiple / parallel). Only Python categories are
loaded: BFCL's Java and JavaScript categories expect values written as source-code strings.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import random
import re
import sys
import types
from pathlib import Path
from typing import Any

from .base import UNSTATED, Benchmark, DataFile, Noise, Spans, Task, completion_text, reward_function, reward_means, strip_span, think_span

logger = logging.getLogger(__name__)

#: BFCL v4 single-turn AST categories (Python), as named in ``bfcl_eval/data/BFCL_v4_<name>.json``
NON_LIVE = ("simple_python", "multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")

TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
#: the output template: the format reward's Z block
TEMPLATE = '<think> reasoning </think>\n<tool_call>\n{"name": "<function name>", "arguments": {"<parameter>": <value>}}\n</tool_call>'


@functools.lru_cache(maxsize=None)
def _ast_checker():
    """BFCL's official ``ast_checker`` and its ``Language`` enum.

    ``ast_checker`` imports ``bfcl_eval.constants.model_config`` only to look up, for function names
    with dots, whether a model's API rewrote them to underscores; that module imports every API
    client. It is stubbed for the import with a mapping that answers "no rewrite" for any model (our
    policies write names verbatim), and the stub is removed again so nothing else sees it.
    """
    name = "bfcl_eval.constants.model_config"
    stub = None
    if name not in sys.modules:

        class _NoRewrite(dict):
            def __missing__(self, key):
                return types.SimpleNamespace(underscore_to_dot=False)

        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = _NoRewrite()
        sys.modules[name] = stub
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    finally:
        if stub is not None and sys.modules.get(name) is stub:
            del sys.modules[name]
    return ast_checker, Language


# ------------------------------------------------------------------------------------------ parsing


def _tag_positions(text: str, tag: str) -> list[int]:
    """Start offsets of every occurrence of ``tag``."""
    found, pos = [], text.find(tag)
    while pos >= 0:
        found.append(pos)
        pos = text.find(tag, pos + len(tag))
    return found


def tool_call_spans(text: str) -> list[tuple[int, int]] | None:
    """Spans of the (whitespace-stripped) contents of every ``<tool_call>…</tool_call>`` block after the
    reasoning (reasoning may mention the tag itself; ToolRL's gold answers do), in order.

    [] when there is no block; None when a block is malformed (opened and not closed before the next one).
    """
    think_end = text.find("</think>")
    pos = think_end + len("</think>") if think_end >= 0 else 0
    spans = []
    while (open_ := text.find("<tool_call>", pos)) >= 0:
        start = open_ + len("<tool_call>")
        end = text.find("</tool_call>", start)
        if end < 0 or 0 <= text.find("<tool_call>", start) < end:
            return None
        spans.append(strip_span(text, start, end))
        pos = end + len("</tool_call>")
    return spans

def format_ok(text: str) -> bool:
    """The format verdict: one think block, then one or more tool-call blocks, only whitespace around and
    between them."""
    body = text.strip()
    where = {tag: _tag_positions(body, tag) for tag in TAGS}
    if len(where["<think>"]) != 1 or len(where["</think>"]) != 1 or not where["<tool_call>"]:
        return False
    if len(where["<tool_call>"]) != len(where["</tool_call>"]) or where["<think>"][0] != 0:
        return False
    # the tags in order: <think> </think> then (<tool_call> </tool_call>)+, with only whitespace between blocks
    edges = [(where["</think>"][0] + len("</think>"), "</think>")]
    for open_, close in zip(where["<tool_call>"], where["</tool_call>"]):
        if not edges[-1][0] <= open_ < close or body[edges[-1][0] : open_].strip():
            return False
        edges.append((close + len("</tool_call>"), "</tool_call>"))
    return edges[-1][0] == len(body)


def _as_call(obj: Any) -> dict:
    """One parsed call as BFCL's model-output item ``{name: arguments}``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError("a call must be an object with a string 'name'")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some policies (and OpenAI's API) encode the arguments as a JSON string
        args = json.loads(args)
    if not isinstance(args, dict):
        raise ValueError("a call's arguments must be an object")
    return {obj["name"]: args}


def parse_calls(text: str) -> list[dict]:
    """The calls of every ``<tool_call>`` block after the reasoning, in order, as BFCL model output; raises on
    anything malformed (no block, an unclosed block, an empty block, JSON that is not a call)."""
    spans = tool_call_spans(text)
    if spans is None:
        raise ValueError("a <tool_call> block is not closed")
    if not spans:
        raise ValueError("no <tool_call> block")
    calls = []
    for start, end in spans:
        content = text[start:end]
        try:
            parsed = json.loads(content)
        except json.JSONDecodeError:
            # ToolRL's layout: one JSON object per line
            parsed = [json.loads(line) for line in content.splitlines() if line.strip()]
        block = parsed if isinstance(parsed, list) else [parsed]
        if not block:
            raise ValueError("empty tool call")
        calls += [_as_call(c) for c in block]
    return calls


def check_calls(calls: list[dict], functions: list[dict], ground_truth: list[dict], category: str) -> dict:
    """BFCL's AST verdict (``{"valid": bool, "error": [...], ...}``) for parsed calls."""
    ast_checker, language = _ast_checker()
    return ast_checker(functions, calls, ground_truth, language.PYTHON, category, "mrtpo")


def reference_calls(ground_truth: list[dict], functions: list[dict]) -> list[dict]:
    """One gold call per ground-truth entry, as BFCL's checker accepts it.

    Each argument takes its first possible value; an optional argument that BFCL marks as omissible
    (``""`` among its options) is left out. Dict-typed values (and lists of dicts) hold options one
    level down, resolved the same way, because that is how BFCL's ``dict_checker`` reads them.
    """
    by_name = {f["name"]: f["parameters"] for f in functions}

    def first(options: list) -> Any:
        return next(o for o in options if o != "")

    def resolve_dict(options: dict) -> dict:
        return {k: first(v) for k, v in options.items() if v and "" not in v}

    calls = []
    for entry in ground_truth:
        for name, params in entry.items():
            spec = by_name.get(name, {"properties": {}})
            props, required = spec.get("properties", {}), spec.get("required", [])
            args = {}
            for p, options in params.items():
                if p not in props or all(o == "" for o in options) or ("" in options and p not in required):
                    continue
                value, kind = first(options), props[p].get("type")
                if kind == "dict" and isinstance(value, dict):
                    value = resolve_dict(value)
                elif props[p].get("items", {}).get("type") == "dict" and isinstance(value, list):
                    value = [resolve_dict(v) if isinstance(v, dict) else v for v in value]
                args[p] = value
            calls.append({"name": name, "arguments": args})
    return calls


def calls_json(calls: list[dict]) -> str:
    """The gold call(s) as one JSON text (the correctness Z block): one object, or a list for several."""
    return json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)


def calls_blocks(calls: list[dict]) -> str:
    """The gold call(s) as a policy writes them: one ``<tool_call>`` block per call (Qwen's layout)."""
    return "\n".join(f"<tool_call>\n{json.dumps(c, ensure_ascii=False)}\n</tool_call>" for c in calls)


# --------------------------------------------------------------------------------------------- data


def system_prompt(functions: list[dict], compact: bool = False) -> str:
    """Tool list and output layout. ``compact`` renders ``name(arg: type, opt?: type) - description``
    (the tiny scale's short prompts) instead of one JSON description per line."""
    if compact:
        lines = []
        for f in functions:
            props, required = f["parameters"]["properties"], f["parameters"].get("required", [])
            args = ", ".join(f"{p}{'' if p in required else '?'}: {d['type']}" for p, d in props.items())
            lines.append(f"{f['name']}({args}) - {f.get('description', '')}")
    else:
        lines = [json.dumps(f, ensure_ascii=False) for f in functions]
    return "Tools:\n" + "\n".join(lines) + "\nReply exactly as:\n" + TEMPLATE


def _row(id_: str, messages: list[dict], functions: list, ground_truth: list, category: str, source: str, compact: bool = False) -> dict:
    """A dataset row; the tool list and layout go in a system message (merged into the data's own, if any)."""
    system = system_prompt(functions, compact)
    messages = [dict(m) for m in messages]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = system + "\n\n" + messages[0]["content"]
    else:
        messages.insert(0, {"role": "system", "content": system})
    return {
        "id": id_,
        "prompt": messages,
        "functions": json.dumps(functions, ensure_ascii=False),
        "ground_truth": json.dumps(ground_truth, ensure_ascii=False),
        "category": category,
        "source": source,
    }


def bfcl_data_dir() -> Path:
    """``bfcl_eval/data`` of the installed ``bfcl-eval`` (located without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bfcl-eval is not installed: pip install --no-deps bfcl-eval")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from exc
    return rows


def load_bfcl(categories: tuple[str, ...] = NON_LIVE + LIVE, data_dir: str | Path | None = None):
    """BFCL v4 single-turn AST categories as a Dataset (questions joined with their possible answers)."""
    from datasets import Dataset

    root = Path(data_dir) if data_dir else bfcl_data_dir()
    rows = []
    for category in categories:
        if category not in NON_LIVE + LIVE:
            raise ValueError(f"unsupported BFCL category {category!r}; valid: {', '.join(NON_LIVE + LIVE)}")
        answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
        for q in _read_jsonl(root / f"BFCL_v4_{category}.json"):
            if q["id"] not in answers:
                raise ValueError(f"{root}/BFCL_v4_{category}.json: {q['id']} has no possible answer")
            rows.append(_row(q["id"], q["question"][0], q["function"], answers[q["id"]], category, "bfcl"))
    return Dataset.from_list(rows)


_RLLA_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "float",
               "number": "float", "bool": "boolean", "boolean": "boolean", "dict": "dict", "object": "dict"}


def _declared_type(spec: dict) -> str:
    """BFCL type name of an RLLA declared type (``str``, ``List[int]``, ``float``, ...)."""
    declared = str(spec.get("type", "")).lower()
    return _RLLA_TYPES.get(declared, "array" if declared.startswith("list") else "any")


def _type_of(value: Any) -> str:
    """BFCL type name of a JSON value."""
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"), (list, "array"), (dict, "dict")):
        if isinstance(value, py):
            return name
    return "any"


def _param_spec(type_name: str, value: Any = None) -> dict:
    spec = {"type": type_name}
    if type_name == "array":  # BFCL checks one level of item types
        spec["items"] = {"type": _type_of(value[0]) if isinstance(value, list) and value else "string"}
    return spec


def _as_options(value: Any) -> Any:
    """A literal gold value in BFCL's possible-answer shape: dicts (and dicts in a list) hold option lists."""
    if isinstance(value, dict):
        return {k: [v] for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [{k: [x] for k, x in v.items()} for v in value]
    return value


def _rlla_example(instruction: str, user: str, output: str, where: str) -> dict | None:
    """One ToolRL record in BFCL shapes; None when its gold answer makes no tool call.

    RLLA's declared parameter types are unreliable (``"page": "1"`` for an ``int``), so each parameter
    the gold call uses is typed by its gold value; the others keep their declared type and may be
    omitted or set to their default.
    """
    declared = {}
    for m in re.finditer(r"^\d+\. Name: (.+)\nDescription: (.*)\nParameters: (.*)$", instruction, re.MULTILINE):
        try:
            params = json.loads(m.group(3))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: tool {m.group(1)!r} has unparseable parameters") from exc
        declared[m.group(1)] = (m.group(2), params if isinstance(params, dict) else {})
    if "<tool_call>" not in output:
        return None
    try:
        gold = [next(iter(c.items())) for c in parse_calls(output)]
    except Exception as exc:
        raise ValueError(f"{where}: unparseable gold tool call: {exc}") from exc
    functions, ground_truth = {}, []
    for name, args in gold:
        if name not in declared:
            raise ValueError(f"{where}: gold calls {name!r}, which the tool list lacks")
        description, params = declared[name]
        fn = functions.setdefault(name, {"name": name, "description": description,
                                         "parameters": {"type": "dict", "properties": {}, "required": list(args)}})
        fn["parameters"]["required"] = [p for p in fn["parameters"]["required"] if p in args]
        answer = {}
        for p, spec in params.items():
            if p not in args:
                spec = spec if isinstance(spec, dict) else {}
                fn["parameters"]["properties"].setdefault(p, _param_spec(_declared_type(spec)))
                default = spec.get("default", "")
                answer[p] = [""] + ([default] if default not in ("", None) else [])
        for p, value in args.items():
            fn["parameters"]["properties"][p] = _param_spec(_type_of(value), value)
            answer[p] = [_as_options(value)]
        ground_truth.append({name: answer})
    # offer every tool of the record, in order: the unused ones are the distractors
    for name, (description, params) in declared.items():
        if name not in functions:
            props = {p: _param_spec(_declared_type(s)) for p, s in params.items() if isinstance(s, dict)}
            functions[name] = {"name": name, "description": description, "parameters": {"type": "dict", "properties": props, "required": []}}
    ordered = [functions[n] for n in declared]
    category = "multiple" if len(ground_truth) == 1 else "parallel_multiple"
    return {"messages": [{"role": "user", "content": user}], "functions": ordered, "ground_truth": ground_truth, "category": category}


def load_rlla(path: str | Path):
    """ToolRL (RLLA) data: ``rlla_sft.json`` (instruction/input/output) or the RL ``.parquet`` split.

    A file that is not a list of such records fails here. Records that cannot be judged by the AST
    checker are skipped with a warning naming them: a gold answer with no tool call (a plain
    ``<response>``, which needs another verifier) or a broken gold call (ToolRL's data has a few,
    e.g. a call named ``"LastName varchar"`` cut out of a column list).
    """
    import pandas as pd
    from datasets import Dataset

    path = Path(path)
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            records = [(r["extra_info"]["instruction"], r["extra_info"]["input"], r["reward_model"]["ground_truth"]) for _, r in frame.iterrows()]
        else:
            records = [(r["instruction"], r["input"], r["output"]) for r in json.loads(path.read_text(encoding="utf-8"))]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not ToolRL data: {type(exc).__name__}: {exc}") from exc
    rows, skipped = [], []
    for i, (instruction, user, output) in enumerate(records):
        try:
            example = _rlla_example(instruction, user, output, f"{path}: record {i}")
        except ValueError as exc:
            skipped.append(str(exc))
            continue
        if example is not None:
            rows.append(_row(f"rlla_{i}", example["messages"], example["functions"], example["ground_truth"], example["category"], "rlla"))
    if skipped:
        logger.warning("skipped %d records with unusable gold calls: %s", len(skipped), "; ".join(skipped))
    return Dataset.from_list(rows)


# ------------------------------------------------------------------------------------- synthetic data

#: tool name -> (description, [(parameter, type, value pool)], query template, argument hidden by hide_value, vague words)
_TOOLS = {
    "get_weather": ("weather in a city", [("city", "string", ("paris", "tokyo", "lima", "oslo", "cairo")), ("unit", "string", ("celsius", "fahrenheit"))],
                    "what is the weather in {city} in {unit}", "city", "my city"),
    "set_alarm": ("set an alarm", [("hour", "integer", (6, 7, 8, 9)), ("minute", "integer", (0, 15, 30, 45))],
                  "wake me at {hour} hours and {minute} minutes", "hour", "the usual hour"),
    "send_message": ("send a text message", [("to", "string", ("anna", "ben", "carl", "dora")), ("text", "string", ("hello", "see you soon", "on my way"))],
                     "tell {to} {text}", "to", "my friend"),
    "book_table": ("book a table", [("restaurant", "string", ("luigi", "sakura", "el toro")), ("people", "integer", (2, 3, 4, 5))],
                   "book a table at {restaurant} for {people} people", "restaurant", "our usual place"),
    "convert_currency": ("convert money", [("amount", "integer", (10, 20, 50, 100)), ("source", "string", ("usd", "eur", "yen")), ("target", "string", ("gbp", "chf"))],
                         "convert {amount} {source} to {target}", "amount", "my savings"),
    "play_song": ("play a song", [("title", "string", ("blue sky", "rain", "home")), ("artist", "string", ("nova", "the owls", "kai"))],
                  "play {title} by {artist}", "title", "that song"),
}


def _synthetic_function(name: str) -> dict:
    description, params, *_ = _TOOLS[name]
    return {"name": name, "description": description, "parameters": {
        "type": "dict", "properties": {p: {"type": t} for p, t, _ in params}, "required": [p for p, _, _ in params]}}


# ------------------------------------------------------------------------------------------ the task


class ToolCalling(Task):
    """Tool calling with ``format`` and ``correctness`` rewards (BFCL AST checker), both binary.

    ``hide_value``: in synthetic data, one needed argument value is left out of the query and is
    present only in the correctness Z block (the reference call), to test reading of privileged
    information. ``num_tools``: tools offered per synthetic prompt (the gold one plus distractors).
    """

    name = "tool"
    reward_names = ("format", "correctness")
    answer_rewards = ("correctness",)
    answer_metric = "correctness"
    data_description = "synthetic tool calls (tiny) / RLLA, 3,920 examples"
    paper_data = (
        DataFile("rlla_train", "train", "rlla/train.parquet", "qiancheng0/ToolRL dataset/rlla_4k/train.parquet (3,920 rows; "
                 "load_rlla); until it is there the runner trains on rlla/rlla_sft.json"),
        DataFile("rlla_sft", "train (fallback)", "rlla/rlla_sft.json", "qiancheng0/ToolRL dataset/rlla_4k_raw/rlla_sft.json"),
    )
    paper_run = dict(steps=100, prompts_per_step=32, num_generations=8, seeds=(0, 1, 2), learning_rate=1e-6,
                     max_completion_length=512,
                     choices=tuple(UNSTATED.values()) + ("steps=100, prompts_per_step=32: not stated for tool calling; "
                                                        "as text-to-SQL (about 0.8 epoch of RLLA's 3,920 examples)",))
    paper_models = {"1.5b": ("Qwen/Qwen2.5-1.5B-Instruct", 1.54e9), "3b": ("Qwen/Qwen2.5-3B-Instruct", 3.09e9)}
    #: warm-up noise: a swapped argument value (correctness), a dropped tag (format)
    warmup_noise = (Noise("value", 0.2, ("correctness",)), Noise("tag", 0.15, ("format",)))

    def __init__(self, hide_value: bool = False, num_tools: int = 3):
        if not 1 <= num_tools <= len(_TOOLS):
            raise ValueError(f"num_tools must be in 1..{len(_TOOLS)}")
        self.hide_value = hide_value
        self.num_tools = num_tools

    # data ------------------------------------------------------------------------------------------
    def synthetic(self, n: int, seed: int = 0, split: str = "train"):
        """Small-vocabulary tool specs, queries and gold calls in BFCL shapes (category ``multiple``)."""
        from datasets import Dataset

        rng = random.Random(f"tool-{seed}-{split}-{self.hide_value}")
        rows = []
        for i in range(n):
            offered = rng.sample(sorted(_TOOLS), self.num_tools)
            name = offered[0]
            rng.shuffle(offered)
            _, params, template, hidden, vague = _TOOLS[name]
            args = {p: rng.choice(pool) for p, _, pool in params}
            shown = dict(args, **({hidden: vague} if self.hide_value else {}))
            messages = [{"role": "user", "content": template.format(**shown)}]
            functions = [_synthetic_function(t) for t in offered]
            ground_truth = [{name: {p: [v] for p, v in args.items()}}]
            rows.append(_row(f"{split}-{seed}-{i}", messages, functions, ground_truth, "multiple", "synthetic", compact=True))
        return Dataset.from_list(rows)

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train"):
        """``hide_value`` is an option of this task (it changes the data stream), so the split comes from a copy."""
        hidden = ToolCalling(hide_value=True, num_tools=self.num_tools)
        return hidden, hidden.synthetic(n, seed=seed, split=split)

    def training_set(self, data_dir: Path):
        """RLLA's RL split (3,920 examples) when present, else its 400-example SFT file."""
        full = Path(data_dir) / "rlla" / "train.parquet"
        return load_rlla(full if full.is_file() else Path(data_dir) / "rlla" / "rlla_sft.json")

    def real_benchmarks(self, data_dir: Path) -> dict[str, Benchmark]:
        """BFCL v4 non-live and live (the installed ``bfcl-eval``'s data), scored by the rewards' means."""
        return {"bfcl_non_live": Benchmark(self, load_bfcl(NON_LIVE), reward_means),
                "bfcl_live": Benchmark(self, load_bfcl(LIVE), reward_means)}

    def reference_response(self, example: dict) -> str:
        calls = reference_calls(json.loads(example["ground_truth"]), json.loads(example["functions"]))
        names = " and ".join(dict.fromkeys(c["name"] for c in calls))
        return f"<think>the user needs {names}</think>\n{calls_blocks(calls)}"

    # rewards ---------------------------------------------------------------------------------------
    def reward_funcs(self):
        def format_score(text: str, example: dict) -> float:
            return float(format_ok(text))

        def correctness_score(text: str, example: dict) -> float:
            try:
                calls = parse_calls(text)
            except ValueError:  # no or malformed call: a wrong answer, not a checker error
                return 0.0
            verdict = check_calls(calls, json.loads(example["functions"]), json.loads(example["ground_truth"]), example["category"])
            return float(bool(verdict.get("valid")))

        return [reward_function("format", format_score, _example, needs_example=False),
                reward_function("correctness", correctness_score, _example)]

    # Z blocks and check regions --------------------------------------------------------------------
    def z_blocks(self, prompts, completions, **columns):
        blocks = []
        for j in range(len(completions)):
            block = {"format": TEMPLATE}
            example = _example(prompts, j, columns)
            if example is not None:
                try:
                    gold = reference_calls(json.loads(example["ground_truth"]), json.loads(example["functions"]))
                    block["correctness"] = calls_json(gold)
                except Exception:  # an unreadable ground truth has no privileged text to offer
                    pass
            blocks.append(block)
        return blocks

    def check_regions(self, completion, example):
        text = completion_text(completion)
        tags = sorted((p, p + len(tag)) for tag in TAGS for p in _tag_positions(text, tag))
        calls = [span for span in tool_call_spans(text) or [] if span[1] > span[0]]
        return {"format": tags, "correctness": calls, "think": think_span(text)}


def _example(prompts: list, j: int, columns: dict) -> dict | None:
    """Row ``j`` of the columns the correctness checker needs (None if TRL did not pass them)."""
    try:
        return {k: columns[k][j] for k in ("functions", "ground_truth", "category")}
    except (KeyError, IndexError, TypeError):
        return None
