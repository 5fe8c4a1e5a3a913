"""Where downloaded corpora are kept: ``$SEQLAB_DATA``, else the user cache (shared so that corpora and
download need not import each other)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "SEQLAB_DATA"


def cache_dir() -> Path:
    """Where downloaded corpora are kept."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    import pooch  # only to name the platform's cache folder

    return Path(pooch.os_cache("seqlab"))
