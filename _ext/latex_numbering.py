"""Number exercises in the PDF as in the HTML, and equations and figures by chapter.

sphinx-jupyterbook-latex sets ``numfig_secnum_depth = 2`` for the LaTeX builder. Two things read
that setting:

- Sphinx's environment, which numbers exercises (sphinx-exercise): with 2, an exercise of chapter
  1's exercises section is "Exercise 1.20.1" where the HTML says "Exercise 1.1";
- the LaTeX writer, which numbers equations and figures: with 2 (the book's top level is a part),
  "(2.3)", chapter then number; with 1 they would restart at "(1)" in every chapter.

So the environment is built with the HTML's value (Sphinx's default, 1), and the writer gets 2.
The environment pickled on disk then has the HTML's configuration, which also spares a full
re-read of every page when `make pdf` follows `make book` (both share _build/.doctrees).
"""

from __future__ import annotations

from sphinx.builders.latex import LaTeXBuilder

HTML_SECNUM_DEPTH = 1   # Sphinx's default, which the HTML build uses
LATEX_SECNUM_DEPTH = 2  # sphinx-jupyterbook-latex's value for a book whose top level is a part


def _environment_as_html(app) -> None:
    if isinstance(app.builder, LaTeXBuilder):
        app.config.numfig_secnum_depth = HTML_SECNUM_DEPTH


def _writer_by_chapter(app, doctree, docname) -> None:
    # The LaTeX builder resolves every page (doctree-resolved) after the environment is pickled
    # and numbered, and before its writer reads the setting.
    if isinstance(app.builder, LaTeXBuilder):
        app.config.numfig_secnum_depth = LATEX_SECNUM_DEPTH


def setup(app):
    # after sphinx_jupyterbook_latex's builder-inited handler (default priority 500)
    app.connect("builder-inited", _environment_as_html, priority=900)
    app.connect("doctree-resolved", _writer_by_chapter)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
