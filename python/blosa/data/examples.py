"""One example of each task family. Tokens are tuples of str exactly as in the file (not
lowercased: the vocabulary lowercases lookups), so examples are hashable and immutable."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sentence:
    """A sentence (or SST phrase) and its class index (classification)."""
    tokens: tuple[str, ...]
    label: int


@dataclass(frozen=True)
class Pair:
    """A sentence pair. label: the class index for NLI / SICK-E (entailment, neutral,
    contradiction -> 0, 1, 2), the gold score (float in [1, K]) for relatedness."""
    first: tuple[str, ...]
    second: tuple[str, ...]
    label: int | float


@dataclass(frozen=True)
class Passage:
    """A question, the sentences of its passage, and the index of the sentence that holds the
    answer span (the sentence-selection form of SQuAD, the paper's Appendix B)."""
    question: tuple[str, ...]
    sentences: tuple[tuple[str, ...], ...]
    answer: int

    def __post_init__(self):
        if not 0 <= self.answer < len(self.sentences):
            raise ValueError(f"answer index {self.answer} is outside the passage's "
                             f"{len(self.sentences)} sentences")
