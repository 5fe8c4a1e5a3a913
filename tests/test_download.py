"""seqlab.data.download against a real HTTP server on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from seqlab.data import DownloadError, download_corpus, fetch, load_corpus
from seqlab.data.corpora import CorpusError

BODY = ("Shall I compare thee to a summer's day?\n" * 200).encode()
SHA = hashlib.sha256(BODY).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}

    def log_message(self, *args):  # keep the test output clean
        pass

    def do_GET(self):
        count = self.hits[self.path] = self.hits.get(self.path, 0) + 1
        if self.path == "/good.txt":
            self._send(BODY)
        elif self.path == "/truncated.txt":
            # Promise the whole body, send half, hang up: the client sees a short read.
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY[: len(BODY) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/flaky.txt":
            if count == 1:
                self.send_error(503, "try again")
            else:
                self._send(BODY)
        elif self.path == "/slow.txt":
            time.sleep(1.5)
            self._send(BODY)
        else:
            self.send_error(404)

    def _send(self, body: bytes):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def server():
    _Handler.hits = {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_fetch_downloads_verifies_and_caches(server, tmp_path):
    path = fetch(f"{server}/good.txt", SHA, directory=tmp_path)
    assert path.read_bytes() == BODY
    assert _Handler.hits["/good.txt"] == 1
    assert fetch(f"{server}/good.txt", SHA, directory=tmp_path) == path  # from the cache
    assert _Handler.hits["/good.txt"] == 1


def test_wrong_checksum_is_refused_and_leaves_no_file(server, tmp_path):
    wrong = "0" * 64
    with pytest.raises(DownloadError, match=r"did not match its checksum \(expected SHA-256 0{64}\)"):
        fetch(f"{server}/good.txt", wrong, directory=tmp_path, retries=0)
    assert _leftovers(tmp_path) == []


def test_partial_download_is_refused_and_leaves_no_file(server, tmp_path):
    with pytest.raises(DownloadError, match=r"truncated\.txt"):
        fetch(f"{server}/truncated.txt", SHA, directory=tmp_path, retries=0)
    assert _leftovers(tmp_path) == []


def test_dead_server_is_a_clear_error(tmp_path):
    with socket.socket() as s:  # a port on which nobody listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match=r"could not download http://127\.0\.0\.1:\d+/x\.txt after 1 attempt\(s\)"):
        fetch(f"http://127.0.0.1:{port}/x.txt", SHA, directory=tmp_path, retries=0)
    assert _leftovers(tmp_path) == []


def test_timeout_is_enforced(server, tmp_path):
    started = time.perf_counter()
    with pytest.raises(DownloadError, match=r"timeout 0\.3 s each"):
        fetch(f"{server}/slow.txt", SHA, directory=tmp_path, timeout=0.3, retries=0)
    assert time.perf_counter() - started < 1.4  # gave up before the server answered
    assert _leftovers(tmp_path) == []


def test_retry_recovers_from_a_transient_error(server, tmp_path):
    path = fetch(f"{server}/flaky.txt", SHA, directory=tmp_path, retries=1)
    assert path.read_bytes() == BODY
    assert _Handler.hits["/flaky.txt"] == 2


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="64 lowercase hex digits"):
        fetch("http://127.0.0.1/x", "abc", directory=tmp_path)


def test_download_corpus_then_load_offline(server, tmp_path, monkeypatch):
    # Point the manifest's download entry at the loopback server, then load it from the cache.
    from seqlab.data import corpora

    entry = dict(corpora.manifest()["tinyshakespeare"], url=f"{server}/good.txt", sha256=SHA)
    monkeypatch.setitem(corpora.manifest(), "tinyshakespeare", entry)
    monkeypatch.setenv("SEQLAB_DATA", str(tmp_path))
    path = download_corpus("tinyshakespeare")
    assert path == tmp_path / "tinyshakespeare.txt"
    assert load_corpus("tinyshakespeare") == BODY.decode()
    path.write_bytes(BODY + b"tampered")
    with pytest.raises(CorpusError, match="expected " + SHA):
        load_corpus("tinyshakespeare")
    with pytest.raises(CorpusError, match="is offline"):
        download_corpus("shakespeare")
