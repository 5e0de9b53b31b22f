"""Reading finished run folders back: ``Run`` (one folder's files), ``run_folders`` and ``runs_table``.

A run folder (``mrtpo.runs.runner``) holds::

    config.json     resolved config, content hash, package and data versions
    metrics.csv     one row per step: every field the trainer logs (TRL's, mrtpo/*, time/*)
    eval.json       held-out evaluation, nested; eval.csv the same, one row per benchmark x decoding x metric
    eval_prompts.csv  the same per held-out prompt: benchmark, decoding, prompt (index), metric, value (mean over
                    that prompt's samples); absent in folders written before it was added
    profiles.jsonl  sampled per-token q profiles (token-level methods)
    summary.json    weights hash, train runtime, evaluation runtime (absent in folders written before it was
                    recorded), whether the run was resumed
    tokenizer/      the run's tokenizer (token-level figures need no base model)
    base_recipe.json  the tiny base's recipe and warm-up mix (tiny scale)
    SHA256SUMS      sha256 of every file, written at completion, checked on reuse (``mrtpo.files.manifest``)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mrtpo.runs.config import arm_label
from mrtpo.files.manifest import verify_manifest
from mrtpo.files.paths import results_root


@dataclass
class Run:
    """A finished run folder. ``trained`` is False when the folder was reused from the cache."""

    path: Path
    trained: bool = False

    def __post_init__(self):
        verify_manifest(self.path)  # a folder altered after completion is refused, never read silently

    @property
    def config(self) -> dict:
        return json.loads((self.path / "config.json").read_text())

    @property
    def settings(self) -> dict:
        """The run's settings: ``config.json``'s ``config``, a ``RunConfig`` as a dict."""
        return self.config["config"]

    @property
    def seed(self) -> int:
        """The RL seed (``RunConfig.seed``): arms compared on the same seed are paired."""
        return self.settings["seed"]

    @property
    def fingerprint(self) -> str | None:
        """The behaviour fingerprint of the code that wrote the folder (``mrtpo.runs.behaviour``); None in a folder
        written before fingerprints were recorded and not certified since (stale)."""
        return self.summary.get("fingerprint")

    @property
    def eval(self) -> dict:
        return json.loads((self.path / "eval.json").read_text())

    def eval_lines(self) -> list[str]:
        """The evaluation, a line per benchmark x decoding with its ``metric=value`` cells (``mrtpo train / eval``)."""
        def cells(metrics: dict) -> str:
            return "  ".join(f"{k}={v:.3f}" for k, v in metrics.items() if isinstance(v, (int, float)))

        return [f"{bench:22s} {decoding:7s} {cells(metrics)}"
                for bench, res in self.eval.items() for decoding, metrics in res.items() if isinstance(metrics, dict)]

    @property
    def summary(self) -> dict:
        return json.loads((self.path / "summary.json").read_text())

    @property
    def metrics(self):
        import pandas as pd

        return pd.read_csv(self.path / "metrics.csv")

    @property
    def eval_prompts(self):
        """Per-prompt evaluation (``eval_prompts.csv``) as a DataFrame, or None for a folder written without it."""
        import pandas as pd

        path = self.path / "eval_prompts.csv"
        return pd.read_csv(path) if path.exists() else None

    def profiles(self) -> list[dict]:
        path = self.path / "profiles.jsonl"
        return [json.loads(line) for line in path.open()] if path.exists() else []

    @property
    def base_recipe(self) -> dict | None:
        """The tiny base's recipe and warm-up mix (``mrtpo_recipe.json``); None for a paper checkpoint."""
        path = self.path / "base_recipe.json"
        return json.loads(path.read_text()) if path.exists() else None

    def tokenizer(self):
        """The run's tokenizer (saved in the folder, so that token-level figures need no base model)."""
        from mrtpo.models.tokenizer import load_tokenizer

        return load_tokenizer(self.path / "tokenizer")


def run_folders(task: str | None = None) -> list[Path]:
    """Finished run folders, each checked against its manifest (temporary ones start with a dot and are never
    listed)."""
    root = results_root() / "runs"
    pattern = f"{task}/*/*" if task else "*/*/*"
    folders = sorted(p for p in root.glob(pattern) if p.is_dir() and not p.name.startswith(".")
                     and (p / "eval.csv").exists())
    for folder in folders:
        verify_manifest(folder)
    return folders


def runs_table(task: str | None = None):
    """One row per run folder: task, model, dial (the dial base's setting, NaN on the default base), method,
    mrtpo_beta, seed, steps, train and evaluation time in seconds (NaN where the folder did not record it), whether
    the code that wrote it behaves as the current code (``mrtpo.runs.behaviour``: "current" or "stale"), and its path
    under the results root."""
    import pandas as pd

    from mrtpo.runs.behaviour import is_stale

    rows = []
    for p in run_folders(task):
        cfg = json.loads((p / "config.json").read_text())["config"]
        summary = json.loads((p / "summary.json").read_text())
        rows.append({"task": cfg["task"], "model": cfg["model"], "dial": cfg.get("dial", float("nan")), "method": arm_label(cfg),
                     "mrtpo_beta": cfg["mrtpo_beta"], "seed": cfg["seed"], "steps": cfg["steps"],
                     "train_s": summary["train_runtime_s"], "eval_s": summary.get("eval_runtime_s", float("nan")),
                     "behaviour": "stale" if is_stale(p) else "current",
                     "path": p.relative_to(results_root()).as_posix()})
    return pd.DataFrame(rows, columns=["task", "model", "dial", "method", "mrtpo_beta", "seed", "steps", "train_s", "eval_s",
                                       "behaviour", "path"])
