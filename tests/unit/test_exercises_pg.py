"""The checks of the policy-gradient and actor-critic chapters' exercises: a correct solution
passes, typical mistakes fail with the hint that names them."""

import numpy as np
import pytest

from rlnotes import a2c
from rlnotes import pg_exact, reinforce
from rlnotes.exercises import (CHECKS, ExerciseFailed, check_linear_softmax_reinforce,
                               check_n_step_returns, check_reward_to_go, check_vtrace)
from rlnotes.exercises.a2c import vtrace_reference
from rlnotes.exercises.pg import linear_softmax_reinforce_reference
from rlnotes.returns import discounted_returns, gae


def fails_with(check, solution, hint_part):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution)
    assert hint_part in str(err.value), err.value


def test_checks_are_registered():
    for name in ("check_reward_to_go", "check_linear_softmax_reinforce", "check_vtrace",
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
    fails_with(check_reward_to_go,
               lambda r, g: reinforce.episode_psi(r[:, None], np.ones((len(r), 1), bool), g)[:, 0],
               "rlnotes' own")


# ---- linear softmax REINFORCE
def linear_ok(theta, features, states, actions, psi):
    logits = features @ theta
    pi = np.exp(logits - logits.max(1, keepdims=True))
    pi /= pi.sum(1, keepdims=True)
    g = np.zeros_like(theta)
    for s, a, w in zip(states, actions, psi):
        g += w * (features[s, a] - pi[s] @ features[s])
    return g


def test_linear_softmax_reinforce_reference_is_the_tabular_score_for_one_hot_features():
    rng = np.random.default_rng(0)
    S, A, T = 3, 4, 10
    theta = rng.normal(size=S * A)
    features = np.eye(S * A).reshape(S, A, S * A)     # phi(s, a) = e_{(s, a)}: tabular softmax
    states, actions, psi = rng.integers(S, size=T), rng.integers(A, size=T), rng.normal(size=T)
    pi = pg_exact.softmax_policy(theta.reshape(S, A))
    tabular = np.zeros((S, A))
    for s, a, w in zip(states, actions, psi):
        tabular[s] += w * (np.eye(A)[a] - pi[s])
    got = linear_softmax_reinforce_reference(theta, features, states, actions, psi)
    np.testing.assert_allclose(got, tabular.reshape(-1), atol=1e-12)
    np.testing.assert_allclose(linear_ok(theta, features, states, actions, psi), got, atol=1e-12)


def test_linear_softmax_reinforce(capsys):
    assert check_linear_softmax_reinforce(linear_ok) is None
    assert "PASSED" in capsys.readouterr().out
    fails_with(check_linear_softmax_reinforce, lambda th, f, s, a, w: -linear_ok(th, f, s, a, w),
               "wrong sign")

    def no_mean(theta, features, states, actions, psi):
        return sum(w * features[s, a] for s, a, w in zip(states, actions, psi))
    fails_with(check_linear_softmax_reinforce, no_mean, "expected-feature")

    def uniform_mean(theta, features, states, actions, psi):
        return sum(w * (features[s, a] - features[s].mean(0))
                   for s, a, w in zip(states, actions, psi))
    fails_with(check_linear_softmax_reinforce, uniform_mean, "weighted by the policy")
    fails_with(check_linear_softmax_reinforce,
               lambda th, f, s, a, w: linear_ok(th, f, s, a, np.ones_like(w)), "Psi_t are missing")
    fails_with(check_linear_softmax_reinforce,
               lambda th, f, s, a, w: linear_ok(th, f, s, a, w) * 2, "off by")
    fails_with(check_linear_softmax_reinforce,
               lambda th, f, s, a, w: np.zeros((f.shape[0], f.shape[1])), "shape")
    fails_with(check_linear_softmax_reinforce,
               lambda th, f, s, a, w: linear_softmax_reinforce_reference(th, f, s, a, w),
               "rlnotes' own")


# ---- V-trace
def vtrace_ok(rewards, values, dones, last_value, gamma, lam, ratios):
    T = len(rewards)
    rho = np.minimum(1.0, ratios)
    nxt = np.r_[values[1:], last_value]
    v = np.zeros(T)
    acc = 0.0
    for t in range(T - 1, -1, -1):
        delta = rewards[t] + gamma * (1 - dones[t]) * nxt[t] - values[t]
        acc = rho[t] * delta + gamma * lam * rho[t] * (1 - dones[t]) * acc
        v[t] = values[t] + acc
    return v


def test_vtrace_reference_identities():
    rng = np.random.default_rng(0)
    r, V = rng.normal(size=15), rng.normal(size=15)
    d = (rng.random(15) < 0.2).astype(float)
    ratios = np.exp(rng.normal(size=15))
    # every ratio >= 1 (clipped to 1): on-policy, GAE's lambda-returns
    for lam in (0.0, 0.7, 1.0):
        np.testing.assert_allclose(vtrace_reference(r, V, d, 0.3, 0.9, lam, 1 + ratios),
                                   gae(r, V, d, 0.3, 0.9, lam)[1], atol=1e-12)
    np.testing.assert_allclose(vtrace_reference(r, V, d, 0.3, 0.9, 0.8, ratios),
                               vtrace_ok(r, V, d, 0.3, 0.9, 0.8, ratios), atol=1e-12)
    # the forward sum of the exercise's statement
    lam, gamma = 0.8, 0.9
    rho, nxt = np.minimum(1, ratios), np.r_[V[1:], 0.3]
    delta = r + gamma * (1 - d) * nxt - V
    trace = lambda t, k: np.prod([gamma * lam * rho[i] * (1 - d[i]) for i in range(t, k)])
    forward = np.array([V[t] + sum(trace(t, k) * rho[k] * delta[k] for k in range(t, 15))
                        for t in range(15)])
    np.testing.assert_allclose(vtrace_reference(r, V, d, 0.3, gamma, lam, ratios), forward,
                               atol=1e-12)


def test_vtrace(capsys):
    assert check_vtrace(vtrace_ok) is None
    assert "PASSED" in capsys.readouterr().out
    fails_with(check_vtrace, lambda r, V, d, last, g, l, q: gae(r, V, d, last, g, l)[1],
               "rlnotes' own")
    fails_with(check_vtrace,
               lambda r, V, d, last, g, l, q: vtrace_ok(r, V, d, last, g, l, np.ones_like(q)),
               "ignored")
    fails_with(check_vtrace, lambda r, V, d, last, g, l, q: vtrace_ok(r, V, d, last, g, l, q)
               - V, "not v_t - V(s_t)")
    fails_with(check_vtrace, lambda r, V, d, last, g, l, q: vtrace_ok(r, V, 0 * d, last, g, l, q),
               "done flags")
    fails_with(check_vtrace, lambda r, V, d, last, g, l, q: vtrace_ok(r, V, d, 0.0, g, l, q),
               "last_value")

    fails_with(check_vtrace, _unclipped_ok, "clipped at 1")

    def trace_without_ratio(r, V, d, last, g, l, q):  # rho on delta only
        rho = np.minimum(1.0, q)
        nxt = np.r_[V[1:], last]
        v, acc = np.zeros(len(r)), 0.0
        for t in range(len(r) - 1, -1, -1):
            acc = rho[t] * (r[t] + g * (1 - d[t]) * nxt[t] - V[t]) + g * l * (1 - d[t]) * acc
            v[t] = V[t] + acc
        return v
    fails_with(check_vtrace, trace_without_ratio, "cuts the trace")
    fails_with(check_vtrace,
               lambda r, V, d, last, g, l, q: vtrace_ok(r, V, d, last, g, l, q) + 0.1, "off by")


def _unclipped_ok(r, V, d, last, g, l, q):
    nxt = np.r_[V[1:], last]
    v, acc = np.zeros(len(r)), 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = q[t] * (r[t] + g * (1 - d[t]) * nxt[t] - V[t]) + g * l * q[t] * (1 - d[t]) * acc
        v[t] = V[t] + acc
    return v


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
