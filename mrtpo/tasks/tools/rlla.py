"""ToolRL (RLLA) data in BFCL's shapes: each record's tools and gold call(s) typed so that BFCL's checker can judge."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from .calls import parse_calls
from .data import dataset_row

logger = logging.getLogger(__name__)

_RLLA_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "float",
               "number": "float", "bool": "boolean", "boolean": "boolean", "dict": "dict", "object": "dict"}


def _declared_type(spec: dict) -> str:
    """BFCL type name of an RLLA declared type (``str``, ``List[int]``, ``float``, ...)."""
    declared = str(spec.get("type", "")).lower()
    return _RLLA_TYPES.get(declared, "array" if declared.startswith("list") else "any")


def _type_of(value: Any) -> str:
    """BFCL type name of a JSON value."""
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"), (list, "array"), (dict, "dict")):
        if isinstance(value, py):
            return name
    return "any"


def _param_spec(type_name: str, value: Any = None) -> dict:
    spec = {"type": type_name}
    if type_name == "array":  # BFCL checks one level of item types
        spec["items"] = {"type": _type_of(value[0]) if isinstance(value, list) and value else "string"}
    return spec


def _as_options(value: Any) -> Any:
    """A literal gold value in BFCL's possible-answer shape: dicts (and dicts in a list) hold option lists."""
    if isinstance(value, dict):
        return {k: [v] for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [{k: [x] for k, x in v.items()} for v in value]
    return value


def _rlla_example(instruction: str, user: str, output: str, where: str) -> dict | None:
    """One ToolRL record in BFCL shapes; None when its gold answer makes no tool call.

    RLLA's declared parameter types are unreliable (``"page": "1"`` for an ``int``), so each parameter
    the gold call uses is typed by its gold value; the others keep their declared type and may be
    omitted or set to their default.
    """
    declared = {}
    for m in re.finditer(r"^\d+\. Name: (.+)\nDescription: (.*)\nParameters: (.*)$", instruction, re.MULTILINE):
        try:
            params = json.loads(m.group(3))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: tool {m.group(1)!r} has unparseable parameters") from exc
        declared[m.group(1)] = (m.group(2), params if isinstance(params, dict) else {})
    if "<tool_call>" not in output:
        return None
    try:
        gold = [next(iter(c.items())) for c in parse_calls(output)]
    except Exception as exc:
        raise ValueError(f"{where}: unparseable gold tool call: {exc}") from exc
    functions, ground_truth = {}, []
    for name, args in gold:
        if name not in declared:
            raise ValueError(f"{where}: gold calls {name!r}, which the tool list lacks")
        description, params = declared[name]
        fn = functions.setdefault(name, {"name": name, "description": description,
                                         "parameters": {"type": "dict", "properties": {}, "required": list(args)}})
        fn["parameters"]["required"] = [p for p in fn["parameters"]["required"] if p in args]
        answer = {}
        for p, spec in params.items():
            if p not in args:
                spec = spec if isinstance(spec, dict) else {}
                fn["parameters"]["properties"].setdefault(p, _param_spec(_declared_type(spec)))
                default = spec.get("default", "")
                answer[p] = [""] + ([default] if default not in ("", None) else [])
        for p, value in args.items():
            fn["parameters"]["properties"][p] = _param_spec(_type_of(value), value)
            answer[p] = [_as_options(value)]
        ground_truth.append({name: answer})
    # offer every tool of the record, in order: the unused ones are the distractors
    for name, (description, params) in declared.items():
        if name not in functions:
            props = {p: _param_spec(_declared_type(s)) for p, s in params.items() if isinstance(s, dict)}
            functions[name] = {"name": name, "description": description, "parameters": {"type": "dict", "properties": props, "required": []}}
    ordered = [functions[n] for n in declared]
    category = "multiple" if len(ground_truth) == 1 else "parallel_multiple"
    return {"messages": [{"role": "user", "content": user}], "functions": ordered, "ground_truth": ground_truth, "category": category}


def load_rlla(path: str | Path):
    """ToolRL (RLLA) data: ``rlla_sft.json`` (instruction/input/output) or the RL ``.parquet`` split.

    A file that is not a list of such records fails here. Records that cannot be judged by the AST
    checker are skipped with a warning naming them: a gold answer with no tool call (a plain
    ``<response>``, which needs another verifier) or a broken gold call (ToolRL's data has a few,
    e.g. a call named ``"LastName varchar"`` cut out of a column list).
    """
    import pandas as pd
    from datasets import Dataset

    path = Path(path)
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            records = [(r["extra_info"]["instruction"], r["extra_info"]["input"], r["reward_model"]["ground_truth"]) for _, r in frame.iterrows()]
        else:
            records = [(r["instruction"], r["input"], r["output"]) for r in json.loads(path.read_text(encoding="utf-8"))]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not ToolRL data: {type(exc).__name__}: {exc}") from exc
    rows, skipped = [], []
    for i, (instruction, user, output) in enumerate(records):
        try:
            example = _rlla_example(instruction, user, output, f"{path}: record {i}")
        except ValueError as exc:
            skipped.append(str(exc))
            continue
        if example is not None:
            rows.append(dataset_row(f"rlla_{i}", example["messages"], example["functions"], example["ground_truth"], example["category"], "rlla"))
    if skipped:
        logger.warning("skipped %d records with unusable gold calls: %s", len(skipped), "; ".join(skipped))
    return Dataset.from_list(rows)
