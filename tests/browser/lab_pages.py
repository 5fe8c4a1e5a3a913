"""What the browser tests do in a JupyterLab page, shared by the test modules of tests/browser.

Opening JupyterLab and a notebook, waiting for the kernel's status, Run All Cells, finding a widget's
controls and moving one until the kernel answers with a redraw (``__seqlabSnap`` /
``__seqlabChanged`` in ``INIT_SCRIPT``, defined in every page). The committed notebooks with live widgets
are found from their saved outputs (``WIDGET_NOTEBOOKS``: test_lab_audit.py opens them without a kernel).

Every wait is bounded: ``_wait`` (wait_for_function) by its timeout, every script run in a page by
``evaluate`` (Playwright's own evaluate has no timeout: a promise that never settles would wait forever).
What only blocks the page's thread, no timer in the page can bound: that is left to the test's cap
(pytest-timeout, pyproject.toml). A page opened with ``open_page`` leaves evidence of a failure or a
timeout in ``test-artifacts/browser/failed/`` (``save_evidence``): a screenshot, the page's console,
the JupyterLab server's log and the error.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from seqlab.notebook_rules import WIDGET_MIME

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
EVIDENCE = ARTIFACTS / "failed"

PAGE_TIMEOUT_S = 60          # JupyterLab to load, a kernel to start, widgets to show up
RUN_ALL_TIMEOUT_S = 120      # a widget fixture notebook (seconds alone; busy CI machines are slower)
REDRAW_TIMEOUT_S = 10        # one slider move to a new picture (typically well under 1 s)
EVALUATE_TIMEOUT_S = 60      # one script in the page: a command, a fetch, a few animation frames
SCREENSHOT_TIMEOUT_S = 10    # the evidence's screenshot (a page whose thread is blocked gives none)
CONSOLE_LINES = 5000         # the last lines of a page's console kept for the evidence


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


# -- page helpers ----------------------------------------------------------------------------------

# Defined in every page: the state of one widget view, as a reader sees it.
# pictures: the src of its images (ipywidgets.Image: a new blob URL for every new picture);
# status: LiveFigure's "redrawn in N ms" line; redraws: LiveFigure's redraw counter (data-redraws);
# readouts: the sliders' own readouts (they change in the browser alone, so they prove nothing);
# spoken: the text of its live region (LiveRegion: role="status"), region: that element's number, given
# the first time a snapshot sees it (the same number later: the same element, still on the page).
INIT_SCRIPT = r"""
window.__seqlabRegions = 0;
window.__seqlabSnap = (root) => {
  const imgs = [...root.querySelectorAll('img')];
  const text = (sel) => [...root.querySelectorAll(sel)].map(e => e.textContent.trim());
  const region = root.querySelector('[role="status"][aria-live="polite"]');
  if (region && !region.__seqlabRegion) region.__seqlabRegion = ++window.__seqlabRegions;
  return {
    spoken: region ? region.textContent : null,
    region: region ? region.__seqlabRegion : null,
    pictures: imgs.map(i => i.src),
    loaded: imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0),
    status: text('.widget-html-content').filter(t => /^redrawn in \d+ ms$/.test(t)).join(''),
    readouts: text('.widget-readout'),
    redraws: [...root.querySelectorAll('[data-redraws]')].map(e => e.dataset.redraws).join('|'),
  };
};
// when a move has been answered: {at, picture} once the kernel's redraw counter has moved on and the
// picture, if it changed, has loaded (picture: whether it changed); false while waiting. The counter,
// not a new picture: LiveFigure.redraw sends the picture first and the counter last, so a new picture
// alone may leave its counter still on the way -- the next move would then take that counter for its
// own answer, and a later move, pressed before the kernel had even seen the earlier ones, could cancel
// them out in ipywidgets' message throttle and never be answered (see _move).
window.__seqlabChanged = ([root, before]) => {
  const now = window.__seqlabSnap(root);
  if (!now.redraws || now.redraws === before.redraws) return false;
  const picture = now.pictures.join('|') !== before.pictures.join('|');
  return picture && !now.loaded ? false : {at: performance.now(), picture};
};
window.__seqlabDigest = async (src) => {
  const bytes = await (await fetch(src)).arrayBuffer();
  const hash = await crypto.subtle.digest('SHA-256', bytes);
  return [...new Uint8Array(hash)].map(b => b.toString(16).padStart(2, '0')).join('');
};
"""
KERNEL_STATUS_JS = """() => document.querySelector(
  '#jp-main-statusbar .jp-StatusBar-TextItem[title^="Change kernel"]')?.textContent || ''"""
# the kernel's own state, as the open notebook's kernel connection last heard it (every comm message,
# a widget's change too, is "busy" until the kernel has handled it and sent everything it answers)
KERNEL_IDLE_JS = "() => window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'"
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
    status = evaluate(page, KERNEL_STATUS_JS, what="the kernel's status bar", timeout_s=REDRAW_TIMEOUT_S)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what} (kernel status bar: {status!r})",
                pytrace=False)


_TIMED_OUT = "__seqlab: timed out__"
# the script's result, or _TIMED_OUT once the timer has won the race; an expression that is not a function
# (``performance.now()``) is its own result, as in Playwright's evaluate
_BOUNDED_JS = """async ({params}) => {{
  const __seqlabScript = (
{js}
  );
  let __seqlabTimer;
  const __seqlabLate = new Promise(resolve => {{ __seqlabTimer = setTimeout(() => resolve({timed_out}), __seqlabMs); }});
  try {{
    return await Promise.race([Promise.resolve().then(
      () => typeof __seqlabScript === 'function' ? __seqlabScript({call}) : __seqlabScript), __seqlabLate]);
  }} finally {{
    clearTimeout(__seqlabTimer);
  }}
}}"""


def evaluate(target, js: str, arg=None, *, what: str | None = None, timeout_s: float = EVALUATE_TIMEOUT_S):
    """``target.evaluate(js, arg)`` for a page, a locator or an element handle, with a bound: when what ``js``
    returns (a promise: a command, a fetch) has not settled within ``timeout_s``, the test fails, saying what
    it was waiting for."""
    on_element = not hasattr(target, "goto")
    bounded = _BOUNDED_JS.format(params="__seqlabElement, [__seqlabArg, __seqlabMs]" if on_element
                                 else "[__seqlabArg, __seqlabMs]",
                                 call="__seqlabElement, __seqlabArg" if on_element else "__seqlabArg",
                                 js=js, timed_out=json.dumps(_TIMED_OUT))
    result = target.evaluate(bounded, [arg, timeout_s * 1000])
    if isinstance(result, str) and result == _TIMED_OUT:
        what = what or "the script " + repr(" ".join(js.split())[:100])
        pytest.fail(f"timed out after {timeout_s:g} s waiting for {what} (in the page)", pytrace=False)
    return result


def _wait_kernel(page, state: str, what: str, timeout_s: float = PAGE_TIMEOUT_S) -> None:
    """Wait for the status bar's kernel item: "Python 3 (ipykernel) | Idle" for ``state="Idle"``,
    "No Kernel | ..." for ``state="No Kernel"``."""
    test = ("t.startsWith('No Kernel')" if state == "No Kernel"
            else f"!t.startsWith('No Kernel') && t.endsWith('| ' + {json.dumps(state)})")
    _wait(page, f"() => {{ const t = ({KERNEL_STATUS_JS})().trim(); return {test}; }}",
          f"the status bar to read kernel {state!r} ({what})", timeout_s)


def _new_page(browser, lab=None, viewport: dict | None = None):
    """A page in a context of its own, ``INIT_SCRIPT`` defined, its console recorded (``page.seqlab_console``)."""
    context = browser.new_context(viewport=viewport or {"width": 1400, "height": 1400})
    context.add_init_script(INIT_SCRIPT)
    page = context.new_page()
    console: deque[str] = deque(maxlen=CONSOLE_LINES)
    started = time.monotonic()
    page.on("console", lambda m: console.append(f"{time.monotonic() - started:8.1f} s [{m.type}] {m.text}"))
    page.on("pageerror", lambda e: console.append(f"{time.monotonic() - started:8.1f} s [pageerror] {e}"))
    page.seqlab_console = console
    return page


def evidence_name(nodeid: str) -> str:
    """The file name stem of a test's evidence, from its node id."""
    return _slug(nodeid.removeprefix("tests/browser/"))


