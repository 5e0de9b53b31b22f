"""Every committed run folder keeps its identity: resolving its config through today's code gives exactly the
content hash in its ``config.json`` (so a fresh clone's ``make book`` reuses all of them), and the tiny bases'
default recipes keep their hashes (the cache folders' names)."""

import json
from pathlib import Path

import pytest

from mrtpo.runs import runner as R

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


BASES = sorted((Path(__file__).resolve().parents[1] / "results" / "base").glob("*/*/*/config.json"))


@pytest.mark.parametrize("path", BASES, ids=lambda p: f"{p.parts[-4]}/{p.parent.name}")
def test_committed_base_evaluation_keeps_its_name(path):
    """The main tables' base rows are read back, never evaluated again, on a fresh clone."""
    stored = json.loads(path.read_text())
    cfg = stored["config"]
    folder = R.locate_base(R.resolve(cfg["task"], "gdpo", cfg["model"], dial=cfg.get("dial")))[2]
    assert folder.name == stored["name"] == path.parent.name


def test_committed_runs_exist():
    assert len(BASES) >= 3
    assert len(RUNS) >= 18


#: the default recipes' hashes, computed on the code before the recipe gained optional fields (copy_weight,
#: loo_blocks, robust_p, one_site, think_drop, parent): seeds 0, 1, 2
DEFAULT_HASHES = {
    ("sql", "tiny"): ("8a33c97be6", "ee8e7e2369", "15e2e232a4"),
    ("sql", "smoke"): ("37477f07f0", "852642e3b1", "756c505a0b"),
    ("if", "tiny"): ("b6a605e99a", "533efa6784", "c9478f2408"),
    ("if", "smoke"): ("1c7f343a19", "073b6d986c", "257deb0edc"),
    ("tool", "tiny"): ("18d3399c4a", "38867c4b86", "7b1e23dd4d"),
    ("tool", "smoke"): ("51f56cbb01", "abea84c3ff", "2ffca4e847"),
}


@pytest.mark.parametrize("task,size", DEFAULT_HASHES)
def test_default_recipe_hashes(task, size):
    from mrtpo.tasks import get_task
    from mrtpo.models.recipe import default_recipe, recipe_hash

    assert tuple(recipe_hash(task, default_recipe(get_task(task), size), seed) for seed in (0, 1, 2)) == DEFAULT_HASHES[task, size]


def test_optional_recipe_fields_enter_the_hash_only_when_set():
    import dataclasses

    from mrtpo.tasks import get_task
    from mrtpo.models.recipe import OPTIONAL_FIELDS, Recipe, default_recipe, recipe_hash

    base = default_recipe(get_task("sql"))
    assert set(OPTIONAL_FIELDS) == {"copy_weight", "loo_blocks", "robust_p", "one_site", "think_drop", "parent"}
    assert recipe_hash("sql", dataclasses.replace(base, copy_weight=1.0, robust_p=0), 0) == "8a33c97be6"
    set_ = dict(copy_weight=4.0, loo_blocks=True, robust_p=0.5, one_site=True, think_drop=" with \\d+ rules?", parent=base)
    hashes = {recipe_hash("sql", dataclasses.replace(base, **{k: v}), 0) for k, v in set_.items()}
    assert len(hashes) == len(set_) and "8a33c97be6" not in hashes
    # 4 from JSON and 4.0 are the same recipe
    assert recipe_hash("sql", dataclasses.replace(base, copy_weight=4), 0) == recipe_hash("sql", dataclasses.replace(base, copy_weight=4.0), 0)
    # a parent enters by its hash: changing the parent renames the child
    child = dataclasses.replace(base, steps=360, parent=base)
    assert recipe_hash("sql", child, 0) != recipe_hash("sql", dataclasses.replace(child, parent=dataclasses.replace(base, lr=1e-3)), 0)
    # mrtpo_recipe.json round trip, also from a file written before the optional fields existed
    assert Recipe.from_dict(json.loads(json.dumps(dataclasses.asdict(child)))) == child
    old = {k: v for k, v in dataclasses.asdict(base).items() if k not in OPTIONAL_FIELDS}
    assert recipe_hash("sql", Recipe.from_dict(json.loads(json.dumps(old))), 0) == "8a33c97be6"
    with pytest.raises(ValueError, match="not fields of Recipe: init_from"):
        Recipe.from_dict({**old, "init_from": "x"})
    with pytest.raises(ValueError, match="parent's size"):
        dataclasses.replace(base, size="smoke", parent=base)
