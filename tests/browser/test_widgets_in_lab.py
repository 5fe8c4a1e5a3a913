"""The course's widgets work where students use them: in a real JupyterLab, in a real browser.

For every notebook whose saved outputs contain a live widget (a code cell with an
``application/vnd.jupyter.widget-view+json`` output -- a notebook added later is picked up by the
same rule, and finding none is a failure), in a throw-away JupyterLab driven by headless Chromium:

1. the notebook runs top to bottom (Run All Cells) without an error, every widget shows up, and
   moving each of its sliders with the keyboard, choosing another option of each dropdown and
   clicking each toggle button and checkbox brings a new picture (or, for a widget without a
   picture, new numbers) into the page; control -> new picture latency is measured over several
   moves and written to ``test-artifacts/browser/latency.json`` (printed at the end of the run;
   only a generous sanity bound is asserted, the machines are noisy). A disabled control (e.g. a
   head slider when the model has one head) is left alone. A move that the kernel answers with
   the same picture (a control without a visible effect in the current state) is waited for by
   LiveFigure's redraw counter (``data-redraws`` in its status line) instead of hanging, and is
   counted as ``unchanged`` in the report;
2. after Save, Close and Open again (the kernel still running) the widgets render again and still
   answer their sliders. JupyterLab 4 saves no widget *state* (``metadata.widgets``) by default,
   which is what the course wants (see ``tests/test_notebooks_committed.py``); the views come back
   from the live kernel;
3. opened without a kernel ("No Kernel", e.g. after the kernel was shut down), the notebook shows
   all its static PNG figures; each widget output shows no controls and no picture then, only
   ipywidgets' "Loading widget..." line -- which is why every widget has a static figure beside it.

The three phases of a notebook are one test, so that pytest-xdist keeps them on one worker.

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

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

PAGE_TIMEOUT_S = 60          # JupyterLab to load, a kernel to start, widgets to show up
RUN_ALL_TIMEOUT_S = 300      # a whole notebook (the budget is 90 s; busy CI machines are slower)
REDRAW_TIMEOUT_S = 10        # one slider move to a new picture (typically well under 1 s)
LATENCY_MOVES = 5            # moves per slider for the median
LATENCY_SANITY_MS = 10_000   # a generous bound: this catches a broken round trip, not slowness


def widget_notebooks() -> dict[str, int]:
    """notebook file name -> how many live widgets its saved outputs show."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        count = sum(WIDGET_MIME in output.get("data", {})
                    for cell in nb.cells if cell.cell_type == "code" for output in cell.get("outputs", []))
        if count:
            found[path.name] = count
    return found


WIDGET_NOTEBOOKS = widget_notebooks()


# -- page helpers ---------------------------------------------------------------------------------

# Defined in every page: the state of one widget view, as a reader sees it.
# pictures: the src of its images (ipywidgets.Image: a new blob URL for every new picture);
# shown: the text of its HTML and Output children, minus LiveFigure's "redrawn in N ms" line;
# readouts: the sliders' own readouts (they change in the browser alone, so they prove nothing).
INIT_SCRIPT = r"""
window.__seqlabSnap = (root) => {
  const imgs = [...root.querySelectorAll('img')];
  const text = (sel) => [...root.querySelectorAll(sel)].map(e => e.textContent.trim());
  return {
    pictures: imgs.map(i => i.src),
    loaded: imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0),
    shown: text('.widget-html-content, .widget-output').filter(t => !/^redrawn in \d+ ms$/.test(t)),
    status: text('.widget-html-content').filter(t => /^redrawn in \d+ ms$/.test(t)).join(''),
    readouts: text('.widget-readout'),
    redraws: [...root.querySelectorAll('[data-redraws]')].map(e => e.dataset.redraws).join('|'),
  };
};
// when a move has been answered: {at, picture} once a new picture has loaded (picture: true), or the
// kernel's redraw counter moved on with the picture unchanged (picture: false); false while waiting
window.__seqlabChanged = ([root, before]) => {
  const now = window.__seqlabSnap(root);
  if (now.pictures.join('|') !== before.pictures.join('|')) {
    return now.loaded ? {at: performance.now(), picture: true} : false;
  }
  if (before.pictures.length === 0 && now.shown.join('|') !== before.shown.join('|')) {
    return {at: performance.now(), picture: true};
  }
  if (now.redraws && now.redraws !== before.redraws) {
    return {at: performance.now(), picture: false};
  }
  return false;
};
window.__seqlabDigest = async (src) => {
  const bytes = await (await fetch(src)).arrayBuffer();
  const hash = await crypto.subtle.digest('SHA-256', bytes);
  return [...new Uint8Array(hash)].map(b => b.toString(16).padStart(2, '0')).join('');
};
"""
KERNEL_STATUS_JS = """() => document.querySelector(
  '#jp-main-statusbar .jp-StatusBar-TextItem[title^="Change kernel"]')?.textContent || ''"""
