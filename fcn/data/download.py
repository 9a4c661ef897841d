"""Downloading Pascal VOC 2012 and SBD: HTTP Range resume, MD5 check, then extraction."""

from __future__ import annotations

import hashlib
import os
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from fcn.data.errors import DataError

CHUNK_BYTES = 1 << 20
"""Bytes a download or a checksum handles at a time."""


@dataclass(frozen=True)
class Archive:
    """A dataset archive: where to get it, its MD5 and the folder it unpacks to (relative).

    Examples:
        >>> VOC2012.url.rsplit("/", 1)[-1], VOC2012.root
        ('VOCtrainval_11-May-2012.tar', 'VOCdevkit/VOC2012')
    """

    url: str
    md5: str
    root: str


VOC2012 = Archive(
    url="http://host.robots.ox.ac.uk/pascal/VOC/voc2012/VOCtrainval_11-May-2012.tar",
    md5="6cd6e144f989b92b3379bac3b3de84fd",
    root="VOCdevkit/VOC2012",
)
"""VOC 2012 trainval, 1.9 GB: 17,125 JPEGs, 2,913 segmentation PNGs."""

SBD = Archive(
    url="http://www.eecs.berkeley.edu/Research/Projects/CS/vision/grouping/semantic_contours/"
    "benchmark.tgz",
    md5="82b4d87ceb2ed10f6038a1cba92111cb",
    root="benchmark_RELEASE",
)
"""The Semantic Boundaries Dataset, 1.4 GB: 11,355 JPEGs with ``cls/*.mat`` annotations."""


def download_voc(
    dest: str | os.PathLike, *, archive: Archive = VOC2012, progress: bool = False
) -> Path:
    """Download (resuming), verify and extract VOC 2012 under ``dest``; returns the VOC2012 root.

    Pass the result to [`fcn.data.voc_pairs`][]. See [`download_archive`][].

    Examples:
        >>> import tempfile
        >>> dest = Path(tempfile.mkdtemp())
        >>> (dest / "VOCtrainval_11-May-2012.tar.extracted").touch()  # as a finished run leaves
        >>> download_voc(dest).relative_to(dest).as_posix()  # done already: no download
        'VOCdevkit/VOC2012'
    """
    return download_archive(archive, dest, progress=progress)


def download_sbd(
    dest: str | os.PathLike, *, archive: Archive = SBD, progress: bool = False
) -> Path:
    """Download (resuming), verify and extract SBD under ``dest``; returns benchmark_RELEASE.

    Pass the result to [`fcn.data.sbd_pairs`][]. See [`download_archive`][].

    Examples:
        >>> import tempfile
        >>> dest = Path(tempfile.mkdtemp())
        >>> (dest / "benchmark.tgz.extracted").touch()  # as a finished run leaves it
        >>> download_sbd(dest).relative_to(dest).as_posix()  # done already: no download
        'benchmark_RELEASE'
    """
    return download_archive(archive, dest, progress=progress)


def download_archive(archive: Archive, dest: str | os.PathLike, *, progress: bool = False) -> Path:
    """Fetch ``archive`` into ``dest`` and extract it there; returns ``dest / archive.root``.

    Idempotent: a verified archive is not fetched again and an extracted one (marked by
    ``<archive>.extracted``) is not extracted again. An interrupted download is kept as
    ``<archive>.part`` and resumed with an HTTP Range request (from scratch if the server
    ignores ranges). A download whose MD5 differs is deleted and raises [`DataError`][].
    Network failures raise ``urllib.error.URLError`` (an ``OSError``).

    Examples:
        >>> import tempfile
        >>> src = Path(tempfile.mkdtemp())
        >>> (src / "toy").mkdir(); _ = (src / "toy" / "a.txt").write_text("a")
        >>> with tarfile.open(src / "toy.tar", "w") as tar:
        ...     tar.add(src / "toy", "toy")
        >>> md5 = hashlib.md5((src / "toy.tar").read_bytes()).hexdigest()
        >>> toy = Archive((src / "toy.tar").as_uri(), md5, root="toy")
        >>> [p.name for p in download_archive(toy, tempfile.mkdtemp()).iterdir()]
        ['a.txt']
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / Path(urllib.parse.urlparse(archive.url).path).name
    marker = path.with_name(path.name + ".extracted")
    if not marker.exists():
        if not (path.is_file() and file_digest(path, "md5") == archive.md5):
            fetch(archive.url, path, archive.md5, progress=progress)
        with tarfile.open(path) as tar:
            tar.extractall(dest, filter="data")
        marker.touch()
    return dest / archive.root


def fetch(url: str, path: Path, md5: str | None, *, progress: bool = False) -> None:
    """Download ``url`` to ``path`` through ``path.part``, resuming it, and check its MD5
    (``None``: a file without a published checksum, not checked).

    Examples:
        >>> import tempfile
        >>> src, dest = Path(tempfile.mkdtemp(), "a.bin"), Path(tempfile.mkdtemp(), "a.bin")
        >>> _ = src.write_bytes(b"data")
        >>> fetch(src.as_uri(), dest, hashlib.md5(b"data").hexdigest()); dest.read_bytes()
        b'data'
        >>> fetch(src.as_uri(), dest, "0" * 32)
        Traceback (most recent call last):
        fcn.data.errors.DataError: file:///.../a.bin: MD5 8d777f385d3dfec8815d20f7496026dc is
        not the expected 00000000000000000000000000000000; deleted it, try again
    """
    part = path.with_name(path.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        response = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as error:
        if error.code != 416:  # 416: nothing left to send, the part is already complete
            raise
    else:
        with response, open(part, "ab" if response.status == 206 else "wb") as out:
            done = offset if response.status == 206 else 0
            total = done + int(response.headers.get("Content-Length") or 0)
            while chunk := response.read(CHUNK_BYTES):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    print(f"\r{path.name}: {done / 1e6:.1f} / {total / 1e6:.1f} MB",
                          end="", file=sys.stderr, flush=True)  # fmt: skip
        if progress:
            print(file=sys.stderr)
    got = md5 and file_digest(part, "md5")
    if got != md5:
        part.unlink()
        raise DataError(f"{url}: MD5 {got} is not the expected {md5}; deleted it, try again")
    part.replace(path)


def file_digest(path: str | os.PathLike, algorithm: str) -> str:
    """The hex digest of the file at ``path`` by ``algorithm`` (a ``hashlib`` name: ``"md5"``,
    ``"sha256"``), read ``CHUNK_BYTES`` at a time. For integrity checks (a download, a model
    file), so MD5 is allowed where a FIPS build forbids it for security.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp(), "a.bin")
        >>> _ = path.write_bytes(b"data")
        >>> file_digest(path, "sha256") == hashlib.sha256(b"data").hexdigest()
        True
    """
    digest = hashlib.new(algorithm, usedforsecurity=False)
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
