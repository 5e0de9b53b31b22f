"""Text-to-SQL: Spider-format data, a synthetic tiny-scale generator, verifiers, Z blocks, check regions.

A response is ``<think>reasoning</think><answer>SQL</answer>``. Rewards (binary):

* ``format``: exactly that layout (each tag once, only whitespace outside the two blocks);
* ``executable``: the answer SQL runs without error in the sandbox (``sqlexec``);
* ``execution_match``: Spider execution accuracy against the gold SQL with the official test-suite-sql-eval
  rule (``sqlexec.results_match``: result multisets, row order only when the gold query has ORDER BY, columns
  matched up to a permutation); training reward and evaluation use the same rule;
* optional sqlglot sub-verifiers (``sub_verifiers=True``): ``sql_tables``, ``sql_columns``,
  ``sql_where``, ``sql_joins``, each comparing one set of parsed items of answer and gold.

Reward sets (``rewards=``): ``default`` (format, executable, execution_match, plus the sub-verifiers when
``sub_verifiers``); ``sub``: the execution reward replaced by its four check actions (format, executable and
the four sub-verifiers, K = 6), each with its own Z block (the gold's items), so each can pin its span.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import sqlite3
from pathlib import Path
from typing import Any, Callable

import sqlglot
from sqlglot import exp

from ..paths import cache_root
from .base import UNSTATED, Benchmark, DataFile, Noise, Spans, Task, completion_text, reward_function, reward_means, strip_span, think_span
from .sqlexec import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, SQLExecutor, results_match

TAGS = ("<think>", "</think>", "<answer>", "</answer>")
FORMAT_TEMPLATE = "<think>reasoning</think><answer>SQL</answer>"
FORMAT_INSTRUCTION = f"Reply as {FORMAT_TEMPLATE}"
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
SUB_VERIFIERS = ("sql_tables", "sql_columns", "sql_where", "sql_joins")

#: the paper-scale Spider files under a data root's ``spider/`` folder: name -> (questions file, question field,
#: where to get it). Databases are ``spider/database/<db_id>/<db_id>.sqlite``, schemas ``spider/tables.json``.
SPIDER_FILES = {
    "spider_train": ("train_spider_syn.json", "SpiderQuestion",
                     "Spider train: taoyds/spider train_spider.json, or ygan/Spider-Syn Spider-Syn/train_spider.json"),
    "spider_dev": ("dev.json", "question", "taoyds/spider evaluation_examples/examples/dev.json"),
    "spider_syn_dev": ("dev_spider_syn.json", "SpiderSynQuestion", "ygan/Spider-Syn Spider-Syn/dev.json"),
    "spider_realistic": ("spider_realistic.json", "question", "Spider-Realistic (Deng et al. 2021), spider-realistic.json"),
    "spider_dk": ("spider_dk.json", "question", "ygan/Spider-DK Spider-DK.json (its databases go into spider/database)"),
}

_FORMAT_RE = re.compile(r"\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*", re.S)
_ORDER_BY_RE = re.compile(r"\border\s+by\b", re.I)
#: longer "SQL" is not parsed by sqlglot (pure-Python parsing of megabytes of garbage takes seconds)
_MAX_PARSE_CHARS = 20_000


# ----------------------------------------------------------------------------------------- parsing
# Locating is done with str.find rather than lazy regexes, which go quadratic on inputs such as a
# megabyte of whitespace or thousands of unclosed tags.
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


# ------------------------------------------------------------------------------- sqlglot items
@functools.lru_cache(maxsize=2048)
def _parse(sql: str) -> exp.Expression | None:
    """sqlglot's tree of ``sql`` (SQLite dialect), or None when it does not parse or is too long.

    Cached because every sub-verifier parses the same gold and answer; callers never mutate a tree
    (``_normalise`` transforms a copy)."""
    if len(sql) > _MAX_PARSE_CHARS:
        return None
    try:
        return sqlglot.parse_one(sql, read="sqlite")
    except Exception:  # sqlglot raises ParseError and, on odd input, other errors
        return None


def _normalise(node: exp.Expression, aliases: dict[str, str] | None) -> str:
    """Canonical text of one item: identifiers lower-cased, table qualifiers dropped (``aliases`` None)
    or resolved to table names, ``"x"`` read as the string ``'x'`` (Spider's habit), EQ sides sorted."""

    def canonical(n: exp.Expression) -> exp.Expression:
        if not (isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier)):
            return n
        qualifier = n.table.lower()
        if n.this.quoted and not qualifier:
            return exp.Literal.string(n.name)
        table = aliases.get(qualifier, qualifier) if aliases is not None and qualifier else None
        return exp.column(n.name.lower(), table=table)

    node = (node.this if isinstance(node, exp.Alias) else node).transform(canonical)
    if isinstance(node, exp.EQ):
        left, right = sorted((node.this.sql(dialect="sqlite"), node.expression.sql(dialect="sqlite")))
        return f"{left} = {right}"
    return node.sql(dialect="sqlite")


