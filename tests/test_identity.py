"""Every committed run folder keeps its identity: resolving its config through today's code gives exactly the
content hash in its ``config.json`` (so a fresh clone's ``make book`` reuses all of them), and the tiny bases'
default recipes keep their hashes (the cache folders' names)."""

import json
from pathlib import Path

import pytest

from mrtpo import runs as R

RUNS = sorted((Path(__file__).resolve().parents[1] / "results" / "runs").glob("*/*/*/config.json"))


def request(cfg: dict) -> dict:
    """The run() arguments that name this config, every field given explicitly."""
    fixed = ("task", "method", "model", "seed", "trainer_args")
    return dict(task=cfg["task"], method=cfg["method"], model=cfg["model"], seed=cfg["seed"],
                **{k: v for k, v in cfg.items() if k not in fixed}, **cfg["trainer_args"])


@pytest.mark.parametrize("path", RUNS, ids=lambda p: f"{p.parts[-4]}/{p.parent.name}")
def test_committed_run_keeps_its_hash(path):
    stored = json.loads(path.read_text())
    ident, digest, folder = R.locate(R.resolve(**request(stored["config"])))
    assert ident == {k: stored[k] for k in ("config", "model", "data", "packages")}
    assert digest == stored["hash"]
    assert folder.name == stored["name"] == path.parent.name


def test_committed_runs_exist():
    assert len(RUNS) >= 18


@pytest.mark.parametrize("task,size,expected", [
    ("sql", "tiny", "8a33c97be6"), ("if", "tiny", "b6a605e99a"), ("tool", "tiny", "18d3399c4a"),
    ("sql", "smoke", "37477f07f0"), ("if", "smoke", "1c7f343a19"), ("tool", "smoke", "51f56cbb01"),
])
def test_default_recipe_hashes(task, size, expected):
    from mrtpo.tasks import get_task
    from mrtpo.tiny import default_recipe, recipe_hash

    assert recipe_hash(task, default_recipe(get_task(task), size), 0) == expected