WIDGET_ROOTS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output > .jupyter-widgets"
NOTEBOOK_IMAGES = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedImage img"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "slider"


def _wait(page, js: str, what: str, timeout_s: float, arg=None):
    """wait_for_function with a message that says what was being waited for."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        return page.wait_for_function(js, arg=arg, timeout=timeout_s * 1000)
    except PlaywrightTimeout:
        pass
    status = page.evaluate(KERNEL_STATUS_JS)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what} (kernel status bar: {status!r})",
                pytrace=False)


def _wait_kernel(page, state: str, what: str, timeout_s: float = PAGE_TIMEOUT_S) -> None:
    """Wait for the status bar's kernel item: "Python 3 (ipykernel) | Idle" for ``state="Idle"``,
    "No Kernel | ..." for ``state="No Kernel"``."""
    test = ("t.startsWith('No Kernel')" if state == "No Kernel"
            else f"!t.startsWith('No Kernel') && t.endsWith('| ' + {json.dumps(state)})")
    _wait(page, f"() => {{ const t = ({KERNEL_STATUS_JS})().trim(); return {test}; }}",
          f"the status bar to read kernel {state!r} ({what})", timeout_s)


def _new_page(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 1400})
    context.add_init_script(INIT_SCRIPT)
    return context.new_page()


def _open_lab(page, lab, workspace: str, notebook: str | None = None) -> None:
    path = f"/tree/{notebook}" if notebook else ""
    page.goto(f"{lab.url}/lab/workspaces/{workspace}{path}?reset&token={lab.token}")
    _wait(page, "() => window.jupyterapp && window.jupyterapp.shell", "JupyterLab to start in the page "
          "(window.jupyterapp, exposed by --LabApp.expose_app_in_browser)", PAGE_TIMEOUT_S)
    restored = page.evaluate("""(ms) => Promise.race([window.jupyterapp.restored.then(() => true),
                                                  new Promise(resolve => setTimeout(() => resolve(false), ms))])""",
                             PAGE_TIMEOUT_S * 1000)
    if not restored:
        pytest.fail(f"timed out after {PAGE_TIMEOUT_S} s waiting for JupyterLab's plugins to start "
                    "(jupyterapp.restored)", pytrace=False)
    if notebook:
        _wait_notebook_open(page, notebook)


def _wait_notebook_open(page, notebook: str) -> None:
    _wait(page, """(nb) => { const w = window.jupyterapp.shell.currentWidget;
                            return w && w.context && w.context.path === nb && w.context.isReady; }""",
          f"{notebook} to open as the current tab", PAGE_TIMEOUT_S, arg=notebook)


def _widget_count_js() -> str:
    return f"""(n) => {{ const roots = [...document.querySelectorAll({json.dumps(WIDGET_ROOTS)})];
                       return roots.length === n && roots.every(r => r.querySelector('.widget-slider, img')); }}"""


def _error_outputs(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']",
        "els => els.map(e => e.textContent.slice(0, 2000))")


def _sliders(widget) -> list[tuple[str, object]]:
    """(label, first noUi handle) for each slider of a widget view that can move (not disabled, not
    a range of one value)."""
    sliders = []
    for i in range(widget.locator(".widget-slider").count()):
        slider = widget.locator(".widget-slider").nth(i)
        label = (slider.locator(".widget-label").first.text_content() or f"slider {i}").strip()
        handle = slider.locator(".noUi-handle").first
        low, high = (handle.get_attribute(a) for a in ("aria-valuemin", "aria-valuemax"))
        if slider.locator("[disabled]").count() or low == high:
            print(f"slider {label!r} is disabled or has one value: left alone")
            continue
        sliders.append((label, handle))
    return sliders


def _other_controls(widget) -> list[tuple[str, str, object]]:
    """(label, kind, element) for each enabled dropdown (two options or more), toggle button and
    checkbox of a widget view: the controls that are not sliders."""
    controls = []
    for i in range(widget.locator(".widget-dropdown").count()):
        box = widget.locator(".widget-dropdown").nth(i)
        select = box.locator("select").first
        if select.is_disabled() or select.locator("option").count() < 2:
            continue
        controls.append(((box.locator(".widget-label").first.text_content() or f"dropdown {i}").strip(), "dropdown",
                         select))
    for i in range(widget.locator("button.widget-toggle-button").count()):
        button = widget.locator("button.widget-toggle-button").nth(i)
        if not button.is_disabled():
            controls.append(((button.text_content() or f"toggle {i}").strip(), "toggle", button))
    for i in range(widget.locator(".widget-checkbox").count()):
        box = widget.locator(".widget-checkbox").nth(i)
        tick = box.locator("input[type=checkbox]").first
        if not tick.is_disabled():
            controls.append(((box.text_content() or f"checkbox {i}").replace("\u200b", "").strip(), "checkbox", tick))
    return controls


def _operate(kind: str, element) -> None:
    """Move a non-slider control once: the next option of a dropdown (cycling), a click otherwise."""
    if kind == "dropdown":
        count = element.locator("option").count()
        element.select_option(index=(element.evaluate("s => s.selectedIndex") + 1) % count)
    else:
        element.click()


def _direction(handle) -> str:
    now, low, high = (float(handle.get_attribute(a)) for a in ("aria-valuenow", "aria-valuemin", "aria-valuemax"))
    if now < high:
        return "ArrowRight"
    if now > low:
        return "ArrowLeft"
    pytest.fail(f"the slider handle cannot move (value {now}, range {low}..{high})", pytrace=False)


def _move(page, widget, act, what: str) -> tuple[float, bool]:
    """Do ``act()`` (press a key on a slider, pick an option, click); wait for the kernel's answer;
    return the latency in ms and whether the picture changed (see ``__seqlabChanged``)."""
    before = widget.evaluate("root => window.__seqlabSnap(root)")
    started = page.evaluate("performance.now()")
    act()
    answer = _wait(page, "window.__seqlabChanged", f"a new picture (or new numbers) after {what}",
                   REDRAW_TIMEOUT_S, arg=[widget.element_handle(), before]).json_value()
    return answer["at"] - started, answer["picture"]


def _latency(page, widget, label: str, what: str, act, kernel_ms: list[int]) -> dict:
    """LATENCY_MOVES moves by ``act(k)``; the median latency and the kernel's own redraw times."""
    samples, unchanged = [], 0
    for k in range(LATENCY_MOVES):
        ms, picture = _move(page, widget, lambda: act(k), what)
        samples.append(ms)
        unchanged += not picture
        status = widget.evaluate("root => window.__seqlabSnap(root).status")
        if match := re.search(r"(\d+) ms", status):
            kernel_ms.append(int(match.group(1)))
    median = statistics.median(samples)
    assert median < LATENCY_SANITY_MS, f"{what}: control -> picture took {samples} ms"
    return {"median_ms": round(median, 1), "samples_ms": [round(x, 1) for x in samples], "kernel_redraw_ms": kernel_ms,
            "unchanged": unchanged}


