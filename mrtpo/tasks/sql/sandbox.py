"""Sandboxed execution of untrusted SQL against read-only SQLite databases.

Model-written SQL runs here, so every layer assumes the query is hostile:

* the database is opened read-only through a ``file:...?mode=ro`` URI, so no write can reach the file;
* an authorizer allows only the actions a plain ``SELECT`` needs (select, read, recursive CTE and
  functions outside a deny list): ATTACH/DETACH (also ``VACUUM INTO``), PRAGMA, writes, DDL,
  transactions and ``load_extension`` are refused at prepare time;
* extension loading is switched off and SQLite's own limits cap attached databases, string/blob size
  (so ``zeroblob(1e12)`` fails instead of allocating) and SQL length;
* a progress handler interrupts any statement that outlives its budget of CPU seconds (endless recursive
  CTEs, huge cross joins), and at most ``max_rows`` rows and ``max_result_bytes`` bytes are fetched. The budget
  is CPU time, not wall time, so that a verdict does not depend on what else runs on the machine: under load
  a legitimate query waits for the CPU, it does not time out;
* every query runs in a worker process (this file run as a script, standard library only) whose address
  space is capped (``RLIMIT_AS``, ``max_memory`` bytes) and whose CPU time is capped per query
  (``RLIMIT_CPU``); the parent kills it when no answer comes ``KILL_GRACE_S`` after the budget and the worker
  has used the budget's CPU time (or, where the worker's CPU time cannot be read, or on a machine so loaded
  that it got under 1/``STARVED_FACTOR`` of a core, after ``STARVED_FACTOR`` budgets of wall time). These
  limits hold for a single SQL function call that the progress handler cannot interrupt (``printf('%.*c',
  2147483647, 'x')`` runs for a minute inside one call) and for a row built whole in memory (many large
  blobs). A killed worker is replaced at the next query (its start-up is not part of that query's
  budget); the worker and its connections are reused across
  queries, so a query costs one pipe round trip more than in-process execution.

``SQLExecutor.run`` never raises: failures come back as ``ExecResult.error`` strings. Its result cache is
bounded in bytes (``cache_bytes``) as well as in entries.
"""

from __future__ import annotations

