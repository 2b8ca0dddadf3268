"""n-step returns for replay: turn each environment's stream of one-step transitions into
n-step transitions (s_t, a_t, G_{t:t+n}, s_{t+n}, terminated), with the n-step return
G_{t:t+n} = r_{t+1} + gamma r_{t+2} + ... + gamma^{n-1} r_{t+n} and a target that bootstraps
with gamma^n, y = G_{t:t+n} + gamma^n (1 - terminated) Q(s_{t+n}, a*; w^-).

Defined in: Deep Q-networks, section Rainbow: n-step returns and prioritized replay.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from rlnotes._validate import require_gamma, require_int

__all__ = ["NStepWindow"]


class NStepWindow:
    """A sliding window of the last n transitions of each of ``num_envs`` environments.

    :meth:`push` takes one vector step's real transitions (the rows of ``batch`` belong to the
    environments ``env_ids``) and returns the n-step transitions that are complete:

    - a window of n steps gives (s_t, a_t, G_{t:t+n}, s_{t+n}, terminated_{t+n});
    - when an episode terminates, every window still open in it ends there too, with
      ``terminated = 1`` and the rewards up to the end (nothing to bootstrap from);
    - when a time limit truncates an episode, the windows shorter than n that are still open
      are dropped (n - 1 transitions per truncated episode), so that every stored transition
      that bootstraps does so with exactly gamma^n. The full window ending at the cut is kept:
      it bootstraps from the truncated state, as a time limit requires.

    With n = 1 it returns its input's transitions unchanged.

    Defined in: Deep Q-networks, section Rainbow: n-step returns and prioritized replay.
    """

    def __init__(self, num_envs: int, n: int, gamma: float):
        self.num_envs = require_int(num_envs, "num_envs", minimum=1)
        self.n = require_int(n, "n", minimum=1)
        self.gamma = require_gamma(gamma)
        self.windows = [deque() for _ in range(self.num_envs)]  # (s, a, r) per env

    def push(self, batch: dict, env_ids) -> dict:
        """``batch``: dict of arrays ``obs, actions, rewards, next_obs, terminated, truncated``
        with K rows, those of the environments ``env_ids`` (K distinct ints); returns a dict
        ``obs, actions, rewards, next_obs, terminated`` of the completed n-step transitions."""
        env_ids = np.asarray(env_ids)
        keys = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")
        if not isinstance(batch, dict) or any(k not in batch for k in keys):
            raise ValueError(f"batch must be a dict with keys {keys}")
        if env_ids.ndim != 1 or len(env_ids) != len(batch["obs"]) or (
                len(env_ids) and (env_ids.min() < 0 or env_ids.max() >= self.num_envs)) \
                or len(set(env_ids.tolist())) != len(env_ids):
            raise ValueError(f"env_ids must be {len(batch['obs'])} distinct ints in "
                             f"[0, {self.num_envs}), one per row of batch, got {env_ids!r}")
        out = {k: [] for k in keys[:5]}

        def emit(window, next_obs, terminated):
            s, a, _ = window[0]
            G = sum(self.gamma ** k * r for k, (_, _, r) in enumerate(window))
            for k, v in zip(keys[:5], (s, a, G, next_obs, terminated)):
                out[k].append(v)

        for j, i in enumerate(env_ids):
            window = self.windows[i]
            window.append((batch["obs"][j], batch["actions"][j], float(batch["rewards"][j])))
            term, trunc = bool(batch["terminated"][j]), bool(batch["truncated"][j])
            if len(window) == self.n:
                emit(window, batch["next_obs"][j], term)
                window.popleft()
            if term:  # the remaining, shorter windows end at the terminal state
                while window:
                    emit(window, batch["next_obs"][j], True)
                    window.popleft()
            elif trunc:
                window.clear()
        if not out["obs"]:
            d = np.asarray(batch["obs"]).shape[1:]
            return {"obs": np.zeros((0, *d), np.float32),
                    "actions": np.zeros((0,), np.asarray(batch["actions"]).dtype),
                    "rewards": np.zeros(0, np.float32), "next_obs": np.zeros((0, *d), np.float32),
                    "terminated": np.zeros(0, bool)}
        return {"obs": np.stack(out["obs"]), "actions": np.stack(out["actions"]),
                "rewards": np.asarray(out["rewards"], dtype=np.float32),
                "next_obs": np.stack(out["next_obs"]),
                "terminated": np.asarray(out["terminated"], dtype=bool)}
