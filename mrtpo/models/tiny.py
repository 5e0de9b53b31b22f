"""Tiny bases: small Qwen2 policies trained from scratch by supervised warm-up, built deterministically.

A pretrained LLM reads a verifier's privileged text Z_k by copying from context; a policy trained from
scratch must be taught to. The warm-up below follows the prototype recipe (RECIPES.md, "Tiny policies
trained from scratch"):

* a copy-friendly tokenizer (``mrtpo.models.tokenizer``): a value is the same token id in question, Z and answer;
* ``random_value_frac`` of the examples have their values (quoted strings, numbers) replaced, consistently
  in prompt, Z blocks and target, by random pseudo-words / numbers that can only be copied;
* Z blocks (the trainer's privileged-information section, ``mrtpo.method.contexts``) are appended to the prompt,
  each block independently with probability ``hint_p[0]`` for the first ``hint_switch`` of the steps, then
  ``hint_p[1]`` (or, with ``loo_blocks``, as the trainer's contexts P_0 / P_all / P_minus_k);
* noise injected into some targets so that rewards keep variance at RL step 0. *Where* it is injected
  decides where the with/without-Z shift lands (issue 5): a noise kind gated on blocks is applied only when
  none of those blocks is in the prompt, so the policy learns "with Z_k, this region is certain; without
  it, not". Which noise, gated on which block, is the task's (``Task.warmup_noise``; the corruptions are
  ``mrtpo.tasks.warmup``). The mix is recorded in ``mrtpo_recipe.json`` next to the weights, because tiny-scale
  localisation is partly designed by it and must never be presented as emergent.

Loss is next-token cross-entropy on response tokens only (value tokens weighted ``copy_weight``); cosine
learning rate with linear warm-up. The batches are ``mrtpo.models.warmup_data``'s.

A recipe with a ``parent`` is a stage 2: its base continues the warm-up of the parent's base (weights and
tokenizer) with its own mix, so that a testbed base keeps what the parent learned (copying) while the
second mix sets where Z matters. ``tiny_base`` builds (or reuses) the parent first. The dial bases
(``dial_recipe``, ``DIAL_SETTINGS``) are such stage 2s, one per rate of the task's gated noise.

Committed bases (``paths.SHIPPED_BASES``, ``ship``): a base the repository carries is copied into the cache, its
files checked against their sha256 sums, instead of being built; ``reproduce`` rebuilds one from its recorded
recipe and compares the weights (``make reproduce``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

from mrtpo.files.folders import locked
from mrtpo.files.manifest import verify_manifest, write_manifest
from mrtpo.files.paths import SHIPPED_BASES, cache_root
from mrtpo.tasks.base import Task
from mrtpo.models.recipe import BUILD_VERSION, SIZES, Recipe, default_recipe, recipe_hash
from mrtpo.models.tokenizer import build_tokenizer, load_tokenizer
from mrtpo.models.warmup_data import make_examples, pseudo_words, render_prompt_plain, sample_batch


#: one intra-op thread: on a shared 2-core machine two threads slowed a step 10x whenever another process
#: held a core (spin-waiting), and a fixed count keeps the weights bit-identical from build to build
BUILD_THREADS = 1


# ----------------------------------------------------------------------------------------------------
# the dial (issue 12): how much of the mechanism a base has



# ----------------------------------------------------------------------------------------------------
# build



def tiny_path(task: Task, size: str = "tiny", seed: int = 0, recipe: Recipe | None = None) -> Path:
    """Where ``tiny_base`` keeps (or will build) this base; built when ``<path>/mrtpo_recipe.json`` exists."""
    recipe = recipe or default_recipe(task, size)
    return cache_root() / "models" / f"{task.name}-{recipe.size}-{seed}-{recipe_hash(task.name, recipe, seed)}"


def tiny_base(task: Task, size: str = "tiny", seed: int = 0, recipe: Recipe | None = None, force: bool = False) -> Path:
    """Path of the tiny base for ``task``, built and cached when absent (processes asking at once: one builds it,
    the others wait for it under a file lock).

    Cache: ``$MRTPO_CACHE/models/<task>-<size>-<seed>-<recipe hash>/`` (default ``~/.cache/mrtpo``), holding
    ``save_pretrained`` model + tokenizer and ``mrtpo_recipe.json`` (recipe, warm-up mix, build stats). A stage 2
    (``recipe.parent``) builds or reuses its parent's base first, then continues it; ``force`` rebuilds this
    stage only. A base the repository carries (``shipped_base``) is copied in instead of built, unless ``force``.
    """
    recipe = recipe or default_recipe(task, size)
    path = tiny_path(task, size, seed, recipe)
    if force and path.exists():
        shutil.rmtree(path)
    if (path / "mrtpo_recipe.json").exists():
        return path
    with locked(cache_root() / "work" / f"{path.name}.lock"):  # processes of one job: one builds, the others wait
        if not (path / "mrtpo_recipe.json").exists():
            shipped = None if force else shipped_base(path.name)
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            if shipped is not None:
                verify_manifest(shipped, remedy=f"Restore it (git checkout -- {shipped}) or delete that folder to "
                                                "build the base here instead")
                shutil.copytree(shipped, tmp)
            else:
                parent = tiny_base(task, seed=seed, recipe=recipe.parent) if recipe.parent is not None else None
                build(task, recipe, seed, tmp, parent=parent)
            shutil.rmtree(path, ignore_errors=True)
            tmp.rename(path)
    return path


def shipped_base(name: str) -> Path | None:
    """The repository's copy of the base folder ``name`` (``paths.SHIPPED_BASES``), or None."""
    path = SHIPPED_BASES / name
    return path if (path / "mrtpo_recipe.json").exists() else None