import marshal
import math
import os
import resource
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DEFAULT_TIMEOUT_S = 1.5
#: Spider dev's largest gold result has 20,662 rows; the cap leaves room above it
DEFAULT_MAX_ROWS = 100_000
#: worker address space; its resident size over all Spider dev gold queries peaks near 30 MB
DEFAULT_MAX_MEMORY = 256 * 2**20
#: estimated size (``rows_bytes``) above which a result is an error; Spider dev's largest gold result is 3.8 MB
DEFAULT_MAX_RESULT_BYTES = 32 * 2**20
#: seconds the parent waits past the budget before killing the worker (the progress handler usually wins)
KILL_GRACE_S = 0.25
#: seconds a new worker may take to start (interpreter start-up is not part of any query's budget: on a loaded
#: machine it took longer than the budget itself, and the first query after a kill timed out)
STARTUP_WAIT_S = 60.0
#: a starved worker (one that got little CPU) is waited for at most this many budgets of wall time
STARVED_FACTOR = 20
#: the worker's first message: it is up, its limits are set
_READY = "ready"

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
#: functions that touch files, load code or were used in past SQLite exploits
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_dbpage"}
_SQLITE_LIMITS = {
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LENGTH: 10_000_000,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 1_000_000,
}
#: most rows fetched between two checks of the result's size
_FETCH_CHUNK = 512
_HEADER = struct.Struct("<Q")  # length prefix of every message on the pipes
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one query: rows (possibly cut at the row cap) or an error message."""

    rows: tuple = ()
    error: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def rows_bytes(rows) -> int:
    """Estimated memory of fetched rows as Python objects: per row a tuple (56 bytes + 8 per column), per value
    32 bytes plus its length for text and blobs. Bounds results and sizes the result cache."""
    total = 0
    for row in rows:
        total += 56 + 40 * len(row) + sum(len(v) for v in row if v.__class__ is str or v.__class__ is bytes)
    return total


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


def _send(fd: int, message) -> None:
    """Write one length-prefixed message (blocks until the reader has taken it all). Messages hold only what
    SQLite returns (tuples, str, bytes, int, float, None), so ``marshal`` (the fastest codec for them) suffices;
    both sides run the same interpreter."""
    payload = marshal.dumps(message)
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int, deadline: float | None = None):
    """Read one message: EOFError when the other end is closed, TimeoutError past ``deadline``.

    Reads are not cut at the message's end before its length is known: the two sides take turns, so at most
    one message is ever in a pipe."""
    buf, need = bytearray(), _HEADER.size
    while len(buf) < need:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, max(need - len(buf), 1 << 16))
        if not chunk:
            raise EOFError
        buf += chunk
        if need == _HEADER.size and len(buf) >= need:
            need += _HEADER.unpack_from(buf)[0]
    return marshal.loads(memoryview(buf)[_HEADER.size :])


# ------------------------------------------------------------------------------- the worker process
def _execute(conns: dict, db_path: str, sql: str, timeout_s: float, max_rows: int, max_bytes: int) -> tuple:
    """Run one query on a cached connection: ``(rows, error, truncated, estimated bytes)``."""
    try:
        if db_path not in conns:
            conns[db_path] = open_readonly(db_path)
        conn = conns[db_path]
    except Exception as exc:  # missing or unreadable database: the reward, not the trainer, fails
        return (), f"cannot open database: {exc}"[:300], False, 0
    deadline = time.process_time() + timeout_s
    # called every 1,000 VM instructions; a non-zero return interrupts the statement
    conn.set_progress_handler(lambda: int(time.process_time() > deadline), 1_000)
    cursor, rows, nbytes, size = None, [], 0, 1  # one row first, to learn how large rows are
    try:
        cursor = conn.execute(sql)
        while len(rows) <= max_rows:
            chunk = cursor.fetchmany(min(size, max_rows + 1 - len(rows)))
            if not chunk:
                break
            rows += chunk
            chunk_bytes = rows_bytes(chunk)
            nbytes += chunk_bytes
            if nbytes > max_bytes:
                return (), f"result too large: over {max_bytes / 2**20:g} MiB", False, 0
            # next, only as many rows of this size as the byte budget has room for: an oversized result of
            # large rows ends at the byte limit, not at the memory limit
            size = max(1, min(_FETCH_CHUNK, (max_bytes - nbytes) * len(chunk) // chunk_bytes))
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        if "interrupted" in str(exc):
            message = f"timeout: query used more than {timeout_s:g} s of CPU"
        elif isinstance(exc, MemoryError):  # SQLite's own allocation failures arrive as MemoryError too
            message = "out of memory: the query needs more than the sandbox's memory limit"
        return (), message[:300], False, 0
    finally:
        if cursor is not None:
            cursor.close()  # releases the read transaction of a partly fetched statement
        conn.set_progress_handler(None, 0)
    truncated = len(rows) > max_rows
    return tuple(rows[:max_rows]), None, truncated, nbytes


def _serve(max_memory: int) -> None:
    """Worker loop: answer ``(db_path, sql, timeout_s, max_rows, max_bytes)`` requests until stdin closes.

    The address space is capped once; the CPU limit is moved before each query to the time used so far plus
    the query's budget (whole seconds, rounded up, plus one), so SIGXCPU ends a query that outruns it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which then closes the pipe
    resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
    cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    conns: dict[str, sqlite3.Connection] = {}
    _send(1, _READY)
    while True:
        try:
            db_path, sql, timeout_s, max_rows, max_bytes = _receive(0)
        except EOFError:
            return
        soft = math.ceil(time.process_time() + timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft if cpu_hard == resource.RLIM_INFINITY else min(soft, cpu_hard), cpu_hard))
        try:
            reply = _execute(conns, db_path, sql, timeout_s, max_rows, max_bytes)
            _send(1, reply)
        except MemoryError:  # the result fitted, its serialised copy did not
            _send(1, ((), "out of memory: the query needs more than the sandbox's memory limit", False, 0))


# ------------------------------------------------------------------------------------- the parent side
def _stop(proc: subprocess.Popen, owner: int) -> None:
    if os.getpid() == owner and proc.poll() is None:  # a forked child must not stop its parent's worker
        proc.kill()
        proc.wait()


