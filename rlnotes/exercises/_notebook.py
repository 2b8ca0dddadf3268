"""Reading the exercise format of CONTRIBUTING.md out of chapter notebooks.

Everything here is plain text processing (no kernel, no imports of chapter code):

* solution regions: the lines of a code cell between a line ``# BEGIN SOLUTION`` and a line
  ``# END SOLUTION`` (:func:`solution_regions`, :func:`stub_regions`);
* written solutions: sphinx-exercise ``{solution}`` blocks (backtick or colon fences of any
  length) and gated ``{solution-start}`` ... ``{solution-end}`` blocks
  (:func:`strip_written_solutions`);
* coding exercises: a code cell holding a solution region, followed by the check cell that
  calls one registered check (:func:`find_exercises`);
* the exercises section: the cells from the ``## Exercises`` heading to the end of the
  notebook, which start with their own setup cell and run on their own
  (:func:`exercises_section`);
* points: a line ``# points: 2`` in a check cell (default 1; :func:`check_cell_points`);
* the book: its root folder (:func:`find_book_dir`) and its chapter notebooks
  (:func:`chapter_notebooks`).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: A marker line. ``#`` may be repeated (nbgrader writes ``### BEGIN SOLUTION``); text after the
#: marker is allowed. Anything else mentioning BEGIN/END SOLUTION is rejected as malformed, so a
#: typo can never leak a solution into the student edition.
BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)#+[ \t]*BEGIN SOLUTION(?![A-Za-z0-9_])")
END_RE = re.compile(r"^[ \t]*#+[ \t]*END SOLUTION(?![A-Za-z0-9_])")
_LOOSE_RE = re.compile(r"(?i)\b(BEGIN|END)[ _]*SOLUTION")

_FENCE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})(?P<info>.*)$")
_DIRECTIVE_RE = re.compile(r"^[ \t]*\{(?P<name>[A-Za-z0-9_:.+-]+)\}(?P<arg>.*)$")
_LABEL_RE = re.compile(r"^[ \t]*:label:[ \t]*(?P<label>\S+)[ \t]*$")
#: Directives whose body is literal text, not Markdown (a ``{solution}`` inside is an example).
_LITERAL_DIRECTIVES = {"code", "code-block", "code-cell", "sourcecode", "literalinclude", "math",
                       "raw", "eval-rst", "eval-md", "csv-table", "mermaid", "graphviz"}
_EXERCISE_DIRECTIVES = {"exercise", "exercise-start"}
#: The heading that opens a chapter's exercises section (a line of a Markdown cell).
EXERCISES_HEADING_RE = re.compile(r"^[ ]{0,3}##[ \t]+Exercises[ \t]*#*[ \t]*$", re.M)
#: The points of a coding exercise: a comment line in its check cell.
POINTS_RE = re.compile(r"^[ \t]*#[ \t]*points[ \t]*:[ \t]*(?P<value>.*?)[ \t]*$", re.M | re.I)


class FormatError(ValueError):
    """A chapter notebook breaks the exercise format of CONTRIBUTING.md."""


def cell_text(cell) -> str:
    """The source of a notebook cell as one string (nbformat stores str or a list of lines)."""
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(str(s) for s in src)
    if not isinstance(src, str):
        raise FormatError(f"cell source must be a string or a list of strings, got {type(src).__name__}")
    return src


# --------------------------------------------------------------------------------------------
# Solution regions in code


@dataclass(frozen=True)
class Region:
    """Lines ``begin`` .. ``end`` (0-based, inclusive, markers included) of a code cell."""

    begin: int
    end: int
    indent: str


def solution_regions(source: str, where: str = "cell") -> list[Region]:
    """The solution regions of a code cell's source, in order.

    Raises :class:`FormatError` (naming ``where``) for a BEGIN without END, an END without BEGIN,
    nested regions, or a line that mentions BEGIN/END SOLUTION without being a marker line.
    """
    if not isinstance(source, str):
        raise ValueError(f"source must be a string, got {type(source).__name__}")
    regions: list[Region] = []
    open_at: int | None = None
    indent = ""
    for i, line in enumerate(source.splitlines()):
        begin, end = BEGIN_RE.match(line), END_RE.match(line)
        if begin:
            if open_at is not None:
                raise FormatError(f"{where}, line {i + 1}: BEGIN SOLUTION inside another solution "
                                  f"region (opened on line {open_at + 1})")
            open_at, indent = i, begin.group("indent")
        elif end:
            if open_at is None:
                raise FormatError(f"{where}, line {i + 1}: END SOLUTION without a BEGIN SOLUTION")
            regions.append(Region(open_at, i, indent))
            open_at = None
        elif _LOOSE_RE.search(line) and line.lstrip().startswith("#"):
            raise FormatError(f"{where}, line {i + 1}: malformed solution marker {line.strip()!r}; "
                              "write a line '# BEGIN SOLUTION' or '# END SOLUTION'")
    if open_at is not None:
        raise FormatError(f"{where}, line {open_at + 1}: BEGIN SOLUTION without an END SOLUTION")
    return regions


def stub_message(label: str | None) -> str:
    what = f"exercise {label}" if label else "this exercise"
    return f"{what}: replace this line with your solution"


def stub_regions(source: str, label: str | None = None, where: str = "cell") -> str:
    """``source`` with each solution region (markers included) replaced by one line
    ``raise NotImplementedError(...)`` at the indentation of the BEGIN marker."""
    regions = solution_regions(source, where)
    if not regions:
        return source
    lines = source.splitlines()
    out: list[str] = []
    pos = 0
    for r in regions:
        out.extend(lines[pos:r.begin])
        out.append(f"{r.indent}raise NotImplementedError({stub_message(label)!r})")
        pos = r.end + 1
    out.extend(lines[pos:])
    text = "\n".join(out)
    if source.endswith("\n"):
        text += "\n"
    return text


# --------------------------------------------------------------------------------------------
# Written solutions in Markdown


@dataclass
class _Fence:
    char: str
    length: int
    name: str | None   # directive name, or None for a code block
    literal: bool      # body is literal text (code block or literal directive)
    start: int


def _closes(line: str, fence: _Fence) -> bool:
    stripped = line.strip()
    return (len(stripped) >= fence.length and set(stripped) == {fence.char})


def strip_written_solutions(text: str, in_gate: bool = False) -> tuple[str, int, bool]:
    """Remove written solutions from MyST Markdown.

    Removes every ``{solution}`` directive block (backtick or colon fences of any length,
    at any nesting level outside literal blocks) and everything from a ``{solution-start}``
    block to the end of the matching ``{solution-end}`` block. A ``{solution}`` shown inside a
    code block (an example in the docs) is left alone.

    ``in_gate`` says that a ``{solution-start}`` opened in an earlier cell is still open; the
    returned triple is ``(new_text, number_of_blocks_removed, still_in_gate)``.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    lines = text.splitlines(keepends=True)
    keep = [True] * len(lines)
    stack: list[_Fence] = []
    removed = 0
    drop_from: int | None = 0 if in_gate else None  # first line of the removal under way
    drop_fence: _Fence | None = None                 # the {solution} fence being removed
    gate = in_gate
    for i, line in enumerate(lines):
        if stack and stack[-1].literal:
            if _closes(line, stack[-1]):
                stack.pop()
            continue
        if stack and _closes(line, stack[-1]):
            fence = stack.pop()
            if fence is drop_fence:
                keep[drop_from:i + 1] = [False] * (i + 1 - drop_from)
                drop_from, drop_fence = None, None
                removed += 1
            elif fence.name == "solution-end" and gate:
                keep[drop_from:i + 1] = [False] * (i + 1 - drop_from)
                drop_from, gate = None, False
                removed += 1
            continue
        m = _FENCE_RE.match(line)
        if not m:
            continue
        fence_str, info = m.group("fence"), m.group("info")
        if fence_str[0] == "`" and "`" in info:
            continue  # not a fence (CommonMark: no backtick in a backtick fence's info string)
        d = _DIRECTIVE_RE.match(info)
        name = d.group("name") if d else None
        if fence_str[0] == ":" and name is None:
            if info.strip() == "":
                continue  # a lone ':::' that closes nothing we track
            name = info.strip().split()[0]
        literal = name is None or name in _LITERAL_DIRECTIVES
        fence = _Fence(fence_str[0], len(fence_str), name, literal, i)
        stack.append(fence)
        if drop_from is None and name == "solution":
            drop_from, drop_fence = i, fence
        elif drop_from is None and name == "solution-start":
            drop_from, gate = i, True
    if drop_from is not None:
        # An unclosed block runs to the end of the text (as in MyST); a gate stays open.
        keep[drop_from:] = [False] * (len(lines) - drop_from)
        if not gate:
            removed += 1
    new = "".join(line for line, k in zip(lines, keep) if k)
    return new, removed, gate


