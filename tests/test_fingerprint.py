"""Behaviour fingerprints (``mrtpo.runs.behaviour``): the pinned probes are the current code's, a change of behaviour
changes them, every committed folder records the current fingerprint, and runs of different behaviour are never
paired."""

import json
import shutil

import pytest

from mrtpo.runs import behaviour as F
from mrtpo.tasks import TASKS, get_task
from mrtpo.runs.probes import probe_texts, run_probe, shared_probe

PROBES = [(task, name) for task in TASKS for name in F.probe_names()]


@pytest.mark.parametrize("task,name", PROBES, ids=[f"{t}-{n}" for t, n in PROBES])
def test_probe_is_pinned(task, name):
    """A change of behaviour fails here until ``mrtpo fingerprint --write`` pins it under a bumped
    RESULTS_VERSION (and the affected folders, listed by ``mrtpo runs --stale``, are retrained)."""
    assert F.pinned()["results_version"] == F.RESULTS_VERSION
    assert F.pinned()["probes"][task][name]  # the digest the runs of this behaviour carry
    changed = F.differences(run_probe(get_task(task), name), F.pinned_values()[task][name])
    assert not changed, (
        f"the code's behaviour changed ({task} {name}: {'; '.join(changed[:3])}): bump RESULTS_VERSION, run "
        "`mrtpo fingerprint --write`, retrain what `mrtpo runs --stale` lists")


def test_another_cpus_last_bits_are_the_same_behaviour_and_a_changed_number_is_not():
    """The training probes' metrics as another CPU's kernels give them (each moved by 1e-7 relative, a loss near 0 by
    1e-8) agree with the pinned values; a loss moved by 1%, a reward mean by one response in 64, an extra logged key,
    a missing step or another digest do not."""
    pinned = F.pinned_values()["sql"]["method/mrtpo"]
    rows = pinned["steps"]
    other_cpu = {"steps": [{k: v * (1 + 1e-7) + 1e-8 if isinstance(v, float) else v for k, v in row.items()}
                           for row in rows], "varied": pinned["varied"]}
    assert F.differences(other_cpu, pinned) == []
    assert F.differences({**pinned, "steps": [{**rows[0], "loss": rows[0]["loss"] * 1.01}, rows[1]]}, pinned)
    reward = next(k for k in rows[1] if k.startswith("rewards/") and k.endswith("/mean"))
    assert F.differences({**pinned, "steps": [rows[0], {**rows[1], reward: rows[1][reward] + 1 / 64}]}, pinned)
    assert F.differences({**pinned, "steps": [rows[0], {**rows[1], "new/metric": 0.0}]}, pinned)
    assert F.differences({**pinned, "steps": rows[:1]}, pinned)
    shared = F.pinned_values()["sql"]["shared"]
    assert F.differences({**shared, "rewards": shared["rewards"][::-1]}, shared)
    assert F.differences(float("nan"), float("nan")) == [] and F.differences(True, 1) != []


def test_shared_probe_scores_enough_responses():
    for task in TASKS:
        assert len(probe_texts(get_task(task))) >= 200


def test_a_changed_reward_changes_the_fingerprint(monkeypatch):
    """One reward function that scores one response differently gives another shared digest."""

    task = get_task("tool")
    before = shared_probe(get_task("tool"))
    funcs = task.reward_funcs()

    def changed(prompts, completions, **columns):
        values = funcs[0](prompts, completions, **columns)
        return [1.0 - values[0]] + values[1:]

    changed.__name__ = funcs[0].__name__
    monkeypatch.setattr(type(task), "reward_funcs", lambda self: [changed] + funcs[1:])
    assert shared_probe(get_task("tool"))["rewards"] != before["rewards"]


def test_fingerprint_combines_its_probes():
    probes = {"shared": "s", "method/gdpo": "g", "method/mrtpo": "m", "modifier/saw": "w", "modifier/opsd": "o"}
    assert F.fingerprint("sql", "gdpo", probes) != F.fingerprint("sql", "mrtpo", probes)
    assert F.fingerprint("sql", "mrtpo+saw", probes) != F.fingerprint("sql", "mrtpo", probes)
    assert F.fingerprint("sql", "mrtpo", {**probes, "method/gdpo": "changed"}) == F.fingerprint("sql", "mrtpo", probes)
    assert F.fingerprint("sql", "gdpo+opsd", {**probes, "modifier/opsd": "x"}) != F.fingerprint("sql", "gdpo+opsd", probes)
    assert F.fingerprint("sql", "base", probes) != F.fingerprint("sql", "gdpo", probes)


