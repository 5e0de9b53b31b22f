"""Every benchmark script imports against the current package (a moved or renamed function fails here, not on the
day the benchmark is next run), and says how to run it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_benchmark_script_imports_and_documents_its_command(path):
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script is being executed
    try:
        spec.loader.exec_module(module)  # top-level imports only: every script runs its work under __main__
    finally:
        del sys.modules[spec.name]
    assert module.__doc__ and "python benchmarks/" in module.__doc__ or path.stem == "__init__", path.name
