"""Warm-up corruptions of the tasks' reference responses (``Task.corrupt``, ``Noise.kind``).

A tiny base is warmed up on reference responses with noise injected where a verifier reads, gated on that
verifier's Z block (``mrtpo.models.tiny``); these are the corruptions, each a minimal edit of the answer region:

* ``value``: one copyable value swapped for a random one (tool calling);
* ``structure``: one operator/column swap that keeps SQL executable but changes its result (``SQL_SWAPS``);
* ``syntax``: one SQL keyword of the answer misspelt (``FROM`` -> ``FRO``: not executable);
* ``tag``: one response tag dropped or misspelt (format);
* ``constraint``: the response edited to violate one instruction-following constraint (``IF_VIOLATIONS``),
  the constraint type given as ``label`` (``Task.reward_label``).

``CORRUPTIONS`` maps each kind to ``f(response, rng, words, label) -> response``.
"""

from __future__ import annotations

import random
import re

#: values a task's answers copy: single-quoted strings (SQL), double-quoted JSON values (not keys: they
#: follow ": "; not a call's "name": randomising tool names too left the 1.97M tool policy unable to name any
#: tool at all, results/tiny_models_attempts.md), numbers of two or more digits
VALUE_RE = re.compile(r"'([^'\n]{1,40})'|(?<=: )(?<!\"name\": )\"([^\"\n]{1,40})\"|(?<![\w.])(\d{2,})(?![\w.])")


def answer_start(response: str) -> int:
    """Start of the answer region: after ``</think>`` when present, else 0."""
    i = response.rfind("</think>")
    return 0 if i < 0 else i + len("</think>")


def answer_values(response: str, visible: str) -> list[str]:
    """Values in the answer region that also appear in ``visible`` (prompt + Z text): the copyable ones."""
    found = []
    for m in VALUE_RE.finditer(response, answer_start(response)):
        v = next(g for g in m.groups() if g is not None)
        if v.strip() and v in visible and v not in found:
            found.append(v)
    return found


def sub_value(text: str, old: str, new: str) -> str:
    return re.sub(r"(?<![\w])" + re.escape(old) + r"(?![\w])", lambda _: new, text)


def random_like(v: str, rng: random.Random, words: list[str]) -> str:
    if v.isdigit():
        return str(rng.randint(10 ** (len(v) - 1), 10 ** len(v) - 1))
    return rng.choice(words)


SQL_KEYWORDS = ("SELECT", "FROM", "WHERE", "GROUP", "ORDER", "COUNT", "JOIN")
#: one-token swaps that keep SQL executable but change its result (``structure`` noise)
SQL_SWAPS = ((" > ", " < "), (" < ", " > "), ("DESC", "ASC"), ("SELECT name", "SELECT city"),
             ("SELECT city", "SELECT name"), ("SELECT age", "SELECT id"), ("SELECT price", "SELECT id"),
             ("COUNT(*)", "MAX(id)"), ("SUM(price)", "MAX(price)"), ("SELECT orders.item", "SELECT people.city"))


def apply_noise(response: str, kind: str, rng: random.Random, words: list[str]) -> str:
    """One corruption of ``kind`` (see ``Noise``); the response unchanged when there is nothing to corrupt."""
    start = answer_start(response)
    head, answer = response[:start], response[start:]
    if kind == "value":
        vals = [next(g for g in m.groups() if g is not None) for m in VALUE_RE.finditer(answer)]
        if not vals:
            return response
        v = rng.choice(vals)
        return head + sub_value(answer, v, random_like(v, rng, words))
    if kind == "structure":
        present = [(a, b) for a, b in SQL_SWAPS if a in answer]
        if not present:
            return response
        a, b = rng.choice(present)
        return head + answer.replace(a, b, 1)
    if kind == "syntax":
        present = [k for k in SQL_KEYWORDS if re.search(rf"\b{k}\b", answer)]
        if not present:
            return response
        k = rng.choice(present)
        return head + re.sub(rf"\b{k}\b", k[:-1], answer, count=1)  # e.g. FROM -> FRO: not executable
    if kind == "tag":
        tags = re.findall(r"</?(?:think|answer|tool_call)>", response)
        if not tags:
            return response
        t = rng.choice(tags)
        return response.replace(t, rng.choice(["", t.replace(">", "")]), 1)
    raise ValueError(f"unknown noise kind {kind!r}")


