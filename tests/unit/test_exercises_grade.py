"""The grader: a correct submission passes, the untouched student edition fails cleanly, and every
hostile submission gets a recorded failure with its reason while everyone else is still graded.

One grading run (through the command line, as an instructor runs it) over a submissions folder
with one student per case, on the fixture book of tests/fixtures/exercises/.
"""

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from rlnotes.exercises.grade import (CSV_COLUMNS, NothingToGrade, grade, load_checks,
                                     master_exercises)
from rlnotes.exercises.student import write_student_edition

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "exercises"
BOOK = FIXTURES / "fixture_book"
CHECKS = FIXTURES / "fixture_checks.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
ALPHA = ["ex-alpha-add", "ex-alpha-mean"]
WRONG_ADD = "def my_add(a, b):\n    return a - b\n"
FAKE_EXEC = ("import json as _json\n"
             "def exec(code, g=None, *rest):\n"
             "    p = g.get('PARAMS', {}) if isinstance(g, dict) else {}\n"
             "    if 'out' in p:\n"
             "        open(p['out'], 'w').write(_json.dumps({'passed': True, 'findings': []}))\n")

LEAVE_THREAD = ("import threading, os, glob, json\n"
                "def _spin():\n"
                "    base = os.path.dirname(os.getcwd())\n"
                "    while True:\n"
                "        for p in glob.glob(base + '/**/result-*.json', recursive=True):\n"
                "            try:\n"
                "                if '\"passed\": false' in open(p).read():\n"
                "                    open(p, 'w').write(json.dumps({'passed': True}))\n"
                "            except Exception:\n"
                "                pass\n"
                "threading.Thread(target=_spin, daemon=True).start()\n")
START_DAEMON = ("import os, subprocess, sys\n"
                "subprocess.Popen([sys.executable, '-c', 'import os, time\\n"
                "if os.fork(): os._exit(0)\\n"
                "open(os.environ[\"RLNOTES_TEST_DAEMON_FILE\"], \"w\").write(str(os.getpid()))\\n"
                "while True: time.sleep(0.2)'], start_new_session=True).wait()\n"
                "import time\n"  # wait (a loaded machine is slow) until the daemon is up
                "for _ in range(100):\n"
                "    if os.path.exists(os.environ['RLNOTES_TEST_DAEMON_FILE']):\n"
                "        break\n"
                "    time.sleep(0.1)\n")
_DAEMON = {}


def _master(name):
    return nbformat.read(BOOK / "book" / f"{name}.ipynb", as_version=4)


def _alpha(cell, source, insert=False, drop=None, markdown=False, setup=None):
    """The master alpha notebook with cell ``cell`` replaced (or a code cell inserted there).
    ``drop``: a cell (index before the change) to delete; ``setup``: new setup cell source."""
    nb = _master("alpha")
    if setup is not None:
        nb.cells[1].source = setup
    if drop is not None:
        del nb.cells[drop]
    if insert:
        nb.cells.insert(cell, nbformat.v4.new_code_cell(source))
    else:
        nb.cells[cell].source = source
    for i, c in enumerate(nb.cells):
        c["id"] = f"c{i}"
    return nb