def _where_atoms(node: exp.Expression) -> list[exp.Expression]:
    """The atomic predicates of a condition: AND/OR/parentheses are split, everything else is one atom."""
    if isinstance(node, (exp.And, exp.Or)):
        return _where_atoms(node.this) + _where_atoms(node.expression)
    if isinstance(node, exp.Paren):
        return _where_atoms(node.this)
    return [node]


def sql_items(tree: exp.Expression, kind: str) -> list[tuple[str, exp.Expression]]:
    """(canonical text, node) for every item of ``kind`` (a sub-verifier name) in a parsed query."""
    if kind == "sql_tables":
        return [(t.name.lower(), t) for t in tree.find_all(exp.Table)]
    if kind == "sql_columns":
        return [(_normalise(p, None), p) for p in getattr(tree, "selects", [])]
    if kind == "sql_where":
        return [(_normalise(a, None), a) for w in tree.find_all(exp.Where) for a in _where_atoms(w.this)]
    if kind == "sql_joins":
        # aliases resolve to table names so that "T1.id = T2.x" and "people.id = orders.x" agree
        aliases = {t.alias.lower(): t.name.lower() for t in tree.find_all(exp.Table) if t.alias}
        items = []
        for join in tree.find_all(exp.Join):
            on = join.args.get("on")
            key = _normalise(on, aliases) if on else f"join {join.this.sql(dialect='sqlite').lower()}"
            items.append((key, join))
        return items
    raise ValueError(f"unknown sub-verifier {kind!r}")


def _node_span(node: exp.Expression, sql: str) -> tuple[int, int] | None:
    """Span from the first to the last token sqlglot located inside ``node``, closing parentheses added.

    sqlglot records positions on identifiers, literals and some functions, not on keywords, so the span
    is the best exact substring location available (e.g. ``x IS NULL`` covers only ``x``)."""
    positions = [(n.meta["start"], n.meta["end"] + 1) for n in node.walk() if "start" in n.meta]
    if not positions:
        return None
    start, end = min(p[0] for p in positions), max(p[1] for p in positions)
    while sql.count("(", start, end) > sql.count(")", start, end):
        close = sql.find(")", end)
        if close < 0:
            break
        end = close + 1
    return start, end


# --------------------------------------------------------------------------------------- the task
def _example(prompts: list, i: int, columns: dict) -> dict:
    """Row ``i`` of the per-completion columns (lists from TRL, or ``datasets`` columns); scalar kwargs
    such as TRL's callbacks and trainer state are left out."""
    return {
        k: v[i]
        for k, v in columns.items()
        if hasattr(v, "__len__") and hasattr(v, "__getitem__") and not isinstance(v, (str, bytes, dict)) and i < len(v)
    }


