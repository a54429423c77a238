"""GloVe text files ("word v1 ... vd" per line, plain or as a member of a zip): parsing them in
blocks with numpy, with errors that name the file and the line; and the on-disk cache of parsed
vectors (a .npy and a words file under <cache_dir>/vectors, keyed by the file's path, member, size
and mtime), which blosa.data.vectors also uses for the wink package's file."""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from blosa.data.errors import DataError

if TYPE_CHECKING:
    from blosa.data.vectors import WordVectors

# Bump when the cache's format or the parsing changes: old entries are then not read.
CACHE_VERSION = 1
# Text is parsed this many bytes at a time: bounds the memory used beside the result.
BLOCK_BYTES = 64 << 20


# ---- GloVe text ----------------------------------------------------------------------------

def split_zip_spec(spec: str) -> tuple[Path, str | None]:
    """'a.zip:member' -> (a.zip, member) when a.zip is a file; else (spec, None)."""
    head, sep, member = spec.rpartition(".zip:")
    if sep and member and Path(head + ".zip").is_file():
        return Path(head + ".zip"), member
    return Path(spec), None


def zip_member(zf: zipfile.ZipFile, member: str | None, path: Path) -> str:
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


def parse_glove_file(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, "rb") as f:
        return _parse_glove(f, str(path))


def parse_glove_zip(path: Path, member: str) -> tuple[list[str], np.ndarray]:
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

def cached(path: Path, member: str, cache_root: Path, parse, make) -> WordVectors:
    """parse() -> (words, vectors), cached under cache_root/vectors by path, member, size and
    mtime: a changed file gets a new entry. A cache that cannot be written is skipped.
    make(words, vectors) -> the result (blosa.data.vectors.WordVectors, passed in by that module,
    which imports this one)."""
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
                return make(words, vectors)
        except (OSError, ValueError):
            pass  # a damaged entry: parse again and rewrite it
    words, vectors = parse()
    result = make(words, vectors)
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


__all__ = ["split_zip_spec", "zip_member", "parse_glove_file", "parse_glove_zip", "cached"]
