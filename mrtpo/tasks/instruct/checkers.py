"""The field's own checkers (IFEval and IFBench registries of ``if-verifiable``) and the official verdict.

Nothing here re-implements a checker: this module builds the registry's checker for a constraint, hands it
the part of the response the official evaluators judge, and computes their accuracies. Choices, stated once:

* **Answer part.** A response is ``<think>…</think>`` then the answer. Checkers judge the answer only: the
  text after the first ``</think>`` without the line breaks that separate it from the tag (the chat template
  writes ``</think>\n\n``), otherwise **as written**; a ``<think>`` never closed leaves an empty answer, and
  a response without reasoning is judged whole. Scoring is *strict* as in the official IFEval
  (google-research ``evaluation_lib.test_instruction_following_strict``) and IFBench (allenai/IFBench, same
  function) evaluators: ``response.strip() and check_following(response)`` on the raw response. Nothing is
  stripped first (``if_verifiable.common.strip_thinking`` strips, which the official code does not): a
  trailing blank line changes, e.g., IFBench's ``format:line_indent`` verdict, and the official one counts.
* **Checker version.** The checkers are those of ``if-verifiable`` ``CHECKERS_VERSION``; IFBench's own
  repository has revised some checkers since, so the version is part of every reported number.
* **Literal words.** Some IFEval checkers hand a constraint's words to ``re`` unescaped (``LITERAL_ARGS``):
  a keyword such as ``a(b`` raised ``re.error`` on every response, and ``c++`` or ``e.g.`` were matched as
  patterns. The words are what the constraint's description asks for, so they are escaped before the checker
  sees them. No keyword of IFEval or IFBench holds a character ``re`` reads specially, so no official verdict
  on them moves.
* **Over-long answers** (more than ``MAX_ANSWER_CHARS``) fail every constraint: some registry regexes
  are quadratic on pathological text, and a reward must stay fast.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import re
from typing import Any

#: answers longer than this fail every constraint (see module docstring)
MAX_ANSWER_CHARS = 16_000
#: the checker code every IF number is computed with (IFEval + IFBench registries)
CHECKERS_VERSION = "if-verifiable==0.1.2"


@functools.lru_cache(maxsize=None)
def registry() -> dict[str, type]:
    """The merged IFEval + IFBench instruction registry (imported on first use: it loads nltk and langdetect)."""
    import langdetect

    from mrtpo.files.paths import data_root

    # importing IFBench downloads its nltk resources when absent; offline, each failed download prints a few lines
    # of "[nltk_data] Error loading ..." on every page and log that checks a constraint. A resource the checkers do
    # need and lack still fails where it is used, with nltk's own message naming it. nltk is first imported inside
    # the redirect: its downloader binds the stderr of that moment.
    with contextlib.redirect_stderr(io.StringIO()):
        import nltk

        # the checkers' resources (punkt_tab, stopwords, the tagger) are found in the data folder's copy without
        # NLTK_DATA set (the Makefile sets it; a script run by hand did not, and IFEval's word counts failed)
        local = data_root() / "nltk_data"
        if local.is_dir() and str(local) not in nltk.data.path:
            nltk.data.path.append(str(local))
        from if_verifiable.ifbench.instructions_registry import INSTRUCTION_DICT as ifbench
        from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT as ifeval

    # langdetect is random by default; a fixed seed makes the language/case checkers deterministic
    langdetect.DetectorFactory.seed = 0
    return {**ifeval, **ifbench}


@contextlib.contextmanager
def _quiet_checkers():
    """Silence the registry's ``logging.error`` calls, which print the whole response on every miss."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(previous)


#: constraint arguments that the registry's checkers make part of a regular expression unescaped, though the
#: constraint asks for the words themselves (module docstring, "Literal words")
LITERAL_ARGS = {
    "keywords:existence": "keywords",
    "keywords:frequency": "keyword",
    "keywords:forbidden_words": "forbidden_words",
    "detectable_format:multiple_sections": "section_spliter",
    "detectable_content:postscript": "postscript_marker",
}
#: postscript markers the checker recognises by name and matches with patterns of its own (``P. S.`` too)
NAMED_POSTSCRIPTS = ("P.S.", "P.P.S")


def literal(word: str) -> str:
    """``word`` as a pattern that matches it literally. Surrounding whitespace stays as it is: it means itself
    to ``re``, and the checkers that strip a word strip it after this, before it becomes a pattern."""
    core = word.strip()
    lead = word[: len(word) - len(word.lstrip())]
    return lead + re.escape(core) + word[len(lead) + len(core):] if core else word


