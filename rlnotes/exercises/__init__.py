"""Exercises: the checks students run, the student edition and the grader.

Checks for each chapter live in their own module and are re-exported here, so a notebook writes
``from rlnotes.exercises import check_value_iteration``. The command line
(``python -m rlnotes.exercises student|student-book|grade``) is in ``__main__.py``.
"""

from rlnotes.exercises.core import (CHECKS, ExerciseFailed, check, expect, expect_close,
                                    expect_own_work)
from rlnotes.exercises.grpo import check_group_advantages, check_grpo_aggregate
from rlnotes.exercises.mdp import check_policy_evaluation, check_q_values, check_value_iteration
from rlnotes.exercises.rlhf import (check_gather_logprobs, check_kl_penalised_rewards,
                                     check_token_gae)
from rlnotes.exercises.td import check_q_learning_update, check_sarsa_update, check_td0_update

__all__ = [
    "CHECKS", "ExerciseFailed", "check", "expect", "expect_close", "expect_own_work",
    # MDPs and dynamic programming
    "check_policy_evaluation", "check_q_values", "check_value_iteration",
    # Learning without a model: Monte Carlo and TD
    "check_td0_update", "check_sarsa_update", "check_q_learning_update",
    # Reinforcement learning from human feedback
    "check_gather_logprobs", "check_kl_penalised_rewards", "check_token_gae",
    # GRPO, Dr. GRPO and DAPO
    "check_group_advantages", "check_grpo_aggregate",
]
