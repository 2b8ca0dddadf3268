"""The 5-state random walk of Sutton and Barto (2018), Example 6.2, as a gymnasium environment.

Encoding (registered as ``rlnotes/RandomWalk-v0``)::

    state:   0     1   2   3   4   5     6
             [T]   A   B   C   D   E    [T]
    reward:  0  <- 0   0   0   0   0 ->  +1

- Observations are ``Discrete(7)``: 0 and 6 are the two terminal ends, 1..5 are A..E, and every
  episode starts in C (state 3).
- Actions are ``Discrete(2)``: 0 moves left, 1 moves right, deterministically. The Markov reward
  process of the book is this MDP under the uniform random policy (each action with probability
  1/2); :func:`uniform_policy` returns that policy as an (S, A) matrix.
- The reward is +1 on the move from E into the right end and 0 on every other move; episodes
  terminate on reaching either end. With gamma = 1 the true values of A..E under the uniform
  policy are 1/6, 2/6, 3/6, 4/6, 5/6 (:func:`true_values`).
- ``P`` is the toy-text model (``P[s][a] = [(prob, next_state, reward, terminated)]``) that
  ``rlnotes.mdp.TabularMDP.from_gymnasium`` reads; as in FrozenLake, the terminal states map to
  themselves with reward 0 and ``terminated=True``.

Defined in: Learning without a model: Monte Carlo and TD, section The random walk.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlnotes._validate import require_int

LEFT, RIGHT = 0, 1


class RandomWalkEnv(gym.Env):
    """Sutton and Barto's random walk with ``num_states`` non-terminal states (5 in the book).

    | attribute | shape / value |
    | --- | --- |
    | ``observation_space`` | ``Discrete(num_states + 2)``; 0 and ``num_states + 1`` terminal |
    | ``action_space`` | ``Discrete(2)``: 0 left, 1 right |
    | ``P`` | toy-text model, dict s -> a -> list of (prob, next_state, reward, terminated) |
    | ``initial_state_distrib`` | (num_states + 2,), all mass on the middle state |

    Defined in: Learning without a model: Monte Carlo and TD, section The random walk.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, num_states: int = 5, render_mode: str | None = None):
        num_states = require_int(num_states, "num_states", minimum=1)
        if num_states % 2 == 0:
            raise ValueError(f"num_states must be odd (the walk starts in the middle), got {num_states}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.num_states = num_states
        self.nS = num_states + 2
        self.nA = 2
        self.start_state = (num_states + 1) // 2
        self.terminal_states = (0, self.nS - 1)
        self.observation_space = spaces.Discrete(self.nS)
        self.action_space = spaces.Discrete(self.nA)
        self.render_mode = render_mode
        self.initial_state_distrib = np.zeros(self.nS)
        self.initial_state_distrib[self.start_state] = 1.0
        self.P = {s: {a: self._outcomes(s, a) for a in range(self.nA)} for s in range(self.nS)}
        self.s = self.start_state

    def _outcomes(self, s: int, a: int) -> list:
        if s in self.terminal_states:
            return [(1.0, s, 0.0, True)]
        s2 = s - 1 if a == LEFT else s + 1
        reward = 1.0 if s2 == self.nS - 1 else 0.0
        return [(1.0, s2, reward, s2 in self.terminal_states)]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.s = self.start_state
        return int(self.s), {"prob": 1.0}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be 0 (left) or 1 (right), got {action!r}")
        prob, s2, reward, terminated = self.P[self.s][int(action)][0]
        self.s = s2
        return int(s2), float(reward), bool(terminated), False, {"prob": prob}

    def render(self):
        if self.render_mode != "ansi":
            return None
        names = ["T"] + [chr(ord("A") + i) for i in range(self.num_states)] + ["T"]
        return " ".join(f"[{n}]" if i == self.s else f" {n} " for i, n in enumerate(names))


def uniform_policy(num_states: int = 5) -> np.ndarray:
    """The book's behaviour: left or right with probability 1/2 each, as an (S, 2) matrix,
    S = num_states + 2.

    Defined in: Learning without a model: Monte Carlo and TD, section The random walk.
    """
    num_states = require_int(num_states, "num_states", minimum=1)
    return np.full((num_states + 2, 2), 0.5)


def true_values(num_states: int = 5) -> np.ndarray:
    """True values under the uniform policy with gamma = 1: ``v(s) = s / (num_states + 1)`` for the
    non-terminal states s = 1..num_states, 0 at both ends (shape (num_states + 2,)).

    The value is the probability of leaving on the right, which solves
    ``v(s) = (v(s - 1) + v(s + 1)) / 2`` with ``v(0) = 0`` and ``v(num_states + 1) = 1`` (the
    reward, not a value, at the right end; its value as a terminal state is 0).

    Defined in: Learning without a model: Monte Carlo and TD, section The random walk.
    """
    num_states = require_int(num_states, "num_states", minimum=1)
    v = np.arange(num_states + 2, dtype=np.float64) / (num_states + 1)
    v[0] = v[-1] = 0.0
    return v
