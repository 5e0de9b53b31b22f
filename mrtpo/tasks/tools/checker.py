"""BFCL's official AST checker, and the gold calls it accepts (read off BFCL's possible answers)."""

from __future__ import annotations

import functools
import sys
import types
from typing import Any


@functools.lru_cache(maxsize=None)
def _ast_checker():
    """BFCL's official ``ast_checker`` and its ``Language`` enum.

    ``ast_checker`` imports ``bfcl_eval.constants.model_config`` only to look up, for function names
    with dots, whether a model's API rewrote them to underscores; that module imports every API
    client. It is stubbed for the import with a mapping that answers "no rewrite" for any model (our
    policies write names verbatim), and the stub is removed again so nothing else sees it.
    """
    name = "bfcl_eval.constants.model_config"
    stub = None
    if name not in sys.modules:

        class _NoRewrite(dict):
            def __missing__(self, key):
                return types.SimpleNamespace(underscore_to_dot=False)

        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = _NoRewrite()
        sys.modules[name] = stub
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    finally:
        if stub is not None and sys.modules.get(name) is stub:
            del sys.modules[name]
    return ast_checker, Language


def check_calls(calls: list[dict], functions: list[dict], ground_truth: list[dict], category: str) -> dict:
    """BFCL's AST verdict (``{"valid": bool, "error": [...], ...}``) for parsed calls."""
    ast_checker, language = _ast_checker()
    return ast_checker(functions, calls, ground_truth, language.PYTHON, category, "mrtpo")


def reference_calls(ground_truth: list[dict], functions: list[dict]) -> list[dict]:
    """One gold call per ground-truth entry, as BFCL's checker accepts it.

    Each argument takes its first possible value; an optional argument that BFCL marks as omissible
    (``""`` among its options) is left out. Dict-typed values (and lists of dicts) hold options one
    level down, resolved the same way, because that is how BFCL's ``dict_checker`` reads them.
    """
    by_name = {f["name"]: f["parameters"] for f in functions}

    def first(options: list) -> Any:
        return next(o for o in options if o != "")

    def resolve_dict(options: dict) -> dict:
        return {k: first(v) for k, v in options.items() if v and "" not in v}

    calls = []
    for entry in ground_truth:
        for name, params in entry.items():
            spec = by_name.get(name, {"properties": {}})
            props, required = spec.get("properties", {}), spec.get("required", [])
            args = {}
            for p, options in params.items():
                if p not in props or all(o == "" for o in options) or ("" in options and p not in required):
                    continue
                value, kind = first(options), props[p].get("type")
                if kind == "dict" and isinstance(value, dict):
                    value = resolve_dict(value)
                elif props[p].get("items", {}).get("type") == "dict" and isinstance(value, list):
                    value = [resolve_dict(v) if isinstance(v, dict) else v for v in value]
                args[p] = value
            calls.append({"name": name, "arguments": args})
    return calls
