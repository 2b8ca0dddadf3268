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


# --- error sizes and partial credit (issue 16, items 6 and 7) ----------------------------------

from rlnotes.exercises.core import Parts, format_mismatch  # noqa: E402


def test_a_tiny_mismatch_shows_its_size_not_two_equal_numbers():
    text = format_mismatch(0.6701860001, 0.670186)
    assert "got 0.6701860001, expected 0.670186" in text and "off by 1e-10" in text
    with pytest.raises(ExerciseFailed, match=r"off by 1e-05, tolerance") as err:
        expect_close([0.670196], [0.670186], "V", atol=1e-6, rtol=0)
    assert "got 0.670196, expected 0.670186" in str(err.value)
    assert "off by" in format_mismatch(2.0, 1.0) and "got 2, expected 1" in format_mismatch(2.0, 1.0)


def test_parts_give_credit_for_the_parts_that_pass(capsys):
    @check
    def check_two_parts(f):
        parts = Parts()
        with parts("doubles"):
            expect(f(2) == 4, "f(2) is not 4.", "Multiply by 2.")
        with parts("negatives"):
            expect(f(-1) == -2, "f(-1) is not -2.", "Keep the sign.")
        parts.finish()

    check_two_parts(lambda x: 2 * x)
    with pytest.raises(ExerciseFailed) as err:
        check_two_parts(lambda x: 2 * abs(x))
    assert err.value.credit == 0.5 and "1 of 2 parts passed" in err.value.message
    assert "[negatives] f(-1) is not -2." in err.value.message and err.value.hint == "Keep the sign."
    assert "partial credit: 50%" in capsys.readouterr().out
    with pytest.raises(ExerciseFailed) as err:
        check_two_parts(lambda x: 0)
    assert err.value.credit == 0
    with pytest.raises(ZeroDivisionError):  # other errors end the check, no credit
        check_two_parts(lambda x: 1 / 0)


@pytest.mark.parametrize("bad", [1.0, -0.1, True, "half", float("nan")])
def test_credit_must_be_a_fraction_below_one(bad):
    with pytest.raises(ValueError, match="credit"):
        ExerciseFailed("m", credit=bad)


def test_parts_reject_bad_use():
    parts = Parts()
    with pytest.raises(ValueError):
        parts.finish()  # no part ran
    with pytest.raises(ValueError):
        parts("")
    with parts("a"):
        pass
    with pytest.raises(ValueError, match="twice"):
        parts("a")


def test_points_and_the_exercises_section_are_read_from_the_notebook():
    from rlnotes.exercises._notebook import FormatError, check_cell_points, exercises_section

    assert check_cell_points("check_x(f)") == 1.0
    assert check_cell_points("# points: 2.5\ncheck_x(f)") == 2.5
    assert check_cell_points("check_x(f)  \n#Points:3") == 3.0
    for bad in ["# points: 0\ncheck_x(f)", "# points: two\ncheck_x(f)",
                "# points: 1\n# points: 2\ncheck_x(f)", "# points: -1"]:
        with pytest.raises(FormatError):
            check_cell_points(bad)
    md = lambda t: {"cell_type": "markdown", "source": t}  # noqa: E731
    code = {"cell_type": "code", "source": "x = 1"}
    assert exercises_section([md("# T"), code, md("## Exercises"), code]) == 3
    assert exercises_section([md("# T\n\n## Exercises\n\nText"), code]) == 1
    assert exercises_section([md("# T"), md("## Exercises for later?"), code]) is None
    assert exercises_section([md("### Exercises"), code]) is None
