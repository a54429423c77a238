"""The word vocabulary: lowercased words to ids, with padding (0) and unknown (1) first."""
from __future__ import annotations

import os
from collections import Counter
from typing import Iterable, Sequence

from blosa.data.errors import DataError

PAD_WORD = "<pad>"
UNK_WORD = "<unk>"


class Vocab:
    """Index -> word in `words`; word -> index by `encode`. Lookups lowercase the token (the
    GloVe 6B vectors are lowercase), and a word not in the vocabulary maps to UNK.

    words[0] is "<pad>" (id PAD = 0, the id that pad_ids puts at padding) and words[1] is
    "<unk>" (UNK = 1). A token spelled "<pad>" in the text maps to UNK, never to PAD, so that
    text cannot take the padding's embedding row."""

    PAD: int = 0
    UNK: int = 1

    def __init__(self, words: Sequence[str]):
        """`words`: index -> word, starting "<pad>", "<unk>"; distinct, lowercase. Use build() or
        load() rather than this."""
        words = list(words)
        if words[:2] != [PAD_WORD, UNK_WORD]:
            raise ValueError(f"words must start with {PAD_WORD!r}, {UNK_WORD!r}, got {words[:2]}")
        for word in words:
            if not isinstance(word, str) or not word or word != word.lower():
                raise ValueError(f"vocabulary words must be non-empty lowercase strings: {word!r}")
        seen: set[str] = set()
        for word in words:
            if word in seen:
                raise ValueError(f"word {word!r} is in words twice")
            seen.add(word)
        self.words = words
        self._index = {word: i for i, word in enumerate(words) if i != self.PAD}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_count: int = 1) -> "Vocab":
        """The vocabulary of the lowercased tokens of `sentences` that occur at least `min_count`
        times, most frequent first, ties in word order: the same data gives the same ids,
        whatever the order of the sentences."""
        if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
            raise ValueError(f"min_count must be an int >= 1, got {min_count!r}")
        counts: Counter[str] = Counter()
        for tokens in sentences:
            if isinstance(tokens, str):  # a str is a sequence of characters: surely a mistake
                raise TypeError(f"sentences must hold token sequences, got the str {tokens!r}")
            counts.update(token.lower() for token in tokens)
        for special in (PAD_WORD, UNK_WORD, ""):
            counts.pop(special, None)
        kept = sorted((w for w, c in counts.items() if c >= min_count),
                      key=lambda w: (-counts[w], w))
        return cls([PAD_WORD, UNK_WORD] + kept)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of `tokens` (lowercased), UNK for a word not in the vocabulary."""
        get, unk = self._index.get, self.UNK
        return [get(token.lower(), unk) for token in tokens]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word.lower() in self._index

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.words == other.words

    def __repr__(self) -> str:
        return f"Vocab({len(self)} words)"

    def save(self, path: str | os.PathLike) -> None:
        """Write one word per line (index order, "<pad>" and "<unk>" first), utf-8, LF."""
        bad = next((w for w in self.words if "\n" in w or "\r" in w), None)
        if bad is not None:  # cannot happen for whitespace-split tokens
            raise ValueError(f"cannot save the word {bad!r}: it has a line break")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(word + "\n" for word in self.words))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocab":
        """Read a vocabulary written by save()."""
        with open(path, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            line = data[:error.start].count(b"\n") + 1
            raise DataError("a vocabulary file must be utf-8", path, line) from None
        # Split on LF only: str.splitlines would also split at characters like U+2028 or U+0085,
        # which a word may hold.
        words = text.split("\n")
        if words and words[-1] == "":
            words.pop()
        # Accept CRLF (a file that went through an editor): save() refuses words with a CR.
        words = [w[:-1] if w.endswith("\r") else w for w in words]
        seen: dict[str, int] = {}
        for lineno, word in enumerate(words, 1):
            if lineno <= 2 and word != (PAD_WORD, UNK_WORD)[lineno - 1]:
                raise DataError(f"line {lineno} must be {(PAD_WORD, UNK_WORD)[lineno - 1]!r}, "
                                f"got {word!r}", path, lineno)
            if not word or word != word.lower():
                raise DataError(f"not a vocabulary word (empty or not lowercase): {word!r}",
                                path, lineno)
            if word in seen:
                raise DataError(f"word {word!r} repeats line {seen[word]}", path, lineno)
            seen[word] = lineno
        if len(words) < 2:
            raise DataError(f"a vocabulary file starts with {PAD_WORD!r} and {UNK_WORD!r} lines",
                            path)
        return cls(words)
