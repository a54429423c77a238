"""Where and when a measurement was made: the machine, the commit, the date."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def machine(device: str) -> str:
    """The GPU's name, or the CPU's model, its cores and the threads torch uses."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    with open("/proc/cpuinfo") as cpuinfo:
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")),
                     platform.processor())
    threads = torch.get_num_threads()
    return f"{model}, {os.cpu_count()} cores, {threads} thread{'s' if threads > 1 else ''}"


def commit() -> str:
    """`git rev-parse --short HEAD` of the checkout this package is in ("unknown" outside one)."""
    try:
        run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True)
    except OSError:  # no git
        return "unknown"
    return run.stdout.strip() or "unknown"


def today() -> str:
    return str(datetime.date.today())
