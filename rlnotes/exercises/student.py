"""The student edition: the book with solutions replaced by stubs and written solutions removed.

``python -m rlnotes.exercises student OUT_DIR`` writes, for every chapter notebook of the book
(``_toc.yml``), a copy under the same path relative to the book's root (``OUT_DIR/book/x.ipynb``)
in which

* each solution region of a code cell (the lines between a line ``# BEGIN SOLUTION`` and a line
  ``# END SOLUTION``, markers included) is replaced by one line
  ``raise NotImplementedError("exercise <label>: replace this line with your solution")`` at the
  indentation of the BEGIN marker; the rest of the cell is kept;
* written solutions are removed: ``{solution}`` blocks (backtick or colon fences of any length;
  a Markdown cell left empty is dropped) and gated ``{solution-start}`` ... ``{solution-end}``
  blocks together with the cells between them;
* every output and execution count is cleared.

Alongside the notebooks it writes what a Jupyter Book build of the edition needs: the other
files of the chapters' folders (Markdown pages get their written solutions removed as well),
``_config.yml``, ``_toc.yml``, the bibliography files and the local Sphinx extensions. Pages for
instructors (the parts of ``_toc.yml`` whose caption mentions instructors) are left out, from the
table of contents and from the folder, and references to them become plain text.

With ``kit=True`` (``make student``) it also builds the ``rlnotes`` package as a wheel into
``OUT_DIR/dist/`` (the package alone: no book, no solutions) and writes ``OUT_DIR/README.md``,
a page for students: install the wheel, open the notebooks, check your work.
``python -m rlnotes.exercises student-book OUT_DIR`` then builds that edition to
``OUT_DIR/_build/html`` (:func:`build_student_book`).
"""

from __future__ import annotations

import ast
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rlnotes.exercises._notebook import (
    _SKIP_DIRS, FormatError, cell_text, cells_with_labels, chapter_notebooks, check_book_dir,
    solution_regions, strip_written_solutions, stub_regions,
)

__all__ = ["StudentNotebook", "student_notebook", "write_student_edition", "build_student_book",
           "instructor_pages", "build_wheel", "STUDENT_README"]


def _nbformat():
    try:
        import nbformat
    except ImportError as err:  # pragma: no cover - nbformat ships with Jupyter
        raise ImportError("the student edition needs nbformat (pip install nbformat)") from err
    return nbformat


@dataclass
class StudentNotebook:
    """A student notebook and what was taken out of it."""

    nb: dict
    stubbed_regions: int = 0
    removed_solutions: int = 0
    removed_cells: int = 0
    stubbed_cells: list = field(default_factory=list)  # indices in the new notebook


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def student_notebook(nb, where: str = "notebook") -> StudentNotebook:
    """The student version of one notebook (an ``nbformat`` v4 notebook; not modified).

    Raises :class:`~rlnotes.exercises._notebook.FormatError` (a ``ValueError``) when a solution
    marker is unbalanced or malformed, or when stubbing breaks a cell's syntax, so that a
    solution never leaks silently.
    """
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"nb must be a notebook (a dict with a 'cells' list), got {type(nb).__name__}")
    if not isinstance(where, str):
        raise ValueError(f"where must be a string, got {type(where).__name__}")
    if nb.get("nbformat") != 4:
        raise ValueError(f"nb must be an nbformat 4 notebook, got nbformat {nb.get('nbformat')!r}")
    out = copy.deepcopy(nb)
    result = StudentNotebook(out)
    cells = []
    gate = False
    for i, cell, kind, text, label in cells_with_labels(out["cells"]):
        if kind == "markdown":
            new, removed, gate = strip_written_solutions(text, gate)
            result.removed_solutions += removed
            if new != text:
                if not new.strip():
                    result.removed_cells += 1
                    continue
                cell["source"] = new
            cells.append(cell)
            continue
        if gate:  # a cell inside {solution-start} ... {solution-end}
            result.removed_cells += 1
            continue
        if kind == "code":
            regions = solution_regions(text, f"{where}, cell {i}")
            if regions:
                new = stub_regions(text, label, f"{where}, cell {i}")
                if _parses(text) and not _parses(new):
                    raise FormatError(f"{where}, cell {i}: replacing the solution region by a stub "
                                      "leaves invalid Python; put the markers around whole "
                                      "statements")
                cell["source"] = new
                result.stubbed_regions += len(regions)
                result.stubbed_cells.append(len(cells))
            cell["outputs"] = []
            cell["execution_count"] = None
            cell.get("metadata", {}).pop("execution", None)
        cells.append(cell)
    out["cells"] = cells
    return result


