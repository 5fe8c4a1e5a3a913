"""The offline HTML edition (`make site`), audited in Chromium: no external request, and axe-core finds no
serious or critical accessibility violation on any page.

The site is built once per run from the committed notebooks (scripts/build_site.py, about 20 s) into a
temporary folder and served on 127.0.0.1. Every page is loaded with every request outside that server
refused and recorded; then axe-core (the npm package pinned in site/package.json, installed by the set-up,
injected from disk: nothing from a CDN) checks it against WCAG 2.1 A and AA. The findings, per page and
impact, go to test-artifacts/site-audit.json, with each page's figures and how many carry alt text.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

import build_site  # a script: the one build the README's `make site` runs
from accessibility import AXE_OPTIONS, AXE_TIMEOUT_S, FAILING_IMPACTS, axe_source
from lab_pages import evaluate, open_page

ROOT = Path(__file__).resolve().parents[2]

ARTIFACT = ROOT / "test-artifacts" / "site-audit.json"


@pytest.fixture(scope="module")
def site(site_npm_packages, tmp_path_factory) -> Path:
    return build_site.build(tmp_path_factory.mktemp("site") / "html")


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:   # one line per file would bury the test output
        pass


def audit_page(browser, base: str, page_path: str, axe: str) -> dict:
    """Load one page with outside requests refused; return its external requests, axe violations, figures."""
    external: list[str] = []

    def route(request_route):
        host = urlparse(request_route.request.url).hostname
        if host in ("127.0.0.1", None):
            request_route.continue_()
        else:
            external.append(request_route.request.url)
            request_route.abort()

    with open_page(browser, viewport={"width": 1280, "height": 720}) as page:
        page.route("**/*", route)
        page.goto(f"{base}/{page_path}", wait_until="load")
        page.wait_for_timeout(300)                       # MathJax typesets after load
        page.add_script_tag(content=axe)
        result = evaluate(page, "options => axe.run(document, options)", AXE_OPTIONS,
                          what=f"axe-core's audit of {page_path}", timeout_s=AXE_TIMEOUT_S)
        figures = evaluate(page, """() => Array.from(document.querySelectorAll('img')).map(img => {
            const alt = img.getAttribute('alt') || '';
            return {src: img.getAttribute('src'), alt: alt, described: alt !== '' && !alt.endsWith('.png')};
        })""")
    violations = [{"id": v["id"], "impact": v["impact"], "help": v["help"], "nodes": len(v["nodes"]),
                   "example": v["nodes"][0]["html"][:200] if v["nodes"] else ""} for v in result["violations"]]
    return {"external_requests": external, "violations": violations,
            "figures": len(figures), "figures_with_alt_text": sum(f["described"] for f in figures)}


def test_every_page_is_offline_and_passes_axe(site, served, browser, site_npm_packages):
    axe = axe_source(site_npm_packages)
    pages = [p for p in json.loads((site / "pages.json").read_text()) if not p.startswith("_static/")]
    assert "index.html" in pages and sum(p.startswith("notebooks/") for p in pages) == len(
        list((ROOT / "notebooks").glob("*.ipynb")))
    report = {page: audit_page(browser, served, page, axe) for page in pages}
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(json.dumps(report, indent=1) + "\n")
    external = {page: r["external_requests"] for page, r in report.items() if r["external_requests"]}
    failing = {page: [f"{v['impact']} {v['id']} on {v['nodes']} element(s), e.g. {v['example']}"
                      for v in r["violations"] if v["impact"] in FAILING_IMPACTS]
               for page, r in report.items()}
    failing = {page: found for page, found in failing.items() if found}
    assert not external, f"pages that reach outside the site: {external}"
    assert not failing, "serious or critical accessibility violations (axe-core, WCAG 2.1 AA):\n" + "\n".join(
        f"{page}: {found}" for page, found in failing.items())
