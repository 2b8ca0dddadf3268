"""A finite MDP as a gymnasium environment, from a transition table in gymnasium's toy-text format.

``P[s][a]`` is a list of ``(prob, next_state, reward, terminated)`` tuples, as in FrozenLake,
CliffWalking and Taxi, so :meth:`rlnotes.mdp.TabularMDP.from_gymnasium` reads these environments
too. Subclasses build the table and say how to draw a state as text.

The start distribution has one name everywhere: ``initial_state_distrib``, the attribute
gymnasium's toy-text environments use. :func:`start_distribution` is the one place that reads it
(with CliffWalking's older ``start_state_index`` as the only alternative); an environment with
neither is refused rather than silently started in state 0.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["START_ATTRIBUTE", "TabularEnv", "start_distribution"]

#: The attribute that holds an environment's start distribution, as in gymnasium's toy text.
START_ATTRIBUTE = "initial_state_distrib"


def start_distribution(env, num_states: int | None = None) -> np.ndarray:
    """The (S,) start distribution of a toy-text environment (wrapped or not).

    Reads ``env.unwrapped.initial_state_distrib`` (gymnasium's FrozenLake, Taxi, CliffWalking,
    and every :class:`TabularEnv`); an environment that has only ``start_state_index`` (older
    CliffWalking) starts there with probability 1. Anything else raises ``ValueError``: a
    silent default would start every simulated episode in the wrong state.

    Defined in: Learning without a model: Monte Carlo and TD, section Many runs at once.
    """
    base = getattr(env, "unwrapped", env)
    start = getattr(base, START_ATTRIBUTE, None)
    if start is None and getattr(base, "start_state_index", None) is not None:
        start = np.zeros(num_states if num_states is not None else int(base.observation_space.n))
        start[int(base.start_state_index)] = 1.0
    if start is None:
        raise ValueError(f"env must say where episodes start: env.unwrapped.{START_ATTRIBUTE} "
                         f"(an (S,) distribution) is missing on {type(base).__name__}")
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    if num_states is not None and start.shape != (num_states,):
        raise ValueError(f"env.unwrapped.{START_ATTRIBUTE} must have shape ({num_states},), "
                         f"got {start.shape}")
    if start.min() < 0 or abs(start.sum() - 1.0) > 1e-8:
        raise ValueError(f"env.unwrapped.{START_ATTRIBUTE} must hold probabilities summing to 1")
    return start


class TabularEnv(gym.Env):
    """A gymnasium environment defined by a toy-text transition table.

    ==========================  ====================================================================
    argument                    meaning
    ==========================  ====================================================================
    ``P``                       dict: state -> action -> list of (prob, next_state, reward,
                                terminated); states 0..S-1, actions 0..A-1
    ``initial_state_distrib``   (S,) probabilities of the state ``reset`` draws
    ``render_mode``             None or "ansi" (``render`` returns a string)
    ==========================  ====================================================================

    Observations are ``int`` states in ``Discrete(S)``; ``step`` samples one listed outcome with the
    environment's ``np_random`` and reports ``{"prob": p}`` in ``info``. Subclasses override
    :meth:`_render_text`.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, P: dict, initial_state_distrib, render_mode: str | None = None):
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
        initial = np.asarray(initial_state_distrib, dtype=np.float64)
        if initial.shape != (num_states,) or initial.min() < 0 or abs(initial.sum() - 1) > 1e-8:
            raise ValueError(f"initial_state_distrib must be ({num_states},) probabilities summing to 1")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, "
                             f"got {render_mode!r}")
        self.P = P
        self.initial_state_distrib = initial
        self.observation_space = spaces.Discrete(num_states)
        self.action_space = spaces.Discrete(num_actions)
        self.render_mode = render_mode
        self.s = int(np.argmax(initial))
        self.lastaction: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.s = int(self.np_random.choice(len(self.initial_state_distrib), p=self.initial_state_distrib))
        self.lastaction = None
        return self.s, {"prob": float(self.initial_state_distrib[self.s])}

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
