"""The Bi-BloSAN model family and the paper's baseline encoders, built on blosa.masked_block_attn.

Every encoder: forward(x [B, n, d_in], mask [B, n] bool, or None for all real) -> (tokens [B, n, D],
sentence [B, D']).
Build them by name with build_encoder (see registry.ENCODERS).
"""
from blosa.nn.baselines import BiGRU, BiLSTM, BiSRU, HrchyCNN, MultiCNN, MultiHead
from blosa.nn.biblosan import BiBloSA, BiBloSAN
from blosa.nn.block_len import block_len_for_dataset, block_len_for_length, resolve_block_len
from blosa.nn.disan import DiSAN
from blosa.nn.encoder import SentenceEncoder
from blosa.nn.masked_attention import MaskedAttention
from blosa.nn.masked_self_attention import MaskedSelfAttention
from blosa.nn.mblosa import MaskedBlockSelfAttention
from blosa.nn.registry import (ATTENTION_ENCODERS, BLOCK_ENCODERS, ENCODERS, build_encoder,
                               set_backend)
from blosa.nn.source2token import Source2Token

__all__ = [
    "ATTENTION_ENCODERS", "BLOCK_ENCODERS", "ENCODERS", "BiBloSA", "BiBloSAN", "BiGRU", "BiLSTM",
    "BiSRU", "DiSAN", "HrchyCNN", "MaskedAttention", "MaskedBlockSelfAttention",
    "MaskedSelfAttention", "MultiCNN", "MultiHead", "SentenceEncoder", "Source2Token",
    "block_len_for_dataset", "block_len_for_length", "build_encoder", "resolve_block_len",
    "set_backend",
]
