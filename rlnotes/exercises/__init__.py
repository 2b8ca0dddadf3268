"""Exercises: the checks students run, the student edition and the grader.

Checks for each chapter live in their own module and are re-exported here, so a notebook writes
``from rlnotes.exercises import check_value_iteration``. The command line
(``python -m rlnotes.exercises student|student-book|grade``) is in ``__main__.py``.
"""

from rlnotes.exercises.core import (CHECKS, ExerciseFailed, Parts, check, expect, expect_close,
                                    expect_own_work, format_mismatch)
from rlnotes.exercises.a2c import (check_n_step_returns, check_vtrace)
from rlnotes.exercises.dpo import (check_cdpo_loss, check_dpo_loss,
                                   check_entropy_regularised_optimum, check_optimal_policy)
from rlnotes.exercises.dqn import (check_dqn_targets, check_n_step_dqn_targets,
                                   check_polyak_update, check_target_update)
from rlnotes.exercises.grpo import (check_group_advantages, check_group_advantages_by_id,
                                    check_grpo_aggregate, check_micro_batch_losses)
from rlnotes.exercises.grpo_variants import check_accuracy_filter, check_overlong_advantages
from rlnotes.exercises.mdp import (check_in_place_evaluation, check_modified_policy_iteration,
                                   check_policy_evaluation, check_q_values, check_value_iteration)
from rlnotes.exercises.pg import (check_linear_softmax_reinforce, check_reward_to_go)
from rlnotes.exercises.ppo import (check_clipped_surrogate, check_conjugate_gradient,
                                   check_dual_clip_loss, check_preconditioned_cg)
from rlnotes.exercises.rlhf import (check_completion_logprobs, check_gather_logprobs,
                                    check_k3_rewards, check_kl_penalised_rewards,
                                    check_token_gae, check_truncated_token_gae)
from rlnotes.exercises.td import (check_certainty_equivalence, check_q_learning_update,
                                  check_sarsa_update, check_td0_update,
                                  check_weighted_importance_sampling)

__all__ = [
    "CHECKS", "ExerciseFailed", "Parts", "check", "expect", "expect_close", "expect_own_work",
    "format_mismatch",
    # MDPs and dynamic programming
    "check_policy_evaluation", "check_q_values", "check_value_iteration",
    "check_in_place_evaluation", "check_modified_policy_iteration",
    # Learning without a model: Monte Carlo and TD
    "check_td0_update", "check_sarsa_update", "check_q_learning_update",
    "check_certainty_equivalence", "check_weighted_importance_sampling",
    # Deep Q-networks
    "check_dqn_targets", "check_polyak_update", "check_target_update", "check_n_step_dqn_targets",
    # Policy gradients
    "check_reward_to_go", "check_linear_softmax_reinforce",
    # Actor-critic and GAE
    "check_vtrace", "check_n_step_returns",
    # TRPO and PPO
    "check_conjugate_gradient", "check_clipped_surrogate", "check_preconditioned_cg",
    "check_dual_clip_loss",
    # Reinforcement learning from human feedback
    "check_gather_logprobs", "check_kl_penalised_rewards", "check_token_gae",
    "check_completion_logprobs", "check_k3_rewards", "check_truncated_token_gae",
    # Direct preference optimisation
    "check_dpo_loss", "check_optimal_policy", "check_cdpo_loss",
    "check_entropy_regularised_optimum",
    # GRPO, Dr. GRPO and DAPO
    "check_group_advantages", "check_grpo_aggregate", "check_group_advantages_by_id",
    "check_micro_batch_losses", "check_overlong_advantages", "check_accuracy_filter",
]