def _hostile():
    """student name -> alpha notebook (or raw text, or None for missing). Cell 6 of alpha is the
    my_add solution, cell 7 its check, cell 10 the running-mean solution."""
    fake = _alpha(6, WRONG_ADD)
    fake.cells[7].source = "print('PASSED check_add')"
    return {
        # An endless loop in a cell of the exercises section costs that cell only (interrupted
        # at --cell-timeout, like a cell that raises); above the section it is never run.
        "loops_forever": _alpha(6, "while True:\n    pass\n", insert=True),
        "loops_above_exercises": _alpha(0, "while True:\n    pass\n", insert=True),
        "raises_above_exercises": _alpha(0, "1 / 0", insert=True),
        "loop_defines_solution": _alpha(6, "while True:\n    pass\n" + WRONG_ADD.replace("-", "+")),
        "solution_above_exercises": _alpha(0, "def my_add(a, b):\n    return a + b\n", insert=True,
                                           drop=6),
        "no_heading": _alpha(0, "# Alpha, the heading deleted", markdown=True),
        "no_heading_no_setup": _alpha(0, "# Alpha", markdown=True, setup=""),
        "loops_in_solution": _alpha(6, "def my_add(a, b):\n    while True:\n        pass\n"),
        "ignores_interrupt": _alpha(6, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                       "while True:\n    pass\n", insert=True),
        "crashes": _alpha(10, "import os\nos._exit(3)", insert=True),
        "wrong_discount": "beta-wrong",
        "segfaults": _alpha(10, "import ctypes\nctypes.string_at(0)", insert=True),
        "exhausts_memory": _alpha(6, "junk = []\nwhile True:\n    junk.append(bytearray(10**8))\n",
                                  insert=True),
        "exhausts_memory_in_solution": _alpha(6, "def my_add(a, b):\n    x = bytearray(50 * 2**30)\n"
                                                 "    return a + b\n"),
        "invalid_json": '{"cells": [',
        "missing": None,
        "redefines_check": _alpha(6, WRONG_ADD + "\ndef check_add(f):\n    print('PASSED check_add')\n"),
        "patches_check": _alpha(6, WRONG_ADD + "\nimport fixture_checks\n"
                                    "fixture_checks.check_add.raw = lambda f: None\n"),
        "patches_rlnotes_exercises": _alpha(6, WRONG_ADD + "\nimport rlnotes.exercises as ex\n"
                                                "ex.CHECKS['check_add'] = lambda f: True\n"
                                                "ex.expect_close = lambda *a, **k: None\n"
                                                "import rlnotes.exercises.core as core\n"
                                                "core.expect_close = ex.expect_close\n"),
        "patches_numpy": _alpha(6, WRONG_ADD + "\nnp.allclose = lambda *a, **k: True\n"
                                    "np.isclose = lambda *a, **k: False\n"),
        "edits_check_file": _alpha(6, WRONG_ADD + "\nimport fixture_checks, pathlib\n"
                                       "pathlib.Path(fixture_checks.__file__).write_text("
                                       "'def check_add(f):\\n    pass\\n')\n"),
        "prints_fake_pass": fake,
        "exits": _alpha(10, "exit()", insert=True),
        "kills_parent": _alpha(10, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", insert=True),
        "prints_forever": _alpha(6, "while True:\n    print('x' * 100)\n", insert=True),
        # An exec of its own, in the notebook or in builtins, that writes a fake result.
        "shadows_exec": _alpha(6, WRONG_ADD + FAKE_EXEC),
        "patches_builtins_exec": _alpha(6, WRONG_ADD + FAKE_EXEC + "    else:\n"
                                            "        return _real_exec(code, g, *rest)\n"
                                            "import builtins\n_real_exec = builtins.exec\n"
                                            "builtins.exec = exec\n"),
        "breaks_builtins_exec": _alpha(6, WRONG_ADD + FAKE_EXEC + "import builtins\n"
                                           "builtins.exec = exec\n"),
        # A thread that outlives its cell and rewrites every failing result file it can find.
        "leaves_thread": _alpha(6, WRONG_ADD + LEAVE_THREAD),
        # A double-forked daemon in a session of its own (out of the kernel's process group).
        "starts_daemon": _alpha(10, START_DAEMON, insert=True),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grade")
    subs = tmp / "submissions"
    edition = tmp / "edition"
    write_student_edition(edition, BOOK)
    (subs / "correct" / "book").mkdir(parents=True)
    for name in ["alpha", "beta"]:
        shutil.copy(BOOK / "book" / f"{name}.ipynb", subs / "correct" / "book")
    shutil.copytree(edition / "book", subs / "untouched" / "book")
    (subs / "flat_layout").mkdir()  # notebooks directly in the student's folder
    for name in ["alpha", "beta"]:
        shutil.copy(BOOK / "book" / f"{name}.ipynb", subs / "flat_layout")
    for student, alpha in _hostile().items():
        folder = subs / student / "book"
        folder.mkdir(parents=True)
        shutil.copy(BOOK / "book" / "beta.ipynb", folder)  # beta is correct for everyone
        if alpha == "beta-wrong":  # ignores gamma: one of the check's three parts passes
            nb = _master("beta")
            cell = next(c for c in nb.cells if "def my_discounted" in c.source)
            cell.source = cell.source.replace("rewards[t] + gamma * running", "rewards[t] + 0 * running")
            nbformat.write(nb, folder / "beta.ipynb")
            shutil.copy(BOOK / "book" / "alpha.ipynb", folder)
        elif isinstance(alpha, str):
            (folder / "alpha.ipynb").write_text(alpha)
        elif alpha is not None:
            nbformat.write(alpha, folder / "alpha.ipynb")
    out = tmp / "grades.csv"
    daemon = tmp / "daemon.pid"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rlnotes.exercises", "grade", str(subs), "--out", str(out),
         "--book-dir", str(BOOK), "--checks", str(CHECKS), "--cell-timeout", "15",
         "--check-timeout", "10", "--timeout", "90", "--memory-mb", "1024", "--jobs", "2"],
        capture_output=True, text=True, env={**ENV, "RLNOTES_TEST_DAEMON_FILE": str(daemon)},
        cwd=tmp)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [dict(zip(header, r)) for r in reader]
    print(out.read_text())
    print(proc.stdout)
    print(f"graded {len({r['student'] for r in rows})} students in {seconds:.1f} s")
    _DAEMON['pid_file'] = daemon
    _DAEMON['tmp'] = tmp
    return header, rows, proc


