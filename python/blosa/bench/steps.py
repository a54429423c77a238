"""What is timed: an inference forward, or a whole training step, and the clock around it."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from blosa.bench.cases import MODES, BuiltCase


def synchronize(device: torch.device | str) -> None:
    """Wait for the device's queued work: a CUDA step's time is its kernels', not its launches'."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def make_optimizer(params) -> torch.optim.Optimizer:
    """Adadelta, the optimizer of the paper's SNLI setup (section 4.1); its two state buffers a
    parameter are part of a training step's memory."""
    return torch.optim.Adadelta(params, lr=0.5)


def make_step(built: BuiltCase, mode: str) -> Callable[[], None]:
    """A function running one `mode` step of the built case and waiting for it to finish.

    "inference": eval mode, no_grad forward of the encoder -> (tokens [B, n, D], sentence [B, D']).
    "train": train mode (dropout on), forward, the head's cross-entropy on the batch's labels,
    backward, and an Adadelta step over the encoder and head.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    encoder, head, x, mask, labels = built.encoder, built.head, built.x, built.mask, built.labels
    device = x.device
    if mode == "inference":
        encoder.eval()

        def infer() -> None:
            with torch.no_grad():
                encoder(x, mask)
            synchronize(device)

        return infer

    encoder.train()
    optimizer = make_optimizer([*encoder.parameters(), *head.parameters()])

    def train() -> None:
        optimizer.zero_grad(set_to_none=True)  # gradients freed between steps, as in a training loop
        _, sentence = encoder(x, mask)
        F.cross_entropy(head(sentence), labels).backward()
        optimizer.step()
        synchronize(device)

    return train


def median_seconds(fn: Callable[[], None], repeats: int) -> float:
    """Median wall time of `repeats` calls of fn (already warmed up): the median, because the
    shared machines this runs on stall now and then, and one stall should not move the number."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
