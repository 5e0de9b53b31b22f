"""Acceptance figures of the tiny bases (issue 5), measured on held-out prompts; writes results/tiny_models.csv.

For each task's tiny base, with responses SAMPLED from the policy at temperature 1 (as RL samples them):

* variance: groups of G=8 samples from the bare prompt P_0; fraction of groups whose reward std is > 0,
  per reward (target >= 0.5);
* localisation: for each sampled response and each reward k with a Z block, replay under P_all and
  P_minus_k (``mrtpo.contexts``); q_t = sqrt(JS/ln 2). Check-region ratio (PAPER.md §7,
  ``diagnostics.check_region_ratio``) = (sum q inside the region the verifier reads / sum q) / (tokens inside /
  tokens), pooled over responses (target >= 3); also the region's share of the shift and of the tokens, and the
  concentration (tokens holding 80%); for a region holding more than half the tokens, whose ratio cannot reach 3,
  the ratio outside it, (1 - shift share) / (1 - token share) (issue 12: target <= 0.5);
* specificity (issue 18): on the same responses, the median correlation over tokens of two rewards' q profiles
  (target <= 0.3: reward-specific), and of each q profile with the sampling policy's token entropy;
* reading: answer-reward success of G samples from P_all (Z from the first P_0 sample, as the trainer
  builds it) minus success from P_0 (target > 0); on ``hide_value`` prompts, whose value is only in Z
  (target >= 0.5);
* budget: the base's recorded build time (target: all bases <= 1200 s in total).

With ``--learning``: 100 GDPO steps (3 seeds, the runner's runs) vs the untrained base, and the RL run time.

With ``--dial``: the dial bases instead (``tiny.dial_recipe`` at each of ``tiny.DIAL_SETTINGS``, built when
absent), each measured as above; criteria ``dial/<setting>/<criterion>`` (e.g. ``dial/0.5/localisation/format``),
the base and its recipe in the notes of ``dial/<setting>/budget/build_seconds``.

Usage: ``python benchmarks/tiny_models.py [--tasks sql if tool] [--prompts 32] [--dial [0 0.2 0.5 0.8]]``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import time
from pathlib import Path

import torch

from mrtpo import diagnostics as D
from mrtpo.contexts import build_contexts
from mrtpo.relevance import median_correlations, specificity
from mrtpo.tasks import get_task
from mrtpo.tiny import DIAL_SETTINGS, Recipe, default_recipe, dial_recipe, tiny_base

FIELDS = ("task", "criterion", "value", "target", "met", "notes")
RESULTS = Path(__file__).resolve().parents[1] / "results" / "tiny_models.csv"


def rewards_of(task, prompts, texts, rows) -> dict[str, list[float]]:
    """Every reward on (prompt, completion) pairs; ``rows`` the dataset rows giving the columns."""
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    out = {}
    for f in task.reward_funcs():
        out[f.__name__] = [math.nan if v is None else float(v) for v in f(prompts, completions, **columns)]
    return out


def measure(task_name: str, n_prompts: int = 32, group: int = 8, max_new_tokens: int = 96, seed: int = 0,
            size: str = "tiny", recipe: Recipe | None = None) -> list[dict]:
    """The criteria above for the task's default tiny base of ``size``, or for the base of ``recipe`` (built
    when absent)."""
    from transformers import AutoModelForCausalLM

    from mrtpo.tokenizer import load_tokenizer

    torch.set_num_threads(1)  # see mrtpo.tiny.BUILD_THREADS: two threads on a shared machine spin-wait
    path = tiny_base(task_name, size=size, seed=seed, recipe=recipe)
    meta = json.loads((path / "mrtpo_recipe.json").read_text())
    tok = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    task = get_task(task_name)
    rows_out: list[dict] = []

    def row(criterion, value, target, met, notes=""):
        rows_out.append(dict(task=task_name, criterion=criterion, value=round(value, 4) if isinstance(value, float) else value,
                             target=target, met=met, notes=notes))

    def sample_and_score(data, with_z: bool, z_list=None, sample_seed=0):
        rows = list(data)
        prompts = [r["prompt"] for r in rows]
        if with_z:
            prompts = [build_contexts(p, z).all for p, z in zip(prompts, z_list)]
        with D.record_entropies(model) as steps:
            samples = D.sample(model, tok, prompts, n=group, temperature=1.0, max_new_tokens=max_new_tokens, seed=sample_seed)
        flat_rows = [r for r in rows for _ in range(group)]
        texts = [t for s in samples for _, t in s]
        scores = rewards_of(task, [r["prompt"] for r in flat_rows], texts, flat_rows)
        entropy = torch.stack(steps, 1).view(len(rows), group, -1)  # the sampling distribution's, per position
        return rows, samples, flat_rows, scores, entropy

    t0 = time.time()
    test = task.synthetic(n_prompts, seed=seed, split="test")
    rows, samples, flat_rows, scores, entropy = sample_and_score(test, with_z=False, sample_seed=1)

    # variance at RL step 0: groups from P_0
    for name, vals in scores.items():
        groups = torch.tensor(vals).view(len(rows), group)
        # groups where the reward applies (an instruction slot absent from a prompt scores None = NaN)
        finite = [g[~torch.isnan(g)] for g in groups if (~torch.isnan(g)).sum() > 1]
        nonzero = sum(bool(g.std() > 0) for g in finite) / max(1, len(finite))
        row(f"variance/{name}", nonzero, 0.5, nonzero >= 0.5,
            f"mean reward {torch.nanmean(torch.tensor(vals)).item():.3f}; {len(finite)} of {len(groups)} groups where it applies")

    # Z blocks of the first sample of each group (what the trainer would build for that response)
    firsts = [s[0] for s in samples]
    z_list = task.z_blocks([r["prompt"] for r in rows], [[{"role": "assistant", "content": t}] for _, t in firsts],
                           **{k: [r[k] for r in rows] for k in rows[0] if k != "prompt"})

    # localisation on two sampled responses per prompt
    acc: dict[str, dict[str, float]] = {}
    names = [f.__name__ for f in task.reward_funcs()]
    profiles = []  # per response: ({reward: q}, entropy), for the specificity measures
    for i, r in enumerate(rows):
        for g, (ids, text) in enumerate(samples[i][:2]):
            if not ids:
                continue
            z = task.z_blocks([r["prompt"]], [[{"role": "assistant", "content": text}]],
                              **{k: [r[k]] for k in r if k != "prompt"})[0]
            ctx = build_contexts(r["prompt"], z)
            regions = task.check_regions(text, r)
            spans = D.token_char_spans(tok, ids)
            qs = {k: D.js_profile(model, tok, ctx.all, ctx.minus[k], ids) for k in z if k in names}
            profiles.append((qs, entropy[i, g, : len(ids)]))
            for k, q in qs.items():
                if not regions.get(k):
                    continue
                inside = torch.tensor(D.in_region(spans, regions[k]))
                a = acc.setdefault(k, dict(shift_inside=[], shift_total=[], tokens_inside=[], tokens_total=[], conc=[]))
                a["shift_inside"].append(q[inside].sum().item())
                a["shift_total"].append(q.sum().item())
                a["tokens_inside"].append(int(inside.sum()))
                a["tokens_total"].append(len(q))
                c = D.concentration(q)
                if not math.isnan(c):
                    a["conc"].append(c)
    for k, a in acc.items():
        ratio = D.check_region_ratio(a)
        shift_share, tok_share = D.pooled_shares(a)
        row(f"localisation/{k}", ratio, 3.0, ratio >= 3.0,
            f"shift share {shift_share:.3f} on token share {tok_share:.3f}; "
            f"concentration(80%) {sum(a['conc']) / max(1, len(a['conc'])):.3f}")
        if tok_share > 0.5:
            # a region holding most tokens cannot reach a ratio of 3 (at most 1 / token share): what shows
            # localisation is how little of the shift lands outside it
            out = (1 - shift_share) / (1 - tok_share)
            row(f"localisation_out/{k}", out, "<= 0.5", out <= 0.5,
                f"shift share outside {1 - shift_share:.3f} on token share outside {1 - tok_share:.3f}")
    T = max(len(h) for _, h in profiles)
    q_all, mask, h_all = torch.zeros(len(profiles), len(names), T), torch.zeros(len(profiles), T), torch.zeros(len(profiles), T)
    profiled = torch.zeros(len(profiles), len(names), dtype=torch.bool)
    for j, (qs, h) in enumerate(profiles):
        mask[j, : len(h)], h_all[j, : len(h)] = 1, h
        for k, name in enumerate(names):
            if name in qs and float(qs[name].sum()) > 0:
                q_all[j, k, : len(h)], profiled[j, k] = qs[name], True
    med = median_correlations(specificity(q_all, mask, profiled, h_all), names)
    per_reward = ", ".join(f"{n} {med[f'entropy_corr/{n}']:.2f}" for n in names if med[f"entropy_corr/{n}"] == med[f"entropy_corr/{n}"])
    row("specificity/cross_reward_corr", med["cross_reward_corr"], "<= 0.3", med["cross_reward_corr"] <= 0.3,
        f"median over {med['cross_reward_pairs']} pairs of rewards on the same response; median correlation of q with "
        f"the sampling entropy {med['entropy_corr']:.2f} over {med['entropy_profiles']} profiles ({per_reward})")

    # reading: answer rewards with all Z blocks vs without
    _, _, _, scores_z, _ = sample_and_score(test, with_z=True, z_list=z_list, sample_seed=2)
    for name in task.answer_rewards:
        if name not in scores:
            continue
        without = torch.nanmean(torch.tensor(scores[name])).item()
        with_z = torch.nanmean(torch.tensor(scores_z[name])).item()
        row(f"reading/{name}", with_z - without, "> 0", with_z > without, f"with Z {with_z:.3f}, without {without:.3f}")

    # reading where the needed value exists only in Z
    hidden = task.hidden_value_split(n_prompts, seed, "test")
    if hidden is not None:
        hidden = list(hidden[1])
        hrows, hsamples, _, hscores, _ = sample_and_score(hidden, with_z=False, sample_seed=3)
        hz = task.z_blocks([r["prompt"] for r in hrows], [[{"role": "assistant", "content": s[0][1]}] for s in hsamples],
                           **{k: [r[k] for r in hrows] for k in hrows[0] if k != "prompt"})
        _, _, _, hscores_z, _ = sample_and_score(hidden, with_z=True, z_list=hz, sample_seed=4)
        for name in task.hidden_rewards:
            if name not in hscores:
                continue
            without = torch.nanmean(torch.tensor(hscores[name])).item()
            with_z = torch.nanmean(torch.tensor(hscores_z[name])).item()
            row(f"reading_hidden/{name}", with_z - without, 0.5, with_z - without >= 0.5,
                f"with Z {with_z:.3f}, without {without:.3f}")

    stage = f"stage 2 of {meta['parent_base']} (this stage's seconds), " if "parent_base" in meta else ""
    row("budget/build_seconds", float(meta["build_seconds"]), "<= 1200 (all bases)", meta["build_seconds"] <= 420,
        f"params {meta['params']}, base {path.name}, {stage}recipe {json.dumps(recipe_changes(task, meta['recipe']))}, "
        f"per-base share 420 s; measure {time.time() - t0:.0f}s")
    return rows_out


def recipe_changes(task, recipe: dict) -> dict:
    """The fields of a base's recipe (``mrtpo_recipe.json``'s) that differ from the task's default recipe of its
    size, and always its noise; a parent as the same changes of its own."""
    default = dataclasses.asdict(default_recipe(task, recipe["size"]))
    full = dataclasses.asdict(Recipe.from_dict(recipe))  # a file written before a field existed lacks it
    out = {k: v for k, v in full.items() if k == "noise" or (k != "parent" and v != default[k])}
    if recipe.get("parent") is not None:
        out["parent"] = recipe_changes(task, recipe["parent"])
    return out


def measure_dial(task_name: str, setting: float, **kwargs) -> list[dict]:
    """``measure`` of the dial base at ``setting`` (``tiny.dial_recipe``), criteria ``dial/<setting>/<criterion>``;
    ``kwargs`` as ``measure``'s."""
    recipe = dial_recipe(get_task(task_name), setting, size=kwargs.get("size", "tiny"))
    return [{**r, "criterion": f"dial/{setting:g}/{r['criterion']}"} for r in measure(task_name, recipe=recipe, **kwargs)]


