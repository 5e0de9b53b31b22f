"""``mrtpo diagnose``: will MRTPO help on a task? Measured on a few hundred samples before training.

Samples G responses per training prompt from a policy at the training temperature (the groups RL would see),
scores them with the task's verifiers, replays them leave-one-out with the trainer's replay and reports, per
reward (definitions of PAPER.md §7):

* ``replay_rate``: share of response–reward pairs (where the reward applies) whose group std is non-zero, i.e.
  that MRTPO replays; ``effective_k``: replayed rewards per response (``advantages.replay_rate``);
* ``concentration80``: mean over replayed responses of the smallest share of tokens holding 80% of the shift
  (uniform: 0.8), and ``concentration_x = 0.8 / concentration80`` (Fig. 6's "3x");
* ``check_region_ratio``: (sum of q inside the verifier's read region / sum of q) / (tokens inside / tokens),
  pooled over responses (``diagnostics.check_region_ratio``);
* ``entropy_corr``: median correlation over tokens of q_k with the sampling policy's entropy h_t (issue 18);

and over all rewards: the same pooled figures, ``cross_reward_corr`` (median correlation of two rewards' q on
the same response: near 1 means the profiles are not reward-specific), the realised bound ``s`` (Eq. 8) at the
configured beta on batches of one training step, and a verdict line applying the reader's rule of thumb:
below 3x concentration and 2x check-region ratio, expect about half a point from MRTPO.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

RULE_CONCENTRATION_X = 3.0
RULE_RATIO = 2.0
#: what the rule expects from MRTPO over GDPO below both thresholds: "about half a point", on a 0-1 metric
RULE_GAIN = 0.005
#: issue 18's acceptance line for a testbed: profiles are reward-specific when two rewards' q correlate at most this
SPECIFIC_CORR = 0.3


def verdict(concentration_x: float, ratio: float, cross_reward_corr: float, entropy_corr: float) -> str:
    """One line: the reader's rule of thumb (PAPER.md §7) on the pooled figures, then reward-specificity."""
    figures = f"concentration {concentration_x:.1f}x, check-region ratio {ratio:.2f}x"
    if math.isnan(concentration_x) or math.isnan(ratio):
        head = "too few replayed responses with a check region to apply the reader's rule"
    elif concentration_x < RULE_CONCENTRATION_X and ratio < RULE_RATIO:
        head = (f"{figures}: below {RULE_CONCENTRATION_X:g}x and {RULE_RATIO:g}x, so by the reader's rule expect "
                "about half a point from MRTPO over GDPO")
    else:
        passed = " and ".join(x for x, hit in ((f"concentration >= {RULE_CONCENTRATION_X:g}x", concentration_x >= RULE_CONCENTRATION_X),
                                              (f"ratio >= {RULE_RATIO:g}x", ratio >= RULE_RATIO)) if hit)
        head = (f"{figures}: {passed}, not below both thresholds, so the reader's rule (about half a point "
                "below both) does not apply")
    if math.isnan(cross_reward_corr):
        return head + "; reward-specificity unmeasured (fewer than two rewards replayed on a response)"
    specific = "reward-specific" if cross_reward_corr <= SPECIFIC_CORR else "not reward-specific"
    return (f"{head}; profiles {specific} (median cross-reward correlation {cross_reward_corr:.2f}, "
            f"target <= {SPECIFIC_CORR:g}; with entropy {entropy_corr:.2f})"
            + ("" if cross_reward_corr <= SPECIFIC_CORR else ": compare MRTPO with the entropy arm before crediting Z_k"))


