"""The grader as a course uses it (issue 16): LMS layouts and zips, --notebook, --jobs with the
same result as one at a time, no false warnings, a grades file that is never lost, and bad
submissions folders that touch nothing. Kernels run only in the two class tests."""

import csv
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from rlnotes.exercises._output import OutputConflict, Row, feedback_text, write_grades
from rlnotes.exercises._submissions import (NothingToGrade, Student, chapter_key,
                                            collect_students, find_submission, unzip_safely)
from rlnotes.exercises.student import write_student_edition

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "exercises"
BOOK = FIXTURES / "fixture_book"
CHECKS = FIXTURES / "fixture_checks.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
OLD = "student,notebook,exercise,passed,detail,points,max_points\nzoe,book/alpha.ipynb,ex-alpha-add,1,,1,1\n"


def _grade(subs, out, *extra, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "rlnotes.exercises", "grade", str(subs), "--out", str(out),
         "--book-dir", str(BOOK), "--checks", str(CHECKS), "--no-progress",
         "--cell-timeout", "20", "--check-timeout", "20", *extra],
        capture_output=True, text=True, env=ENV, cwd=cwd or out.parent)


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _zip(path, files: dict):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


@pytest.fixture(scope="module")
def lms_class(tmp_path_factory):
    """Students in every layout an LMS produces; graded with --jobs 2 and with --jobs 1."""
    tmp = tmp_path_factory.mktemp("lms")
    edition = tmp / "edition"
    write_student_edition(edition, BOOK)
    alpha, beta = (BOOK / "book" / "alpha.ipynb").read_text(), (BOOK / "book" / "beta.ipynb").read_text()
    blank_alpha = (edition / "book" / "alpha.ipynb").read_text()
    subs = tmp / "subs"
    (subs / "alice" / "book").mkdir(parents=True)                       # the edition's paths
    (subs / "alice" / "book" / "alpha.ipynb").write_text(alpha)
    (subs / "alice" / "book" / "beta.ipynb").write_text(beta)
    (subs / "bob" / "Downloads").mkdir(parents=True)                    # renamed by the LMS
    (subs / "bob" / "Downloads" / "alpha (1).ipynb").write_text(blank_alpha)
    (subs / "bob" / "bob_4411_99_beta.ipynb").write_text(beta)
    (subs / "frank_123456_7890_alpha.ipynb").write_text(alpha)          # flat Canvas export
    (subs / "frank_123456_7891_beta.ipynb").write_text(beta)
    _zip(subs / "ivan.zip", {"hw/book/alpha.ipynb": alpha, "hw/book/beta.ipynb": beta})
    (subs / "judy").mkdir()                                             # a zip in the folder
    _zip(subs / "judy" / "submission.zip", {"alpha.ipynb": alpha})
    (subs / "judy" / "beta-1.ipynb").write_text(beta)
    (subs / "mallory").mkdir()                                          # an unsafe zip
    _zip(subs / "mallory" / "evil.zip", {"../../escaped.ipynb": alpha})
    for sub in ["first", "second"]:                                     # two candidates
        (subs / "kim" / sub).mkdir(parents=True)
        (subs / "kim" / sub / "alpha.ipynb").write_text(alpha)
    (subs / "kim" / "beta.ipynb").write_text(beta)
    parallel, serial = tmp / "parallel.csv", tmp / "serial.csv"
    p2 = _grade(subs, parallel, "--jobs", "2")
    p1 = _grade(subs, serial, "--jobs", "1")
    assert p2.returncode == 0 and p1.returncode == 0, p2.stderr[-3000:] + p1.stderr[-3000:]
    return tmp, _rows(parallel), p2, serial, parallel, p1


def _by(rows, student):
    return {(r["notebook"], r["exercise"]): r for r in rows if r["student"] == student}


def test_jobs_2_gives_the_same_files_as_jobs_1(lms_class):
    tmp, rows, _, serial, parallel, _ = lms_class
    assert parallel.read_bytes() == serial.read_bytes()
    assert (tmp / "parallel_summary.csv").read_text() == (tmp / "serial_summary.csv").read_text()
    for f in (tmp / "serial_feedback").iterdir():
        assert (tmp / "parallel_feedback" / f.name).read_text() == f.read_text()


def test_clean_notebooks_print_no_warning(lms_class):
    """Issue 16, item 1: finished kernel processes are not reported as left running."""
    _, _, p2, _, _, p1 = lms_class
    assert "warning" not in p2.stderr and "warning" not in p1.stderr, p2.stderr + p1.stderr


