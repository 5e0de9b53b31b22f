"""The tiny scale's instruction-following data: short notes under easy, deterministic registry constraints.

Each prompt asks for a note about a topic under a few constraints, written as the registry describes them;
the reference answer is composed to satisfy all of them, and their arguments are read off it.
"""

from __future__ import annotations

import json
import random
import re

from .checkers import describe

_TOPICS = ("the sea", "a red fox", "my garden", "the moon", "a small town", "winter", "an old train", "the rain")
_WORDS = ("blue", "river", "light", "stone", "song", "bird", "gold", "tree", "wind", "snow", "bread", "lamp")
_START_WORDS = ("today", "here", "yes", "now", "sometimes")
_END_PHRASES = ("Any other questions?", "Is there anything else I can help with?")
_SENTENCES = (
    "I like {t} a lot.",
    "We walk to {t} every day.",
    "There is a quiet path near {t}.",
    "My friend often thinks about {t}.",
    "It feels calm and warm.",
    "The sky is wide and clear.",
)

#: easy, deterministic constraint types used at the tiny scale
EASY_TYPES = (
    "startend:end_checker",
    "length_constraints:nth_paragraph_first_word",
    "keywords:existence",
    "change_case:english_lowercase",
    "punctuation:no_comma",
    "detectable_format:title",
    "detectable_content:postscript",
    "detectable_format:number_bullet_lists",
)
#: the larger pool used when more constraints per prompt are asked for than EASY_TYPES holds
FULL_TYPES = EASY_TYPES + (
    "keywords:frequency",
    "keywords:forbidden_words",
    "detectable_format:number_highlighted_sections",
    "detectable_content:number_placeholders",
    "startend:quotation",
    "language:response_language",
    "length_constraints:number_words",
    "length_constraints:number_sentences",
)


def _compose(types: list[str], rng: random.Random) -> tuple[str, str, list[dict]]:
    """Draw a topic and constraint arguments; return (topic, answer satisfying them all, kwargs per type)."""
    topic = rng.choice(_TOPICS)
    words = list(_WORDS)
    rng.shuffle(words)
    has = set(types)
    args: dict[str, dict] = {t: {} for t in types}

    start = rng.choice(_START_WORDS) if "length_constraints:nth_paragraph_first_word" in has else "so"
    lines = [f"{start.capitalize()} I write about {topic}."]
    if "detectable_format:title" in has:
        lines.append(f"<<{words[0]} and {topic}>>")
    if "keywords:existence" in has:
        args["keywords:existence"] = {"keywords": words[1:3]}
        lines.append(f"It has {words[1]} and {words[2]}.")
    if "keywords:frequency" in has:
        args["keywords:frequency"] = {"keyword": words[3], "frequency": 2, "relation": "at least"}
        lines.append(f"The {words[3]} is next to the {words[3]}.")
    lines.append(rng.choice(_SENTENCES).format(t=topic))
    if "detectable_format:number_highlighted_sections" in has:
        args["detectable_format:number_highlighted_sections"] = {"num_highlights": 2}
        lines.append(f"It is *{words[4]}* and *{words[5]}*.")
    if "detectable_content:number_placeholders" in has:
        args["detectable_content:number_placeholders"] = {"num_placeholders": 2}
        lines.append("Send it to [name] at [place].")
    if "detectable_format:number_bullet_lists" in has:
        n = rng.randint(2, 3)
        args["detectable_format:number_bullet_lists"] = {"num_bullets": n}
        lines += ["* " + rng.choice(_SENTENCES).format(t=topic) for _ in range(n)]
    if "detectable_content:postscript" in has:
        args["detectable_content:postscript"] = {"postscript_marker": "P.S."}
        lines.append(f"P.S. I will write more about {topic}.")
    if "startend:end_checker" in has:
        phrase = rng.choice(_END_PHRASES)
        args["startend:end_checker"] = {"end_phrase": phrase}
        lines.append(phrase)
    answer = "\n".join(lines)  # single newlines: one paragraph, so the first-word checker sees it
    if "change_case:english_lowercase" in has:
        answer = answer.lower()
    if "startend:quotation" in has:
        answer = f'"{answer}"'

    # arguments read off the finished answer, so that the reference satisfies them by construction
    if "length_constraints:nth_paragraph_first_word" in has:
        args["length_constraints:nth_paragraph_first_word"] = {"num_paragraphs": 1, "nth_paragraph": 1, "first_word": start}
    if "keywords:forbidden_words" in has:
        absent = [w for w in words if not re.search(r"\b" + w + r"\b", answer, re.IGNORECASE)]
        args["keywords:forbidden_words"] = {"forbidden_words": absent[:2]}
    if "language:response_language" in has:
        args["language:response_language"] = {"language": "en"}
    if "length_constraints:number_words" in has:
        from if_verifiable.ifeval.instructions_util import count_words

        args["length_constraints:number_words"] = {"num_words": count_words(answer) + rng.randint(3, 10), "relation": "less than"}
    if "length_constraints:number_sentences" in has:
        from if_verifiable.ifeval.instructions_util import count_sentences

        args["length_constraints:number_sentences"] = {"num_sentences": count_sentences(answer) + rng.randint(1, 4), "relation": "less than"}
    return topic, answer, [args[t] for t in types]


def synthetic_if(n: int, seed: int = 0, split: str = "train", num_constraints: tuple[int, int] = (2, 4),
                 hide_value: bool = False):
    """``n`` short multi-constraint prompts, each with a reference that satisfies them, deterministic in (seed,
    split): ``num_constraints`` constraints each (drawn from ``EASY_TYPES``, or ``FULL_TYPES`` when more are asked
    for than it holds). Columns: those of ``data.load_jsonl`` and ``reference`` (the gold response).

    ``hide_value``: the first constraint's description is left out of the prompt, so that it exists
    only in its Z block (the reading test of issue 5); the same prompts are drawn either way.
    """
    from datasets import Dataset

    rng = random.Random(f"if-{seed}-{split}")
    pool = EASY_TYPES if num_constraints[1] <= len(EASY_TYPES) else FULL_TYPES
    rows = []
    for i in range(n):
        types = rng.sample(pool, rng.randint(*num_constraints))
        topic, answer, kws = _compose(types, rng)
        descriptions = [describe(t, kw) for t, kw in zip(types, kws)]
        prompt = f"Write a short note about {topic}. " + " ".join(descriptions[1:] if hide_value else descriptions)
        rows.append(
            {
                "key": f"{split}-{seed}-{i}",
                "prompt": [{"role": "user", "content": prompt}],
                "prompt_text": prompt,
                "instruction_id_list": types,
                "kwargs": json.dumps(kws),
                "reference": f"<think>a note about {topic} with {len(types)} rules</think>\n{answer}",
            }
        )
    return Dataset.from_list(rows)
