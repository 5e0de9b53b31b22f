"""Where things live on disk: one root per kind, each overridable by an environment variable.

* ``results_root()``: run folders (``<root>/runs/...``): ``$MRTPO_RESULTS`` or the repository's ``results/``.
* ``cache_root()``: everything rebuilt on demand (tiny bases, checkpoints, synthetic databases):
  ``$MRTPO_CACHE`` or ``~/.cache/mrtpo``; never inside the repository.
* ``data_root()``: the real benchmark files (Spider, IFEval, IFBench, RLLA): ``$MRTPO_DATA_DIR`` or
  ``../shared/data`` next to the repository.
* ``SHIPPED``: files committed with the repository (the paper's numbers, benchmark tables); not a results
  root, because a run written elsewhere must still be compared with them.
* ``SHIPPED_BASES``: tiny bases committed with the repository (``tiny.ship``), installed into the cache instead of
  being built (``tiny.tiny_base``); ``make reproduce`` rebuilds them and compares.

Functions, not constants: a test or notebook that sets a variable after import is honoured.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: committed measurement files: ``paper/`` (the paper's reported numbers), ``bench/``, ``tiny_models.csv``
SHIPPED = ROOT / "results"
#: committed tiny bases, one folder per base as in the cache (``<task>-<size>-<seed>-<recipe hash>``)
SHIPPED_BASES = ROOT / "bases"


def results_root() -> Path:
    """Where run folders go: ``$MRTPO_RESULTS`` or the repository's ``results/``."""
    return Path(os.environ.get("MRTPO_RESULTS", SHIPPED))


def cache_root() -> Path:
    """Rebuildable files: ``$MRTPO_CACHE`` or ``~/.cache/mrtpo``."""
    return Path(os.environ.get("MRTPO_CACHE", Path.home() / ".cache" / "mrtpo"))


def data_root() -> Path:
    """Real benchmark files: ``$MRTPO_DATA_DIR`` or ``../shared/data``."""
    return Path(os.environ.get("MRTPO_DATA_DIR", ROOT.parent / "shared" / "data"))


class DataNotAvailable(FileNotFoundError):
    """A paper-scale benchmark file is not under ``data_root()``: the message names the file and where to put it.
    A real model's runs cannot be looked up without it either (a run's identity holds its data's content)."""

    def __init__(self, what: str):
        super().__init__(f"{what}; the paper-scale benchmarks are read from {data_root()} (../shared/data beside "
                         "the clone, or $MRTPO_DATA_DIR): put the files there (its README lists them) or set "
                         "MRTPO_DATA_DIR")


def portable(text: str) -> str:
    """``text`` with the cache root written ``$MRTPO_CACHE`` and the home folder ``~``: committed run files
    (summaries, profiles) name files of the cache without naming the machine that wrote them."""
    return text.replace(str(cache_root()), "$MRTPO_CACHE").replace(str(Path.home()), "~")
