"""Progress bars for long loops (``tqdm.auto``: a widget in Jupyter, text in a terminal)."""

from __future__ import annotations

import os
import warnings


def progress(iterable=None, *, desc: str | None = None, total: int | None = None, **kwargs):
    """Wrap ``iterable`` in a ``tqdm.auto`` progress bar.

    Set the environment variable ``RLNOTES_PROGRESS=0`` to silence every bar (the book's HTML
    build does, so that pages show results, not bars).
    """
    with warnings.catch_warnings():
        # Without ipywidgets tqdm.auto falls back to text bars; its warning is noise here.
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    disable = os.environ.get("RLNOTES_PROGRESS", "1") == "0"
    return tqdm(iterable, desc=desc, total=total, disable=disable, leave=False, **kwargs)
