"""Every notebook as a student first sees it in JupyterLab, audited by axe-core in the light theme and in
the dark one: no serious or critical WCAG 2.1 A/AA violation caused by the course's own content;
JupyterLab's own findings listed apart. And what a notebook shows before anything runs.

One JupyterLab (conftest's ``lab``), one page; the committed, executed notebooks are opened one after
another without a kernel (nothing runs: the outputs are the saved ones) and closed again. Opened so, each
notebook must show every static figure it saved (loaded, with pixels), its status bar must say "No Kernel",
and each widget output must show no controls and no picture, only text (see ``without_kernel``) -- which is
why every widget has a static figure beside it. (JupyterLab saves no widget state after Run All either:
test_widgets_in_lab.py checks that on its widget fixtures.)

The page is made as tall as the notebook, so that every cell is rendered and inside the viewport (axe
cannot judge the colour contrast of what is outside it); then axe-core (the npm package, injected from
disk: nothing from a CDN) checks the whole page, in one theme, then again after switching to the other
(each notebook is opened and rendered once for both), and each element it flags is put on one side:

- **content**: inside a rendered markdown cell (``.jp-MarkdownOutput``) or an output
  (``.jp-OutputArea-output``) of the notebook: what the course wrote or its code printed and drew.
  A serious or critical finding here fails the test;
- **JupyterLab**: everything else (menus, toolbars, the file browser, the code editors, the prompts),
  by region. Listed in the report, never a failure: the course cannot change it.

One case sits between the two: a figure whose output carries alt text in its metadata
(``display(fig, metadata={"image/png": {"alt": ...}})``, which nbconvert, Sphinx and the HTML edition turn
into ``alt``) is still an ``<img>`` without ``alt`` in JupyterLab 4.6, whose image renderer ignores that
metadata (jupyter/enhancement-proposals#120). axe's ``image-alt`` on such a figure is counted as
JupyterLab's (``alt_text_dropped``); a figure without alt text in its metadata is the course's and fails.

The findings per notebook go to ``test-artifacts/lab-audit.json`` (light) and ``lab-audit-dark.json``; a table
is printed for each theme.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import nbformat

from accessibility import AXE_OPTIONS, AXE_TAGS, AXE_TIMEOUT_S, FAILING_IMPACTS, IMPACTS, axe_source
from lab_pages import (KERNEL_STATUS_JS, NOTEBOOK_IMAGES, PAGE_TIMEOUT_S, ROOT, WIDGET_NOTEBOOKS, _open_lab, _wait,
                       _wait_notebook_open, evaluate, open_page)
from seqlab.notebook_rules import WIDGET_MIME

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
ARTIFACT = ROOT / "test-artifacts" / "lab-audit.json"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
WIDTH = 1280

# Every cell rendered: each markdown cell, each image loaded, and MathJax done (its count of typeset
# equations unchanged for MATH_SETTLED_MS; ``window.__seqlabMath`` holds the last count and since when).
MATH_SETTLED_MS = 500
RENDERED_JS = f"""() => {{
  const nb = window.jupyterapp.shell.currentWidget.content, panel = document.querySelector('{PANEL}');
  const cells = panel.querySelectorAll('.jp-Cell').length;
  const markdown = [...Array(nb.model.cells.length).keys()].filter(i => nb.model.cells.get(i).type === 'markdown');
  const math = panel.querySelectorAll('mjx-container').length, now = performance.now();
  if (!window.__seqlabMath || window.__seqlabMath.count !== math) window.__seqlabMath = {{count: math, since: now}};
  const settled = now - window.__seqlabMath.since >= {MATH_SETTLED_MS};
  return cells === nb.model.cells.length && settled
    && panel.querySelectorAll('.jp-MarkdownCell .jp-MarkdownOutput').length === markdown.length
    && [...panel.querySelectorAll('img')].every(i => i.complete);
}}"""
CONTENT_HEIGHT_JS = f"""() => document.querySelector('{PANEL} .jp-WindowedPanel-viewport').scrollHeight
                               - document.querySelector('{PANEL} .jp-WindowedPanel-outer').clientHeight"""

# axe over the whole page; each flagged element with its side (content or JupyterLab) and region, and for
# an <img> in an output whether that output's metadata holds alt text (read from JupyterLab's own model)
AUDIT_JS = f"""async (options) => {{
  const nb = window.jupyterapp.shell.currentWidget.content;
  const REGIONS = [['.jp-Cell-inputArea', 'code editor'], ['.jp-InputPrompt, .jp-OutputPrompt', 'prompt'],
                   ['.jp-NotebookPanel-toolbar', 'notebook toolbar'], ['.jp-NotebookPanel', 'notebook panel'],
                   ['#jp-left-stack, .jp-SideBar', 'side bars'], ['#jp-top-panel, #jp-menu-panel', 'menus'],
                   ['#jp-main-statusbar', 'status bar'], ['.lm-DockPanel-tabBar', 'tabs']];
  const altInMetadata = (img) => {{
    const cell = nb.widgets.find(c => c.node.contains(img)), child = img.closest('.jp-OutputArea-child');
    if (!cell || !child || !cell.model.outputs) return false;
    const output = cell.model.outputs.get([...child.parentElement.children].indexOf(child)).toJSON();
    const meta = output.metadata || {{}};
    return Boolean((meta['image/png'] || {{}}).alt || meta.alt);
  }};
  const result = await axe.run(document, options);
  return result.violations.flatMap(v => v.nodes.map(n => {{
    const e = n.element;
    const content = Boolean(e.closest('{PANEL} .jp-MarkdownOutput, {PANEL} .jp-OutputArea-output'));
    const region = content ? 'content' : (REGIONS.find(([sel]) => e.closest(sel)) || [null, 'page'])[1];
    return {{rule: v.id, impact: v.impact, content, region, html: n.html.slice(0, 200),
             cell: nb.widgets.findIndex(c => c.node.contains(e)),
             alt_in_metadata: v.id === 'image-alt' && e.tagName === 'IMG' && content && altInMetadata(e)}};
  }}));
}}"""


def _open_rendered(page, notebook: str) -> None:
    """Open ``notebook`` without a kernel, make the page as tall as its cells, wait until all are rendered."""
    evaluate(page, """(nb) => window.jupyterapp.commands.execute('docmanager:open',
                         {path: nb, kernelPreference: {shouldStart: false, canStart: false}}).then(() => null)""",
             notebook)            # (the widget it resolves to cannot come back to Python)
    _wait_notebook_open(page, notebook)
    _wait(page, f"() => document.querySelectorAll('{PANEL} .jp-Cell').length === "
          "window.jupyterapp.shell.currentWidget.content.model.cells.length", f"the cells of {notebook}",
          PAGE_TIMEOUT_S)
    viewport = page.viewport_size
    page.set_viewport_size({"width": WIDTH, "height": viewport["height"] + evaluate(page, CONTENT_HEIGHT_JS) + 40})
    evaluate(page, "() => { window.__seqlabMath = null; }")
    _wait(page, RENDERED_JS, f"every cell of {notebook} to render (markdown, equations, images)", PAGE_TIMEOUT_S)


def _close(page, notebook: str) -> None:
    # nothing was edited; should JupyterLab have touched the model anyway, no "save changes?" dialog
    evaluate(page, """() => { const w = window.jupyterapp.shell.currentWidget;
                             w.context.model.dirty = false; w.close(); }""")
    _wait(page, "() => !document.querySelector('.jp-NotebookPanel')", f"{notebook} to close", PAGE_TIMEOUT_S)
    page.set_viewport_size({"width": WIDTH, "height": 800})


def _summary(nodes: list[dict]) -> dict:
    """Counts of flagged elements by impact, and per rule its impact, count and first example."""
    rules: dict[str, dict] = {}
    for n in nodes:
        rule = rules.setdefault(n["rule"], {"impact": n["impact"], "nodes": 0, "regions": Counter(),
                                            "example": n["html"]})
        rule["nodes"] += 1
        rule["regions"][n["region"]] += 1
    by_impact = Counter(n["impact"] for n in nodes)
    return {"by_impact": {i: by_impact[i] for i in IMPACTS if by_impact[i]},
            "rules": {r: {**v, "regions": dict(v["regions"])} for r, v in sorted(rules.items())}}


def _audit_page(page, notebook: str, screenshot: Path | None = None) -> dict:
    """axe over the open, rendered ``notebook`` in the current theme: the findings, sorted by side."""
    nodes = evaluate(page, AUDIT_JS, {**AXE_OPTIONS, "elementRef": True}, what=f"axe-core's audit of {notebook}", timeout_s=AXE_TIMEOUT_S)
    if screenshot is not None:        # 1,600 pixels around the first figure (or the top), small enough to look at
        top = evaluate(page, f"() => {{ const i = document.querySelector('{PANEL} .jp-OutputArea-output img');"
                             " return i ? Math.max(0, i.getBoundingClientRect().top - 300) : 0; }")
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=screenshot, type="jpeg", quality=60, clip={
            "x": 0, "y": top, "width": WIDTH, "height": min(1600, page.viewport_size["height"] - top)})
    content = [n for n in nodes if n["content"] and not n["alt_in_metadata"]]
    return {"content": _summary(content),
            "jupyterlab": _summary([n for n in nodes if not n["content"]]),
            "alt_text_dropped": sum(n["alt_in_metadata"] for n in nodes),
            "failing": [f"{n['impact']} {n['rule']} in cell {n['cell']}: {n['html']}" for n in content
                        if n["impact"] in FAILING_IMPACTS]}


# per widget output of the open notebook: the text it shows and whether it drew controls or a picture
WIDGET_OUTPUTS_JS = f"""() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(cell => cell.model.type === 'code')
  .flatMap(cell => cell.outputArea.widgets.map((view, i) => [view, cell.model.outputs.get(i).toJSON()]))
  .filter(([view, output]) => output.data && output.data['{WIDGET_MIME}'])
  .map(([view, output]) => ({{text: view.node.innerText.trim(), fallback: String(output.data['text/plain'] || ''),
                              live: view.node.querySelectorAll('img, .widget-slider').length}}))"""


def without_kernel(page, notebook: str) -> list[str]:
    """What the open ``notebook`` shows with no kernel, against its file: what is wrong (empty if nothing).

    A widget output shows no controls and no picture then. What it shows instead depends on trust: in a
    notebook this JupyterLab has not run (a fresh clone's: untrusted), JupyterLab will not use the widget's
    renderer and shows the output's text form (``VBox(children=(...``, which notebook 00 shows a student);
    in one it has run and saved (trusted), ipywidgets' "Loading widget..." line."""
    saved = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    figures = sum("image/png" in o.get("data", {}) for c in saved.cells if c.cell_type == "code" for o in c.outputs)
    shown = evaluate(page, f"""() => [...document.querySelectorAll('{NOTEBOOK_IMAGES}')]
                               .filter(i => i.complete && i.naturalWidth > 0).length""")
    widget_outputs = evaluate(page, WIDGET_OUTPUTS_JS)
    status = evaluate(page, KERNEL_STATUS_JS).strip()
    wrong = []
    if shown != figures:
        wrong.append(f"{shown} of its {figures} static figure(s) shown, loaded")
    if len(widget_outputs) != WIDGET_NOTEBOOKS.get(notebook, 0):
        wrong.append(f"{len(widget_outputs)} widget output(s) in the page, {WIDGET_NOTEBOOKS.get(notebook, 0)} in the file")
    for i, w in enumerate(widget_outputs):
        if w["live"]:
            wrong.append(f"widget output {i} drew {w['live']} control(s) or picture(s) without a kernel")
        if not (w["text"].startswith("Loading widget") or (w["fallback"] and w["text"] == w["fallback"].strip())):
            wrong.append(f"widget output {i} shows {w['text'][:80]!r}: neither its text form nor 'Loading widget...'")
    if not status.startswith("No Kernel"):
        wrong.append(f"the status bar says {status!r}, not No Kernel")
    return wrong


def _table(report: dict) -> str:
    def counts(side: dict) -> str:
        return " ".join(f"{i[:4]} {side['by_impact'].get(i, 0):>3}" for i in IMPACTS)

    lines = [f"{'notebook':<32} {'content: serious+critical':>26}   JupyterLab's own (elements)       alt dropped",
             "-" * 110]
    for notebook, r in report.items():
        failing = sum(r["content"]["by_impact"].get(i, 0) for i in FAILING_IMPACTS)
        lines.append(f"{notebook:<32} {failing:>26}   {counts(r['jupyterlab'])}   {r['alt_text_dropped']:>3}")
    return "\n".join(lines)


THEMES = {"JupyterLab Light": ARTIFACT, "JupyterLab Dark": ARTIFACT.with_name("lab-audit-dark.json")}
SCREENSHOTS = ROOT / "test-artifacts" / "lab-dark"


def _set_theme(page, theme: str) -> None:
    """Switch JupyterLab to ``theme`` and wait until its CSS is in (JupyterLab marks the body when it is)."""
    light = "true" if "Light" in theme else "false"
    evaluate(page, "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme}).then(() => null)",
             theme)
    _wait(page, f"() => document.body.dataset.jpThemeName === {theme!r} && document.body.dataset.jpThemeLight === "
          f"'{light}'", f"the theme {theme}", PAGE_TIMEOUT_S)


def test_notebooks_in_jupyterlab_pass_axe_and_show_their_figures_without_a_kernel(browser, lab, site_npm_packages):
    """In the light theme and in the dark one: there, axe's colour-contrast rule checks that what the course
    writes (markdown, printed text, the widgets' HTML) stays legible on a dark background; every figure's PNG is
    opaque white (tests/test_colours.py). A screenshot around each notebook's first figure in the dark theme goes
    to test-artifacts/lab-dark/, for a person to look at. Each notebook is opened once: audited in the theme the
    page is in, then in the other (so the theme changes once per notebook, not twice)."""
    started = time.perf_counter()
    reports: dict[str, dict] = {theme: {} for theme in THEMES}
    not_shown = {}
    with open_page(browser, lab) as page:
        page.set_viewport_size({"width": WIDTH, "height": 800})
        _open_lab(page, lab, "audit")
        order = list(THEMES)
        _set_theme(page, order[0])
        page.add_script_tag(content=axe_source(site_npm_packages))
        for notebook in NOTEBOOKS:
            _open_rendered(page, notebook)
            try:
                not_shown[notebook] = without_kernel(page, notebook)
                for i, theme in enumerate(order):
                    if i:
                        _set_theme(page, theme)
                    reports[theme][notebook] = _audit_page(page, notebook, screenshot=(
                        SCREENSHOTS / f"{Path(notebook).stem}.jpg" if "Dark" in theme else None))
            finally:
                _close(page, notebook)
            order.reverse()                  # the next notebook starts in the theme this one ended in
    seconds = round(time.perf_counter() - started, 1)
    for theme, artifact in THEMES.items():
        artifact.parent.mkdir(exist_ok=True)
        artifact.write_text(json.dumps({"axe_tags": AXE_TAGS, "theme": theme, "seconds_both_themes": seconds,
                                        "notebooks": reports[theme]}, indent=1) + "\n")
        print(f"\naxe-core in JupyterLab ({theme}), {len(reports[theme])} notebooks "
              f"(details: {artifact.relative_to(ROOT)})")
        print(_table(reports[theme]))
    print(f"both themes, {len(NOTEBOOKS)} notebooks, in {seconds} s")
    not_shown = {notebook: wrong for notebook, wrong in not_shown.items() if wrong}
    assert not not_shown, "opened without a kernel, in JupyterLab:\n" + "\n".join(
        f"{nb}: {'; '.join(wrong)}" for nb, wrong in not_shown.items())
    failing = {(theme, notebook): r["failing"] for theme, report in reports.items()
               for notebook, r in report.items() if r["failing"]}
    assert not failing, ("serious or critical accessibility violations in the course's own content in JupyterLab "
                         "(axe-core, WCAG 2.1 AA):\n"
                         + "\n".join(f"{nb} ({theme}): {found}" for (theme, nb), found in failing.items()))
