"""Sampling from a policy as RL samples (and evaluation decodes): prompt token ids through the chat template,
an explicit decoding configuration, and ``sample`` (completions at a temperature, ids and text)."""

from __future__ import annotations

import torch

def prompt_ids(tokenizer, prompt) -> list[int]:
    """Token ids of a prompt as the trainer feeds it: chat messages go through the chat template."""
    if isinstance(prompt, str):
        return tokenizer(prompt, add_special_tokens=False).input_ids
    text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False).input_ids


def decoding_config(temperature: float, max_new_tokens: int, pad_token_id: int, eos_token_id: int) -> "GenerationConfig":
    """The explicit decoding of :func:`sample`: greedy at ``temperature`` 0, else sampling at ``temperature`` alone
    (top-k 0, top-p 1, as TRL samples in training); no other logits processor either way (repetition penalty 1, no
    n-gram blocking, no typical/min-p/epsilon/eta cut, one beam). A checkpoint's ``generation_config.json`` holds its
    chat defaults (Qwen2.5-Instruct: repetition_penalty 1.05, top_k 20, top_p 0.8, temperature 0.7); ``generate``
    would apply them wherever the call leaves a setting unset, so :func:`sample` decodes with this and nothing of
    the checkpoint's. The tiny bases' generation configs set none of these, so their decodings are unchanged."""
    from transformers import GenerationConfig

    neutral = dict(max_new_tokens=max_new_tokens, pad_token_id=pad_token_id, eos_token_id=eos_token_id, num_beams=1,
                   repetition_penalty=1.0, no_repeat_ngram_size=0, typical_p=1.0, epsilon_cutoff=0.0, eta_cutoff=0.0)
    if temperature > 0:
        return GenerationConfig(do_sample=True, temperature=temperature, top_k=0, top_p=1.0, **neutral)
    return GenerationConfig(do_sample=False, **neutral)


@torch.no_grad()
def sample(model, tokenizer, prompts: list, n: int = 1, temperature: float = 1.0, max_new_tokens: int = 96,
           seed: int | None = None) -> list[list[tuple[list[int], str]]]:
    """``n`` completions per prompt at ``temperature`` (no top-k/top-p, as RL samples; greedy at 0): (ids, text) each.

    ids exclude padding and the final eos; text is ``decode(ids, skip_special_tokens=True)`` as TRL decodes. The
    decoding is :func:`decoding_config`'s whatever the checkpoint's ``generation_config.json`` says.
    """
    if seed is not None:
        torch.manual_seed(seed)
    encoded = [prompt_ids(tokenizer, p) for p in prompts for _ in range(n)]
    width = max(len(e) for e in encoded)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    from transformers import GenerationConfig

    config = decoding_config(temperature, max_new_tokens, pad, eos)
    checkpoint_defaults = model.generation_config
    model.generation_config = GenerationConfig()  # generate fills what ``config`` leaves unset from here: nothing
    try:
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:]
    finally:
        model.generation_config = checkpoint_defaults
    results = []
    for row in out.tolist():
        if eos in row:
            row = row[: row.index(eos)]
        row = [t for t in row if t != pad]
        results.append((row, tokenizer.decode(row, skip_special_tokens=True)))
    return [results[i * n : (i + 1) * n] for i in range(len(prompts))]
