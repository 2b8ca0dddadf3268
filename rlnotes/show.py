"""Show the package's own source in a chapter, so the code on the page cannot drift from the code
that runs (chapter conventions, see CONTRIBUTING.md)."""

from __future__ import annotations

import ast
import re
import inspect
import textwrap

_CHECK_NAME = re.compile(r"^_?(check|require|validate)_")
_OMITTED = "# ... argument checks omitted ..."
_OMITTED_MORE = "# ... argument checks omitted (here and below) ..."
_BORDER = re.compile(r"^\s*=+(\s+=+)+\s*$")  # a border line of an RST simple table
_BLOCKS = ("body", "orelse", "finalbody", "handlers")


def _is_check_call(node) -> bool:
    """A call of a validation helper: ``_check_x(...)``, ``require_x(...)``, ``validate_x(...)``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return bool(_CHECK_NAME.match(name))


def _checks_only(body) -> bool:
    """A block that only validates: it ends in ``raise``, or each of its statements is a check."""
    return bool(body) and (isinstance(body[-1], ast.Raise) or all(_is_check(b) for b in body))


def _is_check(stmt) -> bool:
    """A statement that only validates arguments: ``if ...: raise ...`` (every branch only
    validates, at any depth), a loop whose body only validates, a bare call of a validation
    helper, or ``x = _check_x(x, ...)``."""
    if isinstance(stmt, ast.If):
        return _checks_only(stmt.body) and (not stmt.orelse or _checks_only(stmt.orelse))
    if isinstance(stmt, (ast.For, ast.While)):
        return not stmt.orelse and all(_is_check(b) for b in stmt.body)
    if isinstance(stmt, ast.Expr):
        return _is_check_call(stmt.value)
    if isinstance(stmt, ast.Assign):
        v = stmt.value
        if not _is_check_call(v):
            return False
        one_name = len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        if not v.args or not one_name:  # ``a, b = _check_ab(a, b)``: a check
            return True
        # ``x = require_x(x)`` is a check; ``y = require_x(x)`` shows as ``y = x``
        return isinstance(v.args[0], ast.Name) and v.args[0].id == stmt.targets[0].id
    return False


def _check_calls_in(stmt):
    """The outermost calls of validation helpers in a statement's own expressions (not in its
    nested blocks), each to be replaced by its first argument: ``y = require_x(x).t()`` shows
    as ``y = x.t()``."""
    found = []

    def visit(node):
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            return  # a check inside a comprehension stays: its first argument alone may not read
        if _is_check_call(node) and node.args:
            found.append(node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for field, value in ast.iter_fields(stmt):
        if field in _BLOCKS or field == "decorator_list":
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, ast.AST):
                visit(v)
    return found


def _strip_docstring_tables(doc_lines, name):
    """The docstring's lines (a list, edited in place) without its RST argument tables and its
    ``Conventions:`` paragraph, which say how arguments are checked rather than what is computed."""
    out, i, n = [], 0, len(doc_lines)
    while i < n:
        line = doc_lines[i]
        if _BORDER.match(line):
            j, last = i, i
            while j < n and doc_lines[j].strip():
                if _BORDER.match(doc_lines[j]):
                    last = j
                j += 1
            if last > i:
                indent = re.match(r"\s*", line).group(0)
                out.append(f"{indent}(table of arguments omitted: help({name}) shows it)\n")
                i = last + 1
                continue
        if line.strip().startswith("Conventions:"):
            while i < n and doc_lines[i].strip():
                i += 1
            while i < n and not doc_lines[i].strip():
                i += 1
            continue
        out.append(line)
        i += 1
    return out


def strip_checks(source: str) -> str:
    """``source`` without its argument checks: the checking statements of each function body
    (``if ...: raise`` blocks at any depth, calls of ``_check_*``/``require_*`` helpers, loops
    that only validate) are dropped and one comment line marks where the first stood; a helper
    call used as a value is replaced by its first argument; the docstring loses its argument
    table and its ``Conventions:`` paragraph. Used by ``show_source(obj, checks=False)``."""
    text = textwrap.dedent(source)
    lines = text.splitlines(keepends=True)
    indent0 = ""
    for raw, ded in zip(source.splitlines(), text.splitlines()):
        if ded.strip():
            indent0 = raw[: len(raw) - len(ded)]
            break
    tree = ast.parse(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno, col_bytes):  # ast's columns count UTF-8 bytes
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode()[:col_bytes].decode(errors="ignore"))

    edits = []  # (start, end, replacement) in characters of text, non-overlapping

    def drop(first_line, last_line):
        edits.append((starts[first_line - 1], starts[last_line], None))

    def process(block):
        for stmt in block:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a nested function is processed on its own
            if _is_check(stmt):
                drop(stmt.lineno, stmt.end_lineno)
                continue
            if isinstance(stmt, ast.If) and stmt.orelse and _checks_only(stmt.orelse):
                first = stmt.orelse[0]
                if len(stmt.orelse) == 1 and isinstance(first, ast.If) \
                        and lines[first.lineno - 1].lstrip().startswith("elif"):
                    drop(first.lineno, first.end_lineno)  # an ``elif`` that only validates
                elif lines[first.lineno - 2].strip() == "else:":
                    drop(first.lineno - 1, stmt.orelse[-1].end_lineno)
                process(stmt.body)
                continue
            for call in _check_calls_in(stmt):
                arg = call.args[0]
                edits.append((offset(call.lineno, call.col_offset),
                              offset(call.end_lineno, call.end_col_offset),
                              text[offset(arg.lineno, arg.col_offset):
                                   offset(arg.end_lineno, arg.end_col_offset)]))
            for field in _BLOCKS:
                for sub in getattr(stmt, field, []) or []:
                    if isinstance(sub, ast.ExceptHandler):
                        process(sub.body)
                if field != "handlers":
                    process(getattr(stmt, field, []) or [])

    markers = {}  # first dropped line of each function -> its marker
    doc_ranges = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            doc_ranges.append((body[0].lineno, body[0].end_lineno, node.name))
        n_before = len(edits)
        process(body)
        dropped = sorted(e for e in edits[n_before:] if e[2] is None)
        if dropped:
            first = dropped[0]
            line = text[first[0]:].splitlines()[0]
            indent = re.match(r"\s*", line).group(0)
            many = len(dropped) > 1 and any(a[1] < b[0] for a, b in zip(dropped, dropped[1:]))
            markers[first[0]] = f"{indent}{_OMITTED_MORE if many else _OMITTED}\n"
    for first, last, name in doc_ranges:
        block = lines[first - 1:last]
        stripped = _strip_docstring_tables(block, name)
        if stripped != block:
            edits.append((starts[first - 1], starts[last], "".join(stripped)))
    if not edits:
        return source
    edits.sort()
    merged = []
    for start, end, rep in edits:  # adjacent dropped runs join
        if merged and rep is None and merged[-1][2] is None and merged[-1][1] >= start:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]), None)
        elif merged and start < merged[-1][1]:
            continue  # inside a dropped statement
        else:
            merged.append((start, end, rep))
    out = text
    for start, end, rep in reversed(merged):
        if rep is None:
            rep = markers.get(start, "")
        out = out[:start] + rep + out[end:]
    if indent0:
        out = "".join(indent0 + line if line.strip() else line
                      for line in out.splitlines(keepends=True))
    return out


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

    With ``checks=False`` the argument checks (``if ...: raise ValueError`` blocks at any depth,
    calls of ``_check_*`` and ``require_*`` helpers, loops that only validate) are left out, and
    one comment line marks where the first of them stood; a helper call used as a value shows
    as its first argument (``y = require_x(x).t()`` as ``y = x.t()``); the docstring loses its
    table of arguments and its ``Conventions:`` paragraph. The page shows the algorithm; the
    code that runs still has its checks.

    Example: ``show_source(rlnotes.mdp.value_iteration)`` as the last line of a cell.
    """
    return SourceCode(obj, checks=checks)
