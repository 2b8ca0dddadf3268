"""Checks of the exercises of the chapter "Actor-critic and generalised advantage estimation".

``check_n_step_returns`` compares the reader's n-step returns with ``rlnotes.a2c.n_step_returns``.
``check_vtrace`` compares the reader's V-trace targets (off-policy lambda-returns with clipped
importance ratios) with a reference solved by ``rlnotes.returns.reverse_scan``, which reduces to
``rlnotes.returns.gae``'s lambda-returns when every ratio is 1, and recognises the usual mistakes
(ratios ignored or not clipped, the ratio missing from the trace or from the TD errors, no done
mask, ignoring ``last_value``, advantages instead of targets).
"""

from __future__ import annotations

import numpy as np

from rlnotes import a2c
from rlnotes.exercises.core import (ExerciseFailed, call_reader, check, expect_own_work,
                                   format_mismatch)
from rlnotes.exercises.pg import _numpy
from rlnotes.returns import discounted_returns, gae, reverse_scan

__all__ = ["check_n_step_returns", "check_vtrace", "vtrace_reference"]


def _rollout(seed: int, T: int = 12):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=T)
    V = rng.normal(size=T)
    d = (rng.random(T) < 0.2).astype(np.float64)
    return r, V, d, float(rng.normal())


def vtrace_reference(rewards, values, dones, last_value, gamma, lam, ratios):
    """V-trace targets (Espeholt et al. 2018) with clipping thresholds 1:

        rho_t = min(1, ratios_t),   v_t - V(s_t) = rho_t delta_t + gamma lam rho_t (1 - d_t)
                                                   (v_{t+1} - V(s_{t+1})),

    solved with :func:`rlnotes.returns.reverse_scan`; delta_t as in :func:`rlnotes.returns.gae`.

    Defined in: Actor-critic and generalised advantage estimation, section Exercises.
    """
    r, V, d, ratios = (np.asarray(x, dtype=np.float64) for x in (rewards, values, dones, ratios))
    rho = np.minimum(1.0, ratios)
    next_V = np.r_[V[1:], float(last_value)]
    delta = r + gamma * (1 - d) * next_V - V
    return V + reverse_scan(rho * delta, gamma * lam * rho * (1 - d))


def _vtrace_wrong(r, V, d, last, gamma, lam, ratios):
    """The usual mistakes, each as (hint, targets)."""
    next_V = np.r_[V[1:], last]
    delta = r + gamma * (1 - d) * next_V - V
    rho = np.minimum(1.0, ratios)
    return [
        ("These are GAE's lambda-returns: the ratios pi/b are ignored.",
         gae(r, V, d, last, gamma, lam)[1]),
        ("The ratios must be clipped at 1: rho_t = min(1, pi(a_t|s_t) / b(a_t|s_t)).",
         _unclipped(r, V, d, last, gamma, lam, ratios)),
        ("The trace coefficients gamma lam rho_i carry the clipped ratio too, not only the TD "
         "errors: a step taken with an unlikely action cuts the trace.",
         V + reverse_scan(rho * delta, gamma * lam * (1 - d))),
        ("Each TD error is weighted by its own clipped ratio rho_k, not only the trace.",
         V + reverse_scan(delta, gamma * lam * rho * (1 - d))),
        ("Return the targets v_t, not v_t - V(s_t).",
         vtrace_reference(r, V, d, last, gamma, lam, ratios) - V),
        ("You ignored the done flags: no bootstrap after d_t = 1 and no trace across it.",
         vtrace_reference(r, V, 0 * d, last, gamma, lam, ratios)),
        ("You bootstrapped the last step from 0: V(s_T) is last_value.",
         vtrace_reference(r, V, d, 0.0, gamma, lam, ratios)),
        ("The trace factor is gamma * lam * rho_i: you left out gamma.",
         V + reverse_scan(rho * delta, lam * rho * (1 - d))),
        ("The trace factor is gamma * lam * rho_i: you left out lam.",
         V + reverse_scan(rho * delta, gamma * rho * (1 - d))),
    ]


def _unclipped(r, V, d, last, gamma, lam, ratios):
    next_V = np.r_[V[1:], last]
    delta = r + gamma * (1 - d) * next_V - V
    return V + reverse_scan(ratios * delta, gamma * lam * ratios * (1 - d))


@check
def check_vtrace(my_vtrace):
    """``my_vtrace(rewards, values, dones, last_value, gamma, lam, ratios)`` returns the (T,)
    V-trace targets v_t of one environment's rollout: numpy (T,) rewards, values, dones (0/1)
    and ratios pi(a_t|s_t) / b(a_t|s_t) > 0, a float last_value = V(s_T)."""
    expect_own_work(my_vtrace, gae, reverse_scan, discounted_returns, vtrace_reference)
    for seed, gamma, lam in ((0, 0.99, 0.95), (1, 0.9, 0.5), (2, 0.8, 1.0), (3, 0.95, 0.0)):
        r, V, d, last = _rollout(seed)
        ratios = np.exp(np.random.default_rng(seed + 100).normal(scale=0.7, size=len(r)))
        result = call_reader(my_vtrace, "my_vtrace", r.copy(), V.copy(), d.copy(), last, gamma,
                             lam, ratios.copy())
        got = _numpy(result, "my_vtrace's result", r.shape)
        expected = vtrace_reference(r, V, d, last, gamma, lam, ratios)
        if np.allclose(got, expected, atol=1e-8):
            continue
        for hint, wrong in _vtrace_wrong(r, V, d, last, gamma, lam, ratios):
            if np.allclose(got, wrong, atol=1e-8):
                raise ExerciseFailed(f"The targets differ (gamma = {gamma}, lam = {lam}).", hint)
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(f"v_{worst}: {format_mismatch(got[worst], expected[worst])} "
                             f"(gamma = {gamma}, lam = {lam}).",
                             "From the end back: v_t - V(s_t) = rho_t delta_t "
                             "+ gamma lam rho_t (1 - d_t) (v_{t+1} - V(s_{t+1})), "
                             "rho_t = min(1, ratio_t).")


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
