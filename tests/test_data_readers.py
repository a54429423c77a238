"""The readers of blosa.data: on the real shared files (counts from the data README and the
datasets' published sizes, cross-checked by independent parses) and on small malformed files
written to tmp_path (errors name the file and the 1-based line; skip mode counts exactly the bad
lines)."""
from __future__ import annotations

import functools
import json
import random
import re
from collections import Counter

import pytest
from shared_data import SHARED_DATA, requires_shared_data

from blosa.data.errors import BadLines, DataError
from blosa.data.examples import Pair, Passage, Sentence
from blosa.data.readers import (read_generic, read_labeled, read_lines, read_sick, read_snli,
                                read_squad, read_sst, split_sentences)
from blosa.data.tokenize import tokenize

SC = SHARED_DATA / "sc"
SST = SHARED_DATA / "sst"
SICK = SHARED_DATA / "sick" / "SICK.txt"
BINARY = {0: 0, 1: 0, 3: 1, 4: 1}


def write(path, data: bytes | str):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def raises_at(path, line):
    """pytest.raises for a DataError at path:line, checking its attributes and its text."""
    return pytest.raises(DataError, match=re.escape(f"{path}:{line}: "))


# ---------------------------------------------------------------- read_lines


def test_read_lines_decodes_and_strips(tmp_path):
    # utf-8, a latin-1 byte (e9 = é), CRLF, LF, a blank CRLF line, a last line without line end.
    f = write(tmp_path / "mixed.txt",
              b"\xef\xbb\xbfcaf\xc3\xa9\r\ncaf\xe9\nplain\r\n\r\nlast words")
    assert list(read_lines(f)) == [(1, "café"), (2, "café"), (3, "plain"), (4, ""),
                                   (5, "last words")]


def test_read_lines_missing_file_says_how_to_get_data(tmp_path):
    missing = tmp_path / "nope" / "TREC.train.all"
    with pytest.raises(DataError) as info:
        list(read_lines(missing))
    assert info.value.path == str(missing) and info.value.line is None
    text = str(info.value)
    assert text.startswith(f"{missing}: ") and "--data-dir" in text and "BLOSA_DATA" in text


def test_data_error_text_and_pickle():
    import pickle
    err = DataError("bad label", "/x/y.txt", 7)
    assert str(err) == "/x/y.txt:7: bad label" and err.message == "bad label"
    assert str(DataError("gone", "/x/y.txt")) == "/x/y.txt: gone"
    back = pickle.loads(pickle.dumps(err))
    assert (back.message, back.path, back.line, str(back)) == ("bad label", "/x/y.txt", 7,
                                                               str(err))


# ---------------------------------------------------------------- label-sentence files (real)

LABELED = [  # file, classes, rows (data README), label-only lines in the file
    ("TREC.train.all", 6, 5452, 0), ("TREC.test.all", 6, 500, 0),
    ("custrev.all", 2, 3775, 4), ("mpqa.all", 2, 10606, 3), ("subj.all", 2, 10000, 0),
    ("stsa.fine.train", 5, 8544, 0), ("stsa.fine.dev", 5, 1101, 0),
    ("stsa.fine.test", 5, 2210, 0), ("stsa.binary.train", 2, 6920, 0),
    ("stsa.binary.dev", 2, 872, 0), ("stsa.binary.test", 2, 1821, 0),
]


@requires_shared_data
@pytest.mark.parametrize("name, classes, rows, empty", LABELED)
def test_labeled_real_counts(name, classes, rows, empty):
    examples = read_labeled(SC / name, num_classes=classes, allow_empty=True)
    assert len(examples) == rows
    assert all(isinstance(e, Sentence) and 0 <= e.label < classes for e in examples)
    assert sum(not e.tokens for e in examples) == empty
    # An independent count of the labels: the first field of each line.
    raw = Counter(int(line.split(b" ", 1)[0]) for line in (SC / name).read_bytes().splitlines())
    assert Counter(e.label for e in examples) == raw


