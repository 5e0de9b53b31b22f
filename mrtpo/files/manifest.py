"""Run-folder integrity: a manifest of sha256 sums written when a run folder is complete and checked whenever the
folder is used again, and a check that the results folder can take a run folder before any training starts.

The manifest is ``SHA256SUMS`` in the run folder, in ``sha256sum``'s format (``<hex>  <relative path>``, one line per
file, sorted), so that ``sha256sum -c SHA256SUMS`` inside the folder checks it too.

    python -m mrtpo.files.manifest FOLDER...   # record the files of finished run folders that have no manifest yet
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

MANIFEST = "SHA256SUMS"
#: free space a run folder may need (a tiny run's folder, tokenizer included, is under 2 MB)
MIN_FREE_BYTES = 16 * 2**20


class RunFolderAltered(RuntimeError):
    """A finished run folder whose files differ from its manifest; it is not reused."""


class ResultsNotWritable(RuntimeError):
    """The results folder cannot take a new run folder (read-only, not a folder, or full)."""


def file_sums(folder: Path) -> dict[str, str]:
    """relative posix path -> sha256 of every file under ``folder`` except the manifest."""
    sums = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            sums[path.relative_to(folder).as_posix()] = h.hexdigest()
    return sums


def write_manifest(folder: str | Path) -> None:
    """Record every file of the finished ``folder`` (call it last, before the folder is renamed into place)."""
    folder = Path(folder)
    lines = [f"{digest}  {name}\n" for name, digest in file_sums(folder).items()]
    (folder / MANIFEST).write_text("".join(lines))


def verify_manifest(folder: str | Path, remedy: str | None = None) -> None:
    """Raise ``RunFolderAltered`` naming the changed, missing and added files when ``folder`` differs from its
    manifest (``remedy``: what to do, a run folder's by default); warn when it has none (written before manifests
    existed: it cannot be checked)."""
    folder = Path(folder)
    manifest = folder / MANIFEST
    if not manifest.exists():
        warnings.warn(f"run folder {folder} has no {MANIFEST}: its files cannot be checked; "
                      f"record them with `python -m mrtpo.files.manifest {folder}` once you trust them", stacklevel=2)
        return
    recorded = {}
    for line in manifest.read_text().splitlines():
        digest, _, name = line.partition("  ")
        recorded[name] = digest
    current = file_sums(folder)
    problems = [f"{name} (changed)" for name in recorded if name in current and current[name] != recorded[name]]
    problems += [f"{name} (missing)" for name in recorded if name not in current]
    problems += [f"{name} (not in the manifest)" for name in current if name not in recorded]
    if problems:
        shown = ", ".join(problems[:6]) + (f" and {len(problems) - 6} more" if len(problems) > 6 else "")
        remedy = remedy or (f"Restore its files (for a committed folder: git checkout -- {folder}) or retrain it "
                            "(mrtpo train ... --force)")
        raise RunFolderAltered(f"{folder} was altered after it was written: {shown}. {remedy}")


def check_writable(folder: str | Path, min_free: int = MIN_FREE_BYTES) -> None:
    """Raise ``ResultsNotWritable`` unless a file can be written in ``folder`` (created if absent) and the disk
    has ``min_free`` bytes free; called before training so that a finished run is never lost at the end."""
    folder = Path(folder)
    hint = "set MRTPO_RESULTS to a writable folder with free space"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder) as fh:  # the kernel's answer, whatever the permissions say
            fh.write(b"\0" * 4096)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        reason = {errno.EROFS: "read-only file system", errno.ENOSPC: "no space left", errno.EACCES: "permission denied",
                  errno.EDQUOT: "disk quota exceeded"}.get(exc.errno, exc.strerror or type(exc).__name__)
        raise ResultsNotWritable(f"cannot write run folders under {folder}: {reason}; {hint}") from None
    free = shutil.disk_usage(folder).free
    if free < min_free:
        raise ResultsNotWritable(f"results folder {folder} has {free / 2**20:.1f} MiB free, under the "
                                 f"{min_free / 2**20:.0f} MiB a run folder may need; {hint}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        if not (Path(arg) / MANIFEST).exists():
            write_manifest(arg)
            print(f"recorded {arg}")
