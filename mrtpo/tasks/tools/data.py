"""Tool-calling rows in BFCL's shapes, and BFCL v4's own single-turn categories.

Every example, whatever its source, carries BFCL's own shapes: ``functions`` (JSON list of function
descriptions) and ``ground_truth`` (JSON list of ``{name: {param: [possible values]}}``), plus the
BFCL ``category`` that picks the checker (simple / multiple / parallel). Only Python categories are
loaded: BFCL's Java and JavaScript categories expect values written as source-code strings.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from .calls import TEMPLATE

#: BFCL v4 single-turn AST categories (Python), as named in ``bfcl_eval/data/BFCL_v4_<name>.json``
NON_LIVE = ("simple_python", "multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")


def system_prompt(functions: list[dict], compact: bool = False) -> str:
    """Tool list and output layout. ``compact`` renders ``name(arg: type, opt?: type) - description``
    (the tiny scale's short prompts) instead of one JSON description per line."""
    if compact:
        lines = []
        for f in functions:
            props, required = f["parameters"]["properties"], f["parameters"].get("required", [])
            args = ", ".join(f"{p}{'' if p in required else '?'}: {d['type']}" for p, d in props.items())
            lines.append(f"{f['name']}({args}) - {f.get('description', '')}")
    else:
        lines = [json.dumps(f, ensure_ascii=False) for f in functions]
    return "Tools:\n" + "\n".join(lines) + "\nReply exactly as:\n" + TEMPLATE


def dataset_row(id_: str, messages: list[dict], functions: list, ground_truth: list, category: str, source: str, compact: bool = False) -> dict:
    """A dataset row; the tool list and layout go in a system message (merged into the data's own, if any)."""
    system = system_prompt(functions, compact)
    messages = [dict(m) for m in messages]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = system + "\n\n" + messages[0]["content"]
    else:
        messages.insert(0, {"role": "system", "content": system})
    return {
        "id": id_,
        "prompt": messages,
        "functions": json.dumps(functions, ensure_ascii=False),
        "ground_truth": json.dumps(ground_truth, ensure_ascii=False),
        "category": category,
        "source": source,
    }


def bfcl_data_dir() -> Path:
    """``bfcl_eval/data`` of the installed ``bfcl-eval`` (located without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bfcl-eval is not installed: pip install --no-deps bfcl-eval")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from exc
    return rows


def load_bfcl(categories: tuple[str, ...] = NON_LIVE + LIVE, data_dir: str | Path | None = None):
    """BFCL v4 single-turn AST categories as a Dataset (questions joined with their possible answers)."""
    from datasets import Dataset

    root = Path(data_dir) if data_dir else bfcl_data_dir()
    rows = []
    for category in categories:
        if category not in NON_LIVE + LIVE:
            raise ValueError(f"unsupported BFCL category {category!r}; valid: {', '.join(NON_LIVE + LIVE)}")
        answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
        for q in _read_jsonl(root / f"BFCL_v4_{category}.json"):
            if q["id"] not in answers:
                raise ValueError(f"{root}/BFCL_v4_{category}.json: {q['id']} has no possible answer")
            rows.append(dataset_row(q["id"], q["question"][0], q["function"], answers[q["id"]], category, "bfcl"))
    return Dataset.from_list(rows)
