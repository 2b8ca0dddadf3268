"""Number exercises, figures and tables in the PDF as in the HTML.

sphinx-jupyterbook-latex sets ``numfig_secnum_depth = 2`` for the LaTeX builder, which numbers an
exercise of chapter 1's exercises section "Exercise 1.20.1" where the HTML says "Exercise 1.1".
This extension sets it back to the HTML's value (Sphinx's default, 1) once that extension has run.
Keeping the configuration the same for both builders also spares a full re-read of every page
when `make pdf` follows `make book` (both share _build/.doctrees).
"""

from __future__ import annotations

from sphinx.builders.latex import LaTeXBuilder

HTML_SECNUM_DEPTH = 1


def _same_numbering_as_html(app) -> None:
    if isinstance(app.builder, LaTeXBuilder):
        app.config.numfig_secnum_depth = HTML_SECNUM_DEPTH


def setup(app):
    # after sphinx_jupyterbook_latex's builder-inited handler (default priority 500)
    app.connect("builder-inited", _same_numbering_as_html, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
