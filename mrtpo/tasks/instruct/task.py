"""``InstructionFollowing``: one binary reward per constraint slot, their Z blocks and check regions.

* **Slots.** TRL needs a fixed list of reward functions, so the task exposes ``max_constraints`` slots
  ``constraint_0..``; slot *i* scores the *i*-th constraint of the example (1.0/0.0, ``checkers``) and returns
  ``None`` when the example has fewer constraints (TRL reads None as "not applicable").
* **Z block** of a constraint = the registry's description of it (the text ``build_description``
  returns), which is also the text the synthetic prompts are made of.
"""

from __future__ import annotations

from pathlib import Path

from ..base import UNSTATED, Benchmark, DataFile, Noise, Spans, Task, completion_text, reward_function, think_span
from .checkers import CHECKERS_VERSION, check_constraint, describe, evaluate, kwargs_list
from .data import load_jsonl
from .regions import constraint_region
from .synthetic import FULL_TYPES, synthetic_if


#: synthetic training prompts that stand in for HIR-16K where it is absent (it is on none of the project's machines):
#: the same IFEval constraint registry, phrased as IFEval phrases it; a smollm2 run (200 prompts) sees none twice, the
#: paper's 300 x 32 would go through it 2.3 times
SYNTHETIC_TRAIN = 4096


