"""Serve MathJax from the built site, not a CDN, so math renders offline.

The PyPI wheel ``django-static-mathjax`` ships MathJax 3 as the importable package ``mathjax``.
This extension points Sphinx's ``mathjax_path`` at ``_static/mathjax/tex-chtml.js`` and, when the
HTML build finishes, copies the wheel's ``es5`` bundle there. (It must not live in a source
``_static/`` folder: Jupyter Book would add every ``.js`` file there to every page.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

MATHJAX_ENTRY = "mathjax/tex-chtml.js"


def _bundle() -> Path:
    import mathjax  # the django-static-mathjax wheel

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax bundle not found at {es5}; is django-static-mathjax installed?")
    return es5


def _set_path(app, config) -> None:
    config.mathjax_path = MATHJAX_ENTRY


def _copy_bundle(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    # sre (speech) is large and unused by tex-chtml; skip it.
    shutil.copytree(_bundle(), target, ignore=shutil.ignore_patterns("sre", "*.map"))


def setup(app):
    _bundle()  # fail early with a clear message
    app.connect("config-inited", _set_path, priority=900)
    app.connect("build-finished", _copy_bundle)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
