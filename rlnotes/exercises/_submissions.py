"""Finding the students and their notebooks in a submissions folder, as an LMS exports it.

Layouts understood (all in one folder, ``SUBMISSIONS_DIR``):

* one folder per student, notebooks at the student edition's paths
  (``alice/book/td_learning.ipynb``), directly in the folder (``bob/td_learning.ipynb``), or
  anywhere below it, under the name the LMS gave them (``td_learning (1).ipynb``,
  ``carol_123456_7890_td_learning.ipynb``);
* a zip per student (``ivan.zip``, unpacked safely: no path outside the target, no links, at
  most :data:`MAX_ZIP_BYTES` unpacked), or zips inside a student's folder;
* flat LMS exports: ``<student>_<digits>_<digits>_<file>.ipynb`` (Canvas; ``_late_`` allowed)
  directly in ``SUBMISSIONS_DIR`` are grouped by student.

Anything else at the top level (a loose notebook without a student) is reported, never guessed.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from rlnotes.exercises._notebook import _SKIP_DIRS

MAX_ZIP_BYTES = 200 * 2**20
MAX_ZIP_MEMBERS = 5000
#: Canvas-style flat export: ``name_123456_7890_file.ipynb`` (``name_late_...`` too).
LMS_FLAT_RE = re.compile(r"^(?P<student>[^_].*?)_(?:late_)?\d+_\d+_(?P<file>.+)$", re.I)
_LMS_PREFIX_RE = re.compile(r"^(?:.*?_)?(?:late_)?\d+_\d+_", re.I)
_COPY_SUFFIX_RE = re.compile(r"(?:[ _-]*\(\d+\)|[ _-]copy(?:[ _-]?\d+)?|-\d+)$", re.I)


class NothingToGrade(ValueError):
    """The submissions folder holds nothing the grader could grade."""


@dataclass
class Student:
    name: str
    roots: list[Path] = field(default_factory=list)     # folders to search
    files: list[Path] = field(default_factory=list)     # loose notebooks (flat LMS export)
    problems: list[str] = field(default_factory=list)   # zips that could not be unpacked


def _hidden(name: str) -> bool:
    return name.startswith((".", "__")) or name in _SKIP_DIRS


def unzip_safely(archive: Path, dest: Path, limit: int = MAX_ZIP_BYTES) -> None:
    """Unpack ``archive`` into ``dest``; raises ValueError (with a reason) for a corrupt zip, a
    member outside ``dest``, more than :data:`MAX_ZIP_MEMBERS` members, or more than ``limit``
    bytes unpacked. Links and ``__MACOSX`` entries are skipped."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"not a readable zip ({err})") from None
    with zf:
        members = zf.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise ValueError(f"{len(members)} files, above the limit of {MAX_ZIP_MEMBERS}")
        total = 0
        for info in members:
            name = info.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            if name.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
                raise ValueError(f"a file outside the zip's folder ({info.filename!r})")
            total += info.file_size
        if total > limit:
            raise ValueError(f"{total / 2**20:.0f} MB unpacked, above the limit of "
                             f"{limit // 2**20} MB")
        dest.mkdir(parents=True, exist_ok=True)
        written = 0
        for info in members:
            name = info.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            if info.is_dir() or not parts or parts[0] == "__MACOSX":
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                continue
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(info) as src, open(target, "wb") as out:
                    while True:
                        chunk = src.read(2**20)
                        if not chunk:
                            break
                        written += len(chunk)
                        if written > limit:  # the sizes in the zip's directory lied
                            raise ValueError(f"more than {limit // 2**20} MB unpacked")
                        out.write(chunk)
            except (zipfile.BadZipFile, OSError, RuntimeError, EOFError) as err:
                raise ValueError(f"a corrupt member {info.filename!r} ({err})") from None


