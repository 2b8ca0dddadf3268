"""The one list of math macros: _config.yml's MathJax macros, written into the LaTeX preamble by
``_ext/latex_macros.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))

from latex_macros import latex_definitions  # noqa: E402


def test_string_and_argument_macros():
    tex = latex_definitions({"E": r"\mathbb{E}", "norm": [r"\lVert #1 \rVert", 1]})
    assert tex.splitlines() == [
        r"\providecommand{\E}{}\renewcommand{\E}{\mathbb{E}}",
        r"\providecommand{\norm}{}\renewcommand{\norm}[1]{\lVert #1 \rVert}",
    ]


def test_every_config_macro_reaches_latex():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    macros = config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
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
