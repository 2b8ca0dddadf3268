"""The API reference page (book/api.md): Sphinx autodoc, with each docstring shown as written.

The package's docstrings are written to be read in a terminal (``help()``) and in the chapters'
printed source: ASCII tables, formulas on indented lines, names in double backquotes. Parsed as
reStructuredText they would render unevenly (and warn, which fails the strict build), so this
extension turns on ``sphinx.ext.autodoc`` and shows every docstring it collects as a literal
block, exactly as ``help()`` prints it. Signatures come from the code, without type hints (their
targets, torch and numpy types, have no pages in the book).
"""

from __future__ import annotations


def _settings(app, config) -> None:
    config.autodoc_typehints = "none"
    config.autodoc_member_order = "bysource"
    config.autodoc_inherit_docstrings = False


def _as_written(app, what, name, obj, options, lines) -> None:
    while lines and not lines[-1].strip():
        lines.pop()
    if lines:
        lines[:] = ["::", ""] + [f"    {line}" if line.strip() else "" for line in lines] + [""]


def setup(app):
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("config-inited", _settings)
    app.connect("autodoc-process-docstring", _as_written)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
