"""Fuzzing at scale: every reward function, Z-block builder and check-region finder of the three tasks.

Each task gets ``--inputs`` generated completions (default 10,000); every one goes to each of the task's
functions, paired with a real example (Spider dev, IFEval, BFCL when ``$MRTPO_DATA_DIR`` has them, the
synthetic data otherwise). Input families, drawn with the weights in ``FAMILIES``: random unicode (lone
surrogates, controls, RTL, emoji), unbalanced and nested tags, huge strings, JSON bombs, and per task
near-misses: grammar-aware mutations of the gold SQL (tokens dropped, doubled, swapped, keywords and
identifiers replaced, numbers blown up, cross joins and the sandbox's known resource attacks spliced in),
IF responses one edit away from the reference, tool calls with mutated names, types and arguments.
Completions alternate between plain strings and chat messages.

Every call runs under an alarm of ``--bound`` seconds. Counted per function: exceptions that escaped,
checker errors the reward functions caught and logged (``<reward>/checker_errors``, with their exception
types), invalid outputs (a reward outside {0, 1, None}, a span outside the text, a Z block that is not a dict
of strings), calls past the bound, p50 / p99 / max time per call and the family of the slowest input. No call
is left out of the times (the first calls load lazy resources, e.g. language profiles). Single-threaded.
Writes ``results/bench/fuzz.csv``.

    python benchmarks/fuzz.py [--inputs 10000] [--seed 0] [--tasks sql if tool]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import re
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from mrtpo.files.paths import data_root
from mrtpo.tasks import get_task
from mrtpo.tasks.base import completion_text

ROOT = Path(__file__).resolve().parents[1]
#: input family -> probability (every task draws from all five)
FAMILIES = {"unicode": 0.2, "tags": 0.2, "huge": 0.01, "json_bomb": 0.05, "near_miss": 0.54}
#: resource attacks the SQL sandbox must bound (each costs up to the query timeout), spliced in rarely
SQL_ATTACKS = ["printf('%.*c', 2147483647, 'x')", "zeroblob(1000000000)", "randomblob(200000000)",
               "hex(randomblob(5000000))", "load_extension('/tmp/x.so')", "readfile('/etc/passwd')"]
SQL_ATTACK_RATE = 0.003
SQL_KEYWORDS = ["SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "JOIN", "ON", "UNION",
                "INTERSECT", "EXCEPT", "AND", "OR", "NOT", "IN", "LIKE", "BETWEEN", "IS NULL", "DISTINCT", "count(*)",
                "max(", "avg(", "AS", "ASC", "DESC", "WITH RECURSIVE", "CASE WHEN", "THEN", "END", "(", ")", ",", "*",
                "'", '"', ";", "--", "/*"]
SQL_NUMBERS = ["9223372036854775807", "-9223372036854775808", "1e308", "-1", "0", "0.5", "99999999999999999999999"]
TAGS = {"sql": ("<think>", "</think>", "<answer>", "</answer>"), "if": ("<think>", "</think>", "P.S.", "* ", "<<", ">>"),
        "tool": ("<think>", "</think>", "<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name"', '"arguments"')}
UNICODE_RANGES = [(0x20, 0x7E), (0x00, 0x1F), (0xA0, 0x24F), (0x300, 0x36F), (0x590, 0x6FF), (0x4E00, 0x4FFF),
                  (0x1F600, 0x1F64F), (0xD800, 0xDFFF), (0xE000, 0xE0FF), (0x200B, 0x202E), (0xFFF0, 0xFFFF)]
TOKEN_RE = re.compile(r"'[^']*'|\"[^\"]*\"|\w+|[^\w\s]")


class CallTimeout(Exception):
    pass


class ErrorKinds(logging.Handler):
    """Tallies the exception type of each reward's checker errors, from the warning ``report_checker_errors`` logs
    (one per call here: every call scores one response)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.kinds: dict[str, Counter] = {}

    def emit(self, record: logging.LogRecord) -> None:
        name, _, example = record.args
        self.kinds.setdefault(name, Counter())[str(example).split(":")[0]] += 1


def _alarm(signum, frame):
    raise CallTimeout


