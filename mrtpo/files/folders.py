"""Run files on disk: locks, folders that appear complete or not at all, checkpoints to resume from, the weights'
hash and the tokenizer files a run folder carries (``mrtpo.runs.runner`` writes run folders with them; ``mrtpo.models.smollm2``
converts its model with them)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from mrtpo.files.manifest import write_manifest

#: the files ``save_pretrained`` writes for a tokenizer
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


@contextmanager
def locked(path: Path):
    """Exclusive lock on ``path`` (blocks while another process holds it; released if that process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete checkpoint (trainer_state.json is written last, with the RNG state: ``rng_state.pth`` on
    one process, ``rng_state_<rank>.pth`` per process on several); partial ones are deleted."""
    found = []
    for path in output_dir.glob("checkpoint-*"):
        if (path / "trainer_state.json").exists() and any(path.glob("rng_state*.pth")):
            found.append(path)
        else:  # killed while saving
            shutil.rmtree(path, ignore_errors=True)
    return max(found, key=lambda p: int(p.name.split("-")[1]), default=None)


def weights_hash(model) -> str:
    """sha256 over every parameter and buffer's bytes, in state-dict order (bfloat16 has no NumPy type: the bytes
    are read as uint8, the same bytes NumPy gives for float32)."""
    import torch

    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def truncate_profiles(path: Path, step: int) -> None:
    if path.exists():
        keep = [line for line in path.open() if json.loads(line)["step"] < step]
        path.write_text("".join(keep))


def copy_tokenizer(model_dir: Path, out: Path) -> None:
    """Copy a saved model folder's tokenizer files (not the weights) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, out / name)


@contextmanager
def folder_in_place(folder: Path):
    """A temporary sibling of ``folder`` to write every file into; when the block ends without error its manifest
    is written and it replaces ``folder`` in one rename: the folder is complete or absent, never half-written."""
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        write_manifest(tmp)
        if folder.exists():  # force: replace the old folder only once the new one is complete
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
