"""Every notebook executes under papermill at the smoke size, and the book builds from those outputs."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from mrtpo import book

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_is_planned_paired_and_has_one_parameters_cell():
    planned = [e["name"] for e in book.notebook_plan()]
    assert sorted(planned) == NOTEBOOKS
    toc = (ROOT / "_toc.yml").read_text()
    for name in NOTEBOOKS:
        assert f"book/executed/{name}" in toc
        assert (ROOT / "notebooks" / f"{name}.py").exists()  # jupytext twin
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        params = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(params) == 1
        names = re.findall(r"^(\w+) = ", "".join(params[0]["source"]), re.M)
        code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and c not in params)
        for param in names:  # every parameter is used (the book passes force to every page)
            assert param == "force" or re.search(rf"\b{param}\b", code), f"{name}: parameter {param} is unused"
        assert not any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.timeout(1500)
def test_smoke_book_builds_with_a_figure_and_a_table_per_notebook(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    index = book.build(smoke=True)
    assert index.exists()
    html = ROOT / "_build" / "html" / "book" / "executed"
    for name in NOTEBOOKS:
        page = (html / f"{name}.html").read_text()
        assert "<table" in page, name
        assert "<img" in page, name