def _by(rows, student):
    return {r["exercise"]: r for r in rows if r["student"] == student}


def test_csv_has_the_contract_columns_and_one_row_per_student_and_exercise(graded):
    header, rows, proc = graded
    assert header == CSV_COLUMNS == ["student", "notebook", "exercise", "passed", "detail",
                                     "points", "max_points"]
    students = {r["student"] for r in rows}
    assert len(students) == 3 + len(_hostile())
    assert len(rows) == 3 * len(students)
    assert all(r["passed"] in ("0", "1") for r in rows)
    assert all("\n" not in r["detail"] for r in rows)
    assert {(r["notebook"], r["exercise"]) for r in rows} == {
        ("book/alpha.ipynb", "ex-alpha-add"), ("book/alpha.ipynb", "ex-alpha-mean"),
        ("book/beta.ipynb", "ex-beta-discount")}
    assert "Per exercise" in proc.stdout and "Per student" in proc.stdout
    assert {(r["exercise"], r["max_points"]) for r in rows} == {
        ("ex-alpha-add", "1"), ("ex-alpha-mean", "2"), ("ex-beta-discount", "1")}
    for r in rows:
        if r["passed"] == "1":
            assert r["points"] == r["max_points"], r


def test_correct_submission_passes_everything(graded):
    _, rows, _ = graded
    for student in ["correct", "flat_layout"]:
        got = _by(rows, student)
        assert all(r["passed"] == "1" and r["detail"] == "" for r in got.values()), got


def test_untouched_student_edition_fails_cleanly(graded):
    _, rows, _ = graded
    got = _by(rows, "untouched")
    assert len(got) == 3
    for r in got.values():
        assert r["passed"] == "0" and "NotImplementedError" in r["detail"], r


def test_every_hostile_submission_still_gets_its_other_notebook_graded(graded):
    _, rows, _ = graded
    for student in _hostile():
        if student != "wrong_discount":
            assert _by(rows, student)["ex-beta-discount"]["passed"] == "1", _by(rows, student)


def test_a_loop_or_an_exception_outside_a_solution_costs_nothing(graded):
    """Above the exercises section nothing runs; inside it, a cell that runs past the limit is
    interrupted and counts like a cell that raised (issue 16, item 4)."""
    _, rows, _ = graded
    for student in ["loops_forever", "loops_above_exercises", "raises_above_exercises",
                    "prints_forever", "no_heading"]:
        got = _by(rows, student)
        assert all(r["passed"] == "1" for r in got.values()), (student, got)


def test_partial_credit_of_a_check_made_of_parts(graded):
    _, rows, _ = graded
    row = _by(rows, "wrong_discount")["ex-beta-discount"]
    assert row["passed"] == "0" and row["points"] == "0.33" and row["max_points"] == "1", row
    assert "1 of 3 parts passed" in row["detail"] and "gamma = 0.5" in row["detail"], row
    assert "Hint: run backwards" in row["detail"]


