"""The protocol every exercise check follows (see the instructor guide and CONTRIBUTING.md).

A check is a function decorated with :func:`check`. It tests behaviour (random inputs with fixed
seeds against rlnotes' own implementation, invariants, thresholds over several seeds), and on a
mistake raises :class:`ExerciseFailed` with a message and a hint that points at the likely cause.
Called from a notebook, the decorated check prints a one-line verdict (and the hint) and re-raises
on failure, so a broken solution also fails the book's build. The grader calls the undecorated
function (``check.raw``) from freshly loaded code and records the exception it raises.
"""

from __future__ import annotations

import functools
import types

import numpy as np
import torch

#: Every check, by name (``check_value_iteration`` ...), filled in by the :func:`check` decorator.
CHECKS: dict = {}


class ExerciseFailed(AssertionError):
    """A check found a mistake. ``hint`` says where to look.

    ``credit`` (0 <= credit < 1, default 0) is the fraction of the exercise's points earned
    anyway; only checks made of independent parts set it (see :class:`Parts`).
    """

    def __init__(self, message: str, hint: str | None = None, *, credit: float = 0.0):
        super().__init__(message if hint is None else f"{message} Hint: {hint}")
        if isinstance(credit, bool) or not isinstance(credit, (int, float)) or not 0 <= credit < 1:
            raise ValueError(f"credit must be a number in [0, 1), got {credit!r}")
        self.message = message
        self.hint = hint
        self.credit = float(credit)


class Parts:
    """A check made of independent parts, each worth an equal share of the points.

    ::

        parts = Parts()
        with parts("random transitions"):
            ...  # raises ExerciseFailed on a mistake
        with parts("learns FrozenLake"):
            ...
        parts.finish()   # raises ExerciseFailed(credit=passed/total) if a part failed

    Only :class:`ExerciseFailed` counts as a failed part; any other exception (the solution
    crashed, or still raises ``NotImplementedError``) ends the check at once, with no credit.
    """

    def __init__(self):
        self.names: list[str] = []
        self.failures: list[tuple[str, ExerciseFailed]] = []

    def __call__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if name in self.names:
            raise ValueError(f"name must be unique among the parts, {name!r} is used twice")
        self.names.append(name)
        return _Part(self, name)

    def finish(self) -> None:
        if not self.names:
            raise ValueError("Parts.finish: no part was run")
        if not self.failures:
            return
        passed = len(self.names) - len(self.failures)
        message = " ".join(f"[{name}] {err.message}" for name, err in self.failures)
        hints = dict.fromkeys(err.hint for _, err in self.failures if err.hint)
        raise ExerciseFailed(f"{passed} of {len(self.names)} parts passed. {message}",
                             " ".join(hints) or None, credit=passed / len(self.names))


class _Part:
    def __init__(self, parts: Parts, name: str):
        self.parts, self.name = parts, name

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if kind is not None and issubclass(kind, ExerciseFailed):
            self.parts.failures.append((self.name, err))
            return True  # the next part runs
        return False


def check(func):
    """Register ``func`` as an exercise check and make it print a verdict when called."""

    @functools.wraps(func)
    def verdict(*args, **kwargs):
        try:
            func(*args, **kwargs)
        except ExerciseFailed as err:
            credit = f" (partial credit: {err.credit:.0%})" if err.credit else ""
            print(f"FAILED {func.__name__}: {err.message}{credit}")
            if err.hint:
                print(f"  hint: {err.hint}")
            raise
        except NotImplementedError:
            print(f"NOT DONE {func.__name__}: the exercise still raises NotImplementedError")
            raise
        print(f"PASSED {func.__name__}")
        # None, so that a notebook's check cell shows the verdict line only.

    verdict.raw = func
    CHECKS[func.__name__] = verdict
    return verdict


def expect(condition, message: str, hint: str | None = None) -> None:
    """Raise :class:`ExerciseFailed` unless ``condition`` holds."""
    if not bool(condition):
        raise ExerciseFailed(message, hint)


def expect_close(actual, expected, what: str, *, atol: float = 1e-6, rtol: float = 1e-6,
                 hint: str | None = None) -> None:
    """Raise :class:`ExerciseFailed` unless ``actual`` matches ``expected`` elementwise."""
    actual = np.asarray(_to_numpy(actual), dtype=np.float64)
    expected = np.asarray(_to_numpy(expected), dtype=np.float64)
    if actual.shape != expected.shape:
        raise ExerciseFailed(f"{what} has shape {actual.shape}, expected {expected.shape}.", hint)
    if not np.all(np.isfinite(actual)):
        raise ExerciseFailed(f"{what} contains NaN or infinite values.", hint)
    if not np.allclose(actual, expected, atol=atol, rtol=rtol):
        worst = int(np.argmax(np.abs(actual - expected)))
        idx = np.unravel_index(worst, expected.shape) if expected.shape else ()
        raise ExerciseFailed(
            f"{what} is off: at index {tuple(int(i) for i in idx)} "
            f"{format_mismatch(actual[idx], expected[idx], atol=atol, rtol=rtol)}.", hint)


