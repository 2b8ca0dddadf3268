"""Checks of the exercises of the chapter "Actor-critic and generalised advantage estimation".

``check_gae`` compares the reader's GAE with ``rlnotes.returns.gae`` on random rollouts with
episode ends and recognises the usual mistakes (no done mask, lambda without gamma, ignoring
``last_value``, the lambda = 1 or lambda = 0 special case). ``check_n_step_returns`` compares the
reader's n-step returns with ``rlnotes.a2c.n_step_returns``.
"""

from __future__ import annotations

import numpy as np

from rlnotes import a2c
from rlnotes.exercises.core import ExerciseFailed, check, expect_own_work, format_mismatch
from rlnotes.exercises.pg import _numpy
from rlnotes.returns import gae

__all__ = ["check_gae", "check_n_step_returns"]


def _rollout(seed: int, T: int = 12):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=T)
    V = rng.normal(size=T)
    d = (rng.random(T) < 0.2).astype(np.float64)
    return r, V, d, float(rng.normal())


GAE_HINTS = [
    ("You ignored the done flags: no bootstrap after d_t = 1 and no advantage flows back across "
     "it (multiply by 1 - d_t in delta and in the recursion).",
     lambda r, V, d, last, g, l: gae(r, V, None, last, g, l)[0]),
    ("The recursion is A_t = delta_t + gamma * lambda * (1 - d_t) A_{t+1}: you left out gamma.",
     lambda r, V, d, last, g, l: _no_gamma(r, V, d, last, g, l)),
    ("You bootstrapped the last step from 0: V(s_T) is last_value.",
     lambda r, V, d, last, g, l: gae(r, V, d, 0.0, g, l)[0]),
    ("These are the one-step TD errors (lambda = 0) whatever lambda is.",
     lambda r, V, d, last, g, l: gae(r, V, d, last, g, 0.0)[0]),
]


def _no_gamma(r, V, d, last, g, l):
    nxt = np.r_[V[1:], last]
    delta = r + g * (1 - d) * nxt - V
    A = np.zeros_like(r)
    acc = 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = delta[t] + l * (1 - d[t]) * acc
        A[t] = acc
    return A


@check
def check_gae(my_gae):
    """``my_gae(rewards, values, dones, last_value, gamma, lam)`` returns the (T,) GAE
    advantages of one environment's rollout: numpy (T,) rewards, values, dones (0/1), a float
    last_value = V(s_T)."""
    expect_own_work(my_gae, gae)
    for seed, gamma, lam in ((0, 0.99, 0.95), (1, 0.9, 0.5), (2, 0.8, 1.0), (3, 0.95, 0.0)):
        r, V, d, last = _rollout(seed)
        got = _numpy(my_gae(r.copy(), V.copy(), d.copy(), last, gamma, lam),
                     "my_gae's result", r.shape)
        expected = gae(r, V, d, last, gamma, lam)[0]
        if np.allclose(got, expected, atol=1e-8):
            continue
        for hint, wrong in GAE_HINTS:
            if np.allclose(got, wrong(r, V, d, last, gamma, lam), atol=1e-8):
                raise ExerciseFailed(f"The advantages differ (gamma = {gamma}, lam = {lam}).",
                                     hint)
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(f"A_{worst}: {format_mismatch(got[worst], expected[worst])} "
                             f"(gamma = {gamma}, lam = {lam}).",
                             "delta_t = r_{t+1} + gamma (1 - d_t) V(s_{t+1}) - V(s_t); "
                             "A_t = delta_t + gamma lam (1 - d_t) A_{t+1}, from the end back.")


@check
def check_n_step_returns(my_n_step_returns):
    """``my_n_step_returns(rewards, values, dones, last_value, gamma, n)`` returns the (T,)
    n-step returns of one environment's rollout (numpy (T,) arrays, a float last_value)."""
    expect_own_work(my_n_step_returns, a2c.n_step_returns, gae)
    for seed, gamma, n in ((0, 0.99, 1), (1, 0.9, 3), (2, 0.8, 5), (3, 0.95, 20)):
        r, V, d, last = _rollout(seed)
        got = _numpy(my_n_step_returns(r.copy(), V.copy(), d.copy(), last, gamma, n),
                     "my_n_step_returns' result", r.shape)
        expected = a2c.n_step_returns(r, V, d, last, gamma, n)
        if np.allclose(got, expected, atol=1e-8):
            continue
        if np.allclose(got, a2c.n_step_returns(r, V, None, last, gamma, n), atol=1e-8):
            raise ExerciseFailed(f"The returns differ (n = {n}).",
                                 "Stop summing at an episode end (d = 1) and do not bootstrap "
                                 "there.")
        if np.allclose(got, a2c.n_step_returns(r, V, d, 0.0, gamma, n), atol=1e-8):
            raise ExerciseFailed(f"The returns differ (n = {n}).",
                                 "Near the end of the rollout, bootstrap from last_value = V(s_T).")
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(f"G_{worst}: {format_mismatch(got[worst], expected[worst])} "
                             f"(n = {n}, gamma = {gamma}).",
                             "G_t = r_{t+1} + ... + gamma^(m-1) r_{t+m} + gamma^m V(s_{t+m}), "
                             "m = n unless the episode or the rollout ends first.")
