"""The machinery every deep-RL trainer of the book shares (DQN, REINFORCE, A2C, TRPO, PPO):
vectorised environments and their transitions, MLPs, the replay buffer, evaluation, and the
training plumbing of :mod:`rlnotes.deeprl.training` (common argument checks, torch threads,
device choice, progress bar and callback).

Defined in: Deep Q-networks.
"""

from rlnotes.deeprl.buffer import ReplayBuffer
from rlnotes.deeprl.envs import env_spec, make_vec_env, space_info, step_transitions
from rlnotes.deeprl.evaluation import Evaluator, evaluate
from rlnotes.deeprl.networks import Standardize, mlp

__all__ = ["ReplayBuffer", "Evaluator", "Standardize", "env_spec", "evaluate", "make_vec_env", "mlp",
           "space_info", "step_transitions"]
