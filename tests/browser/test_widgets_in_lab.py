"""The course's widgets work where students use them: in a real JupyterLab, in a real browser.

The committed notebooks run once per test run, under nbval (make test); nothing here runs them again.
Each widget class that a committed notebook constructs (LiveFigure, GateExplorer, AttentionExplorer, ...:
found in the notebooks' code, ``widget_fixtures.built_by_notebooks``; a class without a fixture fails
``test_every_widget_class_a_notebook_builds_has_a_fixture``) has a small fixture notebook instead
(``widget_fixtures.py``): the same public constructor on small inputs, written at test time into the folder
that a throw-away JupyterLab serves, and driven by headless Chromium:

1. Run All Cells (seconds) without an error; every widget shows up, and moving each of its sliders with the
   keyboard, choosing another option of each dropdown and clicking each toggle button and checkbox brings a
   redraw from the kernel into the page (a new picture, whose bytes differ from the old one's); control ->
   new picture latency is measured over several moves and written to ``test-artifacts/browser/latency.json``
   (printed at the end of the run; only a generous sanity bound is asserted, the machines are noisy). A
   disabled control (e.g. a head slider when the model has one head) is left alone. A move is answered when
   LiveFigure's redraw counter (``data-redraws`` in its status line, the last thing a redraw sends) moves on
   and the new picture, if any, has loaded; each move starts from an idle kernel, so that no two moves are
   ever on their way at once (see ``lab_pages._move``). A move that the kernel answers with the same picture
   (a control without a visible effect in the current state) is counted as ``unchanged`` in the report.
   After each move the widget's live region (``role="status"``: the description a screen reader reads out)
   is the same element as before the move, holding text; over all the moves its text changes;
2. every control is operated with the keyboard alone: reached with Tab from the widget's cell, its focus
   visible, one key press bringing a new picture, the focus still on it afterwards (``keyboard.py``);
3. after Save, Close and Open again (the kernel still running) the widgets render again and still
   answer their sliders. JupyterLab 4 saves no widget *state* (``metadata.widgets``) by default,
   which is what the course wants (see ``tests/test_notebooks_committed.py``); the views come back
   from the live kernel;
4. presented as slides at 1280x720 (``slideshow.present``, on the same executed notebook): each widget is
   alone on its slide (the fixture is laid out by the course's slide rule, scripts/notebook_slides.py),
   which fits the projector; its cell runs again from the slide and its slider brings a new picture there.
   Then its kernel is shut down.

What a committed widget notebook shows with no kernel (its static figures; text, no controls, where each
widget was) is checked on every committed notebook by test_lab_audit.py, which opens them all without one.

Each fixture's test is a class of its own (``TestFixture_gate_explorer``, ...), so that pytest-xdist's
``--dist loadscope`` (``make test``) runs them on its workers side by side, each worker with its own
JupyterLab. Every wait is bounded (``lab_pages``) and every test capped (pytest-timeout; this module's
tests by ``FIXTURE_TIMEOUT_S``); a failure leaves its evidence in ``test-artifacts/browser/failed/``.

Screenshots of every step go to ``test-artifacts/browser/``. Needs Chromium and Playwright (see
``conftest.py`` here; without them the tests skip, or fail under ``SEQLAB_REQUIRE_BROWSER=1``).
Run alone: ``.venv/bin/python -m pytest -p no:cacheprovider tests/browser -v``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import time
from pathlib import Path

import nbformat
import pytest
from lab_pages import (ARTIFACTS, PAGE_TIMEOUT_S, _direction, _move, _open_lab, _operate, _other_controls, _run_all,
                       _slug, _sliders, _wait, _wait_kernel, _wait_notebook_open, _wait_widgets, evaluate, open_page)
from keyboard import operate_by_keyboard
from seqlab.notebook_rules import WIDGET_MIME
from slideshow import check_heights, present
from widget_fixtures import FIXTURES, WidgetFixture, built_by_notebooks, fixture_widget_cells, write_fixture

LATENCY_MOVES = 5            # moves per slider for the median
LATENCY_SANITY_MS = 10_000   # a generous bound: this catches a broken round trip, not slowness
FIXTURE_TIMEOUT_S = 420      # one fixture's test, all phases: the cap (a fixture runs in seconds; busy CI is slower)


def _latency(page, widget, label: str, what: str, act, kernel_ms: list[int]) -> dict:
    """LATENCY_MOVES moves by ``act(k)``; the median latency and the kernel's own redraw times."""
    samples, unchanged = [], 0
    for k in range(LATENCY_MOVES):
        ms, picture = _move(page, widget, lambda: act(k), what)
        samples.append(ms)
        unchanged += not picture
        status = evaluate(widget, "root => window.__seqlabSnap(root).status")
        if match := re.search(r"(\d+) ms", status):
            kernel_ms.append(int(match.group(1)))
    median = statistics.median(samples)
    assert median < LATENCY_SANITY_MS, f"{what}: control -> picture took {samples} ms"
    return {"median_ms": round(median, 1), "samples_ms": [round(x, 1) for x in samples], "kernel_redraw_ms": kernel_ms,
            "unchanged": unchanged}