def save_evidence(page, lab, error: BaseException) -> list[Path]:
    """What a failed browser test leaves behind: the error, a screenshot of ``page``, its console and the log of
    the JupyterLab server ``lab`` (if any), in ``EVIDENCE``, named after the current test. Each part on its own:
    one that cannot be had (a page whose thread is blocked gives no screenshot) is said in the error file."""
    name = evidence_name(os.environ.get("PYTEST_CURRENT_TEST", "browser test").rsplit(" (", 1)[0])
    EVIDENCE.mkdir(parents=True, exist_ok=True)
    notes, saved = [f"{type(error).__name__}: {error}"], []
    try:
        page.screenshot(path=EVIDENCE / f"{name}.png", timeout=SCREENSHOT_TIMEOUT_S * 1000)
        saved.append(EVIDENCE / f"{name}.png")
    except Exception as failed:                       # the page may be what hangs
        notes.append(f"no screenshot: {type(failed).__name__}: {str(failed).splitlines()[0]}")
    console = EVIDENCE / f"{name}.console.log"
    console.write_text("\n".join(getattr(page, "seqlab_console", ["(console not recorded)"])) + "\n")
    saved.append(console)
    if lab is not None and Path(lab.log).exists():
        shutil.copyfile(lab.log, EVIDENCE / f"{name}.jupyterlab.log")
        saved.append(EVIDENCE / f"{name}.jupyterlab.log")
    (EVIDENCE / f"{name}.error.txt").write_text("\n".join(notes) + "\n")
    saved.append(EVIDENCE / f"{name}.error.txt")
    print("evidence of the failure: " + ", ".join(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
                                                  for p in saved))
    return saved


