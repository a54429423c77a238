"""blosa.data.datasets: the registry, load_dataset on every shared dataset and on small
official-format files written to a temporary data dir, resolve_data_dir, and clear errors
for missing files, empty splits and wrong arguments."""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from types import SimpleNamespace

import pytest
from shared_data import SHARED_DATA, requires_shared_data

import blosa.data as data
from blosa.data import datasets as datasets_module
from blosa.data.datasets import DATASETS, Dataset, DatasetSpec, load_dataset, resolve_data_dir
from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Pair, Passage, Sentence


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- the registry


def test_registry():
    assert list(DATASETS) == ["trec", "sst1", "sst2", "cr", "mpqa", "subj", "sick", "sick_e",
                              "snli", "squad", "generic"]
    families = {name: spec.family for name, spec in DATASETS.items()}
    assert families == {"trec": "classification", "sst1": "classification",
                        "sst2": "classification", "cr": "classification",
                        "mpqa": "classification", "subj": "classification",
                        "sick": "relatedness", "sick_e": "nli", "snli": "nli",
                        "squad": "selection", "generic": "classification"}
    assert {n for n, s in DATASETS.items() if s.folds} == {"cr", "mpqa", "subj", "generic"}
    assert {n: s.num_classes for n, s in DATASETS.items() if s.family != "selection"} == {
        "trec": 6, "sst1": 5, "sst2": 2, "cr": 2, "mpqa": 2, "subj": 2, "sick": 5, "sick_e": 3,
        "snli": 3, "generic": 0}
    for name, spec in DATASETS.items():
        assert spec.name == name and isinstance(spec, DatasetSpec)
        if spec.family != "selection":
            assert len(spec.label_names) == spec.num_classes
        assert ("test" in spec.files) != spec.folds or name == "generic"


def test_registry_download_names_exist():
    from blosa.data.download import SOURCES
    names = {spec.download for spec in DATASETS.values()} - {None}
    assert names == {"trec", "sst", "cr", "mpqa", "subj", "sick", "snli", "squad"}
    assert names <= set(SOURCES)
    # Each dataset's files are among the files its download fetches.
    for spec in DATASETS.values():
        if spec.download:
            fetched = {d for f in SOURCES[spec.download].files for d in f.destinations}
            assert set(spec.files.values()) <= fetched, spec.name


def test_package_exports():
    for name in data.__all__:
        assert getattr(data, name) is not None, name
    assert data.load_dataset is load_dataset and data.Sentence is Sentence
    assert {"Vocab", "WordVectors", "load_vectors", "embedding_matrix", "BucketBatchSampler",
            "pad_ids"} <= set(data.__all__)
    # download and tokenize stay in their modules, whose names they share.
    from blosa.data import download, tokenize
    assert callable(download.download) and callable(tokenize.tokenize)


def test_spec_checks_itself():
    with pytest.raises(ValueError, match="family"):
        DatasetSpec("x", "regression", 2, ("a", "b"), {}, False, None)
    with pytest.raises(ValueError, match="label_names"):
        DatasetSpec("x", "classification", 3, ("a", "b"), {}, False, None)


# ---------------------------------------------------------------- the shared datasets

SHARED = {  # name: split sizes (SST training splits are phrases: checked in test_data_readers)
    "trec": {"train": 5452, "test": 500},
    "sst1": {"dev": 1101, "test": 2210},
    "sst2": {"dev": 872, "test": 1821},
    "cr": {"train": 3775}, "mpqa": {"train": 10606}, "subj": {"train": 10000},
    "sick": {"train": 4439, "dev": 495, "test": 4906},
    "sick_e": {"train": 4439, "dev": 495, "test": 4906},
}


