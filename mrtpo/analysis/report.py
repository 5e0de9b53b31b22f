"""What the notebooks call: run (or reuse) a grid of runs, read their results back as tidy tables, and put
the paper's numbers beside them. No number here is typed by hand: everything comes from run folders or from
``results/paper/*.csv`` (the paper's reported numbers, as data)."""

from __future__ import annotations

import itertools
import math

import pandas as pd
from tqdm.auto import tqdm

from mrtpo.runs import runner
from mrtpo.files.paths import SHIPPED
from mrtpo.runs.config import arm_label
from mrtpo.runs.results import Run
from mrtpo.tasks import get_task

#: the paper's reported numbers, as data (shipped with the repository)
PAPER = SHIPPED / "paper"
#: committed measurement files (``bench/``, ``tiny_models.csv``)
RESULTS = SHIPPED


#: column names of run folders written before a rename -> today's name (the committed runs keep their files,
#: and their hashes: the names are not part of a run's identity)
RENAMED_COLUMNS = {"mrtpo/beta": "mrtpo/beta_t", "beta": "mrtpo_beta"}
#: the columns of :func:`evaluations` (a run folder's eval.csv, renamed)
EVAL_COLUMNS = ["run", "task", "model", "method", "mrtpo_beta", "seed", "steps", "benchmark", "decoding", "metric", "value",
                "n_prompts"]


def answer_metric(task: str) -> str:
    """The metric that judges the answer (the tables' headline metric at the tiny scale): ``Task.answer_metric``."""
    return get_task(task).answer_metric


def check_model(task: str, model: str, method: str = "mrtpo") -> dict:
    """Fail fast with the registry's clear error when ``model``'s weights are absent; return the run plan."""
    from mrtpo.runs.plan import dry_run

    cfg = runner.resolve(task, method, model)
    return dry_run(cfg.task_def, model, method, print_plan=False)


def grid(task: str, methods, model: str = "tiny", seeds=(0,), steps: int | None = None, force: bool = False,
         **overrides) -> list[Run]:
    """Run (or reuse from the cache) every method x seed; methods may carry ``+saw``."""
    runs = []
    for method, seed in tqdm(list(itertools.product(methods, seeds)), desc=f"{task} runs"):
        runs.append(runner.run(task, method, model, seed=seed, steps=steps, force=force, **overrides))
    return runs


#: headline metrics that are the mean of component metrics: name -> prefix of the components' names
#: (instruction following: ``constraint_mean`` = mean over the constraint slots)
COMPONENT_METRICS = {"constraint_mean": "constraint_"}


def components(metric: str, available) -> list[str]:
    """The evaluated metrics a headline ``metric`` is the mean of (itself when it is evaluated directly)."""
    if metric in set(available):
        return [metric]
    prefix = COMPONENT_METRICS.get(metric)
    return sorted(m for m in set(available) if prefix and m.startswith(prefix) and m != metric)


def evaluations(runs: list[Run]) -> pd.DataFrame:
    """Tidy evaluation rows of these runs (one per run x benchmark x decoding x metric), plus each
    :data:`COMPONENT_METRICS` metric as the mean of its components; no runs: an empty frame with these columns."""
    if not runs:
        return pd.DataFrame(columns=EVAL_COLUMNS)
    # renamed per folder: older folders spell a column the old way, and a concat would hold both spellings
    df = pd.concat([pd.read_csv(r.path / "eval.csv").rename(columns=RENAMED_COLUMNS) for r in runs], ignore_index=True)
    for derived in COMPONENT_METRICS:
        parts = components(derived, df.metric.unique())
        if parts and parts != [derived]:
            keys = [c for c in df.columns if c not in ("metric", "value")]
            mean = df[df.metric.isin(parts)].groupby(keys, dropna=False, as_index=False)["value"].mean()
            df = pd.concat([df, mean.assign(metric=derived)], ignore_index=True)
    return df


