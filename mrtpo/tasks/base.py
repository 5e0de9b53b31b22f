"""The one shape every task has.

A task knows its data, its verifiers and what each verifier reads; it knows nothing about training.

* ``reward_funcs()``: one function per reward, TRL's signature
  ``f(prompts, completions, completion_ids=None, **dataset_columns) -> list[float | None]``,
  each function's ``__name__`` is the reward's name (TRL logs under that name). ``None`` means the
  reward does not apply to that example (TRL turns it into NaN and it gets no advantage).
* ``z_blocks(prompts, completions, **dataset_columns) -> list[dict[str, str]]``: for every sampled
  response, the text Z_k each verifier judges with, keyed by reward name. Same signature as a reward
  function, so a notebook can pass its own formulation of Z_k to the trainer in a few lines.
  A reward without an entry has no privileged information and is never replayed.
* ``check_regions(completion, example) -> dict[str, list[tuple[int, int]]]``: for one response, the
  character spans ``[start, end)`` of the completion text that each verifier actually reads.
* ``synthetic(n, seed, split)``: a ``datasets.Dataset`` in the task's record format with a
  conversational ``prompt`` column, for the tiny scale.
* ``reference_response(example)``: the gold response in the paper's layout
  (``<think>…</think>`` then the answer region), used for supervised warm-up of tiny bases.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

RewardFunc = Callable[..., list]
Spans = list[tuple[int, int]]


class Task:
    """Base class for a task; subclasses fill in the attributes and methods below."""

    name: str = ""
    reward_names: tuple[str, ...] = ()
    #: rewards that judge the answer's content (not its format); used by acceptance checks and tables
    answer_rewards: tuple[str, ...] = ()

    def reward_funcs(self) -> list[RewardFunc]:
        raise NotImplementedError

    def z_blocks(self, prompts: list, completions: list, **columns: Any) -> list[dict[str, str]]:
        raise NotImplementedError

    def check_regions(self, completion: str, example: dict) -> dict[str, Spans]:
        raise NotImplementedError

    def synthetic(self, n: int, seed: int = 0, split: str = "train"):
        raise NotImplementedError

    def reference_response(self, example: dict) -> str:
        raise NotImplementedError


def completion_text(completion: Any) -> str:
    """The text of one completion as TRL hands it to reward functions (string, or chat messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return ""


def safe_reward(func: Callable[[str, dict], float | None]) -> Callable[[str, dict], tuple[float | None, str]]:
    """Wrap a per-response checker so that any exception becomes reward 0 with the reason, never a crash."""

    def wrapped(text: str, example: dict) -> tuple[float | None, str]:
        try:
            return func(text, example), ""
        except Exception as exc:  # a verifier must never crash a training step
            return 0.0, f"{type(exc).__name__}: {exc}"[:200]

    wrapped.__name__ = getattr(func, "__name__", "reward")
    return wrapped


def reward_function(name: str, score: Callable[[str, dict], float | None],
                    example_of: Callable[[list, int, dict], dict | None], needs_example: bool = True) -> Callable[..., list]:
    """A TRL reward function named ``name``: ``reward(prompts, completions, completion_ids=None, **columns)``
    returns ``score(text, example)`` for each completion's text, with ``example = example_of(prompts, j,
    columns)``; None where the example is missing and ``needs_example``. A checker that raises scores 0 and is
    counted (``safe_reward``, ``report_checker_errors``): a reward function never crashes a training step."""
    safe = safe_reward(score)

    def reward(prompts, completions, completion_ids=None, **columns):
        scores, reasons = [], []
        for j, completion in enumerate(completions):
            example = example_of(prompts, j, columns)
            value, reason = (None, "") if needs_example and example is None else safe(completion_text(completion), example)
            scores.append(value)
            reasons.append(reason)
        report_checker_errors(name, scores, reasons, columns)
        return scores

    reward.__name__ = name
    return reward


def report_checker_errors(name: str, scores: list, reasons: list[str], columns: dict) -> None:
    """Count one batch's checker errors and not-applicable responses into TRL's per-step metrics (through the
    ``log_metric`` callback TRL passes to reward functions) and log the first error's reason."""
    errors = [r for r in reasons if r]
    if errors:
        logging.getLogger("mrtpo.tasks").warning("%s: %d checker error(s), e.g. %s", name, len(errors), errors[0])
    log_metric = columns.get("log_metric")
    if callable(log_metric):
        log_metric(f"{name}/checker_errors", float(len(errors)))
        log_metric(f"{name}/not_applicable", float(sum(s is None for s in scores)))


def strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` past whitespace at both ends."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def think_span(text: str) -> Spans:
    """``[(start, end)]`` of the reasoning between the first ``<think>`` and the next ``</think>``; ``[]`` when
    absent or empty. Every task's check regions include it as ``think`` (shift-by-region plots)."""
    open_ = text.find("<think>")
    close = text.find("</think>", open_ + len("<think>")) if open_ >= 0 else -1
    start = open_ + len("<think>")
    return [(start, close)] if close > start else []
