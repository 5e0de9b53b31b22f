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
appends one row per figure to results/testbed/attempts.csv. The overrides are ``tiny.Recipe`` fields plus
the warm-up options of ``EXTRA`` (not recipe fields; a non-default value is appended to the cache name):
* ``copy_weight``: cross-entropy weight of the answer's value tokens (``copy_weighted_warmup``);
* ``init_from``: a built base whose warm-up is continued with the recipe's mix (stage 2, ``continue_warmup``);
* ``loo_blocks``: blocks shown none / all / all-but-one, a third each, as the trainer replays them (``loo_batches``);
* ``robust_p`` (needs ``loo_blocks``): a noise whose gate block is shown is still applied with probability
  ``robust_p``, the loss masked on the tokens it changed (``robust_labels``), so that the policy learns to
  continue correctly after an error it samples under P_0 without learning to make it;
* ``one_site`` (needs ``loo_blocks``): every corruption takes the first of its candidate sites (``FirstSite``),
  one site per reward (text-to-SQL: SELECT misspelt, ``<think>`` dropped, the first applicable swap).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import difflib
import json
import math
import statistics
import time
from pathlib import Path

import torch

from mrtpo import diagnostics as D
from mrtpo import tiny
from mrtpo.contexts import build_contexts
from mrtpo.paths import cache_root, portable
from mrtpo.relevance import js_relevance
from mrtpo.replay import replay_hidden
from mrtpo.tasks import get_task
from mrtpo.tasks.base import Noise, Task
from mrtpo.tasks.warmup import VALUE_RE, answer_start
from mrtpo.tokenizer import token_char_spans

ROOT = Path(__file__).resolve().parents[2]
OUT_CSV = ROOT / "results" / "testbed" / "attempts.csv"
FIELDS = ("attempt", "task", "prompts", "responses", "reward", "figure", "value", "notes")


#: warm-up options not (yet) in ``tiny.Recipe``; popped from the overrides and part of the cache name
EXTRA = {"copy_weight": 1.0, "init_from": "", "loo_blocks": False, "robust_p": 0.0, "one_site": False}


def recipe_from(overrides: dict, task: Task) -> tiny.Recipe:
    base = tiny.default_recipe(task)
    kw = {k: v for k, v in overrides.items() if k not in EXTRA}
    if "noise" in kw:
        kw["noise"] = tuple(Noise(k, p, tuple(g)) for k, p, g in kw["noise"])
    if "hint_p" in kw:
        kw["hint_p"] = tuple(kw["hint_p"])
    return dataclasses.replace(base, **kw)


