"""Tiny bases: small Qwen2 policies trained from scratch by supervised warm-up, built deterministically.

A pretrained LLM reads a verifier's privileged text Z_k by copying from context; a policy trained from
scratch must be taught to. The warm-up below follows the prototype recipe (RECIPES.md, "Tiny policies
trained from scratch"):

* a copy-friendly tokenizer (``mrtpo.tokenizer``): a value is the same token id in question, Z and answer;
* ``random_value_frac`` of the examples have their values (quoted strings, numbers) replaced, consistently
  in prompt, Z blocks and target, by random pseudo-words / numbers that can only be copied;
* Z blocks (the trainer's privileged-information section, ``mrtpo.contexts``) are appended to the prompt,
  each block independently with probability ``hint_p[0]`` for the first ``hint_switch`` of the steps, then
  ``hint_p[1]``;
* noise injected into some targets so that rewards keep variance at RL step 0. *Where* it is injected
  decides where the with/without-Z shift lands (issue 5): a noise kind gated on blocks is applied only when
  none of those blocks is in the prompt, so the policy learns "with Z_k, this region is certain; without
  it, not". Which noise, gated on which block, is the task's (``Task.warmup_noise``; the corruptions are
  ``mrtpo.tasks.warmup``). The mix is recorded in ``mrtpo_recipe.json`` next to the weights, because tiny-scale
  localisation is partly designed by it and must never be presented as emergent.

Loss is next-token cross-entropy on response tokens only; cosine learning rate with linear warm-up.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .paths import cache_root
from .tasks import get_task
from .tasks.base import Noise, Task
from .tasks.warmup import answer_values, random_like, sub_value
from .tokenizer import build_tokenizer

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
    """Everything that decides a tiny base; its hash names the cache folder."""

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
    hint_p: tuple[float, float] = (0.9, 0.5)
    hint_switch: float = 1 / 3
    noise: tuple[Noise, ...] = ()
    vocab_size: int = 4096
    max_len: int = 384


def default_recipe(task: Task, size: str = "tiny") -> Recipe:
    """The recipe a task's tiny base is built with (``size="smoke"``: seconds, for tests): the task's
    warm-up noise (``Task.warmup_noise``) and sequence length (``Task.warmup_max_len``)."""
    noise, max_len = task.warmup_noise, task.warmup_max_len or Recipe.max_len
    if size == "smoke":
        return Recipe(size="smoke", steps=12, batch=8, n_train=48, warmup_steps=2, noise=noise, lr=3e-3, max_len=max_len)
    return Recipe(size=size, noise=noise, max_len=max_len)


SYLLABLES = ("ka", "lo", "mi", "ren", "tu", "vo", "sa", "bel", "dor", "ni", "qu", "ar", "en", "po", "zi", "fa")


def pseudo_words(n: int, seed: int) -> list[str]:
    """``n`` distinct capitalised pseudo-words (never real data values), deterministic in ``seed``."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        if w not in out:
            out.append(w)
    return out


# ----------------------------------------------------------------------------------------------------
# warm-up examples




@dataclass
class WarmupExample:
    prompt: list  # chat messages, without Z
    response: str
    z: dict[str, str]
    kind: str  # "plain", "random_values" or "hidden_value"
    labels: dict[str, str] = field(default_factory=dict)  # Z block -> what its reward checks (reward_label)


def make_examples(task, recipe: Recipe, seed: int, words: list[str]) -> list[WarmupExample]:
    """The warm-up pool: task examples, some with random values, some with a value only in Z."""
    rng = random.Random(seed)
    n_hidden = int(recipe.n_train * recipe.hide_value_frac)
    rows = list(task.synthetic(recipe.n_train - n_hidden, seed=seed, split="train"))
    kinds = ["plain"] * len(rows)
    hidden = task.hidden_value_split(n_hidden, seed + 1, "train") if n_hidden else None
    if hidden is not None:
        rows += list(hidden[1])
        kinds += ["hidden_value"] * len(hidden[1])
    out = []
    for row, kind in zip(rows, kinds):
        response = task.reference_response(row)
        if not recipe.think_values and task.think_values is not None:
            response = task.think_values.sub("", response)
        columns = {k: [v] for k, v in row.items() if k != "prompt"}
        z = task.z_blocks([row["prompt"]], [[{"role": "assistant", "content": response}]], **columns)[0]
        labels = {k: task.reward_label(k, row) for k in z}
        ex = WarmupExample([dict(m) for m in row["prompt"]], response, dict(z), kind, labels)
        if kind == "plain" and rng.random() < recipe.random_value_frac:
            ex = randomise_values(ex, rng, words)
        out.append(ex)
    return out


def randomise_values(ex: WarmupExample, rng: random.Random, words: list[str]) -> WarmupExample:
    """Replace every copyable value, consistently in prompt, Z and target, by a random one."""
    visible = " ".join(m["content"] for m in ex.prompt) + " " + " ".join(ex.z.values())
    values = answer_values(ex.response, visible)
    if not values:
        return ex
    prompt, response, z = [dict(m) for m in ex.prompt], ex.response, dict(ex.z)
    for v in values:
        new = random_like(v, rng, words)
        for m in prompt:
            m["content"] = sub_value(m["content"], v, new)
        response = sub_value(response, v, new)
        z = {k: sub_value(t, v, new) for k, t in z.items()}
    return WarmupExample(prompt, response, z, "random_values", ex.labels)



# ----------------------------------------------------------------------------------------------------
# build


