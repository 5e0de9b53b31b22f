"""Instruction following: one reward per constraint, judged by the field's own checkers.

Checkers come from the IFEval and IFBench registries as shipped in PyPI ``if-verifiable`` (their
instruction ids do not overlap, so one merged registry serves both). Nothing here re-implements a
checker; this module only loads data, calls the registry, and says which characters each checker reads.

Choices, stated once:

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
* **Slots.** TRL needs a fixed list of reward functions, so the task exposes ``max_constraints`` slots
  ``constraint_0..``; slot *i* scores the *i*-th constraint of the example (1.0/0.0) and returns
  ``None`` when the example has fewer constraints (TRL reads None as "not applicable").
* **Z block** of a constraint = the registry's description of it (the text ``build_description``
  returns), which is also the text the synthetic prompts are made of.
* **Over-long answers** (more than ``MAX_ANSWER_CHARS``) fail every constraint: some registry regexes
  are quadratic on pathological text, and a reward must stay fast.
* ``kwargs`` is stored as a JSON string (a list of dicts): the constraints' argument dicts have
  different keys and types, which Arrow cannot hold in one struct column without inventing nulls.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import random
import re
from pathlib import Path
from typing import Any

from .base import UNSTATED, Benchmark, DataFile, Noise, Spans, Task, completion_text, reward_function, strip_span, think_span

#: answers longer than this fail every constraint (see module docstring)
MAX_ANSWER_CHARS = 16_000
#: the checker code every IF number is computed with (IFEval + IFBench registries)
CHECKERS_VERSION = "if-verifiable==0.1.2"


@functools.lru_cache(maxsize=None)
def registry() -> dict[str, type]:
    """The merged IFEval + IFBench instruction registry (imported on first use: it loads nltk and langdetect)."""
    import langdetect
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


def build_checker(instruction_id: str, kwargs: dict | None, prompt: str = ""):
    """Instantiate the registry's checker for one constraint, exactly as ``if_verifiable`` does.

    ``None``-valued kwargs are dropped (IFBench rows carry every key, mostly null); checkers that
    declare a ``prompt`` argument get the prompt text.
    """
    checker = registry()[instruction_id](instruction_id)
    checker.build_description(**{k: v for k, v in (kwargs or {}).items() if v is not None})
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


# --------------------------------------------------------------------------------------------- data


def _parse_record(record: Any, where: str) -> dict:
    """Validate one IFEval/IFBench record and turn it into a dataset row; errors name ``where``."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: record is not a JSON object")
    prompt, ids, kws = record.get("prompt"), record.get("instruction_id_list"), record.get("kwargs")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{where}: 'prompt' must be a non-empty string")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{where}: 'instruction_id_list' must be a non-empty list of strings")
    if not isinstance(kws, list) or len(kws) != len(ids) or not all(isinstance(k, dict) for k in kws):
        raise ValueError(f"{where}: 'kwargs' must be a list of {len(ids)} objects, one per instruction")
    kws = [{k: v for k, v in kw.items() if v is not None} for kw in kws]
    for iid, kw in zip(ids, kws):
        if iid not in registry():
            raise ValueError(f"{where}: unknown instruction id {iid!r}")
        try:
            build_checker(iid, kw, prompt)
        except Exception as exc:  # a wrong argument name or value is a data error
            raise ValueError(f"{where}: {iid} rejects its kwargs {kw}: {exc}") from exc
    return {
        "key": str(record.get("key", "")),
        "prompt": [{"role": "user", "content": prompt}],
        "prompt_text": prompt,
        "instruction_id_list": ids,
        "kwargs": json.dumps(kws),
    }


def load_jsonl(path: str | Path):
    """Load an IFEval/IFBench JSONL file (``prompt``, ``instruction_id_list``, ``kwargs``) as a Dataset.

    Columns: ``key``, ``prompt`` (conversational), ``prompt_text``, ``instruction_id_list``, ``kwargs``
    (JSON string). A malformed line or an instruction id the registry lacks fails here, naming file and line.
    """
    from datasets import Dataset

    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON: {exc}") from exc
            rows.append(_parse_record(record, where))
    if not rows:
        raise ValueError(f"{path}: no records")
    return Dataset.from_list(rows)


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


# ------------------------------------------------------------- benchmarks judged outside this package
# MulDimIF is judged by its authors' own checker code (Junjie-Ye/MulDimIF ``Code/evaluation``, not packaged) and
# AdvancedIF by an LLM judge against expert rubrics (facebookresearch/AdvancedIF, o3-mini): neither can be scored
# offline here. Their loaders give the prompts (to sample responses) and what the external judge needs.


