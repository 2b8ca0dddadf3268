"""What the grader writes: the grades CSV, the per-student summary, the feedback files.

Every file is written atomically (a temporary file in the same folder, then ``os.replace``), so
an interrupted run never leaves half a file. An existing grades file is never replaced by one
that lacks some of its rows (student, notebook, exercise) unless the caller says so
(``replace=True``) or asks to keep them (``merge=True``).
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

CSV_COLUMNS = ["student", "notebook", "exercise", "passed", "detail", "points", "max_points"]
SUMMARY_COLUMNS = ["student", "total", "max"]


def number(x: float) -> str:
    """Points as a spreadsheet reads them: ``2``, ``0.5``, ``0.33``."""
    x = round(float(x), 2)
    return str(int(x)) if x == int(x) else f"{x:g}"


@dataclass
class Row:
    student: str
    notebook: str
    exercise: str
    passed: int
    detail: str = ""
    points: float = 0.0
    max_points: float = 1.0

    def as_list(self) -> list:
        return [self.student, self.notebook, self.exercise, self.passed, self.detail,
                number(self.points), number(self.max_points)]

    @property
    def key(self) -> tuple:
        return (self.student, self.notebook, self.exercise)


class OutputConflict(ValueError):
    """Writing would lose rows of an existing grades file."""


def write_atomically(path: Path, text: str) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _csv_text(header: list, rows: list[list]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def read_grades(path: Path) -> list[list]:
    """The rows of an existing grades file (as lists of the CSV_COLUMNS); raises
    :class:`OutputConflict` when the file is not a grades file."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise OutputConflict(f"{path} exists and cannot be read as a grades file ({err})") from None
    if header is None:
        return []
    if header[:3] != CSV_COLUMNS[:3]:
        raise OutputConflict(f"{path} exists and is not a grades file (its header is "
                             f"{','.join(header[:5])!r})")
    out = []
    for r in rows:
        r = (r + [""] * len(CSV_COLUMNS))[:len(CSV_COLUMNS)]
        if r[6] == "":  # a file of the older format: passed is the score out of 1
            r[5], r[6] = r[3] or "0", "1"
        out.append(r)
    return out


def write_grades(path: Path, rows: list[Row], *, replace: bool = False, merge: bool = False) -> int:
    """Write ``rows`` to ``path`` atomically; returns the number of rows written.

    If ``path`` exists and holds rows (student, notebook, exercise) that ``rows`` lacks, raise
    :class:`OutputConflict` unless ``merge`` (keep those rows, replace the others) or
    ``replace`` (drop them)."""
    path = Path(path)
    new = [r.as_list() for r in rows]
    if path.exists() and not replace:
        old = read_grades(path)
        keys = {tuple(r[:3]) for r in new}
        lost = [r for r in old if tuple(r[:3]) not in keys]
        if lost and merge:
            new = lost + new
            order = {}
            new.sort(key=lambda r: order.setdefault(r[0], len(order)))
        elif lost:
            students = sorted({r[0] for r in lost})
            raise OutputConflict(
                f"{path} holds {len(lost)} row(s) that this run did not grade (students "
                f"{', '.join(students[:3])}{' ...' if len(students) > 3 else ''}); it was left "
                "as it was. Pass --merge to keep those rows, --force to replace the file, or "
                "another --out")
    write_atomically(path, _csv_text(CSV_COLUMNS, new))
    return len(new)


def summary_rows(rows: list[list]) -> list[list]:
    """One row per student: student, total points, maximum points (rows as CSV lists)."""
    totals: dict = {}
    for r in rows:
        got, most = totals.get(r[0], (0.0, 0.0))
        totals[r[0]] = (got + float(r[5] or 0), most + float(r[6] or 0))
    return [[s, number(t), number(m)] for s, (t, m) in totals.items()]


def write_summary(path: Path, grades_path: Path) -> None:
    """The per-student summary of the grades file ``grades_path`` (after merging, so that it
    matches the file)."""
    write_atomically(Path(path), _csv_text(SUMMARY_COLUMNS, summary_rows(read_grades(grades_path))))


def feedback_name(student: str) -> str:
    return (re.sub(r"[^A-Za-z0-9._@-]+", "_", student).strip("._") or "student")[:100] + ".md"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def feedback_text(student: str, rows: list[Row], files: dict) -> str:
    """A Markdown page for one student: the total, and per notebook each exercise's result,
    points and the check's message and hint. ``files`` maps notebook -> the file graded."""
    got = sum(r.points for r in rows)
    most = sum(r.max_points for r in rows)
    lines = [f"# Feedback for {student}", "",
             f"Total: **{number(got)} / {number(most)} points** "
             f"({sum(r.passed for r in rows)} of {len(rows)} coding exercises passed).", ""]
    notebooks = list(dict.fromkeys(r.notebook for r in rows))
    for nb in notebooks:
        part = [r for r in rows if r.notebook == nb]
        lines += [f"## {nb}", ""]
        if files.get(nb):
            lines += [f"Graded file: `{files[nb]}`", ""]
        lines += ["| Exercise | Result | Points |", "|---|---|---|"]
        for r in part:
            result = "passed" if r.passed else ("partly passed" if r.points > 0 else "failed")
            lines.append(f"| {_md(r.exercise)} | {result} | {number(r.points)} / "
                         f"{number(r.max_points)} |")
        lines.append("")
        for r in part:
            if r.passed:
                continue
            message, _, hint = r.detail.partition(" Hint: ")
            lines += [f"### {r.exercise}", "", _md(message) or "(no detail)", ""]
            if hint:
                lines += [f"**Hint:** {_md(hint)}", ""]
    lines += ["Run the check cell of an exercise in your notebook to see the same message "
              "as you work.", ""]
    return "\n".join(lines)


def write_feedback(folder: Path, rows: list[Row], files: dict) -> list[Path]:
    """One Markdown file per student in ``folder``; returns the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    per: dict = {}
    for r in rows:
        per.setdefault(r.student, []).append(r)
    written = []
    for student, part in per.items():
        path = folder / feedback_name(student)
        write_atomically(path, feedback_text(student, part, files.get(student, {})))
        written.append(path)
    return written
