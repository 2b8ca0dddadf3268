"""rlnotes.trpo: conjugate gradient, Fisher-vector products, the natural step, the line search
and the trainer contract."""

import numpy as np
import pytest
import torch

from rlnotes import trpo
from rlnotes.deeprl import _onpolicy as op

OBS = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)


def _spd(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(n, n, generator=g, dtype=torch.float64)
    return M @ M.T + 0.1 * torch.eye(n, dtype=torch.float64)


def test_conjugate_gradient_matches_direct_solve():
    A = _spd(8)
    b = torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    damping = 0.05
    x = trpo.conjugate_gradient(lambda v: A @ v, b, iters=30, damping=damping, tol=0.0)
    direct = torch.linalg.solve(A + damping * torch.eye(8, dtype=torch.float64), b)
    assert torch.allclose(x, direct, atol=1e-8)
    # n steps solve an n-dimensional system (exact arithmetic; here up to rounding)
    x8 = trpo.conjugate_gradient(lambda v: A @ v, b, iters=8, damping=damping, tol=0.0)
    assert torch.allclose(x8, direct, atol=1e-6)
    # fewer steps: an approximation, not the solution
    x2 = trpo.conjugate_gradient(lambda v: A @ v, b, iters=2, damping=damping, tol=0.0)
    assert not torch.allclose(x2, direct, atol=1e-3)


@pytest.mark.parametrize("kwargs, name", [
    (dict(damping=0.0), "damping"), (dict(damping=-1.0), "damping"),
    (dict(iters=0), "iters"), (dict(iters=-3), "iters"),
])
def test_conjugate_gradient_bad_inputs(kwargs, name):
    with pytest.raises(ValueError, match=name):
        trpo.conjugate_gradient(lambda v: v, torch.ones(3), **kwargs)


def test_conjugate_gradient_bad_b_and_matvec():
    with pytest.raises(ValueError, match="b"):
        trpo.conjugate_gradient(lambda v: v, torch.ones(3, 3))
    with pytest.raises(ValueError, match="matvec"):
        trpo.conjugate_gradient("A", torch.ones(3))


def _tiny_policy():
    torch.manual_seed(0)
    net = op.ActorCritic(3, {"discrete": True, "n": 3, "shape": ()}, (4,)).double()
    for p in net.actor.parameters():  # a policy far from uniform, so F is not trivial
        p.data.normal_(0, 0.7)
    obs = torch.randn(6, 3, dtype=torch.float64)
    return net, obs


def explicit_fisher(net, obs):
    """F = mean_s sum_a pi(a|s) grad log pi(a|s) grad log pi(a|s)^T, by one gradient per
    (state, action)."""
    params = list(net.actor.parameters())
    P = sum(p.numel() for p in params)
    F = torch.zeros(P, P, dtype=torch.float64)
    for s in obs:
        logits = net.actor(s[None]).log_softmax(-1)[0]
        for a in range(logits.shape[0]):
            g = trpo.flat_grad(logits[a], params, retain_graph=True)
            F += logits[a].exp().detach() * torch.outer(g, g)
    return F / len(obs)


def test_fisher_vector_product_matches_explicit_fisher():
    net, obs = _tiny_policy()
    params = list(net.actor.parameters())
    old = net.actor(obs).detach()
    kl = net.kl_from(old, net.actor(obs)).mean()
    kl_grad = trpo.flat_grad(kl, params, create_graph=True)
    P = kl_grad.numel()
    F_fvp = torch.stack([trpo.fisher_vector_product(kl_grad, params, e)
                         for e in torch.eye(P, dtype=torch.float64)], dim=1)
    F = explicit_fisher(net, obs)
    assert torch.allclose(F_fvp, F, atol=1e-10)
    assert torch.allclose(F, F.T) and torch.linalg.eigvalsh(F).min() > -1e-10
    with pytest.raises(ValueError, match="v"):
        trpo.fisher_vector_product(kl_grad, params, torch.ones(P + 1, dtype=torch.float64))


def test_natural_step_meets_the_quadratic_kl_model():
    A = _spd(5)
    g = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    step, expected = trpo.natural_step(g, lambda v: A @ v, 0.01, cg_iters=20, damping=1e-3)
    Fd = A + 1e-3 * torch.eye(5, dtype=torch.float64)
    assert abs(0.5 * float(step @ Fd @ step) - 0.01) < 1e-10
    assert abs(expected - float(g @ step)) < 1e-12 and expected > 0
    # the direction is the natural gradient F^{-1} g
    nat = torch.linalg.solve(Fd, g)
    assert torch.allclose(step / step.norm(), nat / nat.norm(), atol=1e-8)
    for bad in (0.0, -0.1):
        with pytest.raises(ValueError, match="max_kl"):
            trpo.natural_step(g, lambda v: A @ v, bad)


def test_line_search_backtracks_into_the_trust_region():
    # objective: a concave quadratic; kl: the squared distance from theta0
    theta0 = torch.zeros(2, dtype=torch.float64)
    target = torch.tensor([1.0, 0.0], dtype=torch.float64)

    def objective(th):
        return -float(((th - target) ** 2).sum())

    def kl(th):
        return float(((th - theta0) ** 2).sum())

    full = torch.tensor([4.0, 0.0], dtype=torch.float64)  # overshoots: KL 16, worse objective
    theta, k = trpo.line_search(objective, kl, theta0, full, 8.0, 1.0, shrink=0.5)
    assert k == 2 and torch.allclose(theta, torch.tensor([1.0, 0.0], dtype=torch.float64))
    # a tight region: KL(0.25 * full) = 1 > 0.5, so it must shrink once more
    theta, k = trpo.line_search(objective, kl, theta0, full, 8.0, 0.5, shrink=0.5)
    assert k == 3 and kl(theta) <= 0.5
    # a step that never improves is refused
    theta, k = trpo.line_search(objective, kl, theta0, -full, 8.0, 100.0, max_backtracks=5)
    assert k == -1 and torch.equal(theta, theta0)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="max_kl"):
            trpo.line_search(objective, kl, theta0, full, 8.0, bad)
    with pytest.raises(ValueError, match="shrink"):
        trpo.line_search(objective, kl, theta0, full, 8.0, 1.0, shrink=1.0)


