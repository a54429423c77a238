"""Encoders by name: what the trainer and the benchmarks build."""
from __future__ import annotations

import warnings
from functools import partial
from typing import Callable

from torch import nn

from blosa.nn.baselines import BiGRU, BiLSTM, BiSRU, HrchyCNN, MultiCNN, MultiHead
from blosa.nn.biblosan import BiBloSAN
from blosa.nn.disan import DiSAN
from blosa.nn.encoder import SentenceEncoder
from blosa.nn.masked_attention import MaskedAttention
from blosa.nn.stacked_attention import StackedMaskedAttention

ENCODERS: dict[str, Callable[..., SentenceEncoder]] = {
    "biblosan": BiBloSAN,
    "disan": DiSAN,
    "bilstm": BiLSTM,
    "bigru": BiGRU,
    "bisru": BiSRU,
    "multi_cnn": MultiCNN,
    "hrchy_cnn": HrchyCNN,
    "multi_head": MultiHead,
    # Table 3 ablations
    "biblosan_no_local": partial(BiBloSAN, use_local=False),
    "biblosan_no_global": partial(BiBloSAN, use_global=False),
    "biblosan_no_mblosa": partial(BiBloSAN, use_mblosa=False),
    "biblosan_no_mblosa_no_s2t": partial(BiBloSAN, use_mblosa=False, multi_dim_s2t=False),
}

# Old names kept one release: the first release spelled Bi-BloSAN "bibosan", dropping the "l".
DEPRECATED_NAMES = {name.replace("biblosan", "bibosan"): name for name in ENCODERS
                    if name.startswith("biblosan")}

# Encoders whose attention runs on blosa.masked_block_attn (they accept backend= and scale=).
ATTENTION_ENCODERS = tuple(name for name in ENCODERS if name.startswith(("biblosan", "disan")))
# Encoders that split sentences into blocks (their block_len= matters): Bi-BloSAN but its
# ablations without mBloSA.
BLOCK_ENCODERS = tuple(name for name in ENCODERS
                       if name.startswith("biblosan") and "no_mblosa" not in name)


def build_encoder(name: str, d_in: int, hidden: int = 300, **kw) -> SentenceEncoder:
    """Build the encoder `name` (see ENCODERS) for d_in-dim embeddings.

    hidden is the paper's "number of hidden units": per direction for the bidirectional models
    (300 -> the 600D baselines; the paper's 480D Bi-BloSAN is hidden=240), the channel width of
    Hrchy-CNN, 2*hidden/3 filters per width for Multi-CNN and 2*hidden/8 per head for Multi-head.
    Other keywords go to the encoder's constructor (activation, dropout, dropout_at; block_len,
    backend, scale for the attention encoders).
    Returns a module with forward(x [B, n, d_in], mask [B, n] bool or None) -> (tokens [B, n, D],
    sentence [B, D']) and attributes token_dim = D, sentence_dim = D'.
    """
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        warnings.warn(f"encoder name {name!r} is deprecated and will be removed in the next release; "
                      f"use {new!r}", FutureWarning, stacklevel=2)
        name = new
    try:
        factory = ENCODERS[name]
    except KeyError:
        raise ValueError(f"unknown encoder {name!r}; choose from {sorted(ENCODERS)}") from None
    return factory(d_in, hidden, **kw)


def set_backend(model: nn.Module, backend: str) -> nn.Module:
    """Make every masked attention inside `model` use `backend` ("auto", "cpu", "cuda",
    "triton", "reference"); parameters and state_dict are unchanged. Returns model."""
    for m in model.modules():
        if isinstance(m, (MaskedAttention, StackedMaskedAttention)):
            m.backend = backend
    return model
