"""nbgrader, for real: ``python -m rlnotes.exercises nbgrader COURSE_DIR`` writes a course that
nbgrader's own ``generate_assignment`` and ``autograde`` run unchanged (issue 16, item 10).

nbgrader lives in an environment of its own (``make nbgrader-env``: the version pinned in
pyproject.toml's ``nbgrader`` extra, cached under ~/.cache/rlnotes), given by
``RLNOTES_NBGRADER_VENV``; its kernel is this environment's Python, which has rlnotes. ``make
test-tools`` runs this file. The course is made from the fixture book (two chapters, points 1
and 2 in alpha), and, without running nbgrader, from the real book.
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rlnotes.exercises.nbgrader import write_course

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "exercises"
BOOK = FIXTURES / "fixture_book"
VENV = Path(os.environ.get("RLNOTES_NBGRADER_VENV", Path.home() / ".cache" / "rlnotes" / "nbgrader-0.9.6"))


def test_the_pin_is_the_same_in_pyproject_and_makefile():
    pin = re.search(r'nbgrader = \["nbgrader==([\d.]+)"\]', (ROOT / "pyproject.toml").read_text()).group(1)
    assert re.search(rf"^NBGRADER_VERSION := {re.escape(pin)}$", (ROOT / "Makefile").read_text(), re.M)
    assert "nbgrader" not in (ROOT / "requirements.txt").read_text()


def test_real_book_course_has_nbgrader_metadata(tmp_path):
    written = write_course(tmp_path / "course", ROOT)
    assert written, "no assignment written"
    for path in written:
        nb = nbformat.read(path, as_version=4)
        meta = [c.metadata["nbgrader"] for c in nb.cells]
        assert all(m["schema_version"] == 3 for m in meta)
        ids = [m["grade_id"] for m in meta]
        assert len(ids) == len(set(ids))
        tests = [c for c in nb.cells if c.metadata["nbgrader"]["grade"]]
        answers = [c for c in nb.cells if c.metadata["nbgrader"]["solution"]]
        assert tests and len(tests) == len(answers)
        assert all(c.cell_type == "code" and c.source.lstrip().startswith(("check_", "#"))
                   for c in tests)
        assert all("BEGIN SOLUTION" in c.source for c in answers)
        assert all(c.metadata["nbgrader"]["locked"] for c in nb.cells if c not in answers)
        assert not any("{solution}" in c.source for c in nb.cells if c.cell_type == "markdown")
        # The assignment is the exercises section: it starts with the setup cell.
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert "import" in code[0].source


def _nbgrader(course, *args):
    env = dict(os.environ, PATH=f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}",
               JUPYTER_PATH=str(course / "jupyter"),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(FIXTURES)]))
    env.pop("JUPYTER_CONFIG_DIR", None)
    proc = subprocess.run([str(VENV / "bin" / "nbgrader"), *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


@pytest.mark.skipif(not (VENV / "bin" / "nbgrader").exists() and not os.environ.get("CI"),
                    reason="nbgrader is not installed: run `make nbgrader-env` (make test-tools does)")
def test_nbgrader_generate_assignment_and_autograde_score_our_course(tmp_path):
    course = tmp_path / "course"
    proc = subprocess.run([sys.executable, "-m", "rlnotes.exercises", "nbgrader", str(course),
                           "--book-dir", str(BOOK)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert (course / "source" / "alpha" / "alpha.ipynb").is_file()
    assert (course / "source" / "beta" / "beta.ipynb").is_file()
    # nbgrader's kernel ("python3") is this environment's Python, where rlnotes is installed.
    spec = course / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (rlnotes)", "language": "python"}))
    _nbgrader(course, "generate_assignment", "alpha", "--force")
    release = course / "release" / "alpha" / "alpha.ipynb"
    text = release.read_text()
    assert "SECRET-CODE" not in text and "SECRET-WRITTEN" not in text
    assert "raise NotImplementedError()" in text
    for student, source in [("good", course / "source" / "alpha" / "alpha.ipynb"),
                            ("blank", release)]:
        folder = course / "submitted" / student / "alpha"
        folder.mkdir(parents=True)
        shutil.copy(source, folder / "alpha.ipynb")
    _nbgrader(course, "autograde", "alpha", "--force")
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv", newline="") as fh:
        scores = {r["student_id"]: (float(r["score"]), float(r["max_score"])) for r in csv.DictReader(fh)}
    # alpha: ex-alpha-add (1 point) and ex-alpha-mean ("# points: 2" in its check cell).
    assert scores == {"good": (3.0, 3.0), "blank": (0.0, 3.0)}
