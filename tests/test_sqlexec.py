"""The SQL sandbox's hard limits: single SQL function calls the progress handler cannot interrupt, rows and
results that would not fit in memory, and a result cache bounded in bytes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mrtpo.tasks.sql import TextToSQL
from mrtpo.tasks.sql.sandbox import KILL_GRACE_S, STARVED_FACTOR, SQLExecutor, rows_bytes
from mrtpo.tasks.sql.synthetic import synthetic_databases

TIMEOUT_S = 0.5
MiB = 2**20
#: the longest the parent waits for a query of TIMEOUT_S (a starved worker), plus a second; the calls below would
#: run for a minute
KILL_BOUND_S = STARVED_FACTOR * TIMEOUT_S + KILL_GRACE_S + 1.0


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """people(id, name, city, age) with 8 rows, orders(id, person_id, item, price)."""
    return str(synthetic_databases(0, tmp_path_factory.mktemp("sql_dbs"))[0])


@pytest.fixture()
def executor():
    ex = SQLExecutor(timeout_s=TIMEOUT_S, max_memory=128 * MiB, max_result_bytes=8 * MiB, cache_size=0)
    yield ex
    ex.close()


def peak_rss(ex: SQLExecutor) -> int:
    """The worker's peak resident size in bytes (Linux)."""
    status = Path(f"/proc/{ex._worker.proc.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024


# one call of printf with a huge precision runs for about a minute on one row in SQLite 3.40, inside a single
# VM instruction, so the progress handler never sees it
UNINTERRUPTIBLE = [
    "SELECT printf('%.*c', 2147483647, 'x')",
    "SELECT printf('%.*c', 2147483647, name) FROM people",
    "SELECT length(printf('%.*c', 1500000000, 'y')) FROM people WHERE age > 0",
    "SELECT name FROM people WHERE printf('%.*c', 2147483647, city) IS NULL",
    "SELECT count(*) FROM (SELECT printf('%.*c', 2147483647, 'z') AS s) GROUP BY s",
]


@pytest.mark.parametrize("sql", UNINTERRUPTIBLE)
def test_uninterruptible_call_is_killed_in_time(executor, db, sql):
    executor.run(db, "SELECT 1")  # the worker is up
    start = time.monotonic()
    result = executor.run(db, sql)
    assert time.monotonic() - start < KILL_BOUND_S  # the kill included (on an idle machine: TIMEOUT_S + KILL_GRACE_S)
    assert result.error and result.error.startswith("timeout") and not result.rows
    first = executor._worker.proc
    assert first.poll() is not None  # the stuck worker is gone ...
    assert executor.run(db, "SELECT count(*) FROM people").rows == ((8,),)  # ... and replaced
    assert executor._worker.proc is not first


def test_uninterruptible_call_is_not_executable(db, tmp_path):
    task = TextToSQL(timeout_s=TIMEOUT_S, db_cache_dir=tmp_path)
    executable = {f.__name__: f for f in task.reward_funcs()}["executable"]
    completions = [f"<think>x</think><answer>{UNINTERRUPTIBLE[0]}</answer>"] * 3  # a group repeats its answer
    task.executor.run(db, "SELECT 1")  # the worker is up
    start = time.monotonic()
    assert executable(None, completions, db_path=[db] * 3, gold_sql=["SELECT 1"] * 3) == [0.0] * 3
    assert time.monotonic() - start < KILL_BOUND_S
    assert not task.executor._worker.alive  # run once: the killed worker was not replaced, the repeats were cached
    task.executor.close()


def test_cpu_limit_ends_a_query_the_parent_would_still_wait_for(db, monkeypatch):
    """RLIMIT_CPU holds on its own: with the parent's kill postponed, SIGXCPU ends the query."""
    import signal

    monkeypatch.setattr("mrtpo.tasks.sql.sandbox.KILL_GRACE_S", 600.0)
    ex = SQLExecutor(timeout_s=0.1, cache_size=0)
    result = ex.run(db, UNINTERRUPTIBLE[0])  # at most 2 s of CPU past the start of the worker
    assert result.error == "timeout: query used more than 0.1 s of CPU"
    assert ex._worker.proc.returncode == -signal.SIGXCPU
    assert ex.run(db, "SELECT 1").rows == ((1,),)
    ex.close()


# a single row is built whole before the first fetch: 250 blobs of 9 MB would take 2.2 GB
MEMORY = [
    ("SELECT " + ", ".join(["zeroblob(9000000)"] * 250), "out of memory"),
    ("SELECT " + ", ".join(["zeroblob(9000000)"] * 20), "out of memory"),  # 180 MB: over the limit, not huge
    ("SELECT " + ", ".join([f"zeroblob(9000000) AS c{i}" for i in range(40)]) + " FROM people LIMIT 1", "out of memory"),
    ("SELECT zeroblob(4000000) FROM people a, people b", "result too large"),  # 64 rows of 4 MB, fetched a few at a time
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 200) SELECT hex(zeroblob(500000)) FROM r",
     "result too large"),
    ("SELECT group_concat(zeroblob(5000000)) FROM people a, people b", "string or blob too big"),
]