def _drop_last_line(answer: str, _rng) -> str:
    return answer.rsplit("\n", 1)[0] if "\n" in answer.strip("\n") else answer


def _change_first_word(answer: str, rng: random.Random) -> str:
    m = re.search(r"[A-Za-z]+", answer)
    if not m:
        return answer
    new = rng.choice([w for w in ("so", "well", "then") if w != m.group().lower()])
    new = new.capitalize() if m.group()[0].isupper() else new
    return answer[: m.start()] + new + answer[m.end() :]


def _drop_keyword(answer: str, rng: random.Random) -> str:
    m = re.search(r"It has (\w+) and (\w+)\.", answer, re.IGNORECASE)
    if not m:
        return answer
    kw = rng.choice(m.groups())
    return re.sub(rf"\b{kw}\b", rng.choice(("water", "grass", "paper")), answer, flags=re.IGNORECASE)


def _capitalise_a_word(answer: str, rng: random.Random) -> str:
    words = list(re.finditer(r"\b[a-z]{3,}\b", answer))
    if not words:
        return answer
    m = rng.choice(words)
    return answer[: m.start()] + m.group().capitalize() + answer[m.end() :]


def _add_comma(answer: str, _rng) -> str:
    return answer.replace(" and ", ", and ", 1) if " and " in answer else re.sub(r"^(\W*\w+)", r"\1,", answer, count=1)


def _unwrap_title(answer: str, _rng) -> str:
    return re.sub(r"<<([^\n]*)>>", r"\1", answer, count=1)


def _drop_ps_marker(answer: str, _rng) -> str:
    return re.sub(r"(?i)p\.s\. ", "", answer, count=1)


def _drop_a_bullet(answer: str, rng: random.Random) -> str:
    lines = answer.split("\n")
    bullets = [i for i, line in enumerate(lines) if line.startswith("* ")]
    if not bullets:
        return answer
    del lines[rng.choice(bullets)]
    return "\n".join(lines)


#: one minimal edit per constraint type that makes its checker fail on the synthetic answers
#: (``InstructionFollowing.synthetic``), touching the region the checker reads
IF_VIOLATIONS = {
    "startend:end_checker": _drop_last_line,
    "length_constraints:nth_paragraph_first_word": _change_first_word,
    "keywords:existence": _drop_keyword,
    "change_case:english_lowercase": _capitalise_a_word,
    "punctuation:no_comma": _add_comma,
    "detectable_format:title": _unwrap_title,
    "detectable_content:postscript": _drop_ps_marker,
    "detectable_format:number_bullet_lists": _drop_a_bullet,
}


def violate_constraint(response: str, instruction_id: str, rng: random.Random) -> str:
    """``response`` edited to violate one constraint (``IF_VIOLATIONS``); unchanged for other types."""
    edit = IF_VIOLATIONS.get(instruction_id)
    if edit is None:
        return response
    start = answer_start(response)
    return response[:start] + edit(response[start:], rng)



def _corrupt_with(kind: str):
    def corrupt(response: str, rng: random.Random, words: list[str], label: str = "") -> str:
        return apply_noise(response, kind, rng, words)

    return corrupt


def _violate(response: str, rng: random.Random, words: list[str], label: str = "") -> str:
    return violate_constraint(response, label, rng)


#: Noise.kind -> corruption
CORRUPTIONS = {**{kind: _corrupt_with(kind) for kind in ("value", "structure", "syntax", "tag")}, "constraint": _violate}
