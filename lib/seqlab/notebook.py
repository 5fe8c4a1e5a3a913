"""What the first code cell of every notebook calls (one seed, figure style, device), and :func:`show` for figures."""

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
        # opaque white behind every figure: in a dark theme (JupyterLab's, a dark page of the HTML edition)
        # a transparent background would put black labels on black
        "figure.facecolor": "white",
        "savefig.facecolor": "white",
        "savefig.transparent": False,
    })
    return get_device()


def show(fig, alt: str) -> None:
    """Display ``fig`` with ``alt`` as its alternative text (``{"image/png": {"alt": alt}}`` metadata), then close it.

    ``alt`` says what the figure shows and what to see in it, built from the cell's numbers.
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    if not isinstance(alt, str) or len(alt.split()) < 8:
        raise ValueError(f"show() needs alt text of a sentence or more (what the figure shows and what to see "
                         f"in it), got {alt!r}")
    display(fig, metadata={"image/png": {"alt": alt}})
    plt.close(fig)
