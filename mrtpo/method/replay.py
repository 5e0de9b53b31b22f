"""The leave-one-out replay (PAPER.md §3): one response under P_all and under P_minus[k], the JS profile q.

Used by the trainer (every step) and by the diagnostics (``diagnostics.profile_example``, the playground's
heat maps), so that a heat map shows exactly the q that training uses:

* ``safe_z_blocks``: the Z blocks of every response; a builder that raises never crashes a step;
* ``replay_hidden``: final hidden states predicting each completion token after each prompt;
* ``relevance``: q (B, K, T) — or (B, 1, T) for the joint replay — for the (response, reward) pairs that need it;
* ``teacher_hidden``: OPSD's teacher, the P_all replay alone (hidden states, no JS).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Callable

import torch
from transformers import DynamicCache

from mrtpo.method.collective import agreed_max
from mrtpo.method.contexts import append_section, build_contexts
from mrtpo.method.relevance import js_relevance

logger = logging.getLogger(__name__)
#: prompts (chat messages or strings) -> token ids, exactly as the trainer tokenises training prompts
PromptIds = Callable[[list], list[list[int]]]


def safe_z_blocks(builder, inputs: list[dict], prompts: list, completions: list, completion_ids) -> tuple[list[dict], int | None]:
    """(Z blocks of every response, number of responses the builder failed on, or None when the batch call
    succeeded). A builder that raises (strange text, a broken user formulation) is retried one response at a
    time; the responses it fails on get no blocks (uniform weights). Any per-response builder with a reward
    function's signature goes through here (the check regions of ``Task.read_regions`` too)."""
    columns = {key: [x[key] for x in inputs] for key in inputs[0] if key not in ("prompt", "completion", "completion_ids")}
    try:
        return builder(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns), None
    except Exception:  # retry one response at a time to keep every response the builder can handle
        blocks = []
        for j in range(len(prompts)):
            try:
                blocks += builder(prompts=prompts[j : j + 1], completions=completions[j : j + 1],
                                  completion_ids=completion_ids[j : j + 1],
                                  **{key: values[j : j + 1] for key, values in columns.items()})
            except Exception as exc:
                logger.warning("%s failed on response %d (%s: %s); its weights stay uniform",
                               getattr(builder, "__name__", "z_blocks"), j, type(exc).__name__, exc)
                blocks.append({})
        return blocks, sum(1 for b in blocks if not b)


