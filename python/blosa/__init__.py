"""blosa: fused, memory-efficient Bi-Directional Block Self-Attention (Bi-BloSAN) for PyTorch."""
from blosa.ops import BACKENDS, masked_block_attn
from blosa.reference import masked_block_attn_ref

__all__ = ["BACKENDS", "masked_block_attn", "masked_block_attn_ref"]
__version__ = "0.1.0"