class _Worker:
    """One sandbox process (this file as a script, isolated mode, no site packages) and its pipes."""

    def __init__(self, max_memory: int):
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", __file__, str(max_memory)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0)
        self.owner = os.getpid()
        self._finalizer = weakref.finalize(self, _stop, self.proc, self.owner)
        self.ready = False

    def ask(self, request: tuple, wait_s: float) -> tuple | str:
        """The worker's reply, or why there is none; in that case the worker is stopped (``alive`` is False).
        ``wait_s`` counts from the request: a new worker's start-up (up to ``STARTUP_WAIT_S``) comes first."""
        try:
            if not self.ready:
                try:
                    self.ready = _receive(self.proc.stdout.fileno(), time.monotonic() + STARTUP_WAIT_S) == _READY
                except TimeoutError:
                    self.stop()
                    return f"sandbox worker did not start within {STARTUP_WAIT_S:g} s"
            budget, cpu_start = request[2], self.cpu_seconds()
            _send(self.proc.stdin.fileno(), request)
            fd, now = self.proc.stdout.fileno(), time.monotonic()
            wait_until, give_up = now + wait_s, now + STARVED_FACTOR * budget + KILL_GRACE_S
            while not select.select([fd], [], [], max(0.0, wait_until - time.monotonic()))[0]:
                used = None if cpu_start is None else self.cpu_seconds() - cpu_start
                if used is None or used >= budget or time.monotonic() >= give_up:
                    self.stop()
                    return f"timeout: query used more than {budget:g} s of CPU" if used is not None and used >= budget \
                        else f"timeout: query ran longer than {(budget if used is None else STARVED_FACTOR * budget):g} s"
                # starved, not slow: wait at least as long as the CPU budget it has left
                wait_until = min(give_up, time.monotonic() + budget - used + KILL_GRACE_S)
            return _receive(fd)
        except (EOFError, OSError):  # died during the query (BrokenPipeError: before it)
            code = self.proc.wait()
            if code == -signal.SIGXCPU:
                return f"timeout: query used more than {request[2]:g} s of CPU"
            return f"sandbox worker died ({signal.Signals(-code).name if code < 0 else f'exit {code}'})"
        except BaseException:  # KeyboardInterrupt, an alarm: its late reply would answer the next request
            self.stop()
            raise

    def cpu_seconds(self) -> float | None:
        """CPU seconds (user + system) the worker has used, from ``/proc`` (None where it cannot be read)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)

    @property
    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def stop(self) -> None:
        self._finalizer()


class SQLExecutor:
    """Runs queries in the sandbox worker (started at the first query, replaced after a kill) and caches
    recent results by (db path, sql, budget), at most ``cache_size`` entries and ``cache_bytes`` estimated bytes.

    Queries from several threads take turns (one worker per executor)."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS, cache_size: int = 1024,
                 cache_bytes: int = 64 * 2**20, max_memory: int = DEFAULT_MAX_MEMORY,
                 max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES):
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.max_memory = max_memory
        self.max_result_bytes = max_result_bytes
        # the G responses of a group share one gold query, and several rewards run the same answer SQL
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, str, float], tuple[ExecResult, int]] = OrderedDict()
        self._cached_bytes = 0
        self._worker: _Worker | None = None
        self._lock = threading.Lock()

    def run(self, db_path: str | Path, sql: str, timeout_s: float | None = None) -> ExecResult:
        """Execute one statement of ``sql`` on ``db_path`` within ``timeout_s`` seconds (default: the executor's
        ``timeout_s``); cached by (path, sql, budget), since a query that timed out may finish with more time.
        Never raises."""
        budget = self.timeout_s if timeout_s is None else float(timeout_s)
        key = (str(db_path), sql, budget)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key][0]
            result, nbytes = self._execute(str(db_path), sql, budget)
            self._remember(key, result, nbytes)
        return result

    def close(self) -> None:
        """Stop the worker now (it also stops when the executor is garbage-collected or the process exits)."""
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None

    def _execute(self, db_path: str, sql: str, timeout_s: float) -> tuple[ExecResult, int]:
        if not isinstance(sql, str) or not sql.strip():
            return ExecResult(error="empty query"), 0
        if self._worker is None or not self._worker.alive:
            self._worker = _Worker(self.max_memory)
        request = (db_path, sql, timeout_s, self.max_rows, self.max_result_bytes)
        reply = self._worker.ask(request, timeout_s + KILL_GRACE_S)
        if isinstance(reply, str):
            return ExecResult(error=reply), 0
        rows, error, truncated, nbytes = reply
        return ExecResult(rows=rows, error=error, truncated=truncated), nbytes

    def _remember(self, key: tuple[str, str, float], result: ExecResult, nbytes: int) -> None:
        """Cache a result, evicting the least recently used; one result may take at most an eighth of the
        byte budget, so that a single large result cannot flush the whole cache."""
        if self.cache_size <= 0 or nbytes > self.cache_bytes // 8:
            return
        self._cache[key] = (result, nbytes)
        self._cached_bytes += nbytes
        while len(self._cache) > self.cache_size or self._cached_bytes > self.cache_bytes:
            self._cached_bytes -= self._cache.popitem(last=False)[1][1]

    @property
    def cached_bytes(self) -> int:
        """Estimated bytes (``rows_bytes``) of the results held in the cache."""
        return self._cached_bytes


if __name__ == "__main__":  # the sandbox worker (started by SQLExecutor, standard library only)
    _serve(int(sys.argv[1]))