# ------------------------------------------------------------------------------------------ examples
def examples(task_name: str, rng: random.Random) -> list[dict]:
    """Rows of the task's real benchmark when present, else its synthetic data."""
    task, d = get_task(task_name), data_root()
    if task_name == "sql":
        from mrtpo.tasks.sql.spider import load_spider

        spider = d / "spider"
        if (spider / "dev.json").is_file():
            return list(load_spider(spider / "dev.json", spider / "tables.json", spider / "database"))
        return list(task.synthetic(300, seed=0, split="test"))
    if task_name == "if":
        from mrtpo.tasks.instruct import InstructionFollowing

        # the larger constraint pool, cut to the task's slots, so that every synthetic constraint type is met
        rows = list(InstructionFollowing(num_constraints=(9, 9), max_constraints=9).synthetic(300, seed=0, split="test"))
        for row in rows:
            keep = sorted(rng.sample(range(9), rng.randint(1, task.max_constraints)))
            kws = json.loads(row["kwargs"])
            row["instruction_id_list"] = [row["instruction_id_list"][i] for i in keep]
            row["kwargs"] = json.dumps([kws[i] for i in keep])
        if (d / "ifeval" / "input_data.jsonl").is_file():
            real = list(task.load(d / "ifeval" / "input_data.jsonl"))
            rows += [r for r in real if len(r["instruction_id_list"]) <= task.max_constraints]
        return rows
    from mrtpo.tasks.tools.data import load_bfcl

    rows = list(task.synthetic(300, seed=0, split="test"))
    try:
        rows += list(load_bfcl())
    except ImportError:  # bfcl-eval absent: synthetic rows only
        pass
    return rows


