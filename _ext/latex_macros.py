"""One list of math macros for the HTML (MathJax) and the PDF (LaTeX).

The macros live in ``_config.yml`` under ``sphinx.config.mathjax3_config.tex.macros``, where
MathJax reads them. When the LaTeX builder runs, this extension writes the same macros into the
LaTeX preamble (``latex_elements["preamble"]``), so a macro added for MathJax cannot be missing
from the PDF. Each macro becomes ``\\providecommand`` then ``\\renewcommand``: some names already
exist in LaTeX or in Jupyter Book's class (``\\R``, ``\\argmax``), and the book's meaning wins.

A macro is written as MathJax takes it: a string (``E: "\\\\mathbb{E}"``) or a list
``[definition, number_of_arguments]`` (``norm: ["\\\\lVert #1 \\\\rVert", 1]``).
"""

from __future__ import annotations

import re

_NAME = re.compile(r"^[A-Za-z]+$")


def latex_definitions(macros: dict) -> str:
    """The LaTeX preamble lines that define MathJax's ``macros`` (a dict name -> definition)."""
    if not isinstance(macros, dict):
        raise ValueError(f"macros must be a dict of name -> definition, got {type(macros).__name__}")
    lines = []
    for name, spec in macros.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"macro name must be letters only (as MathJax and LaTeX need), got {name!r}")
        if isinstance(spec, str):
            body, nargs = spec, 0
        elif (isinstance(spec, (list, tuple)) and len(spec) == 2 and isinstance(spec[0], str)
              and isinstance(spec[1], int) and 0 <= spec[1] <= 9):
            body, nargs = spec
        else:
            raise ValueError(
                f"macro {name!r} must be a string or [definition, number of arguments 0-9], got {spec!r}")
        args = f"[{nargs}]" if nargs else ""
        lines.append(f"\\providecommand{{\\{name}}}{{}}\\renewcommand{{\\{name}}}{args}{{{body}}}")
    return "\n".join(lines) + "\n"


def _mathjax_macros(config) -> dict:
    mj = getattr(config, "mathjax3_config", None) or {}
    return (mj.get("tex") or {}).get("macros") or {}


def _add_preamble(app, config) -> None:
    block = "% Math macros, from mathjax3_config in _config.yml (_ext/latex_macros.py)\n"
    block += latex_definitions(_mathjax_macros(config))
    elements = dict(config.latex_elements or {})
    elements["preamble"] = elements.get("preamble", "") + "\n" + block
    config.latex_elements = elements


def setup(app):
    app.connect("config-inited", _add_preamble, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
