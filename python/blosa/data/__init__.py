"""blosa.data: reading the benchmark datasets (readers, examples, the DATASETS registry),
vocabulary, word vectors, length-bucketed batching and downloads. Knows nothing of tasks or the
trainer. The functions download and tokenize stay in their modules (blosa.data.download,
blosa.data.tokenize), whose names they share.
"""
from __future__ import annotations

from blosa.data.batching import BucketBatchSampler, pad_ids
from blosa.data.datasets import (DATASETS, Dataset, DatasetSpec, load_dataset,
                                 resolve_data_dir)
from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Pair, Passage, Sentence
from blosa.data.readers import (read_generic, read_labeled, read_sick, read_snli, read_squad,
                                read_sst)
from blosa.data.vectors import WordVectors, embedding_matrix, load_vectors, words_beyond
from blosa.data.vocab import Vocab

__all__ = [
    "BadLines", "BucketBatchSampler", "DATASETS", "DataError", "Dataset", "DatasetSpec", "Pair",
    "Passage", "Sentence", "Vocab", "WordVectors", "embedding_matrix",
    "load_dataset", "load_vectors", "pad_ids", "read_generic", "read_labeled", "read_sick",
    "read_snli", "read_squad", "read_sst", "resolve_data_dir", "words_beyond",
]