def _config_extras(book_dir: Path) -> list[Path]:
    """Files and folders named by ``_config.yml`` that a build needs (bib files, extensions)."""
    extras: list[Path] = []
    config = book_dir / "_config.yml"
    if not config.is_file():
        return extras
    text = config.read_text(encoding="utf-8")
    try:
        import yaml

        data = yaml.safe_load(text) or {}
        names = list(data.get("bibtex_bibfiles") or [])
        local = ((data.get("sphinx") or {}).get("local_extensions") or {})
        names += [str(v) for v in local.values()]
    except Exception:  # no PyYAML: fall back to the usual names
        names = re.findall(r"^\s*-\s*(\S+\.bib)\s*$", text, re.M) + ["_ext"]
    for name in names:
        path = Path(name)
        if not path.is_absolute() and (book_dir / path).exists() and path not in extras:
            extras.append(path)
    return extras


def instructor_pages(book_dir) -> tuple[list[Path], str | None]:
    """The pages of the parts of ``_toc.yml`` whose caption mentions instructors (relative
    paths without suffix, as in the toc), and the text of the toc without those parts (None
    when there is nothing to remove)."""
    toc = Path(book_dir) / "_toc.yml"
    if not toc.is_file():
        return [], None
    import yaml

    data = yaml.safe_load(toc.read_text(encoding="utf-8")) or {}
    parts = data.get("parts")
    if not isinstance(parts, list):
        return [], None
    dropped, kept = [], []
    for part in parts:
        if isinstance(part, dict) and "instructor" in str(part.get("caption", "")).lower():
            dropped += [Path(str(c["file"])) for c in part.get("chapters") or []
                        if isinstance(c, dict) and "file" in c]
        else:
            kept.append(part)
    if not dropped:
        return [], None
    data["parts"] = kept
    header = "# Table of contents of the student edition (pages for instructors left out).\n"
    return dropped, header + yaml.safe_dump(data, sort_keys=False)


_DOC_ROLE_RE = re.compile(r"\{doc\}`(?:(?P<text>[^`<]*?)\s*<(?P<target>[^`>]+)>|(?P<bare>[^`<>]+))`")


def _unlink_pages(text: str, pages: set, here: Path) -> str:
    """``text`` with ``{doc}`` references to ``pages`` replaced by plain text."""
    def repl(m):
        target = (m.group("target") or m.group("bare")).strip()
        resolved = Path(os.path.normpath(here.parent / target)) if not target.startswith("/") \
            else Path(target.lstrip("/"))
        if resolved.with_suffix("") in pages or Path(target).with_suffix("") in pages:
            return (m.group("text") or "").strip() or "the instructors' guide (not in the student edition)"
        return m.group(0)
    return _DOC_ROLE_RE.sub(repl, text)


def _copy_tree_file(src: Path, dst: Path, pages: set = frozenset(), rel: Path | None = None) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.suffix == ".md":
        text = src.read_text(encoding="utf-8")
        new, _, _ = strip_written_solutions(text)
        if pages and rel is not None:
            new = _unlink_pages(new, pages, rel)
        dst.write_text(new, encoding="utf-8")
    else:
        shutil.copyfile(src, dst)


