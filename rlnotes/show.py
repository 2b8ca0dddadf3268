"""Show the package's own source in a chapter, so the code on the page cannot drift from the code
that runs (chapter conventions, see CONTRIBUTING.md)."""

from __future__ import annotations

import inspect


class SourceCode:
    """The source of a function, class or module, rendered with syntax highlighting in Jupyter
    and in the HTML book, and as plain text in a terminal."""

    def __init__(self, obj):
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj)
                or inspect.ismethod(obj)):
            raise ValueError(f"obj must be a function, class, method or module, got {type(obj).__name__}")
        self.obj = obj
        self.source = inspect.getsource(obj)
        self.where = f"{obj.__module__}.{obj.__qualname__}" if hasattr(obj, "__qualname__") else obj.__name__

    def __repr__(self) -> str:
        return f"# {self.where}\n{self.source}"

    def _repr_markdown_(self) -> str:
        return f"```python\n# {self.where}\n{self.source}```\n"


def show_source(obj) -> SourceCode:
    """Display the source of ``obj`` (a function, class or module of rlnotes) in a notebook.

    Example: ``show_source(rlnotes.mdp.value_iteration)`` as the last line of a cell.
    """
    return SourceCode(obj)
