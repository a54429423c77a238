"""Checkpoints that survive a kill: written to a temporary file, flushed to disk, then renamed
over the old one (a rename is atomic), and read back with torch.load(weights_only=True)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch


def save_atomic(state: dict, path: str | Path) -> None:
    """torch.save(state) to `path` so that a kill at any moment leaves either the old file or the
    new one whole, never a torn one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # The rename itself reaches the disk only with the folder's entry.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load(path: str | Path, device: str | torch.device = "cpu") -> dict:
    """A checkpoint written by save_atomic: tensors, numbers, strings, lists and dicts only."""
    return torch.load(path, map_location=device, weights_only=True)


def rng_state() -> dict:
    """The random number generators a training step draws from (dropout, shuffling in torch)."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
