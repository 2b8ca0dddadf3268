"""Command line of the exercises: the student edition, the student HTML book and the grader.

    python -m rlnotes.exercises student OUT_DIR [--book-dir DIR] [--kit]
    python -m rlnotes.exercises student-book OUT_DIR [--book-dir DIR] [--execute]
    python -m rlnotes.exercises grade SUBMISSIONS_DIR --out grades.csv [--notebook PATH]...
        [--jobs N] [--summary FILE] [--feedback DIR] [--force | --merge] [--book-dir DIR]
        [--timeout 300] [--cell-timeout 60] [--check-timeout 60] [--memory-mb 4096]
        [--checks FILE.py ...] [--no-progress]
    python -m rlnotes.exercises nbgrader COURSE_DIR [--book-dir DIR] [--notebook PATH]...

The book is found by walking up from the working directory to the folder holding ``_toc.yml``
(falling back to the folder above the installed package); ``--book-dir`` names it explicitly.
Exit status: 0 when the command ran (whatever the students scored), 2 for usage errors, 1 when
nothing could be graded (no file is touched then), when the grades file would lose rows
(``--merge``/``--force``), or when the student edition or its build failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _memory(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of MB, got {text!r}") from None
    if value < 256:
        raise argparse.ArgumentTypeError(f"expected at least 256 MB, got {value}")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of jobs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 job, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rlnotes.exercises",
        description="Exercises of the rlnotes book: student edition, student HTML book, grading.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("student", help="write the student edition (solutions replaced by stubs)",
                       description="Write every chapter notebook under OUT_DIR at the same "
                       "relative path, solution regions replaced by stubs raising "
                       "NotImplementedError and written solutions removed.")
    s.add_argument("out_dir", metavar="OUT_DIR")
    s.add_argument("--book-dir", default=None, help="the book's root folder (holding _toc.yml); "
                   "default: found from the working directory")
    s.add_argument("--kit", action="store_true", help="also build the rlnotes package as a wheel "
                   "into OUT_DIR/dist and write OUT_DIR/README.md for students")

    b = sub.add_parser("student-book", help="write the student edition and build its HTML book",
                       description="Write the student edition into OUT_DIR and build it with "
                       "Jupyter Book into OUT_DIR/_build/html (solutions hidden).")
    b.add_argument("out_dir", metavar="OUT_DIR")
    b.add_argument("--book-dir", default=None, help="the book's root folder (holding _toc.yml)")
    b.add_argument("--execute", action="store_true",
                   help="execute the notebooks in the build (outputs shown, stubs show their "
                   "NotImplementedError); default: no execution")

    g = sub.add_parser("grade", help="grade submitted notebooks into a CSV",
                       description="Grade SUBMISSIONS_DIR (one folder or zip per student, "
                       "notebooks under the student edition's relative paths or as the LMS "
                       "named them) into a CSV with the columns "
                       "student,notebook,exercise,passed,detail,points,max_points, a "
                       "per-student summary CSV and one feedback file per student.")
    g.add_argument("submissions_dir", metavar="SUBMISSIONS_DIR")
    g.add_argument("--out", required=True, help="the CSV file to write (e.g. grades.csv)")
    g.add_argument("--notebook", action="append", default=None, metavar="PATH",
                   help="grade only this chapter (a path as in the student edition, e.g. "
                   "book/td_learning.ipynb); repeatable; default: every chapter")
    g.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="notebooks graded at once (default: the number of CPU cores)")
    g.add_argument("--summary", default=None, metavar="FILE",
                   help="per-student totals (student,total,max); default: OUT's name + _summary.csv")
    g.add_argument("--feedback", default=None, metavar="DIR",
                   help="one Markdown feedback file per student; default: OUT's name + _feedback/")
    g.add_argument("--force", action="store_true",
                   help="replace an existing OUT even if it holds rows this run does not grade")
    g.add_argument("--merge", action="store_true",
                   help="keep the rows of an existing OUT that this run does not grade")
    g.add_argument("--book-dir", default=None, help="the book's root folder (holding _toc.yml) "
                   "whose master notebooks define the exercises")
    g.add_argument("--timeout", type=_positive_float, default=300.0,
                   help="seconds to run one notebook's exercises section (default 300)")
    g.add_argument("--cell-timeout", type=_positive_float, default=60.0,
                   help="seconds per cell (default 60); a cell past it is interrupted and "
                   "counts as a cell that raised")
    g.add_argument("--check-timeout", type=_positive_float, default=60.0,
                   help="seconds per check (default 60)")
    g.add_argument("--memory-mb", type=_memory, default=4096,
                   help="memory limit of each kernel in MB (RLIMIT_DATA; default 4096)")
    g.add_argument("--checks", action="append", default=[], metavar="FILE.py",
                   help="an extra check module (for checks outside rlnotes.exercises); repeatable")
    g.add_argument("--fixed-limits", action="store_true",
                   help="use --cell-timeout and --check-timeout as they are; by default the "
                   "grader first grades the book's own notebooks and limits each check to "
                   "max(10 s, 10x its time there) and each cell of the student's own to max(20 s, "
                   "10x the slowest cell there), so that an endless loop costs seconds")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")

    n = sub.add_parser("nbgrader", help="write an nbgrader course (one assignment per chapter)",
                       description="Write COURSE_DIR/source/<assignment>/<chapter>.ipynb for "
                       "every chapter with coding exercises, with nbgrader's cell metadata "
                       "(solution cells, autograded test cells with their points, read-only "
                       "cells), and COURSE_DIR/nbgrader_config.py; nbgrader's own "
                       "generate_assignment and autograde then run it unchanged.")
    n.add_argument("course_dir", metavar="COURSE_DIR")
    n.add_argument("--book-dir", default=None, help="the book's root folder (holding _toc.yml)")
    n.add_argument("--notebook", action="append", default=None, metavar="PATH",
                   help="only this chapter (repeatable); default: every chapter with coding "
                   "exercises")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command == "student":
        from rlnotes.exercises.student import write_student_edition, write_student_kit

        try:
            if args.kit:
                written, wheel, readme = write_student_kit(args.out_dir, args.book_dir)
            else:
                written = write_student_edition(args.out_dir, args.book_dir)
        except ValueError as err:
            p.error(str(err))
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"Wrote the student edition of {len(written)} notebook(s) to {args.out_dir}")
        if args.kit:
            print(f"Wrote the package as a wheel, {wheel}, and the students' {readme}")
        return 0
    if args.command == "student-book":
        from rlnotes.exercises.student import build_student_book

        start = time.monotonic()
        try:
            html = build_student_book(args.out_dir, args.book_dir, execute=args.execute)
        except ValueError as err:
            p.error(str(err))
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"Built the student book in {time.monotonic() - start:.0f} s: {html}/index.html")
        return 0
    if args.command == "nbgrader":
        from rlnotes.exercises.nbgrader import write_course

        try:
            written = write_course(args.course_dir, args.book_dir, notebooks=args.notebook)
        except ValueError as err:
            p.error(str(err))
        for path in written:
            print(f"wrote {path}")
        print(f"Wrote an nbgrader course of {len(written)} assignment(s) to {args.course_dir}")
        return 0
    from rlnotes.exercises.grade import NothingToGrade, OutputConflict, grade

    if args.force and args.merge:
        p.error("--force and --merge exclude each other")
    try:
        rows = grade(args.submissions_dir, args.out, args.book_dir, notebooks=args.notebook,
                     jobs=args.jobs, timeout=args.timeout, cell_timeout=args.cell_timeout,
                     check_timeout=args.check_timeout, memory_mb=args.memory_mb,
                     checks=args.checks, progress=not args.no_progress,
                     summary_out=args.summary, feedback_dir=args.feedback, force=args.force,
                     merge=args.merge, adapt_limits=not args.fixed_limits)
    except (NothingToGrade, OutputConflict) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ValueError as err:
        p.error(str(err))
    out = Path(args.out)
    summary = args.summary or out.with_name(f"{out.stem}_summary.csv")
    feedback = args.feedback or out.with_name(f"{out.stem}_feedback")
    print(f"Wrote {len(rows)} row(s) to {args.out}, the totals per student to {summary} and "
          f"one feedback file per student to {feedback}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