@requires_shared_data
def test_trec_known_class_sizes_and_first_lines():
    # The coarse class sizes published with the TREC data (Li and Roth), in the sc label order
    # DESC, ENTY, ABBR, HUM, LOC, NUM.
    train = read_labeled(SC / "TREC.train.all", num_classes=6)
    test = read_labeled(SC / "TREC.test.all", num_classes=6)
    assert Counter(e.label for e in train) == dict(enumerate([1162, 1250, 86, 1223, 835, 896]))
    assert Counter(e.label for e in test) == dict(enumerate([138, 94, 9, 65, 81, 113]))
    assert train[0] == Sentence(tuple("How did serfdom develop in and then leave Russia ?"
                                      .split()), 0)
    assert test[2] == Sentence(("Who", "was", "Galileo", "?"), 3)
    assert test[-1] == Sentence(("What", "is", "e-coli", "?"), 0)


@requires_shared_data
def test_latin1_lines_decode():
    # TREC line 66 has the byte f0 (not utf-8): latin-1 makes it one token "sisterðcity".
    trec = read_labeled(SC / "TREC.train.all", num_classes=6)
    assert trec[65].tokens[-5:] == ("sister\u00f0city", "with", "Los", "Angeles", "?")
    assert trec[65].label == 4
    subj = read_labeled(SC / "subj.all", num_classes=2)
    assert subj[20] == Sentence(tuple("si el siglo xxi necesita de héroes , el hombre araña "
                                      "parece haber llegado para quedarse .".split()), 0)
    # Tokens are split at spaces only: latin-1 0x85 and 0xa0 (which str.split would split at)
    # stay inside their tokens. Independently: the bytes of each line split at b" ".
    raw = (SC / "subj.all").read_bytes().splitlines()
    assert [e.tokens for e in subj] == [
        tuple(t.decode("latin-1") if max(t) > 127 else t.decode() for t in line.split()[1:])
        for line in raw]
    assert any("\x85" in t and t != "\x85" for e in subj for t in e.tokens)


@requires_shared_data
def test_cr_mpqa_label_only_lines():
    # custrev.all's lines 769, 1368, 3691 and 3775 (the last) hold a label and no sentence.
    path = SC / "custrev.all"
    with raises_at(path, 769):
        read_labeled(path, num_classes=2)
    bad = BadLines(skip=True)
    assert len(read_labeled(path, bad, num_classes=2)) == 3775 - 4
    assert [e.line for e in bad.skipped] == [769, 1368, 3691, 3775]
    kept = read_labeled(path, num_classes=2, allow_empty=True)
    assert [i + 1 for i, e in enumerate(kept) if not e.tokens] == [769, 1368, 3691, 3775]
    assert kept[-1] == Sentence((), 1)
    bad = BadLines(skip=True)
    read_labeled(SC / "mpqa.all", bad, num_classes=2)
    assert [e.line for e in bad.skipped] == [6415, 7294, 10606]


# ---------------------------------------------------------------- label-sentence files (tmp)


def test_labeled_malformed_lines(tmp_path):
    f = write(tmp_path / "bad.txt",
              "1 good one\nx not a label\n0 fine\r\n7 out of range\n3\n\n-1 negative\n"
              "4 last line")
    with raises_at(f, 2) as info:
        read_labeled(f, num_classes=5)
    assert info.value.line == 2 and info.value.path == str(f)
    bad = BadLines(skip=True)
    got = read_labeled(f, bad, num_classes=5)
    assert got == [Sentence(("good", "one"), 1), Sentence(("fine",), 0),
                   Sentence(("last", "line"), 4)]
    assert len(bad) == 4 and [e.line for e in bad.skipped] == [2, 4, 5, 7]
    assert all(e.path == str(f) for e in bad.skipped)
    # Without num_classes any int >= 0 is a label.
    bad = BadLines(skip=True)
    assert [e.label for e in read_labeled(f, bad)] == [1, 0, 7, 4]
    assert [e.line for e in bad.skipped] == [2, 5, 7]