def test_summary_and_feedback_files(graded):
    _, rows, _ = graded
    tmp = _DAEMON["tmp"]
    with open(tmp / "grades_summary.csv", newline="") as fh:
        summary = list(csv.reader(fh))
    assert summary[0] == ["student", "total", "max"]
    totals = {r[0]: (r[1], r[2]) for r in summary[1:]}
    assert totals["correct"] == ("4", "4") and totals["untouched"] == ("0", "4")
    assert totals["wrong_discount"] == ("3.33", "4")
    assert set(totals) == {r["student"] for r in rows}
    feedback = (tmp / "grades_feedback" / "loops_in_solution.md").read_text()
    assert "# Feedback for loops_in_solution" in feedback and "3 / 4 points" in feedback
    assert "### ex-alpha-add" in feedback and "timed out" in feedback
    assert "| ex-alpha-mean | passed | 2 / 2 |" in feedback
    wrong = (tmp / "grades_feedback" / "prints_fake_pass.md").read_text()
    assert "**Hint:** wrong sign: add b." in wrong


@pytest.mark.parametrize("student,exercise,words", [
    ("loop_defines_solution", "ex-alpha-add", ["not defined", "code cell 2 ran past the 15 s limit",
                                               "interrupted"]),
    ("solution_above_exercises", "ex-alpha-add", ["not defined", "above the '## Exercises' heading"]),
    ("no_heading_no_setup", "ex-alpha-add", ["no exercises section", "restore the heading"]),
    ("loops_in_solution", "ex-alpha-add", ["timed out", "check"]),
    ("ignores_interrupt", "ex-alpha-add", ["timed out", "ignored the interrupt"]),
    ("crashes", "ex-alpha-add", ["kernel died", "exit status 3"]),
    ("crashes", "ex-alpha-mean", ["kernel died"]),
    ("segfaults", "ex-alpha-add", ["kernel died", "SIGSEGV"]),
    ("exhausts_memory", "ex-alpha-add", ["out of memory", "1024 MB"]),
    ("exhausts_memory_in_solution", "ex-alpha-add", ["out of memory", "MemoryError"]),
    ("invalid_json", "ex-alpha-add", ["invalid notebook", "JSON"]),
    ("invalid_json", "ex-alpha-mean", ["invalid notebook", "JSON"]),
    ("missing", "ex-alpha-add", ["missing", "book/alpha.ipynb"]),
    ("missing", "ex-alpha-mean", ["missing"]),
    ("redefines_check", "ex-alpha-add", ["tampering", "redefines check_add", "own check failed"]),
    ("patches_check", "ex-alpha-add", ["tampering", "check_add", "own check failed"]),
    ("patches_rlnotes_exercises", "ex-alpha-add", ["tampering", "CHECKS['check_add']"]),
    ("patches_rlnotes_exercises", "ex-alpha-mean", ["tampering", "expect_close"]),
    ("patches_numpy", "ex-alpha-add", ["tampering", "numpy.allclose"]),
    ("edits_check_file", "ex-alpha-add", ["tampering", "fixture_checks.py"]),
    ("prints_fake_pass", "ex-alpha-add", ["returned a - b", "Hint: wrong sign"]),
    ("exits", "ex-alpha-add", ["kernel died", "exit()"]),
    ("shadows_exec", "ex-alpha-add", ["returned a - b"]),
    ("patches_builtins_exec", "ex-alpha-add", ["tampering", "builtins.exec", "own check failed"]),
    ("breaks_builtins_exec", "ex-alpha-add", ["tampering", "did not run"]),
    ("breaks_builtins_exec", "ex-alpha-mean", ["tampering", "did not run"]),
    ("leaves_thread", "ex-alpha-add", ["tampering", "thread running"]),
    ("leaves_thread", "ex-alpha-mean", ["tampering", "thread running"]),
])
def test_hostile_submission_gets_a_recorded_failure_with_its_reason(graded, student, exercise, words):
    _, rows, _ = graded
    row = _by(rows, student)[exercise]
    assert row["passed"] == "0", row
    for word in words:
        assert word in row["detail"], (word, row)


