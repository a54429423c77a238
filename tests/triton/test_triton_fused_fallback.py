"""Where the fused backward's scratch does not fit in memory, the split backward runs."""
import torch

import blosa_kernels.op as op
from blosa_kernels import configs, masked_block_attn_triton
from triton_testing import DEVICE, HAS_CUDA, make_inputs, run

# Blocks of several query tiles of the fused backward: FUSED_ROWS is 64 on a GPU, 16 in the
# interpreter.
SHAPE, BLOCK_LEN = ((2, 300, 40), 0) if HAS_CUDA else ((2, 40, 6), 20)


def test_fused_backward_without_room_for_its_scratch_runs_the_split_one(monkeypatch):
    monkeypatch.setattr(configs, "SMALL_BLOCK_MAX", 0)  # the row-tile kernels at every size
    inputs = make_inputs(*SHAPE, "holes", True, 29, torch.float32, DEVICE)
    settings = (BLOCK_LEN, "forward", 5.0)
    monkeypatch.setattr(configs, "BACKWARD", "split")
    split = run(masked_block_attn_triton, *inputs, *settings)
    monkeypatch.setattr(configs, "BACKWARD", "fused")
    fused = run(masked_block_attn_triton, *inputs, *settings)
    # The two sum d_dep and d_value in different orders: equal float32 gradients would mean the
    # fused kernels did not run.
    assert not all(torch.equal(a, b) for a, b in zip(fused[1:], split[1:]))

    empty = torch.empty

    def no_room_for_the_scratch(*size, **kwargs):
        shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        if len(shape) == 5:  # [2, U, B, n, d]: the scratch, and nothing else the op allocates
            raise torch.OutOfMemoryError("out of memory (raised by the test)")
        return empty(*size, **kwargs)

    monkeypatch.setattr(op.torch, "empty", no_room_for_the_scratch)
    limited = run(masked_block_attn_triton, *inputs, *settings)
    for a, b in zip(limited, split):
        assert torch.equal(a, b)
