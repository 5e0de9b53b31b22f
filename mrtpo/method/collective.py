"""Keeping processes in step (issue 43): what every process of a multi-process run must agree on before it acts.

Under DDP every backward ends in a gradient all-reduce that all processes must join; under DeepSpeed ZeRO-3 every
layer's forward, and every gather of a partitioned parameter, is a collective too. A process that skips one of them
(nothing to replay, a non-finite loss) leaves the others waiting forever, or pairs their collectives with the wrong
ones. The helpers here agree on a number first; on a single process (torch.distributed not initialised,
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

