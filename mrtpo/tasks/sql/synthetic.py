"""The tiny scale's text-to-SQL data: templated questions over small deterministic shop databases."""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

from mrtpo.files.paths import cache_root
from .layout import build_prompt

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