def test_contract_and_trust_region():
    calls = []
    policy = trpo.train("CartPole-v1", 2048, seed=0, max_kl=0.01,
                        callback=lambda s, p: calls.append(s) or False)
    actions = policy(OBS)
    assert actions.shape == (16,) and set(np.unique(actions)) <= {0, 1}
    assert calls[-1] >= 2048 and np.diff([0, *calls]).max() <= 2048
    for d in policy.diagnostics:  # every accepted step keeps the mean KL within delta
        assert d["kl"] <= 0.01 + 1e-7 and d["improvement"] >= 0


def test_same_arguments_same_run():
    a = trpo.train("CartPole-v1", 2048, seed=1)
    b = trpo.train("CartPole-v1", 2048, seed=1)
    assert a.diagnostics == b.diagnostics
    assert np.array_equal(a(OBS), b(OBS))


def test_box_actions():
    policy = trpo.train("Pendulum-v1", 1024, seed=0, num_envs=4, num_steps=128)
    actions = policy(np.zeros((3, 3), np.float32))
    assert actions.shape == (3, 1) and (np.abs(actions) <= 2).all()


def test_learns_cartpole():
    from rlnotes.deeprl import Evaluator
    evaluator = Evaluator("CartPole-v1", 0)
    scores = []

    def callback(steps, policy):
        if steps % 2048 == 0:
            scores.append(evaluator(policy).mean())
            return scores[-1] >= 475
        return False

    trpo.train("CartPole-v1", 20_480, seed=0, callback=callback)
    assert max(scores) >= 475