@pytest.mark.parametrize("content", ["", "\n\r\n  \n"])
def test_labeled_empty_file(tmp_path, content):
    f = write(tmp_path / "empty.txt", content)
    with pytest.raises(DataError, match="no examples") as info:
        read_labeled(f)
    assert info.value.path == str(f)
    with pytest.raises(DataError, match="no examples"):
        read_generic(f)


def test_labeled_all_lines_skipped_is_an_error(tmp_path):
    f = write(tmp_path / "allbad.txt", "a b\nc d\n")
    bad = BadLines(skip=True)
    with pytest.raises(DataError, match="no examples"):
        read_labeled(f, bad)
    assert len(bad) == 2


def test_generic_labels(tmp_path):
    f = write(tmp_path / "g.txt", "pos great film\n10 ten\n2 two\nneg bad\r\npos fine\n")
    examples, names = read_generic(f)
    assert names == ["2", "10", "neg", "pos"]  # integers numerically, then text
    assert [(e.tokens, names[e.label]) for e in examples] == [
        (("great", "film"), "pos"), (("ten",), "10"), (("two",), "2"), (("bad",), "neg"),
        (("fine",), "pos")]
    t = write(tmp_path / "t.txt", "neg so bad\nmeh what\npos good\n")
    with raises_at(t, 2):
        read_generic(t, label_names=names)
    bad = BadLines(skip=True)
    got, same = read_generic(t, bad, label_names=names)
    assert same == names and [e.label for e in got] == [2, 3] and len(bad) == 1
    nosent = write(tmp_path / "n.txt", "a x\nb\n")
    with raises_at(nosent, 2):
        read_generic(nosent)


# ---------------------------------------------------------------- SST trees (real)


def independent_phrases(path) -> set[tuple[str, int]]:
    """Every (phrase, label) of a tree file by string rewriting, not by parsing: replace each
    innermost `(label words)` by its words (recording them) until no bracket is left."""
    text = path.read_text(encoding="utf-8")
    found = set()

    def innermost(m):
        found.add((m.group(2), int(m.group(1))))
        return m.group(2)

    inner = re.compile(r"\((\d) ([^()]*)\)")
    while "(" in text:
        text = inner.sub(innermost, text)
    return found


@pytest.fixture(scope="module")
def sst_train_phrases():
    return read_sst(SST / "train.txt", classes=5, phrases=True)


@pytest.fixture(scope="module")
def sst_sentences():
    """sst_sentences(split, classes): each file read once per module (parsing takes seconds)."""
    return functools.lru_cache(
        lambda split, classes: read_sst(SST / f"{split}.txt", classes=classes))


@requires_shared_data
def test_sst1_train_phrases_match_an_independent_parse(sst_train_phrases):
    got = {(" ".join(e.tokens), e.label) for e in sst_train_phrases}
    assert len(got) == len(sst_train_phrases)  # each distinct (phrase, label) once
    assert got == independent_phrases(SST / "train.txt")
    assert len(sst_train_phrases) > 10 * 8544  # an order of magnitude more than sentences
    # In file order: the first tree's first nodes, post-order.
    assert sst_train_phrases[:3] == [Sentence(("The",), 2), Sentence(("Rock",), 2),
                                     Sentence(("The", "Rock"), 2)]


@requires_shared_data
def test_sst2_dev_phrases_match_an_independent_parse():
    got = read_sst(SST / "dev.txt", classes=2, phrases=True)
    expected = {(p, BINARY[label]) for p, label in independent_phrases(SST / "dev.txt")
                if label != 2}
    assert {(" ".join(e.tokens), e.label) for e in got} == expected
    assert len(got) == len(expected)


@requires_shared_data
@pytest.mark.parametrize("split, rows, binary_rows", [("train", 8544, 6920), ("dev", 1101, 872),
                                                      ("test", 2210, 1821)])
