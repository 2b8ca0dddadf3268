"""Tests of rlnotes.pg_exact: exact policy gradients on tabular MDPs, the REINFORCE estimators
(unbiased, variance by Psi_t), GAE's bias and variance against the exact advantage, and the
Gaussian policy's score-function estimator. The chapters' claims are asserted here too."""

import numpy as np
import pytest
import torch

from rlnotes import pg_exact as px
from rlnotes.mdp import random_mdp


@pytest.fixture(scope="module")
def problem():
    mdp = random_mdp(5, 3, gamma=0.9, seed=1, terminal_prob=0.15)
    theta = np.random.default_rng(0).normal(size=(5, 3))
    mu0 = np.r_[np.full(4, 0.25), 0.0]
    return mdp, theta, mu0


def test_autograd_gradient_equals_policy_gradient_theorem(problem):
    mdp, theta, mu0 = problem
    g1 = px.exact_gradient(mdp, theta, mu0)
    g2 = px.policy_gradient_theorem(mdp, px.softmax_policy(theta), mu0)
    np.testing.assert_allclose(g1, g2, atol=1e-12)
    # and a finite difference of J agrees
    eps = 1e-6
    th = torch.tensor(theta)
    d = np.zeros_like(theta)
    d[1, 2] = eps
    J = lambda t: float(px.exact_objective(mdp, torch.tensor(t), mu0))
    assert (J(theta + d) - J(theta - d)) / (2 * eps) == pytest.approx(g1[1, 2], abs=1e-7)
    assert th.shape == (5, 3)


def test_visitation_sums_to_expected_episode_discounted_length(problem):
    mdp, theta, mu0 = problem
    pi = px.softmax_policy(theta)
    d = px.discounted_visitation(mdp, pi, mu0)
    assert d.shape == (5,) and (d >= 0).all()
    assert d.sum() == pytest.approx(1 / (1 - mdp.gamma))


def test_softmax_score_has_zero_mean_so_a_state_baseline_adds_no_bias(problem):
    _, theta, _ = problem
    pi = px.softmax_policy(theta)
    # sum_a pi(a|s) grad log pi(a|s) = sum_a pi(a|s) (e_a - pi(.|s)) = 0 in every state
    score_mean = np.einsum("sa,sab->sb", pi, np.eye(3)[None] - pi[:, None, :])
    np.testing.assert_allclose(score_mean, 0.0, atol=1e-15)


def test_reinforce_estimators_are_unbiased_and_variance_falls(problem):
    mdp, theta, mu0 = problem
    truth = px.exact_gradient(mdp, theta, mu0)
    stats = {psi: px.estimator_stats(px.reinforce_estimates(mdp, theta, mu0, psi, 5000, seed=0),
                                      truth) for psi in px.PSI_CHOICES}
    for psi, st in stats.items():
        assert st["max_z"] < 4.0, psi
    v = {psi: st["variance"] for psi, st in stats.items()}
    assert v["total"] > v["reward_to_go"] > v["baseline"] > v["q"] > v["advantage"]
    assert v["td"] < v["baseline"]
    assert v["total"] > 9 * v["advantage"]  # the chapter's "more than nine" (5,000 episodes, seed 0)


def test_gae_claims_of_the_actor_critic_chapter():
    # exactly the chapter's experiment and asserts (section Bias and variance of GAE, measured)
    from rlnotes.mdp import policy_evaluation
    mdp = random_mdp(5, 3, gamma=0.9, seed=1, terminal_prob=0.15)
    pi = px.softmax_policy(np.random.default_rng(0).normal(size=(5, 3)))
    V_exact = policy_evaluation(mdp, pi)
    V_wrong = V_exact + np.r_[np.random.default_rng(1).normal(size=4) * 2, 0.0]
    lams = np.linspace(0, 1, 11)
    exact = px.gae_bias_variance(mdp, pi, V_exact, lams, 1000, seed=0)
    wrong = px.gae_bias_variance(mdp, pi, V_wrong, lams, 1000, seed=0)
    assert (exact["max_z_pg"] < 4).all()
    assert (np.diff(exact["variance"]) > 0).all()
    assert (wrong["max_z_pg"][:-1] > 4).all() and wrong["max_z_pg"][-1] < 4
    assert (np.diff(wrong["bias_pg"]) < 0).all()
    assert wrong["bias"][-1] > 0.5
    assert wrong["variance"][0] > 2 * exact["variance"][0]


