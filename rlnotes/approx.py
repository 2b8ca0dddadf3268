"""Linear value-function approximation and the deadly triad: Baird's counterexample
(Sutton and Barto, Example 11.1).

Seven states, two actions. "dashed" jumps to one of states 0-5 uniformly, "solid" jumps to
state 6; every reward is 0, so the true value of every state is 0 under every policy. The
behaviour policy b takes dashed with probability 6/7 (its state distribution is uniform over
the seven states); the target policy pi always takes solid. The linear features give
v(s) = 2 w_s + w_7 for s = 0..5 and v(6) = w_6 + 2 w_7 (weights w_0..w_7).

Expected (DP-style) semi-gradient TD(0) updates, weighted by the uniform behaviour distribution,
diverge: off-policy learning, bootstrapping and function approximation together (the deadly
triad). Weighting the same updates by the on-policy distribution of pi converges, and so does
bootstrapping from a lagged copy of the weights held fixed while the regression toward it
converges (a target network), because here the features can represent every value function.

Defined in: Deep Q-networks, section The deadly triad.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_choice, require_gamma, require_int, require_real

__all__ = ["baird_features", "baird_initial_weights", "baird_expected_td"]

NUM_STATES, NUM_WEIGHTS = 7, 8


def baird_features() -> np.ndarray:
    """The (7, 8) feature matrix X of Baird's counterexample, v = X w (states 0..6).

    Defined in: Deep Q-networks, section The deadly triad.
    """
    X = np.zeros((NUM_STATES, NUM_WEIGHTS))
    for s in range(6):
        X[s, s], X[s, 7] = 2.0, 1.0
    X[6, 6], X[6, 7] = 1.0, 2.0
    return X


def baird_initial_weights() -> np.ndarray:
    """Sutton and Barto's starting weights (1, 1, 1, 1, 1, 1, 10, 1)."""
    w = np.ones(NUM_WEIGHTS)
    w[6] = 10.0
    return w


def baird_expected_td(num_sweeps: int, *, alpha: float = 0.01, gamma: float = 0.99,
                      distribution: str = "behaviour", target_sync: int = 1) -> np.ndarray:
    """Expected semi-gradient TD(0) on Baird's counterexample; returns the (num_sweeps + 1, 8)
    weights, row k after k sweeps.

    A sweep is one expected update of the target policy's values (pi always goes to state 6,
    all rewards 0), with the TD error of each state weighted by the state distribution nu_b:

        delta(s) = 0 + gamma v_{w^-}(6) - v_w(s),     w <- w + alpha sum_s nu_b(s) delta(s) phi(s)

    ``distribution="behaviour"``: nu_b uniform over the 7 states (off-policy);
    ``"on-policy"``: nu_b concentrated on state 6, where pi stays. ``w^-`` is the bootstrap
    weight vector: ``target_sync=1`` uses the current w (plain semi-gradient TD); C_tgt > 1
    copies w into w^- every C_tgt sweeps and holds it fixed in between (a target network).

    Defined in: Deep Q-networks, section The deadly triad.
    """
    num_sweeps = require_int(num_sweeps, "num_sweeps", minimum=0)
    alpha = require_real(alpha, "alpha")
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    gamma = require_gamma(gamma)
    require_choice(distribution, "distribution", ("behaviour", "on-policy"))
    target_sync = require_int(target_sync, "target_sync", minimum=1)
    X = baird_features()                             # (7, 8): row s is phi(s)
    nu = np.full(NUM_STATES, 1.0 / NUM_STATES) if distribution == "behaviour" else np.eye(7)[6]
    w = baird_initial_weights()
    w_target = w.copy()
    history = [w.copy()]
    for k in range(num_sweeps):
        if k % target_sync == 0:
            w_target = w.copy()
        delta = gamma * (X[6] @ w_target) - X @ w       # (7,): TD error of each state
        w = w + alpha * X.T @ (nu * delta)
        history.append(w.copy())
    return np.asarray(history)
