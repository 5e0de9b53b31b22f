"""environment.yml stays the conda twin of pyproject.toml: python 3.11, the same pip requirements."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _normalise(requirement: str) -> str:
    """``Name>=1,<2`` -> ``name>=1,<2`` (PEP 503 name, no spaces)."""
    requirement = requirement.replace(" ", "")
    name, rest = re.match(r"([A-Za-z0-9_.\-\[\]]+)(.*)", requirement).groups()
    return re.sub(r"[-_.]+", "-", name).lower() + rest


def test_environment_pip_list_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"] + project["optional-dependencies"]["book"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = [p for p in pip if not p.startswith("-")]
    assert sorted(map(_normalise, listed)) == sorted(map(_normalise, wanted))
    assert "-e ." in pip  # the package itself
    assert any(p.startswith("--extra-index-url https://download.pytorch.org/whl/cpu") for p in pip)  # CPU torch by default
