"""Committed tiny bases (issue 12): a base the repository carries is installed into the cache, checked against
its manifest, instead of being built; ``reproduce`` rebuilds it and compares the weights; ``mrtpo bases`` lists,
ships and reproduces them. On the toy task at the smoke size (seconds)."""

from pathlib import Path

import pytest

from mrtpo import cli
from mrtpo.models import tiny
from mrtpo.files.manifest import RunFolderAltered, file_sums
from mrtpo.tasks import TASKS, get_task
from mrtpo.models import recipe as recipes


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """The toy task, a fresh cache and an empty folder of shipped bases; returns that folder."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setitem(TASKS, "repeat", "toy_task:RepeatWord")
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tiny, "SHIPPED_BASES", tmp_path / "bases")
    return tmp_path / "bases"


def no_build(*args, **kwargs):
    raise AssertionError("built a base the repository carries")


def test_a_shipped_base_is_installed_not_built_and_reproduces_bit_for_bit(toy, monkeypatch, tmp_path):
    recipe = recipes.dial_recipe(get_task("repeat"), 0.5, size="smoke")  # a stage 2: its parent is built first
    built = tiny.tiny_base(get_task("repeat"), "smoke", recipe=recipe)
    shipped = tiny.ship(built)
    assert shipped == toy / built.name and tiny.shipped_names() == [built.name]
    assert (shipped / "SHA256SUMS").exists() and file_sums(shipped) == file_sums(built)
    # a fresh cache: the shipped base is copied in, nothing is built (not even its parent)
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "fresh"))
    with monkeypatch.context() as m:
        m.setattr(tiny, "build", no_build)
        installed = tiny.tiny_base(get_task("repeat"), "smoke", recipe=recipe)
    assert installed == tmp_path / "fresh" / "models" / built.name and file_sums(installed) == file_sums(built)
    # rebuilt from its recorded recipe (its parent built again here): the same weights, byte for byte
    r = tiny.reproduce(built.name, tmp_path / "work", get_task("repeat"))
    assert r["same"] and r["max_abs_diff"] == 0.0 and r["base"] == built.name


def test_an_altered_shipped_base_is_refused_with_what_to_do(toy, tmp_path):
    shipped = tiny.ship(tiny.tiny_base(get_task("repeat"), "smoke"))
    (shipped / "config.json").write_text("{}")
    import shutil

    shutil.rmtree(tmp_path / "cache" / "models" / shipped.name)
    with pytest.raises(RunFolderAltered, match=r"config.json \(changed\).*git checkout -- .*or delete that folder"):
        tiny.tiny_base(get_task("repeat"), "smoke")
    with pytest.raises(ValueError, match="no shipped base 'nope'"):
        tiny.reproduce("nope", tmp_path / "work", get_task("repeat"))


def test_the_bases_command_ships_lists_and_reproduces(toy, capsys, tmp_path):
    name = tiny.tiny_base(get_task("repeat"), "smoke").name
    cli.main(["bases", "--ship", name])
    cli.main(["bases"])
    out = capsys.readouterr().out
    assert f"shipped {toy / name}" in out and "1 bases in" in out and "from scratch" in out
    cli.main(["bases", "--reproduce", name])
    assert "identical weights; max |difference| 0" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no built base nope"):
        cli.main(["bases", "--ship", "nope"])