def summary(df: pd.DataFrame, metric: str, benchmark: str = "synthetic_test", decoding: str = "temp1",
            by: str = "method") -> pd.DataFrame:
    """Mean, std and standard error ``se = std / sqrt(seeds)`` over seeds of one metric, one row per ``by`` value,
    in first-seen order. With one seed there is no spread: std and se are NaN (shown as "—"), never 0."""
    sel = df[(df.metric == metric) & (df.benchmark == benchmark) & (df.decoding == decoding)]
    order = list(dict.fromkeys(sel[by]))
    out = sel.groupby(by)["value"].agg(mean="mean", std="std", seeds="count").reindex(order)
    out["se"] = out["std"] / out["seeds"] ** 0.5
    return out.reset_index()




def metrics(runs: list[Run]) -> pd.DataFrame:
    """Per-step training metrics of these runs, with method, mrtpo_beta, seed, task and completions_per_step
    columns (for curves, s and replay rates); no runs: an empty frame with those columns."""
    frames = []
    for r in runs:
        cfg = r.settings
        m = r.metrics.rename(columns=RENAMED_COLUMNS).assign(method=arm_label(cfg), mrtpo_beta=cfg["mrtpo_beta"],
                             seed=cfg["seed"], task=cfg["task"],
                             completions_per_step=cfg["prompts_per_step"] * cfg["num_generations"])
        frames.append(m)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["step", "method", "mrtpo_beta", "seed", "task", "completions_per_step"])


def delivered_reallocation(m: pd.DataFrame) -> pd.DataFrame:
    """Per ``mrtpo_beta``, over the steps after the warm-up (``mrtpo/beta_t`` reached ``mrtpo_beta``): mean
    realised bound ``s``, the share of steps where the bound is active (``s < 1``) and the delivered reallocation
    ``s * beta`` (PAPER.md §6.2: where the bound is active, ``s * beta`` is fixed and beta cancels)."""
    warm = m[m["mrtpo/beta_t"] >= m["mrtpo_beta"] - 1e-9].assign(s_times_beta=lambda d: d["mrtpo/s"] * d["mrtpo_beta"])
    return warm.groupby("mrtpo_beta").agg(s_mean=("mrtpo/s", "mean"),
                                          frac_steps_bound_active=("mrtpo/s", lambda x: float((x < 1).mean())),
                                          s_times_beta=("s_times_beta", "mean"))


def replay_rates(m: pd.DataFrame) -> dict[str, float]:
    """Replay rates of one run's metrics (PAPER.md §7, ``advantages.replay_rate``): over the response–reward pairs
    that exist (a reward that does not apply to a prompt is not a pair), the share replayed (non-zero group std),
    pooled over steps, overall and per reward; the rewards applying per response and effective K (pairs replayed
    per response); the replay's median share of a step's time.

    A step has ``completions_per_step`` responses B (:func:`metrics` adds the column; one process, one generation
    round per step, as at the tiny scale); ``<reward>/not_applicable`` counts the responses reward k does not apply
    to, so k's pairs in a step are ``B − not_applicable_k`` and its replayed pairs ``mrtpo/<k>/frac_replayed`` times
    those. Run folders written before the trainer logged ``mrtpo/rewards_applying`` logged ``frac_replayed`` over
    all B responses, so there the replayed pairs are ``frac_replayed × B``."""
    from mrtpo.method.advantages import replay_rate

    per_reward = [c.split("/")[1] for c in m.columns
                  if c.startswith("mrtpo/") and c.endswith("/frac_replayed") and c.count("/") == 2]
    B = m["completions_per_step"]
    pairs_k = {k: B - m.get(f"{k}/not_applicable", 0.0) for k in per_reward}
    over = pairs_k if "mrtpo/rewards_applying" in m else {k: B for k in per_reward}
    replayed = {k: (m[f"mrtpo/{k}/frac_replayed"] * over[k]).sum() for k in per_reward}  # NaN rate: no pair that step
    pairs = {k: p.sum() for k, p in pairs_k.items()}
    rate, applying, effective_k = replay_rate(sum(replayed.values()), sum(pairs.values()), B.sum()) if per_reward else \
        (math.nan,) * 3
    row = {"pairs replayed (of those that exist)": rate, "effective K": effective_k,
           "rewards applying per response": applying,
           "replay share of step": (m["time/replay"] / m["step_time"]).median()}
    row.update({k: replay_rate(replayed[k], pairs[k], B.sum())[0] for k in per_reward})
    return row


