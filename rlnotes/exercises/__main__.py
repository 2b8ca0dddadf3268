"""Command line of the exercises: the student edition, the student HTML book and the grader.

    python -m rlnotes.exercises student OUT_DIR [--book-dir DIR]
    python -m rlnotes.exercises student-book OUT_DIR [--book-dir DIR] [--execute]
    python -m rlnotes.exercises grade SUBMISSIONS_DIR --out grades.csv [--book-dir DIR]
        [--timeout 300] [--cell-timeout 120] [--check-timeout 60] [--memory-mb 4096]
        [--checks FILE.py ...] [--no-progress]

The book is found by walking up from the working directory to the folder holding ``_toc.yml``
(falling back to the folder above the installed package); ``--book-dir`` names it explicitly.
Exit status: 0 when the command ran (whatever the students scored), 2 for usage errors, 1 when
the student edition or its build failed.
"""

from __future__ import annotations

import argparse
import sys
import time


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

    b = sub.add_parser("student-book", help="write the student edition and build its HTML book",
                       description="Write the student edition into OUT_DIR and build it with "
                       "Jupyter Book into OUT_DIR/_build/html (solutions hidden).")
    b.add_argument("out_dir", metavar="OUT_DIR")
    b.add_argument("--book-dir", default=None, help="the book's root folder (holding _toc.yml)")
    b.add_argument("--execute", action="store_true",
                   help="execute the notebooks in the build (outputs shown, stubs show their "
                   "NotImplementedError); default: no execution")

    g = sub.add_parser("grade", help="grade submitted notebooks into a CSV",
                       description="Grade SUBMISSIONS_DIR (one folder per student, notebooks "
                       "under the student edition's relative paths) into a CSV with the columns "
                       "student,notebook,exercise,passed,detail.")
    g.add_argument("submissions_dir", metavar="SUBMISSIONS_DIR")
    g.add_argument("--out", required=True, help="the CSV file to write (e.g. grades.csv)")
    g.add_argument("--book-dir", default=None, help="the book's root folder (holding _toc.yml) "
                   "whose master notebooks define the exercises")
    g.add_argument("--timeout", type=_positive_float, default=300.0,
                   help="seconds to run one notebook's cells (default 300)")
    g.add_argument("--cell-timeout", type=_positive_float, default=120.0,
                   help="seconds per cell (default 120)")
    g.add_argument("--check-timeout", type=_positive_float, default=60.0,
                   help="seconds per check (default 60)")
    g.add_argument("--memory-mb", type=_memory, default=4096,
                   help="memory limit of each kernel in MB (RLIMIT_DATA; default 4096)")
    g.add_argument("--checks", action="append", default=[], metavar="FILE.py",
                   help="an extra check module (for checks outside rlnotes.exercises); repeatable")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command == "student":
        from rlnotes.exercises.student import write_student_edition

        try:
            written = write_student_edition(args.out_dir, args.book_dir)
        except ValueError as err:
            p.error(str(err))
        print(f"Wrote the student edition of {len(written)} notebook(s) to {args.out_dir}")
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
    from rlnotes.exercises.grade import grade

    try:
        rows = grade(args.submissions_dir, args.out, args.book_dir, timeout=args.timeout,
                     cell_timeout=args.cell_timeout, check_timeout=args.check_timeout,
                     memory_mb=args.memory_mb, checks=args.checks,
                     progress=not args.no_progress)
    except ValueError as err:
        p.error(str(err))
    print(f"Wrote {len(rows)} row(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