def test_every_lms_layout_is_matched_to_its_chapter(lms_class):
    _, rows, _, _, _, _ = lms_class
    assert sorted({r["student"] for r in rows}) == ["alice", "bob", "frank", "ivan", "judy", "kim",
                                                   "mallory"]
    for student in ["alice", "frank", "ivan", "judy"]:
        assert all(r["passed"] == "1" for r in _by(rows, student).values()), _by(rows, student)
    bob = _by(rows, "bob")
    assert "not done" in bob[("book/alpha.ipynb", "ex-alpha-add")]["detail"]
    assert bob[("book/beta.ipynb", "ex-beta-discount")]["passed"] == "1"


def test_unsafe_zips_and_ambiguous_files_are_reported(lms_class):
    _, rows, _, _, _, _ = lms_class
    mallory = _by(rows, "mallory")[("book/alpha.ipynb", "ex-alpha-add")]["detail"]
    assert "missing" in mallory and "evil.zip could not be unpacked" in mallory
    assert "outside" in mallory
    kim = _by(rows, "kim")
    assert kim[("book/alpha.ipynb", "ex-alpha-add")]["detail"].startswith("ambiguous: 2 notebooks")
    assert kim[("book/beta.ipynb", "ex-beta-discount")]["passed"] == "1"
    assert not (lms_class[0] / "escaped.ipynb").exists()