STEP_PHASES = ("generation", "rewards", "replay", "loss", "other")


def bench_rows(name: str, model: str = "tiny") -> pd.DataFrame:
    """The rows of ``results/bench/<name>.csv`` measured on ``model``: the tiny bases (base folders named
    ``<task>-tiny-...``) or a registry model whose converted folder or name starts with it (``smollm2``); an empty
    frame when the file does not exist yet. A step measured with LoRA adapters (``step_cost.py --lora-rank``) names
    them in its ``variant`` ("gdpo, LoRA r16"), so each (task, variant) is one row."""
    path = RESULTS / "bench" / f"{name}.csv"
    if not path.is_file():
        return pd.DataFrame()
    bench = pd.read_csv(path)
    if "lora_rank" in bench:
        rank = bench["lora_rank"].fillna(0).astype(int)
        bench["variant"] = [v if r == 0 else f"{v}, LoRA r{r}" for v, r in zip(bench["variant"], rank)]
    names = bench["model"].astype(str)
    mine = names.str.contains("-tiny-") if model == "tiny" else (names == model) | names.str.startswith(f"{model}-")
    return bench[mine].reset_index(drop=True)


def step_split(bench: pd.DataFrame) -> pd.DataFrame:
    """The step-cost benchmark's rows as one row per (task, arm, phase): median seconds of the phase and its share
    of the arm's median step (``results/bench/step_cost.csv``; the phases' medians need not add up to the step's)."""
    long = bench.melt(id_vars=["task", "variant", "median_step_s"], value_vars=[f"{p}_s" for p in STEP_PHASES],
                      var_name="phase", value_name="seconds")
    long["phase"] = long["phase"].str.removesuffix("_s")
    return long.assign(share=long["seconds"] / long["median_step_s"])


def replay_limits(bench: pd.DataFrame, goal: float = 1.2) -> pd.DataFrame:
    """Per task and replaying arm: replay time, the limit (forwards per response x one forward over the step's rows
    under P_all) and their ratio against the goal; plus our GDPO's step over TRL's own (goal 1.02)."""
    replaying = bench[bench["limit_s"].notna()]
    out = replaying[["task", "variant", "effective_k", "forwards_per_response", "replay_s", "forward_s", "limit_s",
                     "replay_to_limit"]].assign(goal=goal, met=lambda d: d["replay_to_limit"] <= goal)
    return out.reset_index(drop=True)


def run_time_table(runs: pd.DataFrame, goal: float = 2.0) -> pd.DataFrame:
    """``results/bench/run_time.csv`` as one row per task: wall time of the 100-step MRTPO run before and after (in
    minutes), the speed-up before / after, whether it reaches ``goal`` (halved wall time), whether the run's
    content hash is unchanged, and the machine's load during each run. Tasks with one version only show NaN."""
    wide = runs.pivot_table(index="task", columns="version", values=["wall_s", "load_start", "load_end"], aggfunc="first")
    out = pd.DataFrame(index=wide.index)
    for version in ("before", "after"):
        if ("wall_s", version) in wide:
            out[f"{version}_min"] = wide[("wall_s", version)] / 60
            out[f"{version}_load"] = (wide[("load_start", version)] + wide[("load_end", version)]) / 2
        else:
            out[f"{version}_min"] = out[f"{version}_load"] = float("nan")
    out["speedup"] = out["before_min"] / out["after_min"]
    measured = out["speedup"].notna()
    out["halved"] = (out["speedup"] >= goal).where(measured)
    out["same_run_hash"] = (runs.groupby("task")["run_folder"].nunique() == 1).where(measured)
    return out.reset_index()