# -- the three phases of one notebook ---------------------------------------------------------------

def _run_all(page, notebook: str) -> None:
    started = time.perf_counter()
    outcome = page.evaluate("""async (timeoutMs) => {
        const run = window.jupyterapp.commands.execute('notebook:run-all-cells');
        const timer = new Promise(resolve => setTimeout(() => resolve('timeout'), timeoutMs));
        return await Promise.race([run.then(ok => ok ? 'ok' : 'error'), timer]);
    }""", RUN_ALL_TIMEOUT_S * 1000)
    if outcome == "timeout":
        pytest.fail(f"{notebook}: Run All Cells did not finish within {RUN_ALL_TIMEOUT_S} s", pytrace=False)
    _wait_kernel(page, "Idle", f"{notebook} to finish running")
    errors = _error_outputs(page)
    assert outcome == "ok" and not errors, f"{notebook}: Run All Cells stopped on an error:\n" + "\n".join(errors)
    print(f"{notebook}: Run All Cells took {time.perf_counter() - started:.1f} s in the browser")


def _wait_widgets(page, notebook: str, when: str) -> object:
    expected = WIDGET_NOTEBOOKS[notebook]
    _wait(page, _widget_count_js(), f"{expected} widget(s) of {notebook} to show up with a slider or a "
          f"picture ({when})", PAGE_TIMEOUT_S, arg=expected)
    return page.locator(WIDGET_ROOTS)


