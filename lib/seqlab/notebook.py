"""What the first code cell of every notebook calls: one seed, one figure style, one device.

    from seqlab.notebook import setup
    device = setup(seed=0)
"""

from __future__ import annotations

import torch

from seqlab.device import get_device, seed_everything

FIGURE_DPI = 80  # keeps committed notebooks small (a couple of MB at most) and figures crisp enough


def setup(seed: int = 0, *, threads: int | None = None) -> torch.device:
    """Seed everything, set the figure style, and return the device to use (see seqlab.device)."""
    import matplotlib.pyplot as plt

    seed_everything(seed)
    if threads is not None:
        torch.set_num_threads(threads)
    plt.rcParams.update({
        "figure.dpi": FIGURE_DPI,
        "savefig.dpi": FIGURE_DPI,
        "figure.figsize": (7.0, 3.5),
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
    })
    return get_device()
