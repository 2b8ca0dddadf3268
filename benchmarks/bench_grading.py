"""Benchmark: grading a simulated class with ``python -m rlnotes.exercises grade``.

Run from the repository root:

    .venv/bin/python benchmarks/bench_grading.py                       # 100 students, --jobs = cores
    .venv/bin/python benchmarks/bench_grading.py --students 20 --jobs 1
    .venv/bin/python benchmarks/bench_grading.py --students 8 --compare-serial   # jobs N == jobs 1

The class submits one chapter (``--chapter``, default the TD chapter), as an LMS export would
give it: one folder per student, the notebook at the student edition's path. Of every 20
students: 15 hand in the reader's notebook (all correct), 2 the untouched student edition, 2 a
wrong solution (a ``+`` turned into ``-`` in each solution region), and 1 is hostile, in turn:
an endless loop in a cell above the exercises, a notebook that is not JSON, a notebook that
patches ``numpy.allclose`` (in its last cell), a cell that raises above the exercises, an
endless loop inside a solution (costs one check time limit).

It reports the wall time, the CPU time of the grader and all its kernels (``RUSAGE_CHILDREN``:
less sensitive than wall time to other load on the machine), seconds per student, and the
distribution of scores; with ``--compare-serial`` it also grades the class with ``--jobs 1``
and exits with status 1 unless both CSV files are identical. ``--python``/``--pythonpath`` run
another copy of the grader (the "before" measurement used the code of the main branch).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _solution_cells(nb):
    from rlnotes.exercises._notebook import cell_text, solution_regions

    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and solution_regions(cell_text(cell)):
            yield cell


def _wrong(nb):
    """Every solution region with its first ' + ' turned into ' - ' (or, failing that, a
    solution that returns its first argument unchanged)."""
    from rlnotes.exercises._notebook import cell_text, solution_regions

    for cell in _solution_cells(nb):
        lines = cell_text(cell).splitlines()
        for region in solution_regions("\n".join(lines)):
            for k in range(region.begin + 1, region.end):
                if " + " in lines[k]:
                    lines[k] = lines[k].replace(" + ", " - ", 1)
                    break
        cell["source"] = "\n".join(lines) + "\n"
    return nb


def _insert_before_exercises(nb, source):
    from nbformat.v4 import new_code_cell

    from rlnotes.exercises._notebook import cell_text

    at = next(i for i, c in enumerate(nb["cells"])
              if c["cell_type"] == "markdown" and "## Exercises" in cell_text(c))
    nb["cells"].insert(at, new_code_cell(source))
    return nb


def _append(nb, source):
    from nbformat.v4 import new_code_cell

    nb["cells"].append(new_code_cell(source))
    return nb


def _loop_in_solution(nb):
    from rlnotes.exercises._notebook import cell_text

    cell = next(_solution_cells(nb))
    lines = cell_text(cell).splitlines()
    body = next(i for i, line in enumerate(lines) if "BEGIN SOLUTION" in line)
    indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
    lines.insert(body + 1, f"{indent}while True:\n{indent}    pass")
    cell["source"] = "\n".join(lines) + "\n"
    return nb


HOSTILE = [
    ("loop-above", lambda nb: _insert_before_exercises(nb, "while True:\n    pass\n")),
    ("corrupt", None),
    ("tamper", lambda nb: _append(nb, "import numpy as np\nnp.allclose = lambda *a, **k: True\n")),
    ("raises-above", lambda nb: _insert_before_exercises(nb, "1 / 0\n")),
    ("loop-in-solution", _loop_in_solution),
]


def make_class(out: Path, chapter: str, students: int, book: Path = ROOT) -> dict:
    """Write a simulated class into ``out``; returns {student: kind}."""
    import nbformat

    from rlnotes.exercises.student import student_notebook

    master = nbformat.read(book / chapter, as_version=4)
    blank = student_notebook(master, where=chapter).nb
    kinds = {}
    hostile = 0
    for k in range(students):
        slot = k % 20
        name = f"student{k:03d}"
        if slot < 15:
            kind, nb = "correct", master
        elif slot < 17:
            kind, nb = "untouched", blank
        elif slot < 19:
            kind, nb = "wrong", _wrong(json.loads(json.dumps(master)))
        else:
            kind, make = HOSTILE[hostile % len(HOSTILE)]
            hostile += 1
            nb = None if make is None else make(nbformat.from_dict(json.loads(json.dumps(master))))
        target = out / name / chapter
        target.parent.mkdir(parents=True, exist_ok=True)
        if nb is None:
            target.write_text('{"cells": [ this is not JSON')
        else:
            nbformat.write(nbformat.from_dict(nb), target)
        kinds[name] = kind
    return kinds


def run_grader(subs: Path, out: Path, *, jobs: int | None, chapter: str | None, python: str,
               pythonpath: str | None, extra: list[str]) -> dict:
    cmd = [python, "-m", "rlnotes.exercises", "grade", str(subs), "--out", str(out),
           "--book-dir", str(ROOT), "--no-progress", *extra]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    if chapter is not None:
        cmd += ["--notebook", chapter]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"the grader exited with status {proc.returncode}")
    return {"wall": wall, "cpu": cpu, "stderr": proc.stderr, "stdout": proc.stdout}


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=100)
    p.add_argument("--jobs", type=int, default=None, help="default: the grader's (CPU cores)")
    p.add_argument("--chapter", default="book/td_learning.ipynb")
    p.add_argument("--compare-serial", action="store_true",
                   help="also grade with --jobs 1 and require identical CSV files")
    p.add_argument("--old-cli", action="store_true",
                   help="a grader without --jobs/--notebook (the 'before' measurement)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--pythonpath", default=None, help="PYTHONPATH for the grader (another copy)")
    p.add_argument("--keep", default=None, help="keep the class and the CSV files in this folder")
    p.add_argument("extra", nargs="*", help="more grader options, after --")
    args = p.parse_args(argv)
    if args.students < 1:
        p.error(f"--students must be at least 1, got {args.students}")
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlnotes-bench-"))
    subs = tmp / "submissions"
    if subs.exists():
        shutil.rmtree(subs)
    kinds = make_class(subs, args.chapter, args.students)
    jobs = None if args.old_cli else args.jobs
    chapter = None if args.old_cli else args.chapter
    res = run_grader(subs, tmp / "grades.csv", jobs=jobs, chapter=chapter, python=args.python,
                     pythonpath=args.pythonpath, extra=args.extra)
    rows = read_rows(tmp / "grades.csv")
    per_kind: dict = {}
    for row in rows:
        kind = kinds.get(row["student"], "?")
        got = per_kind.setdefault(kind, Counter())
        got["rows"] += 1
        got["passed"] += int(row["passed"])
    print(f"class: {args.students} students on {args.chapter} "
          f"({dict(Counter(kinds.values()))})")
    print(f"jobs: {args.jobs if args.jobs else 'default'}; cores: {os.cpu_count()}; "
          f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"wall: {res['wall']:.1f} s ({res['wall'] / args.students:.2f} s per student); "
          f"CPU (grader + kernels): {res['cpu']:.1f} s ({res['cpu'] / args.students:.2f} s per student)")
    for kind, got in sorted(per_kind.items()):
        print(f"  {kind:<12} {got['passed']:>5} of {got['rows']:>5} rows passed")
    warnings = [line for line in res["stderr"].splitlines() if line.startswith("warning")]
    print(f"warnings on stderr: {len(warnings)}")
    for line in warnings[:5]:
        print("  " + line)
    status = 0
    if args.compare_serial:
        serial = run_grader(subs, tmp / "grades-serial.csv", jobs=1, chapter=chapter,
                            python=args.python, pythonpath=args.pythonpath, extra=args.extra)
        same = (tmp / "grades.csv").read_bytes() == (tmp / "grades-serial.csv").read_bytes()
        print(f"--jobs 1: wall {serial['wall']:.1f} s, CPU {serial['cpu']:.1f} s; "
              f"CSV identical to the parallel run: {same}")
        status = 0 if same else 1
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
