"""Serve Vega from the built site, not a CDN, so the figures with a knob work offline.

The book's interactive figures (``rlnotes.plotting.interactive``) are Vega-Lite specifications
drawn in the page by vega-embed. The PyPI wheel ``vl-convert-python`` ships Vega, Vega-Lite and
vega-embed and writes them as one JavaScript bundle (``vl_convert.javascript_bundle``). This
extension

- tells the notebook kernels that the HTML book serves Vega (the environment variable
  ``RLNOTES_VEGA_JS``, inherited by the kernels myst-nb starts): the figures then emit
  ``text/html`` that draws with the page's Vega, beside a PNG for the PDF;
- writes the bundle once to the output's ``_static/rlnotes/vega-bundle.js`` (wrapped in a
  function, so that it is a classic script that works from ``file://`` and declares nothing
  global but ``vegaEmbed``, ``vega`` and ``vegaLite``);
- adds the script only to the pages that hold a figure.

(Like MathJax, it must not live in a source ``_static/`` folder: Jupyter Book would add every
``.js`` file there to every page.)
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "RLNOTES_VEGA_JS"      # rlnotes.plotting.interactive.BOOK_ENV_VAR
VL_VERSION = "6.4"              # rlnotes.plotting.interactive.VL_VERSION
BUNDLE = "rlnotes/vega-bundle.js"
MARKER = "rlnotes-knob-figure"   # the class of a figure's <div>


def _bundle_text() -> str:
    import vl_convert as vlc

    header = (f"/* Vega {vlc.get_vega_version()}, Vega-Lite {VL_VERSION}, vega-embed "
              f"{vlc.get_vega_embed_version()}: BSD-3-Clause, (c) the Vega project; bundled by "
              f"vl-convert-python. */\n")
    return header + "(function () {\n" + vlc.javascript_bundle(vl_version=VL_VERSION) + "\n})();\n"


def _write_bundle(app) -> None:
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / BUNDLE
    text = _bundle_text()
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _add_script(app, pagename, templatename, context, doctree) -> None:
    if app.builder.format == "html" and MARKER in context.get("body", ""):
        app.add_js_file(BUNDLE)


def setup(app):
    import vl_convert  # noqa: F401  (fail early with a clear message if it is missing)

    os.environ[ENV_VAR] = "1"
    app.connect("builder-inited", _write_bundle)
    app.connect("html-page-context", _add_script)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
