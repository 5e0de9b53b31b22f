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
  character spans ``[start, end)`` of the completion text that each verifier actually reads (``read_regions``:
  the same with a reward function's signature, what the trainer's ``region`` method takes).
* ``synthetic(n, seed, split)``: a ``datasets.Dataset`` in the task's record format with a
  conversational ``prompt`` column, for the tiny scale.
* ``reference_response(example)``: the gold response in the paper's layout
  (``<think>…</think>`` then the answer region), used for supervised warm-up of tiny bases.

Everything else the runner, the registry and the tiny-base builder need from a task is a field or a method
with a default here, so a new task is one file plus one line in ``TASKS``:

* ``hidden_value_split(n, seed, split)``: examples whose needed fact is only in Z (``None``: the task has none);
* ``training_set(data_dir)`` / ``real_benchmarks(data_dir)``: the paper-scale data;
* ``benchmarks(scale, n, seed, data_dir)``: name -> ``Benchmark`` (held-out data and its scorer);
* ``answer_metric``, ``reward_label(name, example)``: what tables and localisation plots show;
* ``reward_sets``: the reward sets the runner may train with (``get_task(name, rewards=...)``; evaluation always
  scores with the default set);
* ``paper_run`` / ``paper_models`` / ``tiny_completion_length`` / ``data_description``: the registry's entries;
* ``warmup_noise``, ``warmup_max_len``, ``think_values``, ``dial_options``, ``corrupt(...)``: how a tiny base is
  warmed up (``mrtpo.models.tiny``; corruptions in ``mrtpo.tasks.warmup``).
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from mrtpo.files.paths import DataNotAvailable

RewardFunc = Callable[..., list]
Spans = list[tuple[int, int]]


@dataclass(frozen=True)
class Noise:
    """One kind of warm-up target noise: applied with probability ``p`` when none of the ``gate`` Z blocks is
    shown (an empty gate: "whatever the prompt shows"). ``kind`` names a corruption of ``Task.corrupt``
    (``mrtpo.tasks.warmup.CORRUPTIONS``); ``constraint`` is drawn once per Z block instead, gated on that block
    alone: when block k is not shown, the response violates what block k states with probability ``p``."""

    kind: str
    p: float
    gate: tuple[str, ...] = ()

    def __post_init__(self):
        # JSON gives 0 for 0.0: without the cast one recipe would hash two ways (``tiny.recipe_hash``)
        object.__setattr__(self, "p", float(self.p))
        object.__setattr__(self, "gate", tuple(self.gate))

    @property
    def gated(self) -> bool:
        """Whether the noise depends on which Z blocks the prompt shows (a gate, or ``constraint``, gated per
        block): the noise that decides where the with/without-Z shift lands, and that ``tiny.dial_recipe`` turns."""
        return bool(self.gate) or self.kind == "constraint"


#: paper-scale hyperparameters the paper does not state, with the reason for the value chosen (``paper_run``)
UNSTATED = {
    "num_generations": "num_generations=8: group size not stated; 8 is the common GRPO/GDPO setting",
    "kl_beta": "kl_beta=0: KL stated absent only for instruction following; no reference model keeps runs comparable",
    "learning_rate": "learning_rate=1e-6: not stated; TRL's default for full fine-tuning of 1.5B–7B models",
    "temperature": "temperature=1.0: the sampling temperature of training is not stated; 1.0 (TRL's default) samples "
                   "the policy's own distribution, at which the importance ratio and MRTPO's relevance are computed",
    "loss_type": "loss_type=dapo: how token losses are normalised is not stated; TRL's GRPOConfig default (summed over "
                 "the accumulated batch, divided by its number of completion tokens); the constlen control takes dr_grpo",
}

Scorer = Callable[["Task", list, list], dict]


class DataFile(NamedTuple):
    """A paper-scale data file: its role, where it goes under the data root, and where to get it."""

    name: str
    role: str  # "train", "eval" (scored here) or "eval, external judge" (loaded here, scored by its own code)
    path: str  # relative to the data root ($MRTPO_DATA_DIR)
    source: str


