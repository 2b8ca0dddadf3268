"""The local grader: ``python -m rlnotes.exercises grade SUBMISSIONS_DIR --out grades.csv``.

For every student (see :mod:`rlnotes.exercises._submissions` for the layouts understood) and
every chapter notebook of the book that has coding exercises (or those named by
``--notebook``), the grader

1. finds the student's copy of the notebook (same relative path as in the student edition, e.g.
   ``alice/book/mdp_dynamic_programming.ipynb``; failing that, a notebook of that file name
   directly in the student's folder, in a zip, or exactly one notebook whose name, as an LMS
   renames it, matches the chapter);
2. starts a fresh kernel process with a memory limit (``--memory-mb``) in an empty working
   folder and runs the code cells of the notebook's **exercises section** (from the
   ``## Exercises`` heading to the end; the section starts with its own setup cell, see
   CONTRIBUTING.md) one by one, continuing past errors and past cells that run into the time
   limit per cell (``--cell-timeout``), within a limit for the whole section (``--timeout``);
   the check cells are skipped when they are unchanged (the grader runs the checks itself);
3. in that kernel, where the student's functions live, checks for tampering, purges
   ``rlnotes`` and the check modules from ``sys.modules``, loads the check modules afresh from
   source the grader read at start-up, and calls each exercise's check (the undecorated
   ``.raw``) on the names that the *master* notebook's check cell passes, with a time limit per
   check (``--check-timeout``). Results come back through a file, never from printed output.

Exercises are taken from the instructor's master notebooks (the book at ``--book-dir``), never
from the submission. One CSV row per student and coding exercise:
``student,notebook,exercise,passed,detail,points,max_points``. ``--jobs N`` grades N notebooks
at once, each in a worker process of its own; the rows are the same as with ``--jobs 1``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import pkgutil
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rlnotes.exercises._notebook import (
    Exercise, cell_text, chapter_notebooks, check_book_dir, exercises_section, find_exercises,
    is_exercises_heading,
)
from rlnotes.exercises._output import (
    CSV_COLUMNS, SUMMARY_COLUMNS, OutputConflict, Row, write_feedback, write_grades,
    write_summary,
)
from rlnotes.exercises._submissions import NothingToGrade, collect_students, find_submission

__all__ = ["Row", "grade", "load_checks", "master_exercises", "CSV_COLUMNS", "SUMMARY_COLUMNS",
           "NothingToGrade", "OutputConflict", "default_jobs"]

MAX_NOTEBOOK_BYTES = 50 * 2**20
_INKERNEL = Path(__file__).with_name("_inkernel.py")
NO_SECTION = ("the book's chapter has no '## Exercises' heading, so the grader cannot tell which "
              "cells to run (CONTRIBUTING.md, Exercises: the section starts with that heading "
              "and its own setup cell)")


@dataclass
class _Master:
    rel: Path
    exercises: list[Exercise]
    check_cells: set = field(default_factory=set)
    has_section: bool = True
    setup: str = ""  # the first code cell of the master's exercises section
    # Time limits learnt from grading the master notebook itself (the reference run): a
    # looping submission costs seconds, not the full --cell-timeout/--check-timeout.
    cell_limit: float = float("inf")
    check_limits: dict = field(default_factory=dict)
    cells: set = field(default_factory=set)  # the master's code cells, stripped


def _one_line(text: str, limit: int = 500) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -------------------------------------------------------------------------------------------
# Checks and master exercises (in the grader's own process)


def load_checks(extra=()) -> dict:
    """Every registered check, by name: imports every chapter module of ``rlnotes.exercises``
    and each extra check module file in ``extra`` (paths), and returns ``CHECKS``."""
    if isinstance(extra, (str, os.PathLike)):
        extra = [extra]
    extra = list(extra)
    for path in extra:
        if not isinstance(path, (str, os.PathLike)) or not Path(path).is_file() or Path(path).suffix != ".py":
            raise ValueError(f"checks must be paths of existing .py files, got {path!r}")
    import rlnotes.exercises as package
    from rlnotes.exercises.core import CHECKS

    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.name in {"core", "student", "grade", "nbgrader"}:
            continue
        importlib.import_module(f"rlnotes.exercises.{info.name}")
    for path in extra:
        path = Path(path).resolve()
        name = path.stem
        if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return CHECKS


def _select(book: Path, chapters: list[Path], notebooks) -> list[Path]:
    """The chapters named by ``notebooks`` (paths as in the student edition, absolute paths
    inside the book, or bare file names), in the order given."""
    if isinstance(notebooks, (str, os.PathLike)):
        notebooks = [notebooks]
    chosen = []
    for name in notebooks:
        if not isinstance(name, (str, os.PathLike)) or str(name) == "":
            raise ValueError(f"notebooks must be paths of chapter notebooks, got {name!r}")
        path = Path(name)
        if path.is_absolute():
            try:
                path = path.resolve().relative_to(book)
            except ValueError:
                path = Path(path.name)
        hits = [c for c in chapters if c == path] or \
            [c for c in chapters if c.name == path.name or c.stem == path.name]
        if len(hits) != 1:
            listed = ", ".join(c.as_posix() for c in chapters)
            raise ValueError(f"notebook {str(name)!r} is not a chapter of the book; the chapters "
                             f"are {listed}")
        if hits[0] not in chosen:
            chosen.append(hits[0])
    return chosen


def master_exercises(book_dir=None, checks=None, notebooks=None) -> list[_Master]:
    """The coding exercises of each chapter notebook of the book (notebooks without any are
    left out), or of the chapters named in ``notebooks``. Raises ``ValueError`` when a check
    cell calls a check that is not registered, or a named chapter is not in the book or has no
    coding exercises."""
    import nbformat

    book = check_book_dir(book_dir)
    checks = load_checks() if checks is None else checks
    if not isinstance(checks, dict):
        raise ValueError(f"checks must be a dict of registered checks, got {type(checks).__name__}")
    chapters = chapter_notebooks(book)
    selected = None if notebooks is None else _select(book, chapters, notebooks)
    masters = []
    for rel in (chapters if selected is None else selected):
        nb = nbformat.read(book / rel, as_version=4)
        exercises, warnings = find_exercises(nb, where=str(rel))
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        for ex in exercises:
            if ex.check.name not in checks:
                raise ValueError(f"book: {rel} (exercise {ex.id}) calls {ex.check.name}, which is "
                                 "not a registered check; define it with @check in "
                                 "rlnotes/exercises/<chapter>.py or pass its file with --checks")
        if not exercises and selected is not None:
            raise ValueError(f"notebook {rel.as_posix()} has no coding exercises to grade")
        if exercises:
            cells = nb["cells"]
            start = exercises_section(cells)
            if start is None:
                print(f"warning: {rel}: {NO_SECTION}; its exercises are failed for every "
                      "student", file=sys.stderr)
            elif any(ex.solution_cell < start for ex in exercises):
                raise ValueError(f"book: {rel} has a coding exercise above its '## Exercises' "
                                 "heading; the grader runs only the exercises section")
            setup = next((cell_text(c) for c in cells[start or 0:] if c.get("cell_type") == "code"),
                         "") if start is not None else ""
            masters.append(_Master(rel, exercises,
                                   {cell_text(cells[ex.check_cell]).strip() for ex in exercises},
                                   has_section=start is not None, setup=setup.strip(),
                                   cells={cell_text(c).strip() for c in cells
                                          if c.get("cell_type") == "code"}))
    return masters


# -------------------------------------------------------------------------------------------
# Submissions


def _read_code_cells(path: Path) -> tuple[list[str], int | None]:
    """The code cells of a submitted notebook, and the index (among them) of the first code
    cell of the exercises section (None without an ``## Exercises`` heading); raises ValueError
    with a readable reason."""
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"invalid notebook: {size / 2**20:.0f} MB, above the "
                         f"{MAX_NOTEBOOK_BYTES // 2**20} MB limit")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("invalid notebook: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid notebook: not valid JSON ({err.msg} at line {err.lineno} "
                         f"column {err.colno})") from None
    if not isinstance(data, dict):
        raise ValueError("invalid notebook: the JSON is not a notebook (no top-level object)")
    if data.get("nbformat", 4) != 4:
        try:
            import nbformat

            data = nbformat.convert(nbformat.from_dict(data), 4)
        except Exception as err:  # noqa: BLE001
            raise ValueError(f"invalid notebook: cannot read nbformat {data.get('nbformat')}: {err}") from None
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise ValueError("invalid notebook: no list of cells")
    code, section = [], None
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        try:
            if cell.get("cell_type") == "code":
                code.append(cell_text(cell))
            elif is_exercises_heading(cell):
                section = len(code)
        except ValueError as err:
            raise ValueError(f"invalid notebook: {err}") from None
    return code, section


def _defining_cell(cells: list[str], names: list[str]) -> int | None:
    """Index of the last code cell that defines one of ``names`` (by def, class or assignment)."""
    import ast

    found = None
    for i, src in enumerate(cells):
        try:
            tree = ast.parse(src)
        except SyntaxError:
            if any(f"def {n}(" in src or f"{n} =" in src for n in names):
                found = i
            continue
        for node in ast.walk(tree):
            target = None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                target = node.name
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                target = node.id
            if target in names:
                found = i
                break
    return found


# -------------------------------------------------------------------------------------------
# Grading one notebook


class _Env:
    """What every kernel of a grading run shares: the private package copy, sources, limits."""

    def __init__(self, workdir: Path, checks: dict, used: set, memory_mb: int, timeout: float,
                 cell_timeout: float, check_timeout: float):
        import rlnotes

        self.workdir = workdir
        self.memory_mb = memory_mb
        self.timeout, self.cell_timeout, self.check_timeout = timeout, cell_timeout, check_timeout
        self.state = f"__rlnotes_grader_{secrets.token_hex(8)}"
        self.inkernel = _INKERNEL.read_text(encoding="utf-8")
        # Check sources, read once: the kernel loads them from this text, not from disk.
        self.sources, self.check_module = [], {}
        for name in sorted(used):
            raw = checks[name].raw
            module = sys.modules[raw.__module__]
            self.check_module[name] = module.__name__
            if module.__name__ not in {s["name"] for s in self.sources}:
                path = Path(module.__file__).resolve()
                self.sources.append({"name": module.__name__, "path": str(path),
                                     "package": module.__package__ or "",
                                     "source": path.read_text(encoding="utf-8")})
        # A private copy of the rlnotes package (and of check modules outside it) for the
        # kernels: a submission that edits files there cannot touch the instructor's copy, and
        # the copy is verified (and restored) after every notebook.
        self.pkgdir = workdir / "python"
        self.files: dict[str, bytes] = {}
        root = Path(rlnotes.__file__).resolve().parent
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                self.files[str(Path("rlnotes") / path.relative_to(root))] = path.read_bytes()
        for src in self.sources:
            if not src["name"].startswith("rlnotes"):
                self.files[src["name"].replace(".", "/") + ".py"] = src["source"].encode("utf-8")
        self.restore()
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.pkgdir)
        env.update(RLNOTES_PROGRESS="0", MPLBACKEND="Agg", CUDA_VISIBLE_DEVICES="",
                   PYTHONDONTWRITEBYTECODE="1", IPYTHONDIR=str(workdir / "ipython"),
                   PYDEVD_DISABLE_FILE_VALIDATION="1", JUPYTER_PLATFORM_DIRS="1")
        self.env = env

    def restore(self) -> None:
        if self.pkgdir.exists():
            shutil.rmtree(self.pkgdir, ignore_errors=True)
        for rel, data in self.files.items():
            target = self.pkgdir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    def tampered_files(self) -> list[str]:
        changed = []
        for rel, data in self.files.items():
            target = self.pkgdir / rel
            if not target.is_file() or hashlib.sha256(target.read_bytes()).digest() != \
                    hashlib.sha256(data).digest():
                changed.append(rel)
        known = set(self.files)
        for path in self.pkgdir.rglob("*.py"):
            rel = str(path.relative_to(self.pkgdir))
            if rel not in known:
                changed.append(rel)
        return changed


class _Run:
    """Grading of one submitted notebook in one kernel."""

    def __init__(self, env: _Env, master: _Master, cells: list[str], tag: str, start: int = 0):
        self.env, self.master, self.cells, self.tag = env, master, cells, tag
        self.start = start  # the first code cell of the exercises section
        self.results: dict[str, dict] = {}
        self.findings: list = []
        self.cell_errors: dict[int, str] = {}
        self.fatal: str | None = None
        self.untrusted: str | None = None
        self.own_pids: set = set()  # the launcher and the kernel: not "left running"
        self.cell_seconds: float = 0.0
        self.check_seconds: dict = {}
        self.cwd = env.workdir / f"work-{tag}"

    def _phase(self, kernel, phase: str, timeout: float, **params) -> tuple[dict | None, object]:
        out = self.cwd / f"result-{secrets.token_hex(8)}.json"
        params.update(phase=phase, out=str(out), state=self.env.state,
                      checks={ex.check.name: self.env.check_module[ex.check.name]
                              for ex in self.master.exercises},
                      check_modules=sorted({s["name"] for s in self.env.sources}))
        if phase == "prelude":  # no student code has run yet
            code = (f"exec(compile({self.env.inkernel!r}, '<rlnotes-grader>', 'exec'), "
                    f"{{'__name__': '__rlnotes_grader__', 'PARAMS': {params!r}, "
                    "'__builtins__': dict(vars(__import__('builtins')))})")
        else:  # no name lookups that the notebook could have shadowed
            sys_chain = ("[c for c in ().__class__.__base__.__subclasses__() "
                         "if c.__name__ == 'BuiltinImporter' and c.__module__ == '_frozen_importlib']"
                         "[0].find_spec.__func__.__globals__['sys']")
            state = repr(self.env.state)
            code = (f"[s.modules[{state}].run({params!r}) for s in [{sys_chain}] "
                    f"if s.setrecursionlimit(s.modules[{state}].recursion_limit) is None]")
        reply = kernel.run(code, timeout, silent=True)
        return _read_result(out), reply

    def execute(self) -> None:
        from rlnotes.exercises._kernel import LimitedKernel

        cwd = self.cwd
        cwd.mkdir(parents=True, exist_ok=True)
        log = self.env.workdir / f"kernel-{self.tag}.log"
        try:
            kernel = _start_kernel(lambda: LimitedKernel(memory_mb=self.env.memory_mb, cwd=cwd,
                                                         env=self.env.env, log_path=log), log)
        except Exception as err:  # noqa: BLE001
            self.fatal = _one_line(f"{err}; kernel log: {_tail(log)}")
            return
        try:
            self._execute(kernel)
        finally:
            self.own_pids = kernel.pids()
            kernel.shutdown()
            shutil.rmtree(cwd, ignore_errors=True)

    def _execute(self, kernel) -> None:
        env = self.env
        result, reply = self._phase(kernel, "prelude", 120)
        if result is None:
            self.fatal = f"grader error: the kernel did not run the grader's prelude ({reply.status}: {reply.evalue})"
            return
        if isinstance(result.get("pid"), int) and result["pid"] > 1:
            kernel.kernel_pid = result["pid"]
        start = time.monotonic()
        for i, src in enumerate(self.cells):
            if i < self.start or not src.strip() or src.strip() in self.master.check_cells:
                continue
            left = env.timeout - (time.monotonic() - start)
            if left <= 0:
                self.fatal = f"timed out: the notebook ran past the {env.timeout:g} s limit (at code cell {i + 1})"
                return
            # The book's own cells (the setup cell above all: its imports are the slowest code
            # of the section, and slower still on a loaded machine) get the full limit.
            cap = env.cell_timeout if src.strip() in self.master.cells else \
                min(env.cell_timeout, self.master.cell_limit)
            limit = min(cap, left)
            reply = kernel.run(src, limit, grace=min(10.0, max(2.0, limit / 2)))
            self.cell_seconds = max(self.cell_seconds, reply.seconds)
            if reply.status == "dead":
                self.fatal = f"{reply.evalue} (while running code cell {i + 1})"
                return
            if reply.status == "timeout":
                # A cell interrupted at its time limit counts like a cell that raised: the
                # exercises it defines fail, the others are graded. A kernel that had to be
                # killed, or the limit of the whole section, fails the notebook.
                if limit < cap:
                    self.fatal = (f"timed out: the exercises section ran past the "
                                  f"{env.timeout:g} s limit (at code cell {i + 1})")
                    return
                if not kernel.alive():
                    self.fatal = (f"timed out: code cell {i + 1} ran past the {limit:g} s limit "
                                  "per cell and ignored the interrupt (an endless loop?)")
                    return
                self.cell_errors[i] = (f"code cell {i + 1} ran past the {limit:g} s limit per "
                                       "cell and was interrupted (an endless loop?)")
                continue
            if reply.status == "error":
                if _out_of_memory(reply.ename, reply.evalue):
                    self.fatal = (f"out of memory: code cell {i + 1} went past the "
                                  f"{env.memory_mb} MB memory limit ({reply.ename})")
                    return
                self.cell_errors[i] = _one_line(f"code cell {i + 1} raised {reply.ename}: {reply.evalue}", 200)
        changed = env.tampered_files()
        if changed:
            env.restore()
            self.findings.append(["*", "the notebook modified the files of the package or the "
                                       f"checks ({', '.join(changed[:3])})"])
        result, reply = self._phase(kernel, "load", 180, sources=env.sources)
        if result is None:
            if reply.status == "ok":
                self.fatal = ("tampering: the grader's code did not run in the kernel although "
                              "the kernel answered (exec or the interpreter replaced?)")
            else:
                why = reply.evalue if reply.status == "dead" else f"{reply.status}: {reply.ename} {reply.evalue}"
                self.fatal = _one_line(f"grader could not load its checks in the kernel ({why})")
            return
        self.findings += result.get("findings", [])
        if result.get("errors"):
            if self.cell_errors:  # an interrupted import, say: the notebook's doing
                first = self.cell_errors[min(self.cell_errors)]
                self.fatal = _one_line(f"{first}; afterwards the grader could not load its "
                                       f"checks in the kernel ({result['errors']})")
            else:
                self.fatal = _one_line(f"grader error: loading the check module failed: "
                                       f"{result['errors']}")
            return
        for n, ex in enumerate(self.master.exercises):
            limit = min(env.check_timeout, self.master.check_limits.get(ex.id, float("inf")))
            result, reply = self._phase(kernel, "check", limit, check=ex.check.name,
                                        args=ex.check.args, kwargs=ex.check.kwargs)
            self.check_seconds[ex.id] = reply.seconds
            if reply.status == "dead":
                self.results[ex.id] = {"passed": False,
                                       "detail": f"{reply.evalue} (during the check)"}
                for later in self.master.exercises[n + 1:]:
                    self.results[later.id] = {"passed": False, "detail": (
                        f"not graded: the kernel died during the check of {ex.id}")}
                return
            if reply.status == "timeout":
                self.results[ex.id] = {"passed": False, "detail": (
                    f"timed out: the check ran past {limit:.3g} s (an endless loop?)")}
                if not kernel.alive():
                    for later in self.master.exercises[n + 1:]:
                        self.results[later.id] = {"passed": False, "detail": (
                            f"not graded: the kernel was killed after the check of {ex.id} timed out")}
                    return
                continue
            if result is None and reply.status == "ok":
                result = {"passed": False, "detail": "tampering: the grader's check did not run "
                          "in the kernel although the kernel answered (exec or the interpreter "
                          "replaced?)"}
            elif result is None:
                result = {"passed": False, "detail": f"grader error: no result from the check "
                                                     f"({reply.status}: {reply.ename} {reply.evalue})"}
            self.results[ex.id] = result
        result, reply = self._phase(kernel, "final", 60)
        if result is None:
            why = kernel.death_reason() if not kernel.alive() else f"{reply.status}: {reply.ename} {reply.evalue}"
            self.untrusted = _one_line(f"{why} (after the checks ran, so the grader could not "
                                       "confirm that nothing was tampered with)")
        else:
            self.findings += result.get("findings", [])

    def rows(self, student: str) -> list[Row]:
        rows = []
        for ex in self.master.exercises:
            nb = self.master.rel.as_posix()
            if self.fatal and ex.id not in self.results:
                rows.append(Row(student, nb, ex.id, 0, _one_line(self.fatal), 0.0, ex.points))
                continue
            res = self.results.get(ex.id, {"passed": False, "detail": "grader error: not graded"})
            passed = bool(res.get("passed"))
            detail = res.get("detail", "")
            tamper = list(dict.fromkeys(msg for scope, msg in self.findings
                                        if scope in ("*", ex.check.name)))
            own = "passed" if passed else f"failed: {detail}"
            if tamper:
                detail = f"tampering: {'; '.join(tamper[:3])} (the grader's own check {own})"
                passed = False
            elif self.untrusted:
                detail = f"{self.untrusted}; the grader's own check {own}"
                passed = False
            elif not passed and self.cell_errors:
                cell = _defining_cell(self.cells, ex.check.names())
                if cell is not None and cell in self.cell_errors:
                    detail = f"{detail} [{self.cell_errors[cell]}]"
                elif res.get("kind") == "missing":
                    first = self.cell_errors[min(self.cell_errors)]
                    detail = f"{detail} [{first}]"
            if res.get("kind") == "missing" and not passed and not tamper:
                detail = f"the check's argument is not defined: {detail}"
                above = _defining_cell(self.cells[:self.start], ex.check.names())
                if above is not None and not self.untrusted:
                    detail = (f"{detail} [{', '.join(ex.check.names())} is defined in code cell "
                              f"{above + 1}, above the '## Exercises' heading: the grader runs "
                              "only the exercises section, so define it there]")
            credit = 1.0 if passed else max(0.0, min(float(res.get("credit") or 0.0), 0.99))
            if tamper or self.untrusted:
                credit = 0.0
            rows.append(Row(student, nb, ex.id, int(passed), _one_line(detail),
                            round(ex.points * credit, 2), ex.points))
        return rows


def _read_result(out: Path) -> dict | None:
    """The JSON result a phase wrote, or None. The kernel may own the folder: no symbolic
    links, nothing but a regular file, at most 1 MB."""
    import stat

    try:
        fd = os.open(out, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 2**20:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            result = json.loads(fh.read(2**20 + 1).decode("utf-8"))
        return result if isinstance(result, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
        try:
            out.unlink()
        except OSError:
            pass


class _Reaper:
    """Processes a notebook leaves behind. The kernel runs in a session of its own, and the
    kernel manager kills that whole process group; a process that started a session of its own
    (a daemon) escapes that. On Linux the grader makes itself a "child subreaper", so orphaned
    descendants of a kernel become its children, and after each notebook every child of the
    grader that was not there when grading began is killed."""

    def __init__(self):
        self.enabled = False
        self.keep = set()
        if not sys.platform.startswith("linux"):
            return
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            self.enabled = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            self.enabled = False
        self.keep = set(self.children())

    @staticmethod
    def children() -> list[int]:
        """The grader's child processes that are still running. Zombies (state Z: finished,
        waiting to be collected) are collected here and not counted."""
        me, found = os.getpid(), []
        try:
            entries = os.listdir("/proc")
        except OSError:
            return found
        for name in entries:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    stat = fh.read()
                fields = stat[stat.rindex(b")") + 2:].split()
                state, ppid = fields[0], int(fields[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid != me:
                continue
            if state in (b"Z", b"X"):
                try:
                    os.waitpid(int(name), os.WNOHANG)
                except OSError:
                    pass
                continue
            found.append(int(name))
        return found

    def reap(self, expected=()) -> int:
        """Kill (and wait for) the leftover children that are still running; returns how many
        were killed, not counting ``expected`` (the kernel and its launcher, which may still be
        exiting) nor processes that finish within a short grace period (killed with their
        kernel's process group, say); finished processes are collected silently."""
        if not self.enabled:
            return 0
        import signal

        expected = set(expected)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not [pid for pid in self.children() if pid not in self.keep | expected]:
                break
            time.sleep(0.05)
        killed = set()
        for _ in range(20):
            extra = [pid for pid in self.children() if pid not in self.keep]
            if not extra:
                break
            for pid in extra:
                try:
                    os.kill(pid, signal.SIGKILL)
                    if pid not in expected:
                        killed.add(pid)
                except OSError:
                    pass
            for pid in extra:
                try:
                    os.waitpid(pid, 0)
                except OSError:
                    pass
        return len(killed)


def _out_of_memory(ename: str, evalue: str) -> bool:
    text = f"{ename} {evalue}".lower()
    return ename == "MemoryError" or "can't allocate memory" in text or \
        "cannot allocate memory" in text or "out of memory" in text


def _start_kernel(make, log, attempts: int = 3):
    """``make()`` a kernel; try again when it could not bind its ports ("Address already in
    use": jupyter_client chooses free ports, and another process on the machine can take one
    before the kernel binds it). Any other failure, or the last attempt's, is raised."""
    for attempt in range(attempts):
        try:
            return make()
        except Exception as err:  # noqa: BLE001
            if attempt + 1 == attempts or "Address already in use" not in f"{err} {_tail(log)}":
                raise


def _tail(path: Path, n: int = 300) -> str:
    if not path.is_file():
        return ""
    return " ".join(path.read_bytes()[-n:].decode("utf-8", "replace").split())


# -------------------------------------------------------------------------------------------
# The run


def _positive(value, name: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > minimum \
            or value != value or value == float("inf"):
        raise ValueError(f"{name} must be a finite number above {minimum:g}, got {value!r}")
    return float(value)


def default_jobs() -> int:
    """The number of CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _check_out_path(out, name: str) -> None:
    if not isinstance(out, (str, os.PathLike)) or str(out) == "":
        raise ValueError(f"{name} must be a file path, got {out!r}")
    if Path(out).is_dir():
        raise ValueError(f"{name} must be a file path, {str(out)!r} is a folder")
    if not Path(out).resolve().parent.is_dir():
        raise ValueError(f"{name} must be in an existing folder, got {str(out)!r}")


def grade(submissions_dir, out=None, book_dir=None, *, notebooks=None, jobs: int | None = None,
          timeout: float = 300, cell_timeout: float = 60, check_timeout: float = 60,
          memory_mb: int = 4096, checks=(), progress: bool = True, summary: bool = True,
          summary_out=None, feedback_dir=None, force: bool = False, merge: bool = False,
          adapt_limits: bool = True) -> list[Row]:
    """Grade every student in ``submissions_dir`` against the book at ``book_dir``.

    ``notebooks`` (paths as in the student edition) limits grading to those chapters; ``jobs``
    notebooks are graded at once (default: the number of CPU cores; the rows do not depend on
    it). Writes the grades CSV to ``out`` (when given; atomically, and never dropping rows of an
    existing file unless ``force``, or keeping them with ``merge``), the per-student summary to
    ``summary_out`` (default ``<out>_summary.csv``) and one Markdown feedback file per student
    into ``feedback_dir`` (default ``<out>_feedback/``). Prints a summary table when ``summary``
    is true, and returns the rows.

    With ``adapt_limits`` (the default), the grader first grades the book's own notebook of each
    chapter (the reference run; a warning names any check that fails there) and limits each
    check to ``max(10 s, 10 x`` its reference time) and each cell the book does not have to
    ``max(20 s, 10 x`` the slowest reference cell), never more than ``check_timeout`` and
    ``cell_timeout``: an endless loop then costs seconds. Limits come from the master run's
    duration, so a loaded machine gets longer limits too.

    Raises :class:`NothingToGrade` (a ``ValueError``), leaving every file as it was, when there is
    no student, or no student's notebook could be found and read. ``checks`` lists extra check
    module files. Limits: ``timeout`` s for running one notebook's exercises section,
    ``cell_timeout`` s per cell, ``check_timeout`` s per check, ``memory_mb`` MB of memory
    (``RLIMIT_DATA``) per kernel.
    """
    if not isinstance(submissions_dir, (str, os.PathLike)) or not Path(submissions_dir).is_dir():
        raise ValueError(f"submissions_dir must be an existing folder, got {submissions_dir!r}")
    if out is not None:
        _check_out_path(out, "out")
        out = Path(out)
        summary_out = summary_out if summary_out is not None else \
            out.with_name(f"{out.stem}_summary.csv")
        feedback_dir = feedback_dir if feedback_dir is not None else out.with_name(f"{out.stem}_feedback")
    if summary_out is not None:
        _check_out_path(summary_out, "summary_out")
    if feedback_dir is not None:
        if not isinstance(feedback_dir, (str, os.PathLike)) or str(feedback_dir) == "" or \
                Path(feedback_dir).is_file():
            raise ValueError(f"feedback_dir must be a folder path, got {feedback_dir!r}")
    if jobs is None:
        jobs = default_jobs()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number of at least 1, got {jobs!r}")
    timeout = _positive(timeout, "timeout")
    cell_timeout = _positive(cell_timeout, "cell_timeout")
    check_timeout = _positive(check_timeout, "check_timeout")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 256:
        raise ValueError(f"memory_mb must be an integer of at least 256, got {memory_mb!r}")
    registry = load_checks(checks)
    masters = master_exercises(book_dir, registry, notebooks)
    if not masters:
        raise NothingToGrade("the book has no coding exercises; nothing to grade")
    submissions = Path(submissions_dir)
    used = {ex.check.name for m in masters for ex in m.exercises}
    limits = dict(memory_mb=memory_mb, timeout=timeout, cell_timeout=cell_timeout,
                  check_timeout=check_timeout)
    with tempfile.TemporaryDirectory(prefix="rlnotes-grade-") as tmp:
        tmp = Path(tmp)
        students = collect_students(submissions, tmp)
        items = []
        for si, student in enumerate(students):
            for mi, master in enumerate(masters):
                path, why = find_submission(student, master.rel)
                items.append((si, mi, path, why))
        if not any(path is not None for _, _, path, _ in items):
            names = ", ".join(m.rel.as_posix() for m in masters)
            raise NothingToGrade(f"none of the {len(students)} student(s) in {submissions} has a "
                                 f"notebook for {names} (e.g. {items[0][3]})")
        results: dict = {}
        timings: dict = {}
        todo = [(si, mi, path) for si, mi, path, _ in items if path is not None]
        for si, mi, path, why in items:
            if path is None:
                results[(si, mi)] = ([Row(students[si].name, masters[mi].rel.as_posix(), ex.id, 0,
                                          why, 0.0, ex.points) for ex in masters[mi].exercises], [])
        setup = (tmp, registry, used, limits, masters)
        if adapt_limits:
            _reference_runs(setup, check_book_dir(book_dir))
        bar = _progress(len(todo), progress)
        work = [(students[si].name, si, mi, str(path)) for si, mi, path in todo]
        for (si, mi), rows, warns, seconds in _run_all(work, setup, jobs, bar):
            results[(si, mi)] = (rows, warns)
            timings[students[si].name] = timings.get(students[si].name, 0.0) + seconds
        if hasattr(bar, "close"):
            bar.close()
    rows: list[Row] = []
    files: dict = {}
    for si, student in enumerate(students):
        for mi, master in enumerate(masters):
            got, warns = results[(si, mi)]
            for warning in warns:
                print(f"warning: {warning}", file=sys.stderr)
            rows += got
        files[student.name] = {m.rel.as_posix(): _shown(submissions, items[si * len(masters) + mi][2])
                               for mi, m in enumerate(masters)}
    if not any(r.detail.split(":")[0] not in ("missing", "ambiguous") for r in rows):
        raise NothingToGrade(f"no notebook in {submissions} could be graded")
    if out is not None:
        try:
            write_grades(out, rows, replace=force, merge=merge)
        except OutputConflict as err:
            # Keep this run's work anyway, next to the file it would not replace.
            spare = out.with_name(f"{out.stem}.new{out.suffix or '.csv'}")
            write_grades(spare, rows, replace=True)
            raise OutputConflict(f"{err}. This run's grades are in {spare}") from None
        write_summary(summary_out, out)
        if feedback_dir is not None:
            write_feedback(feedback_dir, rows, files)
    if summary:
        print(summary_table(rows, timings))
    return rows


def _shown(submissions: Path, path) -> str:
    if path is None:
        return ""
    try:
        return Path(path).relative_to(submissions).as_posix()
    except ValueError:
        return Path(path).name  # unpacked from a zip


_WORKER: dict = {}
REF_FACTOR, REF_CHECK_FLOOR, REF_CELL_FLOOR = 10.0, 10.0, 20.0


def _reference_runs(setup, book: Path) -> None:
    """Grade each master notebook as a student would be graded; set its adaptive limits."""
    env = _worker_env(setup)
    for mi, master in enumerate(setup[4]):
        if not master.has_section:
            continue
        cells, start = _read_code_cells(book / master.rel)
        run = _Run(env, master, cells, f"ref-{mi}", start or 0)
        try:
            run.execute()
        except Exception as err:  # noqa: BLE001
            run.fatal = f"grader error: {type(err).__name__}: {err}"
        finally:
            env.restore()
            if getattr(env, "reaper", None) is not None:
                env.reaper.reap(run.own_pids)
        failed = [r for r in run.rows("(book)") if not r.passed]
        for r in failed:
            print(f"warning: the book's own {master.rel.as_posix()} fails {r.exercise} "
                  f"({r.detail}); its time limits are not adapted", file=sys.stderr)
        if run.fatal:
            continue
        master.cell_limit = max(REF_CELL_FLOOR, REF_FACTOR * run.cell_seconds)
        bad = {r.exercise for r in failed}
        master.check_limits = {ex: max(REF_CHECK_FLOOR, REF_FACTOR * sec)
                               for ex, sec in run.check_seconds.items() if ex not in bad}


def _worker_env(setup) -> _Env:
    """This process's grading environment (one per worker process: its own private package
    copy and its own reaper, so that workers never touch each other's kernels)."""
    if "env" not in _WORKER:
        tmp, registry, used, limits, masters = setup
        workdir = Path(tmp) / f"worker-{os.getpid()}"
        workdir.mkdir(parents=True, exist_ok=True)
        env = _Env(workdir, registry, used, limits["memory_mb"], limits["timeout"],
                   limits["cell_timeout"], limits["check_timeout"])
        env.reaper = _Reaper()
        _WORKER.update(env=env, masters=masters)
    return _WORKER["env"]


def _grade_item(setup, item):
    name, si, mi, path = item
    env = _worker_env(setup)
    master = setup[4][mi]
    started = time.monotonic()
    warns: list[str] = []
    rows = _grade_notebook(env, name, Path(path), master, f"{si}-{mi}", warns)
    return (si, mi), rows, warns, time.monotonic() - started


def _pool_init(setup):
    _WORKER.clear()
    _WORKER["setup"] = setup


def _pool_grade(item):
    return _grade_item(_WORKER["setup"], item)


def _run_all(work: list, setup, jobs: int, bar):
    """Grade every item; yields results in the order they finish. With ``jobs`` > 1, worker
    processes (forked, so they share the loaded checks) grade one notebook each at a time; an
    item whose worker died is graded again in this process."""
    jobs = min(jobs, len(work))
    if jobs <= 1 or not hasattr(os, "fork"):
        for item in work:
            _advance(bar, item[0])
            yield _grade_item(setup, item)
        _WORKER.clear()
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    retry = []
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_pool_init,
                             initargs=(setup,)) as pool:
        futures = {pool.submit(_pool_grade, item): item for item in work}
        for future in as_completed(futures):
            item = futures[future]
            try:
                result = future.result()
            except Exception:  # noqa: BLE001 - a worker killed by a notebook
                retry.append(item)
                continue
            _advance(bar, item[0])
            yield result
    for item in retry:
        _advance(bar, item[0])
        try:
            yield _grade_item(setup, item)
        except Exception as err:  # noqa: BLE001
            master = setup[4][item[2]]
            yield ((item[1], item[2]), [Row(item[0], master.rel.as_posix(), ex.id, 0,
                                            _one_line(f"grader error: {type(err).__name__}: {err}"),
                                            0.0, ex.points) for ex in master.exercises], [], 0.0)
    _WORKER.clear()


def _advance(bar, name: str) -> None:
    if hasattr(bar, "update"):
        bar.set_postfix_str(name[:30])
        bar.update(1)


def _grade_notebook(env: _Env, student: str, path: Path, master: _Master, tag: str,
                    warns: list) -> list[Row]:
    nb = master.rel.as_posix()
    if not master.has_section:
        return [Row(student, nb, ex.id, 0, f"grader error: {NO_SECTION}", 0.0, ex.points)
                for ex in master.exercises]
    try:
        cells, start = _read_code_cells(path)
    except (ValueError, OSError) as err:
        return [Row(student, nb, ex.id, 0, _one_line(str(err)), 0.0, ex.points)
                for ex in master.exercises]
    if start is None:  # the heading was deleted: find the section by its setup cell
        start = next((i for i, c in enumerate(cells) if master.setup and c.strip() == master.setup),
                     None)
    if start is None:
        why = ("no exercises section: the notebook has no '## Exercises' heading (nor the "
               "section's setup cell), and the grader runs only that section; restore the heading")
        return [Row(student, nb, ex.id, 0, why, 0.0, ex.points) for ex in master.exercises]
    run = _Run(env, master, cells, tag, start)
    try:
        run.execute()
    except Exception as err:  # noqa: BLE001 - one broken run must not stop the others
        run.fatal = _one_line(f"grader error: {type(err).__name__}: {err}")
    finally:
        env.restore()
        reaper = getattr(env, "reaper", None)
        if reaper is not None:
            killed = reaper.reap(run.own_pids)
            if killed:
                warns.append(f"{student}/{nb} left {killed} process(es) running after its "
                             "kernel ended; they were killed")
    return run.rows(student)


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc="grading", unit="notebook", file=sys.stderr)