class TextToSQL(Task):
    """The text-to-SQL task (paper §4): Spider-format data, three rewards, optional sub-verifiers."""

    name = "sql"
    answer_rewards = ("execution_match",)
    answer_metric = "execution_match"
    data_description = "synthetic text-to-SQL (tiny) / Spider train, 6,915 questions"
    paper_data = tuple(DataFile(name, "train" if name == "spider_train" else "eval", f"spider/{f}", src)
                       for name, (f, _, src) in SPIDER_FILES.items()) + (
        DataFile("bird_dev", "eval", "bird/dev/dev.json", "bird-bench.github.io dev.zip (dev.json, dev_tables.json, "
                 "dev_databases/); scored here with Spider's rule, not BIRD's set comparison (load_bird)"),)
    paper_run = dict(steps=100, prompts_per_step=32, num_generations=8, seeds=(0, 1, 2), learning_rate=1e-6,
                     max_completion_length=1024, choices=tuple(UNSTATED.values()))
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
        max_rows: int = DEFAULT_MAX_ROWS,
        db_cache_dir: str | Path | None = None,
    ):
        if rewards not in self.reward_sets:
            raise ValueError(f"rewards={rewards!r} is not valid; valid values: {', '.join(self.reward_sets)}")
        self.sub_verifiers = sub_verifiers or rewards == "sub"
        execution = ("execution_match",) if rewards == "default" else ()
        self.reward_names = ("format", "executable") + execution + (SUB_VERIFIERS if self.sub_verifiers else ())
        self.executor = SQLExecutor(timeout_s=timeout_s, max_rows=max_rows)
        self.db_cache_dir = Path(db_cache_dir) if db_cache_dir else cache_root() / "sql_dbs"

    # ---- per-response checks: (completion, example) -> reward; exceptions are caught by safe_reward
    def _check_format(self, completion: Any, example: dict) -> float:
        return float(is_well_formed(completion_text(completion)))

    def _check_executable(self, completion: Any, example: dict) -> float:
        sql = answer_sql(completion_text(completion))
        return float(sql is not None and self.executor.run(example["db_path"], sql).ok)

    def _check_execution_match(self, completion: Any, example: dict) -> float | None:
        gold = self.executor.run(example["db_path"], example["gold_sql"])
        if not gold.ok:
            return None  # a broken gold query judges nothing
        sql = answer_sql(completion_text(completion))
        if sql is None:
            return 0.0
        ordered = _ORDER_BY_RE.search(example["gold_sql"]) is not None
        return float(results_match(self.executor.run(example["db_path"], sql), gold, ordered))

    def _check_items(self, kind: str) -> Callable[[Any, dict], float | None]:
        def check(completion: Any, example: dict) -> float | None:
            gold = _parse(example["gold_sql"])
            if gold is None:
                return None
            sql = answer_sql(completion_text(completion))
            tree = _parse(sql) if sql else None
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
                gold = _parse(example["gold_sql"]) if self.sub_verifiers else None
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
        tree = _parse(sql)
        regions = {}
        for kind in SUB_VERIFIERS:
            try:
                spans = {_node_span(node, sql) for _, node in sql_items(tree, kind)} - {None}
                regions[kind] = sorted((s + sql_span[0], e + sql_span[0]) for s, e in spans)
            except Exception:  # no tree, or an odd tree sqlglot accepted
                regions[kind] = [sql_span]
        return regions

    # ---- data
    def reference_response(self, example: dict) -> str:
        """``<think>`` naming the tables (and values) the query uses, then the gold SQL in ``<answer>``."""
        reasoning = example.get("reasoning") or _describe(example["gold_sql"])
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


def _describe(gold_sql: str) -> str:
    """A one-line reasoning for a gold query: its tables and literal values."""
    tree = _parse(gold_sql)
    if tree is None:
        return "Write the query."
    tables = list(dict.fromkeys(t.name for t in tree.find_all(exp.Table)))
    values = list(dict.fromkeys(str(v.this) for v in tree.find_all(exp.Literal)))
    text = f"Use table {', '.join(tables)}" if tables else "Write the query"
    return text + (f" and value {', '.join(values)}." if values else ".")


