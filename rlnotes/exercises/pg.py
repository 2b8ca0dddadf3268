"""Checks of the exercises of the chapter "Policy gradients".

``check_reward_to_go`` compares the reader's discounted reward-to-go with
``rlnotes.returns.discounted_returns`` on random episodes and recognises the usual mistakes
(no discount, the total return at every step, summing from the start instead of to the end).
``check_softmax_reinforce`` compares the reader's REINFORCE estimate for a tabular softmax policy
with the exact score function and recognises a missing -pi term, a wrong sign, and a missing
weight.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes import pg_exact
from rlnotes.exercises.core import ExerciseFailed, check, expect_own_work, format_mismatch
from rlnotes.returns import discounted_returns

__all__ = ["check_reward_to_go", "check_softmax_reinforce", "softmax_reinforce_reference"]


def _numpy(x, what: str, shape) -> np.ndarray:
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ExerciseFailed(f"{what} could not be read as an array ({err}).",
                             "Return a numpy array of numbers.") from None
    if x.shape != shape:
        raise ExerciseFailed(f"{what} has shape {x.shape}, expected {shape}.",
                             "Return one number per time step (per entry of theta).")
    if not np.isfinite(x).all():
        raise ExerciseFailed(f"{what} contains NaN or infinite values.", None)
    return x


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
    expect_own_work(my_reward_to_go, discounted_returns)
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


def softmax_reinforce_reference(pi, states, actions, weights):
    """sum_t w_t grad_theta log pi(a_t|s_t) for softmax logits theta (S, A): entry [s, b] of
    the t-th term is w_t 1[s = s_t] (1[b = a_t] - pi(b|s_t)).

    Defined in: Policy gradients, section Exercises.
    """
    pi = np.asarray(pi, dtype=np.float64)
    g = np.zeros_like(pi)
    eye = np.eye(pi.shape[1])
    for s, a, w in zip(states, actions, weights):
        g[s] += w * (eye[a] - pi[s])
    return g


@check
def check_softmax_reinforce(my_softmax_reinforce):
    """``my_softmax_reinforce(theta, states, actions, weights)`` returns the (S, A) REINFORCE
    estimate sum_t w_t grad_theta log pi(a_t|s_t) for the softmax policy
    pi(a|s) = softmax(theta[s])_a, given one episode's (T,) states, actions and weights."""
    expect_own_work(my_softmax_reinforce, pg_exact.reinforce_estimates, softmax_reinforce_reference)
    rng = np.random.default_rng(1)
    for S, A, T in ((3, 2, 5), (5, 4, 12)):
        theta = rng.normal(size=(S, A))
        states = rng.integers(S, size=T)
        actions = rng.integers(A, size=T)
        weights = rng.normal(size=T) * 2
        got = _numpy(my_softmax_reinforce(theta.copy(), states.copy(), actions.copy(),
                                          weights.copy()), "my_softmax_reinforce's result", (S, A))
        pi = pg_exact.softmax_policy(theta)
        expected = softmax_reinforce_reference(pi, states, actions, weights)
        if np.allclose(got, expected, atol=1e-8):
            continue
        eye = np.eye(A)
        no_pi = np.zeros((S, A))
        no_w = np.zeros((S, A))
        for s, a, w in zip(states, actions, weights):
            no_pi[s] += w * eye[a]
            no_w[s] += eye[a] - pi[s]
        if np.allclose(got, no_pi, atol=1e-8):
            raise ExerciseFailed("The estimate misses the -pi(b|s) term.",
                                 "d log softmax(theta[s])_a / d theta[s, b] = 1[b = a] - pi(b|s): "
                                 "the normaliser's derivative gives the -pi term.")
        if np.allclose(got, -expected, atol=1e-8):
            raise ExerciseFailed("The estimate has the wrong sign.",
                                 "This is the gradient of J (to ascend), not of a loss.")
        if np.allclose(got, no_w, atol=1e-8):
            raise ExerciseFailed("The weights w_t are missing.",
                                 "Multiply each step's score by its weight w_t (its Psi_t).")
        raise ExerciseFailed("The estimate differs from sum_t w_t grad log pi(a_t|s_t).",
                             "Only row s_t of theta gets a term from step t.")