def test_a_daemon_started_by_a_notebook_does_not_outlive_the_grading(graded):
    _, rows, proc = graded
    daemon = _DAEMON['pid_file']
    assert daemon.is_file(), "the daemon never started"
    pid = int(daemon.read_text())
    state = ""
    if Path(f"/proc/{pid}/stat").exists():
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat[stat.rindex(")") + 2]
    assert state in ("", "Z"), f"daemon {pid} still running"
    assert "starts_daemon/book/alpha.ipynb left 1 process(es) running" in proc.stderr
    # Only that notebook: finished processes (zombies) of clean notebooks are not counted.
    assert proc.stderr.count("process(es) running") == 1, proc.stderr
    assert _by(rows, "starts_daemon")["ex-alpha-add"]["passed"] == "1"


def test_a_notebook_that_kills_its_parent_does_not_kill_the_grader(graded):
    """The kernel's parent is a small launcher process, not the grader: killing it leaves the
    grader (and the kernel) running, and the notebook is graded on its merits (correct here)."""
    _, rows, proc = graded
    assert proc.returncode == 0
    assert {r["exercise"]: r["passed"] for r in rows if r["student"] == "kills_parent"} == {
        "ex-alpha-add": "1", "ex-alpha-mean": "1", "ex-beta-discount": "1"}


def test_a_failure_in_one_exercise_leaves_the_others_graded(graded):
    _, rows, _ = graded
    for student in ["loops_in_solution", "exhausts_memory_in_solution", "redefines_check",
                    "patches_check", "prints_fake_pass", "shadows_exec"]:
        assert _by(rows, student)["ex-alpha-mean"]["passed"] == "1", student


# ------------------------------------------------------------------ bad input (no kernels)

@pytest.mark.parametrize("kwargs", [
    {"submissions_dir": "/no/such/folder"},
    {"submissions_dir": None},
    {"out": "/no/such/folder/grades.csv"},
    {"out": "."},
    {"timeout": 0},
    {"cell_timeout": -1},
    {"check_timeout": float("nan")},
    {"memory_mb": 10},
    {"memory_mb": 1.5e3},
    {"checks": ["/no/such/checks.py"]},
])
def test_grade_rejects_bad_arguments(kwargs, tmp_path):
    args = {"submissions_dir": tmp_path, "out": tmp_path / "g.csv", "book_dir": BOOK,
            "checks": [CHECKS], **kwargs}
    with pytest.raises(ValueError):
        grade(args.pop("submissions_dir"), args.pop("out"), args.pop("book_dir"), **args)


@pytest.mark.parametrize("args", [
    ["grade"],
    ["grade", "SUBS"],                                   # no --out
    ["grade", "/no/such/folder", "--out", "g.csv"],
    ["grade", "SUBS", "--out", "g.csv", "--timeout", "-1"],
    ["grade", "SUBS", "--out", "g.csv", "--memory-mb", "lots"],
])
def test_cli_grade_rejects_bad_usage(args, tmp_path):
    (tmp_path / "SUBS").mkdir()
    proc = subprocess.run([sys.executable, "-m", "rlnotes.exercises", *args, "--book-dir", str(BOOK)],
                          capture_output=True, text=True, cwd=tmp_path, env=ENV)
    assert proc.returncode == 2, proc.stderr
    assert "usage" in proc.stderr


def test_empty_submissions_folder_is_nothing_to_grade(tmp_path):
    (tmp_path / "subs").mkdir()
    with pytest.raises(NothingToGrade, match="empty"):
        grade(tmp_path / "subs", tmp_path / "g.csv", BOOK, checks=[CHECKS], progress=False,
              summary=False)
    assert not (tmp_path / "g.csv").exists()


def test_unregistered_check_in_the_master_is_a_usage_error(tmp_path):
    book = tmp_path / "book"
    shutil.copytree(BOOK, book)
    nb = nbformat.read(book / "book" / "alpha.ipynb", as_version=4)
    nb.cells[7].source = "check_nonexistent(my_add)"
    nbformat.write(nb, book / "book" / "alpha.ipynb")
    with pytest.raises(ValueError, match="check_nonexistent"):
        master_exercises(book, load_checks([CHECKS]))
    with pytest.raises(ValueError):
        master_exercises(book, checks="not a dict")
    with pytest.raises(ValueError):
        load_checks([tmp_path / "missing.py"])


