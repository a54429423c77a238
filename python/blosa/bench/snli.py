"""SNLI-shaped work for the paper's Table 2: random token ids with SNLI's sentence lengths, and the
paper's NLI model around any encoder (built with torch.nn here; blosa.tasks is the trainer's).

Lengths: Bowman et al. (2015), "A large annotated corpus for learning natural language
inference", Table 1 (key statistics of SNLI): premises average 14.1 tokens, hypotheses 8.3. The
paper gives means only, so the shape is ours: a log-normal distribution with those means and a
coefficient of variation of 0.45 (an assumption), rounded to whole tokens, at least 1 and at most
MAX_LENGTH. Only the padded length of a batch (its longest sentence) and the number of real
tokens matter to the time and memory measured.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from blosa.nn import ATTENTION_ENCODERS, build_encoder

TRAIN_PAIRS, TEST_PAIRS = 549_367, 9_824  # SNLI's training and test pairs (the paper, section 4.1)
PREMISE_MEAN, HYPOTHESIS_MEAN = 14.1, 8.3  # Bowman et al. 2015, Table 1
LENGTH_CV = 0.45  # standard deviation / mean: our assumption, not a reported number
MAX_LENGTH = 128
# SNLI's vocabulary is of this order; its exact size only sizes the embedding table (and its
# gradient and Adadelta state: 3 x vocab x 300 floats of a training step's memory).
VOCAB = 40_000
D_EMBED, HEAD_HIDDEN, NUM_CLASSES = 300, 300, 3


def sample_lengths(count: int, mean: float, generator: torch.Generator,
                   cv: float = LENGTH_CV) -> torch.Tensor:
    """Lengths [count] (int64): log-normal with the given mean and coefficient of variation,
    rounded, clamped to [1, MAX_LENGTH]."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not (math.isfinite(mean) and 1 <= mean <= MAX_LENGTH):
        raise ValueError(f"mean must be in [1, {MAX_LENGTH}], got {mean}")
    if not (math.isfinite(cv) and cv >= 0):
        raise ValueError(f"cv must be a finite number >= 0, got {cv}")
    sigma2 = math.log1p(cv * cv)  # a log-normal's mean is exp(mu + sigma^2 / 2)
    mu = math.log(mean) - sigma2 / 2
    lengths = torch.empty(count, dtype=torch.float64).log_normal_(mu, math.sqrt(sigma2), generator=generator)
    return lengths.round().clamp_(1, MAX_LENGTH).long()


def token_batch(lengths: torch.Tensor, vocab: int,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids [B, n] in [1, vocab) right-padded with 0 to n = max(lengths), and mask [B, n]."""
    n = int(lengths.max())
    mask = torch.arange(n)[None, :] < lengths[:, None]
    ids = torch.randint(1, vocab, (len(lengths), n), generator=generator) * mask
    return ids, mask


def pair_batch(B: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """A batch of B SNLI-shaped pairs: premise ids, premise mask, hypothesis ids, hypothesis
    mask ([B, n_p], [B, n_p], [B, n_h], [B, n_h]) and labels [B]."""
    premise = token_batch(sample_lengths(B, PREMISE_MEAN, generator), vocab, generator)
    hypothesis = token_batch(sample_lengths(B, HYPOTHESIS_MEAN, generator), vocab, generator)
    return (*premise, *hypothesis, torch.randint(0, NUM_CLASSES, (B,), generator=generator))


class NLIModel(nn.Module):
    """The paper's NLI model (section 4.1, after Bowman et al. 2016): 300-d embeddings, one
    encoder shared by both sentences, [s1; s2; s1 - s2; s1 * s2] -> 300 (ReLU) -> 3 logits.

    Shapes: premise ids, mask [B, n_p]; hypothesis ids, mask [B, n_h] -> logits [B, 3].
    dropout: of the encoder's dense layers and the head's input (the paper's keep probability
    0.75 is dropout 0.25). backend: the attention encoders' masked_block_attn backend.
    """

    def __init__(self, encoder_name: str, hidden: int, vocab: int = VOCAB, d: int = D_EMBED,
                 dropout: float = 0.25, head_hidden: int = HEAD_HIDDEN, backend: str = "auto"):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        attention = {"backend": backend} if encoder_name in ATTENTION_ENCODERS else {}
        if backend != "auto" and not attention:
            raise ValueError(f"backend={backend!r} needs an attention encoder {ATTENTION_ENCODERS}, "
                             f"got {encoder_name!r}")
        self.encoder = build_encoder(encoder_name, d_in=d, hidden=hidden, dropout=dropout, **attention)
        width = self.encoder.sentence_dim
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(4 * width, head_hidden), nn.ReLU(),
                                  nn.Linear(head_hidden, NUM_CLASSES))

    def forward(self, p_ids, p_mask, h_ids, h_mask) -> torch.Tensor:
        _, s1 = self.encoder(self.embed(p_ids), p_mask)
        _, s2 = self.encoder(self.embed(h_ids), h_mask)
        return self.head(torch.cat([s1, s2, s1 - s2, s1 * s2], dim=-1))
