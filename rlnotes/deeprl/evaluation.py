"""Deterministic evaluation: the greedy policy plays whole episodes on its own environments.

The protocol of the book's benchmarks (and of the chapters' learning curves): every 2,048
training steps the current policy plays 10 episodes, one on each of 10 copies of the
environment, seeded ``seed + 10000`` once, so that evaluation never touches the training
environments' random stream.

Defined in: Deep Q-networks, section DQN on CartPole.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_int
from rlnotes.deeprl.envs import make_vec_env

__all__ = ["Evaluator", "evaluate"]

EVAL_SEED_OFFSET = 10_000


class Evaluator:
    """Plays ``num_episodes`` episodes of ``policy`` on ``num_envs`` copies of ``env_id``.

    ``Evaluator(env_id, seed)(policy)`` returns the (num_episodes,) array of undiscounted
    episode returns. The env is made once and seeded with ``seed + 10000`` at the first call;
    later calls continue its random stream (new start states each time, the same sequence in
    every run). Env i plays episodes ``(num_episodes + i) // num_envs`` times, as SB3 does.
    ``policy(obs)`` maps an (N, obs_dim) float32 array to N actions and should be greedy.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """

    def __init__(self, env_id: str, seed: int = 0, *, num_episodes: int = 10,
                 num_envs: int = 10):
        self.seed = require_int(seed, "seed", minimum=0)
        self.num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
        self.num_envs = require_int(num_envs, "num_envs", minimum=1)
        self.env_id = env_id
        self.envs = make_vec_env(env_id, self.num_envs)  # validates env_id
        self._seeded = False

    def __call__(self, policy) -> np.ndarray:
        if not callable(policy):
            raise ValueError(f"policy must be callable (obs -> actions), got {policy!r}")
        N = self.num_envs
        if self._seeded:
            obs, _ = self.envs.reset()
        else:
            obs, _ = self.envs.reset(seed=self.seed + EVAL_SEED_OFFSET)
            self._seeded = True
        targets = np.array([(self.num_episodes + i) // N for i in range(N)])
        counts = np.zeros(N, dtype=np.int64)
        ret = np.zeros(N)
        autoreset = np.zeros(N, dtype=bool)
        returns = []
        while (counts < targets).any():
            actions = np.asarray(policy(np.asarray(obs, dtype=np.float32)))
            obs, rewards, terminated, truncated, _ = self.envs.step(actions)
            ret += np.where(autoreset, 0.0, rewards)  # the reset step is not part of an episode
            ended = (terminated | truncated) & ~autoreset
            for i in np.flatnonzero(ended & (counts < targets)):
                returns.append(ret[i])
                counts[i] += 1
            ret[ended] = 0.0
            autoreset = terminated | truncated
        return np.asarray(returns, dtype=np.float64)

    def close(self) -> None:
        self.envs.close()


def evaluate(policy, env_id: str, seed: int = 0, *, num_episodes: int = 10,
             num_envs: int = 10) -> np.ndarray:
    """One evaluation of ``policy`` under the protocol (see :class:`Evaluator`): the
    (num_episodes,) returns of its episodes on a fresh env seeded ``seed + 10000``.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    evaluator = Evaluator(env_id, seed, num_episodes=num_episodes, num_envs=num_envs)
    try:
        return evaluator(policy)
    finally:
        evaluator.close()
