"""The matmul bound of a step: its matmul FLOPs, counted on the real module, over this machine's
sgemm rate, measured in the same run.

FLOPs are torch.utils.flop_counter's (FlopCounterMode: 2 m n k a matmul, convolutions and
scaled-dot-product attention alike; the CPU's fused SDPA kernel is added below). What is not a
matmul (elementwise glue, softmax, blosa's masked_block_attn, an LSTM's gates) counts 0: the
bound is the time the step's matmuls alone would take at the rate of one large float32 matmul.
A step's time over it ("x bound") says how far the step is from its matmuls' cost.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count


def _cpu_sdpa(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


# The CPU's flash-attention kernel (a boolean mask takes it) is missing from torch's table.
_CUSTOM = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
           torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward}


def count_flops(fn: Callable[[], object]) -> int:
    """Matmul FLOPs of running fn() once (forward, and backward if fn runs it)."""
    with FlopCounterMode(display=False, custom_mapping=_CUSTOM) as counter:
        fn()
    return counter.get_total_flops()


def train_flops(model: torch.nn.Module, inputs: tuple, labels: torch.Tensor) -> int:
    """FLOPs of a training step's forward and backward (cross-entropy on model(*inputs) [B, C]);
    the gradients it leaves are cleared (the optimizer's update is elementwise: 0)."""
    def step():
        F.cross_entropy(model(*inputs), labels).backward()

    flops = count_flops(step)
    model.zero_grad(set_to_none=True)
    return flops


def inference_flops(model: torch.nn.Module, inputs: tuple) -> int:
    """FLOPs of a no_grad forward."""
    with torch.no_grad():
        return count_flops(lambda: model(*inputs))


def sgemm_gflops(size: int = 1024, seconds: float = 0.25) -> float:
    """This machine's float32 matmul rate (GFLOP/s) on torch's current threads: the best of
    repeated [size x size] @ [size x size] for about `seconds` (the best: a shared machine's
    stalls only ever slow it)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm up
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
        if time.perf_counter() > deadline:
            break
    return 2 * size ** 3 / best / 1e9