def test_gae_is_unbiased_with_exact_v_and_only_lambda_one_with_a_wrong_v(problem):
    mdp, theta, _ = problem
    pi = px.softmax_policy(theta)
    V, Q = px._exact_values(mdp, pi)
    lams = [0.0, 0.5, 0.9, 1.0]
    exact = px.gae_bias_variance(mdp, pi, V, lams, 1000, seed=0)
    assert (exact["max_z_pg"] < 4).all()
    assert exact["variance"][0] < exact["variance"][1] < exact["variance"][2] < exact["variance"][3]
    wrong = V + np.r_[np.random.default_rng(1).normal(size=4) * 2, 0.0]
    bad = px.gae_bias_variance(mdp, pi, wrong, lams, 1000, seed=0)
    assert (bad["max_z_pg"][:3] > 4).all() and bad["max_z_pg"][3] < 4
    assert bad["bias_pg"][0] > bad["bias_pg"][1] > bad["bias_pg"][2] > bad["bias_pg"][3]
    # the raw bias at lambda = 1 is the state offset V - V_wrong: a baseline
    assert bad["bias"][3] > 0.5


def test_gaussian_estimator_is_unbiased_on_the_quadratic_problem():
    mu, std, target = np.array([0.5, -1.0]), 0.7, 1.0
    truth = px.quadratic_gaussian_gradient(mu, std, target)
    np.testing.assert_allclose(truth, [1.0, 4.0, -1.4, -1.4])
    f = lambda a: -((a - target) ** 2).sum(1)
    plain = px.gaussian_score_estimates(mu, std, f, 20000, seed=0)
    assert px.estimator_stats(plain, truth)["max_z"] < 4
    base = px.gaussian_score_estimates(mu, std, f, 20000, seed=0, baseline=-4.0)
    assert px.estimator_stats(base, truth)["max_z"] < 4
    assert px.estimator_stats(base, truth)["variance"] < px.estimator_stats(plain, truth)["variance"]


def test_gaussian_log_prob_matches_torch():
    a, mu, std = np.array([[0.3, -1.0]]), np.array([0.0, 0.5]), np.array([0.5, 2.0])
    ref = torch.distributions.Normal(torch.tensor(mu), torch.tensor(std)).log_prob(
        torch.tensor(a)).sum(-1)
    np.testing.assert_allclose(px.gaussian_log_prob(a, mu, std), ref.numpy())
    np.testing.assert_allclose(px.gaussian_log_prob(torch.tensor(a), mu, std).numpy(),
                               ref.numpy())


@pytest.mark.parametrize("bad", [0.0, -1.0, [1.0, 0.0], float("nan")])
def test_gaussian_rejects_non_positive_std(bad):
    with pytest.raises(ValueError, match="std"):
        px.gaussian_log_prob([[0.0, 0.0]], [0.0, 0.0], bad)
    with pytest.raises(ValueError, match="std"):
        px.gaussian_score_estimates([0.0, 0.0], bad, lambda a: a.sum(1), 10)


def test_bad_policies_and_inputs_are_rejected(problem):
    mdp, theta, mu0 = problem
    pi = px.softmax_policy(theta)
    not_rows = pi.copy()
    not_rows[0, 0] += 0.1
    negative = pi.copy()
    negative[1] = [1.2, -0.1, -0.1]
    for bad in (not_rows, negative, pi[:3], pi.T):
        with pytest.raises(ValueError, match="policy"):
            px.policy_gradient_theorem(mdp, bad, mu0)
        with pytest.raises(ValueError, match="policy"):
            px.discounted_visitation(mdp, bad, mu0)
        with pytest.raises(ValueError, match="policy"):
            px.gae_bias_variance(mdp, bad, np.zeros(5), [0.5], 10)
    with pytest.raises(ValueError, match="theta"):
        px.exact_gradient(mdp, theta[:2], mu0)
    with pytest.raises(ValueError, match="mu0"):
        px.exact_gradient(mdp, theta, np.ones(5))
    with pytest.raises(ValueError, match="psi"):
        px.reinforce_estimates(mdp, theta, mu0, "vanilla", 10)
    with pytest.raises(ValueError, match="mdp"):
        px.exact_gradient(None, theta, mu0)
    with pytest.raises(ValueError, match="lams"):
        px.gae_bias_variance(mdp, pi, np.zeros(5), [1.5], 10)
    with pytest.raises(ValueError, match="V"):
        px.gae_bias_variance(mdp, pi, np.zeros(4), [0.5], 10)
    with pytest.raises(ValueError, match="estimates"):
        px.estimator_stats(np.zeros((1, 5, 3)), np.zeros((5, 3)))