# --------------------------------------------------------------------------------------------
# Exercises


@dataclass
class CheckCall:
    """The call in a check cell: ``name(*args, **kwargs)`` with argument expressions as text."""

    name: str
    args: list[str] = field(default_factory=list)
    kwargs: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def names(self) -> list[str]:
        """The variable names the call reads (the names the exercise asks the student for)."""
        out: list[str] = []
        for expr in [*self.args, *self.kwargs.values()]:
            for node in ast.walk(ast.parse(expr, mode="eval")):
                if isinstance(node, ast.Name) and node.id not in out:
                    out.append(node.id)
        return out


@dataclass
class Exercise:
    """A coding exercise of a master notebook."""

    id: str                 # the exercise label (or the check name; see find_exercises)
    label: str | None       # the :label: of the {exercise} block it belongs to
    check: CheckCall
    solution_cell: int      # index of the code cell with the solution region(s)
    check_cell: int         # index of the check cell
    points: float = 1.0     # from a line "# points: N" in the check cell


def check_cell_points(source: str, where: str = "check cell") -> float:
    """The points of a check cell: the number on a line ``# points: N`` (default 1).

    Raises :class:`FormatError` for a value that is not a positive number, or for two such lines.
    """
    found = POINTS_RE.findall(source)
    if not found:
        return 1.0
    if len(found) > 1:
        raise FormatError(f"{where}: more than one '# points:' line")
    try:
        value = float(found[0])
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        raise FormatError(f"{where}: '# points: {found[0]}' must give a positive number of points")
    return value


