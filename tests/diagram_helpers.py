"""What the diagram tests share (``seqlab.diagrams``): reading a diagram's labels and lit or faded parts, closing
figures, and the check that a picture is legible: opaque, described, of modest size, its labels inside the
figure, apart from each other and inside the box they name.

The pytest ini's ``pythonpath`` puts tests/ on ``sys.path``, so the test files import this module as
``from diagram_helpers import ...``.
"""

from __future__ import annotations

from itertools import combinations

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import same_color
from matplotlib.patches import FancyBboxPatch

from seqlab.colours import HIGHLIGHT
from seqlab.diagrams import FADED, Diagram

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def close_figures():
    """Import it into a test module to close every figure after each test."""
    yield
    plt.close("all")


def labels(diagram: Diagram) -> list[str]:
    return [t.get_text() for t in diagram.figure.axes[0].texts]


def label_text(diagram: Diagram) -> str:
    """All labels in one string, for ``symbol in label_text(d)`` (a label may hold several symbols)."""
    return " ".join(labels(diagram))


def lit_patches(diagram: Diagram) -> list:
    """The parts outlined in the highlight colour."""
    return [p for p in diagram.figure.axes[0].patches if same_color(p.get_edgecolor(), HIGHLIGHT)]


def faded_labels(diagram: Diagram) -> int:
    """How many labels are drawn faded (a later stage of a build-up, or what a position cannot read)."""
    return sum(same_color(t.get_color(), FADED) for t in diagram.figure.axes[0].texts)


def assert_legible(diagram: Diagram, *, alt_words: int = 80) -> None:
    """Opaque (legible on a dark theme), described by more than ``alt_words`` words of alt text, a modest PNG,
    and every label inside the figure, apart from the others, and inside the box it is centred on."""
    figure, alt = diagram                                     # unpacks for show(*diagram)
    assert figure is diagram.figure and len(alt.split()) > alt_words
    assert same_color(figure.get_facecolor(), "white")
    assert max(figure.get_size_inches()) < 9
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    page, ax = figure.bbox, figure.axes[0]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text()]
    for text, box in boxes:
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, f"clipped: {text}"
    overlapping = [(a, b) for (a, box_a), (b, box_b) in combinations(boxes, 2) if box_a.overlaps(box_b)]
    assert not overlapping
    for patch in ax.patches:
        if isinstance(patch, FancyBboxPatch) and patch.get_zorder() > 0:        # a box, not a panel's frame
            inner = patch.get_window_extent(renderer)
            for t in ax.texts:
                if inner.contains(*ax.transData.transform(t.get_position())):
                    label = t.get_window_extent(renderer)
                    assert inner.x0 <= label.x0 and label.x1 <= inner.x1, f"wider than its box: {t.get_text()}"
                    assert inner.y0 <= label.y0 and label.y1 <= inner.y1, f"taller than its box: {t.get_text()}"
