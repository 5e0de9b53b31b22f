"""Tiny bases: small Qwen2 policies trained from scratch by supervised warm-up, built deterministically.

A pretrained LLM reads a verifier's privileged text Z_k by copying from context; a policy trained from
scratch must be taught to. The warm-up below follows the prototype recipe (RECIPES.md, "Tiny policies
trained from scratch"):

* a copy-friendly tokenizer (``mrtpo.tokenizer``): a value is the same token id in question, Z and answer;
* ``random_value_frac`` of the examples have their values (quoted strings, numbers) replaced, consistently
  in prompt, Z blocks and target, by random pseudo-words / numbers that can only be copied;
* Z blocks (the trainer's privileged-information section, ``mrtpo.contexts``) are appended to the prompt,
  each block independently with probability ``hint_p[0]`` for the first ``hint_switch`` of the steps, then
  ``hint_p[1]`` (or, with ``loo_blocks``, as the trainer's contexts P_0 / P_all / P_minus_k);
* noise injected into some targets so that rewards keep variance at RL step 0. *Where* it is injected
  decides where the with/without-Z shift lands (issue 5): a noise kind gated on blocks is applied only when
  none of those blocks is in the prompt, so the policy learns "with Z_k, this region is certain; without
  it, not". Which noise, gated on which block, is the task's (``Task.warmup_noise``; the corruptions are
  ``mrtpo.tasks.warmup``). The mix is recorded in ``mrtpo_recipe.json`` next to the weights, because tiny-scale
  localisation is partly designed by it and must never be presented as emergent.

Loss is next-token cross-entropy on response tokens only (value tokens weighted ``copy_weight``); cosine
learning rate with linear warm-up. The batches are ``mrtpo.warmup_data``'s.

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
import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .manifest import verify_manifest, write_manifest
from .paths import SHIPPED_BASES, cache_root
from .tasks import get_task
from .tasks.base import Noise, Task
from .tokenizer import build_tokenizer, load_tokenizer
from .warmup_data import make_examples, pseudo_words, render_prompt_plain, sample_batch

#: bump when the build procedure changes in a way the recipe does not capture (invalidates caches)
BUILD_VERSION = 1

#: one intra-op thread: on a shared 2-core machine two threads slowed a step 10x whenever another process
#: held a core (spin-waiting), and a fixed count keeps the weights bit-identical from build to build
BUILD_THREADS = 1

#: architecture per size: Qwen2, tied embeddings
SIZES: dict[str, dict[str, int]] = {
    # 1.97M params: the prototype's 3.4M (hidden 256, intermediate 704) took ~4 s/step here at 24 x ~190
    # tokens on a shared 2-core machine, far over the ~7 min per-base budget
    "tiny": dict(hidden_size=192, num_hidden_layers=4, intermediate_size=512, num_attention_heads=4, num_key_value_heads=4),
    "smoke": dict(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2),
}


@dataclass(frozen=True)
class Recipe:
    """Everything that decides a tiny base; its hash names the cache folder (``recipe_hash``)."""

    size: str = "tiny"
    steps: int = 450
    batch: int = 24
    lr: float = 2e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    n_train: int = 4000
    #: the prototype's 0.3 did not make this 1.97M policy copy (results/tiny_models_attempts.md, run 4)
    random_value_frac: float = 0.5
    hide_value_frac: float = 0.15
    #: keep the values the reference ``<think>`` restates; False drops them (``Task.think_values``) so that value
    #: uncertainty without Z sits in the answer, but then no copying was learned at all: the restatement is
    #: a short-range copy (question -> think -> SQL) the long-range one is learned through
    think_values: bool = True
    #: probability that a Z block is shown, before / after ``hint_switch`` of the steps (unused with loo_blocks)
    hint_p: tuple[float, float] = (0.9, 0.5)
    hint_switch: float = 1 / 3
    noise: tuple[Noise, ...] = ()
    vocab_size: int = 4096
    max_len: int = 384
    # fields below were added after the first bases were built: see OPTIONAL_FIELDS
    #: cross-entropy weight of the answer's value tokens (``warmup_data.value_weights``); 1: the model's own loss
    copy_weight: float = 1.0
    #: blocks shown as the trainer's contexts: none / all / all but one, a third each (``warmup_data.shown_blocks``)
    loo_blocks: bool = False
    #: robust continuations: a noise whose gate block IS shown is still applied with this probability, with
    #: no loss on the tokens it changed (``warmup_data.robust_target``), so that the policy learns to continue
    #: correctly after an error it samples under P_0 without learning to make it
    robust_p: float = 0.0
    #: every corruption at its first candidate site, one site per noise kind (``warmup_data.FirstSite``)
    one_site: bool = False
    #: a regular expression whose matches are removed from the reference ``<think>`` (after ``think_values``):
    #: what the reasoning restates beyond the task's own values, e.g. instruction following's `` with 3 rules``,
    #: a count the policy partly reads off the Z blocks, so that removing any block moved that token
    think_drop: str = ""
    #: stage 2: continue the warm-up of this recipe's base (weights, tokenizer) instead of starting from
    #: scratch; same size, vocab_size and max_len, built with the same task and seed
    parent: Recipe | None = None

    def __post_init__(self):
        # JSON gives 4 for 4.0: without the cast the same recipe would hash two ways
        object.__setattr__(self, "copy_weight", float(self.copy_weight))
        object.__setattr__(self, "robust_p", float(self.robust_p))
        if self.copy_weight <= 0 or not 0 <= self.robust_p <= 1:
            raise ValueError(f"copy_weight must be > 0 and robust_p in [0, 1]; got {self.copy_weight}, {self.robust_p}")
        p = self.parent
        if p is not None and (p.size, p.vocab_size, p.max_len) != (self.size, self.vocab_size, self.max_len):
            raise ValueError("a stage 2 continues its parent's model and tokenizer: give it the parent's size, "
                             f"vocab_size and max_len ({p.size}, {p.vocab_size}, {p.max_len})")

    @classmethod
    def from_dict(cls, d: dict) -> Recipe:
        """The recipe whose ``dataclasses.asdict`` is ``d`` (``mrtpo_recipe.json``'s "recipe"); fields that ``d``
        lacks (a base built before they existed) take their defaults."""
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"not fields of tiny.Recipe: {', '.join(sorted(unknown))}")
        kw = dict(d)
        if "noise" in kw:
            kw["noise"] = tuple(Noise(n["kind"], n["p"], tuple(n["gate"])) for n in kw["noise"])
        if "hint_p" in kw:
            kw["hint_p"] = tuple(kw["hint_p"])
        if kw.get("parent") is not None:
            kw["parent"] = cls.from_dict(kw["parent"])
        return cls(**kw)


#: fields added after the first bases were built, with their defaults: ``recipe_hash`` includes them only
#: when set away from these, so that every base built before they existed keeps its name
OPTIONAL_FIELDS = {f.name: f.default for f in dataclasses.fields(Recipe)
                   if f.name in ("copy_weight", "loo_blocks", "robust_p", "one_site", "think_drop", "parent")}


def default_recipe(task: Task, size: str = "tiny") -> Recipe:
    """The recipe a task's tiny base is built with (``size="smoke"``: seconds, for tests): the task's
    warm-up noise (``Task.warmup_noise``) and sequence length (``Task.warmup_max_len``)."""
    noise, max_len = task.warmup_noise, task.warmup_max_len or Recipe.max_len
    if size == "smoke":
        return Recipe(size="smoke", steps=12, batch=8, n_train=48, warmup_steps=2, noise=noise, lr=3e-3, max_len=max_len)
    return Recipe(size=size, noise=noise, max_len=max_len)


# ----------------------------------------------------------------------------------------------------
# the dial (issue 12): how much of the mechanism a base has


#: the dial's settings: the rate p of every gated noise kind in a dial base's stage 2. On text-to-SQL references
#: format's check-region ratio rose 0.64 / 1.78 / 3.17 / 3.25 over them (results/testbed/attempts.md, B2-d*)
DIAL_SETTINGS = (0.0, 0.2, 0.5, 0.8)
#: the setting of the "default dial" acceptance figures (the testbed's best recipe, R-d0.5 / B4)
DIAL_DEFAULT = 0.5
#: what every setting shares (the testbed's options, documented on ``Recipe``): a 360-step stage 2 of the
#: task's default base at lr 1e-3 (cosine, 10 warm-up steps), blocks shown as the trainer's contexts
#: (``loo_blocks``), robust continuations at p 0.5, answer value tokens weighted x4, a ``<think>`` that does not
#: restate the values (``think_values=False``; no effect on a task without ``Task.think_values``)
DIAL_STAGE2 = dict(steps=360, lr=1e-3, warmup_steps=10, think_values=False, copy_weight=4.0, loo_blocks=True, robust_p=0.5)
#: at the smoke size (tests) the stage 2 is a few steps
DIAL_SMOKE_STEPS = dict(steps=4, warmup_steps=1)


def dial_recipe(task: Task, setting: float = DIAL_DEFAULT, size: str = "tiny", **options) -> Recipe:
    """The recipe of the dial base at ``setting``: a stage 2 (``Recipe.parent``) of ``default_recipe(task, size)``
    with ``DIAL_STAGE2`` and the task's ``Task.dial_options`` (``options``: Recipe fields that replace them, e.g.
    ``robust_p=0.0`` for a control) in which
    every gated noise kind of ``Task.warmup_noise`` (``Noise.gated``: kinds gated on a block, and ``constraint``)
    has rate ``setting``, its gate unchanged; an ungated kind keeps its rate. Everything else is the parent's.

    Setting 0 leaves nothing gated, so the shift lands where the policy is uncertain anyway (the lowest
    setting should measure a ratio near 1); the larger the setting, the more region k depends on block k."""
    if not 0 <= setting <= 1:
        raise ValueError(f"a dial setting is a noise rate in [0, 1]; got {setting} (the settings: {DIAL_SETTINGS})")
    parent = default_recipe(task, size)
    noise = tuple(Noise(n.kind, setting, n.gate) if n.gated else n for n in task.warmup_noise)
    stage2 = {**DIAL_STAGE2, **task.dial_options, **(DIAL_SMOKE_STEPS if size == "smoke" else {}), **options}
    return dataclasses.replace(parent, parent=parent, noise=noise, **stage2)


# ----------------------------------------------------------------------------------------------------
# build


def recipe_hash(task_name: str, recipe: Recipe, seed: int) -> str:
    """First 10 hex digits of sha256(JSON {task, seed, build: BUILD_VERSION, **recipe fields}, keys sorted).

    Hash stability: a field of ``OPTIONAL_FIELDS`` enters only when it differs from its default, so adding a
    field never renames an existing base (tests/test_identity.py pins the default recipes' hashes); a
    ``parent`` enters as its own ``recipe_hash`` (same task and seed)."""
    fields = {k: v for k, v in dataclasses.asdict(recipe).items() if k not in OPTIONAL_FIELDS or getattr(recipe, k) != OPTIONAL_FIELDS[k]}
    if recipe.parent is not None:
        fields["parent"] = recipe_hash(task_name, recipe.parent, seed)
    blob = json.dumps({"task": task_name, "seed": seed, "build": BUILD_VERSION, **fields}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def tiny_path(task_name: str, size: str = "tiny", seed: int = 0, recipe: Recipe | None = None) -> Path:
    """Where ``tiny_base`` keeps (or will build) this base; built when ``<path>/mrtpo_recipe.json`` exists."""
    recipe = recipe or default_recipe(get_task(task_name), size)
    return cache_root() / "models" / f"{task_name}-{recipe.size}-{seed}-{recipe_hash(task_name, recipe, seed)}"


def tiny_base(task_name: str, size: str = "tiny", seed: int = 0, recipe: Recipe | None = None, force: bool = False) -> Path:
    """Path of the tiny base for the task ``task_name`` (a key of ``mrtpo.tasks.TASKS``), built and cached when absent.

    Cache: ``$MRTPO_CACHE/models/<task>-<size>-<seed>-<recipe hash>/`` (default ``~/.cache/mrtpo``), holding
    ``save_pretrained`` model + tokenizer and ``mrtpo_recipe.json`` (recipe, warm-up mix, build stats). A stage 2
    (``recipe.parent``) builds or reuses its parent's base first, then continues it; ``force`` rebuilds this
    stage only. A base the repository carries (``shipped_base``) is copied in instead of built, unless ``force``.
    """
    task = get_task(task_name)
    recipe = recipe or default_recipe(task, size)
    path = tiny_path(task_name, size, seed, recipe)
    if force and path.exists():
        shutil.rmtree(path)
    if not (path / "mrtpo_recipe.json").exists():
        shipped = None if force else shipped_base(path.name)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        if shipped is not None:
            verify_manifest(shipped, remedy=f"Restore it (git checkout -- {shipped}) or delete that folder to build "
                                            "the base here instead")
            shutil.copytree(shipped, tmp)
        else:
            parent = tiny_base(task_name, seed=seed, recipe=recipe.parent) if recipe.parent is not None else None
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


def reproduce(name: str, work: Path) -> dict:
    """Rebuild the shipped base ``name`` under ``work`` from its recorded recipe and seed (its parent, if any,
    taken as shipped or cached) and compare: ``same`` (weights file identical), ``max_abs_diff`` over the
    parameters, the build's seconds."""
    from safetensors.torch import load_file

    shipped = shipped_base(name)
    if shipped is None:
        raise ValueError(f"no shipped base {name!r} under {SHIPPED_BASES} (the shipped ones: {shipped_names()})")
    meta = json.loads((shipped / "mrtpo_recipe.json").read_text())
    recipe = Recipe.from_dict(meta["recipe"])
    if tiny_path(meta["task"], recipe.size, meta["seed"], recipe).name != name:
        raise ValueError(f"{shipped}: its recorded recipe hashes to another name; the folder was renamed or edited")
    parent = tiny_base(meta["task"], seed=meta["seed"], recipe=recipe.parent) if recipe.parent is not None else None
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    built = build(get_task(meta["task"]), recipe, meta["seed"], out, parent=parent)
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
        # the parent's own tokenization (mrtpo.tokenizer.load_tokenizer): the testbed attempts B1-B4 and R-d0.5 of
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
