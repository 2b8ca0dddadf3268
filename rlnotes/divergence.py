"""Importance sampling and KL divergence between policies, measured exactly and by sampling:
the experiments behind the trust region of TRPO and PPO.

All distributions here are categorical (a policy in one state) or one-dimensional densities on a
grid, so that every quantity has an exact value to compare the estimators with.

Defined in: TRPO and PPO, sections Importance sampling and KL divergence.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_int
from rlnotes.kl import kl_k1, kl_k2, kl_k3

__all__ = ["importance_weights", "is_estimate_stats", "kl_estimator_stats", "gaussian_mixture",
           "fit_gaussian"]


def _probs(p, name: str) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or len(p) < 1:
        raise ValueError(f"{name} must be a 1-D probability vector, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or (p < 0).any() or abs(p.sum() - 1.0) > 1e-8:
        raise ValueError(f"{name} must be non-negative and sum to 1, got {p}")
    return p


def importance_weights(logp_target, logp_behaviour) -> np.ndarray:
    r"""The importance weights ``rho = pi(a) / mu(a) = exp(logp_target - logp_behaviour)`` of
    actions drawn from the behaviour policy mu, so that ``E_mu[rho f(a)] = E_pi[f(a)]``.

    ===============  ======  ================================================
    argument         shape   meaning
    ===============  ======  ================================================
    logp_target      (n,)    log pi(a_i), the policy we want to evaluate
    logp_behaviour   (n,)    log mu(a_i), the policy that drew a_i
    returns          (n,)    rho_i
    ===============  ======  ================================================

    Defined in: TRPO and PPO, section Importance sampling.
    """
    lt = np.asarray(logp_target, dtype=np.float64)
    lb = np.asarray(logp_behaviour, dtype=np.float64)
    if lt.shape != lb.shape:
        raise ValueError(f"logp_behaviour must have logp_target's shape {lt.shape}, got {lb.shape}")
    if not (np.all(np.isfinite(lb)) and np.all(lt < np.inf)):
        raise ValueError("logp_behaviour must be finite (mu must give the drawn actions mass)")
    return np.exp(lt - lb)


def is_estimate_stats(pi, mu, f, n: int, num_trials: int, rng: np.random.Generator) -> dict:
    r"""The importance-sampling estimate of ``E_pi[f]`` from ``n`` actions drawn from ``mu``,
    repeated ``num_trials`` times, against its exact mean and variance:

        estimate = (1/n) sum_i rho_i f(a_i),   Var = (E_mu[rho^2 f^2] - E_pi[f]^2) / n,

    where ``E_mu[rho^2 f^2] = sum_a pi(a)^2 f(a)^2 / mu(a)`` grows without bound as pi moves
    away from mu. Returns a dict with ``true`` (E_pi f), ``mean`` and ``var`` of the estimates
    over the trials, ``exact_var`` and ``kl`` (KL(pi || mu)).

    Defined in: TRPO and PPO, section Importance sampling.
    """
    pi, mu = _probs(pi, "pi"), _probs(mu, "mu")
    f = np.asarray(f, dtype=np.float64)
    if pi.shape != mu.shape or f.shape != pi.shape:
        raise ValueError(f"pi, mu and f must have one shape, got {pi.shape}, {mu.shape}, {f.shape}")
    if ((mu == 0) & (pi > 0)).any():
        raise ValueError("mu must be > 0 wherever pi is > 0 (else the estimate is biased)")
    n = require_int(n, "n", minimum=1)
    num_trials = require_int(num_trials, "num_trials", minimum=2)
    a = rng.choice(len(mu), size=(num_trials, n), p=mu)
    rho = importance_weights(np.log(np.where(pi > 0, pi, 1e-300))[a], np.log(mu)[a])
    rho = np.where(pi[a] > 0, rho, 0.0)
    estimates = (rho * f[a]).mean(axis=1)
    true = float(pi @ f)
    support = mu > 0
    second = float(np.sum(pi[support] ** 2 * f[support] ** 2 / mu[support]))
    nz = pi > 0
    return {"true": true, "mean": float(estimates.mean()), "var": float(estimates.var(ddof=1)),
            "exact_var": (second - true ** 2) / n,
            "kl": float(np.sum(pi[nz] * (np.log(pi[nz]) - np.log(mu[nz]))))}


def kl_estimator_stats(p, ref, n: int, rng: np.random.Generator) -> dict:
    r"""Bias and standard deviation of the per-sample estimators k1, k2, k3 of KL(p || ref)
    (:mod:`rlnotes.kl`) for ``n`` actions drawn from p (the orientation of the book: samples
    from pi_theta = p, ratio r = ref(a) / p(a)). Returns ``{"kl": exact KL,
    "k1": (bias, std), "k2": ..., "k3": ...}``, bias = sample mean - KL, std over the n samples.

    Defined in: TRPO and PPO, section KL divergence.
    """
    p, ref = _probs(p, "p"), _probs(ref, "ref")
    if p.shape != ref.shape:
        raise ValueError(f"ref must have p's shape {p.shape}, got {ref.shape}")
    if ((ref == 0) & (p > 0)).any():
        raise ValueError("ref must be > 0 wherever p is > 0 (else the KL is infinite)")
    n = require_int(n, "n", minimum=2)
    a = rng.choice(len(p), size=n, p=p)
    logp, ref_logp = np.log(p[a]), np.log(ref[a])
    nz = p > 0
    kl = float(np.sum(p[nz] * (np.log(p[nz]) - np.log(ref[nz]))))
    out = {"kl": kl}
    for name, k in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3)):
        vals = k(logp, ref_logp)
        out[name] = (float(vals.mean() - kl), float(vals.std(ddof=1)))
    exact = {}
    lp, lr = np.log(p[nz]), np.log(ref[nz])
    for name, k in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3)):
        vals = k(lp, lr)
        mean = float(p[nz] @ vals)
        exact[name] = (mean - kl, float(np.sqrt(max(p[nz] @ vals ** 2 - mean ** 2, 0.0))))
    out["exact"] = exact
    return out


def gaussian_mixture(x, means, stds, weights) -> np.ndarray:
    """The density of a mixture of 1-D Gaussians at the points ``x``.

    Defined in: TRPO and PPO, section KL divergence.
    """
    x = np.asarray(x, dtype=np.float64)
    means, stds, weights = (np.asarray(v, dtype=np.float64) for v in (means, stds, weights))
    if not (means.shape == stds.shape == weights.shape) or means.ndim != 1:
        raise ValueError("means, stds and weights must be 1-D arrays of one length")
    if (stds <= 0).any():
        raise ValueError(f"stds must be > 0, got {stds}")
    if (weights < 0).any() or abs(weights.sum() - 1) > 1e-8:
        raise ValueError(f"weights must be non-negative and sum to 1, got {weights}")
    z = (x[..., None] - means) / stds
    return (weights * np.exp(-0.5 * z ** 2) / (stds * np.sqrt(2 * np.pi))).sum(-1)


def fit_gaussian(x, target, direction: str, *, mus=None, sigmas=None) -> tuple[float, float]:
    r"""The Gaussian q = N(mu, sigma^2) closest to the density ``target`` (given on the uniform
    grid ``x``) in ``direction`` "forward" (minimise KL(target || q): mass-covering) or
    "reverse" (minimise KL(q || target): mode-seeking), by search over a grid of (mu, sigma)
    with the integrals as Riemann sums. Returns ``(mu, sigma)``.

    Defined in: TRPO and PPO, section KL divergence.
    """
    if direction not in ("forward", "reverse"):
        raise ValueError(f"direction must be 'forward' or 'reverse', got {direction!r}")
    x = np.asarray(x, dtype=np.float64)
    p = np.asarray(target, dtype=np.float64)
    if x.ndim != 1 or p.shape != x.shape or len(x) < 3:
        raise ValueError("x and target must be 1-D arrays of one length (>= 3)")
    dx = float(x[1] - x[0])
    mus = np.linspace(x[0], x[-1], 121) if mus is None else np.asarray(mus, dtype=np.float64)
    sigmas = np.linspace(0.1, (x[-1] - x[0]) / 2, 100) if sigmas is None else np.asarray(sigmas)
    tiny = 1e-300
    q = np.exp(-0.5 * ((x - mus[:, None, None]) / sigmas[None, :, None]) ** 2) \
        / (sigmas[None, :, None] * np.sqrt(2 * np.pi))
    if direction == "forward":
        kl = (p * (np.log(p + tiny) - np.log(q + tiny))).sum(-1) * dx
    else:
        kl = (q * (np.log(q + tiny) - np.log(p + tiny))).sum(-1) * dx
    i, j = np.unravel_index(np.argmin(kl), kl.shape)
    return float(mus[i]), float(sigmas[j])