@pytest.fixture()
def roomy():
    """A time budget that leaves the memory limits to end the query (filling 128 MiB takes about 0.4 s)."""
    ex = SQLExecutor(timeout_s=5.0, max_memory=128 * MiB, max_result_bytes=8 * MiB, cache_size=0)
    yield ex
    ex.close()


@pytest.mark.parametrize("sql, error", MEMORY, ids=range(len(MEMORY)))
def test_memory_is_capped(roomy, db, sql, error):
    result = roomy.run(db, sql)
    assert result.error and error in result.error and not result.rows
    assert peak_rss(roomy) <= roomy.max_memory  # an allocation failure leaves the worker alive and usable
    assert roomy.run(db, "SELECT count(*) FROM people").rows == ((8,),)


def test_result_under_the_byte_limit_is_returned(roomy, db):
    result = roomy.run(db, "SELECT zeroblob(1000000) FROM people")  # 8 MB over 8 rows: just under 8 MiB
    assert result.ok and len(result.rows) == 8 and rows_bytes(result.rows) <= 8 * MiB


def test_cache_is_bounded_in_bytes(db):
    ex = SQLExecutor(cache_bytes=4 * MiB)
    large = "SELECT zeroblob(100000) FROM people"  # 0.8 MB: more than an eighth of the budget, never cached
    ex.run(db, large)
    assert ex.cached_bytes == 0 and (db, large, ex.timeout_s) not in ex._cache
    queries = [f"SELECT zeroblob(50000 + {i}) FROM people" for i in range(20)]  # 0.4 MB each, 8 MB in all
    for sql in queries:
        ex.run(db, sql)
        assert ex.cached_bytes <= ex.cache_bytes
    kept = [sql for sql in queries if (db, sql, ex.timeout_s) in ex._cache]
    assert kept == queries[-len(kept) :] and 5 <= len(kept) < 20  # the most recent ones, as many as fit
    assert ex.cached_bytes == sum(rows_bytes(ex._cache[(db, sql, ex.timeout_s)][0].rows) for sql in kept)
    ex.close()


def test_rows_bytes():
    assert rows_bytes([]) == 0
    assert rows_bytes([(1, None, 2.5)]) == 56 + 3 * 40
    assert rows_bytes([("abc", b"\x00" * 10), (7, "é")]) == 56 + 2 * 40 + 3 + 10 + 56 + 2 * 40 + 1


def test_worker_is_reused_and_closed(executor, db):
    executor.run(db, "SELECT 1")
    proc = executor._worker.proc
    for i in range(20):
        assert executor.run(db, f"SELECT {i}").rows == ((i,),)
    assert executor._worker.proc is proc
    executor.close()
    assert proc.poll() is not None
    assert executor.run(db, "SELECT 2").rows == ((2,),)  # a closed executor starts a new worker when used


def test_interrupted_query_does_not_answer_the_next_one(db):
    """Ctrl-C (or an alarm) while waiting for the worker stops it: its late reply cannot answer the next query."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    ex = SQLExecutor(timeout_s=5.0, cache_size=0)
    ex.run(db, "SELECT 1")
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            ex.run(db, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000000) SELECT count(*) FROM r")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert ex.run(db, "SELECT 7").rows == ((7,),)
    ex.close()


def test_worker_start_up_is_not_part_of_the_first_query_budget(db, monkeypatch):
    """A worker that takes longer to start than a query's budget (a loaded machine) still answers its first query."""
    import subprocess

    popen = subprocess.Popen

    def slow_start(args, **kwargs):  # the worker's interpreter starts half a second late
        return popen(["sh", "-c", 'sleep 0.5; exec "$0" "$@"', *args], **kwargs)

    monkeypatch.setattr("mrtpo.tasks.sql.sandbox.subprocess.Popen", slow_start)
    ex = SQLExecutor(timeout_s=0.2, cache_size=0)
    assert ex.run(db, "SELECT count(*) FROM people").rows == ((8,),)
    ex.close()


def test_gold_query_has_its_own_budget(db, tmp_path):
    """A gold query slower than the policy's budget still judges (it is the dataset's SQL); the same SQL as an
    answer is held to the policy's budget."""
    slow = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 400000) SELECT count(*) > 0 FROM r"
    task = TextToSQL(timeout_s=0.02, gold_timeout_s=10.0, db_cache_dir=tmp_path)
    match = {f.__name__: f for f in task.reward_funcs()}["execution_match"]
    completions = ["<think>x</think><answer>SELECT 1</answer>", f"<think>x</think><answer>{slow}</answer>"]
    assert match(None, completions, db_path=[db] * 2, gold_sql=[slow] * 2) == [1.0, 0.0]
    assert task.executor.run(db, slow).error.startswith("timeout")
    task.executor.close()
