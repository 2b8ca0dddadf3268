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
    with pytest.raises(ValueError, match="p0"):
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


# --- the short corridor (Sutton and Barto, Example 13.1) --------------------------------------

def test_short_corridor_value_matches_the_closed_form_and_its_maximum():
    ps = np.linspace(0.05, 0.95, 19)
    J = np.array([px.short_corridor_value(p) for p in ps])
    np.testing.assert_allclose(J, (2 * ps - 4) / (ps * (1 - ps)), rtol=1e-10)
    p_star = 2 - np.sqrt(2)
    assert px.short_corridor_value(p_star) > J.max()
    assert abs(px.short_corridor_value(p_star) - (-11.6568542)) < 1e-6
    # Sutton and Barto's epsilon-greedy values (epsilon = 0.1): about -44 and -82
    assert -45 < px.short_corridor_value(0.95) < -44 and -83 < px.short_corridor_value(0.05) < -82
    assert px.short_corridor_value(0.0) == px.short_corridor_value(1.0) == -np.inf
    # with gamma < 1 the deterministic policies have a finite value: -1 / (1 - gamma)
    assert abs(px.short_corridor_value(0.0, gamma=0.9) - (-10.0)) < 1e-9


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_short_corridor_gradient_is_the_derivative_of_the_value(gamma):
    h = 1e-6
    for p in (0.1, 0.4, 0.6, 0.9):
        fd = (px.short_corridor_value(p + h, gamma) - px.short_corridor_value(p - h, gamma)) / (2 * h)
        assert abs(px.short_corridor_gradient(p, gamma) - fd) < 1e-5 * max(1.0, abs(fd))
    assert abs(px.short_corridor_gradient(2 - np.sqrt(2))) < 1e-9
    assert px.short_corridor_gradient(0.3, gamma) > 0 > px.short_corridor_gradient(0.8, gamma)


@pytest.mark.parametrize("fn", [px.short_corridor_value, px.short_corridor_gradient])
@pytest.mark.parametrize("args, name", [((-0.1,), "p_right"), ((1.5,), "p_right"),
                                        (("half",), "p_right"), ((0.5, 1.2), "gamma"),
                                        ((0.5, -0.1), "gamma")])
def test_short_corridor_rejects_bad_input(fn, args, name):
    with pytest.raises(ValueError, match=name):
        fn(*args)


def test_short_corridor_gradient_rejects_a_deterministic_policy_at_gamma_one():
    for p in (0.0, 1.0):
        with pytest.raises(ValueError, match="p_right"):
            px.short_corridor_gradient(p)


# --- the pathwise gradient ----------------------------------------------------------------------

def test_pathwise_estimates_are_unbiased_with_the_exact_variance():
    mu, sigma, target = np.array([0.5, -1.0]), 0.7, 1.0
    truth = px.quadratic_gaussian_gradient(mu, sigma, target)
    est = px.gaussian_pathwise_estimates(mu, sigma, lambda a: -2 * (a - target), 40_000, seed=3)
    st = px.estimator_stats(est, truth)
    assert st["max_z"] < 4
    exact_var = 12 * mu.size * sigma ** 2 + 4 * ((mu - target) ** 2).sum()
    assert abs(st["variance"] / exact_var - 1) < 0.05
    score = px.estimator_stats(px.gaussian_score_estimates(
        mu, sigma, lambda a: -((a - target) ** 2).sum(1), 40_000, seed=3), truth)
    assert score["variance"] > 10 * st["variance"]


def test_pathwise_uses_the_samples_of_the_score_estimator():
    mu, sigma = np.array([0.3]), 0.5
    # the identity reward: the score estimate's first column is a (a - mu) / sigma^2 and the
    # pathwise estimate's is 1, so a is recoverable from both with the same seed
    a_score = px.gaussian_score_estimates(mu, sigma, lambda a: np.ones(len(a)), 5, seed=7)[:, 0]
    z_path = px.gaussian_pathwise_estimates(mu, sigma, lambda a: np.ones_like(a), 5, seed=7)[:, 1]
    np.testing.assert_allclose(a_score * sigma, z_path)     # (a - mu) / sigma = z


@pytest.mark.parametrize("kwargs, name", [
    (dict(std=0.0), "std"), (dict(std=-1.0), "std"), (dict(mu=np.array([np.nan])), "mu"),
    (dict(reward_grad_fn=3.0), "reward_grad_fn"), (dict(num_samples=0), "num_samples"),
    (dict(reward_grad_fn=lambda a: a[:, 0]), "reward_grad_fn"), (dict(seed=-1), "seed")])
def test_pathwise_rejects_bad_input(kwargs, name):
    args = dict(mu=np.array([0.0]), std=1.0, reward_grad_fn=lambda a: -a, num_samples=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        px.gaussian_pathwise_estimates(args.pop("mu"), args.pop("std"), args.pop("reward_grad_fn"),
                                       args.pop("num_samples"), **args)


def test_gae_is_the_gamma_lambda_discounted_return_of_the_shaped_rewards():
    # the actor-critic chapter, section GAE as reward shaping: delta_t is r shaped with the
    # potential V, and GAE(gamma, lambda) is its (gamma lambda)-discounted return, no critic
    from rlnotes.returns import gae
    rng = np.random.default_rng(4)
    r, V = rng.normal(size=(12, 3)), rng.normal(size=(12, 3))
    d, last = (rng.random((12, 3)) < 0.25).astype(float), rng.normal(size=3)
    shaped = r + 0.95 * (1 - d) * np.r_[V[1:], last[None]] - V
    for lam in (0.0, 0.3, 0.9, 1.0):
        adv, _ = gae(r, V, d, last, 0.95, lam)
        plain, _ = gae(shaped, np.zeros_like(V), d, np.zeros(3), 0.95 * lam, 1.0)
        np.testing.assert_allclose(adv, plain, atol=1e-12)
    # and the potential drops out of the full return: lambda = 1 gives G_t - V(s_t)
    adv1, ret1 = gae(r, V, d, last, 0.95, 1.0)
    np.testing.assert_allclose(adv1 + V, ret1)


def test_dropping_gamma_t_reverses_the_update_on_the_two_step_example():
    # the policy-gradients chapter, section REINFORCE and the factor gamma^t
    from rlnotes.mdp import TabularMDP
    c, gamma = 1.5, 0.5
    P = np.zeros((3, 2, 3))
    P[0, :, 1] = P[1, :, 2] = P[2, :, 2] = 1.0
    mdp = TabularMDP(P, np.array([[0.0, 1.0], [c, 0.0], [0.0, 0.0]]), gamma)
    start = np.array([1.0, 0.0, 0.0])
    for p in (0.2, 0.5, 0.8):
        th = np.log(p / (1 - p))
        pi = px.softmax_policy(np.array([[0.0, th]] * 3))
        per_state = px.policy_gradient_theorem(mdp, pi, start)[:, 1]
        nu = px.discounted_visitation(mdp, pi, start)
        true, dropped = per_state.sum(), (per_state * np.array([1.0, 1.0, 0.0]) / nu).sum()
        assert abs(true - p * (1 - p) * (1 - gamma * c)) < 1e-12 and true > 0
        assert abs(dropped - p * (1 - p) * (1 - c)) < 1e-12 and dropped < 0
