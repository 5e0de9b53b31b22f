"""Cost of the SQL sandbox's worker process: every Spider dev gold query through today's executor and through
the executor of a baseline revision (in-process execution), cache off, in alternating passes so that load
drifts affect both alike.

Writes ``results/bench/sandbox_overhead.csv``: per executor the median pass time over the 1,034 queries, the
per-query median and p99, and the ratio to the baseline; it also checks that both return the same results.

    python benchmarks/sandbox_overhead.py [--baseline 6dc3df4] [--passes 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from mrtpo.files.paths import data_root
from mrtpo.tasks.sql.sandbox import SQLExecutor

ROOT = Path(__file__).resolve().parents[1]
#: the last revision whose executor ran queries in-process
BASELINE = "6dc3df4"


def load_baseline(rev: str):
    """The ``sqlexec`` module of revision ``rev``, imported from a temporary copy."""
    source = subprocess.run(["git", "show", f"{rev}:mrtpo/tasks/sqlexec.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "sqlexec_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("sqlexec_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def timed_pass(executor, queries: list[tuple[str, str]]) -> tuple[list[float], list]:
    times, results = [], []
    for db_path, sql in queries:
        start = time.perf_counter()
        result = executor.run(db_path, sql)
        times.append(time.perf_counter() - start)
        results.append((result.rows, result.error, result.truncated))
    return times, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the executor to compare with")
    parser.add_argument("--passes", type=int, default=5, help="timed passes per executor (after one warm-up pass)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "sandbox_overhead.csv"))
    args = parser.parse_args()

    spider = data_root() / "spider"
    queries = [(str(spider / "database" / r["db_id"] / f"{r['db_id']}.sqlite"), r["query"])
               for r in json.loads((spider / "dev.json").read_text())]
    executors = {f"in-process ({args.baseline})": load_baseline(args.baseline).SQLExecutor(cache_size=0),
                 "sandbox worker": SQLExecutor(cache_size=0)}
    answers = {name: timed_pass(ex, queries)[1] for name, ex in executors.items()}  # warm-up: connections, worker
    same = sum(a == b for a, b in zip(*answers.values()))
    passes = {name: [] for name in executors}
    for _ in range(args.passes):
        for name, ex in executors.items():
            passes[name].append(timed_pass(ex, queries)[0])
    base_total = statistics.median(sum(p) for p in passes[next(iter(executors))])
    rows = []
    for name, runs in passes.items():
        total = statistics.median(sum(p) for p in runs)
        per_query = sorted(t for p in runs for t in p)
        rows.append({"executor": name, "queries": len(queries), "passes": args.passes, "median_pass_s": round(total, 4),
                     "per_query_median_ms": round(1e3 * per_query[len(per_query) // 2], 4),
                     "per_query_p99_ms": round(1e3 * per_query[int(0.99 * len(per_query))], 4),
                     "ratio_to_baseline": round(total / base_total, 3), "same_results": same,
                     "machine": f"{platform.machine()} {platform.processor() or ''} python {sys.version.split()[0]}".strip()})
    frame = pd.DataFrame(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    print(frame.to_string(index=False))


if __name__ == "__main__":
    main()
