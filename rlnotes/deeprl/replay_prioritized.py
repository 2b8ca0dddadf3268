"""Prioritized experience replay (Schaul et al. 2016), proportional variant: transition i is
drawn with probability P(i) = p_i^e_pri / sum_k p_k^e_pri, where its priority p_i is its last
absolute TD error |delta_i| (plus a small constant, so that no transition is never drawn), and
its update is weighted by the importance weight (|D| P(i))^(-e_IS), |D| the number of stored
transitions, divided by the largest such weight in the buffer, to undo the bias of the
non-uniform draw (e_pri, e_IS: alpha and beta in the paper).

Defined in: Deep Q-networks, section Rainbow: n-step returns and prioritized replay.
"""

from __future__ import annotations

import torch

from rlnotes._validate import require_in_range, require_int
from rlnotes.deeprl.buffer import ReplayBuffer

__all__ = ["PrioritizedReplayBuffer"]


class PrioritizedReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` that samples in proportion to priorities.

    ``priority_exponent`` is e_pri (0: uniform; Schaul et al. use 0.6 for this variant). A new
    transition gets the largest priority seen so far, so that it is replayed at least once
    soon. :meth:`sample_prioritized` returns the indices drawn and their importance weights;
    :meth:`update_priorities` sets the priorities of those indices to the absolute values of their new TD errors.
    Sampling is one ``torch.multinomial`` over the stored priorities, O(capacity) per call
    (the paper's sum tree makes it O(log capacity) per sample; for the buffers of this book
    one vector operation is faster).

    Defined in: Deep Q-networks, section Rainbow: n-step returns and prioritized replay.
    """

    def __init__(self, capacity: int, obs_shape, action_shape=(), *, discrete: bool = True,
                 device=None, priority_exponent: float = 0.6, min_priority: float = 1e-6):
        super().__init__(capacity, obs_shape, action_shape, discrete=discrete, device=device)
        self.priority_exponent = require_in_range(priority_exponent, "priority_exponent",
                                                  0.0, 1.0)
        self.min_priority = require_in_range(min_priority, "min_priority", 0.0, 1.0,
                                             low_open=True)
        self.priorities = torch.zeros(self.capacity, dtype=torch.float32, device=self.device)
        self.max_priority = 1.0

    def add(self, obs, actions, rewards, next_obs, terminated) -> None:
        """Store B transitions, each with the largest priority so far."""
        pos = self.pos
        super().add(obs, actions, rewards, next_obs, terminated)
        B = len(obs)  # super().add checked that every field has B rows
        if B:
            idx = (pos + torch.arange(B, device=self.device)) % self.capacity
            self.priorities[idx] = self.max_priority

    def sample_prioritized(self, batch_size: int, generator: torch.Generator | None = None, *,
                           importance_exponent: float = 0.4):
        """Draw ``batch_size`` indices with probability P(i) (with replacement); return
        ``(idx, weights, (obs, actions, rewards, next_obs, terminated))`` with ``weights``
        the (batch_size,) importance weights (|D| P(i))^(-e_IS) / max_k (|D| P(k))^(-e_IS),
        e_IS = ``importance_exponent`` (1 undoes the bias fully; 0 ignores it)."""
        batch_size = require_int(batch_size, "batch_size", minimum=1)
        importance_exponent = require_in_range(importance_exponent, "importance_exponent",
                                               0.0, 1.0)
        if self.size == 0:
            raise ValueError("the buffer is empty: add transitions before sampling")
        p = self.priorities[:self.size] ** self.priority_exponent
        probs = p / p.sum()
        idx = torch.multinomial(probs, batch_size, replacement=True, generator=generator)
        # the largest weight belongs to the least likely transition
        weights = (probs[idx] / probs.min()) ** (-importance_exponent)
        rows = self.data[idx]
        return idx, weights, tuple(self._view(rows, name) for name in
                                   ("obs", "actions", "rewards", "next_obs", "terminated"))

    def update_priorities(self, idx: torch.Tensor, td_errors: torch.Tensor) -> None:
        """Set the priorities of the transitions ``idx`` to ``|td_errors| + min_priority``."""
        if not (torch.is_tensor(idx) and torch.is_tensor(td_errors)) or idx.ndim != 1 \
                or td_errors.shape != idx.shape:
            raise ValueError("idx and td_errors must be tensors of the same shape (B,), got "
                             f"{getattr(idx, 'shape', idx)!r} and "
                             f"{getattr(td_errors, 'shape', td_errors)!r}")
        if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= self.size):
            raise ValueError(f"idx must index stored transitions, 0 <= idx < {self.size}")
        p = td_errors.detach().abs().to(self.priorities) + self.min_priority
        if not torch.isfinite(p).all():
            raise ValueError("td_errors must be finite")
        self.priorities[idx] = p
        self.max_priority = max(self.max_priority, float(p.max())) if len(p) else \
            self.max_priority
