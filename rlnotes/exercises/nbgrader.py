"""An nbgrader course from the book: ``python -m rlnotes.exercises nbgrader COURSE_DIR``.

One assignment per chapter with coding exercises, named after the chapter's file
(``source/td_learning/td_learning.ipynb``). The assignment notebook is the chapter's exercises
section (it runs on its own: see CONTRIBUTING.md), after a title cell that names the chapter, so
that ``nbgrader autograde`` runs the exercises, not the chapter's demos and training runs. Cells
get nbgrader's metadata (schema 3):

* a code cell with a solution region (``# BEGIN SOLUTION`` ... ``# END SOLUTION``): an
  "autograded answer" (``solution: true``); nbgrader's ``generate_assignment`` replaces the
  region by ``raise NotImplementedError()`` at the region's indentation, as our student edition
  does;
* its check cell: an "autograder tests" cell (``grade: true``, ``locked: true``) worth the
  exercise's points (``# points: N`` in the check cell, default 1); the check raises on a wrong
  answer, so the cell fails and scores 0;
* every other cell: read-only (``locked: true``), so ``autograde`` restores it from the source.

Written solutions (``{solution}`` blocks) are removed, as in the student edition: written
exercises are graded by hand. ``COURSE_DIR/nbgrader_config.py`` sets the course id and the
stub. The checks need the ``rlnotes`` package in the kernel that nbgrader starts (the
kernelspec ``python3`` of the notebooks).
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

from rlnotes.exercises._notebook import (
    cell_text, chapter_notebooks, check_book_dir, exercises_section, find_exercises,
    solution_regions, strip_written_solutions,
)

__all__ = ["write_course", "assignment_notebook", "CONFIG"]

CONFIG = '''\
# nbgrader configuration of the rlnotes course, written by python -m rlnotes.exercises nbgrader.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "rlnotes"
c.ClearSolutions.code_stub = {"python": "raise NotImplementedError()"}
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"
# Each check runs in seconds; a notebook of exercises in well under a minute.
c.ExecutePreprocessor.timeout = 300
'''


def _grade_id(text: str, used: set) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "cell"
    gid, n = base, 1
    while gid in used:
        n += 1
        gid = f"{base}-{n}"
    used.add(gid)
    return gid


def _meta(cell, used: set, name: str, *, solution=False, grade=False, locked=False, points=None):
    meta = {"grade": grade, "grade_id": _grade_id(name, used), "locked": locked,
            "schema_version": 3, "solution": solution, "task": False}
    if grade:
        meta["points"] = float(points)
    cell.setdefault("metadata", {})["nbgrader"] = meta


def assignment_notebook(nb, title: str, where: str = "notebook"):
    """The nbgrader source notebook of one chapter (an nbformat v4 notebook; not modified).
    Raises ``ValueError`` when the chapter has no ``## Exercises`` heading or no coding
    exercise."""
    import nbformat

    exercises, _ = find_exercises(nb, where=where)
    if not exercises:
        raise ValueError(f"{where} has no coding exercises")
    start = exercises_section(nb["cells"])
    if start is None:
        raise ValueError(f"{where} has no '## Exercises' heading (CONTRIBUTING.md, Exercises)")
    by_solution = {ex.solution_cell: ex for ex in exercises}
    by_check = {ex.check_cell: ex for ex in exercises}
    used: set = set()
    cells = []
    head = nbformat.v4.new_markdown_cell(
        f"# Exercises: {title}\n\nThe exercises of the chapter *{title}* of rlnotes. Write your "
        "solution where a cell raises `NotImplementedError`, run the check cell below it, and "
        "submit this notebook. The check cells are graded automatically; written exercises are "
        "graded by hand.")
    _meta(head, used, "header", locked=True)
    cells.append(head)
    for i in range(start, len(nb["cells"])):
        cell = copy.deepcopy(nb["cells"][i])
        text = cell_text(cell)
        if cell.get("cell_type") == "markdown":
            new, removed, _ = strip_written_solutions(text)
            if removed and not new.strip():
                continue
            cell["source"] = new
            _meta(cell, used, f"md-{i}", locked=True)
        elif cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
            if i in by_solution:
                _meta(cell, used, f"{by_solution[i].id}-answer", solution=True)
            elif i in by_check:
                _meta(cell, used, by_check[i].id, grade=True, locked=True,
                      points=by_check[i].points)
            else:
                if solution_regions(text, f"{where}, cell {i}"):
                    raise ValueError(f"{where}, cell {i}: a solution region without a check cell")
                _meta(cell, used, f"code-{i}", locked=True)
        else:
            _meta(cell, used, f"raw-{i}", locked=True)
        cell["id"] = f"rlnotes-{len(cells)}"
        cells.append(cell)
    out = copy.deepcopy(nb)
    out["cells"] = cells
    out["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
    nbformat.validate(nbformat.from_dict(out))
    return nbformat.from_dict(out)


def _title(nb, rel: Path) -> str:
    for cell in nb["cells"]:
        if cell.get("cell_type") == "markdown":
            for line in cell_text(cell).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return rel.stem.replace("_", " ")


def write_course(course_dir, book_dir=None, notebooks=None) -> list[Path]:
    """Write the nbgrader course into ``course_dir``: ``nbgrader_config.py`` and
    ``source/<chapter>/<chapter>.ipynb`` for every chapter with coding exercises (or those named
    in ``notebooks``). Returns the notebooks written."""
    import nbformat

    from rlnotes.exercises.grade import _select

    if not isinstance(course_dir, (str, os.PathLike)) or str(course_dir) == "":
        raise ValueError(f"course_dir must be a folder path, got {course_dir!r}")
    course = Path(course_dir)
    if course.exists() and not course.is_dir():
        raise ValueError(f"course_dir must be a folder, {str(course_dir)!r} is a file")
    book = check_book_dir(book_dir)
    chapters = chapter_notebooks(book)
    chosen = chapters if notebooks is None else _select(book, chapters, notebooks)
    made = {}
    for rel in chosen:
        nb = nbformat.read(book / rel, as_version=4)
        exercises, _ = find_exercises(nb, where=str(rel))
        if not exercises:
            if notebooks is not None:
                raise ValueError(f"notebook {rel.as_posix()} has no coding exercises")
            continue
        made[rel] = assignment_notebook(nb, _title(nb, rel), where=str(rel))
    if not made:
        raise ValueError(f"book_dir: no chapter of {book} has coding exercises")
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
    written = []
    for rel, nb in made.items():
        target = course / "source" / rel.stem / rel.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
    return written
