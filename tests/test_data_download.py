"""Downloads against a local HTTP server (127.0.0.1, Range aware): checksum, resume, extraction."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import scipy.io
from PIL import Image

from fcn.data import (
    SAMPLE_DIR,
    Archive,
    DataError,
    download_sbd,
    download_voc,
    sbd_pairs,
    voc_pairs,
)

SAMPLE = SAMPLE_DIR  # the real VOC sample shipped with the package


class Server:
    """Serves ``files`` (name -> bytes) on 127.0.0.1, honouring ``Range: bytes=N-`` if asked."""

    def __init__(self, files: dict[str, bytes], ranges: bool = True) -> None:
        self.files, self.ranges, self.requests = files, ranges, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                data = server.files[self.path.lstrip("/")]
                start = 0
                header = self.headers.get("Range")
                server.requests.append(header)
                if header and server.ranges:
                    start = int(header.removeprefix("bytes=").rstrip("-"))
                    if start >= len(data):
                        self.send_response(416)
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                self.wfile.write(data[start:])

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def voc_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(SAMPLE / "VOCdevkit", arcname="VOCdevkit")
    return buffer.getvalue()


def archive(server: Server, name: str, data: bytes, root: str = "VOCdevkit/VOC2012") -> Archive:
    return Archive(server.url(name), hashlib.md5(data).hexdigest(), root)


def test_download_verifies_extracts_and_is_idempotent(tmp_path):
    data = voc_tar()
    with Server({"voc.tar": data}) as server:
        root = download_voc(tmp_path, archive=archive(server, "voc.tar", data))
        assert root == tmp_path / "VOCdevkit" / "VOC2012"
        assert len(voc_pairs(root, "train")) == 12
        assert (tmp_path / "voc.tar").read_bytes() == data
        assert not (tmp_path / "voc.tar.part").exists()
        download_voc(tmp_path, archive=archive(server, "voc.tar", data))
    assert server.requests == [None]  # the second call found everything done


def test_interrupted_download_resumes_with_a_range_request(tmp_path):
    data = voc_tar()
    (tmp_path / "voc.tar.part").write_bytes(data[:300_000])
    with Server({"voc.tar": data}) as server:
        root = download_voc(tmp_path, archive=archive(server, "voc.tar", data))
    assert server.requests == ["bytes=300000-"]
    assert (tmp_path / "voc.tar").read_bytes() == data
    assert len(voc_pairs(root, "val")) == 8


def test_complete_part_file_is_not_fetched_again(tmp_path):
    data = voc_tar()
    (tmp_path / "voc.tar.part").write_bytes(data)
    with Server({"voc.tar": data}) as server:
        download_voc(tmp_path, archive=archive(server, "voc.tar", data))
    assert server.requests == [f"bytes={len(data)}-"]  # answered 416: nothing left
    assert (tmp_path / "voc.tar").read_bytes() == data


def test_server_without_ranges_restarts_from_scratch(tmp_path):
    data = voc_tar()
    (tmp_path / "voc.tar.part").write_bytes(b"stale bytes from another file")
    with Server({"voc.tar": data}, ranges=False) as server:
        download_voc(tmp_path, archive=archive(server, "voc.tar", data))
    assert (tmp_path / "voc.tar").read_bytes() == data


def test_checksum_mismatch_deletes_the_download(tmp_path):
    data = voc_tar()
    with Server({"voc.tar": data}) as server:
        wrong = Archive(server.url("voc.tar"), "0" * 32, "VOCdevkit/VOC2012")
        with pytest.raises(DataError, match=r"voc\.tar: MD5 [0-9a-f]{32} is not the expected 0+"):
            download_voc(tmp_path, archive=wrong)
    assert not (tmp_path / "voc.tar").exists() and not (tmp_path / "voc.tar.part").exists()
    assert not (tmp_path / "VOCdevkit").exists()


def test_sbd_tgz(tmp_path):
    src = tmp_path / "src" / "benchmark_RELEASE" / "dataset"
    (src / "img").mkdir(parents=True)
    (src / "cls").mkdir()
    (src / "train.txt").write_text("2008_000002\n")
    (src / "val.txt").write_text("")
    Image.new("RGB", (4, 3)).save(src / "img" / "2008_000002.jpg")
    scipy.io.savemat(src / "cls" / "2008_000002.mat", {"GTcls": {"Segmentation": [[1, 2]]}})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(tmp_path / "src" / "benchmark_RELEASE", arcname="benchmark_RELEASE")
    data = buffer.getvalue()
    with Server({"benchmark.tgz": data}) as server:
        sbd = archive(server, "benchmark.tgz", data, root="benchmark_RELEASE")
        root = download_sbd(tmp_path / "dest", archive=sbd)
    assert root == tmp_path / "dest" / "benchmark_RELEASE"
    assert len(sbd_pairs(root, "train")) == 1
