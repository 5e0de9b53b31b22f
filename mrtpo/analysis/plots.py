"""Figures of the book (seaborn). Each function draws from tidy data and returns the figure; ``save`` writes
it under ``results/figures/`` so that the book and the repository show the same file."""

from __future__ import annotations

import matplotlib.text
import matplotlib.pyplot as plt  # in notebooks the inline backend shows every figure; headless runs use Agg
import numpy as np
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid", context="notebook")


def save(fig, name: str) -> None:
    """Write ``fig`` to ``<results>/figures/<name>.png`` (150 dpi; ``$MRTPO_RESULTS`` moves the results root).

    Returns nothing, so that a notebook cell ending in ``save`` shows the figure and not a path of the machine.
    """
    from mrtpo.files.paths import results_root

    folder = results_root() / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"{name}.png", dpi=150, bbox_inches="tight")


def empty(message: str):
    """A figure that says why there is nothing to draw (e.g. no reward varied, so nothing was replayed)."""
    fig, ax = plt.subplots(figsize=(7, 1.8))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    return fig


class RelevanceText:
    """Token relevance as coloured text: the response once per reward, each token's background shaded by q_{k,t}
    (one colour scale for every row, 0 to the largest q shown), the tokens the reward's verifier reads underlined.

    In a notebook it displays as HTML that wraps at the page's width, so every token stays readable however
    long the response; ``figure()`` draws the same as a matplotlib figure (the PNG for papers, ``save``).
    ``q``: reward -> [q_t]; ``regions``: reward -> token indices its verifier reads; ``labels``: reward -> the
    line's heading (default: the reward's name).
    """

    def __init__(self, tokens: list[str], q: dict[str, list[float]], regions: dict[str, list[int]] | None = None,
                 title: str = "", labels: dict[str, str] | None = None):
        self.tokens, self.q, self.title = list(tokens), {k: list(v)[: len(tokens)] for k, v in q.items()}, title
        self.regions = {k: set(v) for k, v in (regions or {}).items()}
        self.labels = {k: (labels or {}).get(k, k) for k in self.q}
        self.vmax = max([max(v, default=0.0) for v in self.q.values()] + [1e-6])

    @classmethod
    def from_profile(cls, profile: dict, task, tokenizer, title: str = "") -> "RelevanceText":
        """A profile the trainer saved (a row of ``profiles.jsonl``): each line headed by the reward, what it
        checks in this example (``task.reward_label``) and the reward it got."""
        from mrtpo.analysis.diagnostics import profile_tokens

        view = profile_tokens(profile, task, tokenizer)
        labels = {}
        for name in view["q"]:
            what = task.reward_label(name, profile["example"])
            value = profile["rewards"].get(name)
            labels[name] = (f"{name}{f' ({what})' if what != name else ''}: reward "
                            f"{'not applicable' if value is None else f'{value:g}'}")
        return cls(view["tokens"], view["q"], view["regions"], title=title or f"a saved profile (step {profile['step']})",
                   labels=labels)

    @staticmethod
    def _shown(token: str) -> str:
        return token.replace("\n", "⏎")

    def _rgba(self, value: float) -> tuple[float, float, float, float]:
        return plt.get_cmap("YlOrRd")(0.85 * value / self.vmax)

    def _repr_html_(self) -> str:
        from html import escape

        rows = []
        for name, values in self.q.items():
            spans = []
            for t, (token, value) in enumerate(zip(self.tokens, values)):
                r, g, b, _ = self._rgba(value)
                line = "text-decoration:underline 2px #1f5fbf;text-underline-offset:3px;" if t in self.regions.get(name, ()) else ""
                spans.append(f'<span title="q={value:.4f}" style="background:rgb({r * 255:.0f},{g * 255:.0f},'
                             f'{b * 255:.0f});{line}">{escape(self._shown(token))}</span>')
            rows.append(f'<div style="margin:0.3em 0"><div style="font-weight:600">{escape(self.labels[name])} '
                        f'<span style="font-weight:400;color:#555">(mean q {sum(values) / max(1, len(values)):.4f})'
                        f'</span></div><div style="font-family:monospace;white-space:pre-wrap;overflow-wrap:anywhere;'
                        f'line-height:1.7">{"".join(spans)}</div></div>')
        ramp = "".join(f'<span style="background:rgba({", ".join(f"{c * 255:.0f}" for c in self._rgba(self.vmax * i / 8)[:3])})">'
                       f'&nbsp;&nbsp;</span>' for i in range(9))
        legend = (f'<div style="color:#555;font-size:0.9em">shade: q from 0 {ramp} to {self.vmax:.4f} (hover a token '
                  f'for its value); <span style="text-decoration:underline 2px #1f5fbf">underlined</span>: the tokens '
                  f'this reward\'s verifier reads</div>')
        title = f'<div style="font-weight:600;font-size:1.05em">{escape(self.title)}</div>' if self.title else ""
        return f'<div class="relevance-text">{title}{legend}{"".join(rows)}</div>'

    def save(self, name: str) -> None:
        """Write the PNG rendering to ``<results>/figures/<name>.png`` (see :func:`save`); the page keeps the HTML."""
        fig = self.figure()
        save(fig, name)
        plt.close(fig)  # or the notebook would show the PNG under the HTML rendering

    def figure(self, width_chars: int = 90):
        """The same rendering as a matplotlib figure: monospace text wrapped at ``width_chars`` characters."""
        lines = []  # (row label or None, [(column, token, value, underlined)])
        for name, values in self.q.items():
            lines.append((self.labels[name], []))
            col, current = 0, []
            for t, (token, value) in enumerate(zip(self.tokens, values)):
                text = self._shown(token)
                if col + len(text) > width_chars and current:
                    lines.append((None, current))
                    col, current = 0, []
                current.append((col, text, value, t in self.regions.get(name, ())))
                col += len(text)
            lines.append((None, current))
        char_in = 0.075  # inches per character; a monospace glyph is ~0.6 em wide, so the font is sized to fit
        height = 0.26 * len(lines) + 0.45
        fig = plt.figure(figsize=(char_in * width_chars + 0.2, height))
        ax = fig.add_axes((0.1 / (char_in * width_chars + 0.2), 0.0, char_in * width_chars / (char_in * width_chars + 0.2),
                           1 - 0.45 / height))
        size = char_in * 72 / 0.6
        ax.set_xlim(0, width_chars)
        ax.set_ylim(len(lines), 0)
        for y, (label, tokens) in enumerate(lines):
            if label is not None:
                ax.text(0, y + 0.75, label, fontsize=size, fontweight="bold")
            for col, text, value, underlined in tokens:
                ax.add_patch(plt.Rectangle((col, y + 0.1), len(text), 0.85, color=self._rgba(value), lw=0))
                ax.text(col, y + 0.75, text, fontsize=size, family="monospace")
                if underlined:
                    ax.plot([col, col + len(text)], [y + 0.97, y + 0.97], color="#1f5fbf", lw=1.2)
        ax.set_axis_off()
        ax.set_title(f"{self.title} (shade: q, 0 to {self.vmax:.4f}; underlined: tokens the verifier reads)",
                     fontsize=size, loc="left")
        return fig


