"""Bi-LSTM and Bi-GRU baselines (torch.nn, cuDNN on GPU) with source2token on top."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from blosa.nn.dropout import Dropout
from blosa.nn.encoder import SentenceEncoder
from blosa.nn.layers import glorot_
from blosa.nn.source2token import Source2Token


def prefix_lengths(mask: torch.Tensor) -> torch.Tensor:
    """Lengths [B] (int64, CPU) of a right-padded mask [B, n]; raises if padding is not at the end."""
    lengths = mask.sum(dim=1)
    prefix = torch.arange(mask.shape[1], device=mask.device)[None, :] < lengths[:, None]
    if not torch.equal(prefix, mask):
        raise ValueError("recurrent encoders need right-padded masks (real tokens first)")
    return lengths.cpu()


class _BiRNN(SentenceEncoder):
    """A one-layer bidirectional RNN over the packed real tokens, then source2token.

    Packing means the padding is never read, so it cannot change a sentence's vector.
    Shapes: x [B, n, d_in], mask [B, n] bool (right-padded) -> tokens [B, n, 2*hidden],
    sentence [B, 2*hidden]. The paper's "600D" models are hidden=300.
    """

    rnn_class: type[nn.RNNBase]

    def __init__(self, d_in: int, hidden: int = 300, activation="relu", dropout: float = 0.0,
                 dropout_at=("dense",)):
        super().__init__(d_in, hidden, dropout, dropout_at)
        self.rnn_dropout = Dropout(self.dense_dropout) if self.dense_dropout > 0 else nn.Identity()
        self.rnn = glorot_(self.rnn_class(d_in, hidden, batch_first=True, bidirectional=True))
        self.s2t = Source2Token(2 * hidden, activation=activation, dropout=self.dense_dropout)
        self.token_dim = self.sentence_dim = 2 * hidden

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = prefix_lengths(mask).clamp(min=1)  # an all-padding row is run on 1 (zero) token
        packed = pack_padded_sequence(self.rnn_dropout(x), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        u, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return u, self.s2t(u, mask)


class BiLSTM(_BiRNN):
    __doc__ = "Bi-LSTM (Graves et al. 2013). " + _BiRNN.__doc__
    rnn_class = nn.LSTM


class BiGRU(_BiRNN):
    __doc__ = "Bi-GRU (Chung et al. 2014). " + _BiRNN.__doc__
    rnn_class = nn.GRU
