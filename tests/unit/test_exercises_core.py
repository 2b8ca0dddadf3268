"""The check protocol: verdicts, hints, and the guard against calling rlnotes' own solution."""

import numpy as np
import pytest

import rlnotes.mdp
from rlnotes.exercises.core import (CHECKS, ExerciseFailed, check, expect, expect_close,
                                    expect_own_work)
from rlnotes.mdp import value_iteration


@check
def check_is_double(f):
    expect(f(3) == 6, f"f(3) returned {f(3)!r}, expected 6.", "Multiply by 2.")


def test_a_passing_check_prints_a_verdict_and_returns_none(capsys):
    assert check_is_double(lambda x: 2 * x) is None
    assert capsys.readouterr().out.strip() == "PASSED check_is_double"
    assert CHECKS["check_is_double"] is check_is_double
    assert check_is_double.raw(lambda x: 2 * x) is None


def test_a_failing_check_prints_the_hint_and_raises(capsys):
    with pytest.raises(ExerciseFailed) as err:
        check_is_double(lambda x: x + 2)
    out = capsys.readouterr().out
    assert "FAILED check_is_double" in out and "hint: Multiply by 2." in out
    assert err.value.hint == "Multiply by 2." and isinstance(err.value, AssertionError)


def test_an_unfinished_exercise_says_not_done(capsys):
    def stub(x):
        raise NotImplementedError
    with pytest.raises(NotImplementedError):
        check_is_double(stub)
    assert "NOT DONE check_is_double" in capsys.readouterr().out


def test_expect_close_names_the_worst_index():
    expect_close([1.0, 2.0], np.array([1.0, 2.0]), "V")
    with pytest.raises(ExerciseFailed, match=r"at index \(1,\) got 2.5, expected 2"):
        expect_close([1.0, 2.5], [1.0, 2.0], "V")
    with pytest.raises(ExerciseFailed, match="shape"):
        expect_close([1.0], [1.0, 2.0], "V")
    with pytest.raises(ExerciseFailed, match="NaN"):
        expect_close([np.nan, 1.0], [1.0, 2.0], "V")


# --- expect_own_work -----------------------------------------------------------------------------

def own_value_iteration(mdp, tol=1e-10):
    V = np.zeros(mdp.num_states)
    for _ in range(1000):
        V = (mdp.R + mdp.gamma * mdp.P @ V).max(axis=1)
    return V, (mdp.R + mdp.gamma * mdp.P @ V).argmax(axis=1)


def by_name(mdp, tol=1e-10):
    return value_iteration(mdp, tol)


def by_attribute(mdp, tol=1e-10):
    return rlnotes.mdp.value_iteration(mdp, tol)


def through_a_helper(mdp, tol=1e-10):
    return by_attribute(mdp, tol)


def make_closure():
    solver = value_iteration
    return lambda mdp, tol=1e-10: solver(mdp, tol)


def in_a_nested_function(mdp, tol=1e-10):
    def inner():
        return rlnotes.mdp.value_iteration(mdp, tol)
    return inner()


def test_own_work_passes():
    expect_own_work(own_value_iteration, rlnotes.mdp.value_iteration)


@pytest.mark.parametrize("solution", [by_name, by_attribute, through_a_helper, make_closure(),
                                      in_a_nested_function])
def test_calling_the_reference_fails(solution):
    with pytest.raises(ExerciseFailed, match="rlnotes' own rlnotes.mdp.value_iteration"):
        expect_own_work(solution, rlnotes.mdp.value_iteration, rlnotes.mdp.policy_iteration)


def test_other_rlnotes_helpers_are_allowed():
    def uses_q_values(mdp, tol=1e-10):
        V = np.zeros(mdp.num_states)
        return rlnotes.mdp.q_values(mdp, V).max(axis=1), None
    expect_own_work(uses_q_values, rlnotes.mdp.value_iteration)


@pytest.mark.parametrize("args, match", [
    ((None, value_iteration), "func"),
    ((own_value_iteration,), "references"),
    ((own_value_iteration, "value_iteration"), "references"),
])
def test_expect_own_work_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        expect_own_work(*args)
