"""The checks of the policy-gradient and actor-critic chapters' exercises: a correct solution
passes, typical mistakes fail with the hint that names them."""

import numpy as np
import pytest

from rlnotes import a2c
from rlnotes.exercises import (CHECKS, ExerciseFailed, check_gae, check_n_step_returns,
                               check_reward_to_go, check_softmax_reinforce)
from rlnotes.returns import discounted_returns, gae


def fails_with(check, solution, hint_part):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution)
    assert hint_part in str(err.value), err.value


def test_checks_are_registered():
    for name in ("check_reward_to_go", "check_softmax_reinforce", "check_gae",
                 "check_n_step_returns"):
        assert name in CHECKS


# ---- reward-to-go
def rtg_ok(rewards, gamma):
    G = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        G[t] = acc
    return G


def test_reward_to_go(capsys):
    assert check_reward_to_go(rtg_ok) is None
    assert "PASSED" in capsys.readouterr().out
    fails_with(check_reward_to_go, lambda r, g: np.cumsum(r[::-1])[::-1], "did not discount")
    fails_with(check_reward_to_go,
               lambda r, g: np.full(len(r), (g ** np.arange(len(r)) * r).sum()), "total return")
    fails_with(check_reward_to_go, lambda r, g: rtg_ok(r, g)[:2], "one number per")
    fails_with(check_reward_to_go, lambda r, g: rtg_ok(r, g) + 1, "backwards")
    fails_with(check_reward_to_go, lambda r, g: discounted_returns(r, g), "rlnotes' own")


# ---- softmax REINFORCE
def reinforce_ok(theta, states, actions, weights):
    pi = np.exp(theta - theta.max(1, keepdims=True))
    pi /= pi.sum(1, keepdims=True)
    g = np.zeros_like(theta)
    for s, a, w in zip(states, actions, weights):
        score = -pi[s].copy()
        score[a] += 1
        g[s] += w * score
    return g


def test_softmax_reinforce():
    check_softmax_reinforce.raw(reinforce_ok)
    fails_with(check_softmax_reinforce, lambda th, s, a, w: -reinforce_ok(th, s, a, w),
               "wrong sign")

    def no_pi(theta, states, actions, weights):
        g = np.zeros_like(theta)
        for s, a, w in zip(states, actions, weights):
            g[s, a] += w
        return g
    fails_with(check_softmax_reinforce, no_pi, "-pi")
    fails_with(check_softmax_reinforce,
               lambda th, s, a, w: reinforce_ok(th, s, a, np.ones_like(w)), "weights")
    fails_with(check_softmax_reinforce, lambda th, s, a, w: reinforce_ok(th, s, a, w) * 2,
               "row s_t")


# ---- GAE
def gae_ok(rewards, values, dones, last_value, gamma, lam):
    T = len(rewards)
    A = np.zeros(T)
    acc = 0.0
    nxt = np.r_[values[1:], last_value]
    for t in range(T - 1, -1, -1):
        delta = rewards[t] + gamma * (1 - dones[t]) * nxt[t] - values[t]
        acc = delta + gamma * lam * (1 - dones[t]) * acc
        A[t] = acc
    return A


def test_gae():
    check_gae.raw(gae_ok)
    fails_with(check_gae, lambda r, V, d, last, g, l: gae_ok(r, V, 0 * d, last, g, l), "done")
    fails_with(check_gae, lambda r, V, d, last, g, l: gae_ok(r, V, d, 0.0, g, l), "last_value")
    fails_with(check_gae, lambda r, V, d, last, g, l: gae_ok(r, V, d, last, g, 0.0), "lambda = 0")

    def no_gamma(r, V, d, last, g, l):
        A = gae_ok(r, V, d, last, g, 0.0)
        out = np.zeros(len(r))
        acc = 0.0
        for t in range(len(r) - 1, -1, -1):
            acc = A[t] + l * (1 - d[t]) * acc
            out[t] = acc
        return out
    fails_with(check_gae, no_gamma, "left out gamma")
    fails_with(check_gae, lambda r, V, d, last, g, l: gae(r, V, d, last, g, l)[0],
               "rlnotes' own")


# ---- n-step returns
def nstep_ok(rewards, values, dones, last_value, gamma, n):
    T = len(rewards)
    nxt = np.r_[values[1:], last_value]
    G = np.zeros(T)
    for t in range(T):
        acc, disc = 0.0, 1.0
        for i in range(t, min(t + n, T)):
            acc += disc * rewards[i]
            disc *= gamma
            if dones[i]:
                break
            if i == t + n - 1 or i == T - 1:
                acc += disc * nxt[i]
        G[t] = acc
    return G


def test_n_step_returns():
    check_n_step_returns.raw(nstep_ok)
    fails_with(check_n_step_returns, lambda r, V, d, last, g, n: nstep_ok(r, V, 0 * d, last, g, n),
               "episode end")
    fails_with(check_n_step_returns, lambda r, V, d, last, g, n: nstep_ok(r, V, d, 0.0, g, n),
               "last_value")
    fails_with(check_n_step_returns, lambda r, V, d, last, g, n: nstep_ok(r, V, d, last, g, 1),
               "m = n")
    fails_with(check_n_step_returns,
               lambda r, V, d, last, g, n: a2c.n_step_returns(r, V, d, last, g, n), "rlnotes' own")


def test_n_step_returns_identities():
    rng = np.random.default_rng(0)
    r, V = rng.normal(size=(9, 2)), rng.normal(size=(9, 2))
    d = (rng.random((9, 2)) < 0.2).astype(float)
    last = rng.normal(size=2)
    one = a2c.n_step_returns(r, V, d, last, 0.9, 1)
    np.testing.assert_allclose(one, r + 0.9 * (1 - d) * np.r_[V[1:], last[None]])
    np.testing.assert_allclose(a2c.n_step_returns(r, V, d, last, 0.9, 50),
                               gae(r, V, d, last, 0.9, 1.0)[1])
    for kwargs, name in (({"n": 0}, "n"), ({"gamma": 2.0}, "gamma")):
        args = dict(gamma=0.9, n=2) | kwargs
        with pytest.raises(ValueError, match=name):
            a2c.n_step_returns(r, V, d, last, **args)
    with pytest.raises(ValueError, match="dones"):
        a2c.n_step_returns(r, V, d[:3], last, 0.9, 2)
