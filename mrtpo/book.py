"""Build the Jupyter Book: execute every notebook of ``book/notebooks.yml`` with papermill, then render.

``python -m mrtpo.book build [--force] [--smoke]``. Executed notebooks go to ``book/executed/`` (git-ignored);
the HTML to ``_build/html``. Notebooks reuse cached run folders unless ``--force`` (``make reproduce``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "book" / "notebooks.yml"
EXECUTED = ROOT / "book" / "executed"


def notebook_plan() -> list[dict]:
    """The notebooks the book shows, each ``{"name", "parameters"}``, in order."""
    if not PLAN.exists():
        return []
    return yaml.safe_load(PLAN.read_text()).get("notebooks", []) or []


def execute(name: str, parameters: dict, out_dir: Path = EXECUTED) -> Path:
    """Run ``notebooks/<name>.ipynb`` through papermill with ``parameters``; return the executed copy."""
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.ipynb"
    papermill.execute_notebook(
        str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), parameters=parameters, cwd=str(ROOT / "notebooks"),
        kernel_name="python3", progress_bar=False,
    )
    return out


def build(force: bool = False, smoke: bool = False, html: bool = True) -> Path:
    """Execute the planned notebooks (smoke: at the test suite's smoke size) and render the HTML book."""
    for entry in notebook_plan():
        params = dict(entry.get("parameters", {}))
        params["force"] = force
        if smoke:
            params.update(entry.get("smoke", {}))
        print(f"[book] executing {entry['name']} {params}", flush=True)
        execute(entry["name"], params)
    if html:
        cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", "--all", "-W", "-n", "--keep-going", str(ROOT)]
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return ROOT / "_build" / "html" / "index.html"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mrtpo.book", description=__doc__)
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--force", action="store_true", help="retrain every run instead of reusing cached ones")
    parser.add_argument("--smoke", action="store_true", help="smoke size (what the test suite renders)")
    args = parser.parse_args(argv)
    index = build(force=args.force, smoke=args.smoke)
    print(f"[book] {index}")


if __name__ == "__main__":
    main()
