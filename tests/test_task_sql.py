"""Text-to-SQL task: rewards, sandbox, Z blocks, check regions, Spider loader, synthetic generator."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtpo.tasks import get_task
from mrtpo.tasks.sql import TextToSQL
from mrtpo.tasks.sql.layout import TAGS, answer_sql
from mrtpo.tasks.sql.sandbox import KILL_GRACE_S, STARVED_FACTOR, SQLExecutor
from mrtpo.tasks.sql.spider import load_spider, load_spider_split
from mrtpo.tasks.sql.synthetic import SYN_TEMPLATES, synthetic_databases

SPIDER = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "spider"
needs_spider = pytest.mark.skipif(not (SPIDER / "dev.json").is_file(), reason="../shared/data/spider not present")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sql_dbs")


@pytest.fixture(scope="module")
def task(cache_dir) -> TextToSQL:
    return TextToSQL(sub_verifiers=True, timeout_s=1.0, db_cache_dir=cache_dir)


@pytest.fixture(scope="module")
def db(cache_dir) -> str:
    """A synthetic database: people(id, name, city, age), orders(id, person_id, item, price)."""
    return str(synthetic_databases(0, cache_dir)[0])


def rewards(task: TextToSQL, completions: list, gold_sql: str, db_path: str, **extra) -> dict[str, list]:
    """Every reward of ``task`` on ``completions`` for one example, called the way TRL calls them."""
    n = len(completions)
    columns = {"db_path": [db_path] * n, "gold_sql": [gold_sql] * n}
    return {
        f.__name__: f([[{"role": "user", "content": "q"}]] * n, completions, completion_ids=None, **columns, **extra)
        for f in task.reward_funcs()
    }


def respond(sql: str, think: str = "Use table people.") -> str:
    return f"<think>{think}</think><answer>{sql}</answer>"


# ------------------------------------------------------------------------------------------ rewards
def test_names_and_registry(cache_dir):
    plain = get_task("sql", db_cache_dir=cache_dir)
    assert plain.reward_names == ("format", "executable", "execution_match")
    assert [f.__name__ for f in plain.reward_funcs()] == list(plain.reward_names)
    assert plain.answer_rewards == ("execution_match",)
    full = TextToSQL(sub_verifiers=True)
    assert full.reward_names[3:] == ("sql_tables", "sql_columns", "sql_where", "sql_joins")
    assert [f.__name__ for f in full.reward_funcs()] == list(full.reward_names)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("<think>a</think><answer>SELECT 1</answer>", True),
        ("\n<think>\nmulti\nline\n</think>\n\n<answer>\nSELECT 1\n</answer>\n", True),
        ("<think></think><answer></answer>", True),  # layout only; emptiness is for the other rewards
        ("<answer>SELECT 1</answer>", False),
        ("<think>a</think>SELECT 1", False),
        ("<answer>SELECT 1</answer><think>a</think>", False),
        ("Sure! <think>a</think><answer>SELECT 1</answer>", False),
        ("<think>a</think><answer>SELECT 1</answer> done", False),
        ("<think>a</think>then<answer>SELECT 1</answer>", False),
        ("<think>a<think>b</think><answer>SELECT 1</answer>", False),
        ("<think>a</think><answer>SELECT 1</answer><answer>SELECT 2</answer>", False),
        ("<think>a</think><answer>SELECT 1", False),
    ],
)
def test_format(task, db, text, ok):
    assert rewards(task, [text], "SELECT 1", db)["format"] == [float(ok)]


def test_chat_message_completions(task, db):
    good = [{"role": "assistant", "content": respond("SELECT name FROM people")}]
    out = rewards(task, [good, [], "junk"], "SELECT name FROM people", db)
    assert out["format"] == [1.0, 0.0, 0.0]
    assert out["execution_match"] == [1.0, 0.0, 0.0]


def test_executable(task, db):
    texts = [
        respond("SELECT name FROM people"),
        respond("```sql\nSELECT name FROM people\n```"),  # a Markdown fence is not part of the SQL
        respond("SELECT nme FROM people"),  # unknown column
        respond("SELEC name FROM people"),  # syntax error
        respond(""),
        "<think>x</think> SELECT name FROM people",  # no answer block
        "SELECT 1 <answer>SELECT name FROM people</answer>",  # bad format, but the SQL runs
    ]
    assert rewards(task, texts, "SELECT 1", db)["executable"] == [1, 1, 0, 0, 0, 0, 1]


def test_execution_match_multiset_and_order(task, db):
    gold = "SELECT name FROM people WHERE age > 30"
    texts = [
        respond("SELECT name FROM people WHERE 30 < age"),
        respond("SELECT name FROM people WHERE age > 30 ORDER BY name DESC"),  # gold has no ORDER BY
        respond("SELECT name FROM people WHERE age > 31000"),
        respond("SELECT name, age FROM people WHERE age > 30"),
        respond("SELECT nme FROM people"),
        "no answer at all",
    ]
    assert rewards(task, texts, gold, db)["execution_match"] == [1, 1, 0, 0, 0, 0]

    ordered = "SELECT name FROM people ORDER BY age DESC"
    texts = [respond("SELECT name FROM people ORDER BY age DESC"), respond("SELECT name FROM people ORDER BY age")]
    assert rewards(task, texts, ordered, db)["execution_match"] == [1, 0]

    # multisets, not sets: duplicates count (8 people over at most 6 cities)
    cities = "SELECT city FROM people"
    texts = [respond("SELECT city FROM people ORDER BY id DESC"), respond("SELECT DISTINCT city FROM people")]
    assert rewards(task, texts, cities, db)["execution_match"] == [1, 0]


def test_broken_gold_is_not_applicable_and_logged(task, db):
    logged = {}
    out = rewards(task, [respond("SELECT 1"), 12345], "SELEC broken", db, log_metric=logged.__setitem__)
    assert out["execution_match"] == [None, None]
    assert out["executable"] == [1.0, 0.0]
    assert logged["execution_match/not_applicable"] == 2.0
    assert logged["execution_match/checker_errors"] == 0.0


def test_missing_column_counts_as_checker_error(task):
    logged = {}
    (match,) = [f for f in task.reward_funcs() if f.__name__ == "execution_match"]
    assert match(None, [respond("SELECT 1")], log_metric=logged.__setitem__) == [0.0]  # no gold_sql column
    assert logged["execution_match/checker_errors"] == 1.0


def test_sub_verifiers(task, db):
    gold = (
        "SELECT T1.name FROM people AS T1 JOIN orders AS T2 ON T1.id = T2.person_id "
        "WHERE T2.item = 'pen' AND T1.age > 30"
    )
    same = "SELECT people.name FROM orders JOIN people ON orders.person_id = people.id WHERE age > 30 AND item = \"pen\""
    out = rewards(task, [respond(same)], gold, db)
    assert {k: out[k] for k in ("sql_tables", "sql_columns", "sql_where", "sql_joins")} == dict.fromkeys(
        ("sql_tables", "sql_columns", "sql_where", "sql_joins"), [1.0]
    )
    cases = {
        "SELECT name FROM people WHERE age > 30": dict(sql_tables=0, sql_columns=1, sql_where=0, sql_joins=0),
        "SELECT T1.age FROM people AS T1 JOIN orders AS T2 ON T1.id = T2.person_id WHERE T2.item = 'pen' AND T1.age > 30": dict(
            sql_tables=1, sql_columns=0, sql_where=1, sql_joins=1
        ),
        "SELECT T1.name FROM people AS T1 JOIN orders AS T2 ON T1.id = T2.id WHERE T2.item = 'cup' AND T1.age > 30": dict(
            sql_tables=1, sql_columns=1, sql_where=0, sql_joins=0
        ),
        "SELEC garbage": dict(sql_tables=0, sql_columns=0, sql_where=0, sql_joins=0),
    }
    for sql, expected in cases.items():
        out = rewards(task, [respond(sql)], gold, db)
        assert {k: out[k][0] for k in expected} == expected, sql


# ----------------------------------------------------------------------------- Z blocks, regions
def test_z_blocks(task, db):
    gold = "SELECT T1.name FROM people AS T1 JOIN orders AS T2 ON T1.id = T2.person_id WHERE T2.item = 'pen'"
    completions = [respond("SELECT name FROM people"), respond("SELECT nme FROM people"), "nothing"]
    blocks = task.z_blocks(None, completions, db_path=[db] * 3, gold_sql=[gold] * 3)
    assert all(set(b) == set(task.reward_names) for b in blocks)
    assert blocks[0]["execution_match"] == f"Reference SQL: {gold}"
    assert blocks[0]["executable"] == "Execution of your SQL: executes without error"
    assert "no such column: nme" in blocks[1]["executable"]
    assert blocks[2]["executable"] == "Execution of your SQL: no SQL in <answer>"
    assert "<think>" in blocks[0]["format"] and "<answer>" in blocks[0]["format"]
    assert blocks[0]["sql_tables"] == "Reference tables: people AS T1; orders AS T2"
    assert blocks[0]["sql_columns"] == "Reference selected columns: T1.name"
    assert blocks[0]["sql_where"] == "Reference WHERE predicates: T2.item = 'pen'"
    assert blocks[0]["sql_joins"] == "Reference JOINs: JOIN orders AS T2 ON T1.id = T2.person_id"
    plain = TextToSQL()
    assert set(plain.z_blocks(None, completions[:1], db_path=[db], gold_sql=[gold])[0]) == set(plain.reward_names)


def test_check_regions_exact(task):
    text = "<think>Use people.</think>\n<answer>\n```sql\nSELECT name FROM people WHERE age > 3\n```\n</answer>"
    sql = "SELECT name FROM people WHERE age > 3"
    regions = task.check_regions(text, {})
    s = text.index(sql)
    assert s == 43
    assert regions["format"] == [(0, 7), (18, 26), (27, 35), (85, 94)]
    assert [text[a:b] for a, b in regions["format"]] == list(TAGS)
    assert regions["think"] == [(7, 18)] and text[7:18] == "Use people."
    assert regions["executable"] == regions["execution_match"] == [(s, s + len(sql))]
    assert regions["sql_tables"] == [(s + 17, s + 23)]
    assert regions["sql_columns"] == [(s + 7, s + 11)]
    assert regions["sql_where"] == [(s + 30, s + 37)]
    assert regions["sql_joins"] == []


def test_check_regions_sub_items(task):
    sql = "SELECT count(*), T1.name FROM people AS T1 JOIN orders AS T2 ON T1.id = T2.person_id WHERE T2.price > 5 OR T1.city = 'Rome'"
    text = respond(sql, think="")
    regions = task.check_regions([{"role": "assistant", "content": text}], {})
    cut = lambda key: [text[a:b] for a, b in regions[key]]  # noqa: E731
    assert regions["think"] == []
    assert cut("sql_columns") == ["count(*)", "T1.name"]
    assert cut("sql_tables") == ["people AS T1", "orders AS T2"]
    assert cut("sql_joins") == ["orders AS T2 ON T1.id = T2.person_id"]
    assert cut("sql_where") == ["T2.price > 5", "T1.city = 'Rome'"]
    # unparsable SQL: the verifier read all of it; no answer block: nothing
    bad = respond("SELEC (((")
    assert task.check_regions(bad, {})["sql_where"] == [(bad.index("SELEC"), bad.index("</answer>"))]
    assert task.check_regions("<think>x</think>", {})["sql_where"] == []


def test_answer_block_choice():
    assert answer_sql("<answer>SELECT 1</answer> <answer>SELECT 2</answer>") == "SELECT 2"
    assert answer_sql("<answer>SELECT 1</answer><answer>unclosed") == "SELECT 1"
    assert answer_sql("<answer><answer>SELECT 3</answer></answer>") == "SELECT 3"
    assert answer_sql("<answer>  \n </answer>") is None


# ------------------------------------------------------------------------------------------ sandbox
HOSTILE = [
    "ATTACH DATABASE '{tmp}/evil.db' AS evil",
    "VACUUM INTO '{tmp}/copy.db'",
    "DETACH DATABASE main",
    "INSERT INTO people VALUES (99, 'Zed', 'Rome', 40)",
    "UPDATE people SET age = 0",
    "DELETE FROM orders",
    "DROP TABLE people",
    "CREATE TABLE evil (x)",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = WAL",
    "PRAGMA table_info(people)",
    "SELECT load_extension('/tmp/evil.so')",
    "SELECT name FROM people; DROP TABLE people",
    "BEGIN",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000) SELECT count(*) FROM r a, r b",
    "SELECT zeroblob(1000000000000)",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_sandbox_refuses(task, db, tmp_path, sql):
    copy = tmp_path / "db.sqlite"
    shutil.copy(db, copy)
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    sql = sql.format(tmp=tmp_path)
    start = time.monotonic()
    out = rewards(task, [respond(sql)], "SELECT name FROM people", str(copy))
    # ends within its CPU budget (on an idle machine about task.executor.timeout_s), at worst when a starved worker
    # has had STARVED_FACTOR budgets of wall time
    assert time.monotonic() - start < STARVED_FACTOR * task.executor.timeout_s + KILL_GRACE_S + 1.0
    assert out["executable"] == [0.0] and out["execution_match"] == [0.0]
    result = task.executor.run(copy, sql)
    assert result.error and not result.rows
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite"]  # no journal, attached or vacuumed file


def test_row_cap(db):
    executor = SQLExecutor(max_rows=100)
    result = executor.run(db, "SELECT * FROM people a, people b, people c")  # 512 rows
    assert result.ok and result.truncated and len(result.rows) == 100


# ------------------------------------------------------------------------------------------ fuzzing
pieces = st.sampled_from(
    list(TAGS) + ["SELECT", " name ", "*", " FROM people", " WHERE ", "'", '"', "(", ")", "```sql", "\n", ";", "é", "\x00"]
)
garbage = st.one_of(st.text(max_size=300), st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=60).map("".join))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=garbage)
def test_fuzz_never_raises(task, db, text):
    logged = {}
    for completion in (text, [{"role": "assistant", "content": text}]):
        start = time.perf_counter()
        out = rewards(task, [completion], "SELECT name FROM people", db, log_metric=logged.__setitem__)
        assert time.perf_counter() - start < 5.0  # every reward on one response, time-bounded
        assert all(v[0] in (0.0, 1.0) for v in out.values())
        regions = task.check_regions(completion, {})
        assert all(0 <= a <= b <= len(text) for spans in regions.values() for a, b in spans)
        assert set(task.z_blocks(None, [completion], db_path=[db], gold_sql=["SELECT 1"])[0]) == set(task.reward_names)
    assert not any(v for k, v in logged.items() if k.endswith("checker_errors"))


@pytest.mark.parametrize(
    "text",
    [
        " " * 1_000_000,
        "<think>" * 100_000,
        "<answer>" * 100_000 + "</answer>",
        "<think>x</think><answer>" + " " * 500_000 + "SELECT 1" + " " * 500_000 + "</answer>",
        "<answer>" + "SELECT " * 50_000 + "</answer>",
        "<think>x</think><answer>SELECT '" + "a" * 2_000_000 + "'</answer>",
        None,
        {"content": 3},
    ],
)
def test_huge_and_odd_inputs(task, db, text):
    start = time.monotonic()
    out = rewards(task, [text], "SELECT name FROM people", db)
    assert all(v[0] in (0.0, 1.0) for v in out.values())
    task.check_regions(text, {})
    assert time.monotonic() - start < 5.0


# ------------------------------------------------------------------------------------------- Spider
@needs_spider
def test_spider_dev_golds_match_themselves():
    ds = load_spider(SPIDER / "dev.json", SPIDER / "tables.json", SPIDER / "database")
    assert len(ds) == 1034
    assert set(ds.column_names) >= {"prompt", "question", "db_id", "db_path", "gold_sql", "schema"}
    row = ds[0]
    assert row["prompt"][0]["role"] == "user" and row["question"] in row["prompt"][0]["content"]
    assert "singer(Singer_ID, Name, Country" in row["schema"] and row["schema"] in row["prompt"][0]["content"]
    task = TextToSQL(sub_verifiers=True)
    task.executor = SQLExecutor(cache_size=0)  # run gold and answer separately, not from a cache
    completions = [task.reference_response(r) for r in ds]
    columns = {"db_path": list(ds["db_path"]), "gold_sql": list(ds["gold_sql"])}
    for f in task.reward_funcs():
        assert f(None, completions, **columns) == [1.0] * len(ds), f.__name__


@needs_spider
def test_spider_variants_load():
    train = load_spider_split(SPIDER, "spider_train")
    raw = json.loads((SPIDER / "train_spider_syn.json").read_text())
    assert 6_500 < len(train) < 7_000  # three databases are missing from the rebuild
    # the paper trains on Spider train's own questions, not on Spider-Syn's rewrites
    assert train[0]["question"] == raw[0]["SpiderQuestion"] != raw[0]["SpiderSynQuestion"]
    assert set(train["question"]) <= {r["SpiderQuestion"] for r in raw}
    syn = load_spider(SPIDER / "train_spider_syn.json", SPIDER / "tables.json", SPIDER / "database", missing_db="skip",
                      question_key="SpiderSynQuestion", limit=5)
    assert syn[0]["question"] == raw[0]["SpiderSynQuestion"]
    with pytest.raises(ValueError, match=r"train_spider_syn\.json: record \d+: database file .*not found"):
        load_spider(SPIDER / "train_spider_syn.json", SPIDER / "tables.json", SPIDER / "database", question_key="SpiderQuestion")
    with pytest.raises(ValueError, match=r"record 0: needs 'question'.*SpiderQuestion"):
        load_spider(SPIDER / "train_spider_syn.json", SPIDER / "tables.json", SPIDER / "database")
    real = load_spider(SPIDER / "spider_realistic.json", SPIDER / "tables.json", SPIDER / "database", limit=20)
    assert len(real) == 20


@pytest.fixture()
def spider_dir(tmp_path, db) -> Path:
    """A one-database Spider layout built from the synthetic shop database."""
    (tmp_path / "database" / "shop").mkdir(parents=True)
    shutil.copy(db, tmp_path / "database" / "shop" / "shop.sqlite")
    tables = [
        {
            "db_id": "shop",
            "table_names_original": ["people", "orders"],
            "column_names_original": [[-1, "*"], [0, "id"], [0, "name"], [1, "id"], [1, "price"]],
        }
    ]
    (tmp_path / "tables.json").write_text(json.dumps(tables))
    return tmp_path


def write_questions(folder: Path, records) -> Path:
    path = folder / "questions.json"
    path.write_text(records if isinstance(records, str) else json.dumps(records))
    return path


def test_loader_on_small_layout(spider_dir):
    q = write_questions(spider_dir, [{"db_id": "shop", "question": "How many people?", "query": "SELECT count(*) FROM people"}] * 3)
    ds = load_spider(q, spider_dir / "tables.json", spider_dir / "database", limit=2)
    assert len(ds) == 2 and ds[0]["schema"] == "people(id, name)\norders(id, price)"
    content = ds[0]["prompt"][0]["content"]
    assert content.startswith("people(id, name)") and "Question: How many people?" in content and "<answer>" in content


@pytest.mark.parametrize(
    "records, message",
    [
        ('[{"db_id": "shop", "question": "q", "qu', r"questions\.json: not valid JSON"),
        ([{"db_id": "nope", "question": "q", "query": "SELECT 1"}], r"questions\.json: record 0: db_id 'nope' is not in"),
        ([{"db_id": "shop", "question": "q", "query": "SELECT 1"}, {"db_id": "shop", "query": "SELECT 1"}], r"record 1: needs 'question'"),
        ([{"db_id": "shop", "question": "q", "query": "SELECT 1"}, 7], r"record 1: expected an object"),
        ({"not": "a list"}, r"questions\.json: expected a JSON list"),
    ],
)
def test_loader_errors_name_file_and_record(spider_dir, records, message):
    q = write_questions(spider_dir, records)
    with pytest.raises(ValueError, match=message):
        load_spider(q, spider_dir / "tables.json", spider_dir / "database")


def test_loader_missing_db_and_bad_tables(spider_dir):
    (spider_dir / "database" / "shop" / "shop.sqlite").unlink()
    q = write_questions(spider_dir, [{"db_id": "shop", "question": "q", "query": "SELECT 1"}])
    with pytest.raises(ValueError, match=r"questions\.json: record 0: database file .*shop\.sqlite not found"):
        load_spider(q, spider_dir / "tables.json", spider_dir / "database")
    assert len(load_spider(q, spider_dir / "tables.json", spider_dir / "database", missing_db="skip")) == 0
    with pytest.raises(FileNotFoundError, match=r"absent\.json: file not found"):
        load_spider(spider_dir / "absent.json", spider_dir / "tables.json", spider_dir / "database")
    (spider_dir / "tables.json").write_text('[{"db_id": "shop"}]')
    with pytest.raises(ValueError, match=r"tables\.json: record 0: malformed schema"):
        load_spider(q, spider_dir / "tables.json", spider_dir / "database")


# ---------------------------------------------------------------------------------------- synthetic
def test_synthetic_is_deterministic_and_scores_one(task, cache_dir, tmp_path):
    ds = task.synthetic(240, seed=3, split="train")
    assert ds.to_list() == task.synthetic(240, seed=3, split="train").to_list()
    assert ds.to_list() != task.synthetic(240, seed=3, split="test").to_list()
    # the databases depend only on the seed, not on the cache folder
    other = TextToSQL(db_cache_dir=tmp_path).synthetic(5, seed=3)
    for a, b in zip(sorted(set(ds["db_path"])), sorted(set(other["db_path"]))):
        assert Path(a).read_bytes() == Path(b).read_bytes()
    assert set(ds["template"]) == set(range(len(SYN_TEMPLATES))) and 8 <= len(SYN_TEMPLATES) <= 12
    golds = " ".join(ds["gold_sql"])
    assert all(word in golds for word in ("JOIN", "ORDER BY", "LIMIT", "COUNT(*)", "WHERE"))
    for row in ds:
        assert row["value"] in row["question"] and row["value"] in row["gold_sql"] and not row["value_hidden"]
        assert len(row["prompt"][0]["content"].split()) < 40  # short prompts for tiny models
    completions = [task.reference_response(r) for r in ds]
    columns = {"db_path": list(ds["db_path"]), "gold_sql": list(ds["gold_sql"])}
    for f in task.reward_funcs():
        assert f(None, completions, **columns) == [1.0] * len(ds), f.__name__
    # gold results are not empty: the values come from the databases
    executor = SQLExecutor()
    assert all(executor.run(p, g).rows not in ((), ((0,),), ((None,),)) for p, g in zip(columns["db_path"], columns["gold_sql"]))


def test_synthetic_hidden_values(task):
    shown = task.synthetic(60, seed=1)
    hidden = task.synthetic(60, seed=1, hide_value=True)
    half = task.synthetic(200, seed=1, hide_value=0.5)
    assert hidden["gold_sql"] == shown["gold_sql"]  # hiding only rewrites the question
    assert 60 < sum(half["value_hidden"]) < 140
    for row in hidden:
        assert row["value_hidden"] and "the given" in row["question"]
        assert f" {row['value']} " not in f" {row['question'].rstrip('.?')} "
        (block,) = task.z_blocks(None, ["x"], db_path=[row["db_path"]], gold_sql=[row["gold_sql"]])
        assert row["value"] in block["execution_match"]
        assert row["value"] in task.reference_response(row).split("</think>")[0]
