"""Exercises: the checks students run, the student edition and the grader.

Checks for each chapter live in their own module and are re-exported here, so a notebook writes
``from rlnotes.exercises import check_value_iteration``. The command line
(``python -m rlnotes.exercises student|student-book|grade``) is in ``__main__.py``.
"""

from rlnotes.exercises.core import (CHECKS, ExerciseFailed, check, expect, expect_close,
                                    expect_own_work)
from rlnotes.exercises.dqn import check_dqn_targets, check_polyak_update
from rlnotes.exercises.ppo import check_clipped_surrogate, check_conjugate_gradient
from rlnotes.exercises.mdp import check_policy_evaluation, check_q_values, check_value_iteration
from rlnotes.exercises.td import check_q_learning_update, check_sarsa_update, check_td0_update

__all__ = [
    "CHECKS", "ExerciseFailed", "check", "expect", "expect_close", "expect_own_work",
    # MDPs and dynamic programming
    "check_policy_evaluation", "check_q_values", "check_value_iteration",
    # Learning without a model: Monte Carlo and TD
    "check_td0_update", "check_sarsa_update", "check_q_learning_update",
    # Deep Q-networks
    "check_dqn_targets", "check_polyak_update",
    # TRPO and PPO
    "check_conjugate_gradient", "check_clipped_surrogate",
]