def test_sst_sentences(sst_sentences, split, rows, binary_rows):
    fine, binary = sst_sentences(split, 5), sst_sentences(split, 2)
    assert (len(fine), len(binary)) == (rows, binary_rows)
    # The sentence-level files of the same data (sc/stsa.*) have the same label counts.
    assert Counter(e.label for e in fine) == Counter(
        e.label for e in read_labeled(SC / f"stsa.fine.{split}"))
    assert Counter(e.label for e in binary) == Counter(
        e.label for e in read_labeled(SC / f"stsa.binary.{split}"))
    assert [e.tokens for e in binary] == [e.tokens for e in fine if e.label != 2]


@requires_shared_data
def test_sst_known_sentences(sst_sentences):
    train = sst_sentences("train", 5)
    assert train[0].tokens[:6] == ("The", "Rock", "is", "destined", "to", "be")
    assert train[0].tokens[-3:] == ("Steven", "Segal", ".") and train[0].label == 3
    assert sst_sentences("train", 2)[0] == Sentence(train[0].tokens, 1)
    dev = sst_sentences("dev", 5)
    assert dev[0].tokens[:4] == ("It", "'s", "a", "lovely") and dev[0].label == 3
    assert dev[1].tokens[:3] == ("No", "one", "goes") and dev[1].label == 2
    # utf-8 words decode (no mojibake), U+00A0 inside a token does not split it.
    words = {t for e in dev for t in e.tokens}
    assert {"Amélie", "naiveté"} <= words and not any("Ã" in t for t in words)
    assert "8\u00a01\\/2" in train[4341].tokens
    assert "-LRB-" in {t for e in train for t in e.tokens}  # words are kept as in the file


# ---------------------------------------------------------------- SST trees (tmp)


def test_sst_malformed_trees(tmp_path):
    f = write(tmp_path / "trees.txt",
              "(3 (2 Good) (4 film))\n(3 (2 unclosed) (2 tree)\n(1 (0 Bad) (2 .))\r\n"
              "(7 (2 bad) (2 label))\n\n(2 (2 x) (2 y))) \n(4 (3 very) (4 good))")
    with raises_at(f, 2):
        read_sst(f)
    bad = BadLines(skip=True)
    got = read_sst(f, bad)
    assert [e.label for e in got] == [3, 1, 4] and [e.line for e in bad.skipped] == [2, 4, 6]
    assert got[2].tokens == ("very", "good")  # the last line, without line end
    bad = BadLines(skip=True)
    phrases = read_sst(f, bad, classes=2, phrases=True)
    assert [(e.tokens, e.label) for e in phrases] == [
        (("film",), 1), (("Good", "film"), 1), (("Bad",), 0), (("Bad", "."), 0),
        (("very",), 1), (("good",), 1), (("very", "good"), 1)]


def test_sst_phrases_are_distinct(tmp_path):
    f = write(tmp_path / "dup.txt", "(3 (2 a) (3 b))\n(3 (2 a) (3 b))\n(1 (2 a) (1 b))\n")
    assert read_sst(f, phrases=True) == [
        Sentence(("a",), 2), Sentence(("b",), 3), Sentence(("a", "b"), 3),
        Sentence(("b",), 1), Sentence(("a", "b"), 1)]
    assert len(read_sst(f)) == 3  # whole sentences are not deduplicated


def random_tree(rng, words) -> str:
    """A random binary SST tree over `words` (small vocabularies repeat phrases)."""
    if len(words) == 1:
        return f"({rng.randint(0, 4)} {words[0]})"
    cut = rng.randint(1, len(words) - 1)
    return f"({rng.randint(0, 4)} {random_tree(rng, words[:cut])} {random_tree(rng, words[cut:])})"


