"""The functional forms of reward over-optimisation (Gao, Schulman and Hilton 2023).

With d = sqrt(KL(pi || pi_ref)), the gold reward gained over the initial policy follows

    best-of-n:  R_bon(d) = d (alpha - beta d)
    RL:         R_RL(d)  = d (alpha - beta log d)

Both are linear in (alpha, beta), so least squares fits them exactly.

Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_bon_form", "fit_rl_form"]


def _fit(d, gain, feature, name):
    d = np.asarray(d, dtype=np.float64)
    gain = np.asarray(gain, dtype=np.float64)
    if d.ndim != 1 or d.shape != gain.shape or len(d) < 2:
        raise ValueError(f"d and gain must be 1-d arrays of the same length >= 2, got {d.shape} and {gain.shape}")
    if not (np.isfinite(d).all() and np.isfinite(gain).all()) or (d < 0).any():
        raise ValueError("d must be finite and >= 0, gain finite")
    X = np.stack([d, -feature(d)], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(X, gain, rcond=None)
    pred = X @ np.array([alpha, beta])
    ss_tot = ((gain - gain.mean()) ** 2).sum()
    r2 = 1 - ((gain - pred) ** 2).sum() / ss_tot if ss_tot > 0 else float("nan")
    return {"form": name, "alpha": float(alpha), "beta": float(beta), "r2": float(r2)}


def fit_bon_form(d, gain):
    r"""Least-squares fit of ``gain = d (alpha - beta d)``; returns alpha, beta and R^2.

    ======  ========  =========================================================
    d       (N,)      sqrt(KL) of each point, >= 0
    gain    (N,)      gold reward minus the initial policy's gold reward
    ======  ========  =========================================================

    Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
    """
    return _fit(d, gain, lambda d: d ** 2, "bon: d (alpha - beta d)")


def fit_rl_form(d, gain):
    r"""Least-squares fit of ``gain = d (alpha - beta log d)`` (0 at d = 0).

    Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
    """
    return _fit(d, gain, lambda d: np.where(d > 0, d * np.log(np.where(d > 0, d, 1.0)), 0.0),
                "rl: d (alpha - beta log d)")
