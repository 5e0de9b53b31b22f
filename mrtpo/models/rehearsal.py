"""Rehearsal bases: random-weight policies of the paper models' family, for running the paper-scale path without them.

A rehearsal base is what ``-p model rehearsal`` trains: a Qwen2 decoder (the architecture of Qwen2.5-Coder-7B and
Qwen2.5-7B, the Table 5 models) with their structural choices — grouped-query attention, SwiGLU MLP, RMSNorm
(eps 1e-6), RoPE (theta 1e6), untied embeddings for the 7B shape, weights stored in bf16 as the released
checkpoints are — shrunk so that a step runs on two CPU cores, with random weights (nothing is learned before
RL; what is rehearsed is the code path, not the results). Its tokenizer is a byte-level BPE trained locally on
the task's synthetic text, wrapped with Qwen's ChatML conventions: ``<|im_start|>``/``<|im_end|>`` turns, a
default system turn, ``<|endoftext|>`` as padding and ``<|im_end|>`` ending the assistant turn (what
generation stops on), and the response tags as ordinary added tokens (as ``<tool_call>`` is in Qwen's vocab).

``SHAPES`` holds the shrunk CPU shape and ``0.5b`` (Qwen2.5-0.5B's shape, for a GPU from scratch); ``vocab_size``
can pad the embedding to Qwen's 151,936 rows so that the lm_head and the JS replay cost what they cost at scale.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from mrtpo.models.tokenizer import TAGS, build_tokenizer

#: bump when the build changes (invalidates cached rehearsal bases)
REHEARSAL_VERSION = 1
#: Qwen2.5's embedding rows (151,665 tokens padded to a multiple of 128)
QWEN_VOCAB = 151_936
QWEN_PAD, QWEN_EOS, IM_START = "<|endoftext|>", "<|im_end|>", "<|im_start|>"
DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

#: ChatML as the Qwen2.5 instruct models render it (without the tool-list branch: tasks put tools in the
#: system text): a default system turn when none is given, ``<|im_start|>role\ncontent<|im_end|>\n`` per turn
QWEN_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\n" + DEFAULT_SYSTEM + "<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: decoder shapes; ratios of the 7B (28 query heads over 4 KV heads, intermediate/hidden ~5.3, untied) kept
#: where a tiny width allows; ``0.5b`` is Qwen2.5-0.5B's shape (14/2 heads, tied embeddings)
SHAPES: dict[str, dict] = {
    "cpu": dict(hidden_size=128, intermediate_size=672, num_hidden_layers=2, num_attention_heads=8,
                num_key_value_heads=2, tie_word_embeddings=False),
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, tie_word_embeddings=True),
}


def rehearsal_tokenizer(corpus: list[str], vocab_size: int = 2048):
    """Byte-level BPE trained on ``corpus`` with Qwen's special tokens and chat template."""
    return build_tokenizer(corpus, vocab_size=vocab_size, min_frequency=2, pad=QWEN_PAD, eos=QWEN_EOS,
                           markers=(IM_START, QWEN_EOS), chat_template=QWEN_CHAT_TEMPLATE)


def _corpus(task, n: int = 256) -> list[str]:
    """The text the tokenizer is trained on: synthetic prompts (chat-rendered without markers) and references."""
    data = task.synthetic(n, seed=0, split="train")
    texts = []
    for row in data:
        texts += [m["content"] for m in row["prompt"]] if isinstance(row["prompt"], list) else [row["prompt"]]
        texts.append(task.reference_response(row))
    return texts + [DEFAULT_SYSTEM, " ".join(TAGS)]


def build_rehearsal(task, out: str | Path, shape: str = "cpu", vocab_size: int | None = None, seed: int = 0) -> Path:
    """Write a random-weight rehearsal base (model in bf16 + tokenizer) for ``task`` to ``out``.

    ``vocab_size``: embedding rows (default: the tokenizer's size; ``QWEN_VOCAB`` for the paper's lm_head cost;
    ids past the tokenizer are then never decodable, so generation must suppress them: ``suppressed_ids``).
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"unknown rehearsal shape {shape!r}; known: {', '.join(SHAPES)}")
    out = Path(out)
    tok = rehearsal_tokenizer(_corpus(task))
    rows = vocab_size or len(tok)
    if rows < len(tok):
        raise ValueError(f"vocab_size={rows} is smaller than the tokenizer ({len(tok)} tokens)")
    config = Qwen2Config(
        vocab_size=rows, max_position_embeddings=32_768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
        hidden_act="silu", use_sliding_window=False, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=None, **SHAPES[shape],
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)  # stored in bf16, as Qwen's checkpoints are
    model.generation_config = GenerationConfig(
        eos_token_id=[tok.eos_token_id, tok.pad_token_id], pad_token_id=tok.pad_token_id, do_sample=True,
    )
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "mrtpo_rehearsal.json").write_text(json.dumps(
        {"version": REHEARSAL_VERSION, "task": task.name, "shape": shape, "vocab_size": rows, "seed": seed,
         "tokenizer_size": len(tok), "parameters": sum(p.numel() for p in model.parameters())}, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def rehearsal_base(task) -> Path:
    """The cached CPU-shape rehearsal base of a task (``$MRTPO_CACHE/models/rehearsal-<task>-v<version>``), built
    when absent (seconds)."""
    from mrtpo.files.folders import locked
    from mrtpo.files.paths import cache_root

    path = cache_root() / "models" / f"rehearsal-{task.name}-v{REHEARSAL_VERSION}"
    if not (path / "mrtpo_rehearsal.json").exists():
        with locked(cache_root() / "work" / f"{path.name}.lock"):  # processes of one job: one builds, the others wait
            if not (path / "mrtpo_rehearsal.json").exists():
                build_rehearsal(task, path)
    return path


def suppressed_ids(path: str | Path) -> list[int]:
    """Embedding rows of a rehearsal base that its tokenizer cannot decode (generation must never sample them)."""
    info = json.loads((Path(path) / "mrtpo_rehearsal.json").read_text())
    return list(range(info["tokenizer_size"], info["vocab_size"]))