def acceptance(criteria: pd.DataFrame):
    """Each acceptance criterion of the tiny bases as measured / target, one bar per (task, criterion), on a log
    scale with the threshold at 1, coloured by whether it was met (an upper bound such as a time budget is met
    below 1). Criteria without a numeric target (``> 0``) are left to the table."""
    target = pd.to_numeric(criteria["target"].astype(str).str.extract(r"([\d.]+)")[0], errors="coerce")
    ratio = (pd.to_numeric(criteria["value"], errors="coerce") / target).replace([np.inf, -np.inf], np.nan)
    df = criteria.assign(ratio=ratio, met=criteria["met"].astype(str).str.lower().eq("true")).dropna(subset=["ratio"])
    df = df[df["ratio"] > 0]
    if df.empty:
        return empty("no criterion with a numeric target")
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(df) + 1.3))
    labels = [f"{t}: {c}" for t, c in zip(df["task"], df["criterion"])]
    ax.barh(labels, df["ratio"], color=["#2e7d32" if m else "#c62828" for m in df["met"]])
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=9)
    ax.set_xlabel("measured / target (log scale; 1 = the threshold)")
    ax.set_title("tiny bases: acceptance criteria (green: met, red: not met)")
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
    _readable_ticks(ax)
    fig.tight_layout()
    return fig


