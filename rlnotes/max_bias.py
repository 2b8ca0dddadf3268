"""The maximisation bias of Q-learning and its fix, Double Q-learning (Sutton and Barto,
Example 6.7), run for many independent runs at once (numpy arrays over runs).

The MDP: episodes start in A. "right" ends the episode with reward 0; "left" moves to B with
reward 0, where each of ``n_actions_b`` actions ends the episode with a reward drawn from
N(-0.1, 1). Going left is worth -0.1 < 0, yet Q-learning's target max_b Q(B, b) is the largest
of several noisy estimates of -0.1, positive on average early on, so Q-learning goes left far
more often than the 5% that epsilon = 0.1 exploration alone would explain.

Defined in: Deep Q-networks, section The maximisation bias and double DQN.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_in_range, require_int

__all__ = ["maximization_bias_experiment", "LEFT", "RIGHT"]

LEFT, RIGHT = 0, 1   # the actions in A


def _eps_greedy(Q, epsilon, rng):
    """Epsilon-greedy actions for each row of Q (R, n), ties broken at random."""
    R, n = Q.shape
    noise = rng.random((R, n)) * 1e-9          # random tie-breaking among equal maxima
    greedy = np.argmax(Q + noise * (Q == Q.max(axis=1, keepdims=True)), axis=1)
    explore = rng.random(R) < epsilon
    return np.where(explore, rng.integers(n, size=R), greedy)


def maximization_bias_experiment(num_runs: int = 2_000, num_episodes: int = 300, *,
                                 double: bool = False, n_actions_b: int = 10,
                                 alpha: float = 0.1, epsilon: float = 0.1, seed: int = 0):
    """Run Q-learning (or Double Q-learning with ``double=True``) on Example 6.7 in
    ``num_runs`` independent runs; return ``(left, q_left)``: the fraction of runs that took
    "left" in A in each episode, shape (num_episodes,), and the mean over runs of the
    estimate Q(A, left) after each episode (its true value is -0.1), shape (num_episodes,).

    Q-learning:        Q(A, left) <- Q(A, left) + alpha [max_b Q(B, b) - Q(A, left)]
    Double Q-learning: with probability 1/2 update Q1 toward Q2(B, argmax_b Q1(B, b)),
                       else Q2 toward Q1(B, argmax_b Q2(B, b)); act on Q1 + Q2.

    Both use gamma = 1, epsilon-greedy behaviour and tables that start at 0.

    Defined in: Deep Q-networks, section The maximisation bias and double DQN.
    """
    R = require_int(num_runs, "num_runs", minimum=1)
    T = require_int(num_episodes, "num_episodes", minimum=1)
    nb = require_int(n_actions_b, "n_actions_b", minimum=1)
    alpha = require_in_range(alpha, "alpha", 0.0, 1.0, low_open=True)
    epsilon = require_in_range(epsilon, "epsilon", 0.0, 1.0)
    seed = require_int(seed, "seed", minimum=0)
    if not isinstance(double, bool):
        raise ValueError(f"double must be True or False, got {double!r}")
    rng = np.random.default_rng(seed)
    rows = np.arange(R)
    QA = np.zeros((2, R, 2))        # [table, run, action in A]; table 1 unused by Q-learning
    QB = np.zeros((2, R, nb))
    left_frac, q_left = np.zeros(T), np.zeros(T)
    for t in range(T):
        a = _eps_greedy(QA[0] + QA[1] if double else QA[0], epsilon, rng)
        went_left = a == LEFT
        left_frac[t] = went_left.mean()
        b = _eps_greedy(QB[0] + QB[1] if double else QB[0], epsilon, rng)
        reward_b = rng.normal(-0.1, 1.0, size=R)
        # which table each run updates this episode (Double Q-learning's coin)
        i = rng.integers(2, size=R) if double else np.zeros(R, dtype=np.int64)
        j = 1 - i if double else i
        # A's update: right ends with 0; left bootstraps from B
        if double:
            b_star = np.argmax(QB[i, rows], axis=1)
            next_v = QB[j, rows, b_star]
        else:
            next_v = QB[0].max(axis=1)
        target = np.where(went_left, next_v, 0.0)
        QA[i, rows, a] += alpha * (target - QA[i, rows, a])
        # B's update (only for the runs that went there): terminal, target = reward
        upd = alpha * (reward_b - QB[i, rows, b]) * went_left
        QB[i, rows, b] += upd
        q_left[t] = (QA[0, :, LEFT] + QA[1, :, LEFT]).mean() / (2 if double else 1)
    return left_frac, q_left
