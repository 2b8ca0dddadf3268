"""Checks of the exercises of the chapter "Policy gradients".

``check_reward_to_go`` compares the reader's discounted reward-to-go with
``rlnotes.returns.discounted_returns`` on random episodes and recognises the usual mistakes
(no discount, the total return at every step, summing from the start instead of to the end).
``check_linear_softmax_reinforce`` compares the reader's REINFORCE estimate for a linear softmax
policy over features with automatic differentiation of the log-probabilities computed by
``rlnotes.pg_exact.softmax_policy``, and recognises a missing expected-feature term, an expected
feature taken under the uniform policy, a wrong sign, and missing weights.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes import pg_exact, reinforce
from rlnotes.exercises.core import (ExerciseFailed, call_reader, check, expect_own_work,
                                   format_mismatch, reader_array)
from rlnotes.returns import discounted_returns

__all__ = ["check_reward_to_go", "check_linear_softmax_reinforce",
           "linear_softmax_reinforce_reference"]


def _numpy(x, what: str, shape) -> np.ndarray:
    return reader_array(x, what, shape, read_hint='Return a numpy array of numbers.',
                        shape_hint='Return one number per time step (per entry of theta).', finite=True)


REWARD_TO_GO_HINTS = [
    ("You did not discount: G_t = r_{t+1} + gamma r_{t+2} + gamma^2 r_{t+3} + ...",
     lambda r, g: np.cumsum(r[::-1])[::-1]),
    ("That is the total return G_0 at every step; the reward-to-go G_t only sums the rewards "
     "from step t on (actions cannot change the past).",
     lambda r, g: np.full(len(r), (g ** np.arange(len(r)) * r).sum())),
    ("You summed from the start of the episode up to t; the reward-to-go sums from t to the end.",
     lambda r, g: np.array([(g ** np.arange(t + 1)[::-1] * r[:t + 1]).sum()
                            for t in range(len(r))])),
    ("Off by one step: G_t includes r_{t+1}, the reward of the step taken at t.",
     lambda r, g: np.r_[discounted_returns(r, g)[1:], 0.0]),
]


@check
def check_reward_to_go(my_reward_to_go):
    """``my_reward_to_go(rewards, gamma)`` returns the (T,) discounted reward-to-go
    G_t = sum_{k >= t} gamma^(k - t) r_{k+1} of one episode's (T,) rewards."""
    expect_own_work(my_reward_to_go, discounted_returns, reinforce.episode_psi)
    rng = np.random.default_rng(0)
    for T, gamma in ((1, 0.9), (7, 0.9), (12, 0.5), (20, 1.0)):
        r = rng.normal(size=T)
        got = _numpy(my_reward_to_go(r.copy(), gamma), "my_reward_to_go's result", (T,))
        expected = discounted_returns(r, gamma)
        if np.allclose(got, expected, atol=1e-8):
            continue
        for hint, wrong in REWARD_TO_GO_HINTS:
            if np.allclose(got, wrong(r, gamma), atol=1e-8):
                raise ExerciseFailed(f"The reward-to-go differs (T = {T}, gamma = {gamma}).", hint)
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(f"G_{worst}: {format_mismatch(got[worst], expected[worst])} "
                             f"(T = {T}, gamma = {gamma}).",
                             "Work backwards: G_t = r_{t+1} + gamma G_{t+1}, G_T = 0.")


def linear_softmax_reinforce_reference(theta, features, states, actions, psi):
    """sum_t Psi_t grad_theta log pi(a_t|s_t) for the linear softmax policy
    pi(a|s) = softmax_a(features[s] @ theta), by automatic differentiation (torch) of the
    log-probabilities that :func:`rlnotes.pg_exact.softmax_policy` computes; shape (k,).

    Defined in: Policy gradients, section Exercises.
    """
    theta = torch.tensor(np.asarray(theta, dtype=np.float64), requires_grad=True)
    phi = torch.as_tensor(np.asarray(features, dtype=np.float64))
    pi = pg_exact.softmax_policy(phi @ theta)
    s = torch.as_tensor(np.asarray(states), dtype=torch.long)
    a = torch.as_tensor(np.asarray(actions), dtype=torch.long)
    w = torch.as_tensor(np.asarray(psi, dtype=np.float64))
    (grad,) = torch.autograd.grad((w * torch.log(pi[s, a])).sum(), theta)
    return grad.numpy()


def _linear_softmax_wrong(theta, features, states, actions, psi):
    """The usual mistakes, each as (hint, estimate)."""
    logits = features @ theta
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi = z / z.sum(axis=1, keepdims=True)
    s, a = np.asarray(states), np.asarray(actions)
    phi_sa = features[s, a]                                    # (T, k)
    mean_pi = np.einsum("tb,tbk->tk", pi[s], features[s])      # E_pi[phi(s_t, .)]
    mean_uniform = features[s].mean(axis=1)
    return [
        ("The estimate misses the expected-feature term: d log pi(a|s) / d theta = "
         "phi(s, a) - sum_b pi(b|s) phi(s, b), where the sum comes from the normaliser.",
         psi @ phi_sa),
        ("The expected feature must be weighted by the policy, sum_b pi(b|s) phi(s, b), not "
         "the plain average over actions.",
         psi @ (phi_sa - mean_uniform)),
        ("The estimate has the wrong sign: this is the gradient of J (to ascend), not of a loss.",
         -(psi @ (phi_sa - mean_pi))),
        ("The weights Psi_t are missing: multiply each step's score by its Psi_t.",
         (phi_sa - mean_pi).sum(axis=0)),
    ]


@check
def check_linear_softmax_reinforce(my_linear_softmax_reinforce):
    """``my_linear_softmax_reinforce(theta, features, states, actions, psi)`` returns the (k,)
    REINFORCE estimate sum_t Psi_t grad_theta log pi(a_t|s_t) for the linear softmax policy
    pi(a|s) = softmax_a(features[s] @ theta): ``theta`` (k,), ``features`` (S, A, k), and one
    episode's (T,) integer states and actions and float weights ``psi``."""
    expect_own_work(my_linear_softmax_reinforce, pg_exact.reinforce_estimates,
                    linear_softmax_reinforce_reference)
    rng = np.random.default_rng(1)
    for S, A, k, T in ((3, 2, 2, 5), (5, 4, 6, 12), (4, 3, 1, 9)):
        theta = rng.normal(size=k)
        features = rng.normal(size=(S, A, k))
        states = rng.integers(S, size=T)
        actions = rng.integers(A, size=T)
        psi = rng.normal(size=T) * 2
        result = call_reader(my_linear_softmax_reinforce, "my_linear_softmax_reinforce",
                             theta.copy(), features.copy(), states.copy(), actions.copy(),
                             psi.copy())
        got = _numpy(result, "my_linear_softmax_reinforce's result", (k,))
        expected = linear_softmax_reinforce_reference(theta, features, states, actions, psi)
        if np.allclose(got, expected, atol=1e-8):
            continue
        for hint, wrong in _linear_softmax_wrong(theta, features, states, actions, psi):
            if np.allclose(got, wrong, atol=1e-8):
                raise ExerciseFailed(f"The estimate differs (S = {S}, A = {A}, k = {k}).", hint)
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(f"Component {worst}: {format_mismatch(got[worst], expected[worst])} "
                             f"(S = {S}, A = {A}, k = {k}, T = {T}).",
                             "grad log pi(a|s) = phi(s, a) - sum_b pi(b|s) phi(s, b), with "
                             "pi(.|s) = softmax(features[s] @ theta); sum Psi_t times it over t.")