def ship(base: Path) -> Path:
    """Copy the built base folder ``base`` into ``paths.SHIPPED_BASES`` with a manifest of its files' sha256 sums
    (its weights as built, float32: the runs trained from it keep their exact starting point)."""
    out = SHIPPED_BASES / base.name
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(base, out, ignore=shutil.ignore_patterns(".*"))
    write_manifest(out)
    return out


def reproduce(name: str, work: Path, task: Task) -> dict:
    """Rebuild the shipped base ``name`` of ``task`` under ``work`` from its recorded recipe and seed (its parent, if
    any, taken as shipped or cached) and compare: ``same`` (weights file identical), ``max_abs_diff`` over the
    parameters, the build's seconds."""
    from safetensors.torch import load_file

    shipped = shipped_base(name)
    if shipped is None:
        raise ValueError(f"no shipped base {name!r} under {SHIPPED_BASES} (the shipped ones: {shipped_names()})")
    meta = json.loads((shipped / "mrtpo_recipe.json").read_text())
    if meta["task"] != task.name:
        raise ValueError(f"the shipped base {name!r} is a base of task {meta['task']!r}, not {task.name!r}")
    recipe = Recipe.from_dict(meta["recipe"])
    if tiny_path(task, recipe.size, meta["seed"], recipe).name != name:
        raise ValueError(f"{shipped}: its recorded recipe hashes to another name; the folder was renamed or edited")
    parent = tiny_base(task, seed=meta["seed"], recipe=recipe.parent) if recipe.parent is not None else None
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    built = build(task, recipe, meta["seed"], out, parent=parent)
    weights = "model.safetensors"
    same = (out / weights).read_bytes() == (shipped / weights).read_bytes()
    a, b = load_file(out / weights), load_file(shipped / weights)
    diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in b)
    return {"base": name, "same": same, "max_abs_diff": diff, "build_seconds": built["build_seconds"]}


def shipped_names() -> list[str]:
    """Names of the bases the repository carries."""
    return sorted(p.parent.name for p in SHIPPED_BASES.glob("*/mrtpo_recipe.json"))