def independent_nodes(path) -> Counter:
    """Every node of a tree file as (phrase, label), counted, by the string rewriting of
    independent_phrases (a multiset, not a set)."""
    text = path.read_text(encoding="utf-8")
    found = Counter()

    def innermost(m):
        found[m.group(2), int(m.group(1))] += 1
        return m.group(2)

    inner = re.compile(r"\((\d) ([^()]*)\)")
    while "(" in text:
        text = inner.sub(innermost, text)
    return found


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("classes", [5, 2])
def test_sst_phrases_with_duplicates_keep_every_node(tmp_path, seed, classes):
    rng = random.Random(seed)
    vocab = ["a", "b", "c", "d"][:rng.randint(2, 4)]  # few words: phrases and trees repeat
    lines = [random_tree(rng, [rng.choice(vocab) for _ in range(rng.randint(1, 6))])
             for _ in range(rng.randint(1, 30))]
    f = write(tmp_path / "trees.txt", "\n".join(lines) + "\n")
    keep = {0: 0, 1: 0, 3: 1, 4: 1} if classes == 2 else {k: k for k in range(5)}
    expected = Counter()
    for (phrase, label), count in independent_nodes(f).items():
        if label in keep:
            expected[phrase, keep[label]] += count
    if not expected:  # every node neutral: no SST-2 example (read_sst's DataError)
        with pytest.raises(DataError, match="neutral"):
            read_sst(f, classes=classes, phrases=True, duplicates=True)
        return
    every = read_sst(f, classes=classes, phrases=True, duplicates=True)
    assert Counter((" ".join(e.tokens), e.label) for e in every) == expected
    distinct = read_sst(f, classes=classes, phrases=True)
    assert distinct == list(dict.fromkeys(every))  # the distinct ones, in first-seen order
    # whole sentences are the same either way (duplicates is for phrases)
    assert read_sst(f, classes=classes, duplicates=True) == read_sst(f, classes=classes)


def test_sst_phrases_with_duplicates_in_file_order(tmp_path):
    f = write(tmp_path / "dup.txt", "(3 (2 a) (3 b))\n(3 (2 a) (3 b))\n(1 (2 a) (1 b))\n")
    tree = [Sentence(("a",), 2), Sentence(("b",), 3), Sentence(("a", "b"), 3)]
    assert read_sst(f, phrases=True, duplicates=True) == tree + tree + [
        Sentence(("a",), 2), Sentence(("b",), 1), Sentence(("a", "b"), 1)]
    assert read_sst(f, classes=2, phrases=True, duplicates=True) == [
        Sentence(("b",), 1), Sentence(("a", "b"), 1)] * 2 + [
        Sentence(("b",), 0), Sentence(("a", "b"), 0)]


@requires_shared_data
def test_sst_train_nodes_with_duplicates():
    """Every node of the 8544 training trees (one per "(" in the file: brackets in words are
    -LRB-), SST-2 those not labelled 2: 318,582 and 98,794, against 159,274 and 77,616
    distinct ones (the issue's ~98.8k and ~77k)."""
    text = (SST / "train.txt").read_text(encoding="utf-8")
    fine = read_sst(SST / "train.txt", classes=5, phrases=True, duplicates=True)
    binary = read_sst(SST / "train.txt", classes=2, phrases=True, duplicates=True)
    assert len(fine) == text.count("(") == 318582
    assert len(binary) == sum(text.count(f"({k} ") for k in (0, 1, 3, 4)) == 98794
    assert len(set(binary)) == len(read_sst(SST / "train.txt", classes=2, phrases=True)) == 77616


def test_sst_empty(tmp_path):
    with pytest.raises(DataError, match="no trees"):
        read_sst(write(tmp_path / "e.txt", "\n"))
    neutral = write(tmp_path / "n.txt", "(2 (2 so) (2 so))\n")
    assert len(read_sst(neutral, classes=5)) == 1
    with pytest.raises(DataError, match="neutral"):
        read_sst(neutral, classes=2)
    with pytest.raises(ValueError, match="classes"):
        read_sst(neutral, classes=3)


# ---------------------------------------------------------------- SICK (real)


