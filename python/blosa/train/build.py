"""Everything a run trains, built from its config: the data splits, the vocabulary, the word
vectors and the task's model around the chosen blosa.nn encoder."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch
from torch import nn

from blosa.data import (BadLines, Vocab, WordVectors, embedding_matrix, load_dataset,
                        load_vectors, words_beyond)
from blosa.data.datasets import Dataset
from blosa.data.examples import Pair, Passage, Sentence
from blosa.nn import build_encoder
from blosa.tasks import Task
from blosa.train.config import TrainConfig
from blosa.train.frozen_rows import FrozenRowsEmbedding
from blosa.train.splits import carve_dev, stratified_folds
from blosa.train.word_dropout import WordDropoutEmbedding


@dataclass
class Splits:
    """The examples a run (or one fold of it) trains, selects and tests on."""
    train: list
    dev: list
    test: list | None
    label_names: tuple[str, ...]


def read_dataset(config: TrainConfig) -> tuple[Dataset, BadLines]:
    """The run's dataset, read and checked; `bad` holds the lines --skip-bad-lines skipped."""
    bad = BadLines(skip=config.skip_bad_lines)
    dataset = load_dataset(config.task, config.data_dir, bad, train=config.train_file,
                           test=config.test_file, sst_train=config.sst_phrases)
    return dataset, bad


def num_folds(config: TrainConfig, dataset: Dataset) -> int:
    """k of k-fold cross-validation: --folds, or 10 for a dataset without a test split."""
    if config.folds:
        return config.folds
    return 10 if "test" not in dataset.splits else 0


def make_splits(config: TrainConfig, dataset: Dataset, fold: int | None = None) -> Splits:
    """train/dev/test of the run, or of fold `fold` of k-fold cross-validation (the fold held
    out is the test split). Where there is no dev split, a seeded, stratified
    config.dev_fraction of train becomes dev."""
    train, dev, test = (dataset.splits.get(s) for s in ("train", "dev", "test"))
    if fold is not None:
        folds = stratified_folds(train, num_folds(config, dataset), config.seed)
        held = set(folds[fold])
        test = [train[i] for i in folds[fold]]
        train = [e for i, e in enumerate(train) if i not in held]
    if dev is None:
        train, dev = carve_dev(train, config.dev_fraction, config.seed)
    return Splits(list(train), list(dev), None if test is None else list(test),
                  dataset.label_names)


def token_lists(example) -> Iterable[tuple[str, ...]]:
    """Every token sequence of an example (the vocabulary is built from them)."""
    if isinstance(example, Sentence):
        yield example.tokens
    elif isinstance(example, Pair):
        yield example.first
        yield example.second
    elif isinstance(example, Passage):
        yield example.question
        yield from example.sentences
    else:
        raise TypeError(f"no tokens known for a {type(example).__name__}")


def build_vocab(train: list) -> Vocab:
    """The vocabulary of the training examples (section 4.1: training-set words)."""
    return Vocab.build(tokens for example in train for tokens in token_lists(example))


def run_vectors(config: TrainConfig) -> WordVectors | None:
    """The run's word vectors (None for --vectors none)."""
    return None if config.vectors == "none" else load_vectors(config.vectors)


def extend_vocab(config: TrainConfig, vocab: Vocab,
                 vectors: WordVectors | None) -> tuple[Vocab, np.ndarray | None]:
    """(the vocabulary the run encodes text with, the frozen rows or None). With config.vocab
    "train", `vocab` (the training words) and None. With "vectors", the training words followed
    by every other word of `vectors`, and those words' vectors [extra words, dim]: the rows
    beyond the trained ones (FrozenRowsEmbedding), so that a word seen only at dev, test or in
    new text reads as its pretrained vector instead of <unk>."""
    if config.vocab != "vectors":
        return vocab, None
    if vectors is None:  # validate() refuses it; a caller that skipped validate()
        raise ValueError("--vocab vectors needs word vectors (--vectors is none)")
    words, rows = words_beyond(vocab, vectors)
    return Vocab(vocab.words + words), rows


def build_embedding(config: TrainConfig, vocab: Vocab, dim: int | None = None,
                    vectors: WordVectors | None = None,
                    frozen: np.ndarray | None = None) -> tuple[nn.Embedding, int]:
    """(embedding, words found in the vectors) of the training words `vocab`. Words found start
    from their vector (`vectors`, else loaded from config.vectors), the others from
    U(-0.05, 0.05), padding and unknown at zero (section 4.1); fine-tuned unless
    config.fine_tune is False, with config.word_dropout in training. With vectors "none", every
    word starts random (dim: its size). `frozen` rows (extend_vocab) follow the trained ones,
    never trained."""
    generator = np.random.default_rng(config.seed)
    if config.vectors == "none":
        matrix = generator.uniform(-0.05, 0.05, (len(vocab), dim or 300)).astype(np.float32)
        matrix[[Vocab.PAD, Vocab.UNK]] = 0
        found = 0
    else:
        matrix, found = embedding_matrix(vocab, vectors or load_vectors(config.vectors),
                                         generator)
    weight, freeze = torch.from_numpy(matrix), not config.fine_tune
    if frozen is None:
        embedding = WordDropoutEmbedding.from_pretrained(weight, freeze=freeze,
                                                         padding_idx=Vocab.PAD)
    else:
        embedding = FrozenRowsEmbedding.with_frozen_rows(weight, frozen, freeze=freeze,
                                                         padding_idx=Vocab.PAD)
    embedding.word_dropout = config.word_dropout
    return embedding, found


