"""The course as a student and an instructor see it in JupyterLab: the equations render and the
slideshow command (jupyterlab-slideshow's deck:start) is there. Uses the fixtures of conftest.py."""

from __future__ import annotations

import pytest
from lab_pages import ARTIFACTS, PAGE_TIMEOUT_S, _open_lab, _wait, _wait_kernel, evaluate, open_page

NOTEBOOK = "01-why-sequences.ipynb"  # heavy on LaTeX


@pytest.mark.timeout(300)             # JupyterLab's start included
def test_equations_render_and_slides_are_available(browser, lab):
    errors: list[str] = []
    with open_page(browser, lab) as page:
        page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
        _open_lab(page, lab, "course")
        evaluate(page, """(nb) => window.jupyterapp.commands.execute('docmanager:open',
                             {path: nb, kernelPreference: {shouldStart: false, canStart: false}})""", NOTEBOOK)
        _wait_kernel(page, "No Kernel", f"{NOTEBOOK} opened without a kernel")
        # JupyterLab typesets markdown cells as they scroll into view: look at the first few
        _wait(page, "() => document.querySelectorAll('.jp-MarkdownOutput mjx-container').length >= 3",
              f"MathJax to typeset the equations of {NOTEBOOK}", PAGE_TIMEOUT_S)
        broken = page.locator(".jp-MarkdownOutput mjx-merror, .jp-MarkdownOutput .MathJax_Error").count()
        assert broken == 0, f"{broken} equation(s) of {NOTEBOOK} failed to typeset"
        page.screenshot(path=ARTIFACTS / "01-why-sequences-equations.png")
        assert evaluate(page, "() => window.jupyterapp.commands.hasCommand('deck:start')"), \
            "jupyterlab-slideshow's deck:start command is missing: is jupyterlab-slideshow installed and enabled?"
        assert not evaluate(page, "() => window.jupyterapp.commands.hasCommand('RISE:slideshow')"), \
            "jupyterlab-rise is installed: its slideshow cannot draw widgets (see README); the set-up removes it"
        # ipywidgets' manager (jupyterlab-manager 5.0.16) throws "reading 'kernel'" when a notebook
        # opens with no kernel; harmless (the widgets show "Loading widget..."), and not ours
        ours = [e for e in errors if not ("reading 'kernel'" in e and "jupyterlab-manager" in e)]
        assert not ours, f"errors in the page: {ours[:3]}"
