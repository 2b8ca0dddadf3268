"""The local grader: ``python -m rlnotes.exercises grade SUBMISSIONS_DIR --out grades.csv``.

For every student (a sub-folder of ``SUBMISSIONS_DIR``) and every chapter notebook of the book
that has coding exercises, the grader

1. finds the student's copy of the notebook (same relative path as in the student edition, e.g.
   ``alice/book/mdp_dynamic_programming.ipynb``; failing that, a notebook of that file name
   directly in the student's folder, or exactly one such file anywhere below it);
2. starts a fresh kernel process with a memory limit (``--memory-mb``) in an empty working
   folder and runs the notebook's code cells one by one, continuing past errors, with a time
   limit per cell (``--cell-timeout``) and for the notebook (``--timeout``); the check cells
   are skipped when they are unchanged (the grader runs the checks itself);
3. in that kernel, where the student's functions live, checks for tampering, purges
   ``rlnotes`` and the check modules from ``sys.modules``, loads the check modules afresh from
   source the grader read at start-up, and calls each exercise's check (the undecorated
   ``.raw``) on the names that the *master* notebook's check cell passes, with a time limit per
   check (``--check-timeout``). Results come back through a file, never from printed output.

Exercises are taken from the instructor's master notebooks (the book at ``--book-dir``), never
from the submission. One CSV row per student and coding exercise:
``student,notebook,exercise,passed,detail``.
"""

from __future__ import annotations

import csv
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
    _SKIP_DIRS, Exercise, cell_text, chapter_notebooks, check_book_dir, find_exercises,
)

__all__ = ["Row", "grade", "load_checks", "master_exercises", "CSV_COLUMNS"]

CSV_COLUMNS = ["student", "notebook", "exercise", "passed", "detail"]
MAX_NOTEBOOK_BYTES = 50 * 2**20
_INKERNEL = Path(__file__).with_name("_inkernel.py")


@dataclass
class Row:
    student: str
    notebook: str
    exercise: str
    passed: int
    detail: str = ""

    def as_list(self) -> list:
        return [self.student, self.notebook, self.exercise, self.passed, self.detail]


@dataclass
class _Master:
    rel: Path
    exercises: list[Exercise]
    check_cells: set = field(default_factory=set)


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
        if info.name.startswith("_") or info.name in {"core", "student", "grade"}:
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


def master_exercises(book_dir=None, checks=None) -> list[_Master]:
    """The coding exercises of each chapter notebook of the book (notebooks without any are
    left out). Raises ``ValueError`` when a check cell calls a check that is not registered."""
    import nbformat

    book = check_book_dir(book_dir)
    checks = load_checks() if checks is None else checks
    if not isinstance(checks, dict):
        raise ValueError(f"checks must be a dict of registered checks, got {type(checks).__name__}")
    masters = []
    for rel in chapter_notebooks(book):
        nb = nbformat.read(book / rel, as_version=4)
        exercises, warnings = find_exercises(nb, where=str(rel))
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        for ex in exercises:
            if ex.check.name not in checks:
                raise ValueError(f"book: {rel} (exercise {ex.id}) calls {ex.check.name}, which is "
                                 "not a registered check; define it with @check in "
                                 "rlnotes/exercises/<chapter>.py or pass its file with --checks")
        if exercises:
            cells = nb["cells"]
            masters.append(_Master(rel, exercises,
                                   {cell_text(cells[ex.check_cell]).strip() for ex in exercises}))
    return masters


# -------------------------------------------------------------------------------------------
# Submissions


def _students(submissions: Path) -> list[Path]:
    return sorted(p for p in submissions.iterdir()
                  if p.is_dir() and not p.name.startswith((".", "__")))


def _find_submission(student: Path, rel: Path) -> tuple[Path | None, str]:
    exact = student / rel
    if exact.is_file():
        return exact, ""
    direct = student / rel.name
    if direct.is_file():
        return direct, ""
    matches = [p for p in student.rglob(rel.name)
               if p.is_file() and not any(part in _SKIP_DIRS or part.startswith(".")
                                          for part in p.relative_to(student).parts[:-1])]
    if len(matches) == 1:
        return matches[0], ""
    if len(matches) > 1:
        return None, (f"ambiguous: {len(matches)} notebooks named {rel.name} in the submission; "
                      f"put one at {rel.as_posix()}")
    return None, f"missing: no {rel.as_posix()} in the submission"


