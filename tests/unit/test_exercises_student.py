"""The student edition: solution regions stubbed, written solutions removed, notebooks valid.

Most tests use the fixture book in tests/fixtures/exercises/ (independent of the chapters); the
last ones apply the student edition to the real book.
"""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rlnotes.exercises._notebook import (
    FormatError, chapter_notebooks, exercises_section, find_book_dir, find_exercises,
    solution_regions,
    strip_written_solutions, stub_regions,
)
from rlnotes.exercises.student import student_notebook, write_student_edition

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "exercises"
BOOK = FIXTURES / "fixture_book"
PYTHON = sys.executable
# Subprocesses run this checkout's package, whatever the environment's install points at.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    written = write_student_edition(out, BOOK)
    return out, written


def _code(nb):
    return [c.source for c in nb.cells if c.cell_type == "code"]


# ------------------------------------------------------------------ the fixture book

def test_every_chapter_notebook_is_written_under_the_same_relative_path(edition):
    out, written = edition
    assert sorted(p.relative_to(out).as_posix() for p in written) == ["book/alpha.ipynb", "book/beta.ipynb"]
    for name in ["_toc.yml", "_config.yml", "book/intro.md"]:
        assert (out / name).is_file()


def test_no_solution_line_survives_anywhere(edition):
    out, _ = edition
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert "SECRET" not in text, path
            assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text, path
    for rel in ["book/alpha.ipynb", "book/beta.ipynb"]:
        text = (out / rel).read_text(encoding="utf-8")
        assert "{solution" not in text


def test_notebooks_are_valid_and_have_no_outputs(edition):
    out, written = edition
    for path in written:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None


def test_non_solution_cells_are_unchanged(edition):
    out, _ = edition
    master = nbformat.read(BOOK / "book" / "alpha.ipynb", as_version=4)
    student = nbformat.read(out / "book" / "alpha.ipynb", as_version=4)
    untouched = [c.source for c in master.cells
                 if "SECRET" not in c.source and "{solution" not in c.source]
    kept = [c.source for c in student.cells if "NotImplementedError" not in c.source]
    assert [s for s in kept if s in untouched] == untouched
    # The only other kept cell: the text around an embedded solution block.
    assert [s for s in kept if s not in untouched] == [
        "Text before the solution.\n\n\nText after the solution."]
    # The example of the format inside a code block of a Markdown page is not a solution.
    assert "````{solution} ex-example" in (out / "book" / "intro.md").read_text()


def test_stubs_keep_the_rest_of_the_cell_and_the_indentation(edition):
    out, _ = edition
    beta = nbformat.read(out / "book" / "beta.ipynb", as_version=4)
    cell = next(s for s in _code(beta) if "def my_discounted" in s)
    assert cell.splitlines() == [
        "GAMMA = 0.9", "", "", "def my_discounted(rewards, gamma=GAMMA):",
        "    G = np.zeros(len(rewards))",
        "    raise NotImplementedError('exercise ex-beta-discount: replace this line with your solution')",
        "    return G"]
    # The gated solution's code cell is gone, the text after it stays.
    assert not any("print(my_discounted" in s for s in _code(beta))
    assert beta.cells[-1].source == "That is all for beta."


def _run_cells(nb):
    """Execute a notebook's code cells in this process; return the exceptions per cell."""
    sys.path.insert(0, str(FIXTURES))
    try:
        ns: dict = {}
        errors = []
        for src in _code(nb):
            try:
                exec(compile(src, "<cell>", "exec"), ns)
                errors.append(None)
            except Exception as err:  # noqa: BLE001
                errors.append(err)
        return errors
    finally:
        sys.path.remove(str(FIXTURES))


def test_stubs_raise_not_implemented_and_master_solutions_pass(edition, capsys):
    out, _ = edition
    for name in ["alpha", "beta"]:
        master = nbformat.read(BOOK / "book" / f"{name}.ipynb", as_version=4)
        assert _run_cells(master) == [None] * len(_code(master))
        student = nbformat.read(out / "book" / f"{name}.ipynb", as_version=4)
        errors = _run_cells(student)
        for src, err in zip(_code(student), errors):
            if src.startswith("check_") or "\ncheck_" in src:  # a "# points:" line may come first
                assert isinstance(err, NotImplementedError), src
            else:
                assert err is None, (src, err)
    assert "NOT DONE check_add" in capsys.readouterr().out


def test_cli_writes_the_edition(tmp_path):
    proc = subprocess.run([PYTHON, "-m", "rlnotes.exercises", "student", str(tmp_path / "se"),
                           "--book-dir", str(BOOK)], capture_output=True, text=True, cwd=tmp_path, env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "se" / "book" / "alpha.ipynb").is_file()


