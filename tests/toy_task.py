"""A fourth task written the way a user adds one: this file, plus one entry in ``mrtpo.tasks.TASKS``.

"Repeat the word": the answer must be the word the prompt names, inside ``<answer>`` tags. Two binary rewards:
``format`` (the tags) and ``match`` (the word); Z blocks state the layout and the word.
"""

from __future__ import annotations

import random

from mrtpo.tasks.base import Noise, Task, completion_text, reward_function, think_span

WORDS = ("Rome", "Oslo", "Lima", "Paris", "Cairo", "Delhi")


def _example(prompts, j, columns):
    return {"word": columns["word"][j]} if "word" in columns else None


def _answer_span(text: str) -> list[tuple[int, int]]:
    start, end = text.find("<answer>"), text.find("</answer>")
    return [(start + len("<answer>"), end)] if 0 <= start < end else []


class RepeatWord(Task):
    name = "repeat"
    reward_names = ("format", "match")
    answer_rewards = ("match",)
    answer_metric = "match"
    data_description = "synthetic words to repeat"
    tiny_completion_length = 24
    warmup_noise = (Noise("tag", 0.2, ("format",)),)

    def synthetic(self, n: int, seed: int = 0, split: str = "train", hide_word: bool = False):
        from datasets import Dataset

        rng = random.Random(f"repeat-{seed}-{split}-{hide_word}")
        rows = []
        for _ in range(n):
            word = rng.choice(WORDS)
            shown = "the hidden word" if hide_word else word
            rows.append({"prompt": [{"role": "user", "content": f"Repeat {shown} in <answer> tags."}], "word": word})
        return Dataset.from_list(rows)

    def hidden_value_split(self, n: int, seed: int = 0, split: str = "train"):
        return self, self.synthetic(n, seed=seed, split=split, hide_word=True)

    def reference_response(self, example: dict) -> str:
        return f"<think>copy</think><answer>{example['word']}</answer>"

    def reward_funcs(self):
        def format_score(text, example):
            return float(bool(_answer_span(text)))

        def match_score(text, example):
            span = _answer_span(text)
            return float(bool(span) and text[span[0][0] : span[0][1]].strip() == example["word"])

        return [reward_function("format", format_score, _example, needs_example=False),
                reward_function("match", match_score, _example)]

    def z_blocks(self, prompts, completions, **columns):
        return [{"format": "<think>...</think><answer>word</answer>", "match": f"The word is {w}"}
                for w in columns["word"]]

    def check_regions(self, completion, example):
        text = completion_text(completion)
        return {"think": think_span(text), "format": [], "match": _answer_span(text)}
