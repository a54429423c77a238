"""Triton kernels of blosa: masked_block_attn forward and backward (see op.py for the ops).

Importing this package imports triton; set TRITON_INTERPRET=1 before that to run the kernels on
CPU tensors (slow, for tests).
"""
from blosa_kernels.op import (
    masked_block_attn_triton,
    masked_block_attn_triton_bwd,
    masked_block_attn_triton_fwd,
)

__all__ = ["masked_block_attn_triton", "masked_block_attn_triton_fwd", "masked_block_attn_triton_bwd"]
