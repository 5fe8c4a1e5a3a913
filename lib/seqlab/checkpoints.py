"""Where the course's trained checkpoints are: one rule, for notebooks, tests and scripts.

1. ``$SEQLAB_CHECKPOINTS``, if set: any folder of ``<name>.safetensors`` and ``<name>.json`` files;
2. else ``data/checkpoints`` of the source checkout seqlab runs from (the course repository, where
   ``course.py`` installs seqlab in editable mode, so this works from any working directory, e.g.
   a student's copy in ``work/``).

An installed (non-editable) seqlab has no checkout around it: then only ``$SEQLAB_CHECKPOINTS``
finds them, and :func:`checkpoint_dir` says so instead of guessing a path.
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
    """``$SEQLAB_CHECKPOINTS`` if set, else ``data/checkpoints`` of the source checkout (see the module)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    root = source_checkout()
    if root is None:
        raise FileNotFoundError(f"seqlab is installed at {Path(__file__).resolve().parent}, not run from the course's "
                                f"repository, so it cannot find the checkpoints: set ${ENV_VAR} to the folder that "
                                "holds them (data/checkpoints of the course repository)")
    return root / "data" / "checkpoints"
