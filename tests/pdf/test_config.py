"""The PDF's configuration, checked without building it: the one list of math macros (_config.yml's
MathJax macros, written into the LaTeX preamble by ``_ext/latex_macros.py``) and the output that the
LaTeX builder picks from a cell output (a static image where the HTML shows an interactive one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))

from latex_macros import latex_definitions  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def test_string_and_argument_macros():
    tex = latex_definitions({"E": r"\mathbb{E}", "norm": [r"\lVert #1 \rVert", 1]})
    assert tex.splitlines() == [
        r"\providecommand{\E}{}\renewcommand{\E}{\mathbb{E}}",
        r"\providecommand{\norm}{}\renewcommand{\norm}[1]{\lVert #1 \rVert}",
    ]


def test_every_config_macro_reaches_latex():
    macros = CONFIG["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
    tex = latex_definitions(macros)
    for name, spec in macros.items():
        body = spec if isinstance(spec, str) else spec[0]
        assert f"\\renewcommand{{\\{name}}}" in tex and body in tex


@pytest.mark.parametrize("bad", [
    ["E", r"\mathbb{E}"],                 # not a dict
    {"E1": r"\mathbb{E}"},                # name with a digit
    {"E": 3},                             # definition not a string
    {"norm": [r"\lVert #1 \rVert", 10]},  # too many arguments
    {"norm": [r"\lVert #1 \rVert"]},      # list without the argument count
])
def test_bad_macros_raise(bad):
    with pytest.raises(ValueError, match="macro|macros"):
        latex_definitions(bad)


def _latex_priority() -> list[str]:
    from myst_nb.core.render import get_mime_priority

    overrides = CONFIG["sphinx"]["config"]["nb_mime_priority_overrides"]
    return get_mime_priority("latex", [tuple(o) for o in overrides])


@pytest.mark.parametrize("interactive", [
    "text/html", "application/javascript", "application/vnd.jupyter.widget-view+json",
    "application/vnd.plotly.v1+json", "application/vnd.bokehjs_exec.v0+json",
])
def test_pdf_shows_the_static_image_of_an_interactive_output(interactive):
    # An output with an interactive form and image/png (what an interactive figure must emit):
    # the LaTeX builder takes the image, and never the interactive form.
    priority = _latex_priority()
    output = {interactive: "...", "image/png": "...", "text/plain": "<Figure>"}
    chosen = next(mime for mime in priority if mime in output)
    assert chosen == "image/png"
    assert interactive not in priority


def test_pdf_keeps_text_and_markdown_outputs():
    priority = _latex_priority()
    # show_source's Markdown before its plain repr; a plain print still shows.
    assert priority.index("text/markdown") < priority.index("text/plain")
    assert priority.index("image/png") < priority.index("text/markdown")