def encoder_factory(config: TrainConfig):
    """d_in -> the chosen blosa.nn encoder, with the run's width, dropout and block length."""
    kw = {}
    if config.encoder.startswith("biblosan"):
        kw["block_len"] = encoder_block_len(config)

    def make(d_in: int):
        return build_encoder(config.encoder, d_in, config.hidden, dropout=config.dropout, **kw)

    return make


def build_model(config: TrainConfig, task: Task, vocab: Vocab, dim: int | None = None,
                vectors: WordVectors | None = None,
                frozen: np.ndarray | None = None) -> tuple[nn.Module, int]:
    """(the task's model, words found in the vectors), initialized from config.seed. `vocab`:
    the training words; build_embedding says the rest."""
    torch.manual_seed(config.seed)
    embedding, found = build_embedding(config, vocab, dim, vectors, frozen)
    model = task.build_model(embedding, encoder_factory(config), hidden=config.head_hidden,
                             dropout=config.dropout, activation=config.head_activation)
    return model, found


def build_optimizer(config: TrainConfig, model: nn.Module) -> torch.optim.Optimizer:
    """The run's optimizer. L2 (config.weight_decay) applies to weight matrices only: not to
    biases, gates' vectors or the word embeddings (MODEL_NOTES.md), as the authors' L2 loss
    gamma * sum ||W||^2 / 2 does (its gradient is gamma * W, torch's coupled weight_decay)."""
    decayed, free = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        is_embedding = isinstance(_module_of(model, name), nn.Embedding)
        (decayed if p.dim() >= 2 and not is_embedding else free).append(p)
    groups = [dict(params=decayed, weight_decay=config.weight_decay),
              dict(params=free, weight_decay=0.0)]
    if config.optimizer == "adadelta":
        return torch.optim.Adadelta(groups, lr=config.lr, **adadelta_constants(config))
    if config.optimizer == "adam":
        return torch.optim.Adam(groups, lr=config.lr)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=config.lr)
    return torch.optim.SGD(groups, lr=config.lr)


def adadelta_constants(config: TrainConfig) -> dict[str, float]:
    """Adadelta's rho and eps where the config sets them (else torch's defaults, 0.9 and 1e-6;
    the authors' TensorFlow used 0.95 and 1e-8)."""
    constants = {"rho": config.adadelta_rho, "eps": config.adadelta_eps}
    return {name: value for name, value in constants.items() if value is not None}


def lr_factor(schedule: str, step: int, total_steps: int) -> float:
    """The learning rate of step `step` (0-based) of `total_steps`, as a fraction of --lr:
    constant 1; linear 1 - step / total; cosine (1 + cos(pi * step / total)) / 2. Both decays
    start at 1 and near 0 at the last step."""
    if schedule == "constant":
        return 1.0
    progress = step / total_steps
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine (validate() refused the rest)


def build_scheduler(config: TrainConfig, optimizer: torch.optim.Optimizer,
                    total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """config.lr_schedule over `total_steps` optimizer steps; step it after each one."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(config.lr_schedule, step, total_steps))


def encoder_block_len(config: TrainConfig) -> int | str:
    """Bi-BloSAN's block_len: "auto", an int, or for "dataset" the r resolved from the training
    data (blosa.train.dataset_block_len), which a run's config.json keeps."""
    if config.block_len == "auto":
        return "auto"
    if config.block_len == "dataset":
        if config.block_len_dataset is None:
            raise ValueError("--block-len dataset: the block length is not resolved yet "
                             "(blosa.train.dataset_block_len.resolve_dataset_block_len)")
        return config.block_len_dataset
    return int(config.block_len)


def _module_of(model: nn.Module, parameter_name: str) -> nn.Module:
    return model.get_submodule(parameter_name.rpartition(".")[0])


def described(config: TrainConfig) -> str:
    """One line naming the run's main settings, for the log."""
    c = dataclasses.asdict(config)
    keys = ("task", "encoder", "hidden", "optimizer", "lr", "lr_schedule", "batch_size",
            "dropout", "word_dropout", "weight_decay", "epochs", "max_steps", "seed", "device",
            "amp", "compile")
    return " ".join(f"{k}={c[k]}" for k in keys if c[k] not in (None, False))