def _read_code_cells(path: Path) -> list[str]:
    """The code cells of a submitted notebook; raises ValueError with a readable reason."""
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
    code = []
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            try:
                code.append(cell_text(cell))
            except ValueError as err:
                raise ValueError(f"invalid notebook: {err}") from None
    return code


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

    def __init__(self, env: _Env, master: _Master, cells: list[str], tag: str):
        self.env, self.master, self.cells, self.tag = env, master, cells, tag
        self.results: dict[str, dict] = {}
        self.findings: list = []
        self.cell_errors: dict[int, str] = {}
        self.fatal: str | None = None
        self.untrusted: str | None = None
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
            kernel = LimitedKernel(memory_mb=self.env.memory_mb, cwd=cwd, env=self.env.env,
                                   log_path=log)
        except Exception as err:  # noqa: BLE001
            self.fatal = _one_line(f"{err}; kernel log: {_tail(log)}")
            return
        try:
            self._execute(kernel)
        finally:
            kernel.shutdown()
            shutil.rmtree(cwd, ignore_errors=True)

    def _execute(self, kernel) -> None:
        env = self.env
        result, reply = self._phase(kernel, "prelude", 120)
        if result is None:
            self.fatal = f"grader error: the kernel did not run the grader's prelude ({reply.status}: {reply.evalue})"
            return
        start = time.monotonic()
        for i, src in enumerate(self.cells):
            if not src.strip() or src.strip() in self.master.check_cells:
                continue
            left = env.timeout - (time.monotonic() - start)
            if left <= 0:
                self.fatal = f"timed out: the notebook ran past the {env.timeout:g} s limit (at code cell {i + 1})"
                return
            limit = min(env.cell_timeout, left)
            reply = kernel.run(src, limit, grace=min(10.0, max(2.0, limit / 2)))
            if reply.status == "dead":
                self.fatal = f"{reply.evalue} (while running code cell {i + 1})"
                return
            if reply.status == "timeout":
                # A broken resource limit fails the whole notebook (the kernel is not trusted to
                # be in a sane state); ordinary exceptions are left to the checks.
                if limit < env.cell_timeout:
                    self.fatal = (f"timed out: the notebook ran past the {env.timeout:g} s limit "
                                  f"(at code cell {i + 1})")
                else:
                    self.fatal = (f"timed out: code cell {i + 1} ran past the {limit:g} s limit "
                                  "per cell (an endless loop?)")
                return
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
            self.fatal = _one_line(f"grader error: loading the check module failed: {result['errors']}")
            return
        for n, ex in enumerate(self.master.exercises):
            result, reply = self._phase(kernel, "check", env.check_timeout, check=ex.check.name,
                                        args=ex.check.args, kwargs=ex.check.kwargs)
            if reply.status == "dead":
                self.results[ex.id] = {"passed": False,
                                       "detail": f"{reply.evalue} (during the check)"}
                for later in self.master.exercises[n + 1:]:
                    self.results[later.id] = {"passed": False, "detail": (
                        f"not graded: the kernel died during the check of {ex.id}")}
                return
            if reply.status == "timeout":
                self.results[ex.id] = {"passed": False, "detail": (
                    f"timed out: the check ran past {env.check_timeout:g} s (an endless loop?)")}
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
                rows.append(Row(student, nb, ex.id, 0, _one_line(self.fatal)))
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
            rows.append(Row(student, nb, ex.id, int(passed), _one_line(detail)))
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
                ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me:
                found.append(int(name))
        return found

    def reap(self) -> int:
        """Kill (and wait for) the leftover children; returns how many were killed."""
        if not self.enabled:
            return 0
        import signal

        killed = 0
        for _ in range(20):
            extra = [pid for pid in self.children() if pid not in self.keep]
            if not extra:
                break
            for pid in extra:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass
            for pid in extra:
                try:
                    os.waitpid(pid, 0)
                except OSError:
                    pass
        return killed


def _out_of_memory(ename: str, evalue: str) -> bool:
    text = f"{ename} {evalue}".lower()
    return ename == "MemoryError" or "can't allocate memory" in text or \
        "cannot allocate memory" in text or "out of memory" in text


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