def test_notebook_option_grades_one_chapter_and_the_grades_file_is_protected(lms_class, tmp_path):
    tmp = lms_class[0]
    out = tmp_path / "grades.csv"
    proc = _grade(tmp / "subs", out, "--notebook", "book/beta.ipynb", "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    rows = _rows(out)
    assert {r["notebook"] for r in rows} == {"book/beta.ipynb"} and len(rows) == 7
    # Grading alpha into the same file would drop the beta rows: refused, file untouched.
    before = out.read_bytes()
    proc = _grade(tmp / "subs", out, "--notebook", "alpha", "--jobs", "2")
    assert proc.returncode == 1 and "--merge" in proc.stderr, proc.stderr
    assert out.read_bytes() == before
    assert {r["notebook"] for r in _rows(tmp_path / "grades.new.csv")} == {"book/alpha.ipynb"}


# ------------------------------------------------------------------ no kernels below

@pytest.mark.parametrize("setup,words", [
    ("empty", ["empty"]),
    ("loose_notebooks", ["no student folders", "alpha.ipynb"]),
    ("unreadable_only", ["cannot be read"]),
    ("other_files_only", ["no student folders", "notes.txt"]),
    ("no_chapter_notebooks", ["none of the 1 student(s)", "missing"]),
])
def test_nothing_to_grade_exits_1_and_leaves_the_grades_file(setup, words, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    if setup == "loose_notebooks":
        shutil.copy(BOOK / "book" / "alpha.ipynb", subs)
    elif setup == "unreadable_only":
        (subs / "broken").symlink_to(tmp_path / "nowhere")
    elif setup == "other_files_only":
        (subs / "notes.txt").write_text("hello")
    elif setup == "no_chapter_notebooks":
        (subs / "alice").mkdir()
        (subs / "alice" / "essay.txt").write_text("hello")
    out = tmp_path / "grades.csv"
    out.write_text(OLD)
    proc = _grade(subs, out)
    assert proc.returncode == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    assert out.read_text() == OLD
    assert not (tmp_path / "grades_summary.csv").exists()


def test_a_missing_submissions_folder_is_a_usage_error_and_touches_nothing(tmp_path):
    out = tmp_path / "grades.csv"
    out.write_text(OLD)
    proc = _grade(tmp_path / "nope", out)
    assert proc.returncode == 2 and "submissions_dir" in proc.stderr
    assert out.read_text() == OLD


@pytest.mark.parametrize("args,words", [
    (["--notebook", "book/gamma.ipynb"], ["not a chapter", "book/alpha.ipynb"]),
    (["--jobs", "0"], ["at least 1 job"]),
    (["--jobs", "many"], ["whole number"]),
    (["--force", "--merge"], ["exclude"]),
])
def test_bad_grade_options_are_usage_errors(args, words, tmp_path):
    (tmp_path / "subs" / "a").mkdir(parents=True)
    proc = _grade(tmp_path / "subs", tmp_path / "g.csv", *args)
    assert proc.returncode == 2, proc.stderr
    for word in words:
        assert word in proc.stderr


def test_write_grades_never_drops_rows_unless_told(tmp_path):
    out = tmp_path / "g.csv"
    out.write_text(OLD)
    new = [Row("amy", "book/alpha.ipynb", "ex-alpha-add", 0, "x", 0, 1)]
    with pytest.raises(OutputConflict, match="zoe"):
        write_grades(out, new)
    assert out.read_text() == OLD
    write_grades(out, new, merge=True)
    assert [r["student"] for r in _rows(out)] == ["zoe", "amy"]
    write_grades(out, new, replace=True)
    assert [r["student"] for r in _rows(out)] == ["amy"]
    (tmp_path / "other.csv").write_text("name,score\nx,1\n")
    with pytest.raises(OutputConflict, match="not a grades file"):
        write_grades(tmp_path / "other.csv", new)
    # Regrading the same students replaces the file (same rows, new results).
    write_grades(out, [Row("amy", "book/alpha.ipynb", "ex-alpha-add", 1, "", 1, 1)])
    assert _rows(out)[0]["passed"] == "1"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_unzip_safely_refuses_escapes_bombs_and_corrupt_files(tmp_path):
    _zip(tmp_path / "ok.zip", {"a/b.ipynb": "{}", "__MACOSX/._b.ipynb": "x"})
    unzip_safely(tmp_path / "ok.zip", tmp_path / "ok")
    assert (tmp_path / "ok" / "a" / "b.ipynb").read_text() == "{}"
    assert not (tmp_path / "ok" / "__MACOSX").exists()
    _zip(tmp_path / "escape.zip", {"../x.ipynb": "{}"})
    with pytest.raises(ValueError, match="outside"):
        unzip_safely(tmp_path / "escape.zip", tmp_path / "e")
    _zip(tmp_path / "abs.zip", {"/etc/x.ipynb": "{}"})
    with pytest.raises(ValueError, match="outside"):
        unzip_safely(tmp_path / "abs.zip", tmp_path / "a")
    _zip(tmp_path / "big.zip", {"big.ipynb": "0" * 5000})
    with pytest.raises(ValueError, match="limit"):
        unzip_safely(tmp_path / "big.zip", tmp_path / "b", limit=1000)
    (tmp_path / "corrupt.zip").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(ValueError, match="zip"):
        unzip_safely(tmp_path / "corrupt.zip", tmp_path / "c")


@pytest.mark.parametrize("name,key", [
    ("frank_123456_7890_mdp_dynamic_programming.ipynb", "mdp_dynamic_programming"),
    ("td_learning (1).ipynb", "td_learning"),
    ("td_learning-2.ipynb", "td_learning"),
    ("td_learning copy.ipynb", "td_learning"),
    ("smith_late_1_2_td_learning (3).ipynb", "td_learning"),
    ("TD Learning.ipynb", "td_learning"),
])
def test_chapter_key_undoes_lms_renaming(name, key):
    assert chapter_key(name) == key


def test_collect_students_groups_a_flat_export(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ["amy_1_2_alpha.ipynb", "amy_1_3_beta.ipynb", "bo_late_4_5_alpha.ipynb"]:
        (subs / name).write_text("{}")
    students = collect_students(subs, tmp_path / "scratch")
    assert [(s.name, sorted(p.name for p in s.files)) for s in students] == [
        ("amy", ["amy_1_2_alpha.ipynb", "amy_1_3_beta.ipynb"]), ("bo", ["bo_late_4_5_alpha.ipynb"])]
    path, why = find_submission(students[0], Path("book/beta.ipynb"))
    assert path.name == "amy_1_3_beta.ipynb" and why == ""
    path, why = find_submission(Student("x"), Path("book/beta.ipynb"))
    assert path is None and why.startswith("missing")
    with pytest.raises(NothingToGrade):
        collect_students(_empty(tmp_path), tmp_path / "s")


def _empty(tmp_path):
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def test_feedback_text_shows_points_hints_and_partial_credit():
    rows = [Row("amy", "book/beta.ipynb", "ex-beta-discount", 0,
                "1 of 3 parts passed. [gamma = 0.5] off. Hint: run backwards", 0.33, 1),
            Row("amy", "book/alpha.ipynb", "ex-alpha-add", 1, "", 1, 1)]
    text = feedback_text("amy", rows, {"book/beta.ipynb": "amy/beta.ipynb"})
    assert "1.33 / 2 points" in text and "| ex-beta-discount | partly passed | 0.33 / 1 |" in text
    assert "**Hint:** run backwards" in text and "Graded file: `amy/beta.ipynb`" in text


def test_master_without_exercises_heading_fails_its_chapter_clearly(tmp_path):
    from rlnotes.exercises.grade import grade

    book = tmp_path / "book"
    shutil.copytree(BOOK, book)
    nb = nbformat.read(book / "book" / "beta.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if c.source.strip() != "## Exercises"]
    nbformat.write(nb, book / "book" / "beta.ipynb")
    subs = tmp_path / "subs"
    (subs / "amy").mkdir(parents=True)
    shutil.copy(book / "book" / "beta.ipynb", subs / "amy")
    rows = grade(subs, tmp_path / "g.csv", book, checks=[CHECKS], notebooks=["book/beta.ipynb"],
                 progress=False, summary=False)
    assert len(rows) == 1 and rows[0].passed == 0
    assert "no '## Exercises' heading" in rows[0].detail and "CONTRIBUTING" in rows[0].detail