def summarise(task, rows: list[dict], texts: list[str], completion_ids: torch.Tensor, mask: torch.Tensor,
              rewards: torch.Tensor, need: torch.Tensor, q: torch.Tensor, entropy: torch.Tensor, tokenizer,
              num_generations: int, step_prompts: int, beta: float) -> dict:
    """Every figure of the diagnosis from sampled, scored and replayed groups (pure given its inputs).

    rows (B): each response's dataset row (G consecutive per prompt); texts (B); completion_ids, mask (B, T);
    rewards (B, K) with NaN where a reward does not apply; need (B, K): replayed; q (B, K, T); entropy (B, T).
    The bound s is computed on consecutive batches of ``step_prompts * num_generations`` responses, one
    training step's batch, with the trainer's composition of advantages.
    """
    from mrtpo.method.advantages import mrtpo_advantages, replay_rate
    from mrtpo.method.regions import check_region_ratio, in_region
    from mrtpo.method.relevance import concentration, median_correlations, specificity
    from mrtpo.method.regions import token_char_spans

    names = [f.__name__ for f in task.reward_funcs()]
    B, K, T = q.shape
    inside = torch.zeros(B, K, T, dtype=torch.bool)
    has_region = torch.zeros(B, K, dtype=torch.bool)
    for j in range(B):
        n = int(mask[j].sum())
        spans = token_char_spans(tokenizer, completion_ids[j, :n].tolist())
        regions = task.check_regions(texts[j], rows[j])
        for k, name in enumerate(names):
            if regions.get(name):
                has_region[j, k] = True
                inside[j, k, :n] = torch.tensor(in_region(spans, regions[name]), dtype=torch.bool)
    profiled = need & (q * mask.unsqueeze(1)).sum(-1).gt(0)
    spec = specificity(q, mask, profiled, entropy)
    med = median_correlations(spec, names)
    applicable = ~torch.isnan(rewards)

    def figures(sel: torch.Tensor, k_sel) -> dict:
        """Concentration and ratio over the profiles ``sel`` (B, K) bool."""
        qs, ms = q[sel], mask.unsqueeze(1).expand(-1, K, -1)[sel]
        conc = concentration(qs, ms) if sel.any() else torch.tensor([math.nan])
        c80 = float(torch.nanmean(conc)) if not torch.isnan(conc).all() else math.nan
        regioned = sel & has_region
        qr, ir, mr = q[regioned], inside[regioned].float(), mask.unsqueeze(1).expand(-1, K, -1)[regioned]
        return {
            "replay_rate": replay_rate(need[:, k_sel].sum(), applicable[:, k_sel].sum(), B)[0],
            "profiles": int(sel.sum()),
            "concentration80": c80,
            "concentration_x": 0.8 / c80 if c80 == c80 and c80 > 0 else math.nan,
            "check_region_ratio": check_region_ratio({"shift_inside": (qr * ir * mr).sum(-1), "shift_total": (qr * mr).sum(-1),
                                                      "tokens_inside": (ir * mr).sum(-1), "tokens_total": mr.sum(-1)}),
            "mean_q": float((qs * ms).sum() / ms.sum().clamp_min(1)) if sel.any() else math.nan,
        }

    per_reward = {}
    for k, name in enumerate(names):
        sel = torch.zeros_like(profiled)
        sel[:, k] = profiled[:, k]
        per_reward[name] = {**figures(sel, [k]), "entropy_corr": med[f"entropy_corr/{name}"],
                            "groups_nonzero_std": float(need[:, k].reshape(-1, num_generations).any(1).float().mean())}
    overall = figures(profiled, list(range(K)))
    overall.update({k: v for k, v in med.items() if "/" not in k})
    overall["effective_k"] = replay_rate(need.sum(), applicable.sum(), B)[2]
    step = step_prompts * num_generations
    bounds = []
    for start in range(0, B - step + 1, step):
        sl = slice(start, start + step)
        _, stats = mrtpo_advantages(rewards[sl], num_generations, "mrtpo", slice(None), mask=mask[sl], q=q[sl], beta=beta)
        bounds.append(stats)
    overall["s"] = [b["s"] for b in bounds]
    overall["moment_ratio"] = [b["moment_ratio"] for b in bounds]
    overall["s_mean"] = sum(overall["s"]) / len(bounds) if bounds else math.nan
    overall["entropy_mean"] = float((entropy * mask).sum() / mask.sum().clamp_min(1))
    return {"rewards": per_reward, "overall": overall,
            "verdict": verdict(overall["concentration_x"], overall["check_region_ratio"], overall["cross_reward_corr"],
                               overall.get("entropy_corr", math.nan))}


def score(task, rows: list[dict], texts: list[str]) -> torch.Tensor:
    """(B, K) rewards of each (row, completion) with the task's verifiers, as TRL calls them; NaN for None."""
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    prompts = [r["prompt"] for r in rows]
    return torch.tensor([[math.nan if v is None else float(v) for v in f(prompts, completions, **columns)]
                         for f in task.reward_funcs()], dtype=torch.float32).T


