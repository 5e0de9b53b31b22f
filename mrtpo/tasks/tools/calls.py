"""Tool calls in a response: the layout, the format verdict, and the calls read out of the blocks.

Layout of a response: ``<think>…</think><tool_call>JSON</tool_call>``, JSON being one call
``{"name": ..., "arguments": {...}}`` or a list of calls (parallel calls). Several calls may also come as
one ``<tool_call>`` block per call — the layout Qwen models are trained on (Qwen2.5/Qwen3 chat templates) —
and every block is read. One JSON object per line inside a block (ToolRL's layout) and ``"parameters"`` for
``"arguments"`` (ToolRL's key) are accepted too.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import strip_span

TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
#: the output template: the format reward's Z block
TEMPLATE = '<think> reasoning </think>\n<tool_call>\n{"name": "<function name>", "arguments": {"<parameter>": <value>}}\n</tool_call>'


def tag_positions(text: str, tag: str) -> list[int]:
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
    where = {tag: tag_positions(body, tag) for tag in TAGS}
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


def _loads(text: str) -> Any:
    """``json.loads``, with JSON nested deeper than Python's recursion limit malformed too: a ``ValueError``
    (a parse failure, as for any other bad JSON), never the ``RecursionError`` the decoder raises there."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _as_call(obj: Any) -> dict:
    """One parsed call as BFCL's model-output item ``{name: arguments}``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError("a call must be an object with a string 'name'")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some policies (and OpenAI's API) encode the arguments as a JSON string
        args = _loads(args)
    if not isinstance(args, dict):
        raise ValueError("a call's arguments must be an object")
    return {obj["name"]: args}


def parse_calls(text: str) -> list[dict]:
    """The calls of every ``<tool_call>`` block after the reasoning, in order, as BFCL model output; raises
    ``ValueError`` on anything malformed (no block, an unclosed block, an empty block, JSON that is not a call or
    is nested too deeply to parse)."""
    spans = tool_call_spans(text)
    if spans is None:
        raise ValueError("a <tool_call> block is not closed")
    if not spans:
        raise ValueError("no <tool_call> block")
    calls = []
    for start, end in spans:
        content = text[start:end]
        try:
            parsed = _loads(content)
        except json.JSONDecodeError:
            # ToolRL's layout: one JSON object per line
            parsed = [_loads(line) for line in content.splitlines() if line.strip()]
        block = parsed if isinstance(parsed, list) else [parsed]
        if not block:
            raise ValueError("empty tool call")
        calls += [_as_call(c) for c in block]
    return calls


def calls_json(calls: list[dict]) -> str:
    """The gold call(s) as one JSON text (the correctness Z block): one object, or a list for several."""
    return json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)


def calls_blocks(calls: list[dict]) -> str:
    """The gold call(s) as a policy writes them: one ``<tool_call>`` block per call (Qwen's layout)."""
    return "\n".join(f"<tool_call>\n{json.dumps(c, ensure_ascii=False)}\n</tool_call>" for c in calls)
