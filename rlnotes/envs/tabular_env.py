"""A finite MDP as a gymnasium environment, from a transition table in gymnasium's toy-text format.

``P[s][a]`` is a list of ``(prob, next_state, reward, terminated)`` tuples, as in FrozenLake,
CliffWalking and Taxi, so :meth:`rlnotes.mdp.TabularMDP.from_gymnasium` reads these environments
too. Subclasses build the table and say how to draw a state as text.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["TabularEnv"]


class TabularEnv(gym.Env):
    """A gymnasium environment defined by a toy-text transition table.

    ==========================  ====================================================================
    argument                    meaning
    ==========================  ====================================================================
    ``P``                       dict: state -> action -> list of (prob, next_state, reward,
                                terminated); states 0..S-1, actions 0..A-1
    ``initial_distribution``    (S,) probabilities of the state ``reset`` draws
    ``render_mode``             None or "ansi" (``render`` returns a string)
    ==========================  ====================================================================

    Observations are ``int`` states in ``Discrete(S)``; ``step`` samples one listed outcome with the
    environment's ``np_random`` and reports ``{"prob": p}`` in ``info``. Subclasses override
    :meth:`_render_text`.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, P: dict, initial_distribution, render_mode: str | None = None):
        if not isinstance(P, dict) or not P:
            raise ValueError("P must be a non-empty dict: state -> action -> list of outcomes")
        num_states = len(P)
        num_actions = len(P[0])
        for s in range(num_states):
            if s not in P or len(P[s]) != num_actions:
                raise ValueError(f"P must list {num_actions} actions for every state 0..{num_states - 1}")
            for a in range(num_actions):
                total = sum(float(p) for p, *_ in P[s][a])
                if abs(total - 1.0) > 1e-8:
                    raise ValueError(f"P[{s}][{a}] probabilities must sum to 1, got {total}")
        initial = np.asarray(initial_distribution, dtype=np.float64)
        if initial.shape != (num_states,) or initial.min() < 0 or abs(initial.sum() - 1) > 1e-8:
            raise ValueError(f"initial_distribution must be ({num_states},) probabilities summing to 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, "
                             f"got {render_mode!r}")
        self.P = P
        self.initial_distribution = initial
        self.observation_space = spaces.Discrete(num_states)
        self.action_space = spaces.Discrete(num_actions)
        self.render_mode = render_mode
        self.s = int(np.argmax(initial))
        self.lastaction: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.s = int(self.np_random.choice(len(self.initial_distribution), p=self.initial_distribution))
        self.lastaction = None
        return self.s, {"prob": float(self.initial_distribution[self.s])}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in {self.action_space}, got {action!r}")
        outcomes = self.P[self.s][int(action)]
        probs = np.array([o[0] for o in outcomes], dtype=np.float64)
        i = int(self.np_random.choice(len(outcomes), p=probs / probs.sum()))
        prob, s2, reward, terminated = outcomes[i][:4]
        self.s = int(s2)
        self.lastaction = int(action)
        return self.s, float(reward), bool(terminated), False, {"prob": float(prob)}

    def render(self):
        if self.render_mode == "ansi":
            return self._render_text()
        return None

    def _render_text(self) -> str:
        return f"state {self.s}\n"