def copy_weighted_warmup(copy_weight: float):
    """``tiny.warmup`` with the cross-entropy of answer-region value tokens (``mrtpo.tasks.warmup.VALUE_RE``) weighted by
    ``copy_weight``: copying a value is one or two tokens of ~40, so without weight its gradient is lost
    among the boilerplate tokens the policy learns first (attempt A2 copied nothing)."""
    import random as _random

    def sample_batch(task, examples, recipe, step, rng, words, tokenizer, counts):
        ids, labels, attention = _orig_sample_batch(task, examples, recipe, step, rng, words, tokenizer, counts)
        weights = torch.ones(labels.shape, dtype=torch.float32)
        for b in range(labels.shape[0]):
            pos = (labels[b] != -100).nonzero().flatten()
            resp_ids = labels[b, pos].tolist()
            text = tokenizer.decode(resp_ids, skip_special_tokens=False)
            spans = _spans(tokenizer, resp_ids)
            start = answer_start(text)
            vals = [m.span() for m in VALUE_RE.finditer(text, start)]
            for j, (a, e) in enumerate(spans):
                if any(a < ve and e > vs for vs, ve in vals):
                    weights[b, pos[j]] = copy_weight
        return ids, labels, attention, weights

    def _spans(tokenizer, ids):
        out, prev = [], 0
        for i in range(len(ids)):
            end = len(tokenizer.decode(ids[: i + 1], skip_special_tokens=False))
            out.append((prev, max(prev, end)))
            prev = max(prev, end)
        return out

    def warmup(model, tokenizer, task, examples, recipe, seed, words, log_every=50):
        import math as _m
        rng = _random.Random(seed + 12345)
        opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=recipe.weight_decay)

        def lr_at(step):
            if step < recipe.warmup_steps:
                return (step + 1) / recipe.warmup_steps
            frac = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
            return 0.5 * (1 + _m.cos(_m.pi * frac))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
        counts = {"blocks_shown": 0, "blocks_total": 0, "noise_applied": {n.kind: 0 for n in recipe.noise}}
        losses, tokens, t0 = [], 0, time.time()
        model.train()
        for step in range(recipe.steps):
            input_ids, labels, attention, weights = sample_batch(task, examples, recipe, step, rng, words, tokenizer, counts)
            logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
            tgt, w = labels[:, 1:], weights[:, 1:] * (labels[:, 1:] != -100)
            ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1).clamp_min(0), reduction="none")
            loss = (ce * w.reshape(-1)).sum() / w.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            tokens += int(attention.sum())
            if log_every and (step % log_every == 0 or step == recipe.steps - 1):
                print(f"warm-up step {step:4d}  loss {loss.item():.3f}  {time.time() - t0:6.1f}s", flush=True)
        model.eval()
        return {"final_loss": round(sum(losses[-20:]) / len(losses[-20:]), 4),
                "loss_curve": [round(x, 4) for x in losses[:: max(1, len(losses) // 50)]], "tokens_seen": tokens,
                "train_seconds": round(time.time() - t0, 1), "noise_applied": counts["noise_applied"],
                "blocks_shown": round(counts["blocks_shown"] / max(1, counts["blocks_total"]), 3)}

    _orig_sample_batch = tiny.sample_batch
    return warmup


def loo_batches(robust_p: float = 0.0, one_site: bool = False):
    """``tiny.sample_batch`` with the blocks shown drawn as the trainer uses them: none (P_0, what RL samples
    from), all (P_all) or all but one (P_minus_k), a third each, instead of each block independently.
    Independent blocks make "all shown" 1/8 of the examples, and the gate of region k on block k is then
    learned loosely: under P_all the policy stayed uncertain where other blocks' noise goes (attempt B1).

    ``robust_p``: for each noise whose gate block IS shown, its corruption is still applied with probability
    ``robust_p``, with the loss masked on the tokens it changed (``robust_labels``): the policy learns to
    continue correctly after an error it samples under P_0 without learning to make it. ``one_site``: every
    corruption takes the first of its candidate sites (``FirstSite``). ``robust_p`` = 0 and ``one_site``
    False draw the same random numbers as before these options (B2/B3 rebuild bit-identically)."""

    def sample_batch(task, examples, recipe, step, rng, words, tokenizer, counts):
        def shown_for(ex):
            u, keys = rng.random(), list(ex.z)
            if u < 1 / 3:
                return set()
            if u < 2 / 3 or not keys:
                return set(keys)
            return set(keys) - {keys[int(rng.random() * len(keys))]}

        return _loo_batch_impl(task, rng.sample(examples, recipe.batch), recipe, rng, words, tokenizer, counts,
                               shown_for, robust_p, one_site)

    return sample_batch


class FirstSite:
    """The rng handed to ``Task.corrupt`` under ``one_site``: ``choice`` always returns the first candidate,
    every other draw is the wrapped rng's. The corruptions of ``mrtpo.tasks.warmup`` draw their site with
    ``rng.choice``, so each noise kind then has one site per response; text-to-SQL: ``syntax`` always
    misspells SELECT (-> SELEC), ``tag`` always drops ``<think>``, ``structure`` applies the first entry of
    ``SQL_SWAPS`` the answer holds. (A ``value`` corruption would always insert ``words[0]``: meant for SQL.)"""

    def __init__(self, rng):
        self.rng = rng

    def choice(self, seq):
        return seq[0]

    def __getattr__(self, name):
        return getattr(self.rng, name)


def changed_ranges(a, b) -> list[tuple[int, int]]:
    """Ranges ``[j1, j2)`` of ``b`` that differ from ``a`` (``difflib.SequenceMatcher`` opcodes other than
    equal): character ranges for two strings, token ranges for two id lists. A pure deletion is the empty
    range ``(j1, j1)`` at the place in ``b`` where the deleted part of ``a`` was."""
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(j1, j2) for tag, _, _, j1, j2 in ops if tag != "equal"]


def robust_labels(clean_ids: list[int], noisy_ids: list[int]) -> list[int]:
    """Labels of ``noisy_ids`` (a corrupted target) with -100 on the tokens the corruption changed.

    Compared token by token, not by character spans: ``FROM`` -> ``FRO`` tokenises as ``FR`` ``O`` and
    ``</answer>`` -> ``</answer`` as ``<`` ``/`` ``answer``, so the first token of a corrupted word can keep
    every character of the clean text and still not be the clean token at that place. A deletion masks the
    token that stands where the deleted ones were (dropping ``<think>`` makes the first word the error;
    dropping the last tag makes EOS the error, so the ids include EOS)."""
    labels = list(noisy_ids)
    for j1, j2 in changed_ranges(clean_ids, noisy_ids):
        for j in range(j1, min(max(j2, j1 + 1), len(labels))):
            labels[j] = -100
    return labels


def robust_target(task, ex, target: str, shown: dict, recipe, p: float, rng, words, counts: dict) -> str:
    """``target`` with each noise whose gate block is in ``shown`` (for ``constraint`` noise: each shown block,
    with its label) applied with probability ``p``: the complement of ``tiny.noisy_target``'s absent-block noise."""
    for nz in recipe.noise:
        if nz.kind == "constraint":
            labels = [ex.labels.get(k, "") for k in ex.z if k in shown]
        else:
            labels = [""] if any(g in shown for g in nz.gate) else []
        for label in labels:
            if rng.random() < p:
                noisy = task.corrupt(target, nz.kind, rng, words, label)
                key = f"robust_{nz.kind}"
                counts["noise_applied"][key] = counts["noise_applied"].get(key, 0) + (noisy != target)
                target = noisy
    return target


def _loo_batch_impl(task, chosen, recipe, rng, words, tokenizer, counts, shown_for, robust_p=0.0, one_site=False):
    site_rng = FirstSite(rng) if one_site else rng
    seqs = []
    for ex in chosen:
        keys = shown_for(ex)
        shown = {k: z for k, z in ex.z.items() if k in keys}
        counts["blocks_shown"] += len(shown)
        counts["blocks_total"] += len(ex.z)
        target = tiny.noisy_target(task, ex, shown, recipe, site_rng, words, counts)
        p_ids = tokenizer(tiny.render_prompt(tokenizer, ex.prompt, shown), add_special_tokens=False).input_ids
        r_ids = tokenizer(target, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        r_labels = r_ids
        if robust_p > 0:
            robust = robust_target(task, ex, target, shown, recipe, robust_p, site_rng, words, counts)
            if robust != target:
                noisy_ids = tokenizer(robust, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
                r_ids, r_labels = noisy_ids, robust_labels(r_ids, noisy_ids)
        seqs.append(((p_ids + r_ids)[: recipe.max_len], ([-100] * len(p_ids) + r_labels)[: recipe.max_len]))
    width = max(len(x[0]) for x in seqs)
    pad = tokenizer.pad_token_id
    return (torch.tensor([x[0] + [pad] * (width - len(x[0])) for x in seqs]),
            torch.tensor([x[1] + [-100] * (width - len(x[1])) for x in seqs]),
            torch.tensor([[1] * len(x[0]) + [0] * (width - len(x[0])) for x in seqs]))


def continue_warmup(task_name: str, recipe: tiny.Recipe, seed: int, init: Path, out: Path) -> None:
    """Stage 2: continue a built base's warm-up (its weights and tokenizer) with ``recipe``'s mix; the
    stage-1 base keeps what it already learned (copying), the stage-2 mix sets where Z matters."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    torch.set_num_threads(tiny.BUILD_THREADS)
    torch.manual_seed(seed)
    words = tiny.pseudo_words(400, seed)
    task = get_task(task_name)
    examples = tiny.make_examples(task, recipe, seed, words)
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForCausalLM.from_pretrained(init)
    stats = tiny.warmup(model, tok, task, examples, recipe, seed, words, 25)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    stage1 = json.loads((init / "mrtpo_recipe.json").read_text())
    meta = {"task": task_name, "seed": seed, "recipe": dataclasses.asdict(recipe), "stage1": stage1["recipe"],
            "stage1_build_seconds": stage1["build_seconds"], "params": sum(p.numel() for p in model.parameters()),
            "build_seconds": round(time.time() - t0, 1), "final_loss": stats["final_loss"],
            "noise_applied": stats["noise_applied"]}
    (out / "mrtpo_recipe.json").write_text(json.dumps(meta, indent=2))


def reference(task, recipe, row) -> str:
    r = task.reference_response(row)
    if not recipe.think_values and task.think_values is not None:
        r = task.think_values.sub("", r)
    return r


@torch.no_grad()
def response_logits(model, tok, prompts_ids: list[list[int]], response_ids: list[int]) -> torch.Tensor:
    """Logits (n_prompts, T, V) predicting each response token, for one response after each prompt (the
    trainer's replay, ``mrtpo.replay.replay_hidden``, then the lm_head)."""
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
        logits = response_logits(model, tok, [D.prompt_ids(tok, ctx.all)] + [D.prompt_ids(tok, ctx.minus[k]) for k in names], list(ids))
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
            inside = torch.tensor(D.in_region(spans, regions[k]))
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
        lg = response_logits(model, tok, [D.prompt_ids(tok, ctx.all)] + [D.prompt_ids(tok, ctx.minus[k]) for k in names], ids)
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
    ap.add_argument("--task", default="sql")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--notes", default="")
    ap.add_argument("--dry", action="store_true", help="print, do not append to the CSV")
    ap.add_argument("--base", type=Path, help="measure this already built base (its recipe file) instead of building")
    ap.add_argument("--show", type=int, default=0, help="print per-token q (every reward) and entropy of N references and stop")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    task = get_task(args.task)
    overrides = json.loads(args.overrides)
    recipe = recipe_from(overrides, task)
    extra = {k: overrides.get(k, v) for k, v in EXTRA.items()}
    suffix = "".join(f"-{k}{Path(str(v)).name}" for k, v in extra.items() if v != EXTRA[k])
    path = cache_root() / "testbed" / f"{args.task}-{recipe.size}-{args.seed}-{tiny.recipe_hash(args.task, recipe, args.seed)}{suffix}"
    if args.base:
        path = args.base.expanduser()
        recipe = recipe_from({k: v for k, v in json.loads((path / "mrtpo_recipe.json").read_text())["recipe"].items()
                              if k in {f.name for f in dataclasses.fields(tiny.Recipe)}}
                             | {"noise": [[n["kind"], n["p"], n["gate"]] for n in json.loads((path / "mrtpo_recipe.json").read_text())["recipe"]["noise"]]},
                             task)
    elif not (path / "mrtpo_recipe.json").exists():
        if (extra["robust_p"] or extra["one_site"]) and not extra["loo_blocks"]:
            raise SystemExit('robust_p and one_site are options of the leave-one-out block schedule: add "loo_blocks": true')
        if extra["loo_blocks"]:
            tiny.sample_batch = loo_batches(float(extra["robust_p"]), bool(extra["one_site"]))
        if extra["copy_weight"] != 1.0:
            tiny.warmup = copy_weighted_warmup(extra["copy_weight"])
        if extra["init_from"]:
            continue_warmup(args.task, recipe, args.seed, Path(extra["init_from"]).expanduser(), path)
        else:
            tiny.build(task, recipe, args.seed, path)
    meta = json.loads((path / "mrtpo_recipe.json").read_text())
    tok = AutoTokenizer.from_pretrained(path)
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
        samples = D.sample(model, tok, [r["prompt"] for r in rows], n=args.group, temperature=1.0, max_new_tokens=96, seed=1)
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
        zs = D.sample(model, tok, [build_contexts(r["prompt"], z).all for r, z in zip(rows, z_list)], n=args.group,
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
                ss, ts = D.pooled_shares(a)
                emit(sname, kind, k, "ratio", D.check_region_ratio(a), f"shift share {ss:.3f} on token share {ts:.3f}")
                emit(sname, kind, k, "out_ratio", (1 - ss) / (1 - ts) if ts < 1 else math.nan)
                emit(sname, kind, k, "concentration80", statistics.mean(a["conc"]) if a["conc"] else math.nan)
                emit(sname, kind, k, "mean_q", statistics.mean(a["qmean"]))
            emit(sname, kind, "all", "cross_reward_corr_median", statistics.median(cross) if cross else math.nan, f"{len(cross)} pairs")
            emit(sname, kind, "all", "entropy_corr_median", statistics.median(ent) if ent else math.nan, f"{len(ent)} profiles")
    emit("", "", "", "build_seconds", float(meta["build_seconds"]),
         f"params {meta['params']}; extra {portable(json.dumps(extra))}; final loss {meta['final_loss']}; recipe {json.dumps(meta['recipe'])}; {args.notes}")
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
