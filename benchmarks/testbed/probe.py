"""Testbed exploration (issue 12): build a tiny base from a named recipe variant and measure, per reward,
where leave-one-out of Z_k moves the policy — on teacher-forced references and on sampled responses.

Figures per (prompt set, response kind, reward), PAPER.md §7:
* ratio: (sum q inside the checker's region / sum q) / (tokens inside / tokens), pooled over responses
  (``diagnostics.check_region_ratio``);
  ``out_ratio`` the same for the tokens outside the region;
* concentration: mean over responses of the share of tokens holding 80% of that response's shift;
* mean q (the size of the shift);
* cross-reward correlation: median over (response, reward pair) of Pearson(q_j, q_k) on the same response;
* entropy correlation: median over (response, reward) of Pearson(q_k, H_t), H_t the entropy under P_all.
Plus reading (answer reward with all Z blocks minus without, sampled at temperature 1) on default and
hidden-value prompts, and variance (share of groups of G samples from P_0 with non-zero reward std).

Usage: ``python benchmarks/testbed/probe.py NAME '{"noise": [["structure", .35, ["execution_match"]]], ...}'``;
appends one row per figure to results/testbed/attempts.csv. The overrides are ``recipes.Recipe`` fields, changes
from the task's default tiny recipe (``noise`` as ``[kind, p, gate]`` lists); among them the testbed's options
``copy_weight``, ``loo_blocks``, ``robust_p`` and ``one_site`` (documented on ``recipes.Recipe``), and ``parent``,
the overrides of the recipe whose base this one continues (a stage 2; ``{}``: the default base). With
``--dial D`` the overrides change the dial base at setting D (``recipes.dial_recipe``) instead. Examples: the
text-to-SQL dial base at d = 0.5 (a 360-step stage 2 of the default base, the series R2-d<d>), and the same
without robust continuations::

    probe.py R2-d0.5 --dial 0.5
    probe.py R2-d0.5-r0 '{"robust_p": 0}' --dial 0.5

The base is built (or reused) by ``tiny.tiny_base`` under ``$MRTPO_CACHE/models``, named by its recipe hash
like any tiny base. Bases built by earlier versions of this script (``$MRTPO_CACHE/testbed/``, named with
option suffixes such as ``-copy_weight4-init_from...``) are not found again by name: measure them with
``--base PATH``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import statistics
import time
from pathlib import Path

import torch

from mrtpo.analysis import diagnostics as D
from mrtpo.models import tiny
from mrtpo.method.contexts import build_contexts
from mrtpo.method.relevance import js_relevance
from mrtpo.method.replay import replay_hidden
from mrtpo.tasks import get_task
from mrtpo.tasks.base import Noise, Task
from mrtpo.method.regions import token_char_spans
from mrtpo.models import recipe as recipes
from mrtpo.method.regions import check_region_ratio, in_region, pooled_shares
from mrtpo.models.sampling import prompt_ids, sample

ROOT = Path(__file__).resolve().parents[2]
OUT_CSV = ROOT / "results" / "testbed" / "attempts.csv"
FIELDS = ("attempt", "task", "prompts", "responses", "reward", "figure", "value", "notes")


def recipe_from(overrides: dict, task: Task, dial: float | None = None) -> recipes.Recipe:
    """The task's default tiny recipe (with ``dial``: ``recipes.dial_recipe(task, dial)``) with ``overrides``
    (``noise`` as ``[kind, p, gate]`` lists; ``parent`` the overrides of the parent recipe, from the default)."""
    kw = dict(overrides)
    if "noise" in kw:
        kw["noise"] = tuple(Noise(k, p, tuple(g)) for k, p, g in kw["noise"])
    if "hint_p" in kw:
        kw["hint_p"] = tuple(kw["hint_p"])
    if kw.get("parent") is not None:
        kw["parent"] = recipe_from(kw["parent"], task)
    return dataclasses.replace(recipes.default_recipe(task) if dial is None else recipes.dial_recipe(task, dial), **kw)


def reference(task, recipe, row) -> str:
    r = task.reference_response(row)
    if not recipe.think_values and task.think_values is not None:
        r = task.think_values.sub("", r)
    return r


@torch.no_grad()
def response_logits(model, tok, prompts_ids: list[list[int]], response_ids: list[int]) -> torch.Tensor:
    """Logits (n_prompts, T, V) predicting each response token, for one response after each prompt (the
    trainer's replay, ``mrtpo.method.replay.replay_hidden``, then the lm_head)."""
    ids = torch.tensor(list(response_ids))
    h = replay_hidden(model, prompts_ids, [ids] * len(prompts_ids), tok.pad_token_id, batch_size=len(prompts_ids))
    return model.get_output_embeddings()(h).float()


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a - a.mean(), b - b.mean()
    d = (a.norm() * b.norm()).item()
    return (a @ b).item() / d if d > 0 else math.nan


def columns_of(rows):
    return {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}


def rewards(task, rows, texts):
    comps = [[{"role": "assistant", "content": t}] for t in texts]
    out = {}
    for f in task.reward_funcs():
        out[f.__name__] = [math.nan if v is None else float(v) for v in f([r["prompt"] for r in rows], comps, **columns_of(rows))]
    return out


@torch.no_grad()
def profiles(model, tok, task, rows, responses):
    """Per (row, response ids, text): q per reward, entropy under P_all, regions -> accumulators."""
    acc, cross, ent = {}, [], []
    for r, (ids, text) in zip(rows, responses):
        if not ids:
            continue
        z = task.z_blocks([r["prompt"]], [[{"role": "assistant", "content": text}]], **{k: [r[k]] for k in r if k != "prompt"})[0]
        ctx = build_contexts(r["prompt"], z)
        names = [k for k in z]
        logits = response_logits(model, tok, [prompt_ids(tok, ctx.all)] + [prompt_ids(tok, ctx.minus[k]) for k in names], list(ids))
        logp = torch.log_softmax(logits[0], -1)
        H = -(logp.exp() * logp).sum(-1)
        regions = task.check_regions(text, r)
        spans = token_char_spans(tok, ids)
        qs = {}
        for j, k in enumerate(names):
            q = js_relevance(logits[0], logits[j + 1])
            qs[k] = q
            if not regions.get(k):
                continue
            inside = torch.tensor(in_region(spans, regions[k]))
            a = acc.setdefault(k, dict(shift_inside=[], shift_total=[], tokens_inside=[], tokens_total=[], conc=[], qmean=[]))
            a["shift_inside"].append(q[inside].sum().item())
            a["shift_total"].append(q.sum().item())
            a["tokens_inside"].append(int(inside.sum()))
            a["tokens_total"].append(len(q))
            a["qmean"].append(q.mean().item())
            c = D.concentration(q)
            if not math.isnan(c):
                a["conc"].append(c)
            e = pearson(q, H)
            if not math.isnan(e):
                ent.append(e)
        for i, j in [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]:
            c = pearson(qs[names[i]], qs[names[j]])
            if not math.isnan(c):
                cross.append(c)
    return acc, cross, ent


@torch.no_grad()
def show_profiles(model, tok, task, recipe, rows) -> None:
    """Per-token q of every reward and the entropy under P_all, on teacher-forced references."""
    for r in rows:
        ref = reference(task, recipe, r)
        ids = tok(ref, add_special_tokens=False).input_ids
        z = task.z_blocks([r["prompt"]], [[{"role": "assistant", "content": ref}]], **{k: [r[k]] for k in r if k != "prompt"})[0]
        ctx, names = build_contexts(r["prompt"], z), list(z)
        lg = response_logits(model, tok, [prompt_ids(tok, ctx.all)] + [prompt_ids(tok, ctx.minus[k]) for k in names], ids)
        lp = torch.log_softmax(lg[0], -1)
        H = -(lp.exp() * lp).sum(-1)
        qs = [js_relevance(lg[0], lg[j + 1]) for j in range(len(names))]
        print("  ".join(f"{n[:7]:>7}" for n in names), "  H(all)  token")
        for t, i in enumerate(ids):
            if tok.decode([i]).strip():
                print("  ".join(f"{q[t].item():7.3f}" for q in qs), f"{H[t].item():7.3f}  {tok.decode([i])!r}")
        print()


def hidden_rows(task, n: int, seed: int) -> list:
    """``n`` test examples whose needed value is only in Z (``Task.hidden_value_split``); [] if the task has none.
    They are scored with ``task`` itself, as the attempts in results/testbed were."""
    split = task.hidden_value_split(n, seed, "test")
    return list(split[1]) if split is not None else []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("overrides", nargs="?", default="{}")
    ap.add_argument("--dial", type=float, help=f"start from the dial base at this setting (recipes.DIAL_SETTINGS {recipes.DIAL_SETTINGS})")
    ap.add_argument("--task", default="sql")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--notes", default="")
    ap.add_argument("--dry", action="store_true", help="print, do not append to the CSV")
    ap.add_argument("--base", type=Path, help="measure this already built base (any folder with mrtpo_recipe.json) instead of building")
    ap.add_argument("--show", type=int, default=0, help="print per-token q (every reward) and entropy of N references and stop")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM

    from mrtpo.models.tokenizer import load_tokenizer

    task = get_task(args.task)
    if args.base:
        path = args.base.expanduser()
        recipe = recipes.Recipe.from_dict(json.loads((path / "mrtpo_recipe.json").read_text())["recipe"])
    else:
        recipe = recipe_from(json.loads(args.overrides), task, args.dial)
        path = tiny.tiny_base(get_task(args.task), seed=args.seed, recipe=recipe)
    meta = json.loads((path / "mrtpo_recipe.json").read_text())
    tok = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    out, t0 = [], time.time()
    if args.show:
        show_profiles(model, tok, task, recipe, list(task.synthetic(args.show, seed=args.seed, split="test"))
                      + hidden_rows(task, args.show, args.seed))
        return

    def emit(prompts, responses, reward, figure, value, notes=""):
        out.append(dict(attempt=args.name, task=args.task, prompts=prompts, responses=responses, reward=reward, figure=figure,
                        value=round(value, 4) if isinstance(value, float) else value, notes=notes))

    sets = {"default": list(task.synthetic(args.prompts, seed=args.seed, split="test"))}
    hidden = hidden_rows(task, args.prompts, args.seed)
    if hidden:
        sets["hidden"] = hidden
    for sname, rows in sets.items():
        samples = sample(model, tok, [r["prompt"] for r in rows], n=args.group, temperature=1.0, max_new_tokens=96, seed=1)
        flat = [r for r in rows for _ in range(args.group)]
        texts = [t for s in samples for _, t in s]
        sc = rewards(task, flat, texts)
        for name, vals in sc.items():
            g = torch.tensor(vals).view(len(rows), args.group)
            fin = [x[~torch.isnan(x)] for x in g if (~torch.isnan(x)).sum() > 1]
            emit(sname, "sampled", name, "mean_reward_P0", torch.nanmean(torch.tensor(vals)).item())
            emit(sname, "sampled", name, "variance_groups", sum(bool(x.std() > 0) for x in fin) / max(1, len(fin)))
        # reading: Z from the first sample of each group, as the trainer builds it
        z_list = task.z_blocks([r["prompt"] for r in rows], [[{"role": "assistant", "content": s[0][1]}] for s in samples], **columns_of(rows))
        zs = sample(model, tok, [build_contexts(r["prompt"], z).all for r, z in zip(rows, z_list)], n=args.group,
                      temperature=1.0, max_new_tokens=96, seed=2)
        scz = rewards(task, flat, [t for s in zs for _, t in s])
        for name in task.answer_rewards:
            w, wo = torch.nanmean(torch.tensor(scz[name])).item(), torch.nanmean(torch.tensor(sc[name])).item()
            emit(sname, "sampled", name, "reading", w - wo, f"with Z {w:.3f}, without {wo:.3f}")
        refs = [(tok(reference(task, recipe, r), add_special_tokens=False).input_ids, reference(task, recipe, r)) for r in rows]
        kinds = {"reference": (rows, refs), "sampled": ([r for r in rows for _ in range(2)], [x for s in samples for x in s[:2]])}
        for kind, (rr, resp) in kinds.items():
            acc, cross, ent = profiles(model, tok, task, rr, resp)
            for k, a in acc.items():
                ss, ts = pooled_shares(a)
                emit(sname, kind, k, "ratio", check_region_ratio(a), f"shift share {ss:.3f} on token share {ts:.3f}")
                emit(sname, kind, k, "out_ratio", (1 - ss) / (1 - ts) if ts < 1 else math.nan)
                emit(sname, kind, k, "concentration80", statistics.mean(a["conc"]) if a["conc"] else math.nan)
                emit(sname, kind, k, "mean_q", statistics.mean(a["qmean"]))
            emit(sname, kind, "all", "cross_reward_corr_median", statistics.median(cross) if cross else math.nan, f"{len(cross)} pairs")
            emit(sname, kind, "all", "entropy_corr_median", statistics.median(ent) if ent else math.nan, f"{len(ent)} profiles")
    emit("", "", "", "build_seconds", float(meta["build_seconds"]),
         f"params {meta['params']}; final loss {meta['final_loss']}; recipe {json.dumps(meta['recipe'])}; {args.notes}")
    emit("", "", "", "measure_seconds", round(time.time() - t0, 1))
    for r in out:
        print(f"{r['prompts']:8s} {r['responses']:9s} {r['reward']:16s} {r['figure']:26s} {r['value']!s:>8}  {r['notes'][:150]}")
    if not args.dry:
        OUT_CSV.parent.mkdir(parents=True, exist_ok=True)
        new = not OUT_CSV.exists()
        with OUT_CSV.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            if new:
                w.writeheader()
            w.writerows(out)


if __name__ == "__main__":
    main()