def grade(submissions_dir, out=None, book_dir=None, *, timeout: float = 300,
          cell_timeout: float = 120, check_timeout: float = 60, memory_mb: int = 4096,
          checks=(), progress: bool = True, summary: bool = True) -> list[Row]:
    """Grade every student folder in ``submissions_dir`` against the book at ``book_dir``.

    Writes the CSV to ``out`` (when given) as it goes, prints a summary table when ``summary``
    is true, and returns the rows. ``checks`` lists extra check module files (for books whose
    checks live outside ``rlnotes.exercises``). Limits: ``timeout`` s for running one notebook's
    cells, ``cell_timeout`` s per cell, ``check_timeout`` s per check, ``memory_mb`` MB of
    memory (``RLIMIT_DATA``) per kernel.
    """
    if not isinstance(submissions_dir, (str, os.PathLike)) or not Path(submissions_dir).is_dir():
        raise ValueError(f"submissions_dir must be an existing folder, got {submissions_dir!r}")
    if out is not None:
        if not isinstance(out, (str, os.PathLike)) or str(out) == "":
            raise ValueError(f"out must be a file path, got {out!r}")
        if Path(out).is_dir():
            raise ValueError(f"out must be a file path, {str(out)!r} is a folder")
        if not Path(out).resolve().parent.is_dir():
            raise ValueError(f"out must be in an existing folder, got {str(out)!r}")
    timeout = _positive(timeout, "timeout")
    cell_timeout = _positive(cell_timeout, "cell_timeout")
    check_timeout = _positive(check_timeout, "check_timeout")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 256:
        raise ValueError(f"memory_mb must be an integer of at least 256, got {memory_mb!r}")
    registry = load_checks(checks)
    masters = master_exercises(book_dir, registry)
    submissions = Path(submissions_dir)
    students = _students(submissions)
    if not masters:
        print("warning: the book has no coding exercises; nothing to grade", file=sys.stderr)
    if not students:
        print(f"warning: no student folders in {submissions}", file=sys.stderr)
    used = {ex.check.name for m in masters for ex in m.exercises}
    rows: list[Row] = []
    timings: dict[str, float] = {}
    handle = open(out, "w", newline="", encoding="utf-8") if out is not None else None
    try:
        writer = csv.writer(handle) if handle else None
        if writer:
            writer.writerow(CSV_COLUMNS)
            handle.flush()
        with tempfile.TemporaryDirectory(prefix="rlnotes-grade-") as tmp:
            env = _Env(Path(tmp), registry, used, memory_mb, timeout, cell_timeout, check_timeout)
            env.reaper = _Reaper()
            bar = _progress(students, progress)
            for k, student in enumerate(bar):
                if hasattr(bar, "set_postfix_str"):
                    bar.set_postfix_str(student.name[:30])
                started = time.monotonic()
                student_rows = []
                for m, master in enumerate(masters):
                    student_rows += _grade_notebook(env, student, master, f"{k}-{m}")
                timings[student.name] = time.monotonic() - started
                rows += student_rows
                if writer:
                    for row in student_rows:
                        writer.writerow(row.as_list())
                    handle.flush()
    finally:
        if handle:
            handle.close()
    if summary:
        print(summary_table(rows, timings))
    return rows


def _grade_notebook(env: _Env, student: Path, master: _Master, tag: str) -> list[Row]:
    nb = master.rel.as_posix()
    path, why = _find_submission(student, master.rel)
    if path is None:
        return [Row(student.name, nb, ex.id, 0, why) for ex in master.exercises]
    try:
        cells = _read_code_cells(path)
    except (ValueError, OSError) as err:
        return [Row(student.name, nb, ex.id, 0, _one_line(str(err))) for ex in master.exercises]
    run = _Run(env, master, cells, tag)
    try:
        run.execute()
    except Exception as err:  # noqa: BLE001 - one broken run must not stop the others
        run.fatal = _one_line(f"grader error: {type(err).__name__}: {err}")
    finally:
        env.restore()
        reaper = getattr(env, "reaper", None)
        if reaper is not None and reaper.reap():
            print(f"warning: {student.name}/{nb} left processes running after its kernel "
                  "ended; they were killed", file=sys.stderr)
    return run.rows(student.name)


def _progress(items, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return items
    return tqdm(items, desc="grading", unit="student", file=sys.stderr)


def summary_table(rows: list[Row], timings: dict | None = None) -> str:
    """A plain-text summary: passes per exercise, and each student's score."""
    if not rows:
        return "No rows graded."
    exercises: dict = {}
    students: dict = {}
    for row in rows:
        key = (row.notebook, row.exercise)
        done, total = exercises.get(key, (0, 0))
        exercises[key] = (done + row.passed, total + 1)
        done, total = students.get(row.student, (0, 0))
        students[row.student] = (done + row.passed, total + 1)
    width = max(len(f"{nb}: {ex}") for nb, ex in exercises)
    lines = ["", "Per exercise (students passing):"]
    for (nb, ex), (done, total) in exercises.items():
        lines.append(f"  {f'{nb}: {ex}':<{width}}  {done:>4} / {total}")
    swidth = max(len(s) for s in students)
    lines += ["", "Per student (exercises passed):"]
    for name, (done, total) in students.items():
        t = f"   {timings[name]:6.1f} s" if timings and name in timings else ""
        lines.append(f"  {name:<{swidth}}  {done:>4} / {total}{t}")
    if timings:
        lines.append(f"\n{len(students)} student(s) graded in {sum(timings.values()):.1f} s "
                     f"({sum(timings.values()) / max(len(timings), 1):.1f} s per student).")
    return "\n".join(lines)
