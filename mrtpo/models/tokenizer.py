"""A copy-friendly tokenizer built locally from a text corpus (no hub download).

Why copy-friendly: a policy trained from scratch learns to *copy* a value from the prompt (or from a
verifier's Z block) into its answer only if the value is the same token id wherever it appears. A plain
byte-level BPE over whole text gives ``ĠPeru`` after a space and ``Peru`` after a quote: two ids, and the
prototype policy did not copy. So, before BPE, the text is split into pieces that merges never cross:

* every run of whitespace, every punctuation character (quotes included) and every digit is its own piece
  (digits are single tokens, so a number is copied digit by digit);
* runs of letters/underscores are pieces, and BPE merges only inside them.

Pieces are then mapped to bytes (GPT-2 byte alphabet: no unknown characters, exact round trip).

The response tags are ordinary (non-special) added tokens, one id each: TRL decodes completions with
``skip_special_tokens=True``, which would strip special tags and make every format reward read 0.
Role markers, pad and eos are special tokens. A small Jinja chat template renders conversational prompts.

Load a saved tokenizer with :func:`load_tokenizer`, never ``AutoTokenizer`` directly: see its docstring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

#: response-layout tags: one ordinary token each (they survive ``skip_special_tokens=True``)
TAGS = ("<think>", "</think>", "<answer>", "</answer>", "<tool_call>", "</tool_call>")
PAD, EOS = "<|pad|>", "<|endoftext|>"
ROLES = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")

#: whitespace runs | one digit | one punctuation/symbol char | a run of letters and underscores
SPLIT_PATTERN = r"\s+|\d|[^\w\s]|[^\W\d]+"

#: ``<|role|>\ncontent\n`` per message; an assistant turn ends with eos (what generation stops on).
#: The newline after a block tag is written as an expression: transformers renders with trim_blocks.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}" + EOS + "{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_tokenizer(
    corpus: Iterable[str],
    vocab_size: int = 4096,
    min_frequency: int = 2,
    pad: str = PAD,
    eos: str = EOS,
    markers: tuple[str, ...] = ROLES,
    chat_template: str = CHAT_TEMPLATE,
) -> PreTrainedTokenizerFast:
    """Train the split-then-byte-level BPE on ``corpus`` and wrap it for transformers.

    Deterministic: the same corpus (same order) gives the same vocabulary and merges. ``pad``, ``eos`` and the
    chat ``markers`` are special tokens (ids 0, 1, 2, ... in that order); ``chat_template`` renders messages
    with them (the defaults: this module's small template; ``mrtpo.models.rehearsal`` passes Qwen's ChatML ones).
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(dict.fromkeys([pad, eos, *markers])),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=pad,
        eos_token=eos,
        additional_special_tokens=[m for m in dict.fromkeys(markers) if m not in (pad, eos)],
        clean_up_tokenization_spaces=False,
        padding_side="left",  # generation pads on the left
    )
    fast.chat_template = chat_template
    return fast



#: tokenizer classes that hold no rules of their own: the saved ``tokenizer.json`` is the whole tokenizer
GENERIC_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(path: str | Path):
    """The tokenizer saved in the folder ``path``, as it was trained.

    ``AutoTokenizer`` in transformers 5 chooses the class from the model type of ``config.json`` whenever one is
    registered (``qwen2`` -> ``Qwen2Tokenizer``), even when ``tokenizer_config.json`` declares the generic backend,
    and ``Qwen2Tokenizer`` replaces the saved pre-tokenizer with Qwen2's regex: a tiny base's ``person_id`` (one
    token in its warm-up) came back as ``person`` ``_id``, so RL, evaluation and diagnostics saw identifiers split
    in ways the warm-up never showed. A folder whose ``tokenizer_config.json`` declares a generic class (every
    base this package builds) is loaded with that class from its ``tokenizer.json``; any other folder (a real
    Qwen checkpoint, whose class *is* its rules) with ``AutoTokenizer``.
    """
    from transformers import AutoTokenizer

    config = Path(path) / "tokenizer_config.json"
    declared = json.loads(config.read_text()).get("tokenizer_class") if config.exists() else None
    if declared in GENERIC_CLASSES and (Path(path) / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(path)
    return AutoTokenizer.from_pretrained(path)

