"""blosa.data.vocab: building (counts, min_count, order), encoding, save/load."""
import random
from collections import Counter

import pytest

from blosa.data.errors import DataError
from blosa.data.vocab import Vocab
from shared_data import SHARED_DATA, requires_shared_data


def random_sentences(seed, n=200):
    rng = random.Random(seed)
    pool = [f"w{i}" for i in range(60)] + ["The", "the", "THE", "Über", "über", "naïve"]
    return [[rng.choice(pool) for _ in range(rng.randint(0, 12))] for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("min_count", [1, 3, 10])
def test_build_counts_and_order(seed, min_count):
    sentences = random_sentences(seed)
    counts = Counter(t.lower() for s in sentences for t in s)
    vocab = Vocab.build(sentences, min_count=min_count)
    assert vocab.words[:2] == ["<pad>", "<unk>"]
    kept = vocab.words[2:]
    assert set(kept) == {w for w, c in counts.items() if c >= min_count}
    # most frequent first, ties by word
    assert kept == sorted(kept, key=lambda w: (-counts[w], w))
    assert len(vocab) == len(kept) + 2
    # the order of the sentences does not matter
    shuffled = sentences[:]
    random.Random(seed + 100).shuffle(shuffled)
    assert Vocab.build(shuffled, min_count=min_count) == vocab


def test_encode_lowercases_and_maps_unknown_to_unk():
    vocab = Vocab.build([["The", "cat", "sat"], ["the", "dog"]])
    assert vocab.words == ["<pad>", "<unk>", "the", "cat", "dog", "sat"]
    assert vocab.encode(["THE", "Cat", "zebra", "dog", ""]) == [2, 3, Vocab.UNK, 4, Vocab.UNK]
    assert vocab.encode([]) == []
    # a text token spelled like the specials never becomes PAD
    assert vocab.encode(["<pad>", "<unk>", "<PAD>"]) == [Vocab.UNK] * 3
    assert "CAT" in vocab and "zebra" not in vocab


def test_min_count_drops_rare_words_to_unk():
    vocab = Vocab.build([["a", "a", "b"], ["a", "c", "c"]], min_count=2)
    assert vocab.words == ["<pad>", "<unk>", "a", "c"]
    assert vocab.encode(["b", "c"]) == [Vocab.UNK, 3]


def test_build_rejects_bad_arguments():
    with pytest.raises(ValueError, match="min_count"):
        Vocab.build([["a"]], min_count=0)
    with pytest.raises(TypeError, match="token sequences"):
        Vocab.build(["a sentence as a string"])


@pytest.mark.parametrize("seed", [0, 1])
def test_save_load_round_trip(tmp_path, seed):
    vocab = Vocab.build(random_sentences(seed) + [["x\u2028y", "a\x85b", "日本"]])
    path = tmp_path / "vocab.txt"
    vocab.save(path)
    loaded = Vocab.load(path)
    assert loaded == vocab and loaded.words == vocab.words
    lines = path.read_bytes().decode("utf-8").split("\n")
    assert lines[:2] == ["<pad>", "<unk>"] and lines[-1] == ""
    assert len(lines) == len(vocab) + 1
    words = random_sentences(seed)[0]
    assert loaded.encode(words) == vocab.encode(words)


def test_load_accepts_crlf(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"<pad>\r\n<unk>\r\nthe\r\ncat\r\n")
    assert Vocab.load(path).words == ["<pad>", "<unk>", "the", "cat"]


@pytest.mark.parametrize("content, line, match", [
    (b"<unk>\n<pad>\na\n", 1, "must be '<pad>'"),
    (b"<pad>\nfoo\na\n", 2, "must be '<unk>'"),
    (b"<pad>\n<unk>\na\nb\na\n", 5, "repeats line 3"),
    (b"<pad>\n<unk>\na\n\nb\n", 4, "empty"),
    (b"<pad>\n<unk>\nCat\n", 3, "lowercase"),
    (b"<pad>\n<unk>\n\xff\xfe\n", 3, "utf-8"),
])
def test_load_reports_bad_line(tmp_path, content, line, match):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=match) as info:
        Vocab.load(path)
    assert info.value.line == line and info.value.path == str(path)


def test_constructor_checks_words():
    with pytest.raises(ValueError, match="start with"):
        Vocab(["a", "b"])
    with pytest.raises(ValueError, match="twice"):
        Vocab(["<pad>", "<unk>", "a", "a"])
    with pytest.raises(ValueError, match="lowercase"):
        Vocab(["<pad>", "<unk>", "A"])


@requires_shared_data
def test_build_on_trec_training_questions():
    # Independent count of the real file: every question word, lowercased.
    path = SHARED_DATA / "sc" / "TREC.train.all"
    sentences = []
    for raw in path.read_bytes().splitlines():
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        sentences.append(text.split()[1:])
    vocab = Vocab.build(sentences, min_count=2)
    counts = Counter(t.lower() for s in sentences for t in s)
    assert len(vocab) == 2 + sum(c >= 2 for c in counts.values())
    assert vocab.words[2] == counts.most_common(1)[0][0]
    ids = vocab.encode(sentences[0])
    assert [vocab.words[i] if i != Vocab.UNK else None for i in ids] == \
        [t.lower() if counts[t.lower()] >= 2 else None for t in sentences[0]]