# ---------------------------------------------------------------------------------- prompts, Spider
def build_prompt(question: str, schema: str) -> list[dict[str, str]]:
    """The conversational prompt: schema lines, the question, the required output format."""
    return [{"role": "user", "content": f"{schema}\nQuestion: {question}\n{FORMAT_INSTRUCTION}"}]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def _schemas(tables_json: Path) -> dict[str, str]:
    """db_id -> compact schema text, one ``table(col, col, ...)`` line per table (original names)."""
    records = _read_json(tables_json)
    if not isinstance(records, list):
        raise ValueError(f"{tables_json}: expected a JSON list of schemas")
    schemas = {}
    for i, rec in enumerate(records):
        try:
            tables = rec["table_names_original"]
            columns: list[list[str]] = [[] for _ in tables]
            for table_index, column in rec["column_names_original"]:
                if table_index >= 0:  # -1 is Spider's "*" pseudo-column
                    columns[table_index].append(column)
            schemas[rec["db_id"]] = "\n".join(f"{t}({', '.join(c)})" for t, c in zip(tables, columns))
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise ValueError(f"{tables_json}: record {i}: malformed schema ({type(exc).__name__}: {exc})") from None
    return schemas


def load_spider(
    questions_json: str | Path,
    tables_json: str | Path,
    db_dir: str | Path,
    limit: int | None = None,
    missing_db: str = "raise",
    question_key: str = "question",
    sql_key: str = "query",
    evidence_key: str | None = None,
):
    """Spider-format questions (Spider, Spider-Syn, Spider-Realistic, Spider-DK) as a ``datasets.Dataset``.

    Columns: ``prompt`` (conversational), ``question``, ``db_id``, ``db_path``, ``gold_sql``, ``schema``.
    ``question_key`` names the field the question is read from: ``question`` in Spider's own files and in
    Spider-Realistic/-DK; Spider-Syn's files hold the original question as ``SpiderQuestion`` and its synonym
    rewrite as ``SpiderSynQuestion`` (``SPIDER_FILES`` says which is which). Malformed input fails here,
    naming the file and record: bad JSON, a missing field, an unknown ``db_id``, a missing database file
    (``missing_db="skip"`` drops such records instead, e.g. Spider train on the rebuilt databases, which lack
    three of them). BIRD's files use ``sql_key="SQL"`` and carry a hint per question (``evidence_key=
    "evidence"``), appended to the question as ``Evidence: ...`` as BIRD's baselines prompt it (``load_bird``).
    """
    import datasets

    questions_json, db_dir = Path(questions_json), Path(db_dir)
    schemas = _schemas(Path(tables_json))
    records = _read_json(questions_json)
    if not isinstance(records, list):
        raise ValueError(f"{questions_json}: expected a JSON list of questions")
    rows = []
    for i, rec in enumerate(records[:limit] if limit is not None else records):
        where = f"{questions_json}: record {i}"
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected an object, got {type(rec).__name__}")
        question = rec.get(question_key)
        if not question or not rec.get(sql_key) or not rec.get("db_id"):
            raise ValueError(f"{where}: needs {question_key!r}, {sql_key!r} and 'db_id' (it has {sorted(rec)})")
        if evidence_key and rec.get(evidence_key):
            question = f"{question}\nEvidence: {rec[evidence_key]}"
        db_id = rec["db_id"]
        if db_id not in schemas:
            raise ValueError(f"{where}: db_id {db_id!r} is not in {tables_json}")
        db_path = db_dir / db_id / f"{db_id}.sqlite"
        if not db_path.is_file():
            if missing_db == "skip":
                continue
            raise ValueError(f"{where}: database file {db_path} not found (db_id {db_id!r})")
        rows.append(
            {
                "prompt": build_prompt(question, schemas[db_id]),
                "question": question,
                "db_id": db_id,
                "db_path": str(db_path),
                "gold_sql": rec[sql_key],
                "schema": schemas[db_id],
            }
        )
    return datasets.Dataset.from_list(rows)


def load_bird(bird_dev_dir: str | Path, limit: int | None = None):
    """BIRD dev (``dev.json``, ``dev_tables.json``, ``dev_databases/<db_id>/<db_id>.sqlite`` in one folder, as
    bird-bench's ``dev.zip`` unpacks) in the columns of ``load_spider``; the question carries its evidence.

    Scoring note: BIRD's official evaluator compares result *sets* (``set(pred) == set(gold)``); execution
    accuracy here uses Spider's rule (``sqlexec.results_match``), which differs on duplicate rows, row order
    under ORDER BY and column order, so BIRD numbers from this package are not the leaderboard's metric.
    """
    d = Path(bird_dev_dir)
    return load_spider(d / "dev.json", d / "dev_tables.json", d / "dev_databases", limit=limit,
                       question_key="question", sql_key="SQL", evidence_key="evidence")