def format_mismatch(got, expected, *, atol: float = 1e-6, rtol: float = 1e-6) -> str:
    """``"got X, expected Y (off by E, tolerance T)"`` with enough digits that X and Y differ
    on the page: a difference of 1e-10 is not shown as two equal six-digit numbers."""
    got, expected = float(got), float(expected)
    diff = abs(got - expected)
    digits = 6
    while digits < 17 and f"{got:.{digits}g}" == f"{expected:.{digits}g}":
        digits += 1
    text = f"got {got:.{digits}g}, expected {expected:.{digits}g}"
    if diff == diff:  # not NaN
        text += f" (off by {diff:.2g}, tolerance {atol + rtol * abs(expected):.2g})"
    return text


def expect_own_work(func, *references, hint: str | None = None) -> None:
    """Raise :class:`ExerciseFailed` when ``func`` calls one of ``references``: rlnotes' own
    implementation of what the exercise asks the reader to write.

    Looks at the names ``func``'s code uses (nested functions and lambdas included), resolved in
    its globals and closure, one attribute deep into modules (``rlnotes.mdp.value_iteration``),
    and into helper functions the reader wrote (three levels deep). References are compared by
    module and qualified name, so a reloaded copy of rlnotes matches as well.
    """
    if not callable(func):
        raise ValueError(f"func must be the reader's function, got {type(func).__name__}")
    if not references:
        raise ValueError("references must name at least one rlnotes function")
    for ref in references:
        if not isinstance(ref, types.FunctionType):
            raise ValueError(f"references must be functions, got {type(ref).__name__}")
    banned = {(ref.__module__, ref.__qualname__): ref.__qualname__ for ref in references}
    for obj in _objects_used(func, depth=3, seen=set()):
        key = (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None))
        if key in banned:
            raise ExerciseFailed(
                f"Your solution calls rlnotes' own {key[0]}.{banned[key]}, the function the "
                "exercise asks you to write.",
                hint or "Write the computation yourself; numpy is all you need.")


def _code_names(code) -> set:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _objects_used(func, depth: int, seen: set):
    """The objects ``func`` can reach by name (see :func:`expect_own_work`)."""
    if not isinstance(func, types.FunctionType) or id(func) in seen:
        return
    seen.add(id(func))
    names = _code_names(func.__code__)
    scope = dict(func.__globals__)
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    for name in names:
        if name not in scope:
            continue
        obj = scope[name]
        yield obj
        if isinstance(obj, types.ModuleType):
            for attr in names:
                inner = getattr(obj, attr, None)
                yield inner
                if isinstance(inner, types.ModuleType):
                    yield from (getattr(inner, a, None) for a in names)
        elif depth > 0 and isinstance(obj, types.FunctionType) and not str(
                getattr(obj, "__module__", "")).startswith("rlnotes"):
            yield from _objects_used(obj, depth - 1, seen)


def _to_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return x


def call_reader(func, what: str, *args):
    """``func(*args)``; a crash in the reader's code becomes :class:`ExerciseFailed` naming
    ``what`` (NotImplementedError passes through, so an untouched stub reads as "not done")."""
    try:
        return func(*args)
    except NotImplementedError:
        raise
    except Exception as err:  # the reader's code crashed: say where
        raise ExerciseFailed(f"{what} raised {type(err).__name__}: {err}",
                             "Run it on a small example and compare shapes.") from None


def reader_array(x, what: str, shape, *, read_hint: str, shape_hint: str,
                 finite: bool = False, finite_hint: str | None = None) -> np.ndarray:
    """The reader's result as a float64 numpy array of the expected ``shape`` (a tensor is
    detached and moved to the CPU); :class:`ExerciseFailed` naming ``what`` when it cannot be
    read (``read_hint`` says what to return), has another shape (``shape_hint``) or, with
    ``finite``, holds NaN or infinite values (``finite_hint``)."""
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ExerciseFailed(f"{what} could not be read as an array ({err}).", read_hint) from None
    if x.shape != shape:
        raise ExerciseFailed(f"{what} has shape {x.shape}, expected {shape}.", shape_hint)
    if finite and not np.isfinite(x).all():
        raise ExerciseFailed(f"{what} contains NaN or infinite values.", finite_hint)
    return x


def as_float_array(x, what: str) -> np.ndarray:
    """The reader's tensor (or array-like) as a float64 numpy array, detached and on the CPU."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ExerciseFailed(f"{what} is not a tensor.", "Return a torch tensor.") from None
