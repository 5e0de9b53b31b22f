"""``TextToSQL``: the rewards, their Z blocks and check regions, and the task's entries for the runner.

A response is ``<think>reasoning</think><answer>SQL</answer>`` (``layout``). Rewards (binary):

* ``format``: exactly that layout (each tag once, only whitespace outside the two blocks);
* ``executable``: the answer SQL runs without error in the sandbox (``sandbox``);
* ``execution_match``: Spider execution accuracy against the gold SQL with the official test-suite-sql-eval
  rule (``match.results_match``: result multisets, row order only when the gold query has ORDER BY, columns
  matched up to a permutation); training reward and evaluation use the same rule;
* optional sqlglot sub-verifiers (``sub_verifiers=True``): ``sql_tables``, ``sql_columns``,
  ``sql_where``, ``sql_joins``, each comparing one set of parsed items of answer and gold (``items``).

Reward sets (``rewards=``): ``default`` (format, executable, execution_match, plus the sub-verifiers when
``sub_verifiers``); ``sub``: the execution reward replaced by its four check actions (format, executable and
the four sub-verifiers, K = 6), each with its own Z block (the gold's items), so each can pin its span.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from mrtpo.files.paths import cache_root
from ..base import UNSTATED, Benchmark, DataFile, Noise, Spans, Task, completion_text, reward_function, reward_means, think_span
from .items import SUB_VERIFIERS, describe_query, node_span, parse_sql, sql_items
from .layout import FORMAT_TEMPLATE, answer_sql, answer_sql_span, is_well_formed, tag_spans
from .match import gold_is_ordered, results_match
from .sandbox import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, SQLExecutor
from .spider import SPIDER_FILES, load_bird, load_spider_split
from .synthetic import synthetic_sql

#: seconds a gold query may run: the dataset's SQL, not the policy's, so a timeout there would say the machine was
#: busy, not that the gold is broken, yet turn every response of its group into "judges nothing"
GOLD_TIMEOUT_S = 10.0

#: how each verifier's Z block is written; the label tells the model what the text is
Z_TEMPLATES = {
    "format": "Required format: {}",
    "executable": "Execution of your SQL: {}",
    "execution_match": "Reference SQL: {}",
    "sql_tables": "Reference tables: {}",
    "sql_columns": "Reference selected columns: {}",
    "sql_where": "Reference WHERE predicates: {}",
    "sql_joins": "Reference JOINs: {}",
}


def _example(prompts: list, i: int, columns: dict) -> dict:
    """Row ``i`` of the per-completion columns (lists from TRL, or ``datasets`` columns); scalar kwargs
    such as TRL's callbacks and trainer state are left out."""
    return {
        k: v[i]
        for k, v in columns.items()
        if hasattr(v, "__len__") and hasattr(v, "__getitem__") and not isinstance(v, (str, bytes, dict)) and i < len(v)
    }


