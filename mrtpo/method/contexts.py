"""Leave-one-out context pairs (PAPER.md §3).

With P_0 the training prompt and Z blocks ``{name_k: Z_k}`` in a fixed order:
``P_all = P_0 ⊕ Z_{K}``, ``P_minus[k] = P_0 ⊕ Z_{K \\ {k}}``, ``P_none = P_0`` (joint replay's control).
P_all and P_minus[k] differ only by Z_k, so comparing them does not also measure "some text was added".
The blocks go into one clearly delimited privileged-information section appended to the prompt: to the
last user message for chat prompts (then the tokenizer's chat template applies as usual), or to the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Prompt = Any  # str, or a list of chat messages {"role", "content"}

SECTION_HEADER = "Verifier information:"


@dataclass
class ReplayContexts:
    """The prompts to replay one response under: all blocks, all but one (per name), and none."""

    all: Prompt
    minus: dict[str, Prompt]
    none: Prompt


def format_section(blocks: dict[str, str], header: str = SECTION_HEADER) -> str:
    """The privileged-information section: a header line then one ``[name] text`` line per block, in order.

    Empty when there are no blocks, so that ``P_0 ⊕ {}`` is exactly P_0.
    """
    if not blocks:
        return ""
    lines = [f"[{name}] {text}" for name, text in blocks.items()]
    return "\n\n" + header + "\n" + "\n".join(lines)


def append_section(prompt: Prompt, blocks: dict[str, str], header: str = SECTION_HEADER) -> Prompt:
    """``P_0 ⊕ blocks``: the prompt with the section appended (a new object; the input is not modified)."""
    section = format_section(blocks, header)
    if isinstance(prompt, str):
        return prompt + section
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt):
        last_user = max((i for i, m in enumerate(prompt) if m.get("role") == "user"), default=len(prompt) - 1)
        messages = [dict(m) for m in prompt]
        content = messages[last_user].get("content", "")
        if not isinstance(content, str):
            raise TypeError("contexts: only text message content is supported (multimodal content is not)")
        messages[last_user]["content"] = content + section
        return messages
    raise TypeError(f"contexts: a prompt must be a string or a list of chat messages, got {type(prompt).__name__}")


def build_contexts(prompt: Prompt, blocks: dict[str, str], header: str = SECTION_HEADER) -> ReplayContexts:
    """P_all, every P_minus[k] (all blocks but k, order kept) and P_none for one prompt and its Z blocks."""
    minus = {k: append_section(prompt, {n: z for n, z in blocks.items() if n != k}, header) for k in blocks}
    return ReplayContexts(all=append_section(prompt, blocks, header), minus=minus, none=append_section(prompt, {}, header))
