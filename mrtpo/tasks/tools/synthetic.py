"""The tiny scale's tool-calling data: a few small-vocabulary tools, queries and their gold calls."""

from __future__ import annotations

import random

from .data import dataset_row

#: tool name -> (description, [(parameter, type, value pool)], query template, argument hidden by hide_value, vague words)
TOOLS = {
    "get_weather": ("weather in a city", [("city", "string", ("paris", "tokyo", "lima", "oslo", "cairo")), ("unit", "string", ("celsius", "fahrenheit"))],
                    "what is the weather in {city} in {unit}", "city", "my city"),
    "set_alarm": ("set an alarm", [("hour", "integer", (6, 7, 8, 9)), ("minute", "integer", (0, 15, 30, 45))],
                  "wake me at {hour} hours and {minute} minutes", "hour", "the usual hour"),
    "send_message": ("send a text message", [("to", "string", ("anna", "ben", "carl", "dora")), ("text", "string", ("hello", "see you soon", "on my way"))],
                     "tell {to} {text}", "to", "my friend"),
    "book_table": ("book a table", [("restaurant", "string", ("luigi", "sakura", "el toro")), ("people", "integer", (2, 3, 4, 5))],
                   "book a table at {restaurant} for {people} people", "restaurant", "our usual place"),
    "convert_currency": ("convert money", [("amount", "integer", (10, 20, 50, 100)), ("source", "string", ("usd", "eur", "yen")), ("target", "string", ("gbp", "chf"))],
                         "convert {amount} {source} to {target}", "amount", "my savings"),
    "play_song": ("play a song", [("title", "string", ("blue sky", "rain", "home")), ("artist", "string", ("nova", "the owls", "kai"))],
                  "play {title} by {artist}", "title", "that song"),
}


def _synthetic_function(name: str) -> dict:
    description, params, *_ = TOOLS[name]
    return {"name": name, "description": description, "parameters": {
        "type": "dict", "properties": {p: {"type": t} for p, t, _ in params}, "required": [p for p, _, _ in params]}}


def synthetic_tools(n: int, seed: int = 0, split: str = "train", hide_value: bool = False, num_tools: int = 3):
    """``n`` queries, each offering ``num_tools`` of ``TOOLS`` (the gold one and distractors) with one gold call,
    in BFCL shapes (category ``multiple``), deterministic in (seed, split, hide_value). ``hide_value``: the
    tool's hidden argument is named vaguely in the query, so its value is only in the reference call."""
    from datasets import Dataset

    rng = random.Random(f"tool-{seed}-{split}-{hide_value}")
    rows = []
    for i in range(n):
        offered = rng.sample(sorted(TOOLS), num_tools)
        name = offered[0]
        rng.shuffle(offered)
        _, params, template, hidden, vague = TOOLS[name]
        args = {p: rng.choice(pool) for p, _, pool in params}
        shown = dict(args, **({hidden: vague} if hide_value else {}))
        messages = [{"role": "user", "content": template.format(**shown)}]
        functions = [_synthetic_function(t) for t in offered]
        ground_truth = [{name: {p: [v] for p, v in args.items()}}]
        rows.append(dataset_row(f"{split}-{seed}-{i}", messages, functions, ground_truth, "multiple", "synthetic", compact=True))
    return Dataset.from_list(rows)
