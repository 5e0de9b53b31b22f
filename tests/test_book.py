"""Every notebook executes under papermill at the smoke size, the book builds from those outputs, and every page
passes the browser check (headless Chromium) that ``make book-check`` runs on the full book."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from mrtpo.book import pages as book
from mrtpo.book import browser

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
        for param in names:  # every parameter is used (the book passes force to every page that declares it)
            assert param == "force" or re.search(rf"\b{param}\b", code), f"{name}: parameter {param} is unused"
        assert not any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_and_its_jupytext_twin_say_the_same(name):
    """An edit to one side only (a merge that touched the .ipynb) would leave readers of the .py another page."""
    jupytext = pytest.importorskip("jupytext")
    from_notebook = jupytext.writes(jupytext.read(ROOT / "notebooks" / f"{name}.ipynb"), fmt="py:percent")
    twin = (ROOT / "notebooks" / f"{name}.py").read_text()
    drop_header = lambda text: text.split("# ---\n", 2)[-1]  # noqa: E731  (jupytext's header: formats, versions)
    assert drop_header(from_notebook) == drop_header(twin), f"jupytext --sync notebooks/{name}.py"


@pytest.mark.timeout(1500)
def test_smoke_book_builds_with_a_figure_and_a_table_per_notebook(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    site = tmp_path / "site"  # not the repository: the reader's built book is left as it is
    built = {p: p.stat().st_mtime for p in (ROOT / "_build" / "html").rglob("*.html")}
    index = book.build(smoke=True, site=site)
    assert index == site / "_build" / "html" / "index.html" and index.exists()
    assert built == {p: p.stat().st_mtime for p in (ROOT / "_build" / "html").rglob("*.html")}
    html = site / "_build" / "html" / "book" / "executed"
    for name in NOTEBOOKS:
        page = (html / f"{name}.html").read_text()
        assert "<table" in page, name
        assert "<img" in page or 'class="relevance-text"' in page, name  # a figure, or token relevance as text
    findings = browser.check_book(site / "_build" / "html", site / "_build" / "screenshots", verbose=False)
    assert len(findings) >= len(NOTEBOOKS)
    problems = {page: found for page, found in findings.items() if found}
    assert not problems, json.dumps(problems, indent=1)


def test_a_kernel_that_dies_while_starting_is_replaced_and_a_notebook_error_is_not(tmp_path, monkeypatch):
    import nbformat
    import papermill

    calls = []

    def execute_notebook(source, out, **kwargs):
        calls.append(source)
        if len(calls) == 1:  # what jupyter_client raises when the kernel lost its port to another kernel
            raise RuntimeError("Kernel died before replying to kernel_info")
        if kwargs["parameters"].get("broken"):
            raise RuntimeError("the notebook's own error")
        cell = nbformat.v4.new_code_cell("model = 'smoke'", metadata={"tags": ["injected-parameters"]})
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), out)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    out = book.execute(NOTEBOOKS[0], {}, tmp_path)
    assert len(calls) == 2
    assert nbformat.read(out, as_version=4).cells[0].metadata.tags == ["injected-parameters", "remove-cell"]
    calls.clear()
    with pytest.raises(RuntimeError, match="own error"):
        book.execute(NOTEBOOKS[0], {"broken": True}, tmp_path)
    assert len(calls) == 2  # the kernel's death is retried, the notebook's error is raised at once
    calls.clear()
    monkeypatch.setattr(book, "KERNEL_START_ATTEMPTS", 1)
    with pytest.raises(RuntimeError, match="kernel_info"):
        book.execute(NOTEBOOKS[0], {}, tmp_path)


def test_browser_check_finds_what_a_reader_should_not_see(tmp_path):
    """Each defect the check exists for, on a page of its own, is reported; a clean page is not."""
    from PIL import Image

    Image.new("RGB", (300, 200), "white").save(tmp_path / "blank.png")
    Image.effect_noise((300, 200), 80).save(tmp_path / "drawn.png")
    column = '<html><body><main><article style="width:800px">{}</article></main></body></html>'
    pages = {
        "clean": '<p>text</p><div style="overflow-x:auto"><table><tr><td>fits</td></tr></table></div><img src="drawn.png">',
        "overflow": '<div style="overflow:hidden"><table style="width:2000px"><tr><td>cut</td></tr></table></div>',
        "scrolls": '<pre style="overflow-x:auto">' + "a long line " * 200 + "</pre>",
        "broken": '<img src="missing.png">',
        "path": "<p>saved to PosixPath('/home/ann/mrtpo/results/figures/x.png')</p><p>relative: results/figures/x.png</p>",
        "traceback": '<div class="cell_output"><pre>Traceback (most recent call last):\nValueError: bad</pre></div>',
        "empty": '<img src="blank.png"><div class="cell_output"><pre>&lt;Figure size 640x480 with 0 Axes&gt;</pre></div>',
    }
    for name, body in pages.items():
        (tmp_path / f"{name}.html").write_text(column.format(body))
    (tmp_path / "index.html").write_text(column.format("<p>home</p>"))
    found = browser.check_book(tmp_path, tmp_path / "shots", verbose=False)
    kinds = {page.removesuffix(".html"): {p["kind"] for p in problems} for page, problems in found.items()}
    assert kinds == {"index": set(), "clean": set(), "overflow": {"overflow"}, "scrolls": {"overflow"}, "broken": {"broken image"},
                     "path": {"machine path"}, "traceback": {"error"}, "empty": {"empty figure"}}
    assert (tmp_path / "shots" / "overflow.png").stat().st_size > 0


def test_committed_results_hold_no_machine_paths():
    """Run summaries and profiles name the cache's files relative to the cache root, never as absolute paths."""
    files = [p for p in (ROOT / "results").rglob("*") if p.is_file() and p.suffix in {".json", ".jsonl", ".csv", ".md"}]
    hits = {str(p.relative_to(ROOT)): h[:2] for p in files if (h := browser.find_machine_paths(p.read_text()))}
    assert not hits, hits


