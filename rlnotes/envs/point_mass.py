"""A one-dimensional point mass to steer onto a target: the smallest continuous-control task,
small enough for a Gaussian policy to learn in seconds on a CPU.

Observation ``(x, v, x_target)``; action a force in [-1, 1]; dynamics
``v <- 0.9 v + 0.1 a``, ``x <- clip(x + v, -2, 2)``; reward ``-|x - x_target| - 0.01 a^2``
per step; 100 steps per episode (a time limit, not a termination). Start position and target are
uniform in [-1, 1]. To score well a policy must push toward the target and brake before it.

Defined in: TRPO and PPO, section A Gaussian policy for continuous actions.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class PointMassEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self._state = np.zeros(3)

    def _obs(self):
        return self._state.astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        x, target = self.np_random.uniform(-1.0, 1.0, size=2)
        self._state = np.array([x, 0.0, target])
        return self._obs(), {}

    def step(self, action):
        a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        x, v, target = self._state
        v = 0.9 * v + 0.1 * a
        x = float(np.clip(x + v, -2.0, 2.0))
        self._state = np.array([x, v, target])
        reward = -abs(x - target) - 0.01 * a * a
        return self._obs(), reward, False, False, {}