# -- the phases of one fixture notebook ------------------------------------------------------------

def _sliders_redraw(page, notebook: str, expected: int) -> dict:
    """Phase 1: move every slider of every widget once, then each back and forth; then the same with
    every dropdown (each option once, and back to the first after its latency moves), toggle button and
    checkbox."""
    stem = Path(notebook).stem
    widgets = _wait_widgets(page, notebook, expected, "after Run All Cells")
    results = {}
    for w in range(widgets.count()):
        widget = widgets.nth(w)
        widget.scroll_into_view_if_needed()
        sliders = _sliders(widget)
        assert sliders, (f"{notebook}: widget {w} has no slider that can move (.widget-slider, enabled); this test "
                         "moves sliders, so give it one or teach the test another control")
        results[f"widget{w}"] = entry = {"sliders": {}, "controls": {}, "unchanged_moves": [], "spoken": []}

        def check_move(label: str, act, what: str, shot: str, readout: bool) -> None:
            widget.screenshot(path=ARTIFACTS / f"{shot}-before.png")
            before = evaluate(widget, "root => window.__seqlabSnap(root)")
            digests = [evaluate(page, "window.__seqlabDigest", src, what=f"the bytes of {src}")
                       for src in before["pictures"]]
            _, picture = _move(page, widget, act, what)
            after = evaluate(widget, "root => window.__seqlabSnap(root)")
            widget.screenshot(path=ARTIFACTS / f"{shot}-after.png")
            if not picture:
                print(f"{what}: the kernel redrew the same picture (the control has no visible effect here)")
                entry["unchanged_moves"].append(label)
            elif before["pictures"]:
                new = [evaluate(page, "window.__seqlabDigest", src, what=f"the bytes of {src}")
                       for src in after["pictures"]]
                assert new != digests, f"{what}: the image was replaced by one with the same bytes"
            if readout:
                assert after["readouts"] != before["readouts"], f"{what}: the slider's readout did not change"
            # what a screen reader hears: the same live region (some announce changes only in a region that
            # was already on the page), its text the new state's description
            assert before["region"] is not None and after["spoken"], (
                f"{what}: no live region with a description (LiveFigure(describe=...) / Widget.describe)")
            assert after["region"] == before["region"], f"{what}: the live region was replaced, not updated"
            entry["spoken"] += [before["spoken"], after["spoken"]]

        for s, (label, handle) in enumerate(sliders):
            check_move(label, lambda: handle.press(_direction(handle)), f"moving slider {label!r} of widget {w} in "
                       f"{notebook}", f"{stem}-widget{w}-{s}-{_slug(label)}", readout=True)
        # latency: each slider, back and forth
        for label, handle in sliders:
            first = _direction(handle)
            other = "ArrowLeft" if first == "ArrowRight" else "ArrowRight"
            what = f"moving slider {label!r} of widget {w} in {notebook}"
            kernel_ms: list[int] = []
            entry["sliders"][label] = result = _latency(page, widget, label, what,
                                                        lambda k: handle.press(first if k % 2 == 0 else other),
                                                        kernel_ms)
            print(f"{notebook} widget {w}, slider {label!r}: slider -> new picture median {result['median_ms']:.0f} ms "
                  f"over {LATENCY_MOVES} moves (the kernel's own redraw: {kernel_ms} ms)")
        # the other controls: each option of a dropdown once (and back to the first), a click on each
        # toggle and checkbox; then the latency of LATENCY_MOVES more moves
        for c, (label, kind, element) in enumerate(_other_controls(widget)):
            what = f"changing {kind} {label!r} of widget {w} in {notebook}"
            # another control may have changed this one since (e.g. a model with one gate): look again
            if element.is_disabled() or (kind == "dropdown" and element.locator("option").count() < 2):
                print(f"{what}: disabled or one option now, left alone")
                continue
            moves = element.locator("option").count() if kind == "dropdown" else 1
            for m in range(moves):
                check_move(label, lambda: _operate(kind, element), what,
                           f"{stem}-widget{w}-{kind}{c}-{m}-{_slug(label)}", readout=False)
            kernel_ms = []
            entry["controls"][label] = result = _latency(page, widget, label, what,
                                                         lambda k: _operate(kind, element), kernel_ms)
            result["kind"] = kind
            print(f"{notebook} widget {w}, {kind} {label!r}: change -> new picture median {result['median_ms']:.0f} ms "
                  f"over {LATENCY_MOVES} changes (the kernel's own redraw: {kernel_ms} ms)")
            # a dropdown back on its first option: the controls after it are moved in the state the widget
            # was made in (a model dropdown left on a model with one gate would leave the gate dropdown alone)
            for _ in range(element.locator("option").count() if kind == "dropdown" else 0):
                if evaluate(element, "s => s.selectedIndex") == 0:
                    break
                _move(page, widget, lambda: _operate(kind, element), f"{what}, back to its first option")
        assert len(set(entry["spoken"])) > 1, (f"{notebook} widget {w}: the live region said the same before and "
                                               f"after every move: {entry['spoken'][0]!r}")
        # how the picture is shown: its displayed width over its pixel width (> 1: stretched, blurry)
        entry["picture_scale"] = evaluate(widget, """root => [...root.querySelectorAll('img')].map(
            i => Math.round(100 * i.getBoundingClientRect().width / i.naturalWidth) / 100)""")
    return results