def summary_table(rows: list[Row], timings: dict | None = None) -> str:
    """A plain-text summary: passes per exercise, and each student's points."""
    if not rows:
        return "No rows graded."
    exercises: dict = {}
    students: dict = {}
    for row in rows:
        key = (row.notebook, row.exercise)
        done, total = exercises.get(key, (0, 0))
        exercises[key] = (done + row.passed, total + 1)
        got, most = students.get(row.student, (0.0, 0.0))
        students[row.student] = (got + row.points, most + row.max_points)
    width = max(len(f"{nb}: {ex}") for nb, ex in exercises)
    lines = ["", "Per exercise (students passing):"]
    for (nb, ex), (done, total) in exercises.items():
        lines.append(f"  {f'{nb}: {ex}':<{width}}  {done:>4} / {total}")
    swidth = max(len(s) for s in students)
    lines += ["", "Per student (points):"]
    for name, (got, most) in students.items():
        t = f"   {timings[name]:6.1f} s" if timings and name in timings else ""
        lines.append(f"  {name:<{swidth}}  {got:>6g} / {most:g}{t}")
    if timings:
        lines.append(f"\n{len(students)} student(s) graded; kernels ran {sum(timings.values()):.1f} s "
                     f"in all ({sum(timings.values()) / max(len(students), 1):.1f} s per student).")
    return "\n".join(lines)
