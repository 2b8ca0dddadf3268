"""Exercises: the checks students run, the student edition and the grader.

Checks for each chapter live in their own module and are re-exported here, so a notebook writes
``from rlnotes.exercises import check_value_iteration``.
"""

from rlnotes.exercises.core import CHECKS, ExerciseFailed, check, expect, expect_close

__all__ = ["CHECKS", "ExerciseFailed", "check", "expect", "expect_close"]
# Chapter check modules (each adds its line):
from rlnotes.exercises.td import check_q_learning_update, check_sarsa_update, check_td0_update  # noqa: E402,F401
from rlnotes.exercises.mdp import check_policy_evaluation, check_q_values, check_value_iteration  # noqa: E402,F401
