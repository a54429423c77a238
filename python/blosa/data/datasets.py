"""The registry of datasets: where each one's files lie in a data dir, its task family and
classes, and load_dataset, which reads and checks them all before it returns."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import blosa
from blosa.data.errors import HOW_TO_GET_DATA, BadLines, DataError, missing_file
from blosa.data.readers import (read_generic, read_labeled, read_sick, read_snli, read_squad,
                                read_sst)

FAMILIES = ("classification", "nli", "relatedness", "selection")
DATA_ENV = "BLOSA_DATA"


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset is. family: "classification" | "nli" | "relatedness" | "selection".
    num_classes: the classes of the head (relatedness: K of the scores 1..K; selection: 0, the
    candidates being each passage's sentences). files: split -> path relative to the data dir.
    folds: True where the dataset has no test split (CR, MPQA, SUBJ): k-fold cross-validation.
    download: the name in blosa.data.download.SOURCES (None: no download)."""
    name: str
    family: str
    num_classes: int
    label_names: tuple[str, ...]
    files: dict[str, str]
    folds: bool
    download: str | None

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family must be one of {FAMILIES}, got {self.family!r}")
        if self.family != "selection" and len(self.label_names) != self.num_classes:
            raise ValueError(f"{self.name}: {len(self.label_names)} label_names for "
                             f"{self.num_classes} classes")


@dataclass
class Dataset:
    """A loaded dataset: splits "train" and optionally "dev", "test" (lists of Sentence, Pair or
    Passage, none empty) and the names of its classes. train_sentences: where the train split
    holds more than whole sentences (SST's phrases), the training file's whole sentences (what
    sentence lengths are measured on); None where the train split is them."""
    spec: DatasetSpec
    splits: dict[str, list]
    label_names: tuple[str, ...]
    train_sentences: list | None = None

    def __repr__(self) -> str:  # the default would print every example
        sizes = ", ".join(f"{split}={len(examples)}" for split, examples in self.splits.items())
        return f"Dataset({self.spec.name!r}, {self.spec.family}, {sizes})"


_SC = "sc/"
_SST = {"train": "sst/train.txt", "dev": "sst/dev.txt", "test": "sst/test.txt"}
_SICK = {split: "sick/SICK.txt" for split in ("train", "dev", "test")}
_NLI = ("entailment", "neutral", "contradiction")
_POLARITY = ("negative", "positive")