def test_ours_beside_the_paper_with_standard_errors_and_dashes():
    import pandas as pd

    from mrtpo.analysis import report

    ours = pd.DataFrame({"method": ["gdpo", "mrtpo", "joint"], "mean": [0.4, 0.5, 0.45], "se": [0.01, float("nan"), 0.02],
                         "seeds": [3, 1, 2]})
    paper = pd.DataFrame({"model": ["7B", "7B"], "method": ["GDPO", "MRTPO"], "score": [71.55, 73.15], "std": [0.27, None]})
    view = report.beside_paper(ours, paper, {"ours": ("mean", "se")})
    assert view.loc["gdpo"].tolist() == [3, "0.400 ± 0.010", "71.55 ± 0.27"]
    assert view.loc["mrtpo"].tolist() == [1, "0.500 ± —", "73.15 ± —"]
    assert view.loc["joint", "paper: 7B (± std)"] == "—"
    one_seed = report.summary(pd.DataFrame({"method": ["a"], "metric": ["m"], "benchmark": ["synthetic_test"],
                                            "decoding": ["temp1"], "value": [0.5]}), "m")
    assert one_seed["std"].isna().all() and one_seed["se"].isna().all()


def test_relevance_as_text_escapes_tokens_and_underlines_the_read_region():
    from mrtpo.analysis import plots

    shown = plots.RelevanceText(["<think>", "a", "</think>", " x"], {"format": [0.0, 0.1, 0.0, 0.4]}, {"format": [3]},
                                labels={"format": "format: reward 1"})
    html = shown._repr_html_()
    assert "&lt;think&gt;" in html and "<think>" not in html.replace('class="relevance-text"', "")
    assert html.count("text-decoration:underline") == 1 + 1  # the read token, and the legend's example
    assert "format: reward 1" in html
    assert len(shown.figure().axes) == 1


def test_figures_keep_long_method_names_and_legends_off_the_data():
    import matplotlib.pyplot as plt
    import pandas as pd

    from mrtpo.analysis import plots

    methods = ["gdpo", "mrtpo", "opsd", "gdpo+saw", "gdpo+constlen", "mrtpo+constlen", "mrtpo-sub_rewards"]
    fig = plots.method_bars(pd.DataFrame({"method": methods, "value": range(len(methods))}), "method", "value")
    assert all(label.get_rotation() == 30 for label in fig.axes[0].get_xticklabels())
    short = plots.method_bars(pd.DataFrame({"method": ["gdpo", "mrtpo"], "value": [0, 1]}), "method", "value")
    assert all(label.get_rotation() == 0 for label in short.axes[0].get_xticklabels())
    steps = pd.DataFrame({"step": [0, 1, 0, 1], "method": ["gdpo", "gdpo", "mrtpo", "mrtpo"], "len": [1, 2, 3, 4]})
    ax = plots.curves(steps, "len").axes[0]
    fig2 = ax.figure
    fig2.canvas.draw()
    legend, axes_box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes_box.x1  # beside the axes, not over the curves
    plt.close("all")


def test_verdict_chart_says_when_a_claim_has_no_interval():
    import matplotlib.pyplot as plt
    import pandas as pd

    from mrtpo.analysis import plots

    rows = pd.DataFrame([
        {"claim": "one seed", "source": "Table 1", "est": 0.05, "lo": float("nan"), "hi": float("nan"), "null": 0.0, "claimed": 0.02,
         "verdict": "inconclusive"},
        {"claim": "three seeds", "source": "Table 2", "est": 0.05, "lo": 0.01, "hi": 0.09, "null": 0.0, "claimed": 0.02,
         "verdict": "reproduced"},
    ])
    texts = [t.get_text() for t in plots.verdict_chart(rows).axes[0].texts]
    assert texts == ["0.05, no interval", "0.05"]
    plt.close("all")


def test_the_build_log_tells_a_trained_run_from_a_base_made(monkeypatch):
    """A base copied from ``bases/`` (or built, or converted) on a fresh clone is not a training: the build's line says
    which it was."""
    run, base = ("results/runs/sql/tiny/gdpo-seed0-x", 1.0), ("cache/models/sql-tiny-0-x", 2.0)
    before = ({run}, set())
    monkeypatch.setattr(book, "_on_disk", lambda: ({run}, {base}))
    assert book._made(before) == "1 base"
    monkeypatch.setattr(book, "_on_disk", lambda: ({run, ("r2", 3.0), ("r3", 4.0)}, {base}))
    assert book._made(before) == "trained 2, 1 base"
    assert book._made(({run, ("r2", 3.0), ("r3", 4.0)}, {base})) == "reused"