def is_exercises_heading(cell) -> bool:
    """Whether ``cell`` is a Markdown cell holding the ``## Exercises`` heading."""
    return cell.get("cell_type") == "markdown" and bool(EXERCISES_HEADING_RE.search(cell_text(cell)))


def exercises_section(cells) -> int | None:
    """Index of the first cell after the Markdown cell with the ``## Exercises`` heading (the
    exercises section runs from there to the end of the notebook), or None without a heading.
    With several such headings, the last one counts."""
    start = None
    for i, cell in enumerate(cells):
        if isinstance(cell, dict) and is_exercises_heading(cell):
            start = i + 1
    return start


def _check_call(source: str, is_check) -> CheckCall | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else None)
            if name and is_check(name):
                calls.append((name, stmt.value))
    if len(calls) != 1:
        return None
    name, call = calls[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    return CheckCall(name=name, args=[ast.unparse(a) for a in call.args],
                     kwargs={k.arg: ast.unparse(k.value) for k in call.keywords},
                     source=source.strip())


def default_is_check(name: str) -> bool:
    return name.startswith("check_")


def exercise_labels(text: str) -> list[str]:
    """The ``:label:`` of every ``{exercise}`` / ``{exercise-start}`` block in Markdown text."""
    labels = []
    in_ex = False
    for line in text.splitlines():
        m = _FENCE_RE.match(line)
        if m:
            d = _DIRECTIVE_RE.match(m.group("info"))
            in_ex = bool(d and d.group("name") in _EXERCISE_DIRECTIVES)
            continue
        if in_ex:
            lm = _LABEL_RE.match(line)
            if lm:
                labels.append(lm.group("label"))
                in_ex = False
            elif line.strip() and not line.lstrip().startswith(":"):
                in_ex = False  # the options are over; this block has no label
    return labels


def cells_with_labels(cells):
    """Yield ``(index, cell, kind, text, label)`` for each cell, where ``label`` is the
    ``:label:`` of the nearest ``{exercise}`` block at or before the cell (None before the first).

    The one definition of which exercise a cell belongs to, shared by the student edition (the
    stub names it) and the grader (it is the exercise's id in ``grades.csv``).
    """
    label = None
    for i, cell in enumerate(cells):
        kind = cell.get("cell_type")
        text = cell_text(cell)
        if kind == "markdown":
            labels = exercise_labels(text)
            if labels:
                label = labels[-1]
        yield i, cell, kind, text, label


def find_exercises(nb, is_check=default_is_check, where: str = "notebook") -> tuple[list[Exercise], list[str]]:
    """The coding exercises of a master notebook, and warnings about regions that are not graded.

    A coding exercise is a code cell holding a solution region, followed by the next code cell,
    which must call exactly one check (``is_check(name)`` is true for check names). Its id is the
    ``:label:`` of the nearest preceding ``{exercise}`` block; when one label has several coding
    parts, or no exercise block precedes, the id is ``label/check_name`` or the check name.
    """
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ValueError(f"nb must be a notebook (a dict with a 'cells' list), got {type(nb).__name__}")
    found: list[Exercise] = []
    warnings: list[str] = []
    for i, cell, kind, text, label in cells_with_labels(cells):
        if kind != "code" or not solution_regions(text, f"{where}, cell {i}"):
            continue
        nxt = next((j for j in range(i + 1, len(cells)) if cells[j].get("cell_type") == "code"), None)
        call = _check_call(cell_text(cells[nxt]), is_check) if nxt is not None else None
        if call is None:
            warnings.append(f"{where}, cell {i}: a solution region with no check cell after it "
                            "(the region is stubbed in the student edition but not graded)")
            continue
        points = check_cell_points(cell_text(cells[nxt]), f"{where}, cell {nxt}")
        found.append(Exercise(id="", label=label, check=call, solution_cell=i, check_cell=nxt,
                              points=points))
    per_label: dict = {}
    for ex in found:
        per_label.setdefault(ex.label, []).append(ex)
    for lab, exs in per_label.items():
        for ex in exs:
            if lab is None:
                ex.id = ex.check.name
            elif len(exs) == 1:
                ex.id = lab
            else:
                ex.id = f"{lab}/{ex.check.name}"
    ids = [ex.id for ex in found]
    for dup in {x for x in ids if ids.count(x) > 1}:
        n = 0
        for ex in found:
            if ex.id == dup:
                n += 1
                ex.id = f"{dup}#{n}"
    return found, warnings


# --------------------------------------------------------------------------------------------
# The book


def find_book_dir(start: str | os.PathLike | None = None) -> Path:
    """The book's root: the first folder holding ``_toc.yml`` walking up from ``start`` (the
    working directory by default), else the folder above the installed ``rlnotes`` package."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / "_toc.yml").is_file():
            return folder
    pkg_root = Path(__file__).resolve().parents[2]
    if (pkg_root / "_toc.yml").is_file():
        return pkg_root
    raise ValueError(f"book_dir: no _toc.yml found in {here} or its parents, nor next to the "
                     f"rlnotes package ({pkg_root}); pass --book-dir")


def check_book_dir(book_dir) -> Path:
    if book_dir is None:
        return find_book_dir()
    if not isinstance(book_dir, (str, os.PathLike)):
        raise ValueError(f"book_dir must be a path, got {type(book_dir).__name__}")
    path = Path(book_dir).resolve()
    if not path.is_dir():
        raise ValueError(f"book_dir must be an existing folder, got {str(book_dir)!r}")
    if not (path / "_toc.yml").is_file() and not any(path.rglob("*.ipynb")):
        raise ValueError(f"book_dir must hold a _toc.yml or notebooks, {str(book_dir)!r} holds neither")
    return path


_TOC_ENTRY_RE = re.compile(r"^\s*(?:-\s*)?(?:file|root)\s*:\s*['\"]?([^'\"#\s]+)")
_SKIP_DIRS = {"_build", ".ipynb_checkpoints", ".venv", ".git", "__pycache__", "node_modules"}


def chapter_notebooks(book_dir) -> list[Path]:
    """The chapter notebooks of the book, relative to ``book_dir``, in table-of-contents order:
    the ``file:``/``root:`` entries of ``_toc.yml`` that are notebooks, or, without a
    ``_toc.yml``, every ``*.ipynb`` below ``book_dir`` (build and checkpoint folders skipped)."""
    book_dir = check_book_dir(book_dir)
    toc = book_dir / "_toc.yml"
    found: list[Path] = []
    if toc.is_file():
        for line in toc.read_text(encoding="utf-8").splitlines():
            m = _TOC_ENTRY_RE.match(line)
            if not m:
                continue
            entry = Path(m.group(1))
            for cand in ([entry] if entry.suffix else [entry.with_suffix(".ipynb")]):
                if cand.suffix == ".ipynb" and (book_dir / cand).is_file() and cand not in found:
                    found.append(cand)
        return found
    for path in sorted(book_dir.rglob("*.ipynb")):
        rel = path.relative_to(book_dir)
        if not any(part in _SKIP_DIRS or part.startswith(".") for part in rel.parts[:-1]):
            found.append(rel)
    return found
