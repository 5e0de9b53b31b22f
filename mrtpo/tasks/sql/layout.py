"""The text-to-SQL layout: what the prompt asks for, and where a response's SQL is.

A response is ``<think>reasoning</think><answer>SQL</answer>``. The format reward reads the four tags
(``is_well_formed``, ``tag_spans``); the execution rewards read the SQL of the last answer block
(``answer_sql``). Locating is done with str.find rather than lazy regexes, which go quadratic on inputs such
as a megabyte of whitespace or thousands of unclosed tags.
"""

from __future__ import annotations

import re

from ..base import Spans, strip_span

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
FORMAT_TEMPLATE = "<think>reasoning</think><answer>SQL</answer>"
FORMAT_INSTRUCTION = f"Reply as {FORMAT_TEMPLATE}"

_FORMAT_RE = re.compile(r"\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*", re.S)


def build_prompt(question: str, schema: str) -> list[dict[str, str]]:
    """The conversational prompt: schema lines, the question, the required output format."""
    return [{"role": "user", "content": f"{schema}\nQuestion: {question}\n{FORMAT_INSTRUCTION}"}]


def is_well_formed(text: str) -> bool:
    """True when ``text`` is exactly ``<think>…</think>`` then ``<answer>…</answer>``, each tag once."""
    return all(text.count(tag) == 1 for tag in TAGS) and _FORMAT_RE.fullmatch(text) is not None


def answer_sql_span(text: str) -> tuple[int, int] | None:
    """Character span of the SQL in the last ``<answer>…</answer>`` block, or None.

    The block is the last ``<answer>`` that a ``</answer>`` follows, up to the first such closing tag.
    Surrounding whitespace and an optional Markdown fence (```` ```sql … ``` ````) are not part of the SQL.
    """
    last_close = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, last_close) if last_close >= 0 else -1
    if start < 0:
        return None
    start, end = strip_span(text, start + len("<answer>"), text.find("</answer>", start + len("<answer>")))
    if text.startswith("```", start, end):
        start += 3
        for lang in ("sqlite", "sql"):
            if text[start : start + len(lang)].lower() == lang:
                start += len(lang)
                break
        if text.endswith("```", start, end):
            end -= 3
        start, end = strip_span(text, start, end)
    return (start, end) if end > start else None


def answer_sql(text: str) -> str | None:
    """The SQL the verifiers execute: the content of the last ``<answer>`` block, or None."""
    span = answer_sql_span(text)
    return text[span[0] : span[1]] if span else None


def tag_spans(text: str) -> Spans:
    """Spans of every occurrence of the four layout tags (exactly four in a well-formed response)."""
    return sorted(m.span() for tag in TAGS for m in re.finditer(re.escape(tag), text))
