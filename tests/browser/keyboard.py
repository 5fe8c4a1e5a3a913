"""Phase 2 of test_widgets_in_lab: every control of a live widget operated with the keyboard alone.

A student without a mouse selects the widget's cell in command mode (ArrowUp/ArrowDown; here the cell is
made the active one and focused, which is where those keys leave the focus), then presses Tab: the focus
walks into the widget and through its controls in the order they are drawn. For each enabled control
(slider handle, dropdown, toggle button, checkbox), in that order:

- it is reached by Tab (other stops on the way, e.g. a slider's editable readout, are passed and listed);
- its focus is visible: its computed outline, box-shadow, border colour or background differs from the
  same control unfocused (which of them is recorded), and it matches ``:focus-visible``;
- keys operate it -- ArrowRight/ArrowLeft on a slider; Space on a toggle button or a checkbox; on a
  dropdown Alt+ArrowDown (opens its list), ArrowDown/ArrowUp, Enter -- and the kernel answers with a new
  picture (``lab_pages._move``). A dropdown's plain arrow keys do not reach it: JupyterLab's command mode
  takes them to move between cells (ipywidgets#3912), which is why its list is opened first;
- the focus is still on it afterwards (a redraw that took the focus away would strand the student).

The findings go to ``test-artifacts/browser/keyboard-NN-name.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab_pages import ARTIFACTS, WIDGET_ROOTS, _direction, _move, _other_controls, _sliders, evaluate

MAX_TABS_PER_CONTROL = 8      # a slider's readout sits between two controls; more means a lost focus
FOCUS_STYLE = ("outlineStyle", "outlineWidth", "outlineColor", "boxShadow", "borderColor", "backgroundColor")
STYLE_JS = (f"(e) => {{ const s = getComputedStyle(e); "
            f"return Object.fromEntries({list(FOCUS_STYLE)}.map(k => [k, s[k]])); }}")
ACTIVE_JS = """() => { const e = document.activeElement;
  return e ? `${e.tagName.toLowerCase()}.${[...e.classList].slice(0, 3).join('.')}` : 'nothing'; }"""
FOCUS_CELL_JS = """(root) => { const nb = window.jupyterapp.shell.currentWidget.content;
  const i = nb.widgets.findIndex(c => c.node.contains(root));
  nb.activeCellIndex = i; nb.mode = 'command'; nb.activeCell.node.focus(); return i; }"""


def _controls(widget) -> list[tuple[str, str, object]]:
    """(label, kind, element handle) for each enabled control of a widget view, in document (Tab) order."""
    found = [(label, "slider", handle) for label, handle in _sliders(widget)]
    found += _other_controls(widget)
    handles = [(label, kind, element.element_handle()) for label, kind, element in found]
    order = evaluate(widget, "(root, els) => els.map(e => [...root.querySelectorAll('*')].indexOf(e))",
                     [h for _, _, h in handles])
    return [c for _, c in sorted(zip(order, handles), key=lambda pair: pair[0])]


def _keys(kind: str, element) -> list[str]:
    """The key presses that move ``element`` once."""
    if kind == "slider":
        return [_direction(element)]
    if kind == "dropdown":
        last = evaluate(element, "s => s.selectedIndex === s.options.length - 1")
        return ["Alt+ArrowDown", "ArrowUp" if last else "ArrowDown", "Enter"]
    return ["Space"]


def _press(page, keys: list[str]) -> None:
    for key in keys:
        page.keyboard.press(key)


def _tab_to(page, element, what: str) -> list[str]:
    """Press Tab until ``element`` has the focus; return the other stops passed on the way."""
    passed = []
    for _ in range(MAX_TABS_PER_CONTROL):
        page.keyboard.press("Tab")
        if evaluate(element, "e => document.activeElement === e"):
            return passed
        passed.append(evaluate(page, ACTIVE_JS))
    pytest.fail(f"{what}: not reached after {MAX_TABS_PER_CONTROL} presses of Tab (the focus went to {passed})",
                pytrace=False)


def operate_by_keyboard(page, notebook: str) -> dict:
    """Tab to each control of each widget of ``notebook`` (already run), check its focus, operate it by key."""
    page.mouse.move(0, 0)                        # no hover style on any control: only the focus differs
    report = {}
    widgets = page.locator(WIDGET_ROOTS)
    for w in range(widgets.count()):
        widget = widgets.nth(w)
        widget.scroll_into_view_if_needed()
        evaluate(page, FOCUS_CELL_JS, widget.element_handle())
        report[f"widget{w}"] = entries = []
        for label, kind, element in _controls(widget):
            what = f"{kind} {label!r} of widget {w} in {notebook}"
            unfocused = evaluate(element, STYLE_JS)
            passed = _tab_to(page, element, what)
            focused = evaluate(element, STYLE_JS)
            changed = [k for k in FOCUS_STYLE if focused[k] != unfocused[k]]
            assert changed and evaluate(element, "e => e.matches(':focus-visible')"), (
                f"{what}: focus by Tab shows nothing (computed {', '.join(FOCUS_STYLE)} as when unfocused: {focused})")
            keys = _keys(kind, element)
            key = ", ".join(keys)
            ms, picture = _move(page, widget, lambda: _press(page, keys), f"pressing {key} on {what}")
            assert picture, f"{what}: {key} brought a redraw of the same picture"
            assert evaluate(element, "e => document.activeElement === e"), (
                f"{what}: the focus moved to {evaluate(page, ACTIVE_JS)} after {key} and its redraw")
            entries.append({"control": label, "kind": kind, "key": key, "ms": round(ms), "tab_stops_passed": passed,
                            "focus_shows_as": {k: focused[k] for k in changed}})
            print(f"{notebook} widget {w}: Tab to {kind} {label!r} (passing {passed or 'nothing'}), focus shows as "
                  f"{changed}; {key} -> new picture in {ms:.0f} ms")
    (ARTIFACTS / f"keyboard-{Path(notebook).stem}.json").write_text(json.dumps(report, indent=1))
    return report