def _sliders_redraw(page, notebook: str) -> dict:
    """Phase 1: move every slider of every widget once, then each back and forth; then the same with
    every dropdown (each option once), toggle button and checkbox."""
    stem = Path(notebook).stem
    widgets = _wait_widgets(page, notebook, "after Run All Cells")
    results = {}
    for w in range(widgets.count()):
        widget = widgets.nth(w)
        widget.scroll_into_view_if_needed()
        sliders = _sliders(widget)
        assert sliders, (f"{notebook}: widget {w} has no slider that can move (.widget-slider, enabled); this test "
                         "moves sliders, so give it one or teach the test another control")
        results[f"widget{w}"] = entry = {"sliders": {}, "controls": {}, "unchanged_moves": []}

        def check_move(label: str, act, what: str, shot: str, readout: bool) -> None:
            widget.screenshot(path=ARTIFACTS / f"{shot}-before.png")
            before = widget.evaluate("root => window.__seqlabSnap(root)")
            digests = [page.evaluate("window.__seqlabDigest", src) for src in before["pictures"]]
            _, picture = _move(page, widget, act, what)
            after = widget.evaluate("root => window.__seqlabSnap(root)")
            widget.screenshot(path=ARTIFACTS / f"{shot}-after.png")
            if not picture:
                print(f"{what}: the kernel redrew the same picture (the control has no visible effect here)")
                entry["unchanged_moves"].append(label)
            elif before["pictures"]:
                new = [page.evaluate("window.__seqlabDigest", src) for src in after["pictures"]]
                assert new != digests, f"{what}: the image was replaced by one with the same bytes"
            if readout:
                assert after["readouts"] != before["readouts"], f"{what}: the slider's readout did not change"

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
        # how the picture is shown: its displayed width over its pixel width (> 1: stretched, blurry)
        entry["picture_scale"] = widget.evaluate("""root => [...root.querySelectorAll('img')].map(
            i => Math.round(100 * i.getBoundingClientRect().width / i.naturalWidth) / 100)""")
    return results


def _save_and_reopen(page, notebook: str, lab) -> None:
    """Phase 2: Save, close, open again (the kernel keeps running): the widgets render and answer."""
    stem = Path(notebook).stem
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    _wait(page, "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", f"{notebook} to be saved",
          PAGE_TIMEOUT_S)
    saved = nbformat.read(lab.root / notebook, as_version=4)
    views = sum(WIDGET_MIME in o.get("data", {}) for c in saved.cells if c.cell_type == "code" for o in c.outputs)
    assert views == WIDGET_NOTEBOOKS[notebook], f"{notebook}: saved {views} widget outputs"
    # True of JupyterLab 4.6 + ipywidgets 8 by default: the saved file holds no widget state.
    state = saved.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert not state.get("state"), f"{notebook}: JupyterLab saved widget state; update this test's docstring"

    page.evaluate("() => window.jupyterapp.shell.currentWidget.close()")
    _wait(page, "() => !document.querySelector('.jp-NotebookPanel')", f"{notebook} to close", PAGE_TIMEOUT_S)
    page.evaluate("(nb) => window.jupyterapp.commands.execute('docmanager:open', {path: nb})", notebook)
    _wait_notebook_open(page, notebook)
    _wait_kernel(page, "Idle", f"the reopened {notebook} to reconnect to its kernel")
    widgets = _wait_widgets(page, notebook, "after saving, closing and opening it again")
    for w in range(widgets.count()):
        widget = widgets.nth(w)
        widget.scroll_into_view_if_needed()
        _wait(page, "(root) => window.__seqlabSnap(root).loaded || !root.querySelector('img')",
              f"the picture of widget {w} in the reopened {notebook}", PAGE_TIMEOUT_S, arg=widget.element_handle())
        label, handle = _sliders(widget)[0]
        _move(page, widget, lambda: handle.press(_direction(handle)),
              f"moving slider {label!r} of widget {w} after reopening")
        widget.screenshot(path=ARTIFACTS / f"{stem}-widget{w}-reopened.png")