DATASETS: dict[str, DatasetSpec] = {spec.name: spec for spec in (
    # TREC's label order in the sc files (checked against the known class sizes, e.g. 86 ABBR
    # questions in the training file); no dev split: the trainer carves one from train.
    DatasetSpec("trec", "classification", 6, ("DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM"),
                {"train": _SC + "TREC.train.all", "test": _SC + "TREC.test.all"}, False, "trec"),
    # Train on every phrase of the training trees; dev and test are whole sentences.
    DatasetSpec("sst1", "classification", 5,
                ("very negative", "negative", "neutral", "positive", "very positive"),
                dict(_SST), False, "sst"),
    DatasetSpec("sst2", "classification", 2, _POLARITY, dict(_SST), False, "sst"),
    DatasetSpec("cr", "classification", 2, _POLARITY, {"train": _SC + "custrev.all"}, True,
                "cr"),
    DatasetSpec("mpqa", "classification", 2, _POLARITY, {"train": _SC + "mpqa.all"}, True,
                "mpqa"),
    DatasetSpec("subj", "classification", 2, ("subjective", "objective"),
                {"train": _SC + "subj.all"}, True, "subj"),
    DatasetSpec("sick", "relatedness", 5, ("1", "2", "3", "4", "5"), dict(_SICK), False,
                "sick"),
    DatasetSpec("sick_e", "nli", 3, _NLI, dict(_SICK), False, "sick"),
    DatasetSpec("snli", "nli", 3, _NLI,
                {split: f"snli_1.0/snli_1.0_{split}.jsonl" for split in ("train", "dev", "test")},
                False, "snli"),
    # No official test set is public: the dev file is the test split, as in the paper.
    DatasetSpec("squad", "selection", 0, (),
                {"train": "squad/train-v1.1.json", "test": "squad/dev-v1.1.json"}, False,
                "squad"),
    # Any `label sentence` files a user names (load_dataset's train= and test=); the classes are
    # the labels of the training file. Without a test file: k-fold cross-validation.
    DatasetSpec("generic", "classification", 0, (), {}, True, None),
)}


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The folder with the datasets (in the layout of the shared data: sc/, sst/, sick/,
    snli_1.0/, squad/): `data_dir` (the CLI's --data-dir), else $BLOSA_DATA, else ../shared/data
    beside the source tree when it is there, else the download cache (`blosa download NAME` fills
    it) when it exists. A named folder that does not exist, or no folder at all, is a DataError
    saying how to get data."""
    for given, what in ((data_dir, "--data-dir"), (os.environ.get(DATA_ENV) or None, DATA_ENV)):
        if given is not None:
            path = Path(given).expanduser()
            if not path.is_dir():
                raise DataError(f"the data folder given by {what} does not exist; "
                                f"{HOW_TO_GET_DATA}", path)
            return path
    beside = Path(blosa.__file__).resolve().parents[2].parent / "shared" / "data"
    if beside.is_dir():
        return beside
    from blosa.data.download import default_cache_dir  # here: it is only needed as a fallback
    cache = default_cache_dir()
    if cache.is_dir():
        return cache
    raise DataError(f"no data folder: none given, ${DATA_ENV} unset, no {beside} and no "
                    f"download cache at {cache}; {HOW_TO_GET_DATA}, or fetch a dataset into the "
                    "cache with `blosa download NAME`")


def _load_labeled(spec: DatasetSpec, paths: dict[str, Path], bad: BadLines) -> dict[str, list]:
    # The official files hold a few label-only lines (CR 4, MPQA 3), counted in the published
    # sizes (3775, 10606): they stay, as examples without tokens.
    return {split: read_labeled(path, bad, spec.num_classes, allow_empty=True)
            for split, path in paths.items()}


# What SST trains on (load_dataset's sst_train): each distinct phrase once, every node of every
# tree, or the whole sentences alone; dev and test are whole sentences either way.
SST_TRAIN = ("distinct", "all", "none")


def _load_sst(spec: DatasetSpec, paths: dict[str, Path], bad: BadLines,
              train: str = "distinct") -> dict[str, list]:
    return {split: read_sst(path, bad, spec.num_classes,
                            phrases=split == "train" and train != "none",
                            duplicates=train == "all")
            for split, path in paths.items()}


def _sst_train_sentences(spec: DatasetSpec, paths: dict[str, Path]) -> list:
    # A second read of the training trees, for their whole sentences (SST-2: the non-neutral
    # ones). Its malformed lines were reported (or raised) by the first read: skipped here.
    return read_sst(paths["train"], BadLines(skip=True), spec.num_classes)


def _load_sick(spec: DatasetSpec, paths: dict[str, Path], bad: BadLines) -> dict[str, list]:
    target = "relatedness" if spec.family == "relatedness" else "entailment"
    by_file: dict[Path, dict[str, list]] = {}
    for path in set(paths.values()):  # one file holds every split: read it once
        by_file[path] = read_sick(path, bad, target)
    return {split: by_file[path][split] for split, path in paths.items()}


def _load_snli(spec: DatasetSpec, paths: dict[str, Path], bad: BadLines) -> dict[str, list]:
    return {split: read_snli(path, bad) for split, path in paths.items()}


def _load_squad(spec: DatasetSpec, paths: dict[str, Path], bad: BadLines) -> dict[str, list]:
    return {split: read_squad(path, bad) for split, path in paths.items()}


# (spec, paths, bad, **options) -> splits; SST's take duplicates=.
_LOADERS: dict[str, Callable[..., dict[str, list]]] = {
    "trec": _load_labeled, "cr": _load_labeled, "mpqa": _load_labeled, "subj": _load_labeled,
    "sst1": _load_sst, "sst2": _load_sst, "sick": _load_sick, "sick_e": _load_sick,
    "snli": _load_snli, "squad": _load_squad,
}


def _check_files(paths: dict[str, Path], download: str | None) -> None:
    # Every file, before reading any: a missing test file must not wait for a long train read.
    for path in paths.values():
        if not path.is_file():
            raise (missing_file(path, download) if not path.exists() else
                   DataError("is not a regular file", path))


def load_dataset(name: str, data_dir: str | os.PathLike | None = None,
                 bad: BadLines | None = None, train: str | os.PathLike | None = None,
                 test: str | os.PathLike | None = None, sst_train: str = "distinct") -> Dataset:
    """Read the dataset `name` (a key of DATASETS) from `data_dir` (None: resolve_data_dir()).

    generic: the `label sentence` files `train` and optionally `test` (paths as given, not under
    data_dir); its classes are the training file's labels (a test label not among them is
    malformed), and without a test file the returned spec has folds=True.
    sst_train (sst1, sst2 only; SST_TRAIN): "distinct", each distinct (phrase, label) of the
    training trees once; "all", every node of every training tree, duplicates kept (read_sst's
    duplicates); "none", no phrases: the training trees' whole sentences alone.
    Malformed lines go to `bad` (default: raise DataError naming file and line). Every file is
    checked to exist first (a missing one: DataError saying how to get the data), and every
    split must hold examples (an empty one: DataError naming its file), so nothing runs on zero
    examples.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    spec = DATASETS[name]
    sst = spec.name in ("sst1", "sst2")
    if sst_train not in SST_TRAIN:
        raise ValueError(f"sst_train= must be one of {SST_TRAIN}, got {sst_train!r}")
    if sst_train != "distinct" and not sst:
        raise ValueError(f"sst_train= is for the SST phrases (sst1, sst2), not {name!r}")
    bad = BadLines() if bad is None else bad
    if name == "generic":
        return _load_generic(spec, bad, train, test)
    if train is not None or test is not None:
        raise ValueError(f"train= and test= name the files of the generic dataset only, not of "
                         f"{name!r} (its files lie under the data dir)")
    root = resolve_data_dir(data_dir)
    paths = {split: root / rel for split, rel in spec.files.items()}
    _check_files(paths, spec.download)
    options = {"train": sst_train} if sst else {}
    splits = _LOADERS[name](spec, paths, bad, **options)
    for split, examples in splits.items():
        if not examples:
            raise DataError(f"the {split} split of {name} has no examples", paths[split])
    return Dataset(spec, splits, spec.label_names,
                   _sst_train_sentences(spec, paths) if sst else None)


def _load_generic(spec: DatasetSpec, bad: BadLines, train, test) -> Dataset:
    if train is None:
        raise ValueError("the generic dataset needs train= (a `label sentence` file)")
    paths = {"train": Path(train)} | ({} if test is None else {"test": Path(test)})
    _check_files(paths, None)
    splits = {}
    splits["train"], names = read_generic(paths["train"], bad)
    if test is not None:
        splits["test"], _ = read_generic(paths["test"], bad, label_names=names)
    loaded = dataclasses.replace(
        spec, num_classes=len(names), label_names=tuple(names),
        files={split: str(path) for split, path in paths.items()}, folds=test is None)
    return Dataset(loaded, splits, loaded.label_names)
