"""Show the package's own source in a chapter, so the code on the page cannot drift from the code
that runs (chapter conventions, see CONTRIBUTING.md)."""

from __future__ import annotations

import ast
import re
import inspect
import textwrap

_CHECK_NAME = re.compile(r"^_?(check|require|validate)_")
_OMITTED = "# ... argument checks omitted ..."


def _is_check_call(node) -> bool:
    """A call of a validation helper: ``_check_x(...)``, ``require_x(...)``, ``validate_x(...)``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return bool(_CHECK_NAME.match(name))


def _is_check(stmt) -> bool:
    """A statement that only validates arguments: ``if ...: raise ...`` (every branch raises), a
    bare call of a validation helper, or ``x = _check_x(x, ...)``."""
    if isinstance(stmt, ast.If):
        def raises_only(body):
            return bool(body) and all(isinstance(b, ast.Raise) or (isinstance(b, ast.If) and _is_check(b))
                                      for b in body)
        return raises_only(stmt.body) and (not stmt.orelse or raises_only(stmt.orelse))
    if isinstance(stmt, ast.Expr):
        return _is_check_call(stmt.value)
    if isinstance(stmt, ast.Assign):
        return _is_check_call(stmt.value)
    return False


def strip_checks(source: str) -> str:
    """``source`` without its argument checks: each run of checking statements in a function body
    becomes one comment line. Used by ``show_source(obj, checks=False)``."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(textwrap.dedent(source))
    drop = {}  # first line (0-based) -> last line of a run, with the run's indentation
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        run = []
        for stmt in node.body + [None]:
            if stmt is not None and _is_check(stmt):
                run.append(stmt)
                continue
            if run:
                start = run[0].lineno - 1
                start = min([start] + [d.lineno - 1 for d in getattr(run[0], "decorator_list", [])])
                drop[start] = run[-1].end_lineno - 1
            run = []
    if not drop:
        return source
    out, i = [], 0
    while i < len(lines):
        if i in drop:
            indent = re.match(r"\s*", lines[i]).group(0)
            out.append(f"{indent}{_OMITTED}\n")
            i = drop[i] + 1
        else:
            out.append(lines[i])
            i += 1
    return "".join(out)


class SourceCode:
    """The source of a function, class or module, rendered with syntax highlighting in Jupyter
    and in the HTML book, and as plain text in a terminal."""

    def __init__(self, obj, checks: bool = True):
        if not isinstance(checks, bool):
            raise ValueError(f"checks must be True or False, got {checks!r}")
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj)
                or inspect.ismethod(obj)):
            raise ValueError(f"obj must be a function, class, method or module, got {type(obj).__name__}")
        self.obj = obj
        self.source = inspect.getsource(obj)
        if not checks:
            self.source = strip_checks(self.source)
        self.where = f"{obj.__module__}.{obj.__qualname__}" if hasattr(obj, "__qualname__") else obj.__name__

    def __repr__(self) -> str:
        return f"# {self.where}\n{self.source}"

    def _repr_markdown_(self) -> str:
        return f"```python\n# {self.where}\n{self.source}```\n"


def show_source(obj, checks: bool = True) -> SourceCode:
    """Display the source of ``obj`` (a function, class or module of rlnotes) in a notebook.

    With ``checks=False`` the argument checks (``if ...: raise ValueError``, calls of ``_check_*``
    and ``require_*`` helpers) are left out, each run of them replaced by one comment line, so
    that the page shows the algorithm; the code that runs still has them.

    Example: ``show_source(rlnotes.mdp.value_iteration)`` as the last line of a cell.
    """
    return SourceCode(obj, checks=checks)