def compute_spent(runs: pd.DataFrame) -> pd.DataFrame:
    """Measured compute of run folders (``results.runs_table`` rows), per task and in total ("all"): the runs, the
    summed training and evaluation time in hours (``summary.json``'s ``train_runtime_s`` and ``eval_runtime_s``),
    their sum, and how many runs recorded each — folders written before evaluation time was recorded, or resumed
    after their last step, lack it, so a count below the runs makes that sum a lower bound."""
    def row(task, part):
        train, evaluation = part["train_s"].sum() / 3600, part["eval_s"].sum() / 3600
        return {"task": task, "runs": len(part), "train hours": train, "evaluation hours": evaluation,
                "total hours": train + evaluation, "runs with train time": int(part["train_s"].notna().sum()),
                "runs with evaluation time": int(part["eval_s"].notna().sum())}

    rows = [row(task, part) for task, part in runs.groupby("task")] + [row("all", runs)]
    return pd.DataFrame(rows)


def compute_sentence(spent: pd.DataFrame, model: str) -> str:
    """The "all" row of :func:`compute_spent` as one sentence, saying which times are missing rather than 0."""
    t = spent.set_index("task").loc["all"]
    runs, timed, evaluated = int(t["runs"]), int(t["runs with train time"]), int(t["runs with evaluation time"])
    if runs == 0:
        return f"No {model} run folder is committed yet."
    train = f"{t['train hours']:.1f} hours of training" + (f" (recorded for {timed} of them)" if timed < runs else "")
    if evaluated == 0:
        evaluation = "evaluation time is not recorded in these folders (written before it was), so that is the total"
    else:
        evaluation = (f"{t['evaluation hours']:.1f} hours of evaluation (recorded for {evaluated} of them), "
                      f"{t['total hours']:.1f} hours in all{' at least' if evaluated < runs or timed < runs else ''}")
    return f"The {runs} committed {model} run folders took {train}; {evaluation}."


def relevance_text(run: Run, profile: dict | None = None):
    """One profile the run saved, as coloured text (``plots.RelevanceText``); by default the one where the most
    rewards moved the policy (the latest among those). None when the run saved no profiles."""
    from mrtpo.analysis.plots import RelevanceText

    profiles = run.profiles()
    if profile is None and profiles:
        profile = max(reversed(profiles), key=lambda p: sum(sum(q) > 0 for q in p["q"].values()))
    if profile is None:
        return None
    return RelevanceText.from_profile(profile, get_task(run.settings["task"]), run.tokenizer())


def localisation(run: Run) -> pd.DataFrame:
    """Where each reward's shift lands in a run's saved profiles (``diagnostics.localisation`` with the run's
    task and tokenizer)."""
    from mrtpo.analysis.diagnostics import localisation as localise

    return localise(run.profiles(), get_task(run.settings["task"]), run.tokenizer())


#: our method names -> the paper's row names in ``results/paper/*.csv``
PAPER_METHOD = {"base": "Base", "grpo": "GRPO", "gdpo": "GDPO", "mrtpo": "MRTPO", "joint": "joint replay",
                "shuffled": "shuffled positions", "mrtpo+saw": "MRTPO + SAW", "opsd": "OPSD"}


def number(value: float | None, digits: int = 3) -> str:
    """A number as text, "—" where there is none (None or NaN)."""
    return "—" if value is None or value != value else f"{value:.{digits}f}"


def estimate(mean: float, spread: float | None = None, digits: int = 3, no_spread: str | None = "—") -> str:
    """``mean ± spread`` as text, "—" for a mean there is not. A spread there is not (one seed; the paper reports
    none) shows as ``no_spread``, or is left out (``mean`` alone) with ``no_spread=None``."""
    if mean is None or mean != mean:
        return "—"
    if (spread is None or spread != spread) and no_spread is None:
        return number(mean, digits)
    return f"{number(mean, digits)} ± {number(spread, digits) if spread is not None and spread == spread else no_spread}"


