"""Fetch corpora beyond the offline ones with ``pooch`` (checked hash, atomic write, retries) into :func:`cache_dir`.
No notebook and no test needs the network."""

from __future__ import annotations

import re
from pathlib import Path

import pooch

from seqlab.data.cache import ENV_VAR, cache_dir
from seqlab.data.corpora import CorpusError, manifest

__all__ = ["ENV_VAR", "DownloadError", "cache_dir", "download_corpus", "fetch"]

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class DownloadError(RuntimeError):
    """A download failed: unreachable server, HTTP error, timeout, or wrong checksum."""


def fetch(url: str, sha256: str, *, fname: str | None = None, directory: str | Path | None = None,
          timeout: float = 30.0, retries: int = 2) -> Path:
    """Download ``url`` into the cache once, checked against ``sha256``; return the local path.
    ``timeout``: seconds per attempt; ``retries``: further attempts."""
    if not isinstance(sha256, str) or not _SHA256_RE.match(sha256):
        raise ValueError(f"sha256 must be 64 lowercase hex digits, got {sha256!r}")
    if retries < 0 or timeout <= 0:
        raise ValueError(f"need retries >= 0 and timeout > 0, got retries={retries}, timeout={timeout}")
    fname = fname or url.rstrip("/").rsplit("/", 1)[-1]
    folder = Path(directory) if directory is not None else cache_dir()
    store = pooch.create(path=folder, base_url="", registry={fname: f"sha256:{sha256}"},
                         urls={fname: url}, retry_if_failed=retries)
    downloader = pooch.HTTPDownloader(progressbar=False, timeout=timeout)
    import requests  # pooch's own HTTP client; imported here so importing seqlab stays light

    try:
        return Path(store.fetch(fname, downloader=downloader))
    except ValueError as err:  # pooch's hash mismatch
        raise DownloadError(f"download of {url} did not match its checksum (expected SHA-256 {sha256}); "
                            f"nothing was written to {folder / fname}. Details: {err}") from err
    except requests.exceptions.RequestException as err:
        raise DownloadError(f"could not download {url} after {retries + 1} attempt(s) "
                            f"(timeout {timeout:g} s each): {type(err).__name__}: {err}") from err


def download_corpus(name: str, *, directory: str | Path | None = None, timeout: float = 30.0,
                    retries: int = 2) -> Path:
    """Fetch a ``download`` corpus; then ``load_corpus(name)`` works offline."""
    entries = manifest()
    if name not in entries:
        raise CorpusError(f"unknown corpus {name!r}; expected one of {sorted(entries)}")
    entry = entries[name]
    if entry["kind"] != "download":
        raise CorpusError(f"corpus {name!r} is offline (kind {entry['kind']!r}): load it with load_corpus({name!r})")
    return fetch(entry["url"], entry["sha256"], fname=entry["fname"], directory=directory,
                 timeout=timeout, retries=retries)
