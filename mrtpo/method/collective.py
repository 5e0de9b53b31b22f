"""Keeping processes in step (issue 43): what every process of a multi-process run must agree on before it acts.

Under DDP every backward ends in a gradient all-reduce that all processes must join; under DeepSpeed ZeRO-3 every
layer's forward, and every gather of a partitioned parameter, is a collective too. A process that skips one of them
(nothing to replay, a non-finite loss) leaves the others waiting forever, or pairs their collectives with the wrong
ones. The helpers here agree on a number or a flag first; on a single process (torch.distributed not initialised,
or a world of one) they return the local value and communicate nothing, so single-process runs are unchanged.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def several_processes() -> bool:
    """True when torch.distributed is initialised with more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def agreed_max(value: int, device: torch.device | str = "cpu") -> int:
    """The largest ``value`` over all processes (all-reduce MAX); ``value`` itself on a single process.

    ``device``: where the all-reduce runs (a CUDA device under NCCL; the CPU under gloo)."""
    if not several_processes():
        return int(value)
    if dist.get_backend() == "nccl" and torch.device(device).type != "cuda":
        device = torch.device("cuda", torch.cuda.current_device())  # NCCL reduces CUDA tensors only
    t = torch.tensor([int(value)], dtype=torch.long, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def agreed_any(flag: bool, device: torch.device | str = "cpu") -> bool:
    """True on every process when ``flag`` is true on any process."""
    return agreed_max(int(bool(flag)), device) > 0


def connected_zero(model: torch.nn.Module, like: torch.Tensor) -> torch.Tensor:
    """A zero loss (shaped, typed and placed like ``like``) whose graph reaches every trainable parameter of
    ``model``, each with a zero gradient.

    Its backward fires the same gradient hooks (DDP's bucket all-reduces) as a real loss, so a process that drops
    a micro-batch still joins the others' gradient reductions, of zeros; the graph starts at the parameters, not at
    a forward that may hold inf/NaN activations (0 * NaN would be NaN), so the zeros are exact. Under ZeRO-3 the
    parameters are empty shards outside a forward, so the graph starts at a 1-token forward instead, which every
    process makes together (the skip is agreed): its zeros are exact while the weights are finite."""
    if any(hasattr(p, "ds_id") for p in model.parameters()):
        logits = model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=like.device)).logits
        total = (logits.float().sum() * 0).to(like.dtype)
        return total.expand_as(like).clone() if like.dim() else total
    total = like.new_zeros(())
    for p in model.parameters():
        if p.requires_grad:
            total = total + (p * 0).sum().to(total.dtype)
    return total.expand_as(like).clone() if like.dim() else total


def finite_or_skipped(model: torch.nn.Module, loss: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(the loss to back-propagate, whether this micro-batch is skipped): ``loss`` itself when finite.

    One process: a non-finite loss becomes a zero with no graph (its backward adds nothing; no parameter gets a
    gradient from it). Many processes: the processes agree first (any non-finite loss skips the micro-batch on all
    of them) and every process returns ``connected_zero``, so that all run the same backward and the same gradient
    all-reduce, of zeros, and all report the skip. (The parameters then hold zero gradients rather than none: an
    optimizer with momentum still moves them, identically on every process.)"""
    if not several_processes():
        skipped = not torch.isfinite(loss).all()
        return (torch.zeros_like(loss).requires_grad_() if skipped else loss), bool(skipped)
    # a process that skipped alone, with a graph-free zero, would leave the others' gradient all-reduce waiting forever
    skipped = agreed_any(not torch.isfinite(loss).all(), loss.device)
    return (connected_zero(model, loss) if skipped else loss), skipped