def learning(task_name: str, seeds=(0, 1, 2)) -> list[dict]:
    """Learning and RL budget: 100 GDPO steps (the runner's tiny runs, trained when absent, reused by the book)
    vs the untrained base, held-out answer reward at temperature 1; and each run's training time."""
    import statistics

    from mrtpo import runs as runner

    task = get_task(task_name)
    answer = task.answer_rewards[0] if len(task.answer_rewards) == 1 else None

    def answer_mean(ev: dict) -> float:
        metrics = ev["synthetic_test"]["temp1"]
        return metrics[answer] if answer else statistics.mean(v for k, v in metrics.items() if k in task.answer_rewards)

    base = answer_mean(runner.evaluate_base(task_name))
    runs = [runner.run(task_name, "gdpo", seed=s) for s in seeds]
    gains = [answer_mean(r.eval) - base for r in runs]
    mean, spread = statistics.mean(gains), (statistics.stdev(gains) if len(gains) > 1 else 0.0)
    times = [r.summary["train_runtime_s"] for r in runs]
    return [
        {"task": task_name, "criterion": "learning/100_gdpo_steps", "value": round(mean, 4), "target": 0.10,
         "met": mean >= 0.10, "notes": f"base {base:.3f}; gain per seed {', '.join(f'{g:+.3f}' for g in gains)} "
                                       f"(std {spread:.3f}, seeds {list(seeds)})"},
        {"task": task_name, "criterion": "budget/100_step_rl_seconds", "value": round(max(times), 1), "target": "<= 600",
         "met": max(times) <= 600, "notes": "training time of each GDPO run: " + ", ".join(f"{t:.0f}s" for t in times)},
    ]


