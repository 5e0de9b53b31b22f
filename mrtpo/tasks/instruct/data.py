"""Instruction-following data: IFEval/IFBench JSONL, and the benchmarks judged outside this package.

``kwargs`` is stored as a JSON string (a list of dicts): the constraints' argument dicts have different keys
and types, which Arrow cannot hold in one struct column without inventing nulls.

MulDimIF is judged by its authors' own checker code (Junjie-Ye/MulDimIF ``Code/evaluation``, not packaged) and
AdvancedIF by an LLM judge against expert rubrics (facebookresearch/AdvancedIF, o3-mini): neither can be scored
offline here. Their loaders give the prompts (to sample responses) and what the external judge needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .checkers import build_checker, registry


def _parse_record(record: Any, where: str) -> dict:
    """Validate one IFEval/IFBench record and turn it into a dataset row; errors name ``where``."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: record is not a JSON object")
    prompt, ids, kws = record.get("prompt"), record.get("instruction_id_list"), record.get("kwargs")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{where}: 'prompt' must be a non-empty string")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{where}: 'instruction_id_list' must be a non-empty list of strings")
    if not isinstance(kws, list) or len(kws) != len(ids) or not all(isinstance(k, dict) for k in kws):
        raise ValueError(f"{where}: 'kwargs' must be a list of {len(ids)} objects, one per instruction")
    kws = [{k: v for k, v in kw.items() if v is not None} for kw in kws]
    for iid, kw in zip(ids, kws):
        if iid not in registry():
            raise ValueError(f"{where}: unknown instruction id {iid!r}")
        try:
            build_checker(iid, kw, prompt)
        except Exception as exc:  # a wrong argument name or value is a data error
            raise ValueError(f"{where}: {iid} rejects its kwargs {kw}: {exc}") from exc
    return {
        "key": str(record.get("key", "")),
        "prompt": [{"role": "user", "content": prompt}],
        "prompt_text": prompt,
        "instruction_id_list": ids,
        "kwargs": json.dumps(kws),
    }


def load_jsonl(path: str | Path):
    """Load an IFEval/IFBench JSONL file (``prompt``, ``instruction_id_list``, ``kwargs``) as a Dataset.

    Columns: ``key``, ``prompt`` (conversational), ``prompt_text``, ``instruction_id_list``, ``kwargs``
    (JSON string). A malformed line or an instruction id the registry lacks fails here, naming file and line.
    """
    from datasets import Dataset

    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON: {exc}") from exc
            rows.append(_parse_record(record, where))
    if not rows:
        raise ValueError(f"{path}: no records")
    return Dataset.from_list(rows)


def _read_records(path: str | Path) -> list[dict]:
    """Records of a ``.json`` list or a ``.jsonl`` file; errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            records = []
            for lineno, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from None
        else:
            records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path}: expected a non-empty list of JSON objects")
    return records


def _messages(value: Any, where: str) -> list[dict]:
    """A conversation as chat messages; anything else is a data error naming ``where``."""
    if not (isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                      and isinstance(m.get("content"), str) for m in value)):
        raise ValueError(f"{where}: the conversation must be a non-empty list of {{role, content}} messages")
    return [{"role": m["role"], "content": m["content"]} for m in value]


def _last_user_text(messages: list[dict]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def load_muldimif(path: str | Path):
    """MulDimIF test data (``Data/test.json`` of Junjie-Ye/MulDimIF, 1,200 prompts) as a Dataset.

    Columns: ``key`` (its ``id``), ``prompt`` (the ``conversations`` messages), ``prompt_text`` (last user
    turn), ``constraints`` (JSON list of ``[category, type, description]``, what its checker reads) and
    ``constraint_pattern``. Responses are scored by MulDimIF's own ``evaluation.py``.
    """
    from datasets import Dataset

    rows = []
    for i, rec in enumerate(_read_records(path)):
        where = f"{path}: record {i}"
        messages = _messages(rec.get("conversations"), where)
        constraints = rec.get("constraints")
        if not (isinstance(constraints, list) and constraints and all(
                isinstance(c, list) and len(c) == 3 and all(isinstance(x, str) for x in c) for c in constraints)):
            raise ValueError(f"{where}: 'constraints' must be a list of [category, type, description]")
        rows.append({"key": str(rec.get("id", i)), "prompt": messages, "prompt_text": _last_user_text(messages),
                     "constraints": json.dumps(constraints), "constraint_pattern": str(rec.get("constraint_pattern", ""))})
    return Dataset.from_list(rows)


def load_advancedif(path: str | Path):
    """AdvancedIF (facebook/AdvancedIF, ~1,600 prompts) as a Dataset.

    Reads ``conversation_history`` (the messages up to the turn to answer) and ``prompt_metadata.rubrics``
    (``prompt_metadata`` may be a JSON string, as in the released file). Columns: ``key``, ``prompt``,
    ``prompt_text``, ``rubrics`` (JSON list of strings), ``benchmark`` (``benchmark_name`` when present:
    complex IF, carried context or system steerability). Responses are scored by AdvancedIF's LLM judge.
    """
    from datasets import Dataset

    rows = []
    for i, rec in enumerate(_read_records(path)):
        where = f"{path}: record {i}"
        history = rec.get("conversation_history")
        history = json.loads(history) if isinstance(history, str) else history
        messages = _messages(history, where)
        meta = rec.get("prompt_metadata")
        meta = json.loads(meta) if isinstance(meta, str) else meta
        rubrics = meta.get("rubrics") if isinstance(meta, dict) else None
        rubrics = json.loads(rubrics) if isinstance(rubrics, str) else rubrics
        if not (isinstance(rubrics, list) and rubrics and all(isinstance(r, str) for r in rubrics)):
            raise ValueError(f"{where}: 'prompt_metadata' needs 'rubrics', a non-empty list of strings")
        rows.append({"key": str(rec.get("id", i)), "prompt": messages, "prompt_text": _last_user_text(messages),
                     "rubrics": json.dumps(rubrics), "benchmark": str(rec.get("benchmark_name", ""))})
    return Dataset.from_list(rows)
