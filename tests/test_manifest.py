"""Run-folder manifests (altered folders are refused) and the results-folder check before training."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections import namedtuple

import pytest

from mrtpo.runs import runner as E
from mrtpo.runs.results import run_folders
from mrtpo.files.manifest import (
    MANIFEST,
    ResultsNotWritable,
    RunFolderAltered,
    check_writable,
    verify_manifest,
    write_manifest,
)


@pytest.fixture()
def folder(tmp_path):
    run = tmp_path / "mrtpo-beta0.5-seed0-12345678"
    (run / "tokenizer").mkdir(parents=True)
    (run / "eval.json").write_text('{"synthetic_test": {"greedy": {"format": 0.5}}}')
    (run / "metrics.csv").write_text("step,loss\n1,0.1\n")
    (run / "tokenizer" / "tokenizer.json").write_bytes(bytes(range(256)) * 10)
    write_manifest(run)
    return run


def test_manifest_lists_every_file_in_sha256sum_format(folder):
    lines = (folder / MANIFEST).read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["eval.json", "metrics.csv", "tokenizer/tokenizer.json"]
    assert all(len(line.split("  ")[0]) == 64 for line in lines)
    if shutil.which("sha256sum"):  # the coreutils tool accepts it as it is
        assert os.system(f"cd '{folder}' && sha256sum --quiet -c {MANIFEST}") == 0
    verify_manifest(folder)


@pytest.mark.parametrize(
    "alter, named",
    [
        (lambda f: (f / "eval.json").write_text('{"synthetic_test": {"greedy": {"format": 0.9}}}'), "eval.json (changed)"),
        (lambda f: (f / "tokenizer" / "tokenizer.json").write_bytes(b"x"), "tokenizer/tokenizer.json (changed)"),
        (lambda f: (f / "metrics.csv").unlink(), "metrics.csv (missing)"),
        (lambda f: (f / "notes.txt").write_text("added later"), "notes.txt (not in the manifest)"),
        (lambda f: (f / "metrics.csv").write_text("step,loss\n1,0.1\n "), "metrics.csv (changed)"),  # one byte more
    ],
)
def test_altered_folder_is_refused_with_the_file_named(folder, alter, named):
    alter(folder)
    with pytest.raises(RunFolderAltered, match=r"was altered after it was written: .*" + named.replace("(", r"\(").replace(")", r"\)")):
        verify_manifest(folder)


def test_folder_without_manifest_warns(folder):
    (folder / MANIFEST).unlink()
    with pytest.warns(UserWarning, match=r"has no SHA256SUMS: its files cannot be checked"):
        verify_manifest(folder)


def test_runner_refuses_an_altered_finished_folder(tmp_path, monkeypatch, folder):
    """The runner's reuse path checks the manifest before returning the folder; nothing is trained."""
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(E, "train", lambda *a, **k: pytest.fail("training started"))
    monkeypatch.setattr(E, "identity", lambda cfg: {"config": "fixed"})  # no data or base model needed
    monkeypatch.setattr(E, "is_stale", lambda folder: False)  # the folder's code behaviour is another test's
    target = E.locate(E.resolve("sql", "gdpo", "smoke"))[2]
    target.parent.mkdir(parents=True)
    shutil.copytree(folder, target)
    assert E.run("sql", "gdpo", "smoke").path == target  # intact: reused
    (target / "eval.json").write_text("{}")
    with pytest.raises(RunFolderAltered, match=r"eval\.json \(changed\)"):
        E.run("sql", "gdpo", "smoke")
    with pytest.raises(RunFolderAltered):
        E.find("sql", "gdpo", "smoke")
    (target / "eval.csv").write_text("run,value\n")  # the tables of every run read each folder's eval.csv
    with pytest.raises(RunFolderAltered, match=r"eval\.csv \(not in the manifest\)"):
        run_folders("sql")


def failing_temporary_file(code: int):
    def open_(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return open_


@pytest.mark.parametrize("code, reason", [(errno.EROFS, "read-only file system"), (errno.ENOSPC, "no space left"),
                                          (errno.EACCES, "permission denied")])
def test_unwritable_results_folder_fails_before_training(tmp_path, monkeypatch, code, reason):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(E, "train", lambda *a, **k: pytest.fail("training started"))
    monkeypatch.setattr(E, "identity", lambda cfg: {"config": "fixed"})
    monkeypatch.setattr(tempfile, "TemporaryFile", failing_temporary_file(code))  # what the kernel answers
    with pytest.raises(ResultsNotWritable, match=f"cannot write run folders under .*: {reason}; set MRTPO_RESULTS"):
        E.run("sql", "gdpo", "smoke")


def test_full_disk_fails_before_training(tmp_path, monkeypatch):
    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(E, "train", lambda *a, **k: pytest.fail("training started"))
    monkeypatch.setattr(E, "identity", lambda cfg: {"config": "fixed"})
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 2**20, 2**20))
    with pytest.raises(ResultsNotWritable, match=r"has 1\.0 MiB free, under the 16 MiB a run folder may need"):
        E.run("sql", "gdpo", "smoke")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_for_real(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(ResultsNotWritable, match="permission denied"):
            check_writable(tmp_path / "runs")
    finally:
        tmp_path.chmod(0o700)


def test_writable_folder_passes(tmp_path):
    check_writable(tmp_path / "new" / "runs")
    assert (tmp_path / "new" / "runs").is_dir() and not list((tmp_path / "new" / "runs").iterdir())
