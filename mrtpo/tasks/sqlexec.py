"""Sandboxed execution of untrusted SQL against read-only SQLite databases.

Model-written SQL runs here, so every layer assumes the query is hostile:

* the database is opened read-only through a ``file:...?mode=ro`` URI, so no write can reach the file;
* an authorizer allows only the actions a plain ``SELECT`` needs (select, read, recursive CTE and
  functions outside a deny list): ATTACH/DETACH (also ``VACUUM INTO``), PRAGMA, writes, DDL,
  transactions and ``load_extension`` are refused at prepare time;
* extension loading is switched off and SQLite's own limits cap attached databases, string/blob size
  (so ``zeroblob(1e12)`` fails instead of allocating) and SQL length;
* a progress handler interrupts any statement that outlives a wall-clock budget (endless recursive
  CTEs, huge cross joins), and at most ``max_rows`` rows are fetched.

``run_sql`` never raises: failures come back as ``ExecResult.error`` strings.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DEFAULT_TIMEOUT_S = 1.5
#: Spider dev's largest gold result has 20,662 rows; the cap leaves room above it
DEFAULT_MAX_ROWS = 100_000

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
#: functions that touch files, load code or were used in past SQLite exploits
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_dbpage"}
_SQLITE_LIMITS = {
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LENGTH: 10_000_000,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 1_000_000,
}
#: results bigger than this are not kept in the cache (memory), only recomputed
_CACHE_MAX_ROWS = 2_000


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one query: rows (possibly cut at the row cap) or an error message."""

    rows: tuple = ()
    error: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def _authorizer(action: int, arg1, arg2, db_name, trigger) -> int:
    """Allow only what a read-only SELECT needs; everything else is refused at prepare time."""
    if action not in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def open_readonly(db_path: str | Path) -> sqlite3.Connection:
    """Open ``db_path`` read-only with the authorizer, limits and extension loading switched off."""
    path = Path(db_path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no database file at {path}")
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False)
    if hasattr(conn, "enable_load_extension"):  # absent when Python was built without extension support
        conn.enable_load_extension(False)
    for limit, value in _SQLITE_LIMITS.items():
        conn.setlimit(limit, value)
    conn.set_authorizer(_authorizer)
    # bytes that are not UTF-8 must not crash result fetching
    conn.text_factory = lambda b: b.decode("utf-8", errors="replace")
    return conn


class SQLExecutor:
    """Runs queries in the sandbox; caches one connection per (thread, db path) and recent results."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS, cache_size: int = 1024):
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        # the G responses of a group share one gold query, and several rewards run the same answer SQL
        self.cache_size = cache_size
        self._local = threading.local()
        self._cache: OrderedDict[tuple[str, str], ExecResult] = OrderedDict()
        self._lock = threading.Lock()

    def _connection(self, db_path: str) -> sqlite3.Connection:
        conns = self._local.__dict__.setdefault("conns", {})
        if db_path not in conns:
            conns[db_path] = open_readonly(db_path)
        return conns[db_path]

    def run(self, db_path: str | Path, sql: str) -> ExecResult:
        """Execute one statement of ``sql`` on ``db_path``; cached by (path, sql). Never raises."""
        key = (str(db_path), sql)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        result = self._execute(str(db_path), sql)
        if self.cache_size > 0 and len(result.rows) <= _CACHE_MAX_ROWS:
            with self._lock:
                self._cache[key] = result
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return result

    def _execute(self, db_path: str, sql: str) -> ExecResult:
        if not isinstance(sql, str) or not sql.strip():
            return ExecResult(error="empty query")
        try:
            conn = self._connection(db_path)
        except Exception as exc:  # missing or unreadable database: the reward, not the trainer, fails
            return ExecResult(error=f"cannot open database: {exc}"[:300])
        deadline = time.monotonic() + self.timeout_s
        # called every 1,000 VM instructions; a non-zero return interrupts the statement
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1_000)
        cursor = None
        try:
            cursor = conn.execute(sql)
            rows = cursor.fetchmany(self.max_rows + 1)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if "interrupted" in str(exc):
                message = f"timeout: query ran longer than {self.timeout_s:g} s"
            return ExecResult(error=message[:300])
        finally:
            if cursor is not None:
                cursor.close()  # releases the read transaction of a partly fetched statement
            conn.set_progress_handler(None, 0)
        truncated = len(rows) > self.max_rows
        return ExecResult(rows=tuple(rows[: self.max_rows]), truncated=truncated)


#: column permutations tried at most before a pair of results is declared different (see ``results_match``)
MAX_COLUMN_PERMUTATIONS = 40_320  # 8!


def _unordered_row(row: tuple) -> tuple:
    """A row's values sorted, as test-suite-sql-eval's ``unorder_row`` sorts them (key ``str(x) + str(type(x))``)."""
    return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))


def _column_permutations(pred: tuple, gold: tuple):
    """Every assignment of pred columns to gold columns that could make the results equal, without repeats.

    Gold column i can take pred column j only if both hold the same set of values (necessary for any
    permutation to work); pred columns that are identical vectors are interchangeable, so only one is tried.
    """
    n = len(gold[0])
    gold_sets = [{row[i] for row in gold} for i in range(n)]
    pred_cols = [tuple(row[j] for row in pred) for j in range(n)]
    pred_sets = [set(col) for col in pred_cols]
    candidates = [[j for j in range(n) if pred_sets[j] == gold_sets[i]] for i in range(n)]
    perm: list[int] = []

    def extend(i: int):
        if i == n:
            yield tuple(perm)
            return
        tried = set()
        for j in candidates[i]:
            if j in perm or pred_cols[j] in tried:
                continue
            tried.add(pred_cols[j])
            perm.append(j)
            yield from extend(i + 1)
            perm.pop()

    yield from extend(0)


def results_match(pred: ExecResult, gold: ExecResult, ordered: bool) -> bool:
    """Spider execution accuracy, with the official test-suite-sql-eval rule (``exec_eval.result_eq``).

    Equal when some permutation of pred's columns makes pred's rows equal to gold's: as a multiset, or as a
    list when ``ordered`` (the gold query has ORDER BY). So ``SELECT name, age`` matches ``SELECT age, name``,
    while a different number of rows or columns never matches; two empty results match. Values compare with
    Python equality (``2 == 2.0``), as the official code does. Differences from it, both in the direction of
    "not equal": a result cut at the row cap cannot be verified and never matches, and after
    ``MAX_COLUMN_PERMUTATIONS`` candidate permutations (only wide results whose columns share one value set
    get there) the pair is declared different, so a hostile query cannot make the reward run for minutes.
    """
    if not (pred.ok and gold.ok) or pred.truncated or gold.truncated:
        return False
    if not pred.rows and not gold.rows:
        return True
    if len(pred.rows) != len(gold.rows) or len(pred.rows[0]) != len(gold.rows[0]):
        return False
    # necessary condition, cheap: the rows with their values sorted agree (as a list or as a multiset)
    pred_unordered, gold_unordered = map(lambda r: [_unordered_row(x) for x in r], (pred.rows, gold.rows))
    if (pred_unordered != gold_unordered) if ordered else (Counter(pred_unordered) != Counter(gold_unordered)):
        return False
    gold_rows = list(gold.rows) if ordered else Counter(gold.rows)
    for tried, perm in enumerate(_column_permutations(pred.rows, gold.rows)):
        if tried >= MAX_COLUMN_PERMUTATIONS:
            return False
        permuted = [tuple(row[j] for j in perm) for row in pred.rows]
        if (permuted if ordered else Counter(permuted)) == gold_rows:
            return True
    return False