@pytest.mark.parametrize("kwargs, name", [
    (dict(env_id="NoSuchEnv-v9"), "env_id"),
    (dict(total_steps=0), "total_steps"),
    (dict(max_kl=0.0), "max_kl"),
    (dict(max_kl=-0.01), "max_kl"),
    (dict(cg_damping=0.0), "cg_damping"),
    (dict(cg_iters=0), "cg_iters"),
    (dict(gamma=1.01), "gamma"),
    (dict(critic_lr=-1.0), "critic_lr"),
    (dict(num_envs=64, num_steps=64), "num_envs"),
    (dict(anneal_kl=1), "anneal_kl"),
    (dict(anneal_kl="yes"), "anneal_kl"),
    (dict(anneal_kl=None), "anneal_kl"),
    (dict(standardize_obs=1), "standardize_obs"),
    (dict(standardize_obs="no"), "standardize_obs"),
    (dict(standardize_obs=None), "standardize_obs"),
])
def test_bad_inputs(kwargs, name):
    args = {"env_id": "CartPole-v1", "total_steps": 512}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        trpo.train(args.pop("env_id"), args.pop("total_steps"), **args)


def test_anneal_kl_decays_the_radius_linearly(record_keyword):
    """anneal_kl: each update's radius is max_kl (1 - steps / total_steps), steps counted
    before its rollout; without it every update uses max_kl."""
    seen = record_keyword(trpo, "_policy_step", "max_kl")
    policy = trpo.train("CartPole-v1", 4096, seed=0, max_kl=0.04, anneal_kl=True)
    np.testing.assert_allclose(seen, [0.04 * (1 - s / 4096) for s in range(0, 4096, 1024)])
    kls = [d["kl"] for d in policy.diagnostics]
    assert len(kls) == 4 and all(kl <= k * (1 + 1e-6) for kl, k in zip(kls, seen))
    assert [d["kappa"] for d in policy.diagnostics] == seen  # the diagnostics record the radius
    seen.clear()
    trpo.train("CartPole-v1", 4096, seed=0, max_kl=0.04, anneal_kl=False)
    assert seen == [0.04] * 4


@pytest.mark.parametrize("trainer, total", [("trpo", 3072), ("ppo", 1536)])
def test_standardize_obs_fits_the_first_rollout_once(monkeypatch, trainer, total):
    """standardize_obs (TRPO's input layer, an option of PPO's too): one Standardize in front
    of the actor and the critic, fitted to the valid observations of the first rollout before
    its log-probabilities and values are computed, and never refitted."""
    import importlib
    from rlnotes.deeprl import Standardize
    from rlnotes.deeprl import _onpolicy as op
    rollouts, fits = [], []
    collect, fit = op.collect_rollout, Standardize.fit

    def recording_collect(*args, **kwargs):
        out = collect(*args, **kwargs)
        rollouts.append(out[0])
        return out

    def recording_fit(self, obs, *args, **kwargs):
        fits.append(obs.clone())
        return fit(self, obs, *args, **kwargs)

    monkeypatch.setattr(op, "collect_rollout", recording_collect)
    monkeypatch.setattr(Standardize, "fit", recording_fit)
    policy = importlib.import_module(f"rlnotes.{trainer}").train("CartPole-v1", total, seed=0,
                                                                 standardize_obs=True)
    assert len(rollouts) == 3 and len(fits) == 1
    first = rollouts[0]
    np.testing.assert_array_equal(fits[0].numpy(), first.obs[first.valid])
    net = policy.net
    assert net.actor.normalizer is net.critic.normalizer
    np.testing.assert_allclose(net.actor.normalizer.mean.numpy(), first.obs[first.valid].mean(0),
                               rtol=1e-5, atol=1e-6)
    assert (net.actor.normalizer.std.numpy() > 0.01).all()
    # the greedy policy standardises the raw observations it is given
    obs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    with torch.no_grad():
        z = (torch.as_tensor(obs) - net.actor.normalizer.mean) / net.actor.normalizer.std
        np.testing.assert_array_equal(policy(obs), net.actor.body(z).argmax(-1).numpy())