def beside_paper(ours: pd.DataFrame, paper: pd.DataFrame, columns: dict[str, tuple[str, str | None]],
                 key: str = "method", digits: int = 3) -> pd.DataFrame:
    """Ours and the paper's numbers in one table, one row per ``key`` value of ``ours``.

    ``columns``: heading -> (mean column, s.e. column or None) of ``ours``, shown as ``mean ± s.e.``. The paper's
    ``score`` (± its reported ``std``) gets one column per paper model (and metric, when ``paper`` has several),
    matched to our rows through :data:`PAPER_METHOD`; "—" where the paper has no such row. ``seeds`` is kept.
    """
    rows = ours.reset_index(drop=True)
    out = pd.DataFrame(index=pd.Index(rows[key], name=key))
    if "seeds" in rows:
        out["seeds"] = rows["seeds"].to_numpy()
    for heading, (mean, se) in columns.items():
        out[heading] = [estimate(m, s, digits) for m, s in zip(rows[mean], rows[se] if se else [None] * len(rows))]
    groups = ["model"] + (["metric"] if "metric" in paper and paper["metric"].nunique() > 1 else [])
    for names, part in paper.groupby(groups, sort=False):
        names = names if isinstance(names, tuple) else (names,)
        by = part.set_index("method")
        spread = by["std"] if "std" in by else pd.Series(float("nan"), index=by.index)
        out[f"paper: {', '.join(map(str, names))} (± std)"] = [
            estimate(by.at[PAPER_METHOD.get(k, k), "score"], spread.get(PAPER_METHOD.get(k, k)), 2)
            if PAPER_METHOD.get(k, k) in by.index else "—" for k in rows[key]]
    return out


def paper(name: str) -> pd.DataFrame:
    """The paper's reported numbers of one table or figure (``results/paper/<name>.csv``)."""
    return pd.read_csv(PAPER / f"{name}.csv")


def first_step_reaching(curve: pd.Series, threshold: float) -> float:
    """First step whose value is >= threshold (NaN when never reached); curve indexed by step."""
    hit = curve[curve >= threshold]
    return float(hit.index[0]) if len(hit) else math.nan


# ----------------------------------------------------------------------------------------------------
# results/tiny_models.csv (benchmarks/tiny_models.py)