def interval_bars(table: pd.DataFrame, x: str, est: str = "ratio", lo: str = "lo", hi: str = "hi", hue: str | None = None,
                  reference: float | None = None, ylabel: str = "", title: str = ""):
    """One bar per row of an estimate table (``x``, split by ``hue``) with its interval ``[lo, hi]`` as an error
    bar, and a dashed line at ``reference`` (e.g. 1 = uniform); for statistics of sets, such as pooled ratios,
    that have no per-run rows to average."""
    if table.empty or table[est].isna().all():
        return empty(f"no data for {title or est}")
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = list(dict.fromkeys(table[x]))
    hues = list(dict.fromkeys(table[hue])) if hue else [None]
    width = 0.8 / len(hues)
    for j, h in enumerate(hues):
        part = table if hue is None else table[table[hue] == h]
        pos = np.array([xs.index(v) for v in part[x]]) - 0.4 + width * (j + 0.5)
        values = part[est].to_numpy(float)
        err = np.abs(np.vstack([values - part[lo].to_numpy(float), part[hi].to_numpy(float) - values]))
        ax.bar(pos, values, width, label=h, alpha=0.8)
        ax.errorbar(pos, values, yerr=np.nan_to_num(err), fmt="none", ecolor="black", capsize=3, lw=1)
    if reference is not None:
        ax.axhline(reference, color="#555555", lw=1, ls="--")
    ax.set_xticks(range(len(xs)), xs)
    ax.set_ylabel(ylabel or est)
    ax.set_title(title)
    if hue:
        ax.legend(title=hue, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _readable_ticks(ax)
    fig.tight_layout()
    return fig


def _readable_ticks(ax, chars_per_slot: int = 11) -> None:
    """Slant the category labels when the longest would not fit its slot (about 11 characters at 7 in wide),
    so that names such as ``mrtpo+constlen`` never print over each other."""
    labels = ax.get_xticklabels()
    if labels and max(len(t.get_text()) for t in labels) * len(labels) > chars_per_slot * 8:
        ax.tick_params(axis="x", labelrotation=30)
        for label in labels:
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")


def verdict_chart(verdicts: pd.DataFrame, clip: float = 6.0):
    """Each claim's measured value with its 95% interval (``est``, ``lo``, ``hi`` of ``headline.verdicts``) in units
    of the paper's claimed effect: 0 is no effect (``null``), 1 the paper's value (``claimed``). Claims without a
    claimed size (not tested by the paper) are scaled by the interval's own half-width; values past ``clip`` are
    cut there and labelled."""
    colours = {"reproduced": "#2e7d32", "weaker than claimed": "#9ccc65", "contradicted": "#c62828",
               "not reproduced": "#ef6c00"}
    from textwrap import fill

    fig, ax = plt.subplots(figsize=(8, 0.75 * len(verdicts) + 1.4))
    for y, row in enumerate(verdicts.itertuples()):
        unit = (row.claimed - row.null) if row.claimed is not None and row.claimed == row.claimed else (
            (row.hi - row.lo) / 2 if row.hi == row.hi and row.hi > row.lo else 1.0)
        est, lo, hi = ((v - row.null) / unit for v in (row.est, row.lo, row.hi))
        colour = colours.get(row.verdict, "#9e9e9e")
        if lo == lo:
            ax.plot([max(-clip, min(lo, clip)), max(-clip, min(hi, clip))], [y, y], color=colour, lw=3, solid_capstyle="butt")
        if est == est:
            shown = max(-clip, min(est, clip))
            ax.plot([shown], [y], "o", color=colour)
            # a point without a bar would read as an interval too narrow to draw: say that there is none
            note = (" (cut)" if shown != est else "") + ("" if lo == lo else ", no interval")
            ax.text(shown, y - 0.28, f"{row.est:.3g}{note}", ha="center", fontsize=8)
        else:
            ax.text(0, y, "no runs", va="center", ha="center", fontsize=9)
    ax.axvline(0, color="#555555", lw=1)
    ax.axvline(1, color="#555555", lw=1, ls="--")
    ax.set_yticks(range(len(verdicts)),
                  [f"{s}: {fill(c, 34)}" for c, s in zip(verdicts["claim"], verdicts["source"])], fontsize=9)
    ax.set_xlim(-clip - 0.5, clip + 0.5)
    ax.set_ylim(len(verdicts) - 0.5, -0.7)
    ax.set_xlabel("ours in units of the paper's claimed effect\n(0: no effect; dashed, 1: the paper's)")
    ax.set_title("the paper's claims at the tiny scale, with 95% intervals\ngreen: reproduced, light green: weaker than claimed,\n"
                 "red: contradicted, orange: not reproduced, grey: inconclusive", fontsize=10)
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
    if ax.get_legend() is not None:  # beside the axes: inside, it hides the curves it names
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def dial(frame: pd.DataFrame, default: float, title: str = ""):
    """One task's dial (a ``report.dial_frame``) against the setting, three panels: each reward's check-region ratio
    (solid; black line: 1, no better than uniform) and, where its region holds more than half the tokens, its ratio
    outside the region (dashed; lower is more localised); the cross-reward correlation of the relevance profiles
    (black line: 0.3, reward-specific below); each answer reward's reading gain (success with Z minus without:
    solid on the held-out prompts, dashed where the needed fact is only in Z); where the frame has them, a fourth: the
    check-region ratio per constraint type (``localisation_type``; instruction following's slots pool types). Bars:
    ± one standard error, where the frame has one (``se``). A dotted line marks the default setting."""
    if frame.empty:
        return empty(f"no dial rows{' for ' + title if title else ''}")
    panels = [("check-region ratio", {"localisation": "-", "localisation_out": "--"}, 1.0),
              ("cross-reward correlation", {"specificity": "-"}, 0.3),
              ("reading gain", {"reading": "-", "reading_hidden": "--"}, 0.0)]
    if frame["figure"].eq("localisation_type").any():
        panels.append(("check-region ratio per type", {"localisation_type": "-", "localisation_type_out": "--"}, 1.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.8))
    rewards = sorted(frame["reward"].unique())
    colours = dict(zip(rewards, sns.color_palette("tab10" if len(rewards) <= 10 else "tab20", len(rewards))))
    for ax, (ylabel, styles, reference) in zip(axes, panels):
        for (figure, reward), g in frame[frame["figure"].isin(list(styles))].groupby(["figure", "reward"]):
            g = g.sort_values("setting")
            label = {"localisation_out": f"{reward} (outside)", "localisation_type_out": f"{reward} (outside)",
                     "reading_hidden": f"{reward} (fact only in Z)"}.get(figure, reward)
            ax.plot(g["setting"], g["value"], styles[figure], marker="o", color=colours[reward], label=label)
            if "se" in g:  # ± one standard error, where the row has one
                with_se = g[g["se"].notna()]
                ax.errorbar(with_se["setting"], with_se["value"], yerr=with_se["se"], fmt="none", ecolor=colours[reward],
                            elinewidth=1, capsize=3)
        ax.axhline(reference, color="black", lw=1)
        ax.axvline(default, color="grey", ls=":", lw=1)
        if "localisation_type" in styles:  # types span 0.5 to 15: a log scale keeps the ones near 1 readable
            ax.set_yscale("log")
        ax.set_xticks(sorted(frame["setting"].unique()))
        ax.set_xlabel("dial setting (gated-noise rate)")
        ax.set_ylabel(ylabel)
        if len(ax.get_legend_handles_labels()[0]) > 6:  # many lines: the legend beside the panel, not over them
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        elif len(ax.get_legend_handles_labels()[0]) > 1:
            ax.legend(fontsize=8)
    fig.suptitle(f"{title}: the dial (dotted: the default setting)" if title else "the dial (dotted: the default setting)")
    fig.tight_layout()
    return fig


def _labels_apart(ax, points, texts, fontsize: int = 8) -> None:
    """Label each (x, y) point beside it, inside the panel and clear of the labels already placed: to the right (to
    the left for a point in the panel's right half), then one line lower, higher, two lines lower, ... and the
    other side (settings with close ratios would otherwise print over each other, or off the figure)."""
    ax.figure.canvas.draw()  # the axes' final limits: label boxes in pixels are then where they will be drawn
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed = []
    for (x, y), text in sorted(zip(points, texts), key=lambda p: p[0]):
        right_half = ax.transData.transform((x, y))[0] > frame.x0 + frame.width / 2
        candidates = [(side, (step + 1) // 2 * (1 if step % 2 == 0 else -1))  # 0, -1, +1, -2, +2, ... lines
                      for side in ((-1, 1) if right_half else (1, -1)) for step in range(9)]
        for side, shift in candidates:
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(6 * side, 4 + 22 * shift),
                                ha="left" if side > 0 else "right", fontsize=fontsize,
                                arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5} if shift else None)
            # the text's own box: an annotation's extent would include its leader line, reaching back to the point
            label.update_positions(renderer)
            box = matplotlib.text.Text.get_window_extent(label, renderer).expanded(1.05, 1.1)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in placed):
                break
            label.remove()
        else:  # nowhere clear: the first place, overlapping rather than missing
            side, shift = candidates[0]
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(6 * side, 4),
                                ha="left" if side > 0 else "right", fontsize=fontsize)
            box = label.get_window_extent(renderer)
        placed.append(box)