class TextToSQL(Task):
    """The text-to-SQL task (paper §4): Spider-format data, three rewards, optional sub-verifiers.

    ``timeout_s`` is the sandbox's budget for the policy's SQL (a query over it is not executable);
    ``gold_timeout_s`` the budget of the gold query execution_match compares with (``GOLD_TIMEOUT_S``).
    """

    name = "sql"
    answer_rewards = ("execution_match",)
    answer_metric = "execution_match"
    data_description = "synthetic text-to-SQL (tiny) / Spider train, 6,915 questions"
    paper_data = tuple(DataFile(name, "train" if name == "spider_train" else "eval", f"spider/{f}", src)
                       for name, (f, _, src) in SPIDER_FILES.items()) + (
        DataFile("bird_dev", "eval", "bird/dev/dev.json", "bird-bench.github.io dev.zip (dev.json, dev_tables.json, "
                 "dev_databases/); scored here with Spider's rule, not BIRD's set comparison (load_bird)"),)
    paper_run = dict(steps=100, prompts_per_step=32, num_generations=8, seeds=(0, 1, 2), learning_rate=1e-6,
                     max_completion_length=1024, choices=tuple(UNSTATED.values()) + (
                         "max_completion_length=1024: not stated; room for the ~330-token responses the paper reports "
                         "at the start of training, with margin",
                         "checkpoint=Qwen/Qwen2.5-Coder-3B-Instruct, Qwen/Qwen2.5-Coder-7B-Instruct: the paper names "
                         "Qwen2.5-Coder-3B and -7B without saying base or instruct; the Instruct checkpoints are taken "
                         "(the prompts are chat conversations)"))
    reward_sets = ("default", "sub")
    paper_models = {"3b": ("Qwen/Qwen2.5-Coder-3B-Instruct", 3.09e9), "7b": ("Qwen/Qwen2.5-Coder-7B-Instruct", 7.62e9)}
    #: warm-up noise: swapped operators/columns (execution_match), misspelt keywords (executable), dropped tags
    #: (format). Values are never corrupted: swapping values while the question states them teaches the policy
    #: not to copy (prototype)
    warmup_noise = (
        Noise("structure", 0.35, ("execution_match",)),
        Noise("syntax", 0.15, ("executable",)),
        Noise("tag", 0.15, ("format",)),
    )
    think_values = re.compile(r" and values? [^<]*?(?=\.</think>)")

    def __init__(
        self,
        sub_verifiers: bool = False,
        rewards: str = "default",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        gold_timeout_s: float = GOLD_TIMEOUT_S,
        max_rows: int = DEFAULT_MAX_ROWS,
        db_cache_dir: str | Path | None = None,
    ):
        if rewards not in self.reward_sets:
            raise ValueError(f"rewards={rewards!r} is not valid; valid values: {', '.join(self.reward_sets)}")
        self.sub_verifiers = sub_verifiers or rewards == "sub"
        execution = ("execution_match",) if rewards == "default" else ()
        self.reward_names = ("format", "executable") + execution + (SUB_VERIFIERS if self.sub_verifiers else ())
        self.executor = SQLExecutor(timeout_s=timeout_s, max_rows=max_rows)
        self.gold_timeout_s = gold_timeout_s
        self.db_cache_dir = Path(db_cache_dir) if db_cache_dir else cache_root() / "sql_dbs"

    # ---- per-response checks: (completion, example) -> reward; exceptions are caught by safe_reward
    def _check_format(self, completion: Any, example: dict) -> float:
        return float(is_well_formed(completion_text(completion)))

    def _check_executable(self, completion: Any, example: dict) -> float:
        sql = answer_sql(completion_text(completion))
        return float(sql is not None and self.executor.run(example["db_path"], sql).ok)

    def _check_execution_match(self, completion: Any, example: dict) -> float | None:
        gold = self.executor.run(example["db_path"], example["gold_sql"], timeout_s=self.gold_timeout_s)
        if not gold.ok:
            return None  # a broken gold query judges nothing
        sql = answer_sql(completion_text(completion))
        if sql is None:
            return 0.0
        return float(results_match(self.executor.run(example["db_path"], sql), gold, gold_is_ordered(example["gold_sql"])))

    def _check_items(self, kind: str) -> Callable[[Any, dict], float | None]:
        def check(completion: Any, example: dict) -> float | None:
            gold = parse_sql(example["gold_sql"])
            if gold is None:
                return None
            sql = answer_sql(completion_text(completion))
            tree = parse_sql(sql) if sql else None
            if tree is None:
                return 0.0
            return float({k for k, _ in sql_items(tree, kind)} == {k for k, _ in sql_items(gold, kind)})

        return check

    def _checks(self) -> dict[str, Callable[[Any, dict], float | None]]:
        checks = {
            "format": self._check_format,
            "executable": self._check_executable,
            "execution_match": self._check_execution_match,
        }
        if self.sub_verifiers:
            checks.update({kind: self._check_items(kind) for kind in SUB_VERIFIERS})
        return {name: checks[name] for name in self.reward_names}

    def reward_funcs(self) -> list[Callable[..., list]]:
        """One TRL reward function per reward name; none of them raises."""
        return [reward_function(name, check, _example) for name, check in self._checks().items()]

    # ---- privileged context
    def z_blocks(self, prompts: list, completions: list, **columns: Any) -> list[dict[str, str]]:
        """Per response: reference SQL (execution_match), this response's execution error
        (executable), the output template (format) and, with sub-verifiers, the gold's items."""
        blocks = []
        for i, completion in enumerate(completions):
            example, block = _example(prompts, i, columns), {"format": Z_TEMPLATES["format"].format(FORMAT_TEMPLATE)}
            try:
                sql = answer_sql(completion_text(completion))
                result = self.executor.run(example["db_path"], sql) if sql else None
                status = "no SQL in <answer>" if result is None else (result.error or "executes without error")
                block["executable"] = Z_TEMPLATES["executable"].format(status)
                if "execution_match" in self.reward_names:
                    block["execution_match"] = Z_TEMPLATES["execution_match"].format(example["gold_sql"])
                gold = parse_sql(example["gold_sql"]) if self.sub_verifiers else None
                for kind in SUB_VERIFIERS if gold is not None else ():
                    # the gold's items as written (aliases included), unique, in order
                    items = dict.fromkeys(node.sql(dialect="sqlite") for _, node in sql_items(gold, kind))
                    block[kind] = Z_TEMPLATES[kind].format("; ".join(items) or "none")
            except Exception:  # a malformed row loses its blocks (never replayed), it does not crash
                pass
            blocks.append(block)
        return blocks

    def check_regions(self, completion: Any, example: dict) -> dict[str, Spans]:
        """Character spans each verifier reads: the four tags (format), the answer SQL (executable,
        execution_match), the items' tokens in the answer SQL (sub-verifiers; the whole SQL when it does
        not parse) and, for region plots, the ``<think>`` content (``think``)."""
        text = completion_text(completion)
        sql_span = answer_sql_span(text)
        regions: dict[str, Spans] = {
            "format": tag_spans(text),
            "executable": [sql_span] if sql_span else [],
            "execution_match": [sql_span] if sql_span else [],
            "think": think_span(text),
        }
        if self.sub_verifiers:
            regions.update(self._item_regions(text, sql_span))
        return regions

    @staticmethod
    def _item_regions(text: str, sql_span: tuple[int, int] | None) -> dict[str, Spans]:
        """Per sub-verifier, where the answer SQL's items are: nothing without an answer block, the whole
        SQL when it cannot be itemised (the verifier read all of it to fail)."""
        if sql_span is None:
            return {kind: [] for kind in SUB_VERIFIERS}
        sql = text[sql_span[0] : sql_span[1]]
        tree = parse_sql(sql)
        regions = {}
        for kind in SUB_VERIFIERS:
            try:
                spans = {node_span(node, sql) for _, node in sql_items(tree, kind)} - {None}
                regions[kind] = sorted((s + sql_span[0], e + sql_span[0]) for s, e in spans)
            except Exception:  # no tree, or an odd tree sqlglot accepted
                regions[kind] = [sql_span]
        return regions

    # ---- data
    def reference_response(self, example: dict) -> str:
        """``<think>`` naming the tables (and values) the query uses, then the gold SQL in ``<answer>``."""
        reasoning = example.get("reasoning") or describe_query(example["gold_sql"])
        return f"<think>{reasoning}</think><answer>{example['gold_sql']}</answer>"

    def synthetic(self, n: int, seed: int = 0, split: str = "train", hide_value: bool | float = False):
        """``n`` templated questions over small deterministic databases; see ``synthetic_sql``."""
        return synthetic_sql(n, seed=seed, split=split, hide_value=hide_value, cache_dir=self.db_cache_dir)

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train"):
        return self, self.synthetic(n, seed=seed, split=split, hide_value=True)

    def training_set(self, data_dir: Path):
        """Spider train, original questions (``SpiderQuestion``; the databases missing from the rebuilt set are skipped)."""
        return load_spider_split(Path(data_dir) / "spider", "spider_train")

    def real_benchmarks(self, data_dir: Path) -> dict[str, Benchmark]:
        """Every Spider-family evaluation set whose file is under ``data_dir`` (``SPIDER_FILES``; Spider dev and
        Spider-Realistic on the project's machines) and BIRD dev when present, scored by the rewards' means
        (execution_match: execution accuracy)."""
        spider, bird = Path(data_dir) / "spider", Path(data_dir) / "bird" / "dev"
        out = {name: Benchmark(self, load_spider_split(spider, name), reward_means)
               for name, (f, _, _) in SPIDER_FILES.items() if name != "spider_train" and (spider / f).is_file()}
        if (bird / "dev.json").is_file():
            out["bird_dev"] = Benchmark(self, load_bird(bird), reward_means)
        return out
