"""backend="triton" under torch.autocast (blosa/_autocast.py): mixed float32 and low-precision
inputs are cast to the dtype the op computes in (float32 on CPU through the interpreter,
autocast's dtype on CUDA), bit for bit the kernels' result on inputs given in that dtype,
forward and every gradient (attn_cases.check_autocast)."""
import pytest
import torch

from attn_cases import DIRECTIONS, MASK_KINDS, check_autocast, generator_for
from triton_testing import DEVICE


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_triton_under_autocast(direction, low):
    mask_kind = MASK_KINDS[DIRECTIONS.index(direction)]  # every mask kind once per dtype
    check_autocast("triton", DEVICE, low, direction, mask_kind,
                   generator_for("triton autocast", direction, low))