def load_spider_split(spider_dir: str | Path, name: str, limit: int | None = None):
    """One of ``SPIDER_FILES`` from a folder laid out as the data README says. Train records whose database is
    missing are skipped (the rebuilt databases lack three train ones); an evaluation set must be complete."""
    spider_dir = Path(spider_dir)
    if name not in SPIDER_FILES:
        raise ValueError(f"unknown Spider split {name!r}; known: {', '.join(SPIDER_FILES)}")
    filename, key, _ = SPIDER_FILES[name]
    return load_spider(spider_dir / filename, spider_dir / "tables.json", spider_dir / "database", limit=limit,
                       missing_db="skip" if name == "spider_train" else "raise", question_key=key)


# -------------------------------------------------------------------------------------- synthetic
SYN_VERSION = 1
SYN_SCHEMA = "people(id, name, city, age)\norders(id, person_id, item, price)"
SYN_CITIES = ("Paris", "Rome", "Oslo", "Lima", "Cairo", "Delhi")
SYN_NAMES = ("Ann", "Bob", "Cid", "Dan", "Eve", "Fay", "Gus", "Hal", "Ivy", "Joe", "Kim", "Lee")
SYN_ITEMS = ("pen", "cup", "hat", "map", "box", "key")
SYN_N_DBS = 3
_JOIN = "FROM orders JOIN people ON orders.person_id = people.id"
#: (question, gold SQL, slot); {v} is the value, written literally in both
SYN_TEMPLATES = (
    ("List the names of people from {v}.", "SELECT name FROM people WHERE city = '{v}'", "city"),
    ("How many people live in {v}?", "SELECT COUNT(*) FROM people WHERE city = '{v}'", "city"),
    ("List the names of people older than {v}.", "SELECT name FROM people WHERE age > {v}", "age"),
    ("How old is {v}?", "SELECT age FROM people WHERE name = '{v}'", "name"),
    ("Which city is {v} from?", "SELECT city FROM people WHERE name = '{v}'", "name"),
    ("List the names of the {v} oldest people.", "SELECT name FROM people ORDER BY age DESC LIMIT {v}", "k"),
    ("How many orders cost more than {v}?", "SELECT COUNT(*) FROM orders WHERE price > {v}", "price"),
    ("List the prices of {v} orders.", "SELECT price FROM orders WHERE item = '{v}'", "item"),
    ("What is the total price of {v} orders?", "SELECT SUM(price) FROM orders WHERE item = '{v}'", "item"),
    ("List the items of the {v} cheapest orders.", "SELECT item FROM orders ORDER BY price LIMIT {v}", "k"),
    ("List the items ordered by {v}.", f"SELECT orders.item {_JOIN} WHERE people.name = '{{v}}'", "name"),
    ("How many orders came from {v}?", f"SELECT COUNT(*) {_JOIN} WHERE people.city = '{{v}}'", "city"),
)
#: what a question says instead of the value when the value is hidden (it is then only in Z)
SYN_HIDDEN = {
    "city": "the given city",
    "name": "the given person",
    "age": "the given age",
    "price": "the given price",
    "item": "the given item",
    "k": "given number of",
}


def _syn_rows(rng: random.Random) -> tuple[list[tuple], list[tuple]]:
    """People (unique names and ages) and orders (unique prices, so ORDER BY … LIMIT has no ties)."""
    names = rng.sample(SYN_NAMES, 8)
    ages = rng.sample(range(18, 80), 8)
    people = [(i + 1, names[i], rng.choice(SYN_CITIES), ages[i]) for i in range(8)]
    prices = rng.sample(range(1, 100), 12)
    orders = [(i + 1, rng.randint(1, 8), rng.choice(SYN_ITEMS), prices[i]) for i in range(12)]
    return people, orders


