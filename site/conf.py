"""Sphinx configuration of the course's offline HTML edition (built by scripts/build_site.py; see README).

The executed notebooks are shown as committed (nothing is run), in teaching order, with the book theme's
navigation and table of contents. Nothing on a page is fetched from the network: MathJax is served from the
build itself (copied from site/package.json's npm package into _static/mathjax), no widget JavaScript is
loaded (a widget's output is replaced by a note; every widget has a static figure beside it), and the theme's
own assets are local. A figure's alt text is the one its notebook stored with it.
"""

from __future__ import annotations

project = "seqlab"
author = "the seqlab course"
copyright = "the seqlab course"
language = "en"

extensions = ["myst_nb"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
master_doc = "index"

# The notebooks are shown as committed: executed, with outputs, never re-run here.
nb_execution_mode = "off"
nb_ipywidgets_js = {}                 # no require.js / widget manager from a CDN
myst_enable_extensions = ["dollarmath", "amsmath", "html_image"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]

# MathJax 3 from the build's own _static (scripts/build_site.py copies it there)
mathjax_path = "mathjax/tex-mml-chtml.js"

html_theme = "sphinx_book_theme"
html_title = "seqlab: from recurrent networks to Transformers"
html_static_path = ["_static"]
templates_path = ["_templates"]       # one theme template overridden, for accessibility (see there)
html_css_files = ["seqlab.css"]
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_source_button": False,
    "use_repository_button": False,
    "navigation_with_keys": False,    # the arrow keys stay the reader's (screen readers, scrolling)
}


def _alt_from_output_metadata() -> None:
    """myst-nb takes an image's alt text from cell-level options only; the course stores it with each output
    (``display(fig, metadata={"image/png": {"alt": ...}})``, as JupyterLab and nbconvert read it). Copy it over."""
    from myst_nb.core.render import NbElementRenderer

    render_image = NbElementRenderer.render_image

    def render_image_with_alt(self, data):
        nodes = render_image(self, data)
        alt = data.output_metadata.get(data.mime_type, {}).get("alt")
        if alt and nodes:
            nodes[0]["alt"] = str(alt)
        return nodes

    NbElementRenderer.render_image = render_image_with_alt


_alt_from_output_metadata()
