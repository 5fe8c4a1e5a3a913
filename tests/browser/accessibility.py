"""What the accessibility audits (test_site.py on the HTML edition, test_lab_audit.py in JupyterLab) ask of
axe-core, and how they load it: the npm package that the set-up installs (course.npm_packages), injected from
disk, never from a CDN."""

from __future__ import annotations

from pathlib import Path

AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]     # WCAG 2.1 A and AA
FAILING_IMPACTS = ("serious", "critical")
IMPACTS = ("critical", "serious", "moderate", "minor")
# axe.run's options: only the WCAG rules, and only violations worked out in full (axe skips the details of
# passes, "incomplete" and inapplicable rules: the audits never read them, and they are most of axe's time)
AXE_OPTIONS = {"runOnly": {"type": "tag", "values": AXE_TAGS}, "resultTypes": ["violations"]}
AXE_TIMEOUT_S = 120        # one axe.run over a whole page (a long notebook made as tall as its cells)


def axe_source(node_modules: Path) -> str:
    """axe-core's script, to inject with ``page.add_script_tag(content=...)``."""
    return (node_modules / "axe-core" / "axe.min.js").read_text()