def _read_records(path: str | Path) -> list[dict]:
    """Records of a ``.json`` list or a ``.jsonl`` file; errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            records = []
            for lineno, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from None
        else:
            records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path}: expected a non-empty list of JSON objects")
    return records


def _messages(value: Any, where: str) -> list[dict]:
    """A conversation as chat messages; anything else is a data error naming ``where``."""
    if not (isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                      and isinstance(m.get("content"), str) for m in value)):
        raise ValueError(f"{where}: the conversation must be a non-empty list of {{role, content}} messages")
    return [{"role": m["role"], "content": m["content"]} for m in value]


def _last_user_text(messages: list[dict]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def load_muldimif(path: str | Path):
    """MulDimIF test data (``Data/test.json`` of Junjie-Ye/MulDimIF, 1,200 prompts) as a Dataset.

    Columns: ``key`` (its ``id``), ``prompt`` (the ``conversations`` messages), ``prompt_text`` (last user
    turn), ``constraints`` (JSON list of ``[category, type, description]``, what its checker reads) and
    ``constraint_pattern``. Responses are scored by MulDimIF's own ``evaluation.py``.
    """
    from datasets import Dataset

    rows = []
    for i, rec in enumerate(_read_records(path)):
        where = f"{path}: record {i}"
        messages = _messages(rec.get("conversations"), where)
        constraints = rec.get("constraints")
        if not (isinstance(constraints, list) and constraints and all(
                isinstance(c, list) and len(c) == 3 and all(isinstance(x, str) for x in c) for c in constraints)):
            raise ValueError(f"{where}: 'constraints' must be a list of [category, type, description]")
        rows.append({"key": str(rec.get("id", i)), "prompt": messages, "prompt_text": _last_user_text(messages),
                     "constraints": json.dumps(constraints), "constraint_pattern": str(rec.get("constraint_pattern", ""))})
    return Dataset.from_list(rows)


def load_advancedif(path: str | Path):
    """AdvancedIF (facebook/AdvancedIF, ~1,600 prompts) as a Dataset.

    Reads ``conversation_history`` (the messages up to the turn to answer) and ``prompt_metadata.rubrics``
    (``prompt_metadata`` may be a JSON string, as in the released file). Columns: ``key``, ``prompt``,
    ``prompt_text``, ``rubrics`` (JSON list of strings), ``benchmark`` (``benchmark_name`` when present:
    complex IF, carried context or system steerability). Responses are scored by AdvancedIF's LLM judge.
    """
    from datasets import Dataset

    rows = []
    for i, rec in enumerate(_read_records(path)):
        where = f"{path}: record {i}"
        history = rec.get("conversation_history")
        history = json.loads(history) if isinstance(history, str) else history
        messages = _messages(history, where)
        meta = rec.get("prompt_metadata")
        meta = json.loads(meta) if isinstance(meta, str) else meta
        rubrics = meta.get("rubrics") if isinstance(meta, dict) else None
        rubrics = json.loads(rubrics) if isinstance(rubrics, str) else rubrics
        if not (isinstance(rubrics, list) and rubrics and all(isinstance(r, str) for r in rubrics)):
            raise ValueError(f"{where}: 'prompt_metadata' needs 'rubrics', a non-empty list of strings")
        rows.append({"key": str(rec.get("id", i)), "prompt": messages, "prompt_text": _last_user_text(messages),
                     "rubrics": json.dumps(rubrics), "benchmark": str(rec.get("benchmark_name", ""))})
    return Dataset.from_list(rows)


# ------------------------------------------------------------------------------------ check regions


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
        return sorted(s for kw in kwargs.get("keywords", []) for s in _find_all(kw, text, start, end, re.IGNORECASE))
    if kind == "keywords:frequency":
        return _find_all(kwargs.get("keyword", "").strip(), text, start, end, re.IGNORECASE)
    if kind == "keywords:forbidden_words":
        words = kwargs.get("forbidden_words", [])
        return sorted(s for w in words for s in _find_all(r"\b" + w + r"\b", text, start, end, re.IGNORECASE))
    return [(start, end)]


# ------------------------------------------------------------------------------------- synthetic data

_TOPICS = ("the sea", "a red fox", "my garden", "the moon", "a small town", "winter", "an old train", "the rain")
_WORDS = ("blue", "river", "light", "stone", "song", "bird", "gold", "tree", "wind", "snow", "bread", "lamp")
_START_WORDS = ("today", "here", "yes", "now", "sometimes")
_END_PHRASES = ("Any other questions?", "Is there anything else I can help with?")
_SENTENCES = (
    "I like {t} a lot.",
    "We walk to {t} every day.",
    "There is a quiet path near {t}.",
    "My friend often thinks about {t}.",
    "It feels calm and warm.",
    "The sky is wide and clear.",
)

#: easy, deterministic constraint types used at the tiny scale
EASY_TYPES = (
    "startend:end_checker",
    "length_constraints:nth_paragraph_first_word",
    "keywords:existence",
    "change_case:english_lowercase",
    "punctuation:no_comma",
    "detectable_format:title",
    "detectable_content:postscript",
    "detectable_format:number_bullet_lists",
)
#: the larger pool used when more constraints per prompt are asked for than EASY_TYPES holds
FULL_TYPES = EASY_TYPES + (
    "keywords:frequency",
    "keywords:forbidden_words",
    "detectable_format:number_highlighted_sections",
    "detectable_content:number_placeholders",
    "startend:quotation",
    "language:response_language",
    "length_constraints:number_words",
    "length_constraints:number_sentences",
)


def _compose(types: list[str], rng: random.Random) -> tuple[str, str, list[dict]]:
    """Draw a topic and constraint arguments; return (topic, answer satisfying them all, kwargs per type)."""
    topic = rng.choice(_TOPICS)
    words = list(_WORDS)
    rng.shuffle(words)
    has = set(types)
    args: dict[str, dict] = {t: {} for t in types}

    start = rng.choice(_START_WORDS) if "length_constraints:nth_paragraph_first_word" in has else "so"
    lines = [f"{start.capitalize()} I write about {topic}."]
    if "detectable_format:title" in has:
        lines.append(f"<<{words[0]} and {topic}>>")
    if "keywords:existence" in has:
        args["keywords:existence"] = {"keywords": words[1:3]}
        lines.append(f"It has {words[1]} and {words[2]}.")
    if "keywords:frequency" in has:
        args["keywords:frequency"] = {"keyword": words[3], "frequency": 2, "relation": "at least"}
        lines.append(f"The {words[3]} is next to the {words[3]}.")
    lines.append(rng.choice(_SENTENCES).format(t=topic))
    if "detectable_format:number_highlighted_sections" in has:
        args["detectable_format:number_highlighted_sections"] = {"num_highlights": 2}
        lines.append(f"It is *{words[4]}* and *{words[5]}*.")
    if "detectable_content:number_placeholders" in has:
        args["detectable_content:number_placeholders"] = {"num_placeholders": 2}
        lines.append("Send it to [name] at [place].")
    if "detectable_format:number_bullet_lists" in has:
        n = rng.randint(2, 3)
        args["detectable_format:number_bullet_lists"] = {"num_bullets": n}
        lines += ["* " + rng.choice(_SENTENCES).format(t=topic) for _ in range(n)]
    if "detectable_content:postscript" in has:
        args["detectable_content:postscript"] = {"postscript_marker": "P.S."}
        lines.append(f"P.S. I will write more about {topic}.")
    if "startend:end_checker" in has:
        phrase = rng.choice(_END_PHRASES)
        args["startend:end_checker"] = {"end_phrase": phrase}
        lines.append(phrase)
    answer = "\n".join(lines)  # single newlines: one paragraph, so the first-word checker sees it
    if "change_case:english_lowercase" in has:
        answer = answer.lower()
    if "startend:quotation" in has:
        answer = f'"{answer}"'

    # arguments read off the finished answer, so that the reference satisfies them by construction
    if "length_constraints:nth_paragraph_first_word" in has:
        args["length_constraints:nth_paragraph_first_word"] = {"num_paragraphs": 1, "nth_paragraph": 1, "first_word": start}
    if "keywords:forbidden_words" in has:
        absent = [w for w in words if not re.search(r"\b" + w + r"\b", answer, re.IGNORECASE)]
        args["keywords:forbidden_words"] = {"forbidden_words": absent[:2]}
    if "language:response_language" in has:
        args["language:response_language"] = {"language": "en"}
    if "length_constraints:number_words" in has:
        from if_verifiable.ifeval.instructions_util import count_words

        args["length_constraints:number_words"] = {"num_words": count_words(answer) + rng.randint(3, 10), "relation": "less than"}
    if "length_constraints:number_sentences" in has:
        from if_verifiable.ifeval.instructions_util import count_sentences

        args["length_constraints:number_sentences"] = {"num_sentences": count_sentences(answer) + rng.randint(1, 4), "relation": "less than"}
    return topic, answer, [args[t] for t in types]


# ------------------------------------------------------------------------------------------ the task


class InstructionFollowing(Task):
    """Instruction following with one binary reward per constraint slot (IFEval/IFBench checkers).

    ``num_constraints``: range of constraints per synthetic prompt (2–4 at the tiny scale; ``(5, 13)``
    draws from the larger pool ``FULL_TYPES``). ``max_constraints``: number of reward slots
    (default: the upper end of ``num_constraints``).
    """

    name = "if"
    #: the mean over constraint slots (``report.evaluations`` adds it)
    answer_metric = "constraint_mean"
    data_description = "synthetic constraints (tiny) / HIR-16K, first two subsets"
    paper_data = (
        DataFile("hir16k", "train", "hir/hir16k.jsonl", "huggingface.co/datasets/sastpg/HIR-16K, its first two subsets "
                 "(IFEval- and IFBench-type constraints) written as IFEval JSONL (prompt, instruction_id_list, kwargs)"),
        DataFile("ifeval", "eval", "ifeval/input_data.jsonl", "google-research/instruction_following_eval data/input_data.jsonl"),
        DataFile("ifbench", "eval", "ifbench/IFBench_test.jsonl", "allenai/IFBench data/IFBench_test.jsonl; checkers: "
                 + CHECKERS_VERSION),
        DataFile("muldimif", "eval, external judge", "muldimif/test.json", "Junjie-Ye/MulDimIF Data/test.json "
                 "(load_muldimif; scored by its Code/evaluation)"),
        DataFile("advancedif", "eval, external judge", "advancedif/advancedif.jsonl", "huggingface.co/datasets/facebook/"
                 "AdvancedIF (load_advancedif; scored by its LLM judge, facebookresearch/AdvancedIF)"),
    )
    paper_run = dict(steps=300, prompts_per_step=32, num_generations=8, seeds=(0, 1, 2, 3, 4), learning_rate=1e-6,
                     max_completion_length=1024,
                     choices=(UNSTATED["num_generations"], UNSTATED["learning_rate"],
                              "prompts_per_step=32: not stated; as text-to-SQL"))
    paper_models = {"4b": ("Qwen/Qwen3-4B", 4.02e9), "7b": ("Qwen/Qwen2.5-7B-Instruct", 7.62e9)}
    tiny_completion_length = 160
    #: when block k is not shown, the warm-up target violates the constraint block k states
    warmup_noise = (Noise("constraint", 0.3),)
    #: a prompt with every constraint restated in Z reaches ~470 tokens and its reference ~150 (spaces are tokens)
    warmup_max_len = 640

    def __init__(self, num_constraints: tuple[int, int] = (2, 4), max_constraints: int | None = None):
        lo, hi = num_constraints
        self.num_constraints = (int(lo), int(hi))
        self.max_constraints = int(max_constraints or hi)
        if not 1 <= lo <= hi <= min(self.max_constraints, len(FULL_TYPES)):
            raise ValueError(f"num_constraints {num_constraints} must satisfy 1 <= lo <= hi <= max_constraints, {len(FULL_TYPES)}")
        self.reward_names = tuple(f"constraint_{i}" for i in range(self.max_constraints))
        self.answer_rewards = self.reward_names

    # data ------------------------------------------------------------------------------------------
    def load(self, path: str | Path):
        """``load_jsonl`` plus a check that no example has more constraints than this task has slots."""
        data = load_jsonl(path)
        most = max(len(ids) for ids in data["instruction_id_list"])
        if most > self.max_constraints:
            raise ValueError(f"{path}: an example has {most} constraints; use max_constraints >= {most}")
        return data

    def training_set(self, data_dir: Path):
        return self.load(Path(data_dir) / "hir" / "hir16k.jsonl")

    def real_benchmarks(self, data_dir: Path) -> dict[str, Benchmark]:
        """IFEval and IFBench, scored by their own accuracies (``evaluate``)."""
        return {"ifeval": Benchmark(self, self.load(Path(data_dir) / "ifeval" / "input_data.jsonl"), _if_accuracy),
                "ifbench": Benchmark(self, self.load(Path(data_dir) / "ifbench" / "IFBench_test.jsonl"), _if_accuracy)}

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train"):
        return self, self.synthetic(n, seed=seed, split=split, hide_value=True)

    #: the reward whose needed fact ``synthetic(hide_value=True)`` leaves out of the prompt
    hidden_rewards = ("constraint_0",)

    def synthetic(self, n: int, seed: int = 0, split: str = "train", hide_value: bool = False):
        """Short multi-constraint prompts drawn from the registry, each with a reference that satisfies them.

        ``hide_value``: the first constraint's description is left out of the prompt, so that it exists
        only in its Z block (the reading test of issue 5); the same prompts are drawn either way.
        """
        from datasets import Dataset

        rng = random.Random(f"if-{seed}-{split}")
        pool = EASY_TYPES if self.num_constraints[1] <= len(EASY_TYPES) else FULL_TYPES
        rows = []
        for i in range(n):
            types = rng.sample(pool, rng.randint(*self.num_constraints))
            topic, answer, kws = _compose(types, rng)
            descriptions = [describe(t, kw) for t, kw in zip(types, kws)]
            prompt = f"Write a short note about {topic}. " + " ".join(descriptions[1:] if hide_value else descriptions)
            rows.append(
                {
                    "key": f"{split}-{seed}-{i}",
                    "prompt": [{"role": "user", "content": prompt}],
                    "prompt_text": prompt,
                    "instruction_id_list": types,
                    "kwargs": json.dumps(kws),
                    "reference": f"<think>a note about {topic} with {len(types)} rules</think>\n{answer}",
                }
            )
        return Dataset.from_list(rows)

    def reference_response(self, example: dict) -> str:
        """The synthetic example's stored gold response (real benchmark data has none)."""
        if not example.get("reference"):
            raise ValueError("only synthetic examples carry a reference response")
        return example["reference"]

    # rewards ---------------------------------------------------------------------------------------
    def reward_funcs(self):
        return [self._slot_reward(i) for i in range(self.max_constraints)]

    def _slot_reward(self, slot: int):
        """Reward of constraint slot ``slot``: 1.0/0.0, None where the example has no such constraint."""

        def score(text: str, example: dict) -> float | None:
            ids = example["instruction_id_list"]
            if slot >= len(ids):
                return None
            kw = kwargs_list(example["kwargs"])[slot]
            return float(check_constraint(text, ids[slot], kw, example["prompt_text"]))

        return reward_function(f"constraint_{slot}", score, _example)

    # Z blocks and check regions --------------------------------------------------------------------
    def z_blocks(self, prompts, completions, **columns):
        blocks = []
        for j in range(len(completions)):
            example = _example(prompts, j, columns)
            block = {}
            if example is not None:
                for i, (iid, kw) in enumerate(zip(example["instruction_id_list"], kwargs_list(example["kwargs"]))):
                    if i < self.max_constraints:
                        block[f"constraint_{i}"] = describe(iid, kw)
            blocks.append(block)
        return blocks

    def reward_label(self, name: str, example: dict) -> str:
        """The constraint type a slot reward checks in this example (e.g. ``startend:end_checker``)."""
        ids = list(example.get("instruction_id_list") or [])
        slot = int(name.rsplit("_", 1)[-1]) if name.startswith("constraint_") else -1
        return ids[slot] if 0 <= slot < len(ids) else name

    def check_regions(self, completion, example):
        text = completion_text(completion)
        regions: dict[str, Spans] = {"think": think_span(text)}
        try:
            pairs = list(zip(example["instruction_id_list"], kwargs_list(example["kwargs"])))
        except Exception:  # an example without constraint columns has only the think region
            return regions
        for i, (iid, kw) in enumerate(pairs[: self.max_constraints]):
            try:
                regions[f"constraint_{i}"] = constraint_region(text, iid, kw)
            except Exception:  # e.g. a keyword that is not a valid regex: no localisable region
                regions[f"constraint_{i}"] = []
        return regions


def _if_accuracy(task, rows: list[dict], texts: list[str]) -> dict[str, float]:
    """Benchmark scorer of IFEval/IFBench: ``evaluate`` over (row, response) pairs."""
    return evaluate(list(zip(rows, texts)))


def _example(prompts: list, j: int, columns: dict) -> dict | None:
    """Row ``j`` of the constraint columns TRL passes as keyword arguments (None if they are missing)."""
    try:
        ids = list(columns["instruction_id_list"][j])
        kws = columns["kwargs"][j]
    except (KeyError, IndexError, TypeError):
        return None
    texts = columns.get("prompt_text")
    prompt = texts[j] if texts is not None else completion_text(prompts[j] if j < len(prompts) else "")
    return {"instruction_id_list": ids, "kwargs": kws, "prompt_text": prompt}