@contextmanager
def open_page(browser, lab=None, viewport: dict | None = None):
    """``_new_page``, closed at the end of the block; a failure or a timeout (pytest-timeout's too) inside it
    first saves its evidence (``save_evidence``)."""
    page = _new_page(browser, lab, viewport)
    try:
        yield page
    except pytest.skip.Exception:
        page.context.close()
        raise
    except BaseException as error:
        try:
            save_evidence(page, lab, error)
        finally:
            try:
                page.context.close()
            except Exception:                         # the error that brought us here is the one to report
                pass
        raise
    else:
        page.context.close()


def _open_lab(page, lab, workspace: str, notebook: str | None = None) -> None:
    path = f"/tree/{notebook}" if notebook else ""
    page.goto(f"{lab.url}/lab/workspaces/{workspace}{path}?reset&token={lab.token}")
    _wait(page, "() => window.jupyterapp && window.jupyterapp.shell", "JupyterLab to start in the page "
          "(window.jupyterapp, exposed by --LabApp.expose_app_in_browser)", PAGE_TIMEOUT_S)
    evaluate(page, "() => window.jupyterapp.restored.then(() => true)",
             what="JupyterLab's plugins to start (jupyterapp.restored)", timeout_s=PAGE_TIMEOUT_S)
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
    """The error outputs of the open notebook: read from its model, since JupyterLab renders only the
    cells near the viewport (an error in a long notebook's last cell is not in the page), else the page."""
    from_model = evaluate(page, """() => {
        try {
            const cells = window.jupyterapp.shell.currentWidget.content.model.cells, errors = [];
            for (let i = 0; i < cells.length; i++) {
                const outputs = cells.get(i).outputs;
                for (let j = 0; outputs && j < outputs.length; j++) {
                    const o = outputs.get(j).toJSON();
                    if (o.output_type === 'error') errors.push(`cell ${i}: ${o.ename}: ${o.evalue}`.slice(0, 2000));
                }
            }
            return errors;
        } catch (e) { return null; }
    }""")
    if from_model:
        return from_model
    return evaluate(page, "(sel) => [...document.querySelectorAll(sel)].map(e => e.textContent.slice(0, 2000))",
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")


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
        element.select_option(index=(evaluate(element, "s => s.selectedIndex") + 1) % count)
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
    """Do ``act()`` (press a key on a slider, pick an option, click); wait for the kernel's answer (its
    redraw: see ``__seqlabChanged``); return the latency in ms and whether the picture changed.

    A move starts from an idle kernel. A widget model of ipywidgets sends one change at a time: until
    the kernel reports idle after it, later changes wait in the page, and only the latest value is
    sent. Two moves made in that window, one there and one back, reach the kernel as its own value,
    so it redraws nothing and the second move is never answered (the "lost" answers of a busy 2-core
    machine, where the idle comes late). Waiting for the idle -- and for the redraw counter, not just
    a new picture -- keeps every move a change of its own in the kernel; a control that does not
    answer still fails after REDRAW_TIMEOUT_S.
    """
    _wait(page, KERNEL_IDLE_JS, f"the kernel to be idle before {what}", REDRAW_TIMEOUT_S)
    before = evaluate(widget, "root => window.__seqlabSnap(root)")
    if not before["redraws"]:
        pytest.fail(f"{what}: the widget shows no redraw counter (data-redraws in LiveFigure's status line), "
                    "which is how this test knows that the kernel has answered a move", pytrace=False)
    started = evaluate(page, "performance.now()")
    act()
    answer = _wait(page, "window.__seqlabChanged", f"the kernel's redraw (a new picture, or the same one) after "
                   f"{what}", REDRAW_TIMEOUT_S, arg=[widget.element_handle(), before])
    answer = answer.json_value()
    return answer["at"] - started, answer["picture"]


def _run_all(page, notebook: str) -> float:
    """Run All Cells in the open ``notebook``; fails on a timeout or an error output. Returns its seconds."""
    started = time.perf_counter()
    outcome = evaluate(page, "() => window.jupyterapp.commands.execute('notebook:run-all-cells').then("
                             "ok => ok ? 'ok' : 'error')", what=f"Run All Cells of {notebook} to finish",
                       timeout_s=RUN_ALL_TIMEOUT_S)
    _wait_kernel(page, "Idle", f"{notebook} to finish running")
    errors = _error_outputs(page)
    assert outcome == "ok" and not errors, (f"{notebook}: Run All Cells stopped on an error:\n" + "\n".join(errors)
                                            if errors else f"{notebook}: Run All Cells reported a failure, and no "
                                            "cell holds an error output")
    seconds = time.perf_counter() - started
    print(f"{notebook}: Run All Cells took {seconds:.1f} s in the browser")
    return seconds


def _wait_widgets(page, notebook: str, expected: int, when: str) -> object:
    """The ``expected`` widget views of the open ``notebook``, once each shows a slider or a picture."""
    _wait(page, _widget_count_js(), f"{expected} widget(s) of {notebook} to show up with a slider or a "
          f"picture ({when})", PAGE_TIMEOUT_S, arg=expected)
    return page.locator(WIDGET_ROOTS)