def test_cli_finds_the_book_from_the_working_directory(tmp_path):
    proc = subprocess.run([PYTHON, "-m", "rlnotes.exercises", "student", str(tmp_path / "se")],
                          capture_output=True, text=True, cwd=BOOK / "book", env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "se" / "book" / "beta.ipynb").is_file()


@pytest.mark.parametrize("args", [[], ["student"], ["student", "x", "--book-dir", "/no/such/dir"],
                                  ["student", str(BOOK), "--book-dir", str(BOOK)], ["nonsense", "x"]])
def test_cli_rejects_bad_usage(args, tmp_path):
    proc = subprocess.run([PYTHON, "-m", "rlnotes.exercises", *args], capture_output=True,
                          text=True, cwd=tmp_path, env=ENV)
    assert proc.returncode == 2
    assert "usage" in proc.stderr


# ------------------------------------------------------------------ the building blocks

def test_stub_regions_cases():
    src = "x = 1\n# BEGIN SOLUTION\ny = 2\n# END SOLUTION\nz = 3\n"
    assert stub_regions(src, "ex-a") == (
        "x = 1\nraise NotImplementedError('exercise ex-a: replace this line with your solution')\nz = 3\n")
    two = ("def f():\n    # BEGIN SOLUTION\n    a\n    # END SOLUTION\n"
           "def g():\n        ### BEGIN SOLUTION\n        b\n        ### END SOLUTION\n")
    out = stub_regions(two)
    assert out.count("raise NotImplementedError") == 2
    assert "\n        raise NotImplementedError" in out and "\n    raise NotImplementedError" in out
    assert stub_regions("no regions\n") == "no regions\n"
    assert [(r.begin, r.end) for r in solution_regions(src)] == [(1, 3)]


@pytest.mark.parametrize("bad", [
    "# BEGIN SOLUTION\nx\n",                                   # never closed
    "x\n# END SOLUTION\n",                                     # never opened
    "# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n",    # nested
    "# begin solution\nx\n# end solution\n",                   # malformed markers
    "# BEGIN SOLUTIONS\nx\n# END SOLUTIONS\n",
])
def test_unbalanced_or_malformed_markers_are_errors(bad):
    with pytest.raises(FormatError):
        stub_regions(bad)


def test_strip_written_solutions_fences():
    text = ("a\n```{solution} x\nS1\n```\nb\n::::{solution} y\n:::{note}\nS2\n:::\n::::\nc\n"
            "`````{solution} z\n````{hint}\nS3\n````\n`````\nd\n")
    new, removed, gate = strip_written_solutions(text)
    assert new == "a\nb\nc\nd\n" and removed == 3 and not gate
    example = "````md\n```{solution} x\nkeep\n```\n````\n"
    assert strip_written_solutions(example)[0] == example
    unclosed = strip_written_solutions("a\n```{solution} x\nS\n")
    assert unclosed[0] == "a\n"
    first, _, gate = strip_written_solutions("q\n```{solution-start} x\n```\nS\n")
    assert first == "q\n" and gate
    second, _, gate = strip_written_solutions("S\n```{solution-end}\n```\nafter\n", gate)
    assert second == "after\n" and not gate


def test_exercise_ids():
    md = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell
    region = "def f():\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION\n"
    nb = nbformat.v4.new_notebook(cells=[
        code(region), code("check_one(f)"),
        md("```{exercise} A\n:label: ex-a\nText\n```"), code(region), code("check_two(f, n=3)"),
        md("```{exercise} B\n:label: ex-b\n```"), code(region), code("check_b1(f)"),
        code(region), code("check_b2(f)"), code(region), code("print('no check')"),
    ])
    found, warnings = find_exercises(nb)
    assert [e.id for e in found] == ["check_one", "ex-a", "ex-b/check_b1", "ex-b/check_b2"]
    assert found[1].check.args == ["f"] and found[1].check.kwargs == {"n": "3"}
    assert len(warnings) == 1