def tiny_models(path=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``results/tiny_models.csv`` (or ``path``) as (the criteria of the default bases, :func:`dial_frame` of the
    dial bases' rows ``dial/<setting>/<criterion>``). ``se`` (float) is each figure's standard error
    (``benchmarks/tiny_models.py`` says how each is estimated); NaN where there is none: a single measurement (a
    build time), or a row written before the column existed."""
    criteria = pd.read_csv(path or RESULTS / "tiny_models.csv")
    se = pd.to_numeric(criteria["se"], errors="coerce") if "se" in criteria else float("nan")
    criteria = criteria.drop(columns="se", errors="ignore")
    criteria.insert(criteria.columns.get_loc("value") + 1, "se", se)
    dial = criteria["criterion"].astype(str).str.startswith("dial/")
    return criteria[~dial].reset_index(drop=True), dial_frame(criteria[dial])


def with_se(frame: pd.DataFrame, pairs: dict[str, str], digits: int = 3) -> pd.DataFrame:
    """A copy of ``frame`` for display: each value column of ``pairs`` (value column -> its s.e. column) as text
    ``value ± se`` (the value alone where the s.e. is missing, "—" where the value is), the s.e. columns dropped."""
    out = frame.copy()
    for value, se in pairs.items():
        numbers = pd.to_numeric(out[value], errors="coerce")
        spreads = out[se] if se in out else pd.Series(float("nan"), index=out.index)
        out[value] = [estimate(v, s, digits, no_spread=None) if v == v else ("—" if pd.isna(raw) else str(raw))
                      for v, s, raw in zip(numbers, spreads, out[value])]
    return out.drop(columns=[se for se in pairs.values() if se in out])


def dial_frame(criteria: pd.DataFrame) -> pd.DataFrame:
    """The dial rows of a ``tiny_models.csv`` frame, tidy: criterion ``dial/<setting>/<figure>/<reward>`` ->
    columns ``task``, ``setting`` (float: the gated-noise rate, ``tiny.DIAL_SETTINGS``), ``figure``
    (``localisation``, ``localisation_out``, ``localisation_type``, ``localisation_type_out`` (per constraint type:
    instruction following), ``variance``, ``reading``, ``reading_hidden``, ``specificity``,
    ``learning``, ``budget``), ``reward`` (the reward's name; ``cross_reward_corr`` for specificity,
    ``100_gdpo_steps`` for learning, ``build_seconds`` and ``100_step_<method>_seconds`` for budget),
    ``value`` and ``se`` (float; se NaN where the frame has none), ``target``, ``met`` (bool), ``notes``; sorted
    by task, setting, figure, reward. Other rows are left out."""
    parts = criteria["criterion"].astype(str).str.extract(r"^dial/(?P<setting>[^/]+)/(?P<figure>[^/]+)/(?P<reward>.+)$")
    keep = parts["setting"].notna()
    out = criteria[keep].assign(
        setting=pd.to_numeric(parts.loc[keep, "setting"]), figure=parts.loc[keep, "figure"], reward=parts.loc[keep, "reward"],
        value=pd.to_numeric(criteria.loc[keep, "value"], errors="coerce"),
        se=pd.to_numeric(criteria.loc[keep, "se"], errors="coerce") if "se" in criteria else float("nan"),
        met=criteria.loc[keep, "met"].astype(str).str.lower().eq("true"))
    columns = ["task", "setting", "figure", "reward", "value", "se", "target", "met", "notes"]
    return out[columns].sort_values(["task", "setting", "figure", "reward"]).reset_index(drop=True)


def breakable(labels: pd.Series) -> pd.Series:
    """Constraint types shown with a space after their ':' (``keywords: existence``), where a narrow page may wrap
    them (a name such as ``length_constraints:nth_paragraph_first_word`` is one word a table cannot break)."""
    return labels.astype(str).str.replace(":", ": ", regex=False)


def dial_table(frame: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """One task's dial figures (a :func:`dial_frame` of one task) for display: a row per (figure, reward), a column
    per setting, cells ``value ± se`` (the value alone where there is no s.e.); the bases' build times left out (a
    recipe table shows them), the RL runs' training times kept; constraint types :func:`breakable`."""
    rows = frame[~(frame["figure"].eq("budget") & frame["reward"].eq("build_seconds"))].assign(
        shown=lambda f: [estimate(v, s, digits, no_spread=None) for v, s in zip(f["value"], f["se"])],
        reward=lambda f: breakable(f["reward"]))
    return rows.pivot_table(index=["figure", "reward"], columns="setting", values="shown", aggfunc="first").fillna("—")


def dial_checks(frame: pd.DataFrame, default: float) -> pd.DataFrame:
    """The dial's acceptance per (task, reward) from a :func:`dial_frame`: the localisation figure the issue judges
    (the check-region ratio; for a region holding more than half the tokens, the ratio outside it, which is lower
    the stronger the mechanism) at the lowest setting, at ``default`` and at the highest setting, each with its s.e.
    (``lowest se``, ...; NaN where the rows have none); ``lowest ≈ 1``: the lowest within 1.0 ± 0.2 (no
    mechanism); ``highest ≥ default``: the highest at least as localised as the default (for the outside ratio: at
    most the default's)."""
    rows = []
    for (task, reward), g in frame[frame["figure"].isin(["localisation", "localisation_out"])].groupby(["task", "reward"]):
        figure = "localisation_out" if (g["figure"] == "localisation_out").any() else "localisation"
        by = g[g["figure"] == figure].set_index("setting").sort_index()
        value, se = by["value"], by["se"]
        at_default = value.get(default, math.nan)
        stronger = value.iloc[-1] <= at_default if figure == "localisation_out" else value.iloc[-1] >= at_default
        rows.append({"task": task, "reward": reward, "figure": "ratio outside" if figure == "localisation_out" else "ratio",
                     "settings": len(by), "lowest": value.iloc[0], "lowest se": se.iloc[0], "default": at_default,
                     "default se": se.get(default, math.nan), "highest": value.iloc[-1], "highest se": se.iloc[-1],
                     "lowest ≈ 1": abs(value.iloc[0] - 1) <= 0.2, "highest ≥ default": bool(stronger)})
    return pd.DataFrame(rows)
