"""Where each constraint's checker reads: the character spans of a response behind every constraint reward."""

from __future__ import annotations

import re

from ..base import Spans, strip_span
from .checkers import answer_span


def _find_all(pattern: str, text: str, start: int, end: int, flags: int = 0) -> Spans:
    """Spans of every match of ``pattern`` inside ``text[start:end]``, in completion offsets."""
    return [(start + m.start(), start + m.end()) for m in re.finditer(pattern, text[start:end], flags) if m.end() > m.start()]


def _end_region(text: str, start: int, end: int, phrase: str) -> Spans:
    """The last ``len(phrase)`` characters the end checker compares (after its strip and quote strip)."""
    while end > start and text[end - 1] == '"':
        end -= 1
    while start < end and text[start] == '"':
        start += 1
    return [(max(start, end - len(phrase.strip())), end)] if end > start else []


def _first_word_region(text: str, start: int, end: int, nth: int) -> Spans:
    """The first word of the ``nth`` paragraph (paragraphs split on blank lines, as the checker does)."""
    bounds = [start] + [start + m.end() for m in re.finditer(r"\n\n", text[start:end])]
    if not 1 <= nth <= len(bounds):
        return []
    word = re.search(r"\S+", text[bounds[nth - 1] : end])
    return [(bounds[nth - 1] + word.start(), bounds[nth - 1] + word.end())] if word else []


def _bullet_region(text: str, start: int, end: int) -> Spans:
    """Whole lines the bullet checker counts (``* item`` or ``- item``)."""
    spans, pos = [], start
    for line in text[start:end].split("\n"):
        if re.match(r"\s*\*[^*]", line) or re.match(r"\s*-", line):
            spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def _postscript_region(text: str, start: int, end: int, marker: str) -> Spans:
    """From the postscript marker to the end of the answer."""
    pattern = {"P.P.S": r"p\.\s?p\.\s?s", "P.S.": r"p\.\s?s\."}.get(marker, re.escape(marker))
    found = re.search(pattern, text[start:end], re.IGNORECASE)
    return [(start + found.start(), end)] if found else []


def constraint_region(text: str, instruction_id: str, kwargs: dict) -> Spans:
    """Character spans of ``text`` that the checker of one constraint reads.

    Localised where the checker reads a part (end phrase, first word, title, quotes, postscript,
    bullet lines, highlights, keyword occurrences); the whole answer for counts, case, length, JSON
    and every IFBench constraint. Empty when the checked element is absent (e.g. no title at all). Surrounding
    whitespace of the answer is never part of a region.
    """
    start, end = strip_span(text, *answer_span(text))
    if end <= start:
        return []
    kind = instruction_id
    if kind == "startend:end_checker":
        return _end_region(text, start, end, kwargs.get("end_phrase", ""))
    if kind == "length_constraints:nth_paragraph_first_word":
        return _first_word_region(text, start, end, int(kwargs.get("nth_paragraph", 1)))
    if kind == "detectable_format:title":
        return _find_all(r"<<[^\n]+>>", text, start, end)
    if kind == "startend:quotation":
        return [(start, start + 1), (end - 1, end)]
    if kind == "detectable_content:postscript":
        return _postscript_region(text, start, end, kwargs.get("postscript_marker", "P.S."))
    if kind == "detectable_format:number_bullet_lists":
        return _bullet_region(text, start, end)
    if kind == "detectable_format:number_highlighted_sections":
        return sorted(set(_find_all(r"\*[^\n*]*\*", text, start, end) + _find_all(r"\*\*[^\n*]*\*\*", text, start, end)))
    if kind == "keywords:existence":
        return sorted(s for kw in kwargs.get("keywords", []) for s in _find_all(re.escape(kw), text, start, end, re.IGNORECASE))
    if kind == "keywords:frequency":
        return _find_all(re.escape(kwargs.get("keyword", "").strip()), text, start, end, re.IGNORECASE)
    if kind == "keywords:forbidden_words":
        words = kwargs.get("forbidden_words", [])
        return sorted(s for w in words for s in _find_all(r"\b" + re.escape(w) + r"\b", text, start, end, re.IGNORECASE))
    return [(start, end)]