def diagnose(task_name: str, model: str = "tiny", samples: int = 256, num_generations: int | None = None,
             step_prompts: int | None = None, beta: float | None = None, max_new_tokens: int | None = None,
             temperature: float = 1.0, seed: int = 0, chunk_prompts: int = 8, dial: float | None = None) -> dict:
    """Sample, score, replay and summarise (see the module docstring); returns the JSON-ready diagnosis.

    ``model``: a registry name (the tiny base is built when absent) or a local policy folder (a run's final
    weights); G, the prompts of one training step, beta and the completion length default to the registry's
    values for ``model`` (``Model.spec``: the paper-scale ones for a local folder). ``dial``: the testbed's
    dial base at that setting instead of the size's default base (``tiny.dial_recipe``; a tiny size only). Prompts are the first
    ``samples / G`` training prompts of the synthetic split the tiny runs train on (``data_seed`` 0), what RL
    would replay; sampling uses ``seed``.
    """
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM

    from mrtpo.models.tokenizer import load_tokenizer

    from mrtpo.method.advantages import replay_needed
    from mrtpo.runs.config import dial_setting
    from mrtpo.models.sampling import prompt_ids, sample
    from mrtpo.method.relevance import record_entropies
    from mrtpo.models.registry import get_model
    from mrtpo.method.replay import relevance
    from mrtpo.tasks import get_task
    from mrtpo.models.recipe import dial_recipe

    start = time.perf_counter()
    if beta is not None and not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta={beta} must lie in [0, 1]")
    if samples < 2:
        raise ValueError(f"samples={samples} must be at least one group (>= 2)")
    task = get_task(task_name)
    policy_def = get_model(model)
    spec = policy_def.spec(task)
    G = num_generations or spec.num_generations
    step_prompts = step_prompts or spec.prompts_per_step
    beta = spec.mrtpo_beta if beta is None else beta
    max_new_tokens = max_new_tokens or spec.max_completion_length
    recipe = None if dial is None else dial_recipe(task, dial_setting(dial, model), size=model)
    path = policy_def.resolve(task, recipe=recipe)
    tokenizer = load_tokenizer(path)
    policy = AutoModelForCausalLM.from_pretrained(path).eval()
    loaded = time.perf_counter()
    prompts_rows = list(task.synthetic(max(1, samples // G), seed=0, split="train"))

    rows, texts, ids, entropies = [], [], [], []
    torch.manual_seed(seed)
    for i in tqdm(range(0, len(prompts_rows), chunk_prompts), desc="sampling", unit="chunk"):
        chunk = prompts_rows[i : i + chunk_prompts]
        with record_entropies(policy, temperature) as steps:
            groups = sample(policy, tokenizer, [r["prompt"] for r in chunk], n=G, temperature=temperature,
                            max_new_tokens=max_new_tokens)
        h = torch.stack(steps, 1)  # (len(chunk) * G, generated positions), rows in sampling order
        flat = [(r, response) for r, group in zip(chunk, groups) for response in group]
        for row_index, (r, (response_ids, text)) in enumerate(flat):
            rows.append(r)
            texts.append(text)
            ids.append(response_ids)
            entropies.append(h[row_index, : len(response_ids)])
    sampled = time.perf_counter()

    B, T = len(ids), max(1, max(len(x) for x in ids))
    completion_ids = torch.full((B, T), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros(B, T)
    entropy = torch.zeros(B, T)
    for j, (x, h) in enumerate(zip(ids, entropies)):
        completion_ids[j, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[j, : len(x)] = 1
        entropy[j, : len(x)] = h
    rewards = score(task, rows, texts)
    need = replay_needed(rewards, G)
    scored = time.perf_counter()
    names = [f.__name__ for f in task.reward_funcs()]
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    blocks = task.z_blocks([r["prompt"] for r in rows], [[{"role": "assistant", "content": t}] for t in texts], **columns)
    q, _ = relevance(policy, lambda ps: [prompt_ids(tokenizer, x) for x in ps], tokenizer.pad_token_id,
                     [r["prompt"] for r in rows], blocks, completion_ids, mask, need, names, temperature=temperature)
    replayed = time.perf_counter()

    out = {"task": task_name, "model": policy_def.label, "samples": B,
           "prompts": len(prompts_rows), "num_generations": G, "step_prompts": step_prompts, "beta": beta,
           "temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed, "base": path.name}
    if dial is not None:
        out["dial"] = float(dial)
    out.update(summarise(task, rows, texts, completion_ids, mask, rewards, need, q, entropy, tokenizer, G,
                         step_prompts, beta))
    out["seconds"] = {"loading": round(loaded - start, 1), "sampling": round(sampled - loaded, 1), "scoring": round(scored - sampled, 1),
                      "replay": round(replayed - scored, 1), "total": round(time.perf_counter() - start, 1)}
    out["localisation"] = response_localisation(task, rows, texts, ids, rewards, q, entropy, need, names, tokenizer)
    return out


def response_localisation(task, rows, texts, ids, rewards, q, entropy, need, names, tokenizer):
    """Where each reward's shift lands on every replayed response, one row per (response, reward with a check
    region): ``diagnostics.localisation`` of the responses as the trainer saves its profiles, so that Table 4's
    rows (per constraint type and state) and Fig. 6's shares are computed from a diagnosis as from a run."""
    from mrtpo.analysis.diagnostics import localisation

    profiles = [{"step": 0, "example": rows[j], "completion": texts[j], "completion_ids": ids[j],
                 "rewards": {n: None if r != r else float(r) for n, r in zip(names, rewards[j].tolist())},
                 "q": {n: q[j, k, : len(ids[j])].tolist() for k, n in enumerate(names)},
                 "entropy": entropy[j, : len(ids[j])].tolist()}
                for j in range(len(ids)) if bool(need[j].any())]
    return localisation(profiles, task, tokenizer)


def localisation_path(path: Path) -> Path:
    """Where :func:`write_json` puts a diagnosis' per-response localisation: ``<name>.localisation.csv``."""
    return path.with_name(path.stem + ".localisation.csv")


def read_diagnosis(task: str, model: str, folder: Path | None = None) -> tuple[dict, "pd.DataFrame | None"] | None:
    """(the diagnosis ``mrtpo diagnose --task task --model model`` wrote, its per-response localisation or None for
    a file written before it was kept), or None when there is no diagnosis; ``folder`` default
    ``results/diagnose``."""
    import pandas as pd

    from mrtpo.files.paths import results_root

    path = (folder or results_root() / "diagnose") / f"{task}-{model}.json"
    if not path.is_file():
        return None
    loc = localisation_path(path)
    return json.loads(path.read_text()), (pd.read_csv(loc) if loc.is_file() else None)


def write_json(diagnosis: dict, path: Path) -> None:
    """The diagnosis as JSON (undefined figures, NaN, become null), its ``localisation`` frame beside it as CSV
    (:func:`localisation_path`)."""
    def clean(x):
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    path.parent.mkdir(parents=True, exist_ok=True)
    diagnosis = dict(diagnosis)
    loc = diagnosis.pop("localisation", None)
    path.write_text(json.dumps(clean(diagnosis), indent=1) + "\n")
    if loc is not None:
        loc.to_csv(localisation_path(path), index=False, float_format="%.6g")


def diagnosis_localisation(task: str, model: str):
    """The per-response localisation of ``model`` on ``task`` before training (:func:`read_diagnosis`) with Table
    4's ``state`` column (``localisation.STATES``), or None where it was not measured (or not kept)."""
    from mrtpo.analysis.localisation import STATES

    found = read_diagnosis(task, model)
    if found is None or found[1] is None:
        return None
    return found[1].assign(state=found[1]["reward_value"].map(STATES))


#: the columns of :func:`mechanism_table`: the diagnosis' overall figures, as the pages name them
MECHANISM = {"replay_rate": "pairs replayed", "effective_k": "effective K", "concentration_x": "concentration (x)",
             "check_region_ratio": "check-region ratio", "cross_reward_corr": "cross-reward corr.",
             "entropy_corr": "entropy corr.", "s_mean": "realised s", "entropy_mean": "mean entropy (nats)"}


def mechanism_table(tasks, models) -> "pd.DataFrame":
    """One row per task and model that has a diagnosis (``mrtpo diagnose``, before any training): how it was
    sampled (responses, G, temperature, completion length) and the overall figures of :data:`MECHANISM`, then the
    verdict; a task and model without a diagnosis has a row saying how to measure it."""
    import pandas as pd

    rows = []
    for task in tasks:
        for model in models:
            found = read_diagnosis(task, model)
            if found is None:
                rows.append({"task": task, "model": model,
                             "verdict": f"not measured: mrtpo diagnose --task {task} --model {model}"})
                continue
            d, _ = found
            o = d["overall"]
            rows.append({"task": task, "model": model, "responses": d["samples"], "G": d["num_generations"],
                         "temperature": d["temperature"], "max tokens": d["max_new_tokens"],
                         **{label: (math.nan if o.get(key) is None else o[key]) for key, label in MECHANISM.items()},
                         "verdict": d["verdict"]})
    return pd.DataFrame(rows, columns=["task", "model", "responses", "G", "temperature", "max tokens",
                                       *MECHANISM.values(), "verdict"])