def test_new_values_need_a_new_version_and_another_cpus_keep_the_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "PINNED_FILE", tmp_path / "fingerprints.json")
    monkeypatch.setattr(F, "VALUES_FILE", tmp_path / "probe_values.json")
    F.pinned.cache_clear()
    F.pinned_values.cache_clear()
    try:
        F.write_pinned({"sql": {"shared": "a", "method/gdpo": {"loss": 0.25}}})
        digest = F.pinned()["probes"]["sql"]["method/gdpo"]
        F.write_pinned({"sql": {"shared": "a", "method/gdpo": {"loss": 0.25 * (1 + 1e-7)}}})  # another CPU's bits
        assert F.pinned()["probes"]["sql"]["method/gdpo"] == digest
        assert F.pinned_values()["sql"]["method/gdpo"] == {"loss": 0.25}
        F.write_pinned({"sql": {"method/new": "n"}})  # a new method's probe is only added
        assert set(F.pinned()["probes"]["sql"]) == {"shared", "method/gdpo", "method/new"}
        with pytest.raises(F.StaleComparison, match="bump it"):
            F.write_pinned({"sql": {"method/gdpo": {"loss": 0.3}}})
        with pytest.raises(F.StaleComparison, match="sql shared"):
            F.write_pinned({"sql": {"shared": "b"}})
    finally:
        F.pinned.cache_clear()
        F.pinned_values.cache_clear()


def test_every_committed_folder_is_current():
    """``mrtpo runs --stale`` prints nothing on main: every run and base folder records the current fingerprint."""
    from mrtpo.files.paths import SHIPPED
    from mrtpo.runs.results import run_folders

    bases = [p.parent for p in (SHIPPED / "base").glob("*/*/*/eval.json")]
    stale = [p.relative_to(SHIPPED).as_posix() for p in run_folders() + bases if F.is_stale(p)]
    assert not stale, f"{len(stale)} folders of another code behaviour: {stale[:5]}"


def _copy(folder, root, fingerprint=None):
    """A committed run folder copied under ``root`` (a results root), its recorded fingerprint replaced."""
    from mrtpo.files.manifest import write_manifest

    dest = root / folder.relative_to(folder.parents[3])
    shutil.copytree(folder, dest)
    if fingerprint is not None:
        summary = json.loads((dest / "summary.json").read_text())
        summary["fingerprint"] = fingerprint
        (dest / "summary.json").write_text(json.dumps(summary))
        write_manifest(dest)
    return dest


def test_a_cross_behaviour_pair_is_refused(tmp_path, monkeypatch, capsys):
    """Two arms at the same seeds, one folder of another behaviour: the comparison names it; ``runs --stale`` lists
    it and only it."""
    from mrtpo import cli
    from mrtpo.analysis import evidence
    from mrtpo.files.paths import SHIPPED
    from mrtpo.runs.results import Run

    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path))
    runs = sorted((SHIPPED / "runs" / "sql" / "tiny").glob("gdpo-seed[34]-*")) + sorted(
        (SHIPPED / "runs" / "sql" / "tiny").glob("mrtpo-beta0.5-seed[34]-*"))
    a = [Run(_copy(p, tmp_path)) for p in runs[:2]]
    b = [Run(_copy(runs[2], tmp_path)), Run(_copy(runs[3], tmp_path, fingerprint="0123456789abcdef"))]
    assert evidence.compare(a, [Run(_copy(runs[2], tmp_path / "x"))], "execution_match")["shared_seeds"]
    with pytest.raises(F.StaleComparison, match=b[1].path.name):
        evidence.compare(a, b, "execution_match")
    cli.main(["runs", "--stale"])
    assert capsys.readouterr().out.split() == [str(b[1].path)]


def test_arms_of_one_seed_sample_the_same_first_batch():
    """At one seed, arms that share base, data and sampling settings draw step 1 before any update: the same batch,
    so the same rewards and lengths at step 1 in every committed folder of the group."""
    import pandas as pd

    from mrtpo.runs.results import run_folders

    groups: dict[str, dict[tuple, list[str]]] = {}
    for folder in run_folders():
        stored = json.loads((folder / "config.json").read_text())
        c = stored["config"]
        key = json.dumps([c["task"], c["seed"], stored["model"], stored["data"], c.get("temperature"),
                          c["prompts_per_step"], c["num_generations"], c["max_completion_length"],
                          c.get("rewards", "default"), c["train_size"]], sort_keys=True)
        row = pd.read_csv(folder / "metrics.csv").iloc[0]
        # An empty cell (a reward no completion of the batch was scored on) is NaN, and NaN != NaN, so it would split
        # a group of identical batches: compare the logged values only, by name.
        batch = tuple((k, round(float(row[k]), 6)) for k in sorted(row.index)
                      if (k.startswith("rewards/") or k == "completions/mean_length") and not pd.isna(row[k]))
        groups.setdefault(key, {}).setdefault(batch, []).append(folder.name)
    split = {k: v for k, v in groups.items() if len(v) > 1}
    assert not split, [sorted(v.values()) for v in split.values()][:3]