# -------------------------------------------------------------------------------------------- inputs
def unicode_text(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        lo, hi = rng.choice(UNICODE_RANGES)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def tag_soup(rng: random.Random, task_name: str) -> str:
    pieces = list(TAGS[task_name]) + ["\n", " ", "x", "SELECT 1", '{"a": 1}', "é", "\x00", "</", "<"]
    if rng.random() < 0.3:  # deep nesting of one tag pair
        open_, close = rng.choice([(TAGS[task_name][i], TAGS[task_name][i + 1]) for i in range(0, len(TAGS[task_name]) - 1, 2)])
        depth = rng.randint(1, 2000)
        return open_ * depth + unicode_text(rng, rng.randint(0, 20)) + close * rng.randint(0, depth)
    return "".join(rng.choice(pieces) if rng.random() < 0.7 else unicode_text(rng, rng.randint(1, 5))
                   for _ in range(rng.randint(0, 80)))


def huge(rng: random.Random, task_name: str) -> str:
    n = rng.choice([100_000, 500_000, 2_000_000])
    open_, close = TAGS[task_name][:2]
    return rng.choice([
        " " * n, open_ * (n // len(open_)), close * (n // len(close)), "a " * (n // 2), "(" * n,
        f"{open_}x{close}" + "".join(TAGS[task_name]) * (n // 40), unicode_text(rng, n // 20) * 20,
        f"<think>x</think><answer>SELECT '{'a' * n}'</answer>", "\n\n" * (n // 2), "P.S. " * (n // 5),
    ])


def json_bomb(rng: random.Random, task_name: str) -> str:
    n = rng.choice([10, 1000, 100_000])
    bomb = rng.choice([
        "[" * n + "]" * n, '{"a":' * n + "1" + "}" * n, "[" * n, "1" * n, "1e" + "9" * n, '"' + "\\u0000" * n + '"',
        json.dumps({f"k{i}": i for i in range(min(n, 20_000))}), '{"name": "f", "arguments": ' + "[" * n + "]" * n + "}",
        json.dumps([{"name": "f" * n, "arguments": {"x": [None] * min(n, 10_000)}}]), "NaN", "-Infinity", "{}" * n,
    ])
    wrap = {"sql": "<think>x</think><answer>{}</answer>", "if": "<think>x</think>{}", "tool": "<think>x</think><tool_call>{}</tool_call>"}
    return wrap[task_name].format(bomb) if rng.random() < 0.8 else bomb


def mutate_sql(rng: random.Random, sql: str, others: list[str]) -> str:
    """1-3 grammar-aware edits of ``sql``; identifiers borrowed from ``others`` (queries on the same database)."""
    tokens = TOKEN_RE.findall(sql) or ["SELECT"]
    idents = [t for q in others for t in TOKEN_RE.findall(q) if t[0].isalpha() and t.upper() not in SQL_KEYWORDS] or ["x"]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(tokens))
        op = rng.randrange(9)
        if op == 0 and len(tokens) > 1:
            del tokens[i]
        elif op == 1:
            tokens.insert(i, tokens[i])
        elif op == 2 and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif op == 3:
            tokens[i] = rng.choice(SQL_KEYWORDS)
        elif op == 4:
            tokens[i] = rng.choice(idents)
        elif op == 5:
            tokens[i] = rng.choice(SQL_NUMBERS) if tokens[i].isdigit() or rng.random() < 0.3 else tokens[i]
        elif op == 6:  # a cross join with a table of the same query: bigger results, sometimes a timeout
            if "FROM" in [t.upper() for t in tokens]:
                at = [t.upper() for t in tokens].index("FROM") + 1
                if at < len(tokens):
                    tokens.insert(at + 1, f", {tokens[at]} AS x{rng.randrange(9)}")
        elif op == 7:
            tokens = tokens[: rng.randrange(len(tokens) + 1)] or ["SELECT"]
        else:
            tokens.insert(i, rng.choice(["UNION SELECT 1", "; SELECT 1", "LIMIT -1", "COLLATE NOCASE", "IS NOT NULL",
                                         "(SELECT count(*) FROM sqlite_master)", "NULL", "/*", "'"]))
    if rng.random() < SQL_ATTACK_RATE / FAMILIES["near_miss"]:
        at = [t.upper() for t in tokens].index("SELECT") + 1 if "SELECT" in [t.upper() for t in tokens] else 0
        tokens.insert(at, rng.choice(SQL_ATTACKS) + ",")
    return " ".join(tokens)


def near_miss(rng: random.Random, task_name: str, task, row: dict, pool: list[dict]) -> str:
    if task_name == "sql":
        others = [r["gold_sql"] for r in rng.sample(pool, 3) if r["db_path"] == row["db_path"]] + [row["gold_sql"]]
        sql = mutate_sql(rng, row["gold_sql"], others)
        layout = rng.choice(["<think>{t}</think><answer>{s}</answer>", "<think>{t}</think>\n<answer>\n```sql\n{s}\n```\n</answer>",
                             "<think>{t}</think><answer>{s}", "<answer>{s}</answer>", "{s}", "<think>{t}</think><answer>{s}</answer>x"])
        return layout.format(t=unicode_text(rng, rng.randint(0, 30)), s=sql)
    if task_name == "if":
        reference = row.get("reference") or rng.choice([r for r in pool if r.get("reference")])["reference"]
        return edit_text(rng, reference)
    gold = task.reference_response(row)
    return edit_tool_call(rng, gold)


def edit_text(rng: random.Random, text: str) -> str:
    """One to three small edits that most constraints notice: a character, a word, a line, the case, the end."""
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(8)
        if op == 0:
            text = text[:i] + text[i + 1 :]
        elif op == 1:
            text = text[:i] + rng.choice([",", ".", "*", "\n", "\n\n", "P.S.", '"', "<<", ">>", "***", " ", "é"]) + text[i:]
        elif op == 2:
            lines = text.split("\n")
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif op == 3:
            text = text.upper() if rng.random() < 0.5 else text[:i] + text[i:].swapcase()
        elif op == 4:
            text += rng.choice([" thanks", "\n", " P.S. more", "\n* extra", ",", "?"])
        elif op == 5:
            text = text.replace("</think>", "", 1) if rng.random() < 0.5 else text.replace("<think>", "", 1)
        elif op == 6:
            words = text.split(" ")
            j = rng.randrange(len(words))
            words[j] = words[j] * rng.randint(2, 50)
            text = " ".join(words)
        else:
            text = text[:i] + unicode_text(rng, rng.randint(1, 10)) + text[i:]
    return text


def edit_tool_call(rng: random.Random, response: str) -> str:
    start, end = response.find("<tool_call>") + len("<tool_call>"), response.find("</tool_call>")
    try:
        calls = json.loads(response[start:end])
    except ValueError:
        return edit_text(rng, response)
    values = [None, True, 0, -1, 1.5, 1e308, "", "x" * 1000, [], {}, [[[]]], {"a": {"b": None}}, "Paris", "3"]
    for _ in range(rng.randint(1, 3)):
        dicts = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        call = rng.choice(dicts) if dicts else None
        op = rng.randrange(7)
        if call is None or op == 0:
            calls = rng.choice([calls, [calls], {"calls": calls}, [calls, calls], None])
        elif op == 1:
            name = str(call.get("name"))
            call["name"] = rng.choice(["", name + "_x", name.upper(), 5, None])
        elif op == 2 and isinstance(call.get("arguments"), dict) and call["arguments"]:
            call["arguments"][rng.choice(list(call["arguments"]))] = rng.choice(values)
        elif op == 3 and isinstance(call.get("arguments"), dict):
            call["arguments"]["extra"] = rng.choice(values)
        elif op == 4 and isinstance(call.get("arguments"), dict) and call["arguments"]:
            del call["arguments"][rng.choice(list(call["arguments"]))]
        elif op == 5:
            call["arguments"] = rng.choice(values)
        else:
            return response[:start] + edit_text(rng, json.dumps(calls)) + response[end:]
    return response[:start] + json.dumps(calls) + response[end:]


def make_input(rng: random.Random, task_name: str, task, row: dict, pool: list[dict]) -> tuple[str, object]:
    family = rng.choices(list(FAMILIES), weights=list(FAMILIES.values()))[0]
    if family == "unicode":
        text = unicode_text(rng, rng.choice([0, 1, 10, 300, 3000]))
    elif family == "tags":
        text = tag_soup(rng, task_name)
    elif family == "huge":
        text = huge(rng, task_name)
    elif family == "json_bomb":
        text = json_bomb(rng, task_name)
    else:
        text = near_miss(rng, task_name, task, row, pool)
    completion = text if rng.random() < 0.5 else [{"role": "assistant", "content": text}]
    return family, completion


# ------------------------------------------------------------------------------------------- targets
def targets(task) -> dict:
    """name -> call(completion, row, logged) returning whether the output is valid."""

    def reward(f):
        def call(completion, row, logged):
            cols = {k: [v] for k, v in row.items() if k != "prompt"}
            out = f([row["prompt"]], [completion], None, log_metric=logged.__setitem__, **cols)
            return len(out) == 1 and out[0] in (0.0, 1.0, None)

        return call

    def z_blocks(completion, row, logged):
        out = task.z_blocks([row["prompt"]], [completion], **{k: [v] for k, v in row.items() if k != "prompt"})
        return len(out) == 1 and isinstance(out[0], dict) and all(isinstance(v, str) for v in out[0].values())

    def check_regions(completion, row, logged):
        n = len(completion_text(completion))
        regions = task.check_regions(completion, row)
        return all(0 <= a <= b <= n for spans in regions.values() for a, b in spans)

    funcs = {f.__name__: reward(f) for f in task.reward_funcs()}
    return {**funcs, "z_blocks": z_blocks, "check_regions": check_regions}


def fuzz_task(task_name: str, n: int, seed: int, bound_s: float) -> list[dict]:
    rng = random.Random(f"fuzz-{task_name}-{seed}")
    task = get_task(task_name, sub_verifiers=True) if task_name == "sql" else get_task(task_name)
    pool = examples(task_name, rng)
    calls = targets(task)
    stats = {name: {"times": [], "escaped": 0, "checker_errors": 0, "invalid": 0, "over_bound": 0, "slowest": (0.0, "")}
             for name in calls}
    families, first_escape = Counter(), {}
    for _ in tqdm(range(n), desc=f"fuzz {task_name}", mininterval=10):
        row = rng.choice(pool)
        family, completion = make_input(rng, task_name, task, row, pool)
        families[family] += 1
        for name, call in calls.items():
            logged, s = {}, stats[name]
            signal.setitimer(signal.ITIMER_REAL, bound_s)
            start = time.perf_counter()
            try:
                valid = call(completion, row, logged)
            except CallTimeout:
                s["over_bound"] += 1
                valid = True
            except Exception as exc:
                s["escaped"] += 1
                first_escape.setdefault(name, (family, repr(completion)[:300], traceback.format_exception(exc)[-1]))
                valid = True
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            s["times"].append(time.perf_counter() - start)
            if s["times"][-1] > s["slowest"][0]:
                s["slowest"] = (s["times"][-1], family)
            s["invalid"] += not valid
            s["checker_errors"] += int(logged.get(f"{name}/checker_errors", 0))
    kinds = next(h for h in logging.getLogger("mrtpo.tasks").handlers if isinstance(h, ErrorKinds)).kinds
    print(f"{task_name}: inputs per family {dict(families)}")
    for name, (family, text, error) in first_escape.items():
        print(f"  {name}: first escaped exception ({family}): {error.strip()} on {text}")
    rows = []
    for name, s in stats.items():
        times = sorted(s["times"])
        rows.append({"task": task_name, "function": name, "inputs": len(times), "escaped": s["escaped"],
                     "checker_errors": s["checker_errors"],
                     "checker_error_types": " ".join(f"{k}:{v}" for k, v in kinds.get(name, Counter()).most_common()),
                     "invalid_outputs": s["invalid"], "over_bound": s["over_bound"],
                     "p50_ms": round(1e3 * times[len(times) // 2], 3), "p99_ms": round(1e3 * times[int(0.99 * len(times))], 3),
                     "max_ms": round(1e3 * times[-1], 1), "slowest_family": s["slowest"][1], "examples": len(pool)})
    if hasattr(task, "executor"):
        task.executor.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=10_000, help="generated inputs per task (each goes to every function)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", nargs="+", default=["sql", "if", "tool"])
    parser.add_argument("--bound", type=float, default=10.0, help="alarm per call, seconds")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "fuzz.csv"))
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    logger = logging.getLogger("mrtpo.tasks")  # checker errors are tallied by type, not printed one by one
    logger.addHandler(ErrorKinds())
    logger.propagate = False
    rows = [row for name in args.tasks for row in fuzz_task(name, args.inputs, args.seed, args.bound)]
    frame = pd.DataFrame(rows).assign(seed=args.seed, machine=f"{platform.machine()} python {sys.version.split()[0]}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    print(frame.drop(columns=["machine"]).to_string(index=False))


if __name__ == "__main__":
    main()
