"""Numerical claims of the chapter "Policy gradients" that the other test files do not cover
(the exact-gradient and CartPole claims are in test_pg_exact.py and test_pg_trainers.py)."""

import numpy as np
import pytest

from rlnotes import pg_exact as px


def test_quadratic_gaussian_objective_is_minus_5_23():
    # section Continuous actions: r(a) = -||a - a*||^2, a ~ N(mu, sigma^2 I), mu = (0.5, -1),
    # sigma = 0.7, a* = 1: J = -||mu - a*||^2 - k sigma^2 = -(0.25 + 4) - 2 * 0.49 = -5.23
    mu, sigma, target = np.array([0.5, -1.0]), 0.7, 1.0
    J = -((mu - target) ** 2).sum() - mu.size * sigma ** 2
    assert abs(J - (-5.23)) < 0.005
    # ... and it is the mean reward of the samples the chapter's estimator draws
    a = mu + sigma * np.random.default_rng(0).standard_normal((200_000, 2))
    r = -((a - target) ** 2).sum(1)
    assert abs(r.mean() - J) < 4 * r.std() / np.sqrt(len(r))
    # the gradient is the derivative of that J: grad_mu = -2 (mu - a*), grad_sigma = -2 sigma
    truth = px.quadratic_gaussian_gradient(mu, sigma, target)
    np.testing.assert_allclose(truth, [1.0, 4.0, -2 * sigma, -2 * sigma])


def test_constant_baseline_near_the_mean_reward_lowers_the_variance():
    # the chapter's estimates: 20,000 samples, seed 0, baseline -4 (J = -5.23)
    mu, sigma, target = np.array([0.5, -1.0]), 0.7, 1.0
    truth = px.quadratic_gaussian_gradient(mu, sigma, target)
    f = lambda a: -((a - target) ** 2).sum(1)
    plain = px.estimator_stats(px.gaussian_score_estimates(mu, sigma, f, 20_000, seed=0), truth)
    with_b = px.estimator_stats(px.gaussian_score_estimates(mu, sigma, f, 20_000, seed=0,
                                                            baseline=-4.0), truth)
    assert plain["max_z"] < 4 and with_b["max_z"] < 4
    assert with_b["variance"] < plain["variance"]
    assert with_b["variance"] == pytest.approx(426, rel=0.05)
    assert plain["variance"] == pytest.approx(924, rel=0.05)
