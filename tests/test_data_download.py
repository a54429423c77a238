"""blosa.data.download against a loopback HTTP server: files land in the cache layout, digests
are checked before use (a mismatch leaves nothing), present files are not fetched again, zips
are unpacked; and the pinned table agrees with the shared data and the dataset registry."""
import hashlib
import http.server
import shutil
import threading
import zipfile
from functools import partial

import pytest

from blosa.data.download import (SOURCES, DownloadError, Source, SourceFile, default_cache_dir,
                                 download)
from shared_data import SHARED_DATA, requires_shared_data


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, requests, **kwargs):
        self.requests = requests
        super().__init__(*args, **kwargs)

    def do_GET(self):
        self.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture
def server(tmp_path):
    """(base URL, served folder, list of requested paths)."""
    served = tmp_path / "served"
    served.mkdir()
    requests = []
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(Handler, requests=requests, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", served, requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def leftovers(root):
    """Temporary files left anywhere under root."""
    return [p for p in root.rglob(".*") if p.is_file() and p.parent.name != ".blosa-download"]


def make_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@requires_shared_data
def test_plain_files_land_in_the_layout_and_are_not_fetched_twice(server, tmp_path):
    base, served, requests = server
    names = ["TREC.test.all", "custrev.all"]
    for name in names:  # copies in tmp_path only
        shutil.copy(SHARED_DATA / "sc" / name, served / name)
    sources = {"two": Source(tuple(SourceFile(f"{base}/{n}", sha256(served / n), dest=f"sc/{n}")
                                   for n in names))}
    cache = tmp_path / "cache"
    assert download("two", cache, sources=sources, progress=False) == cache
    for name in names:
        assert (cache / "sc" / name).read_bytes() == (SHARED_DATA / "sc" / name).read_bytes()
    assert sorted(requests) == [f"/{n}" for n in sorted(names)]
    assert not leftovers(cache)

    download("two", cache, sources=sources, progress=False)
    assert len(requests) == 2  # both present and verified: nothing fetched

    (cache / "sc" / "custrev.all").write_bytes(b"damaged")
    download("two", cache, sources=sources, progress=True)  # with a progress bar this time
    assert requests[2:] == ["/custrev.all"]
    assert sha256(cache / "sc" / "custrev.all") == sha256(served / "custrev.all")


@requires_shared_data
def test_downloaded_trec_loads_with_load_dataset(server, tmp_path):
    datasets = pytest.importorskip("blosa.data.datasets")
    base, served, _ = server
    pinned = SOURCES["trec"].files
    for file in pinned:
        shutil.copy(SHARED_DATA / file.dest, served / file.dest.split("/")[-1])
    # The real table's digests, served from the loopback copies.
    sources = {"trec": Source(tuple(
        SourceFile(f"{base}/{f.dest.split('/')[-1]}", f.sha256, dest=f.dest) for f in pinned))}
    root = download("trec", tmp_path / "cache", sources=sources, progress=False)
    data = datasets.load_dataset("trec", root)
    assert len(data.splits["train"]) == 5452 and len(data.splits["test"]) == 500


def test_wrong_digest_raises_and_leaves_nothing(server, tmp_path):
    base, served, requests = server
    (served / "data.txt").write_bytes(b"1 some text\n")
    wrong = hashlib.sha256(b"something else").hexdigest()
    sources = {"bad": Source((SourceFile(f"{base}/data.txt", wrong, dest="sc/data.txt"),))}
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as info:
        download("bad", cache, sources=sources, progress=False)
    message = str(info.value)
    assert f"{base}/data.txt" in message and wrong in message
    assert sha256(served / "data.txt") in message
    assert requests == ["/data.txt"]
    assert not (cache / "sc" / "data.txt").exists()
    assert not leftovers(cache)

    # a zip with a wrong digest: not unpacked at all
    make_zip(served / "a.zip", {"x/train.txt": "a"})
    sources = {"badzip": Source((SourceFile(f"{base}/a.zip", wrong,
                                            members=(("x/train.txt", "z/train.txt"),)),))}
    with pytest.raises(DownloadError, match="SHA-256 mismatch"):
        download("badzip", cache, sources=sources, progress=False)
    assert not (cache / "z").exists() and not leftovers(cache)


def test_zip_members_are_unpacked_and_kept_track_of(server, tmp_path):
    base, served, requests = server
    members = {"trees/train.txt": "(3 (2 good) (3 film))\n", "trees/dev.txt": "(1 bad)\n",
               "trees/test.txt": "(2 so-so)\n", "README.txt": "not unpacked"}
    archive = make_zip(served / "trees.zip", members)
    sources = {"sst": Source((SourceFile(
        f"{base}/trees.zip", sha256(archive),
        members=tuple((f"trees/{s}.txt", f"sst/{s}.txt") for s in ("train", "dev", "test"))),))}
    cache = tmp_path / "cache"
    download("sst", cache, sources=sources, progress=False)
    for split in ("train", "dev", "test"):
        assert (cache / "sst" / f"{split}.txt").read_text() == members[f"trees/{split}.txt"]
    assert sorted(p.name for p in (cache / "sst").iterdir()) == ["dev.txt", "test.txt",
                                                                 "train.txt"]
    assert not list(cache.glob("*.zip")) and not leftovers(cache)
    assert requests == ["/trees.zip"]

    download("sst", cache, sources=sources, progress=False)
    assert requests == ["/trees.zip"]  # members present with the digests they were unpacked with
    (cache / "sst" / "dev.txt").unlink()
    download("sst", cache, sources=sources, progress=False)
    assert requests == ["/trees.zip"] * 2
    assert (cache / "sst" / "dev.txt").read_text() == "(1 bad)\n"
    (cache / "sst" / "test.txt").write_text("edited")
    download("sst", cache, sources=sources, progress=False)
    assert len(requests) == 3 and (cache / "sst" / "test.txt").read_text() == "(2 so-so)\n"


def test_zip_member_in_another_folder_and_missing_member(server, tmp_path):
    base, served, _ = server
    archive = make_zip(served / "sick.zip", {"SICK/SICK.txt": "pair_ID\n", "__MACOSX/SICK.txt": ""})
    sources = {"s": Source((SourceFile(f"{base}/sick.zip", sha256(archive),
                                       members=(("SICK.txt", "sick/SICK.txt"),)),))}
    download("s", tmp_path / "c", sources=sources, progress=False)
    assert (tmp_path / "c" / "sick" / "SICK.txt").read_text() == "pair_ID\n"
    sources = {"m": Source((SourceFile(f"{base}/sick.zip", sha256(archive),
                                       members=(("other.txt", "x/other.txt"),)),))}
    with pytest.raises(DownloadError, match="no member 'other.txt'"):
        download("m", tmp_path / "c", sources=sources, progress=False)
    assert not leftovers(tmp_path / "c")


def test_unpinned_source_is_refused_before_any_request(server, tmp_path):
    base, served, requests = server
    (served / "f.txt").write_text("x")
    sources = {"u": Source((SourceFile(f"{base}/f.txt", None, dest="u/f.txt"),))}
    with pytest.raises(DownloadError, match="no pinned SHA-256"):
        download("u", tmp_path / "c", sources=sources, progress=False)
    assert requests == [] and not (tmp_path / "c" / "u").exists()


def test_http_error_and_unknown_name(server, tmp_path):
    base, _, _ = server
    sources = {"gone": Source((SourceFile(f"{base}/missing.txt", "0" * 64, dest="g/m.txt"),))}
    with pytest.raises(DownloadError, match="404") as info:
        download("gone", tmp_path / "c", sources=sources, progress=False)
    assert info.value.path == f"{base}/missing.txt"
    assert not leftovers(tmp_path / "c")
    with pytest.raises(ValueError, match="no download source for dataset 'nope'"):
        download("nope", tmp_path / "c")


def test_source_file_checks_its_fields():
    with pytest.raises(ValueError, match="either dest"):
        SourceFile("http://x/a", "0" * 64)
    with pytest.raises(ValueError, match="either dest"):
        SourceFile("http://x/a", "0" * 64, dest="a", members=(("a", "b"),))
    with pytest.raises(ValueError, match="64 lowercase hex"):
        SourceFile("http://x/a", "ABC", dest="a")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOSA_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("BLOSA_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "blosa"


def test_every_source_is_pinned():
    assert set(SOURCES) == {"trec", "cr", "mpqa", "subj", "sst", "sick", "snli", "squad"}
    for name, source in SOURCES.items():
        for file in source.files:
            assert file.sha256 is not None and file.url.startswith("https://"), name


@requires_shared_data
def test_pinned_digests_of_the_sent_conv_files_match_the_shared_copies():
    for name in ("trec", "cr", "mpqa", "subj"):
        for file in SOURCES[name].files:
            assert file.url.endswith("/" + file.dest.split("/")[-1])
            assert sha256(SHARED_DATA / file.dest) == file.sha256, file.dest


def test_sources_cover_the_files_of_the_registry():
    datasets = pytest.importorskip("blosa.data.datasets")
    for spec in datasets.DATASETS.values():
        if spec.download is None:
            continue
        destinations = {d for f in SOURCES[spec.download].files for d in f.destinations}
        assert set(spec.files.values()) <= destinations, spec.name