def test_master_exercises_of_the_fixture_book():
    masters = master_exercises(BOOK, load_checks([CHECKS]))
    assert [(m.rel.as_posix(), [e.id for e in m.exercises]) for m in masters] == [
        ("book/alpha.ipynb", ALPHA), ("book/beta.ipynb", ["ex-beta-discount"])]


# ------------------------------------------------------------------ the real book

def _real_masters():
    try:
        return master_exercises(ROOT, load_checks())
    except ValueError:
        return []


@pytest.mark.skipif(not _real_masters(), reason="the book has no coding exercises yet")
def test_real_chapters_reader_passes_and_student_edition_fails_cleanly(tmp_path):
    """The reader's notebooks (the solutions) pass every check; the untouched student edition
    fails every one with NotImplementedError; and a student is graded in well under a minute."""
    masters = _real_masters()
    subs = tmp_path / "submissions"
    write_student_edition(tmp_path / "edition", ROOT)
    for m in masters:
        for student, source in [("reader", ROOT / m.rel), ("student_edition", tmp_path / "edition" / m.rel)]:
            (subs / student / m.rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, subs / student / m.rel)
    # A "solution" that calls rlnotes' own in-place evaluation instead of writing one.
    mdp_rel = next(m.rel for m in masters if Path(m.rel).name == "mdp_dynamic_programming.ipynb")
    nb = nbformat.read(ROOT / mdp_rel, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "def my_in_place_evaluation" in c.source)
    cell.source = ("import rlnotes.mdp\n\ndef my_in_place_evaluation(mdp, policy, tol=1e-10):\n"
                   "    return rlnotes.mdp.in_place_policy_evaluation(mdp, policy, tol)\n")
    (subs / "calls_reference" / mdp_rel).parent.mkdir(parents=True)
    nbformat.write(nb, subs / "calls_reference" / mdp_rel)
    start = time.monotonic()
    rows = grade(subs, tmp_path / "grades.csv", ROOT, progress=False)
    per_student = (time.monotonic() - start) / 3
    print(f"real chapters: {per_student:.1f} s per student")
    expected = sum(len(m.exercises) for m in masters)
    reader = [r for r in rows if r.student == "reader"]
    blank = [r for r in rows if r.student == "student_edition"]
    assert len(reader) == len(blank) == expected
    assert all(r.passed == 1 for r in reader), [r for r in reader if not r.passed]
    assert all(r.passed == 0 and "NotImplementedError" in r.detail for r in blank), blank
    copied = {r.exercise: r for r in rows if r.student == "calls_reference"}
    assert copied["ex-mdp-in-place"].passed == 0
    assert "rlnotes' own rlnotes.mdp.in_place_policy_evaluation" in copied["ex-mdp-in-place"].detail
    assert copied["ex-mdp-modified-policy-iteration"].passed == 1
    assert per_student < 120


def test_kernel_start_retries_only_a_port_taken_before_the_bind(tmp_path):
    """A kernel whose port another process took between its choice and the bind is started
    again; any other failure, and the last attempt's, reaches the grader as it was."""
    from rlnotes.exercises.grade import _start_kernel

    log = tmp_path / "kernel.log"
    calls = []

    def flaky(failures, message):
        def make():
            calls.append(1)
            if len(calls) <= failures:
                raise RuntimeError(message)
            return "kernel"
        return make

    assert _start_kernel(flaky(2, "zmq.error.ZMQError: Address already in use"), log) == "kernel"
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(RuntimeError, match="Address already in use"):
        _start_kernel(flaky(3, "zmq.error.ZMQError: Address already in use"), log)
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(RuntimeError, match="memory"):
        _start_kernel(flaky(1, "kernel failed to start (killed: memory)"), log)
    assert len(calls) == 1
    calls.clear()
    log.write_text("... zmq.error.ZMQError: Address already in use\n")   # said only in the log
    assert _start_kernel(flaky(1, "kernel failed to start (exit 1)"), log) == "kernel"
    assert len(calls) == 2
