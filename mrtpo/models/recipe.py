"""Tiny-base recipes: everything that decides a tiny base (``Recipe``), its hash (the cache folder's name), the
task's default recipe and the dial's stage-2 recipes (issue 12). Built by ``mrtpo.models.tiny``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from mrtpo.tasks.base import Noise, Task

#: bump when the build procedure changes in a way the recipe does not capture (invalidates caches)
BUILD_VERSION = 1


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
            raise ValueError(f"not fields of Recipe: {', '.join(sorted(unknown))}")
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
