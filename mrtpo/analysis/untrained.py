"""A real instruct model untrained (issue 40): its base scores and whether its rewards vary at all.

Read from committed files only; nothing is sampled, converted or trained:

* the base evaluations ``results/base/<task>/<model>/base-*/`` (``mrtpo eval --task T --base --model M``: the
  first ``eval_limit`` prompts of each of the task's benchmarks, greedy, at the run's completion length), the
  newest folder of the current code behaviour;
* for instruction following, the check of the evaluators against the model card,
  ``results/published_check/<model>-ifeval/scores.json`` (``benchmarks/published_check.py``: all 541 IFEval prompts);
* the diagnosis ``results/diagnose/<task>-<model>.json`` (``mrtpo diagnose``), whose share of sampled groups in
  which a reward takes two values says whether group-normalised advantages (GRPO, GDPO, MRTPO alike) have anything
  to learn from: a group whose reward is constant gets advantage 0 for it on every token.
"""

from __future__ import annotations

import json

import pandas as pd

from mrtpo.analysis.diagnose import read_diagnosis
from mrtpo.files.paths import results_root
from mrtpo.runs.behaviour import is_stale


def base_scores(task: str, model: str) -> pd.DataFrame | None:
    """The base evaluations' tidy rows (run, benchmark, decoding, metric, value, n_prompts) of the folders under
    ``results/base/<task>/<model>/`` written by code of the current behaviour, or None when there is none."""
    current = [f for f in sorted((results_root() / "base" / task / model).glob("base-*/eval.csv")) if not is_stale(f.parent)]
    if not current:
        return None
    return pd.concat([pd.read_csv(f) for f in current])[["run", "benchmark", "decoding", "metric", "value", "n_prompts"]]


def published_check(model: str) -> dict | None:
    """The IFEval check against the model card (``benchmarks/published_check.py``), or None when not measured."""
    path = results_root() / "published_check" / f"{model}-ifeval" / "scores.json"
    return json.loads(path.read_text()) if path.is_file() else None


def published_table(check: dict) -> pd.DataFrame:
    """IFEval's four accuracies (0–1) and their average in points beside the model card's published average."""
    rows = [("prompt-level strict", check["prompt_strict"]), ("instruction-level strict", check["inst_strict"]),
            ("prompt-level loose", check["prompt_loose"]), ("instruction-level loose", check["inst_loose"]),
            ("average of prompt and instruction level, strict (points)", check["average_strict"]),
            ("average of prompt and instruction level, loose (points)", check["average_loose"]),
            ("model card: IFEval average prompt/inst (points)", check["published_average"])]
    return pd.DataFrame(rows, columns=["accuracy", "value"]).set_index("accuracy")


def length_sentence(check: dict) -> str:
    """How many IFEval answers the length cap cut, and the strict accuracies over the answers that ended and over
    the cut ones (``by_length``; a check written before it was kept gives the count alone)."""
    words = (f"{check['prompts']} prompts; {check['cut_by_length']} answers ({check['cut_share']:.0%}) cut at "
             f"{check['max_new_tokens']} tokens.")
    parts = check.get("by_length", {})
    for name, part in parts.items():
        words += (f" Over the {part['n']} answers {'that ended' if name == 'ended' else 'cut'}: prompt-level strict "
                  f"{part['prompt_strict']:.3f}, instruction-level strict {part['inst_strict']:.3f}.")
    return words


def reward_spread(task: str, model: str) -> tuple[pd.DataFrame, dict] | None:
    """Per reward of the diagnosis: the share of sampled groups in which it takes two values and the share of
    responses replayed for it; with the diagnosis' settings (samples, groups, G, temperature, completion length).
    None when the task has no diagnosis of this model."""
    found = read_diagnosis(task, model)
    if found is None:
        return None
    diagnosis = found[0]
    table = pd.DataFrame([{"reward": name, "groups with a spread": r["groups_nonzero_std"], "replay rate": r["replay_rate"]}
                          for name, r in diagnosis["rewards"].items()]).set_index("reward")
    settings = {k: diagnosis[k] for k in ("samples", "prompts", "num_generations", "temperature", "max_new_tokens")}
    return table, settings


def spread_sentence(task: str, model: str, table: pd.DataFrame, settings: dict) -> str:
    """Whether any reward of ``task`` varies within the model's sampled groups, in words with the figures."""
    where = (f"{settings['prompts']} groups of G = {settings['num_generations']} responses sampled by `{model}` at "
             f"temperature {settings['temperature']:g} (up to {settings['max_new_tokens']} tokens)")
    if (table["groups with a spread"] == 0).all():
        return (f"In {where}, no reward of `{task}` ever took two values within a group: every group-normalised "
                f"advantage is 0, so GRPO, GDPO and MRTPO have nothing to learn from at this geometry before any "
                f"training; training `{model}` on `{task}` is not attempted.")
    varying = table[table["groups with a spread"] > 0]
    shares = ", ".join(f"{name} {share:.0%}" for name, share in varying["groups with a spread"].items())
    return (f"In {where}, {len(varying)} of {len(table)} rewards of `{task}` vary within some groups (share of groups "
            f"with a spread: {shares}): the advantages have a signal to work with.")


def base_table(task: str, model: str) -> pd.DataFrame | None:
    """The base scores one row per benchmark and metric, one column per decoding (None when not measured)."""
    rows = base_scores(task, model)
    if rows is None:
        return None
    rows = rows[rows.metric != "n"]  # instruction following's scorer also reports its prompt count, n_prompts here
    return rows.pivot_table(index=["benchmark", "metric", "n_prompts"], columns="decoding", values="value").round(3)


def missing_sentence(task: str, model: str) -> str:
    """What measures the untrained model's figures that a page found missing."""
    return (f"Not measured yet for `{model}` on `{task}`: `mrtpo eval --task {task} --base --model {model}` (base "
            f"scores) and `mrtpo diagnose --task {task} --model {model}` (the reward spread) measure them.")


def summary(task: str, model: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str]:
    """What a task's page shows of the untrained model: (:func:`base_table`, the reward spread of
    :func:`reward_spread`, a sentence: whether the rewards vary, and what measures whatever is missing)."""
    base, spread = base_table(task, model), reward_spread(task, model)
    words = [] if base is not None and spread is not None else [missing_sentence(task, model)]
    if spread is not None:
        words.insert(0, spread_sentence(task, model, *spread))
    return base, None if spread is None else spread[0].round(3), " ".join(words)