def _save(page, notebook: str) -> None:
    evaluate(page, "() => window.jupyterapp.commands.execute('docmanager:save').then(() => null)",
             what=f"{notebook} to be saved (docmanager:save)")
    _wait(page, "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", f"{notebook} to be saved",
          PAGE_TIMEOUT_S)


def _save_and_reopen(page, notebook: str, lab, expected: int) -> None:
    """Phase 3: Save, close, open again (the kernel keeps running): the widgets render and answer."""
    stem = Path(notebook).stem
    _save(page, notebook)
    saved = nbformat.read(lab.root / notebook, as_version=4)
    views = sum(WIDGET_MIME in o.get("data", {}) for c in saved.cells if c.cell_type == "code" for o in c.outputs)
    assert views == expected, f"{notebook}: saved {views} widget outputs, {expected} expected"
    # True of JupyterLab 4.6 + ipywidgets 8 by default: the saved file holds no widget state.
    state = saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert not state.get("state"), f"{notebook}: JupyterLab saved widget state; update this test's docstring"

    evaluate(page, "() => window.jupyterapp.shell.currentWidget.close()", what=f"{notebook} to close")
    _wait(page, "() => !document.querySelector('.jp-NotebookPanel')", f"{notebook} to close", PAGE_TIMEOUT_S)
    evaluate(page, "(nb) => window.jupyterapp.commands.execute('docmanager:open', {path: nb}).then(() => null)",
             notebook, what=f"{notebook} to open again")
    _wait_notebook_open(page, notebook)
    _wait_kernel(page, "Idle", f"the reopened {notebook} to reconnect to its kernel")
    widgets = _wait_widgets(page, notebook, expected, "after saving, closing and opening it again")
    for w in range(widgets.count()):
        widget = widgets.nth(w)
        widget.scroll_into_view_if_needed()
        _wait(page, "(root) => window.__seqlabSnap(root).loaded || !root.querySelector('img')",
              f"the picture of widget {w} in the reopened {notebook}", PAGE_TIMEOUT_S, arg=widget.element_handle())
        label, handle = _sliders(widget)[0]
        _move(page, widget, lambda: handle.press(_direction(handle)),
              f"moving slider {label!r} of widget {w} after reopening")
        widget.screenshot(path=ARTIFACTS / f"{stem}-widget{w}-reopened.png")


