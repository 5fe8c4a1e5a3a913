"""Where downloaded corpora are kept: ``$SEQLAB_DATA`` if set, else the platform's user cache
(``~/.cache/seqlab`` on Linux). Read by :mod:`seqlab.data.corpora` (to load) and
:mod:`seqlab.data.download` (to fetch), so neither imports the other."""

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