def replay_hidden(model, prompt_ids: list[list[int]], completion_ids: list[torch.Tensor], pad_id: int,
                  batch_size: int) -> torch.Tensor:
    """Final hidden states (N, T, H) that predict each completion token, for prompt ⊕ completion.

    ``completion_ids``: one 1-D tensor per row, of its own length (T = the longest; a row's positions beyond its
    length are 0). The token prefix that every row's prompt shares (the training prompt P_0 and the section header,
    when the rows replay one prompt's responses) runs once, and its key/value cache serves every row. The rest of
    each row (the rest of its prompt, then its completion) is packed by length: longest first, ``batch_size`` rows
    a batch, right-padded to the batch's longest, so the decoder runs on little padding and positions stay
    consecutive. Position t of a row depends only on the row's own tokens before t (causal attention), so neither
    the shared prefix nor the packing changes a value beyond float reordering. Only the decoder runs; the lm_head
    is applied later in chunks (``js_relevance``).
    """
    device = completion_ids[0].device
    T = max(c.shape[0] for c in completion_ids)
    shared = shared_prefix(prompt_ids)
    first = prompt_ids[0]
    decoder = model.get_decoder()
    prefix = None
    if shared > 0:
        prefix = DynamicCache(config=model.config)
        decoder(input_ids=torch.tensor([first[:shared]], device=device), past_key_values=prefix, use_cache=True)
    rest = [p[shared:] for p in prompt_ids]
    order = sorted(range(len(rest)), key=lambda i: -(len(rest[i]) + completion_ids[i].shape[0]))
    out = None
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = max(len(rest[i]) + completion_ids[i].shape[0] for i in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
        attn = torch.zeros((len(rows), shared + width), dtype=torch.long, device=device)
        attn[:, :shared] = 1
        for r, i in enumerate(rows):
            n = len(rest[i]) + completion_ids[i].shape[0]
            ids[r, :n] = torch.cat([torch.tensor(rest[i], dtype=torch.long, device=device), completion_ids[i]])
            attn[r, shared : shared + n] = 1
        cache = None
        if prefix is not None:
            cache = copy.deepcopy(prefix)
            cache.batch_repeat_interleave(len(rows))
        h = decoder(input_ids=ids, attention_mask=attn, past_key_values=cache, use_cache=cache is not None).last_hidden_state
        if out is None:
            out = h.new_zeros(len(order), T, h.shape[-1])
        for r, i in enumerate(rows):  # the state before completion token t sits at (rest of the prompt) - 1 + t
            n, c = len(rest[i]), completion_ids[i].shape[0]
            out[i, :c] = h[r, n - 1 : n - 1 + c]
    return out


def shared_prefix(prompt_ids: list[list[int]]) -> int:
    """The number of leading tokens every row's prompt shares, which ``replay_hidden`` runs once (0: no prefix
    forward, as for a single row); every row keeps at least one prompt token of its own."""
    if len(prompt_ids) < 2:
        return 0
    shared = min(len(p) for p in prompt_ids) - 1
    first = prompt_ids[0]
    for p in prompt_ids[1:]:
        shared = next((i for i in range(shared) if p[i] != first[i]), shared)
    return max(shared, 0)


def decoder_calls(prompt_ids: list[list[int]], batch_size: int) -> int:
    """The number of decoder forwards ``replay_hidden`` makes for these rows: the shared prefix's, then one per
    ``batch_size`` rows."""
    return (shared_prefix(prompt_ids) > 0) + -(-len(prompt_ids) // batch_size)


def valid_lengths(mask: torch.Tensor) -> list[int]:
    """Per row of a (B, T) completion mask, the number of positions up to its last valid one."""
    positions = torch.arange(1, mask.shape[1] + 1, device=mask.device)
    return (mask.bool() * positions).amax(1).tolist()


def whole_parameters(*params):
    """A context in which ZeRO-3-partitioned parameters are whole (DeepSpeed gathers them, read-only); a no-op
    for ordinary parameters. The replay reads the lm_head's weight directly, which ZeRO-3 leaves as an empty shard.
    A parameter passed twice is gathered once, and one already whole is left alone: with tied embeddings the head is
    the embedding, which ZeRO-3 may hold available, and releasing it on exit would break the embedding's own
    gather bookkeeping (TRL's ``maybe_gather_lm_head_ctx`` guards the same way)."""
    params = list({id(p): p for p in params if p is not None}.values())
    if not any(hasattr(p, "ds_id") for p in params):
        return contextlib.nullcontext()
    import deepspeed
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    partitioned = [p for p in params if getattr(p, "ds_status", None) != ZeroParamStatus.AVAILABLE]
    if not partitioned:
        return contextlib.nullcontext()
    return deepspeed.zero.GatheredParameters(partitioned, modifier_rank=None)


def held(param: torch.Tensor | None) -> torch.Tensor | None:
    """``param`` itself, or under ZeRO-3 a copy of its gathered value. With tied embeddings the head is the
    embedding, whose own forward hooks release it again during the replay's decoder forwards (DeepSpeed's release
    ignores ``whole_parameters``), so the replay reads a copy taken while it is whole."""
    return param.detach().clone() if param is not None and hasattr(param, "ds_id") else param


@torch.no_grad()
def teacher_hidden(model, prompt_ids_of: PromptIds, pad_id: int, prompts: list, blocks: list[dict[str, str]],
                   completion_ids: torch.Tensor, batch_size: int = 16) -> torch.Tensor:
    """(B, T, H) final hidden states of every response replayed under its P_all (``P_0 ⊕`` all its Z blocks; a
    response without blocks under P_0), in eval mode and without gradients: OPSD's teacher. Many processes: as many
    decoder forwards on each as on the one that needs most (:func:`in_step`), as in :func:`relevance`."""
    was_training = model.training
    model.eval()
    try:
        ids = prompt_ids_of([append_section(p, b) for p, b in zip(prompts, blocks)])
        calls = decoder_calls(ids, batch_size)
        agreed = agreed_max(calls, completion_ids.device)
        hidden = replay_hidden(model, ids, list(completion_ids), pad_id, batch_size)
        in_step(model, agreed - calls, pad_id, completion_ids.device)
        return hidden
    finally:
        model.train(was_training)


def in_step(model, missing: int, pad_id: int, device) -> None:
    """``missing`` 1-token decoder forwards whose result is unused: under ZeRO-3 each decoder forward is a
    collective every process must join, so a process with fewer rows to replay keeps in step with the others."""
    dummy = torch.full((1, 1), pad_id, dtype=torch.long, device=device)
    for _ in range(missing):
        model.get_decoder()(input_ids=dummy)


@torch.no_grad()
def relevance(model, prompt_ids_of: PromptIds, pad_id: int, prompts: list, blocks: list[dict[str, str]],
              completion_ids: torch.Tensor, completion_mask: torch.Tensor, need: torch.Tensor, reward_names: list[str],
              joint: bool = False, temperature: float = 1.0, batch_size: int = 16,
              chunk_tokens: int = 1024, precision: torch.dtype | None = None) -> tuple[torch.Tensor, int]:
    """(q, sequences replayed): q (B, K, T), or (B, 1, T) for the joint replay, from leave-one-out replays.

    Per response j: P_all once, plus P_minus[k] for each reward k with ``need[j, k]`` and a Z block (joint:
    P_none once). ``q_t = sqrt(JS(p_t^all || p_t^cmp) / ln 2)`` at ``temperature``. The rows of one training
    prompt's responses are replayed together (``replay_hidden``: their shared prompt prefix once, the rest packed
    ``batch_size`` rows at a time). Non-finite logits give q = 0 (uniform weights). ``precision``: the forwards'
    compute dtype, which sets the rounding floor (``js_relevance``).

    Many processes: every process makes the same number of decoder forwards and the same output-head gather (the
    most any process needs, ``collective.agreed_max``; a process with fewer rows, or none, adds 1-token dummy
    forwards), since under ZeRO-3 each of them is a collective. None at all when no process replays anything.
    """
    B, T = completion_ids.shape
    K = need.shape[1]
    q = torch.zeros(B, 1 if joint else K, T, device=completion_ids.device)
    groups: dict[str, list] = {}  # the rows of one training prompt's responses, which share its prefix
    for j in range(B):
        wanted = [k for k in range(K) if need[j, k] and reward_names[k] in blocks[j]]
        if joint and need[j].any() and blocks[j]:
            wanted = [0]
        if not wanted:
            continue
        ctx = build_contexts(prompts[j], blocks[j])
        rows = groups.setdefault(repr(prompts[j]), [])
        ref = len(rows)
        rows.append((ctx.all, j, None, None))  # (prompt, response j, profile index k, row of j's P_all)
        rows += [(ctx.none if joint else ctx.minus[reward_names[k]], j, k, ref) for k in wanted]
    ids = [prompt_ids_of([r[0] for r in rows]) for rows in groups.values()]
    calls = sum(decoder_calls(i, batch_size) for i in ids)
    # ZeRO-3: every decoder forward, and the head's gather, is a collective that all processes must join; a process
    # with fewer rows to replay makes up the difference with dummy forwards (one process: calls itself, no dummy)
    agreed = agreed_max(calls, completion_ids.device)
    if agreed == 0:
        return q, 0
    was_training = model.training
    model.eval()
    forwards = 0
    try:
        length = valid_lengths(completion_mask)
        response = [completion_ids[j, : length[j]] for j in range(B)]  # no trailing padding to replay
        head = model.get_output_embeddings()
        with whole_parameters(head.weight, head.bias):
            weight, bias = held(head.weight), held(head.bias)
            for rows, prompt_ids in zip(groups.values(), ids):
                h = replay_hidden(model, prompt_ids, [response[j] for _, j, _, _ in rows], pad_id, batch_size)
                forwards += len(rows)
                cmp = [i for i, r in enumerate(rows) if r[2] is not None]
                js = js_relevance(
                    h[[rows[i][3] for i in cmp]], h[cmp], completion_mask[[rows[i][1] for i in cmp], : h.shape[1]],
                    lm_head=weight, lm_head_bias=bias, temperature=temperature, chunk_tokens=chunk_tokens,
                    precision=precision,
                )
                for n, i in enumerate(cmp):
                    q[rows[i][1], rows[i][2], : h.shape[1]] = js[n]
            in_step(model, agreed - calls, pad_id, completion_ids.device)  # with the processes that replay more
        # inf/NaN logits make q NaN; such a response keeps uniform weights (its loss is then skipped)
        q = torch.nan_to_num(q, nan=0.0, posinf=0.0, neginf=0.0)
    finally:
        model.train(was_training)
    return q, forwards
