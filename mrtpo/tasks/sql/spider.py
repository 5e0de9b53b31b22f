"""Spider-format data: Spider, Spider-Syn, Spider-Realistic, Spider-DK, and BIRD dev in the same columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .layout import build_prompt

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

#: where the ``spider/database/`` folder comes from (the data README, ``../shared/data/README.md``, says the same)
SPIDER_DATABASES = ("Spider's release (taoyds/spider, the spider_data.zip from the Spider site): its database/ folder, "
                    "one <db_id>/<db_id>.sqlite per database; the project's machines carry databases rebuilt from "
                    "cloudera/spiderman (../shared/data/spider/database)")
#: where BIRD dev's ``dev_databases/`` folder comes from
BIRD_DATABASES = "bird-bench.github.io dev.zip: its dev_databases/ folder (dev_databases.zip inside dev.zip)"


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
    db_source: str = SPIDER_DATABASES,
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
    A missing ``db_dir`` fails naming the folder and where to get it (``db_source``), instead of dropping every
    record.
    """
    import datasets

    questions_json, db_dir = Path(questions_json), Path(db_dir)
    if not db_dir.is_dir():
        raise FileNotFoundError(f"{db_dir}: the databases folder is missing (the questions in {questions_json} are "
                                f"executed on {db_dir}/<db_id>/<db_id>.sqlite); get it from {db_source}")
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
    accuracy here uses Spider's rule (``match.results_match``), which differs on duplicate rows, row order
    under ORDER BY and column order, so BIRD numbers from this package are not the leaderboard's metric.
    """
    d = Path(bird_dev_dir)
    return load_spider(d / "dev.json", d / "dev_tables.json", d / "dev_databases", limit=limit,
                       question_key="question", sql_key="SQL", evidence_key="evidence", db_source=BIRD_DATABASES)


def load_spider_split(spider_dir: str | Path, name: str, limit: int | None = None):
    """One of ``SPIDER_FILES`` from a folder laid out as the data README says. Train records whose database is
    missing are skipped (the rebuilt databases lack three train ones); an evaluation set must be complete. A missing
    ``database/`` folder, or one holding none of the split's databases, fails naming the folder and where to get it."""
    spider_dir = Path(spider_dir)
    if name not in SPIDER_FILES:
        raise ValueError(f"unknown Spider split {name!r}; known: {', '.join(SPIDER_FILES)}")
    filename, key, _ = SPIDER_FILES[name]
    data = load_spider(spider_dir / filename, spider_dir / "tables.json", spider_dir / "database", limit=limit,
                       missing_db="skip" if name == "spider_train" else "raise", question_key=key)
    if len(data) == 0 and limit != 0:  # every record skipped: an empty or wrong databases folder, not three missing
        raise FileNotFoundError(f"{spider_dir / 'database'}: none of the databases of {spider_dir / filename} is there "
                                f"(expected database/<db_id>/<db_id>.sqlite); get them from {SPIDER_DATABASES}")
    return data