class InstructionFollowing(Task):
    """Instruction following with one binary reward per constraint slot (IFEval/IFBench checkers).

    ``num_constraints``: range of constraints per synthetic prompt (2–4 at the tiny scale; ``(5, 13)``
    draws from the larger pool ``FULL_TYPES``). ``max_constraints``: number of reward slots
    (default: the upper end of ``num_constraints``).
    """

    name = "if"
    #: the mean over constraint slots (``report.evaluations`` adds it)
    answer_metric = "constraint_mean"
    data_description = "synthetic constraints (tiny) / HIR-16K, first two subsets"
    paper_data = (
        DataFile("hir16k", "train", "hir/hir16k.jsonl", "huggingface.co/datasets/sastpg/HIR-16K, its first two subsets "
                 "(IFEval- and IFBench-type constraints) written as IFEval JSONL (prompt, instruction_id_list, "
                 f"kwargs); until it is there the runner trains on {SYNTHETIC_TRAIN:,} synthetic prompts instead"),
        DataFile("ifeval", "eval", "ifeval/input_data.jsonl", "google-research/instruction_following_eval data/input_data.jsonl"),
        DataFile("ifbench", "eval", "ifbench/IFBench_test.jsonl", "allenai/IFBench data/IFBench_test.jsonl; checkers: "
                 + CHECKERS_VERSION),
        DataFile("muldimif", "eval, external judge", "muldimif/test.json", "Junjie-Ye/MulDimIF Data/test.json "
                 "(load_muldimif; scored by its Code/evaluation)"),
        DataFile("advancedif", "eval, external judge", "advancedif/advancedif.jsonl", "huggingface.co/datasets/facebook/"
                 "AdvancedIF (load_advancedif; scored by its LLM judge, facebookresearch/AdvancedIF)"),
    )
    paper_run = dict(steps=300, prompts_per_step=32, num_generations=8, seeds=(0, 1, 2, 3, 4), learning_rate=1e-6,
                     max_completion_length=1024,
                     choices=(UNSTATED["num_generations"], UNSTATED["learning_rate"],
                              "prompts_per_step=32: not stated; as text-to-SQL", UNSTATED["temperature"],
                              UNSTATED["loss_type"], "max_completion_length=1024: not stated; as text-to-SQL",
                              "checkpoint=Qwen/Qwen3-4B, Qwen/Qwen2.5-7B-Instruct: the paper names Qwen3-4B and "
                              "Qwen2.5-7B without saying base or instruct; the post-trained checkpoints are taken "
                              "(Qwen3-4B, not -Base; Qwen2.5-7B-Instruct), the prompts being chat conversations"))
    paper_models = {"4b": ("Qwen/Qwen3-4B", 4.02e9), "7b": ("Qwen/Qwen2.5-7B-Instruct", 7.62e9)}
    tiny_completion_length = 160
    #: when block k is not shown, the warm-up target violates the constraint block k states
    warmup_noise = (Noise("constraint", 0.3),)
    #: the dial's stage 2 drops the reasoning's rule count (`` with 3 rules``): a token the policy reads off every
    #: block at once, it took a share of each constraint's shift (at dial 0.5 lowercase's ratio outside its region
    #: fell from 0.85 to 0.21 without it, no comma's from 1.64 to 0.34; results/testbed/attempts.md)
    dial_options = {"think_drop": r" with \d+ rules?"}
    #: a prompt with every constraint restated in Z reaches ~470 tokens and its reference ~150 (spaces are tokens)
    warmup_max_len = 640

    def __init__(self, num_constraints: tuple[int, int] = (2, 4), max_constraints: int | None = None):
        lo, hi = num_constraints
        self.num_constraints = (int(lo), int(hi))
        self.max_constraints = int(max_constraints or hi)
        if not 1 <= lo <= hi <= min(self.max_constraints, len(FULL_TYPES)):
            raise ValueError(f"num_constraints {num_constraints} must satisfy 1 <= lo <= hi <= max_constraints, {len(FULL_TYPES)}")
        self.reward_names = tuple(f"constraint_{i}" for i in range(self.max_constraints))
        self.answer_rewards = self.reward_names

    # data ------------------------------------------------------------------------------------------
    def load(self, path: str | Path):
        """``load_jsonl`` plus a check that no example has more constraints than this task has slots."""
        data = load_jsonl(path)
        most = max(len(ids) for ids in data["instruction_id_list"])
        if most > self.max_constraints:
            raise ValueError(f"{path}: an example has {most} constraints; use max_constraints >= {most}")
        return data

    def training_set(self, data_dir: Path):
        """HIR-16K when present, else ``SYNTHETIC_TRAIN`` synthetic prompts (as tool calling falls back to RLLA's
        SFT file); a run's data hash tells the two apart."""
        hir = Path(data_dir) / "hir" / "hir16k.jsonl"
        return self.load(hir) if hir.is_file() else self.synthetic(SYNTHETIC_TRAIN, seed=0, split="train")

    def real_benchmarks(self, data_dir: Path) -> dict[str, Benchmark]:
        """IFEval and IFBench, scored by their own accuracies (``evaluate``)."""
        return {"ifeval": Benchmark(self, self.load(Path(data_dir) / "ifeval" / "input_data.jsonl"), _if_accuracy),
                "ifbench": Benchmark(self, self.load(Path(data_dir) / "ifbench" / "IFBench_test.jsonl"), _if_accuracy)}

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train"):
        return self, self.synthetic(n, seed=seed, split=split, hide_value=True)

    #: the reward whose needed fact ``synthetic(hide_value=True)`` leaves out of the prompt
    hidden_rewards = ("constraint_0",)

    def synthetic(self, n: int, seed: int = 0, split: str = "train", hide_value: bool = False):
        """Short multi-constraint prompts drawn from the registry, each with a reference that satisfies them
        (``synthetic_if``); ``hide_value``: the first constraint's description is only in its Z block."""
        return synthetic_if(n, seed=seed, split=split, num_constraints=self.num_constraints, hide_value=hide_value)

    def reference_response(self, example: dict) -> str:
        """The synthetic example's stored gold response (real benchmark data has none)."""
        if not example.get("reference"):
            raise ValueError("only synthetic examples carry a reference response")
        return example["reference"]

    # rewards ---------------------------------------------------------------------------------------
    def reward_funcs(self):
        return [self._slot_reward(i) for i in range(self.max_constraints)]

    def _slot_reward(self, slot: int):
        """Reward of constraint slot ``slot``: 1.0/0.0, None where the example has no such constraint."""

        def score(text: str, example: dict) -> float | None:
            ids = example["instruction_id_list"]
            if slot >= len(ids):
                return None
            kw = kwargs_list(example["kwargs"])[slot]
            return float(check_constraint(text, ids[slot], kw, example["prompt_text"]))

        return reward_function(f"constraint_{slot}", score, _example)

    # Z blocks and check regions --------------------------------------------------------------------
    def z_blocks(self, prompts, completions, **columns):
        blocks = []
        for j in range(len(completions)):
            example = _example(prompts, j, columns)
            block = {}
            if example is not None:
                for i, (iid, kw) in enumerate(zip(example["instruction_id_list"], kwargs_list(example["kwargs"]))):
                    if i < self.max_constraints:
                        block[f"constraint_{i}"] = describe(iid, kw)
            blocks.append(block)
        return blocks

    def reward_label(self, name: str, example: dict) -> str:
        """The constraint type a slot reward checks in this example (e.g. ``startend:end_checker``)."""
        ids = list(example.get("instruction_id_list") or [])
        slot = int(name.rsplit("_", 1)[-1]) if name.startswith("constraint_") else -1
        return ids[slot] if 0 <= slot < len(ids) else name

    def check_regions(self, completion, example):
        text = completion_text(completion)
        regions: dict[str, Spans] = {"think": think_span(text)}
        try:
            pairs = list(zip(example["instruction_id_list"], kwargs_list(example["kwargs"])))
        except Exception:  # an example without constraint columns has only the think region
            return regions
        for i, (iid, kw) in enumerate(pairs[: self.max_constraints]):
            try:
                regions[f"constraint_{i}"] = constraint_region(text, iid, kw)
            except Exception:  # e.g. an argument of the wrong type: no localisable region
                regions[f"constraint_{i}"] = []
        return regions


def _if_accuracy(task, rows: list[dict], texts: list[str]) -> dict[str, float]:
    """Benchmark scorer of IFEval/IFBench: ``evaluate`` over (row, response) pairs."""
    return evaluate(list(zip(rows, texts)))


def _example(prompts: list, j: int, columns: dict) -> dict | None:
    """Row ``j`` of the constraint columns TRL passes as keyword arguments (None if they are missing)."""
    try:
        ids = list(columns["instruction_id_list"][j])
        kws = columns["kwargs"][j]
    except (KeyError, IndexError, TypeError):
        return None
    texts = columns.get("prompt_text")
    prompt = texts[j] if texts is not None else completion_text(prompts[j] if j < len(prompts) else "")
    return {"instruction_id_list": ids, "kwargs": kws, "prompt_text": prompt}