def write_student_edition(out_dir, book_dir=None) -> list[Path]:
    """Write the student edition of the book at ``book_dir`` (default: found from the working
    directory, see :func:`~rlnotes.exercises._notebook.find_book_dir`) into ``out_dir``.

    Returns the paths of the notebooks written. Files already in ``out_dir`` that the edition does
    not contain are left alone.
    """
    if not isinstance(out_dir, (str, os.PathLike)) or str(out_dir) == "":
        raise ValueError(f"out_dir must be a non-empty path, got {out_dir!r}")
    book = check_book_dir(book_dir)
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir must be a folder, {str(out_dir)!r} is a file")
    if out == book:
        raise ValueError(f"out_dir must not be the book folder itself ({book}): the student "
                         "edition would overwrite the master notebooks")
    notebooks = chapter_notebooks(book)
    if not notebooks:
        raise ValueError(f"book_dir: no chapter notebooks found in {book}")
    folders = sorted({nb.parts[0] for nb in notebooks if len(nb.parts) > 1})
    for folder in folders:
        if out == book / folder or (book / folder) in out.parents:
            raise ValueError(f"out_dir must not lie inside the book's {folder}/ folder ({out})")
    nbformat = _nbformat()
    dropped, student_toc = instructor_pages(book)
    pages = {p.with_suffix("") for p in dropped}
    notebooks = [rel for rel in notebooks if rel.with_suffix("") not in pages]
    # Transform everything first, so that a format error leaves out_dir untouched.
    editions = {}
    for rel in notebooks:
        nb = nbformat.read(book / rel, as_version=4)
        student = student_notebook(nb, where=str(rel)).nb
        for cell in student["cells"]:
            if cell.get("cell_type") == "markdown" and pages:
                cell["source"] = _unlink_pages(cell_text(cell), pages, rel)
        nbformat.validate(student)
        editions[rel] = student
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rel, student in editions.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student, out / rel)
        written.append(out / rel)
    # What a Jupyter Book build of the edition needs besides the chapter notebooks.
    for folder in folders:
        for src in sorted((book / folder).rglob("*")):
            rel = src.relative_to(book)
            if (src.is_dir() or rel in editions or rel.with_suffix("") in pages
                    or any(p in _SKIP_DIRS or p.startswith(".") for p in rel.parts)):
                continue
            if src.suffix == ".ipynb":
                nb = nbformat.read(src, as_version=4)
                nbformat.write(student_notebook(nb, where=str(rel)).nb, out / rel)
                continue
            _copy_tree_file(src, out / rel, pages, rel)
    for name in ["_config.yml", "_toc.yml"]:
        if (book / name).is_file():
            shutil.copyfile(book / name, out / name)
    if student_toc is not None:
        (out / "_toc.yml").write_text(student_toc, encoding="utf-8")
    for rel in notebooks:  # root-level pages listed in the toc, e.g. an intro.md
        if len(rel.parts) == 1:
            for md in (book / rel).parent.glob(rel.stem + ".md"):
                _copy_tree_file(md, out / md.relative_to(book), pages, md.relative_to(book))
    for extra in _config_extras(book):
        src = book / extra
        if src.is_dir():
            shutil.copytree(src, out / extra, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif extra.parts[0] not in folders:
            _copy_tree_file(src, out / extra)
    return written


def _student_config(config: Path, execute: bool) -> None:
    import yaml

    data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    run = data.setdefault("execute", {})
    if execute:
        run["execute_notebooks"] = "force"
        run["allow_errors"] = True  # the stubs raise NotImplementedError, by design
    else:
        run["execute_notebooks"] = "off"
    title = data.get("title") or "rlnotes"
    if "student edition" not in title:
        data["title"] = f"{title} (student edition)"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def build_student_book(out_dir, book_dir=None, execute: bool = False, quiet: bool = False) -> Path:
    """Write the student edition into ``out_dir`` and build it with Jupyter Book.

    The build uses the book's own ``_config.yml`` with execution switched off (``execute=False``,
    fast; pages show code without outputs) or forced with errors allowed (``execute=True``;
    pages show outputs, and the stub cells show their ``NotImplementedError``). Returns the HTML
    folder, ``out_dir/_build/html``.
    """
    if not isinstance(execute, bool):
        raise ValueError(f"execute must be True or False, got {execute!r}")
    write_student_edition(out_dir, book_dir)
    out = Path(out_dir).resolve()
    if not (out / "_config.yml").is_file() or not (out / "_toc.yml").is_file():
        raise ValueError("book_dir: the book has no _config.yml/_toc.yml, so there is no HTML "
                         "book to build")
    _student_config(out / "_config.yml", execute)
    cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
           "build", str(out), "--builder", "html"]
    env = dict(os.environ, RLNOTES_PROGRESS="0")
    proc = subprocess.run(cmd, cwd=out, env=env, text=True,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.STDOUT if quiet else None)
    if proc.returncode != 0:
        tail = (proc.stdout or "")[-3000:] if quiet else ""
        raise RuntimeError(f"jupyter-book build of the student edition failed "
                           f"(exit {proc.returncode}){': ' + tail if tail else ''}")
    return out / "_build" / "html"