def write(rows: list[dict], path: Path = RESULTS) -> None:
    """Replace the CSV's rows of the same (task, criterion), keep every other row."""
    keys = {(r["task"], r["criterion"]) for r in rows}
    old = []
    if path.exists():
        with path.open() as f:
            old = [r for r in csv.DictReader(f) if (r["task"], r["criterion"]) not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(old + rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", nargs="+", default=["sql"])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", default="tiny", help="tiny (the acceptance figures) or smoke (a quick check)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--learning", action="store_true",
                    help="only the learning and RL-budget criteria (GDPO runs of the runner, reused by the book)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="GDPO seeds for --learning")
    ap.add_argument("--dial", type=float, nargs="*", metavar="SETTING",
                    help=f"measure the dial bases (built when absent) instead: these settings, or all {DIAL_SETTINGS}")
    args = ap.parse_args()

    def emit(rows: list[dict]) -> None:
        for r in rows:
            print(f"{r['task']:5s} {r['criterion']:34s} {r['value']!s:>8} target {r['target']!s:>8} met {r['met']}  {r['notes']}")
        write(rows, args.out)

    kw = dict(n_prompts=args.prompts, seed=args.seed, size=args.size)
    for t in args.tasks:
        if args.learning:
            emit(learning(t, tuple(args.seeds)))
        elif args.dial is not None:
            for setting in args.dial or DIAL_SETTINGS:  # written one by one: each setting is a build and a measurement
                emit(measure_dial(t, setting, **kw))
        else:
            emit(measure(t, **kw))
    if not args.learning and args.dial is None:
        write([all_bases_budget(args.size, args.seed)], args.out)


def all_bases_budget(size: str = "tiny", seed: int = 0) -> dict:
    """Total recorded build time of the three tiny bases (issue 5: <= 20 minutes on 2 cores in all)."""
    metas = {t: json.loads((tiny_base(t, size=size, seed=seed) / "mrtpo_recipe.json").read_text()) for t in ("sql", "if", "tool")}
    total = sum(m["build_seconds"] for m in metas.values())
    return {"task": "all", "criterion": "budget/all_bases_build_seconds", "value": round(total, 1), "target": "<= 1200",
            "met": total <= 1200, "notes": "; ".join(f"{t} {m['build_seconds']:.0f}s" for t, m in metas.items())
            + " (each build uses one thread; builds ran beside other jobs on the 2 cores, so their times include contention)"}


if __name__ == "__main__":
    main()
