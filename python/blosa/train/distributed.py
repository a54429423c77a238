"""Data-parallel training under torchrun: the process group from torchrun's environment (gloo on
CPU, NCCL on GPU), and the few collectives the trainer needs. One process: every call is a no-op."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Only the main process writes files and prints."""
        return self.rank == 0


def init(device: str) -> World:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1), else one process."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device == "cuda" else "gloo")
    return World(rank, size, local_rank)


def shutdown(world: World) -> None:
    if world.size > 1 and dist.is_initialized():
        dist.destroy_process_group()


def all_sum(world: World, values: list[float]) -> list[float]:
    """Element-wise sum of `values` over the processes."""
    if world.size == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def gather(world: World, items: list) -> list:
    """Every process's `items`, concatenated in rank order (on every process)."""
    if world.size == 1:
        return list(items)
    parts = [None] * world.size
    dist.all_gather_object(parts, items)
    return [x for part in parts for x in part]


def broadcast(world: World, value):
    """Rank 0's `value` on every process."""
    if world.size == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(world: World) -> None:
    if world.size > 1:
        dist.barrier()