STUDENT_README = """\
# {title}: the student edition

This folder holds the chapters of the book as notebooks (`book/`), with the solutions of the
exercises taken out, and the companion package `rlnotes` as a wheel (`dist/`): the code the
chapters import and the checks of the exercises.

## Install (once)

Python 3.10 or later. In a terminal, in this folder:

```bash
python -m venv .venv
source .venv/bin/activate            # Windows: .venv\\Scripts\\activate
pip install "{wheel}[lab]"
```

`[lab]` adds JupyterLab with MyST rendering, so the exercise boxes and the equations display as
in the book.

## Work on the exercises

```bash
jupyter lab book
```

Each chapter ends with a section `## Exercises`, which runs on its own: run its first (setup)
cell, then work through the exercises. A coding exercise has a cell that raises
`NotImplementedError`: replace that line with your solution, then run the check cell below it.
It prints one of

```text
PASSED check_...
FAILED check_...: what is wrong, and a hint
NOT DONE check_...: the exercise still raises NotImplementedError
```

The check runs your function on random inputs and compares with a reference; it never reads what
your notebook printed. Keep your solutions inside the exercises section (the grader runs that
section only, from the `## Exercises` heading to the end), keep the heading and the setup cell,
and do not rename the functions the check cells use.

## Hand in

Submit the notebooks you worked on, under their names (`book/td_learning.ipynb`, ...), as your
instructor asks. You will get back, per exercise, the same messages and hints as the checks
print, and your points.
"""


def build_wheel(out_dir, source_dir=None) -> Path:
    """Build the ``rlnotes`` package (``source_dir``: the folder holding ``pyproject.toml``,
    default the one above the installed package) as a wheel into ``out_dir``; returns it."""
    src = Path(source_dir) if source_dir is not None else Path(__file__).resolve().parents[2]
    if not (src / "pyproject.toml").is_file():
        raise ValueError(f"source_dir: no pyproject.toml in {src}; the wheel is built from a "
                         "checkout of the repository")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("rlnotes-*.whl"):
        old.unlink()
    build = Path(tempfile.mkdtemp(prefix="rlnotes-wheel-"))
    try:
        # A copy of the package alone: nothing else of the repository can end up in the wheel.
        for name in ["pyproject.toml", "README.md"]:
            if (src / name).is_file():
                shutil.copyfile(src / name, build / name)
        shutil.copytree(src / "rlnotes", build / "rlnotes",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                               "--no-build-isolation", "--disable-pip-version-check", "-w",
                               str(out), str(build)], capture_output=True, text=True)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    wheels = sorted(out.glob("rlnotes-*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        raise RuntimeError(f"building the rlnotes wheel failed: {proc.stderr[-2000:]}")
    return wheels[0]


def write_student_kit(out_dir, book_dir=None) -> tuple[list[Path], Path, Path]:
    """The student edition, the wheel (``OUT_DIR/dist``) and ``OUT_DIR/README.md``."""
    written = write_student_edition(out_dir, book_dir)
    out = Path(out_dir).resolve()
    wheel = build_wheel(out / "dist", check_book_dir(book_dir) if (check_book_dir(book_dir) /
                                                                   "pyproject.toml").is_file() else None)
    title = "rlnotes"
    config = check_book_dir(book_dir) / "_config.yml"
    if config.is_file():
        import yaml

        title = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("title") or title
    readme = out / "README.md"
    readme.write_text(STUDENT_README.format(title=title, wheel=f"dist/{wheel.name}"),
                      encoding="utf-8")
    return written, wheel, readme