def _without_kernel(browser, lab, notebook: str) -> None:
    """Phase 3: with its kernel shut down, opened as "No Kernel": every static figure shows."""
    stem = Path(notebook).stem
    assert lab.shut_down_kernels_of(notebook), f"{notebook} had no kernel to shut down"
    on_disk = nbformat.read(lab.root / notebook, as_version=4)
    figures = sum("image/png" in o.get("data", {}) for c in on_disk.cells if c.cell_type == "code"
                  for o in c.outputs)
    assert figures, f"{notebook} has no static figure"
    page = _new_page(browser, lab)
    try:
        _open_lab(page, lab, f"nokernel-{stem}")
        page.evaluate("""(nb) => window.jupyterapp.commands.execute('docmanager:open',
                             {path: nb, kernelPreference: {shouldStart: false, canStart: false}})""", notebook)
        _wait_notebook_open(page, notebook)
        _wait_kernel(page, "No Kernel", f"{notebook} opened without a kernel")
        _wait(page, f"(n) => document.querySelectorAll({json.dumps(NOTEBOOK_IMAGES)}).length === n",
              f"{figures} static figure(s) of {notebook} to be in the page", PAGE_TIMEOUT_S, arg=figures)
        images = page.locator(NOTEBOOK_IMAGES)
        for i in range(figures):
            image = images.nth(i)
            image.scroll_into_view_if_needed()
            _wait(page, "(img) => img.complete && img.naturalWidth > 0", f"static figure {i} of {notebook} to load",
                  PAGE_TIMEOUT_S, arg=image.element_handle())
            if i == 0:
                page.screenshot(path=ARTIFACTS / f"{stem}-no-kernel.png")
        # no live view without a kernel: ipywidgets 8 leaves a "Loading widget..." line in its place
        live = page.locator(f"{WIDGET_ROOTS} img, {WIDGET_ROOTS} .widget-slider").count()
        assert live == 0, f"{notebook}: widgets drew controls or pictures without a kernel"
        placeholders = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output",
                                    has_text="Loading widget").count()
        print(f"{notebook} without a kernel: {figures} static figure(s) shown; "
              f"{placeholders} of {WIDGET_NOTEBOOKS[notebook]} widget output(s) read 'Loading widget...'")
        status = page.evaluate(KERNEL_STATUS_JS).strip()
        assert status.startswith("No Kernel"), f"a kernel started after all: {status!r}"
    finally:
        page.context.close()


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
        if part.get("run") == run and part.get("notebook") in WIDGET_NOTEBOOKS:
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
               "notebooks": merged}
    tmp = ARTIFACTS / f".latency.json.{os.getpid()}"
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, ARTIFACTS / "latency.json")


# -- the tests ------------------------------------------------------------------------------------

def test_widget_notebooks_are_found():
    assert WIDGET_NOTEBOOKS, (f"no notebook in notebooks/ has a saved widget output ({WIDGET_MIME}); "
                              "the browser tests look for those, so they would test nothing")


@pytest.fixture(scope="session")
def run_id(request) -> str:
    """The same for every pytest-xdist worker of one test run."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["testrunuid"] if workerinput else f"{os.getpid()}-{time.time()}"


@pytest.mark.parametrize("notebook", WIDGET_NOTEBOOKS)
def test_widgets_in_jupyterlab(browser, lab, notebook, run_id):
    stem = Path(notebook).stem
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob(f"*{stem}*"):
        old.unlink()
    page = _new_page(browser, lab)
    try:
        _open_lab(page, lab, f"live-{stem}", notebook)
        _wait_kernel(page, "Idle", f"the kernel of {notebook} to start")
        _run_all(page, notebook)
        results = _sliders_redraw(page, notebook)
        _write_latency(notebook, results, browser.version, run_id)
        _save_and_reopen(page, notebook, lab)
    finally:
        page.context.close()
    _without_kernel(browser, lab, notebook)
