"""The behaviour probes whose digests ``mrtpo.runs.behaviour`` pins: the ``shared`` probe (every reward function on
fixed responses, the tokenizer, a base evaluation) and the two-step training probes, one per method and modifier;
``first_step``, the replay of a folder's first step that certified folders written before fingerprints existed."""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
import tempfile
from pathlib import Path

from mrtpo.runs.behaviour import MODIFIER_BASE, OPTIONS, _digest, _rounded
from mrtpo.tasks import Task

#: the training probe's geometry: 2 steps of 2 prompts x 4 samples on the default tiny base, 4 held-out prompts; no
#: beta warm-up, so that the first step already places the advantages by relevance
PROBE_RUN = dict(steps=2, prompts_per_step=2, num_generations=4, beta_warmup_steps=0, eval_prompts=4, eval_samples=2,
                 train_size=32, save_steps=2)


#: logged columns that measure time or depend on the number of steps planned, not on what the code computes
UNTIMED = ("time/", "step_time", "train_", "learning_rate", "epoch")


def probe_texts(task) -> list[tuple[dict, str]]:
    """The fixed (example, response) pairs the shared probe scores: >= 200 for every task."""
    from mrtpo.tasks.warmup import CORRUPTIONS

    rows = list(task.synthetic(48, seed=0, split="test"))
    words = sorted({w for row in rows for w in task.reference_response(row).split()})[:200]
    rng = random.Random(0)
    pairs = []
    for row in rows:
        ref = task.reference_response(row)
        variants = [ref, "", "   \n", ref[: len(ref) // 2], ref + "\n" + ref]
        for kind in CORRUPTIONS:
            label = task.reward_label(task.reward_names[-1], row) if kind == "constraint" else ""
            variants.append(task.corrupt(ref, kind, rng, words, label))
        pairs += [(row, text) for text in variants]
    return pairs


def shared_probe(task: Task) -> dict:
    """Rewards of every reward set and the tiny base's token ids on :func:`probe_texts`; the evaluation of the
    untrained tiny base on ``PROBE_RUN``'s held-out prompts."""
    from mrtpo.runs.config import resolve
    from mrtpo.runs.evaluation import evaluate
    from mrtpo.models.registry import resolve_model
    from mrtpo.models.tokenizer import load_tokenizer

    pairs = probe_texts(task)
    rows = [row for row, _ in pairs]
    completions = [[{"role": "assistant", "content": text}] for _, text in pairs]
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    rewards = {}
    for reward_set in task.reward_sets:
        variant = task if reward_set == "default" else type(task)(rewards=reward_set)
        for func in variant.reward_funcs():
            rewards[f"{reward_set}/{func.__name__}"] = func([r["prompt"] for r in rows], completions, **columns)
    base = resolve_model(task, "tiny")
    tokenizer = load_tokenizer(base)
    ids = [tokenizer(text)["input_ids"] for _, text in pairs]
    evaluation = _one_thread(lambda: evaluate(resolve(task, "gdpo", "tiny", 0, **PROBE_RUN), base))
    return {"responses": len(pairs), "rewards": _digest(_rounded(rewards)), "tokenizer": _digest(ids),
            "tokenizer_class": type(tokenizer).__name__, "evaluation": _digest(_rounded(evaluation))}


def _one_thread(work):
    """``work()`` on one thread: reductions split over threads change the last bits."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return work()
    finally:
        torch.set_num_threads(threads)


def _step_rows(log_history: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith(UNTIMED)} for row in log_history if "loss" in row]


def training_probe(task: Task, arm: str, **settings) -> dict:
    """Two RL steps of ``arm`` (with run ``settings``) at ``PROBE_RUN`` on one thread: their logged metrics (step
    2's show the update)."""
    from mrtpo.runs.config import resolve
    from mrtpo.runs.runner import train

    cfg = resolve(task, arm, "tiny", 0, **PROBE_RUN, **settings)
    work = Path(tempfile.mkdtemp(prefix="mrtpo-probe-"))
    try:
        summary = _one_thread(lambda: train(cfg, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = _step_rows(summary["log_history"])
    return {"steps": _rounded(rows), "varied": any(r.get("frac_reward_zero_std", 1) < 1 for r in rows)}


def run_probe(task: Task, name: str) -> dict:
    """The values of one probe (``probe_names``) under the current code, as ``probe_values.json`` pins them and
    ``mrtpo.runs.behaviour.differences`` compares them."""
    if name == "shared":
        return shared_probe(task)
    kind, what = name.split("/")
    if kind == "method":
        probe = training_probe(task, what)
    elif what in OPTIONS:
        probe = training_probe(task, MODIFIER_BASE[what], **dict([OPTIONS[what]]))
    else:
        probe = training_probe(task, f"{MODIFIER_BASE[what]}+{what}")
    if not probe["varied"]:  # every group's rewards equal: no advantage was computed, the probe guards nothing
        raise RuntimeError(f"the {name} probe of {task.name} sampled no group with a reward spread; change PROBE_RUN")
    return probe


def first_step(config: dict) -> dict:
    """The current code's logged step 1 of a run of ``config`` (a folder's ``config.json`` config): the batch
    sampled before any update, its rewards, advantages' statistics, loss and gradient norm (timings left out)."""
    from mrtpo.runs.runner import train

    cfg = dataclasses.replace(resolve_folder_config(config), steps=1)
    work = Path(tempfile.mkdtemp(prefix="mrtpo-first-step-"))
    try:
        return _step_rows(train(cfg, work)["log_history"])[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def resolve_folder_config(config: dict):
    """The ``RunConfig`` a folder's ``config.json`` config names (every field given explicitly)."""
    from mrtpo.runs.config import resolve

    fixed = ("task", "method", "model", "seed", "trainer_args")
    return resolve(task=config["task"], method=config["method"], model=config["model"], seed=config["seed"],
                   **{k: v for k, v in config.items() if k not in fixed}, **config.get("trainer_args", {}))


def step_differences(logged: dict, replayed: dict, rel: float = 1e-5, atol: float = 1e-6) -> dict:
    """The columns where a folder's logged step 1 and a replay differ by more than ``rel`` (relative) plus ``atol``
    (a loss near 0 is a difference of larger terms: its last digits move with the number of threads that summed
    it); columns only one side has (logging added later) are not compared, but loss, gradient norm and the rewards
    must be on both. A reward mean moves by 1/64 or more when one sampled response scores differently."""
    required = ["loss", "grad_norm", "completions/mean_length"] + [k for k in replayed if k.startswith("rewards/")]
    out = {k: (logged.get(k), replayed.get(k)) for k in required if k not in logged or k not in replayed}
    for k in set(logged) & set(replayed):
        a, b = logged[k], replayed[k]
        if k.startswith(UNTIMED) or a is None or b is None:
            continue
        a, b = float(a), float(b)
        if math.isnan(a) and math.isnan(b):
            continue
        if not abs(a - b) <= rel * max(abs(a), abs(b)) + atol:
            out[k] = (a, b)
    return out