@pytest.mark.parametrize("kwargs", [
    {"out_dir": None}, {"out_dir": ""}, {"out_dir": 3},
    {"out_dir": "OUT", "book_dir": "/no/such/book"},
    {"out_dir": str(BOOK)},                      # would overwrite the masters
    {"out_dir": str(BOOK / "book" / "inner")},   # inside the chapters' folder
    {"out_dir": str(BOOK / "_toc.yml")},         # a file
])
def test_write_student_edition_rejects_bad_arguments(kwargs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kwargs.setdefault("book_dir", BOOK)
    with pytest.raises(ValueError):
        write_student_edition(**kwargs)


@pytest.mark.parametrize("nb", [None, {"cells": "x"}, {"nbformat": 3, "cells": []}, [1, 2]])
def test_student_notebook_rejects_bad_notebooks(nb):
    with pytest.raises(ValueError):
        student_notebook(nb)


@pytest.mark.parametrize("func,arg", [(stub_regions, None), (stub_regions, 3),
                                      (strip_written_solutions, None), (strip_written_solutions, b"x"),
                                      (find_exercises, None), (find_exercises, {"cells": None})])
def test_text_helpers_reject_bad_input(func, arg):
    with pytest.raises(ValueError):
        func(arg)


def test_find_book_dir(tmp_path):
    assert find_book_dir(BOOK / "book") == BOOK
    assert find_book_dir(ROOT / "rlnotes") == ROOT
    assert find_book_dir(tmp_path) == ROOT  # falls back to the folder above the package
    assert chapter_notebooks(BOOK) == [Path("book/alpha.ipynb"), Path("book/beta.ipynb")]


# ------------------------------------------------------------------ the real book

REAL = chapter_notebooks(ROOT)


@pytest.mark.skipif(not REAL, reason="the book has no chapter notebooks yet")
def test_real_book_student_edition(tmp_path):
    from rlnotes.exercises.grade import load_checks

    checks = load_checks()
    written = write_student_edition(tmp_path / "se", ROOT)
    assert len(written) == len(REAL)
    for rel in REAL:
        master = nbformat.read(ROOT / rel, as_version=4)
        student = nbformat.read(tmp_path / "se" / rel, as_version=4)
        nbformat.validate(student)
        text = (tmp_path / "se" / rel).read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
        assert "{solution" not in text
        exercises, warnings = find_exercises(master, where=str(rel))
        assert not warnings, warnings
        for ex in exercises:
            assert ex.check.name in checks, f"{rel}: {ex.check.name} is not a registered check"
        # Every stubbed cell raises NotImplementedError where its solution was, and parses.
        regions = sum(len(solution_regions(c.source)) for c in master.cells if c.cell_type == "code")
        stubs = [c.source for c in student.cells if c.cell_type == "code"
                 and "raise NotImplementedError('exercise " in c.source]
        assert sum(s.count("raise NotImplementedError('exercise ") for s in stubs) == regions
        for src in stubs:
            compile(src, str(rel), "exec")


@pytest.mark.skipif(not REAL, reason="the book has no chapter notebooks yet")
def test_real_book_student_html_build_has_no_solutions(tmp_path):
    """`make student-book`: the student edition builds (without execution) and no page holds a
    solution admonition, while every chapter still shows its exercises."""
    proc = subprocess.run([PYTHON, "-m", "rlnotes.exercises", "student-book", str(tmp_path / "se"),
                           "--book-dir", str(ROOT)], capture_output=True, text=True, env=ENV,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = tmp_path / "se" / "_build" / "html"
    for rel in REAL:
        page = (html / rel.with_suffix(".html")).read_text(encoding="utf-8")
        assert 'class="solution' not in page
        master = nbformat.read(ROOT / rel, as_version=4)
        if exercises_section(master.cells) is None:  # an appendix: no exercises to show
            continue
        assert "exercise admonition" in page
        coding = any(solution_regions(c.source) for c in master.cells if c.cell_type == "code")
        # A chapter with coding exercises shows their stubs; one with written exercises only
        # would have none to show.
        assert ("NotImplementedError" in page) == coding, rel


def test_student_kit_leaves_the_instructors_page_out_and_ships_a_wheel_without_solutions(tmp_path):
    """Issue 16, item 9: the kit is the edition without the instructors' page, a wheel of the
    package alone (no book, no solution cell of any chapter) and a README for students."""
    import zipfile

    from rlnotes.exercises._notebook import cell_text, solution_regions
    from rlnotes.exercises.student import instructor_pages, write_student_kit

    root = Path(__file__).resolve().parents[2]
    dropped, toc = instructor_pages(root)
    assert Path("book/instructors") in dropped and "book/instructors" not in toc
    written, wheel, readme = write_student_kit(tmp_path / "kit", root)
    kit = tmp_path / "kit"
    assert not (kit / "book" / "instructors.md").exists()
    assert "book/instructors" not in (kit / "_toc.yml").read_text()
    assert "{doc}`instructors`" not in (kit / "book" / "intro.md").read_text()
    assert "pip install" in readme.read_text() and wheel.name in readme.read_text()
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        text = "\n".join(zf.read(n).decode("utf-8", "replace") for n in names)
    assert all(n.startswith(("rlnotes/", "rlnotes-")) for n in names), names
    assert "rlnotes/exercises/grade.py" in names and not any(n.endswith((".ipynb", ".md")) for n in names)
    for rel in written:
        master = nbformat.read(root / rel.relative_to(kit), as_version=4)
        for cell in master.cells:
            if cell.cell_type != "code":
                continue
            lines = cell_text(cell).splitlines()
            for region in solution_regions(cell_text(cell)):
                body = "\n".join(lines[region.begin + 1:region.end])
                assert body not in text, f"a solution of {rel.name} is in the wheel"