#: a dose-response figure's point label, x axis and gain: the testbed's dial (a base per setting), the placement dial
DOSE_LABELS = {"dial": ("dial {s:g}\nconc. {c:.1f}x", "check-region ratio of the dial base (measured)", "MRTPO − GDPO"),
               "blend": ("λ {s:g}", "check-region ratio of the placement (measured in training)", "placed − GDPO")}


def dose_response(table: pd.DataFrame, slopes: dict[str, pd.DataFrame] | None = None, metrics: dict[str, str] | None = None,
                  kind: str = "dial"):
    """Does localisation buy gain: one panel per task of a ``dose_response.DoseResponse.table`` (tables of several
    tasks concatenated), the gain (95% paired interval as error bars) against the measured check-region ratio, each
    point labelled (``kind``: "dial" or "blend", :data:`DOSE_LABELS`); a setting without runs a dotted line at its
    ratio; the least-squares line where ``slopes[task]`` has one. ``metrics``: task -> the gains' metric (title)."""
    (point, xlabel, gain), name = DOSE_LABELS[kind], DOSE_LABELS[kind][0].split(" ")[0]
    tasks = list(dict.fromkeys(table["task"])) if len(table) else []
    if not tasks:
        return empty("no dial settings measured and no dial runs")
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.2 * len(tasks), 4.2), squeeze=False)
    labels = {}  # axes -> (points, texts): placed once every panel has its final limits and size
    for ax, task in zip(axes[0], tasks):
        t = table[(table["task"] == task) & table["ratio"].notna()].sort_values("ratio")
        ran = t[t["gain"].notna()]
        unplaced = table[(table["task"] == task) & table["ratio"].isna()]
        # a setting whose base has no measured ratio has no place on this axis: said under it (a legend may sit inside)
        unplaced = f"no measured ratio for {name} {', '.join(f'{d:g}' for d in unplaced['setting'])}" if len(unplaced) else ""
        if unplaced and t.empty:
            ax.text(0.5, 0.65, unplaced, transform=ax.transAxes, fontsize=10, color="grey", ha="center")
        if len(ran):
            ax.errorbar(ran["ratio"], ran["gain"], yerr=[(ran["gain"] - ran["lo"]).fillna(0), (ran["hi"] - ran["gain"]).fillna(0)],
                        fmt="o", capsize=4, color="C0", label=f"{gain} (95% interval)")
            labels[ax] = (list(zip(ran["ratio"], ran["gain"])),
                          [point.format(s=r.setting, c=r.concentration_x) for r in ran.itertuples()])
        for i, r in enumerate(t[t["gain"].isna()].to_dict("records")):
            ax.axvline(r["ratio"], color="grey", ls=":", lw=1)
            # what the setting lacks, up from the panel's foot (never into the title), sides alternating (legible)
            ax.annotate(f"{name} {r['setting']:g}: {r['interval over']}", (r["ratio"], 0.02),
                        xycoords=ax.get_xaxis_transform(), textcoords="offset points", xytext=(3, 0) if i % 2 == 0 else (-3, 0),
                        ha="left" if i % 2 == 0 else "right", va="bottom", rotation=90, fontsize=8, color="grey")
        fit = None if slopes is None or task not in slopes else slopes[task].set_index("against").loc["ratio"]
        if fit is not None and fit["slope"] == fit["slope"] and len(ran) >= 2:
            xs = np.array([ran["ratio"].min(), ran["ratio"].max()])
            ax.plot(xs, fit["intercept"] + fit["slope"] * xs, color="C1", lw=1.5,
                    label=f"slope {fit['slope']:+.3f} [{fit['lo']:+.3f}, {fit['hi']:+.3f}]")
        ax.axhline(0, color="black", lw=1)
        ax.axvline(1, color="black", lw=0.8, ls="--", label="ratio 1: no better than uniform")
        if ran.empty:  # nothing to scale the gains by: a window around 0 that leaves the labels readable
            ax.set_ylim(-0.1, 0.1)
        ax.set_xlabel(xlabel + (f"\n({unplaced})" if unplaced and not t.empty else ""))
        ax.set_ylabel(f"{gain} (held-out, temperature 1)")
        ax.set_title(f"{task}: {(metrics or {}).get(task, 'answer metric')}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    for ax, (points, texts) in labels.items():
        _labels_apart(ax, points, texts)
    return fig