def synthetic_databases(seed: int, cache_dir: str | Path | None = None) -> list[Path]:
    """Write (once) the ``SYN_N_DBS`` small databases for ``seed``; contents depend only on the seed.
    ``cache_dir``: default ``$MRTPO_CACHE/sql_dbs``."""
    cache_dir = cache_dir or cache_root() / "sql_dbs"
    folder = Path(cache_dir) / f"v{SYN_VERSION}" / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for d in range(SYN_N_DBS):
        path = folder / f"shop_{d}.sqlite"
        if not path.is_file():
            people, orders = _syn_rows(random.Random(f"sql-db-{seed}-{d}"))
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.unlink(missing_ok=True)
            with sqlite3.connect(tmp) as conn:
                conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city TEXT, age INTEGER)")
                conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, person_id INTEGER, item TEXT, price INTEGER)")
                conn.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", people)
                conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", orders)
            conn.close()
            os.replace(tmp, path)  # atomic: parallel workers never see a half-written file
        paths.append(path)
    return paths


def _syn_value(slot: str, joined: bool, conn: sqlite3.Connection, rng: random.Random) -> str:
    """A value for ``slot`` taken from the database, so that the gold query has a non-empty result
    (for join templates: a person or city that has orders)."""
    if slot in ("city", "name"):
        source = _JOIN if joined else "FROM people"
        return rng.choice([r[0] for r in conn.execute(f"SELECT DISTINCT people.{slot} {source}")])
    if slot == "item":
        return rng.choice([r[0] for r in conn.execute("SELECT DISTINCT item FROM orders")])
    if slot in ("age", "price"):  # a threshold below the largest value, so "more than" finds rows
        table = "people" if slot == "age" else "orders"
        values = [r[0] for r in conn.execute(f"SELECT {slot} FROM {table} ORDER BY {slot}")]
        return str(rng.choice(values[:-1]))
    return str(rng.randint(1, 5))


def synthetic_sql(
    n: int,
    seed: int = 0,
    split: str = "train",
    hide_value: bool | float = False,
    cache_dir: str | Path | None = None,
):
    """``n`` templated text-to-SQL examples in the Spider record format, deterministic in (seed, split).

    Values (names, cities, numbers) appear literally in question and gold SQL. ``hide_value`` (True, or
    a fraction of examples) replaces the value in the question by a phrase such as "the given city", so
    the value is only in the reference SQL (the execution_match Z block). Extra columns: ``template``,
    ``value``, ``value_hidden`` and ``reasoning`` (the think text of ``reference_response``). Train and
    test share the databases and templates; their questions come from different random streams.
    """
    import datasets

    paths = synthetic_databases(seed, cache_dir)
    rng = random.Random(f"sql-{seed}-{split}")
    conns = [sqlite3.connect(f"file:{path}?mode=ro", uri=True) for path in paths]
    rows = []
    try:
        for _ in range(n):
            d = rng.randrange(len(paths))
            t = rng.randrange(len(SYN_TEMPLATES))
            question, gold, slot = SYN_TEMPLATES[t]
            joined = "JOIN" in gold
            value = _syn_value(slot, joined, conns[d], rng)
            # drawn even when nothing is hidden, so hide_value never changes which questions come out
            hidden = rng.random() < float(hide_value)
            question = question.format(v=SYN_HIDDEN[slot] if hidden else value)
            gold_sql = gold.format(v=value)
            table = "orders and people" if joined else gold_sql.split(" FROM ")[1].split()[0]
            rows.append(
                {
                    "prompt": build_prompt(question, SYN_SCHEMA),
                    "question": question,
                    "db_id": f"shop_{d}",
                    "db_path": str(paths[d]),
                    "gold_sql": gold_sql,
                    "schema": SYN_SCHEMA,
                    "template": t,
                    "value": value,
                    "value_hidden": hidden,
                    "reasoning": f"Use table {table} and value {value}.",
                }
            )
    finally:
        for conn in conns:
            conn.close()
    return datasets.Dataset.from_list(rows)
