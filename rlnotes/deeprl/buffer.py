"""Experience replay: a ring buffer of transitions, preallocated, sampled uniformly.

Defined in: Deep Q-networks, section Experience replay.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_int

__all__ = ["ReplayBuffer"]


class ReplayBuffer:
    """A fixed-size store of transitions (s, a, r, s', terminated) with uniform sampling.

    Everything is allocated once, as one float32 tensor ``data`` on ``device`` whose rows are
    transitions ``[s | a | r | s' | terminated]``, so that a minibatch is one indexing
    operation (fewer, larger tensor operations are what make a small-network trainer fast).
    When the buffer is full the oldest transitions are overwritten (a ring). Only *real*
    transitions go in: the step a vector env spends resetting an episode is not one (see
    :func:`rlnotes.deeprl.envs.step_transitions`), and ``terminated`` is stored, not
    ``truncated``, because a time limit does not end the task: the target still bootstraps
    from s'.

    ===============  ======================  ==============================================
    view of data     shape                   meaning
    ===============  ======================  ==============================================
    ``obs``          (capacity, obs_dim)     s
    ``actions``      (capacity, *act_shape)  a (sampled as int64 for Discrete, else float32)
    ``rewards``      (capacity,)             r
    ``next_obs``     (capacity, obs_dim)     s'
    ``terminated``   (capacity,)             1.0 where s' is terminal
    ===============  ======================  ==============================================

    Defined in: Deep Q-networks, section Experience replay.
    """

    def __init__(self, capacity: int, obs_shape, action_shape=(), *, discrete: bool = True,
                 device=None):
        self.capacity = require_int(capacity, "capacity", minimum=1)
        try:
            obs_shape = tuple(require_int(n, "obs_shape", minimum=1) for n in obs_shape)
            action_shape = tuple(require_int(n, "action_shape", minimum=1) for n in action_shape)
        except TypeError:
            raise ValueError(f"obs_shape and action_shape must be tuples of ints, got "
                             f"{obs_shape!r}, {action_shape!r}") from None
        if len(obs_shape) != 1:
            raise ValueError(f"obs_shape must be (obs_dim,), got {obs_shape}")
        if discrete and action_shape:
            raise ValueError(f"action_shape must be () for discrete actions, got {action_shape}")
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.discrete = bool(discrete)
        d, k = obs_shape[0], int(np.prod(action_shape, dtype=np.int64))
        self.data = torch.zeros((self.capacity, 2 * d + k + 2), dtype=torch.float32,
                                device=self.device)
        self._cols = {"obs": slice(0, d), "actions": slice(d, d + k), "rewards": d + k,
                      "next_obs": slice(d + k + 1, 2 * d + k + 1), "terminated": 2 * d + k + 1}
        self._shapes = {"obs": obs_shape, "actions": action_shape, "rewards": (),
                        "next_obs": obs_shape, "terminated": ()}
        self.pos = 0      # where the next transition goes
        self.size = 0     # how many are stored

    def _view(self, rows: torch.Tensor, name: str) -> torch.Tensor:
        x = rows[:, self._cols[name]]
        if name == "actions":
            x = x.reshape(rows.shape[0], *self._shapes["actions"])
            if self.discrete:
                x = x.long()
        return x

    obs = property(lambda self: self._view(self.data, "obs"))
    actions = property(lambda self: self._view(self.data, "actions"))
    rewards = property(lambda self: self._view(self.data, "rewards"))
    next_obs = property(lambda self: self._view(self.data, "next_obs"))
    terminated = property(lambda self: self._view(self.data, "terminated"))

    def __len__(self) -> int:
        return self.size

    def add(self, obs, actions, rewards, next_obs, terminated) -> None:
        """Store a batch of B transitions (numpy arrays or tensors; the first axis is B)."""
        fields = {}
        for name, x in (("obs", obs), ("actions", actions), ("rewards", rewards),
                        ("next_obs", next_obs), ("terminated", terminated)):
            x = torch.as_tensor(x if torch.is_tensor(x) else np.asarray(x))
            fields[name] = x
        B = fields["obs"].shape[0] if fields["obs"].ndim else -1
        for name, x in fields.items():
            want = (B, *self._shapes[name])
            if B < 0 or tuple(x.shape) != want:
                raise ValueError(f"{name} must have shape {want} (B transitions), got "
                                 f"{tuple(x.shape)}")
        if B > self.capacity:
            raise ValueError(f"obs holds {B} transitions, more than capacity={self.capacity}")
        if B == 0:  # e.g. every env was on its autoreset step
            return
        # The columns of data are obs, actions, rewards, next_obs, terminated, in this order.
        rows = torch.cat([x.reshape(B, -1).float() for x in fields.values()], dim=1)
        rows = rows.to(self.device)
        # At most two contiguous slices (the second when the ring wraps around).
        first = min(B, self.capacity - self.pos)
        self.data[self.pos:self.pos + first] = rows[:first]
        if first < B:
            self.data[:B - first] = rows[first:]
        self.pos = (self.pos + B) % self.capacity
        self.size = min(self.size + B, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None):
        """A uniform sample (with replacement) of ``batch_size`` stored transitions:
        ``(obs, actions, rewards, next_obs, terminated)``, tensors on the buffer's device.
        ``generator`` (on the same device) makes the draw reproducible."""
        batch_size = require_int(batch_size, "batch_size", minimum=1)
        if self.size == 0:
            raise ValueError("the buffer is empty: add transitions before sampling")
        idx = torch.randint(self.size, (batch_size,), generator=generator, device=self.device)
        rows = self.data[idx]  # one gather for the whole minibatch
        return tuple(self._view(rows, name) for name in
                     ("obs", "actions", "rewards", "next_obs", "terminated"))