def collect_students(submissions: Path, scratch: Path) -> list[Student]:
    """The students of ``submissions`` (sorted by name), zips unpacked below ``scratch``.

    Raises :class:`NothingToGrade` with a message an instructor can act on when there is no
    student at all (empty or unreadable folder, loose notebooks without student folders).
    """
    try:
        entries = sorted(submissions.iterdir(), key=lambda p: p.name)
    except OSError as err:
        raise NothingToGrade(f"cannot read the submissions folder {submissions}: {err.strerror}") from None
    students: dict[str, Student] = {}
    loose, unreadable, other = [], [], []

    def get(name: str) -> Student:
        return students.setdefault(name, Student(name))

    for entry in entries:
        if _hidden(entry.name):
            continue
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError:
            unreadable.append(entry.name)
            continue
        if is_dir:
            if not os.access(entry, os.R_OK | os.X_OK):
                unreadable.append(entry.name)
                get(entry.name).problems.append(f"the folder {entry.name}/ cannot be read")
                continue
            get(entry.name).roots.append(entry)
        elif is_file and entry.suffix.lower() == ".zip":
            student = get(entry.stem.strip() or entry.name)
            target = scratch / "unzipped" / f"{len(students)}-{_safe(student.name)}"
            try:
                unzip_safely(entry, target)
                student.roots.append(target)
            except (ValueError, OSError) as err:
                student.problems.append(f"{entry.name} could not be unpacked: {err}")
        elif is_file and entry.suffix.lower() == ".ipynb":
            m = LMS_FLAT_RE.match(entry.name)
            if m:
                get(m.group("student")).files.append(entry)
            else:
                loose.append(entry.name)
        elif is_file:
            other.append(entry.name)
        else:
            unreadable.append(entry.name)
    if not students:
        where = f"the submissions folder {submissions}"
        if loose:
            shown = ", ".join(loose[:3]) + (" ..." if len(loose) > 3 else "")
            raise NothingToGrade(
                f"{where} holds {len(loose)} notebook(s) ({shown}) but no student folders: put "
                "each student's notebooks in a folder named after the student "
                "(SUBMISSIONS/alice/book/td_learning.ipynb), or keep the LMS's file names "
                "(alice_123_456_td_learning.ipynb)")
        if unreadable:
            raise NothingToGrade(f"{where} holds only entries that cannot be read "
                                 f"({', '.join(unreadable[:3])})")
        if other:
            raise NothingToGrade(f"{where} holds no student folders, zips or notebooks "
                                 f"(only {', '.join(other[:3])})")
        raise NothingToGrade(f"{where} is empty: no student folders")
    # Zips inside a student's folder are unpacked next to the folder's own files.
    for student in students.values():
        for root in list(student.roots):
            if root.is_relative_to(scratch):
                continue
            for k, archive in enumerate(sorted(_walk(root, "*.zip"))):
                target = scratch / "unzipped" / f"{_safe(student.name)}-inner-{k}"
                try:
                    unzip_safely(archive, target)
                    student.roots.append(target)
                except (ValueError, OSError) as err:
                    student.problems.append(
                        f"{archive.relative_to(root.parent)} could not be unpacked: {err}")
    return [students[name] for name in sorted(students)]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80] or "student"


def _walk(root: Path, pattern: str) -> list[Path]:
    found = []
    try:
        for path in root.rglob(pattern):
            rel = path.relative_to(root).parts[:-1]
            if any(_hidden(p) for p in rel) or "__MACOSX" in rel:
                continue
            if path.is_file() and not path.is_symlink():
                found.append(path)
    except OSError:
        pass
    return found


def chapter_key(filename: str) -> str:
    """A notebook's file name as an LMS may have changed it, reduced to the chapter's stem:
    ``frank_123456_7890_mdp_dynamic_programming.ipynb`` and ``td_learning (1).ipynb`` give
    ``mdp_dynamic_programming`` and ``td_learning``."""
    stem = filename[:-6] if filename.lower().endswith(".ipynb") else filename
    stem = _LMS_PREFIX_RE.sub("", stem.strip())
    while True:
        new = _COPY_SUFFIX_RE.sub("", stem).strip()
        if new == stem:
            break
        stem = new
    return re.sub(r"[\s-]+", "_", stem).lower()


def find_submission(student: Student, rel: Path) -> tuple[Path | None, str]:
    """The student's notebook for the chapter at ``rel`` (e.g. ``book/td_learning.ipynb``),
    and a reason when there is none (``missing: ...``, ``ambiguous: ...``)."""
    for root in student.roots:
        for cand in (root / rel, root / rel.name):
            if cand.is_file():
                return cand, ""
    notebooks = [p for root in student.roots for p in _walk(root, "*.ipynb")] + student.files
    exact = [p for p in notebooks if p.name == rel.name]
    stem = rel.stem.lower()
    fuzzy = [p for p in notebooks if chapter_key(p.name) == stem
             or chapter_key(p.name).endswith("_" + stem)]
    for group in (exact, fuzzy):
        if len(group) == 1:
            return group[0], ""
        if len(group) > 1:
            names = ", ".join(sorted(p.name for p in group)[:4])
            return None, (f"ambiguous: {len(group)} notebooks could be {rel.as_posix()} ({names}); "
                          "keep one")
    why = f"missing: no {rel.as_posix()} in the submission"
    if student.problems:
        why += f" ({'; '.join(student.problems[:2])})"
    elif notebooks:
        names = ", ".join(sorted(p.name for p in notebooks)[:3])
        why += f" (found {names})"
    return None, why


def remove_scratch(scratch: Path) -> None:
    shutil.rmtree(scratch / "unzipped", ignore_errors=True)