def independent_sick(path):
    """(split, entailment label, score) per row, by a plain split of each line."""
    lines = path.read_bytes().decode("utf-8").split("\n")
    header = lines[0].rstrip("\r").split("\t")
    col = {name: header.index(name) for name in header}
    rows = []
    for line in lines[1:]:
        f = line.rstrip("\r").split("\t")
        if len(f) > 1:
            rows.append((f[col["SemEval_set"]], f[col["entailment_label"]],
                         float(f[col["relatedness_score"]])))
    return rows


@requires_shared_data
def test_sick_real():
    rel = read_sick(SICK, target="relatedness")
    ent = read_sick(SICK, target="entailment")
    assert {k: len(v) for k, v in rel.items()} == {"train": 4439, "dev": 495, "test": 4906}
    assert {k: len(v) for k, v in ent.items()} == {"train": 4439, "dev": 495, "test": 4906}
    first = rel["train"][0]
    assert first.first == tuple("A group of kids is playing in a yard and an old man is "
                                "standing in the background".split())
    assert first.second[:4] == ("A", "group", "of", "boys") and first.label == 4.5
    assert ent["train"][0].label == 1  # NEUTRAL
    # The last line (no line end at all) is the last training pair.
    assert rel["train"][-1] == Pair(("Three", "dogs", "are", "resting", "on", "a", "sidewalk"),
                                    tuple("The woman with a knife is slicing a pepper".split()),
                                    1.0)
    rows = independent_sick(SICK)
    splits = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}
    for semeval, split in splits.items():
        scores = [s for sp, _, s in rows if sp == semeval]
        assert [p.label for p in rel[split]] == scores
        names = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]
        assert Counter(names[p.label] for p in ent[split]) == Counter(
            e for sp, e, _ in rows if sp == semeval)
    # The published SICK-E training distribution.
    assert Counter(p.label for p in ent["train"]) == {0: 1274, 1: 2524, 2: 641}


# ---------------------------------------------------------------- SICK (tmp)

SICK_HEADER = ("pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\t"
               "SemEval_set")


def test_sick_malformed(tmp_path):
    rows = [SICK_HEADER,
            "1\tA dog runs.\tA dog is running.\tENTAILMENT\t4.8\tTRAIN",
            "2\tA cat sleeps\tA man sings\tNEUTRAL\t6.5\tTRAIN",          # score > 5
            "3\tA cat sleeps\tNo cat sleeps\tCONTRADICTION\t3.1\tTRIAL",
            "4\tonly three\tfields",                                          # field count
            "5\tA b\tC d\tMAYBE\t2\tTEST",                                    # label
            "6\tA b\tC d\tNEUTRAL\tabc\tTEST",                                # score
            "7\tA b\t \tNEUTRAL\t2\tTEST",                                    # empty sentence
            "8\tA b\tC d\tNEUTRAL\t2\tVALID",                                 # split
            "9\tA kid plays\tA child plays\tNEUTRAL\t4\tTEST"]
    f = write(tmp_path / "SICK.txt", "\r\n".join(rows))
    with raises_at(f, 3):
        read_sick(f)
    bad = BadLines(skip=True)
    rel = read_sick(f, bad)
    assert [e.line for e in bad.skipped] == [3, 5, 7, 8, 9]
    assert rel == {"train": [Pair(("A", "dog", "runs", "."), ("A", "dog", "is", "running", "."),
                                  4.8)],
                   "dev": [Pair(("A", "cat", "sleeps"), ("No", "cat", "sleeps"), 3.1)],
                   "test": [Pair(("A", "b"), ("C", "d"), 2.0),
                            Pair(("A", "kid", "plays"), ("A", "child", "plays"), 4.0)]}
    bad = BadLines(skip=True)
    ent = read_sick(f, bad, target="entailment")
    assert [e.line for e in bad.skipped] == [5, 6, 8, 9]  # 6.5 and abc are fine here
    assert [p.label for p in ent["train"] + ent["dev"] + ent["test"]] == [0, 1, 2, 1, 1]


