"""Figures of the book (seaborn). Each function draws from tidy data and returns the figure; ``save`` writes
it under ``results/figures/`` so that the book and the repository show the same file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt  # in notebooks the inline backend shows every figure; headless runs use Agg
import numpy as np
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")


def save(fig, name: str) -> Path:
    """Write ``fig`` to ``<results>/figures/<name>.png`` (150 dpi; ``$MRTPO_RESULTS`` moves it) and return the path."""
    from .paths import results_root

    folder = results_root() / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=150, bbox_inches="tight")
    return path


def empty(message: str):
    """A figure that says why there is nothing to draw (e.g. no reward varied, so nothing was replayed)."""
    fig, ax = plt.subplots(figsize=(7, 1.8))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    return fig


def relevance_heatmap(tokens: list[str], q: dict[str, list[float]], regions: dict[str, list[int]] | None = None,
                      title: str = "", max_tokens: int = 80):
    """Heat map of q_{k,t}: one row per reward, one column per response token (labels = the tokens).

    ``regions`` (reward -> token indices its verifier reads) are outlined, so that the reader sees whether
    the shift lands where the checker reads.
    """
    names = list(q)
    T = min(len(tokens), max_tokens)
    data = np.array([q[n][:T] for n in names])
    fig, ax = plt.subplots(figsize=(max(8, 0.22 * T), 0.6 * len(names) + 1.6))
    sns.heatmap(data, ax=ax, cmap="magma_r", vmin=0, vmax=max(1e-6, float(data.max())),
                cbar_kws={"label": "q = sqrt(JS / ln 2)"}, xticklabels=[t.replace("\n", "⏎") for t in tokens[:T]],
                yticklabels=names)
    for row, name in enumerate(names):
        for t in (regions or {}).get(name, []):
            if t < T:
                ax.add_patch(plt.Rectangle((t, row), 1, 1, fill=False, edgecolor="#1f77b4", lw=1.2))
    ax.set_xlabel("response token (outlined: the region this reward's verifier reads)")
    ax.set_ylabel("reward k")
    ax.tick_params(axis="x", labelsize=7, rotation=90)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def method_bars(df: pd.DataFrame, x: str, y: str, hue: str | None = None, ylabel: str = "", title: str = ""):
    """Mean ± std over seeds per method (one dot per seed on top), from one row per run."""
    if df.empty:
        return empty(f"no data for {title or y}")
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.barplot(df, x=x, y=y, hue=hue, errorbar="sd", ax=ax, alpha=0.8)
    # no jitter: the same results give the same figure file, build after build
    dots = {"palette": "dark:black"} if hue is not None else {"color": "black"}
    sns.stripplot(df, x=x, y=y, hue=hue, dodge=hue is not None, jitter=False, size=4, ax=ax, legend=False, **dots)
    ax.set_ylabel(ylabel or y)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def curves(df: pd.DataFrame, y: str, hue: str = "method", x: str = "step", ylabel: str = "", title: str = ""):
    """Training curves: mean over seeds with a band of ± one std."""
    if df.empty or y not in df or df[y].isna().all():
        return empty(f"no data for {title or y}")
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(df, x=x, y=y, hue=hue, errorbar="sd", ax=ax)
    ax.set_ylabel(ylabel or y)
    ax.set_title(title)
    fig.tight_layout()
    return fig
