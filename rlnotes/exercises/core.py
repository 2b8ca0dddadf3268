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

import numpy as np

#: Every check, by name (``check_value_iteration`` ...), filled in by the :func:`check` decorator.
CHECKS: dict = {}


class ExerciseFailed(AssertionError):
    """A check found a mistake. ``hint`` says where to look."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message if hint is None else f"{message} Hint: {hint}")
        self.message = message
        self.hint = hint


def check(func):
    """Register ``func`` as an exercise check and make it print a verdict when called."""

    @functools.wraps(func)
    def verdict(*args, **kwargs):
        try:
            func(*args, **kwargs)
        except ExerciseFailed as err:
            print(f"FAILED {func.__name__}: {err.message}")
            if err.hint:
                print(f"  hint: {err.hint}")
            raise
        except NotImplementedError:
            print(f"NOT DONE {func.__name__}: the exercise still raises NotImplementedError")
            raise
        print(f"PASSED {func.__name__}")
        return True

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
            f"{what} is off: at index {tuple(int(i) for i in idx)} got "
            f"{actual[idx]:.6g}, expected {expected[idx]:.6g}.", hint)


def _to_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return x