def test_sick_columns_by_name_and_missing_column(tmp_path):
    reordered = write(tmp_path / "r.txt",
                      "SemEval_set\trelatedness_score\tsentence_B\tsentence_A\textra\n"
                      "TEST\t2.5\tsecond one\tfirst one\tx\n")
    assert read_sick(reordered)["test"] == [Pair(("first", "one"), ("second", "one"), 2.5)]
    with pytest.raises(DataError, match="entailment_label") as info:
        read_sick(reordered, target="entailment")
    assert info.value.line == 1 and info.value.path == str(reordered)
    with pytest.raises(DataError, match="no header"):
        read_sick(write(tmp_path / "e.txt", ""))
    with pytest.raises(DataError, match="no examples"):
        read_sick(write(tmp_path / "h.txt", SICK_HEADER + "\n"))


# ---------------------------------------------------------------- SNLI (tmp)


def snli_line(gold, s1, s2, parse1=None, parse2=None):
    record = {"annotator_labels": [gold], "captionID": "x", "gold_label": gold, "pairID": "y",
              "sentence1": s1, "sentence2": s2,
              "sentence1_parse": "(ROOT)", "sentence2_parse": "(ROOT)"}
    if parse1 is not None:
        record["sentence1_binary_parse"] = parse1
    if parse2 is not None:
        record["sentence2_binary_parse"] = parse2
    return json.dumps(record)


def test_snli(tmp_path):
    lines = [
        snli_line("neutral", "A person on a horse jumps over a broken down airplane.",
                  "A person is training his horse for a competition.",
                  "( ( ( A person ) ( on ( a horse ) ) ) ( ( jumps ( over ( a ( broken ( down "
                  "airplane ) ) ) ) ) . ) )",
                  "( ( A person ) ( ( is ( ( training ( his horse ) ) ( for ( a competition"
                  " ) ) ) ) . ) )"),
        snli_line("-", "Two men argue.", "Two men agree."),
        snli_line("contradiction", "Kids don't smile.", "Kids smile.", "", None),  # tokenize()
        '{"gold_label": "entailment", "sentence1": "unterminated',                 # JSON
        snli_line("maybe", "A b.", "C d."),                                        # label
        "",
        snli_line("entailment", "Dogs run.", "", "( Dogs run )", "( )"),           # no tokens
        "[1, 2]",                                                                  # not object
        snli_line("entailment", "A dog runs.", "An animal moves.", "( A ( dog runs ) )",
                  "( An ( animal moves ) )"),
    ]
    f = write(tmp_path / "snli_1.0_dev.jsonl", "\n".join(lines))
    with raises_at(f, 4):
        read_snli(f)
    bad, counts = BadLines(skip=True), {}
    got = read_snli(f, bad, counts=counts)
    assert [e.line for e in bad.skipped] == [4, 5, 7, 8]
    assert counts == {"no_gold": 1}
    assert got == [
        Pair(tuple("A person on a horse jumps over a broken down airplane .".split()),
             tuple("A person is training his horse for a competition .".split()), 1),
        Pair(("Kids", "do", "n't", "smile", "."), ("Kids", "smile", "."), 2),
        Pair(("A", "dog", "runs"), ("An", "animal", "moves"), 0)]
    only_no_gold = write(tmp_path / "ng.jsonl", snli_line("-", "a", "b") + "\n")
    with pytest.raises(DataError, match="no examples"):
        read_snli(only_no_gold)


# ---------------------------------------------------------------- SQuAD (tmp)

CONTEXT = ("Architecturally, the school has a Catholic character. Atop the Main Building's gold "
           "dome is a golden statue of the Virgin Mary. Dr. J. K. Smith built it in the U.S. in "
           "1879, e.g. by hand! Is it a replica of the grotto at Lourdes? \"Yes.\" It is.  ")


def squad_file(tmp_path, questions, context=CONTEXT, name="dev-v1.1.json"):
    data = {"version": "1.1", "data": [{"title": "Notre_Dame", "paragraphs": [
        {"context": context, "qas": questions}]}]}
    return write(tmp_path / name, json.dumps(data, indent=1))