@pytest.fixture(scope="module")
def loaded():
    """load_dataset(name) for each shared dataset, once per module (SST reads every phrase)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_dataset(name, SHARED_DATA)
        return cache[name]
    return get


@requires_shared_data
@pytest.mark.parametrize("name", list(SHARED))
def test_load_shared(loaded, name):
    ds = loaded(name)
    spec = DATASETS[name]
    assert isinstance(ds, Dataset) and ds.spec is spec and ds.label_names == spec.label_names
    assert set(ds.splits) == set(spec.files)
    for split, size in SHARED[name].items():
        assert len(ds.splits[split]) == size, split
    for split, examples in ds.splits.items():
        assert examples, split
        if spec.family == "classification":
            assert all(isinstance(e, Sentence) and 0 <= e.label < spec.num_classes
                       for e in examples)
            assert len({e.label for e in examples}) == spec.num_classes  # every class occurs
        elif spec.family == "relatedness":
            assert all(isinstance(e, Pair) and 1.0 <= e.label <= spec.num_classes
                       for e in examples)
        else:
            assert Counter(isinstance(e.label, int) for e in examples) == {True: len(examples)}
            assert {e.label for e in examples} == {0, 1, 2}
    assert repr(ds).startswith(f"Dataset({name!r}")


@requires_shared_data
def test_sst_train_is_phrases_dev_test_sentences(loaded):
    sst1, sst2 = loaded("sst1"), loaded("sst2")
    # Training: every phrase (an order of magnitude more than the 8544 sentences), including
    # the whole sentences; SST-2 keeps the non-neutral ones with binary labels.
    assert len(sst1.splits["train"]) > 10 * 8544
    assert sst2.splits["train"] == [
        Sentence(e.tokens, {0: 0, 1: 0, 3: 1, 4: 1}[e.label]) for e in sst1.splits["train"]
        if e.label != 2]
    # Dev and test: whole sentences, SST-2 the non-neutral ones of SST-1.
    for split in ("dev", "test"):
        assert [e.tokens for e in sst2.splits[split]] == [
            e.tokens for e in sst1.splits[split] if e.label != 2]
    train = set(sst1.splits["train"])
    assert Sentence(("The", "Rock"), 2) in train and Sentence(("The",), 2) in train
    assert sst1.splits["dev"][0].label == 3 and sst1.splits["dev"][0].tokens[0] == "It"


@requires_shared_data
def test_sst_train_sentences(loaded):
    # The whole training sentences beside the phrases (what sentence lengths are measured on);
    # SST-2's without the neutral ones. Other datasets' train split is their sentences.
    assert len(loaded("sst1").train_sentences) == 8544
    assert len(loaded("sst2").train_sentences) == 6920
    assert loaded("sst2").train_sentences[0].tokens[:2] == ("The", "Rock")
    assert loaded("trec").train_sentences is None and loaded("sick").train_sentences is None


def write_sst(root):
    """sst/{train,dev,test}.txt: a tree twice in train, a neutral sentence, a neutral phrase."""
    train = "(3 (2 a) (4 b))\n(3 (2 a) (4 b))\n(2 (2 c) (2 d))\n(1 (0 e) (2 a))\n"
    for split, text in (("train", train), ("dev", "(4 (4 b) (2 a))\n(2 (2 c) (2 a))\n"),
                        ("test", "(0 (0 e) (2 d))\n")):
        write(root / "sst" / f"{split}.txt", text)


@pytest.mark.parametrize("name", ["sst1", "sst2"])
def test_sst_duplicates(tmp_path, name):
    write_sst(tmp_path)
    distinct, every, none = (load_dataset(name, tmp_path, sst_train=mode)
                             for mode in ("distinct", "all", "none"))
    label = {"sst1": lambda k: k, "sst2": {0: 0, 1: 0, 3: 1, 4: 1}.get}[name]
    nodes = [(("a",), 2), (("b",), 4), (("a", "b"), 3)] * 2 + [
        (("c",), 2), (("d",), 2), (("c", "d"), 2), (("e",), 0), (("a",), 2), (("e", "a"), 1)]
    expected = [Sentence(tokens, label(k)) for tokens, k in nodes if label(k) is not None]
    assert every.splits["train"] == expected
    assert distinct.splits["train"] == list(dict.fromkeys(expected))
    for split in ("dev", "test"):  # whole sentences either way
        assert every.splits[split] == distinct.splits[split] == none.splits[split]
    sentences = [Sentence(("a", "b"), label(3)), Sentence(("a", "b"), label(3)),
                 Sentence(("c", "d"), label(2)), Sentence(("e", "a"), label(1))]
    kept = [e for e in sentences if e.label is not None]
    assert every.train_sentences == distinct.train_sentences == none.train_sentences == kept
    assert none.splits["train"] == kept  # no phrases: the whole sentences, repeats kept


def test_sst_train_is_for_sst_only(tmp_path):
    with pytest.raises(ValueError, match="sst_train= is for the SST phrases"):
        load_dataset("trec", tmp_path, sst_train="all")
    with pytest.raises(ValueError, match="sst_train= must be one of"):
        load_dataset("sst2", tmp_path, sst_train="some")


@requires_shared_data
def test_trec_label_names(loaded):
    trec = loaded("trec")
    names = [trec.label_names[e.label] for e in trec.splits["test"][:4]]
    # "How far is it from Denver to Aspen ?", "What county is Modesto , California in ?",
    # "Who was Galileo ?", "What is an atom ?"
    assert names == ["NUM", "LOC", "HUM", "DESC"]


@requires_shared_data
def test_sick_splits_differ_only_in_target(loaded):
    rel, ent = loaded("sick"), loaded("sick_e")
    for split in ("train", "dev", "test"):
        assert [(p.first, p.second) for p in rel.splits[split]] == [
            (p.first, p.second) for p in ent.splits[split]]
    assert rel.splits["train"][0].label == 4.5 and ent.splits["train"][0].label == 1


@requires_shared_data
def test_bad_lines_policy_passes_through(tmp_path):
    # CR's label-only lines are examples: nothing is skipped; a copy with a broken line stops
    # with the line, or skips it.
    bad = BadLines(skip=True)
    assert len(load_dataset("cr", SHARED_DATA, bad).splits["train"]) == 3775 and len(bad) == 0
    lines = (SHARED_DATA / "sc" / "mpqa.all").read_bytes().splitlines()
    lines[9] = b"positive oops"
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "mpqa.all").write_bytes(b"\n".join(lines))
    with pytest.raises(DataError, match=re.escape("mpqa.all:10: ")):
        load_dataset("mpqa", tmp_path)
    bad = BadLines(skip=True)
    assert len(load_dataset("mpqa", tmp_path, bad).splits["train"]) == 10605
    assert [e.line for e in bad.skipped] == [10]


# ---------------------------------------------------------------- generic


def test_generic(tmp_path):
    train = write(tmp_path / "mine" / "train.txt", "spam buy now\nham see you\r\nspam win")
    test = write(tmp_path / "mine" / "test.txt", "ham hello there\nspam cheap pills\n")
    ds = load_dataset("generic", None, train=train, test=test)
    assert ds.label_names == ("ham", "spam") and ds.spec.num_classes == 2
    assert ds.spec.family == "classification" and not ds.spec.folds
    assert ds.spec.files == {"train": str(train), "test": str(test)}
    assert ds.splits["train"] == [Sentence(("buy", "now"), 1), Sentence(("see", "you"), 0),
                                  Sentence(("win",), 1)]
    assert ds.splits["test"] == [Sentence(("hello", "there"), 0),
                                 Sentence(("cheap", "pills"), 1)]
    assert DATASETS["generic"].num_classes == 0  # the registry entry is unchanged
    alone = load_dataset("generic", tmp_path, train=train)
    assert alone.spec.folds and set(alone.splits) == {"train"}
    other = write(tmp_path / "mine" / "other.txt", "ham ok\neggs what\n")
    with pytest.raises(DataError, match=re.escape(f"{other}:2: unknown label 'eggs'")):
        load_dataset("generic", None, train=train, test=other)
    with pytest.raises(ValueError, match="train="):
        load_dataset("generic", tmp_path)
    with pytest.raises(DataError, match="no such file"):
        load_dataset("generic", None, train=train, test=tmp_path / "missing.txt")


# ---------------------------------------------------------------- SNLI and SQuAD (tmp)


def snli_record(gold, s1, s2):
    def parse(s):
        return "( " + " ".join(s.split()) + " )"
    return json.dumps({"gold_label": gold, "sentence1": s1, "sentence2": s2,
                       "sentence1_binary_parse": parse(s1), "sentence2_binary_parse": parse(s2),
                       "annotator_labels": [gold]})


def write_snli(root, splits=("train", "dev", "test")):
    rows = {"train": [("entailment", "A dog runs .", "An animal moves ."),
                      ("-", "Two men talk .", "They argue ."),
                      ("contradiction", "A cat sleeps .", "A cat runs .")],
            "dev": [("neutral", "A man sings .", "A man sings well .")],
            "test": [("-", "X y .", "Z ."), ("entailment", "Kids play .", "Children play .")]}
    for split in splits:
        write(root / "snli_1.0" / f"snli_1.0_{split}.jsonl",
              "\n".join(snli_record(*r) for r in rows[split]) + "\n")


def test_snli_official_layout(tmp_path):
    write_snli(tmp_path)
    ds = load_dataset("snli", tmp_path)
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 2, "dev": 1, "test": 1}
    assert ds.splits["train"] == [Pair(("A", "dog", "runs", "."), ("An", "animal", "moves", "."),
                                       0),
                                  Pair(("A", "cat", "sleeps", "."), ("A", "cat", "runs", "."), 2)]
    assert ds.label_names == ("entailment", "neutral", "contradiction")


def test_missing_file_is_named_before_reading(tmp_path):
    write_snli(tmp_path, splits=("train", "dev"))
    missing = tmp_path / "snli_1.0" / "snli_1.0_test.jsonl"
    with pytest.raises(DataError) as info:
        load_dataset("snli", tmp_path)
    text = str(info.value)
    assert info.value.path == str(missing)
    assert "--data-dir" in text and "BLOSA_DATA" in text and "`blosa download snli`" in text
    with pytest.raises(DataError, match="blosa download trec"):
        load_dataset("trec", tmp_path)


SQUAD_CONTEXT = "Paris is in France. It is the capital! Its river is the Seine. It is old."


def write_squad(path, questions):
    write(path, json.dumps({"version": "1.1", "data": [{"title": "Paris", "paragraphs": [
        {"context": SQUAD_CONTEXT, "qas": [
            {"id": str(i), "question": q,
             "answers": [{"answer_start": SQUAD_CONTEXT.index(a), "text": a}]}
            for i, (q, a) in enumerate(questions)]}]}]}))


def test_squad_official_layout(tmp_path):
    write_squad(tmp_path / "squad" / "train-v1.1.json",
                [("Which river?", "the Seine"), ("Capital of?", "capital")])
    write_squad(tmp_path / "squad" / "dev-v1.1.json", [("Where is Paris?", "France")])
    ds = load_dataset("squad", tmp_path)
    assert set(ds.splits) == {"train", "test"}
    assert [p.answer for p in ds.splits["train"]] == [2, 1]
    assert ds.splits["test"] == [Passage(
        ("Where", "is", "Paris", "?"),
        (("Paris", "is", "in", "France", "."), ("It", "is", "the", "capital", "!"),
         ("Its", "river", "is", "the", "Seine", "."), ("It", "is", "old", ".")), 0)]


# ---------------------------------------------------------------- empty splits, arguments


def test_empty_split_is_an_error(tmp_path):
    header = "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tSemEval_set"
    rows = [header, "1\tA b\tC d\tNEUTRAL\t3\tTRAIN", "2\tA b\tC e\tNEUTRAL\t2\tTEST"]
    sick = write(tmp_path / "sick" / "SICK.txt", "\n".join(rows))
    with pytest.raises(DataError, match="dev split of sick_e has no examples") as info:
        load_dataset("sick_e", tmp_path)
    assert info.value.path == str(sick)
    write(tmp_path / "sc" / "TREC.train.all", "0 What is it ?\n")
    write(tmp_path / "sc" / "TREC.test.all", "\n\n")
    with pytest.raises(DataError, match="no examples"):
        load_dataset("trec", tmp_path)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'sst3'"):
        load_dataset("sst3", tmp_path)
    with pytest.raises(ValueError, match="generic"):
        load_dataset("trec", tmp_path, train=tmp_path / "x.txt")


# ---------------------------------------------------------------- resolve_data_dir


def test_resolve_data_dir_argument_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOSA_DATA", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path) == tmp_path  # the argument wins
    with pytest.raises(DataError, match="BLOSA_DATA"):
        resolve_data_dir()  # $BLOSA_DATA names a folder that is not there
    (tmp_path / "env").mkdir()
    assert resolve_data_dir() == tmp_path / "env"
    with pytest.raises(DataError, match="--data-dir") as info:
        resolve_data_dir(tmp_path / "nope")
    assert info.value.path == str(tmp_path / "nope")


def test_resolve_data_dir_fallbacks(tmp_path, monkeypatch):
    monkeypatch.delenv("BLOSA_DATA", raising=False)
    # A source tree without ../shared/data beside it, and an empty cache location.
    tree = tmp_path / "work" / "repo"
    fake = SimpleNamespace(__file__=str(tree / "python" / "blosa" / "__init__.py"))
    monkeypatch.setattr(datasets_module, "blosa", fake)
    monkeypatch.setenv("BLOSA_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataError) as info:
        resolve_data_dir()
    assert "blosa download" in str(info.value) and "--data-dir" in str(info.value)
    (tmp_path / "cache").mkdir()
    assert resolve_data_dir() == tmp_path / "cache"
    (tmp_path / "work" / "shared" / "data").mkdir(parents=True)
    assert resolve_data_dir() == tmp_path / "work" / "shared" / "data"


@requires_shared_data
def test_resolve_data_dir_finds_the_shared_data(monkeypatch):
    monkeypatch.delenv("BLOSA_DATA", raising=False)
    assert resolve_data_dir() == SHARED_DATA
    assert os.path.samefile(resolve_data_dir(str(SHARED_DATA)), SHARED_DATA)
