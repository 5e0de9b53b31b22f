"""``ToolCalling``: a format reward and a correctness reward judged by BFCL's official AST checker.

Rewards, both binary:

* ``format``: the tags alone. Exactly one ``<think>…</think>`` first, then one or more
  ``<tool_call>…</tool_call>`` blocks, nothing else around or between them but whitespace (tags are counted in
  the whole response, so a tag mentioned inside the reasoning breaks the format). It does not parse the JSON:
  that is what ``correctness`` reads, so each reward keeps its own tokens (``calls.format_ok``).
* ``correctness``: 1.0 when ``bfcl_eval``'s ``ast_checker`` accepts the calls of all ``<tool_call>`` blocks
  after ``</think>`` taken together (function name, required arguments, type-aware value match against the list
  of possible answers, order-free for parallel calls; a wrong or extra call in any block fails), else 0.0. The
  checker is the official one, imported with one stub module (``checker``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..base import UNSTATED, Benchmark, DataFile, Noise, Task, completion_text, reward_function, reward_means, think_span
from .calls import TAGS, TEMPLATE, calls_blocks, calls_json, format_ok, parse_calls, tag_positions, tool_call_spans
from .checker import check_calls, reference_calls
from .data import LIVE, NON_LIVE, load_bfcl
from .rlla import load_rlla
from .synthetic import TOOLS, synthetic_tools


class ToolCalling(Task):
    """Tool calling with ``format`` and ``correctness`` rewards (BFCL AST checker), both binary.

    ``hide_value``: in synthetic data, one needed argument value is left out of the query and is
    present only in the correctness Z block (the reference call), to test reading of privileged
    information. ``num_tools``: tools offered per synthetic prompt (the gold one plus distractors).
    """

    name = "tool"
    reward_names = ("format", "correctness")
    answer_rewards = ("correctness",)
    answer_metric = "correctness"
    data_description = "synthetic tool calls (tiny) / RLLA, 3,920 examples"
    paper_data = (
        DataFile("rlla_train", "train", "rlla/train.parquet", "qiancheng0/ToolRL dataset/rlla_4k/train.parquet (3,920 rows; "
                 "load_rlla); until it is there the runner trains on rlla/rlla_sft.json"),
        DataFile("rlla_sft", "train (fallback)", "rlla/rlla_sft.json", "qiancheng0/ToolRL dataset/rlla_4k_raw/rlla_sft.json"),
    )
    paper_run = dict(steps=100, prompts_per_step=32, num_generations=8, seeds=(0, 1, 2), learning_rate=1e-6,
                     max_completion_length=512,
                     choices=tuple(UNSTATED.values()) + ("steps=100, prompts_per_step=32: not stated for tool calling; "
                                                        "as text-to-SQL (about 0.8 epoch of RLLA's 3,920 examples)",
                                                        "max_completion_length=512: not stated; half text-to-SQL's, a "
                                                        "tool call with its reasoning being shorter (not measured)",
                                                        "checkpoint=Qwen/Qwen2.5-1.5B-Instruct, Qwen/Qwen2.5-3B-Instruct: "
                                                        "the paper names Qwen2.5-1.5B and -3B without saying base or "
                                                        "instruct; the Instruct checkpoints are taken (the prompts are "
                                                        "chat conversations with the tools in the system prompt)"))
    paper_models = {"1.5b": ("Qwen/Qwen2.5-1.5B-Instruct", 1.54e9), "3b": ("Qwen/Qwen2.5-3B-Instruct", 3.09e9)}
    #: warm-up noise: a swapped argument value (correctness), a dropped tag (format)
    warmup_noise = (Noise("value", 0.2, ("correctness",)), Noise("tag", 0.15, ("format",)))

    def __init__(self, hide_value: bool = False, num_tools: int = 3):
        if not 1 <= num_tools <= len(TOOLS):
            raise ValueError(f"num_tools must be in 1..{len(TOOLS)}")
        self.hide_value = hide_value
        self.num_tools = num_tools

    # data ------------------------------------------------------------------------------------------
    def synthetic(self, n: int, seed: int = 0, split: str = "train"):
        """Small-vocabulary tool specs, queries and gold calls in BFCL shapes (``synthetic_tools``)."""
        return synthetic_tools(n, seed=seed, split=split, hide_value=self.hide_value, num_tools=self.num_tools)

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train"):
        """``hide_value`` is an option of this task (it changes the data stream), so the split comes from a copy."""
        hidden = ToolCalling(hide_value=True, num_tools=self.num_tools)
        return hidden, hidden.synthetic(n, seed=seed, split=split)

    def training_set(self, data_dir: Path):
        """RLLA's RL split (3,920 examples) when present, else its 400-example SFT file."""
        full = Path(data_dir) / "rlla" / "train.parquet"
        return load_rlla(full if full.is_file() else Path(data_dir) / "rlla" / "rlla_sft.json")

    def real_benchmarks(self, data_dir: Path) -> dict[str, Benchmark]:
        """BFCL v4 non-live and live (the installed ``bfcl-eval``'s data), scored by the rewards' means."""
        return {"bfcl_non_live": Benchmark(self, load_bfcl(NON_LIVE), reward_means),
                "bfcl_live": Benchmark(self, load_bfcl(LIVE), reward_means)}

    def reference_response(self, example: dict) -> str:
        calls = reference_calls(json.loads(example["ground_truth"]), json.loads(example["functions"]))
        names = " and ".join(dict.fromkeys(c["name"] for c in calls))
        return f"<think>the user needs {names}</think>\n{calls_blocks(calls)}"

    # rewards ---------------------------------------------------------------------------------------
    def reward_funcs(self):
        def format_score(text: str, example: dict) -> float:
            return float(format_ok(text))

        def correctness_score(text: str, example: dict) -> float:
            try:
                calls = parse_calls(text)
            except ValueError:  # no or malformed call: a wrong answer, not a checker error
                return 0.0
            verdict = check_calls(calls, json.loads(example["functions"]), json.loads(example["ground_truth"]), example["category"])
            return float(bool(verdict.get("valid")))

        return [reward_function("format", format_score, _example, needs_example=False),
                reward_function("correctness", correctness_score, _example)]

    # Z blocks and check regions --------------------------------------------------------------------
    def z_blocks(self, prompts, completions, **columns):
        blocks = []
        for j in range(len(completions)):
            block = {"format": TEMPLATE}
            example = _example(prompts, j, columns)
            if example is not None:
                try:
                    gold = reference_calls(json.loads(example["ground_truth"]), json.loads(example["functions"]))
                    block["correctness"] = calls_json(gold)
                except Exception:  # an unreadable ground truth has no privileged text to offer
                    pass
            blocks.append(block)
        return blocks

    def check_regions(self, completion, example):
        text = completion_text(completion)
        tags = sorted((p, p + len(tag)) for tag in TAGS for p in tag_positions(text, tag))
        calls = [span for span in tool_call_spans(text) or [] if span[1] > span[0]]
        return {"format": tags, "correctness": calls, "think": think_span(text)}


def _example(prompts: list, j: int, columns: dict) -> dict | None:
    """Row ``j`` of the columns the correctness checker needs (None if TRL did not pass them)."""
    try:
        return {k: columns[k][j] for k in ("functions", "ground_truth", "category")}
    except (KeyError, IndexError, TypeError):
        return None