def qa(qid, question, answer_text, context=CONTEXT, start=None):
    start = context.index(answer_text) if start is None else start
    return {"id": qid, "question": question,
            "answers": [{"answer_start": start, "text": answer_text}]}


def test_split_sentences():
    spans = split_sentences(CONTEXT)
    assert [CONTEXT[s:e] for s, e in spans] == [
        "Architecturally, the school has a Catholic character.",
        "Atop the Main Building's gold dome is a golden statue of the Virgin Mary.",
        "Dr. J. K. Smith built it in the U.S. in 1879, e.g. by hand!",
        "Is it a replica of the grotto at Lourdes?",
        "\"Yes.\"",
        "It is."]
    assert split_sentences("  one sentence without end  ") == [(2, 26)]
    assert split_sentences(" \n ") == []
    # No end before a lowercase letter; an end before an uppercase one.
    assert split_sentences("It costs 3.5 dollars. and so on. Next one") == [(0, 32), (33, 41)]


def test_squad_answer_sentence(tmp_path):
    questions = [qa("q1", "What sits atop the Main Building?", "a golden statue"),
                 qa("q2", "When was it built?", "1879"),
                 qa("q3", "Who built it?", "Dr. J. K. Smith"),
                 qa("q4", "What is it a replica of?", "the grotto at Lourdes"),
                 # an answer_start on the blanks before the last sentence: the earlier one
                 qa("q5", "Blank?", " It is.", start=CONTEXT.index(" It is."))]
    f = squad_file(tmp_path, questions)
    got = read_squad(f)
    assert [p.answer for p in got] == [1, 2, 2, 3, 4]
    assert got[0].question == ("What", "sits", "atop", "the", "Main", "Building", "?")
    assert got[0].sentences == tuple(tuple(tokenize(CONTEXT[s:e]))
                                     for s, e in split_sentences(CONTEXT))
    assert got[0].sentences[1][:3] == ("Atop", "the", "Main")
    assert all(isinstance(p, Passage) and p.sentences is got[0].sentences for p in got)


def test_squad_malformed(tmp_path):
    good = qa("ok", "Who built it?", "Smith")
    questions = [good,
                 {"id": "late", "question": "Where?",
                  "answers": [{"answer_start": len(CONTEXT) + 5, "text": "x"}]},
                 {"id": "none", "question": "Why?", "answers": []},
                 {"id": "empty", "question": "  ", "answers": good["answers"]}]
    f = squad_file(tmp_path, questions)
    with pytest.raises(DataError, match=r"qas\[1\] \(id late\)") as info:
        read_squad(f)
    assert info.value.path == str(f)
    bad = BadLines(skip=True)
    assert [p.answer for p in read_squad(f, bad)] == [2]
    assert len(bad) == 3 and all(e.path == str(f) for e in bad.skipped)
    broken = write(tmp_path / "train-v1.1.json", '{"data": [\n  {"title": "x",\n  "par')
    with raises_at(broken, 3) as info:
        read_squad(broken)
    assert "JSON" in str(info.value)
    with pytest.raises(DataError, match="data"):
        read_squad(write(tmp_path / "other.json", '{"version": "1.1"}'))
    with pytest.raises(DataError, match="no examples"):
        read_squad(write(tmp_path / "nothing.json", '{"data": []}'))
    with pytest.raises(DataError, match="no such file"):
        read_squad(tmp_path / "missing.json")


def test_tokenize():
    assert tokenize("A dog's toy isn't here, it's \"there\"... (in the U.S.)") == [
        "A", "dog", "'s", "toy", "is", "n't", "here", ",", "it", "'s", '"', "there", '"', "...",
        "(", "in", "the", "U.S.", ")"]
    assert tokenize("well-known 3.5 1,000 o'clock") == ["well-known", "3.5", "1,000", "o'clock"]
    assert tokenize("  ") == []
