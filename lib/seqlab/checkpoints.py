"""Where the trained checkpoints are: ``$SEQLAB_CHECKPOINTS`` if set, else the source checkout's ``data/checkpoints``.

An installed (non-editable) seqlab has no checkout: then only ``$SEQLAB_CHECKPOINTS`` finds them.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "SEQLAB_CHECKPOINTS"


def source_checkout() -> Path | None:
    """The repository root seqlab runs from (``<root>/lib/seqlab``), or None when seqlab is installed."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "lib" / "seqlab").is_dir() and (root / "data").is_dir() else None


def checkpoint_dir() -> Path:
    """``$SEQLAB_CHECKPOINTS`` if set, else ``data/checkpoints`` of the source checkout."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    root = source_checkout()
    if root is None:
        raise FileNotFoundError(f"seqlab is installed at {Path(__file__).resolve().parent}, not run from the course's "
                                f"repository, so it cannot find the checkpoints: set ${ENV_VAR} to the folder that "
                                "holds them (data/checkpoints of the course repository)")
    return root / "data" / "checkpoints"
