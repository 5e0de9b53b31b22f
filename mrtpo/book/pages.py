"""Build the Jupyter Book: execute every notebook of ``book/notebooks.yml`` with papermill, then render.

``python -m mrtpo.book build [--force] [--smoke]``; ``python -m mrtpo.book check`` opens the rendered pages in
headless Chromium (:mod:`mrtpo.book.browser`). Executed notebooks go to ``book/executed/`` (git-ignored);
the HTML to ``_build/html``; ``build(site=...)`` builds in another folder instead (the test suite's smoke book, so
that it leaves the reader's built book alone). Notebooks reuse cached run folders unless ``--force`` (``make reproduce``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from mrtpo.files.paths import ROOT

PLAN = ROOT / "book" / "notebooks.yml"
EXECUTED = ROOT / "book" / "executed"
#: what Jupyter Book reads besides the executed notebooks (copied into a ``site`` other than the repository)
SOURCES = ("_config.yml", "_toc.yml", "_static", "book/method.md")
KERNEL_START_ATTEMPTS = 3  # kernels that die before running a cell are restarted this many times in all


def notebook_plan() -> list[dict]:
    """The notebooks the book shows, each ``{"name", "parameters"}``, in order."""
    if not PLAN.exists():
        return []
    return yaml.safe_load(PLAN.read_text()).get("notebooks", []) or []


def execute(name: str, parameters: dict, out_dir: Path = EXECUTED) -> Path:
    """Run ``notebooks/<name>.ipynb`` through papermill with ``parameters``; return the executed copy.

    The cell papermill injects with ``parameters`` is tagged ``remove-cell``: the page shows the notebook's
    own parameters cell once, not a second code block of overrides.
    """
    import nbformat
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.ipynb"
    for attempt in range(KERNEL_START_ATTEMPTS):
        try:
            papermill.execute_notebook(
                str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), parameters=parameters,
                cwd=str(ROOT / "notebooks"), kernel_name="python3", progress_bar=False,
            )
            break
        except RuntimeError as error:
            # A kernel that dies before its first reply ran no cell; the usual cause is a port another kernel
            # took between jupyter_client choosing it and the kernel binding it (two builds at once), so a
            # fresh kernel with fresh ports is the whole remedy. Any other failure is the notebook's own.
            if "before replying to kernel_info" not in str(error) or attempt == KERNEL_START_ATTEMPTS - 1:
                raise
            print(f"{name}: the kernel died while starting ({error}); starting a new one", file=sys.stderr)
    nb = nbformat.read(out, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, out)
    return out


def _declared(name: str) -> dict:
    """The parameters a notebook's ``parameters`` cell declares."""
    import papermill

    return papermill.inspect_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"))


def _on_disk() -> tuple[set, set]:
    """(run folders, base folders in the cache), each with its modification time: what a notebook trained, and the
    bases it built, copied from ``bases/`` or converted, show up here."""
    from mrtpo.files.paths import cache_root
    from mrtpo.runs.results import run_folders

    runs = {(str(p), (p / "eval.csv").stat().st_mtime) for p in run_folders()}
    models = cache_root() / "models"
    bases = ({(str(p), p.stat().st_mtime) for p in models.iterdir() if p.is_dir() and not p.name.startswith(".")}
             if models.is_dir() else set())
    return runs, bases


def _made(before: tuple[set, set]) -> str:
    """What a notebook added since ``before`` (``_on_disk``): "trained 2", "1 base", "trained 1, 1 base" or "reused"."""
    runs, bases = (len(now - was) for now, was in zip(_on_disk(), before))
    made = ([f"trained {runs}"] if runs else []) + ([f"{bases} base{'s' * (bases > 1)}"] if bases else [])
    return ", ".join(made) or "reused"


@contextlib.contextmanager
def _to_log(log: Path):
    """Send everything written to fds 1 and 2 meanwhile (kernels, papermill, Sphinx) to ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def build(force: bool = False, smoke: bool = False, html: bool = True, site: Path = ROOT) -> Path:
    """Execute the planned notebooks (smoke: at the test suite's smoke size) and render the HTML book.

    ``site``: the folder the book is built in, ``<site>/book/executed`` and ``<site>/_build/html``; any folder
    other than the repository gets a copy of the book's other sources (:data:`SOURCES`) first. Prints one line per
    notebook (name, whether it reused cached runs or trained, seconds) and a total; the libraries' own output
    (kernel, papermill, Sphinx) goes to ``<site>/_build/book.log``.
    """
    site = Path(site)
    if site.resolve() != ROOT:
        for source in SOURCES:
            src, dst = ROOT / source, site / source
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copyfile(src, dst)
    # the kernels import this repository's package, whatever else is installed
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    log = site / "_build" / "book.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    print(f"[book] executing {len(notebook_plan())} notebooks{' (smoke size)' if smoke else ''}; "
          f"library output: {_shown(log)}", flush=True)
    began = time.perf_counter()
    for entry in notebook_plan():
        params = dict(entry.get("parameters", {}))
        if "force" in _declared(entry["name"]):  # pages that train take it; the landing page only reads runs
            params["force"] = force
        if smoke:
            params.update(entry.get("smoke", {}))
        before, t0 = _on_disk(), time.perf_counter()
        try:
            with open(log, "a") as f:  # written to the file itself: under pytest, print does not reach fd 1
                f.write(f"\n===== {entry['name']} {params}\n")
            with _to_log(log):
                execute(entry["name"], params, site / "book" / "executed")
        except Exception:
            print(f"[book] {entry['name']} FAILED; the last lines of {_shown(log)}:\n{_tail(log)}", flush=True)
            raise
        print(f"[book] {entry['name']:<30} {_made(before):<18} "
              f"{time.perf_counter() - t0:7.1f}s", flush=True)
    if html:
        t0 = time.perf_counter()
        cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", "--all", "-W", "-n", "--keep-going", str(site)]
        with open(log, "a") as f:
            done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
        if done.returncode:
            print(f"[book] HTML build FAILED; the last lines of {_shown(log)}:\n{_tail(log)}", flush=True)
            raise subprocess.CalledProcessError(done.returncode, cmd)
        print(f"[book] {'html':<30} {'':<10} {time.perf_counter() - t0:7.1f}s", flush=True)
    print(f"[book] {'total':<30} {'':<10} {time.perf_counter() - began:7.1f}s", flush=True)
    return site / "_build" / "html" / "index.html"


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it lies inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check(html_root: Path = ROOT / "_build" / "html", screenshots: Path = ROOT / "_build" / "screenshots") -> int:
    """Open every page in headless Chromium (:mod:`mrtpo.book.browser`); return the number of pages with problems."""
    from mrtpo.book.browser import check_book

    findings = check_book(html_root, screenshots)
    bad = sum(bool(p) for p in findings.values())
    print(f"[check] {len(findings) - bad}/{len(findings)} pages clean; screenshots in {screenshots.relative_to(ROOT)}")
    return bad


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mrtpo.book", description=__doc__)
    parser.add_argument("command", choices=["build", "check"], help="build: execute and render; check: open "
                        "every rendered page in headless Chromium, screenshot it and report what a reader should not see")
    parser.add_argument("--force", action="store_true", help="retrain every run instead of reusing cached ones")
    parser.add_argument("--smoke", action="store_true", help="smoke size (what the test suite renders)")
    args = parser.parse_args(argv)
    if args.command == "check":
        sys.exit(1 if check() else 0)
    index = build(force=args.force, smoke=args.smoke)
    print(f"[book] {index.relative_to(ROOT)}")