def build(task: Task, recipe: Recipe, seed: int, out: Path, log_every: int = 25, parent: Path | None = None) -> dict:
    """Train the tokenizer and the policy for one tiny base and save them to ``out``; with ``parent`` (the
    built base of ``recipe.parent``), continue that base's policy with its tokenizer instead."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    t0 = time.time()
    torch.set_num_threads(BUILD_THREADS)
    words = pseudo_words(400, seed)
    examples = make_examples(task, recipe, seed, words)
    torch.manual_seed(seed)
    if parent is not None:
        # the parent's own tokenization (mrtpo.models.tokenizer.load_tokenizer): the testbed attempts B1-B4 and R-d0.5 of
        # results/testbed were built with AutoTokenizer, which split identifiers at "_" in stage 2 only
        tokenizer, model = load_tokenizer(parent), AutoModelForCausalLM.from_pretrained(parent)
        stats = warmup(model, tokenizer, task, examples, recipe, seed, words, log_every)
        return save(model, tokenizer, task, recipe, seed, out, examples, stats, t0, parent)

    corpus = [render_prompt_plain(ex) for ex in examples] + [" ".join(words)] * 3
    tokenizer = build_tokenizer(corpus, vocab_size=recipe.vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=recipe.max_len,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **SIZES[recipe.size],
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    stats = warmup(model, tokenizer, task, examples, recipe, seed, words, log_every)
    return save(model, tokenizer, task, recipe, seed, out, examples, stats, t0)


def save(model, tokenizer, task: Task, recipe: Recipe, seed: int, out: Path, examples, stats: dict, t0: float,
         parent: Path | None = None) -> dict:
    """Write the warmed-up policy, its tokenizer and ``mrtpo_recipe.json`` (recipe, warm-up mix, stats) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    meta = {
        "task": task.name,
        "seed": seed,
        "build_version": BUILD_VERSION,
        "recipe": dataclasses.asdict(recipe),
        "warmup_mix": {
            "examples": {k: sum(e.kind == k for e in examples) for k in ("plain", "random_values", "hidden_value")},
            "noise_applied": stats.pop("noise_applied"),
            "blocks_shown": stats.pop("blocks_shown"),
            "note": "noise gated on Z blocks is applied only when none of them is in the prompt: this decides "
            "where the with/without-Z shift lands (designed, not emergent); with robust_p it is also applied when "
            "they are shown, with no loss on the tokens it changed",
        },
        "params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "build_seconds": round(time.time() - t0, 1),  # this stage's only: the parent's is in its own folder
        **({"parent_base": parent.name} if parent is not None else {}),
        **stats,
    }
    (out / "mrtpo_recipe.json").write_text(json.dumps(meta, indent=2))
    return meta


def warmup(model, tokenizer, task, examples, recipe: Recipe, seed: int, words, log_every: int = 50) -> dict:
    """Supervised warm-up: AdamW, cosine lr with linear warm-up, loss on response tokens only
    (``weighted_lm_loss`` when ``recipe.copy_weight`` is not 1)."""
    import torch

    rng = random.Random(seed + 12345)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=recipe.weight_decay)

    def lr_at(step: int) -> float:
        if step < recipe.warmup_steps:
            return (step + 1) / recipe.warmup_steps
        frac = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    counts: dict[str, Any] = {"blocks_shown": 0, "blocks_total": 0, "noise_applied": {n.kind: 0 for n in recipe.noise}}
    losses, tokens, t0 = [], 0, time.time()
    model.train()
    for step in range(recipe.steps):
        input_ids, labels, attention, weights = sample_batch(task, examples, recipe, step, rng, words, tokenizer, counts)
        if weights is None:
            # the model's own loss, as every base built before copy_weight existed: a weighted mean with unit
            # weights differs from it in the last bits, and a base's name promises its exact weights
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        else:
            loss = weighted_lm_loss(model(input_ids=input_ids, attention_mask=attention).logits, labels, weights)
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
    return {
        "final_loss": round(sum(losses[-20:]) / len(losses[-20:]), 4),
        "loss_curve": [round(x, 4) for x in losses[:: max(1, len(losses) // 50)]],
        "tokens_seen": tokens,
        "train_seconds": round(time.time() - t0, 1),
        "noise_applied": counts["noise_applied"],
        "blocks_shown": round(counts["blocks_shown"] / max(1, counts["blocks_total"]), 3),
    }


def weighted_lm_loss(logits, labels, weights):
    """Next-token cross-entropy with per-token weights: sum_t w_t CE(logits_{t-1}, y_t) / sum_t w_t over the
    tokens with a label (y_t != -100)."""
    import torch

    logits, tgt = logits[:, :-1], labels[:, 1:]
    w = weights[:, 1:] * (tgt != -100)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1).clamp_min(0), reduction="none")
    return (ce * w.reshape(-1)).sum() / w.sum()