def literal_kwargs(instruction_id: str, kwargs: dict) -> dict:
    """``kwargs`` with the words a checker would read as a pattern (``LITERAL_ARGS``) escaped."""
    name = LITERAL_ARGS.get(instruction_id)
    value = kwargs.get(name)
    if isinstance(value, str) and not (name == "postscript_marker" and value.strip() in NAMED_POSTSCRIPTS):
        return {**kwargs, name: literal(value)}
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return {**kwargs, name: [literal(w) for w in value]}
    return kwargs


def build_checker(instruction_id: str, kwargs: dict | None, prompt: str = ""):
    """Instantiate the registry's checker for one constraint, as ``if_verifiable`` does, with its words literal.

    ``None``-valued kwargs are dropped (IFBench rows carry every key, mostly null); the words a checker would
    read as a regular expression are escaped (``literal_kwargs``); checkers that declare a ``prompt`` argument
    get the prompt text.
    """
    checker = registry()[instruction_id](instruction_id)
    checker.build_description(**literal_kwargs(instruction_id, {k: v for k, v in (kwargs or {}).items() if v is not None}))
    args = checker.get_instruction_args()
    if args and "prompt" in args:
        checker.build_description(prompt=prompt)
    return checker


def describe(instruction_id: str, kwargs: dict | None) -> str:
    """The registry's description of a constraint (its Z block)."""
    checker = registry()[instruction_id](instruction_id)
    return checker.build_description(**{k: v for k, v in (kwargs or {}).items() if v is not None})


def answer_span(text: str) -> tuple[int, int]:
    """Character span of the answer part as the checkers judge it (module docstring): after the first
    ``</think>`` and its line breaks, to the end of the response, unstripped; empty after an unclosed ``<think>``."""
    start, end = 0, len(text)
    close = text.find("</think>")
    if close >= 0:
        start = close + len("</think>")
        while start < end and text[start] in "\r\n":
            start += 1
    elif text.lstrip().startswith("<think>"):
        return (end, end)
    return (start, end)


def check_constraint(response: str, instruction_id: str, kwargs: dict | None, prompt: str = "", loose: bool = False) -> bool:
    """Verdict of one constraint on the raw answer part, as the official evaluators judge it.

    Strict: ``answer.strip() and check_following(answer)``. ``loose``: some official loose variant of the answer
    passes (``if_verifiable.common.get_loose_transformations``, the same list as the official code: the answer,
    without its first and/or last line, each with and without ``*``).
    """
    start, end = answer_span(response)
    answer = response[start:end]
    if not answer.strip() or len(answer) > MAX_ANSWER_CHARS:
        return False
    if loose:
        from if_verifiable.common import get_loose_transformations

        candidates = get_loose_transformations(answer)
    else:
        candidates = [answer]
    checker = build_checker(instruction_id, kwargs, prompt)
    with _quiet_checkers():
        return any(c.strip() and checker.check_following(c) for c in candidates)


def kwargs_list(value: Any) -> list[dict]:
    """The ``kwargs`` column as a list of dicts (stored as a JSON string; a list is accepted too)."""
    return json.loads(value) if isinstance(value, str) else list(value)


def evaluate(pairs: list[tuple[dict, str]]) -> dict[str, float]:
    """IFEval/IFBench accuracies of responses with the official evaluators' rule (raw answer; module docstring).

    ``pairs`` is a list of ``(example, response)``. Returns prompt-level (all constraints pass) and
    instruction-level (pooled over all constraints) accuracy, strict and loose, and ``n``. Strict agrees with
    the training rewards (``check_constraint``) verdict for verdict.
    """
    prompt_ok = {"strict": 0, "loose": 0}
    inst_ok = {"strict": 0, "loose": 0}
    n_inst = 0
    for example, response in pairs:
        ids = list(example["instruction_id_list"])
        kws = kwargs_list(example["kwargs"])
        n_inst += len(ids)
        for mode in ("strict", "loose"):
            passed = sum(check_constraint(response, iid, kw, example["prompt_text"], loose=mode == "loose")
                         for iid, kw in zip(ids, kws))
            inst_ok[mode] += passed
            prompt_ok[mode] += int(passed == len(ids))
    n = max(len(pairs), 1)
    return {
        "prompt_strict": prompt_ok["strict"] / n,
        "inst_strict": inst_ok["strict"] / max(n_inst, 1),
        "prompt_loose": prompt_ok["loose"] / n,
        "inst_loose": inst_ok["loose"] / max(n_inst, 1),
        "n": len(pairs),
    }
