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

    The arrays are allocated once, as torch tensors on ``device``; when the buffer is full the
    oldest transitions are overwritten (a ring). Only *real* transitions go in: the step a
    vector env spends resetting an episode is not one (see
    :func:`rlnotes.deeprl.envs.transitions`), and ``terminated`` is stored, not ``truncated``,
    because a time limit does not end the task: its target still bootstraps from V(s').

    ===============  ======================  =========================================
    stored           shape                   dtype
    ===============  ======================  =========================================
    ``obs``          (capacity, *obs_shape)  float32
    ``actions``      (capacity, *act_shape)  int64 (Discrete) or float32 (Box)
    ``rewards``      (capacity,)             float32
    ``next_obs``     (capacity, *obs_shape)  float32
    ``terminated``   (capacity,)             float32 (1.0 where s' is terminal)
    ===============  ======================  =========================================

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
        if not obs_shape:
            raise ValueError("obs_shape must have at least one dimension, got ()")
        self.device = torch.device("cpu") if device is None else torch.device(device)
        f32, kw = torch.float32, dict(device=self.device)
        self.obs = torch.zeros((self.capacity, *obs_shape), dtype=f32, **kw)
        self.next_obs = torch.zeros((self.capacity, *obs_shape), dtype=f32, **kw)
        self.actions = torch.zeros((self.capacity, *action_shape),
                                   dtype=torch.int64 if discrete else f32, **kw)
        self.rewards = torch.zeros(self.capacity, dtype=f32, **kw)
        self.terminated = torch.zeros(self.capacity, dtype=f32, **kw)
        self.pos = 0      # where the next transition goes
        self.size = 0     # how many are stored

    def __len__(self) -> int:
        return self.size

    def add(self, obs, actions, rewards, next_obs, terminated) -> None:
        """Store a batch of B transitions (numpy arrays or tensors; the first axis is B)."""
        batch = [torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x)
                 for x in (obs, actions, rewards, next_obs, terminated)]
        obs, actions, rewards, next_obs, terminated = batch
        B = obs.shape[0] if obs.ndim else 0
        if obs.shape[1:] != self.obs.shape[1:]:
            raise ValueError(f"obs must have shape (B, {', '.join(map(str, self.obs.shape[1:]))})"
                             f", got {tuple(obs.shape)}")
        for x, name, store in ((actions, "actions", self.actions), (rewards, "rewards", self.rewards),
                               (next_obs, "next_obs", self.next_obs),
                               (terminated, "terminated", self.terminated)):
            if tuple(x.shape) != (B, *store.shape[1:]):
                raise ValueError(f"{name} must have shape {(B, *store.shape[1:])}, got "
                                 f"{tuple(x.shape)}")
        if B > self.capacity:
            raise ValueError(f"obs holds {B} transitions, more than capacity={self.capacity}")
        # At most two contiguous slices (the second when the ring wraps around).
        first = min(B, self.capacity - self.pos)
        for store, x in ((self.obs, obs), (self.actions, actions), (self.rewards, rewards),
                         (self.next_obs, next_obs), (self.terminated, terminated)):
            x = x.to(device=self.device, dtype=store.dtype)
            store[self.pos:self.pos + first] = x[:first]
            if first < B:
                store[:B - first] = x[first:]
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
        return (self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx],
                self.terminated[idx])