def count_records(path: Path) -> int:
    """Records of a JSON list, a JSONL file or a parquet file."""
    if path.suffix == ".parquet":
        import pandas as pd

        return len(pd.read_parquet(path))
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as fh:
            return sum(1 for line in fh if line.strip())
    return len(json.loads(path.read_text(encoding="utf-8")))


class Benchmark(NamedTuple):
    """One held-out evaluation set: the task that scores it, its rows, and ``scorer(task, rows, texts)``."""

    task: "Task"
    data: Any
    scorer: Scorer


def reward_means(task: "Task", rows: list[dict], texts: list[str]) -> dict[str, float]:
    """Mean of every reward over (row, completion) pairs; rewards that do not apply (None) are left out."""
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    out = {}
    for func in task.reward_funcs():
        values = [v for v in func([r["prompt"] for r in rows], completions, **columns) if v is not None and v == v]
        out[func.__name__] = sum(values) / len(values) if values else math.nan
    return out


class Task:
    """Base class for a task; subclasses fill in the attributes and methods below."""

    name: str = ""
    reward_names: tuple[str, ...] = ()
    #: rewards that judge the answer's content (not its format); used by acceptance checks and tables
    answer_rewards: tuple[str, ...] = ()
    #: reward sets the task's constructor accepts as ``rewards=`` ("default": the paper's rewards)
    reward_sets: tuple[str, ...] = ("default",)
    #: the tables' headline metric at the tiny scale (a reward name, or a column ``report.evaluations`` adds)
    answer_metric: str = ""
    #: one line on the training data of each scale, for ``mrtpo plan``
    data_description: str = ""
    #: the paper-scale files, present or not (``data_status``, listed by ``mrtpo plan``)
    paper_data: tuple[DataFile, ...] = ()
    #: the paper's run hyperparameters of this task (``ModelSpec`` fields: steps, seeds, ...) and the
    #: hyperparameters the paper does not state, with the reason for the value chosen (``choices``)
    paper_run: dict = {}
    #: registry name -> (Hugging Face checkpoint, parameter count) of the paper's models for this task
    paper_models: dict[str, tuple[str, float]] = {}
    #: completion length of the tiny scale (long enough for the reference responses)
    tiny_completion_length: int = 96
    #: where the tiny base's warm-up puts noise (``mrtpo.models.tiny``): each kind gated on the Z block whose verifier
    #: reads the corrupted region, so that removing Z_k moves the policy where verifier k reads
    warmup_noise: tuple[Noise, ...] = ()
    #: warm-up sequence length when the default (384 tokens) would cut this task's examples
    warmup_max_len: int | None = None
    #: the part of the reference ``<think>`` that restates values (removed when a recipe has think_values=False)
    think_values: re.Pattern | None = None
    #: ``Recipe`` fields this task's dial bases set on top of ``tiny.DIAL_STAGE2`` (e.g. a ``think_drop``): what
    #: the task's references carry that would otherwise make one token shift for every block
    dial_options: dict = {}

    @property
    def hidden_rewards(self) -> tuple[str, ...]:
        """Rewards whose needed fact ``hidden_value_split`` leaves out of the prompt (default: answer_rewards)."""
        return self.answer_rewards

    def reward_funcs(self) -> list[RewardFunc]:
        raise NotImplementedError

    def z_blocks(self, prompts: list, completions: list, **columns: Any) -> list[dict[str, str]]:
        raise NotImplementedError

    def check_regions(self, completion: str, example: dict) -> dict[str, Spans]:
        raise NotImplementedError

    def read_regions(self, prompts: list, completions: list, completion_ids=None, **columns: Any) -> list[dict[str, Spans]]:
        """``check_regions`` with a reward function's signature, as the trainer takes it (``MRTPOTrainer``'s
        ``check_regions=``, like ``z_blocks``): per response, ``{reward name: char spans}`` of what each verifier
        reads, the example being the response's row of the per-response ``columns``."""
        rows = [{k: v[j] for k, v in columns.items() if isinstance(v, (list, tuple)) and j < len(v)}
                for j in range(len(completions))]
        return [self.check_regions(c, row) for c, row in zip(completions, rows)]

    def synthetic(self, n: int, seed: int = 0, split: str = "train"):
        raise NotImplementedError

    def reference_response(self, example: dict) -> str:
        raise NotImplementedError

    # -- optional, with defaults --------------------------------------------------------------------------
    def reward_label(self, name: str, example: dict) -> str:
        """What reward ``name`` checks in ``example`` (IF: the constraint type); by default the reward's name."""
        return name

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train") -> tuple["Task", Any] | None:
        """(task that scores them, ``n`` synthetic examples whose needed fact is only in Z), or None."""
        return None

    def training_set(self, data_dir: Path):
        """The paper-scale training set under ``data_dir`` (``mrtpo.files.paths.data_root()``)."""
        raise NotImplementedError(f"task {self.name!r} has no paper-scale training set")

    def real_benchmarks(self, data_dir: Path) -> dict[str, Benchmark]:
        """The paper-scale held-out benchmarks under ``data_dir``."""
        raise NotImplementedError(f"task {self.name!r} has no paper-scale benchmarks")

    def benchmarks(self, scale: str, n: int, seed: int, data_dir: Path) -> dict[str, Benchmark]:
        """name -> Benchmark. Tiny: the held-out synthetic test split (``n`` prompts), and the hidden-value split
        when the task has one. Real: ``real_benchmarks`` (``DataNotAvailable`` where one of its files is missing)."""
        if scale != "tiny":
            try:
                return self.real_benchmarks(data_dir)
            except FileNotFoundError as exc:
                raise DataNotAvailable(str(exc) if exc.filename is None else f"{exc.filename}: file not found") from exc
        out = {"synthetic_test": Benchmark(self, self.synthetic(n, seed=seed, split="test"), reward_means)}
        hidden = self.hidden_value_split(n, seed=seed, split="test")
        if hidden is not None:
            out["synthetic_hide_value"] = Benchmark(hidden[0], hidden[1], reward_means)
        return out

    def data_status(self, data_dir: Path) -> list[dict]:
        """Each ``paper_data`` file: whether it is under ``data_dir`` and its number of records, or where to get it."""
        rows = []
        for f in self.paper_data:
            path = Path(data_dir) / f.path
            row = {"name": f.name, "role": f.role, "path": str(path), "present": path.is_file()}
            row.update({"records": count_records(path)} if path.is_file() else {"get_it_from": f.source})
            rows.append(row)
        return rows

    def corrupt(self, response: str, kind: str, rng: random.Random, words: list[str], label: str = "") -> str:
        """One warm-up corruption of ``kind`` (a ``Noise.kind``); ``label`` is ``reward_label`` of the block a
        ``constraint`` noise is gated on. The response unchanged when there is nothing to corrupt."""
        from .warmup import CORRUPTIONS

        if kind not in CORRUPTIONS:
            raise ValueError(f"unknown noise kind {kind!r}; known: {', '.join(CORRUPTIONS)}")
        return CORRUPTIONS[kind](response, rng, words, label)


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
    """Shrink ``[start, end)`` past whitespace at both ends (``str.isspace``'s whitespace, as ``str.strip``'s)."""
    span = text[start:end]  # strip in C: a character loop took seconds on a megabyte of padding
    left = len(span) - len(span.lstrip())
    return start + left, start + max(len(span.rstrip()), left)


def think_span(text: str) -> Spans:
    """``[(start, end)]`` of the reasoning between the first ``<think>`` and the next ``</think>``; ``[]`` when
    absent or empty. Every task's check regions include it as ``think`` (shift-by-region plots)."""
    open_ = text.find("<think>")
    close = text.find("</think>", open_ + len("<think>")) if open_ >= 0 else -1
    start = open_ + len("<think>")
    return [(start, close)] if close > start else []