def test_standardize_obs_off_leaves_the_network_unwrapped():
    policy = trpo.train("CartPole-v1", 1024, seed=0, standardize_obs=False)
    assert not hasattr(policy.net.actor, "normalizer")


@pytest.mark.parametrize("trainer", ["trpo", "ppo"])
def test_standardize_obs_is_left_unfitted_by_a_first_rollout_of_one_observation(trainer):
    """A first rollout of one valid observation has no standard deviation: the layer stays
    the identity instead of failing (a one-step run of one environment)."""
    import importlib
    policy = importlib.import_module(f"rlnotes.{trainer}").train(
        "CartPole-v1", 1, num_envs=1, standardize_obs=True)
    layer = policy.net.actor.normalizer
    assert torch.equal(layer.mean, torch.zeros(4)) and torch.equal(layer.std, torch.ones(4))


# --- the performance-difference lemma, exactly -------------------------------------------------

def _pdl_setup(seed=0, S=5, A=3, gamma=0.9):
    from rlnotes.mdp import random_mdp
    from rlnotes.pg_exact import softmax_policy
    mdp = random_mdp(S, A, gamma=gamma, seed=seed)
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((S, A))
    direction = rng.standard_normal((S, A))
    mu0 = rng.dirichlet(np.ones(S))
    return mdp, softmax_policy, theta, direction, mu0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_performance_difference_lemma_is_exact(seed):
    mdp, softmax, theta, direction, mu0 = _pdl_setup(seed)
    for scale in (0.01, 0.3, 3.0):
        r = trpo.performance_difference(mdp, softmax(theta), softmax(theta + scale * direction),
                                        mu0)
        assert abs(r["gain"] - r["lemma"]) < 1e-10 * max(1.0, abs(r["gain"]))
        assert r["gain"] >= r["bound"] - 1e-12  # Schulman et al. (2015), Theorem 1


def test_surrogate_matches_to_first_order():
    mdp, softmax, theta, direction, mu0 = _pdl_setup(0)
    errors = []
    for scale in (0.1, 0.01, 0.001):
        r = trpo.performance_difference(mdp, softmax(theta), softmax(theta + scale * direction),
                                        mu0)
        errors.append(abs(r["gain"] - r["surrogate"]))
    # the error is second order: 10x smaller steps give about 100x smaller errors
    assert errors[1] < errors[0] / 50 and errors[2] < errors[1] / 50


def test_performance_difference_of_a_policy_with_itself():
    mdp, softmax, theta, _, mu0 = _pdl_setup(1)
    r = trpo.performance_difference(mdp, softmax(theta), softmax(theta), mu0)
    assert abs(r["gain"]) < 1e-12 and abs(r["lemma"]) < 1e-12 and r["max_kl"] == 0.0


@pytest.mark.parametrize("change, name", [
    (lambda m, p, q, mu: ("not an mdp", p, q, mu), "mdp"),
    (lambda m, p, q, mu: (m, p[:, :2], q, mu), "policy"),
    (lambda m, p, q, mu: (m, p, q * 2, mu), "new_policy"),
    (lambda m, p, q, mu: (m, p, q, mu[:-1]), "p0"),
    (lambda m, p, q, mu: (m, p, q, mu * 3), "p0"),
])
def test_performance_difference_rejects(change, name):
    mdp, softmax, theta, direction, mu0 = _pdl_setup(0)
    args = change(mdp, softmax(theta), softmax(theta + direction), mu0)
    with pytest.raises(ValueError, match=name):
        trpo.performance_difference(*args)


def test_performance_difference_rejects_gamma_one():
    from rlnotes.mdp import random_mdp
    mdp = random_mdp(4, 2, gamma=1.0, seed=0, terminal_prob=0.2)
    pi = np.full((4, 2), 0.5)
    with pytest.raises(ValueError, match="gamma"):
        trpo.performance_difference(mdp, pi, pi, np.full(4, 0.25))
