"""What the first code cell of every notebook calls: one seed, one figure style, one device; and how a
notebook shows a figure with its alt text.

    from seqlab.notebook import setup, show
    device = setup(seed=0)
    ...
    show(fig, f"Loss against step: falls from {losses[0]:.1f} to {losses[-1]:.2f} nats in {len(losses)} steps.")
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
        # opaque white behind every figure: in a dark theme (JupyterLab's, a dark page of the HTML edition)
        # a transparent background would put black labels on black
        "figure.facecolor": "white",
        "savefig.facecolor": "white",
        "savefig.transparent": False,
    })
    return get_device()


def show(fig, alt: str) -> None:
    """Display ``fig`` with ``alt`` as its alternative text, then close it (so it is not shown twice).

    ``alt`` says what the figure shows and what to see in it, written from the numbers the cell computed
    (an f-string), never pasted. JupyterLab, nbconvert and the HTML edition (``make site``) put it on the
    image for screen readers; it is stored in the output's metadata, ``{"image/png": {"alt": alt}}``.
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    if not isinstance(alt, str) or len(alt.split()) < 8:
        raise ValueError(f"show() needs alt text of a sentence or more (what the figure shows and what to see "
                         f"in it), got {alt!r}")
    display(fig, metadata={"image/png": {"alt": alt}})
    plt.close(fig)