def _write_latency(notebook: str, results: dict, chromium_version: str, run: str) -> None:
    """latency-NN-name.json for this notebook, and latency.json: this run's notebooks so far, merged
    (pytest-xdist may test notebooks on several workers; ``run`` is the same for all of them)."""
    part = {"run": run, "notebook": notebook, "widgets": results}
    (ARTIFACTS / f"latency-{Path(notebook).stem}.json").write_text(json.dumps(part, indent=1))
    merged = {}
    for path in sorted(ARTIFACTS.glob("latency-*.json")):
        try:
            part = json.loads(path.read_text())
        except ValueError:
            continue                                   # being written by another worker
        if part.get("run") == run and part.get("notebook") in {f.path for f in FIXTURES}:
            merged[part["notebook"]] = part["widgets"]
    samples = [ms for widgets in merged.values() for w in widgets.values() for slider in w["sliders"].values()
               for ms in slider["samples_ms"]]
    others = [ms for widgets in merged.values() for w in widgets.values() for control in w.get("controls", {}).values()
              for ms in control["samples_ms"]]
    summary = {"what": "slider key press -> new picture loaded in the page, in a real browser (ms)",
               "median_ms": round(statistics.median(samples), 1), "moves": len(samples),
               "other_controls": {"what": "dropdown option / toggle / checkbox click -> new picture (ms)",
                                  "median_ms": round(statistics.median(others), 1) if others else None,
                                  "moves": len(others)},
               "chromium": chromium_version,
               "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (timings are noisy on shared machines)",
               "fixtures": merged}
    tmp = ARTIFACTS / f".latency.json.{os.getpid()}"
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, ARTIFACTS / "latency.json")


# -- the tests ------------------------------------------------------------------------------------

def test_every_widget_class_a_notebook_builds_has_a_fixture():
    """A widget class that a committed notebook constructs (read from its code) is built by a fixture, so a new
    widget cannot go untested in a browser; and each fixture builds the classes it is named for."""
    built = built_by_notebooks()
    assert built, "no committed notebook constructs a widget class (seqlab.widgets): the scan finds nothing"
    covered = set().union(*(f.widget_classes for f in FIXTURES))
    missing = {name: notebooks for name, notebooks in built.items() if name not in covered}
    assert not missing, (f"widget classes built by notebooks with no fixture in tests/browser/widget_fixtures.py: "
                         f"{missing}; add one (small inputs, the notebooks' constructor)")
    for fixture in FIXTURES:
        assert fixture.widget_classes, f"fixture {fixture.name} builds no widget class of seqlab.widgets"


@pytest.fixture(scope="session")
def run_id(request) -> str:
    """The same for every pytest-xdist worker of one test run."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["testrunuid"] if workerinput else f"{os.getpid()}-{time.time()}"


class _WidgetFixtureInLab:
    """The browser test of one widget fixture, ``fixture``: one subclass per fixture, made below."""

    fixture: WidgetFixture

    @pytest.mark.timeout(FIXTURE_TIMEOUT_S)
    def test_widgets_in_jupyterlab(self, browser, lab, run_id):
        notebook = self.fixture.path
        stem = Path(notebook).stem
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for old in ARTIFACTS.glob(f"*{stem}*"):
            old.unlink()
        nb = nbformat.read(write_fixture(self.fixture, lab.root), as_version=4)
        widget_cells = fixture_widget_cells(nb)
        seconds, started = {}, time.perf_counter()

        def phase(name: str) -> None:            # where the time goes (printed)
            nonlocal started
            now = time.perf_counter()
            seconds[name], started = round(now - started, 1), now

        with open_page(browser, lab) as page:
            _open_lab(page, lab, f"live-{stem}", notebook)
            _wait_kernel(page, "Idle", f"the kernel of {notebook} to start")
            phase("open")
            _run_all(page, notebook)
            phase("run all")
            results = _sliders_redraw(page, notebook, len(widget_cells))
            _write_latency(notebook, results, browser.version, run_id)
            phase("controls")
            operate_by_keyboard(page, notebook)
            phase("keyboard")
            _save_and_reopen(page, notebook, lab, len(widget_cells))
            phase("reopen")
            too_tall = present(page, notebook, widget_cells)
            phase("slides")
        assert lab.shut_down_kernels_of(notebook), f"{notebook} had no kernel to shut down"
        print(f"{notebook}: seconds per phase {seconds}")
        check_heights(notebook, too_tall)


# A class per fixture, not a parametrised test: `make test` runs pytest-xdist's `--dist loadscope`, which hands
# the tests of one class to a worker as one unit (and a module's test functions as another), so these spread
# over the workers instead of queueing on one. (`--dist loadgroup` with an `xdist_group` mark per fixture
# would say it too, but pytest-xdist 3.8 silently groups nothing under pytest 9: its issue 1386.)
for _fixture in FIXTURES:
    _name = "TestFixture_" + re.sub(r"\W", "_", _fixture.name)
    globals()[_name] = type(_name, (_WidgetFixtureInLab,), {"fixture": _fixture})