def render_prompt(tokenizer, prompt: list, blocks: dict[str, str]) -> str:
    """The chat-template text of ``prompt ⊕ blocks`` ending with the assistant marker (as the trainer sees it)."""
    from .contexts import append_section

    return tokenizer.apply_chat_template(append_section(prompt, blocks), tokenize=False, add_generation_prompt=True)


def recipe_hash(task_name: str, recipe: Recipe, seed: int) -> str:
    blob = json.dumps({"task": task_name, "seed": seed, "build": BUILD_VERSION, **dataclasses.asdict(recipe)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def tiny_path(task_name: str, size: str = "tiny", seed: int = 0, recipe: Recipe | None = None) -> Path:
    """Where ``tiny_base`` keeps (or will build) this base; built when ``<path>/mrtpo_recipe.json`` exists."""
    recipe = recipe or default_recipe(get_task(task_name), size)
    return cache_root() / "models" / f"{task_name}-{recipe.size}-{seed}-{recipe_hash(task_name, recipe, seed)}"


def tiny_base(task_name: str, size: str = "tiny", seed: int = 0, recipe: Recipe | None = None, force: bool = False) -> Path:
    """Path of the tiny base for the task ``task_name`` (a key of ``mrtpo.tasks.TASKS``), built and cached when absent.

    Cache: ``$MRTPO_CACHE/models/<task>-<size>-<seed>-<recipe hash>/`` (default ``~/.cache/mrtpo``), holding
    ``save_pretrained`` model + tokenizer and ``mrtpo_recipe.json`` (recipe, warm-up mix, build stats).
    """
    task = get_task(task_name)
    recipe = recipe or default_recipe(task, size)
    path = tiny_path(task_name, size, seed, recipe)
    if force and path.exists():
        shutil.rmtree(path)
    if not (path / "mrtpo_recipe.json").exists():
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        build(task, recipe, seed, tmp)
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    return path


def build(task: Task, recipe: Recipe, seed: int, out: Path, log_every: int = 25) -> dict:
    """Train the tokenizer and the policy for one tiny base and save them to ``out``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    t0 = time.time()
    torch.set_num_threads(BUILD_THREADS)
    words = pseudo_words(400, seed)
    examples = make_examples(task, recipe, seed, words)

    corpus = [render_prompt_plain(ex) for ex in examples] + [" ".join(words)] * 3
    tokenizer = build_tokenizer(corpus, vocab_size=recipe.vocab_size)

    torch.manual_seed(seed)
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
            "where the with/without-Z shift lands (designed, not emergent)",
        },
        "params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "build_seconds": round(time.time() - t0, 1),
        **stats,
    }
    (out / "mrtpo_recipe.json").write_text(json.dumps(meta, indent=2))
    return meta


def render_prompt_plain(ex: WarmupExample) -> str:
    """Tokenizer-training text of one example: every message, every Z block and the target."""
    return "\n".join([m["content"] for m in ex.prompt] + list(ex.z.values()) + [ex.response])


def noisy_target(task, ex, shown: dict, recipe, rng: random.Random, words, counts: dict) -> str:
    """The warm-up target of ``ex`` with the recipe's noise applied: a ``constraint`` corruption for each block
    absent from the prompt (probability ``p`` each), any other kind when none of its gate blocks is shown."""
    target = ex.response
    for nz in recipe.noise:
        if nz.kind == "constraint":
            for k in ex.z:
                if k not in shown and rng.random() < nz.p:
                    noisy = task.corrupt(target, nz.kind, rng, words, ex.labels.get(k, ""))
                    counts["noise_applied"][nz.kind] += noisy != target
                    target = noisy
        elif not any(g in shown for g in nz.gate) and rng.random() < nz.p:
            noisy = task.corrupt(target, nz.kind, rng, words)
            counts["noise_applied"][nz.kind] += noisy != target
            target = noisy
    return target


def sample_batch(task, examples, recipe: Recipe, step: int, rng: random.Random, words, tokenizer, counts: dict):
    """One warm-up batch: (input_ids, labels) with labels -100 on prompt and padding; noise by ``task.corrupt``."""
    import torch

    p_hint = recipe.hint_p[0] if step < recipe.hint_switch * recipe.steps else recipe.hint_p[1]
    seqs = []
    for ex in rng.sample(examples, recipe.batch):
        shown = {k: z for k, z in ex.z.items() if rng.random() < p_hint}
        counts["blocks_shown"] += len(shown)
        counts["blocks_total"] += len(ex.z)
        target = noisy_target(task, ex, shown, recipe, rng, words, counts)
        p_ids = tokenizer(render_prompt(tokenizer, ex.prompt, shown), add_special_tokens=False).input_ids
        r_ids = tokenizer(target, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        ids = (p_ids + r_ids)[: recipe.max_len]
        labels = ([-100] * len(p_ids) + r_ids)[: recipe.max_len]
        seqs.append((ids, labels))
    width = max(len(s[0]) for s in seqs)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([s[0] + [pad] * (width - len(s[0])) for s in seqs])
    labels = torch.tensor([s[1] + [-100] * (width - len(s[1])) for s in seqs])
    attention = torch.tensor([[1] * len(s[0]) + [0] * (width - len(s[0])) for s in seqs])
    return input_ids, labels, attention


def warmup(model, tokenizer, task, examples, recipe: Recipe, seed: int, words, log_every: int = 50) -> dict:
    """Supervised warm-up: AdamW, cosine lr with linear warm-up, loss on response tokens only."""
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
        input_ids, labels, attention = sample_batch(task, examples, recipe, step, rng, words, tokenizer, counts)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
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
