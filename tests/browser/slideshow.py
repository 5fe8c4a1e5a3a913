"""The slideshow phase of the browser tests: the widgets work in the slideshow too, and each
widget's slide fits a 1280x720 projector.

The course presents with jupyterlab-slideshow (``deck:start``), which shows the notebook as slides
inside JupyterLab itself, so a widget there is the same live view as in the notebook. (The
jupyterlab-rise slideshow that the course used before opens a separate page with its own, older
JupyterLab core, in which no ipywidgets 8 widget manager can load: see README, "Presenting".)

``present(page, notebook, widget_cells)`` runs on a notebook that is already open and executed (the widget
test has just run its fixture notebook, so nothing is run twice): at 1280x720 it starts the slideshow, steps
through every slide and sub-slide with ``deck:down`` / ``deck:forward`` (what the space bar does) and measures each
slide's height (the cells on screen, top of the first to bottom of the last). On each widget's
slide: the widget is alone on its slide and the slide's height is compared with 720 px; the first
widget cell runs again from its slide (Shift+Enter's ``notebook:run-cell``), and moving the new
view's slider brings a new picture. The heights go to ``test-artifacts/browser/slides-NN.json``;
screenshots of each widget slide beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab_pages import (ARTIFACTS, PAGE_TIMEOUT_S, _direction, _move, _sliders, _wait,
                       _wait_kernel, evaluate)

PROJECTOR = {"width": 1280, "height": 720}
MAX_SLIDES = 200                 # a notebook with more slides than this is stepped through no further
WIDGET_SLIDE_SETTLE_MS = 300     # a widget's slide is measured again after this (its height is asserted)
# two animation frames: the slide a deck command showed has been laid out and painted (a fixed 300 ms on
# every one of a notebook's 60-odd slides cost about 20 s per notebook; the heights are the same)
NEXT_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(null))))"
STEP_TIMEOUT_S = 10

FORWARD_DISABLED = ".jp-deck-mod-direction-forward.jp-mod-disabled"
DOWN_DISABLED = ".jp-deck-mod-direction-down.jp-mod-disabled"
CURRENT = "window.jupyterapp.shell.currentWidget"
# the slide on screen: the indices of its cells and its height in px (top of the first to bottom of the last)
ON_SCREEN_JS = f"""() => {{
  const cells = {CURRENT}.content.widgets;
  const shown = cells.map((c, i) => [c, i]).filter(([c]) => c.node.classList.contains('jp-deck-mod-onscreen'));
  if (!shown.length) return {{cells: [], height: 0}};
  const rects = shown.map(([c]) => c.node.getBoundingClientRect());
  return {{cells: shown.map(([, i]) => i),
          height: Math.round(Math.max(...rects.map(r => r.bottom)) - Math.min(...rects.map(r => r.top)))}};
}}"""


def _command(page, command: str, what: str) -> None:
    outcome = evaluate(page, "(command) => window.jupyterapp.commands.execute(command).then(() => 'ok', "
                             "e => 'error: ' + e)", command, what=f"{command} ({what})", timeout_s=STEP_TIMEOUT_S)
    assert outcome == "ok", f"{command} ({what}): {outcome}"


def _start_slideshow(page, notebook: str) -> None:
    """Start jupyterlab-slideshow on the open notebook, at its first cell (as an instructor would:
    click into the notebook, then the slideshow button)."""
    evaluate(page, f"() => {{ {CURRENT}.content.activeCellIndex = 0; "
                   f"window.jupyterapp.shell.activateById({CURRENT}.id); }}")
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.click()
    assert evaluate(page, "() => window.jupyterapp.commands.hasCommand('deck:start')"), \
        "jupyterlab-slideshow's deck:start command is missing: is jupyterlab-slideshow installed and enabled?"
    _command(page, "deck:start", f"starting the slideshow of {notebook}")
    _wait(page, f"() => document.body.classList.contains('jp-deck-mod-presenting') || "
                f"{CURRENT}.content.widgets[0].node.classList.contains('jp-deck-mod-onscreen') || "
                f"document.querySelectorAll('.jp-deck-mod-onscreen').length > 0",
          f"the slideshow of {notebook} to show its first slide", PAGE_TIMEOUT_S)


def _step_through(page, notebook: str, widget_cells: list[int], stem: str) -> list[dict]:
    """Every slide and sub-slide from the first to the last (until the slideshow's down and forward
    arrows are both disabled): its cells and its height. A step within a slide (onto a cell that continues it) shows the same cells."""
    slides = []
    for _ in range(MAX_SLIDES):
        evaluate(page, NEXT_FRAMES_JS, what="two animation frames (the step's layout painted)")
        slide = evaluate(page, ON_SCREEN_JS)
        if set(slide["cells"]) & set(widget_cells):      # a height that is asserted: let it settle (fonts, images)
            page.wait_for_timeout(WIDGET_SLIDE_SETTLE_MS)
            slide = evaluate(page, ON_SCREEN_JS)
        if not slides or slide["cells"] != slides[-1]["cells"]:
            slides.append(slide)
            for cell in set(slide["cells"]) & set(widget_cells):
                page.screenshot(path=ARTIFACTS / f"slides-{stem}-cell{cell}-slide.png")
        else:
            slides[-1]["height"] = max(slides[-1]["height"], slide["height"])
        # the space bar's order: down into the next sub-slide while there is one, else forward
        if not page.locator(DOWN_DISABLED).count():
            _command(page, "deck:down", f"next sub-slide of {notebook}")
        elif not page.locator(FORWARD_DISABLED).count():
            _command(page, "deck:forward", f"next slide of {notebook}")
        else:
            return slides
    pytest.fail(f"{notebook}: more than {MAX_SLIDES} steps through the slideshow", pytrace=False)


CURRENT_SELECTOR = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _start_slideshow_at(page, notebook: str, cell: int) -> None:
    """Start the slideshow at cell ``cell`` (the slideshow opens at the active cell)."""
    evaluate(page, f"(i) => {{ {CURRENT}.content.activeCellIndex = i; }}", cell)
    _command(page, "deck:start", f"starting the slideshow of {notebook} at cell {cell}")
    _wait(page, f"(i) => {CURRENT}.content.widgets[i].node.classList.contains('jp-deck-mod-onscreen')",
          f"the slideshow of {notebook} to show cell {cell}", PAGE_TIMEOUT_S, arg=cell)


def present(page, notebook: str, widget_cells: list[int]) -> list[str]:
    """The slideshow of ``notebook``, open and executed in ``page``, whose live widgets are in the cells
    ``widget_cells``: returns the widget slides taller than the projector (``["widget cell 7: 736 px", ...]``);
    fails on anything else that is wrong."""
    stem = Path(notebook).stem
    page.set_viewport_size(PROJECTOR)
    _start_slideshow(page, notebook)
    slides = _step_through(page, notebook, widget_cells, stem)
    report = {"notebook": notebook, "viewport": PROJECTOR, "slides": slides, "widget_cells": widget_cells}
    (ARTIFACTS / f"slides-{stem}.json").write_text(json.dumps(report, indent=1))
    tallest = max(slides, key=lambda s: s["height"])
    print(f"{notebook}: {len(slides)} slides, tallest {tallest['height']} px (cells {tallest['cells']})")
    too_tall = []
    for cell in widget_cells:
        holding = [s for s in slides if cell in s["cells"]]
        assert holding, f"{notebook}: widget cell {cell} is on no slide"
        slide = holding[0]
        print(f"{notebook}: widget cell {cell} on a slide of {slide['height']} px with cells {slide['cells']}")
        assert slide["cells"] == [cell], f"{notebook}: widget cell {cell} shares its slide: {slide['cells']}"
        if slide["height"] > PROJECTOR["height"]:
            too_tall.append(f"widget cell {cell}: {slide['height']} px")
    # back to the first widget's slide, run its cell there, move a slider: a new picture
    cell = widget_cells[0]
    _command(page, "deck:stop", "stopping the slideshow")
    _start_slideshow_at(page, notebook, cell)
    _command(page, "notebook:run-cell", f"running widget cell {cell} of {notebook} in the slideshow")
    _wait_kernel(page, "Idle", f"widget cell {cell} of {notebook} to run in the slideshow")
    root = f"{CURRENT_SELECTOR} .jp-Cell.jp-deck-mod-onscreen .jp-OutputArea-output > .jupyter-widgets"
    _wait(page, f"() => {{ const w = document.querySelector({json.dumps(root)}); "
                "return w && window.__seqlabSnap(w).loaded; }",
          f"the widget of cell {cell} to draw its picture on its slide", PAGE_TIMEOUT_S)
    widget = page.locator(root).first
    page.screenshot(path=ARTIFACTS / f"slides-{stem}-cell{cell}-before.png")
    label, handle = _sliders(widget)[0]
    before = evaluate(widget, "root => window.__seqlabSnap(root)")
    _move(page, widget, lambda: handle.press(_direction(handle)),
          f"moving slider {label!r} of widget cell {cell} on its slide")
    after = evaluate(widget, "root => window.__seqlabSnap(root)")
    assert after["pictures"] != before["pictures"] and after["loaded"], f"{notebook}: no new picture on the slide"
    page.screenshot(path=ARTIFACTS / f"slides-{stem}-cell{cell}-after.png")
    _command(page, "deck:stop", "stopping the slideshow")
    return too_tall


def check_heights(notebook: str, too_tall: list[str]) -> None:
    """Fail on a widget slide over 720 px (the test has run the widget on its slide and moved it first)."""
    assert not too_tall, f"{notebook}: widget slides taller than the projector's 720 px: {too_tall}"
