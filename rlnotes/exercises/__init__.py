"""Exercises: the checks students run, the student edition and the grader.

Checks for each chapter live in their own module and are re-exported here, so a notebook writes
``from rlnotes.exercises import check_value_iteration``. The command line
(``python -m rlnotes.exercises student|student-book|grade|nbgrader``) is in ``__main__.py``.
"""

from rlnotes.exercises.core import (CHECKS, ExerciseFailed, Parts, check, expect, expect_close,
                                    expect_own_work, format_mismatch)
from rlnotes.exercises.mdp import check_policy_evaluation, check_q_values, check_value_iteration
from rlnotes.exercises.td import check_q_learning_update, check_sarsa_update, check_td0_update

__all__ = [
    "CHECKS", "ExerciseFailed", "Parts", "check", "expect", "expect_close", "expect_own_work",
    "format_mismatch",
    # MDPs and dynamic programming
    "check_policy_evaluation", "check_q_values", "check_value_iteration",
    # Learning without a model: Monte Carlo and TD
    "check_td0_update", "check_sarsa_update", "check_q_learning_update",
]
