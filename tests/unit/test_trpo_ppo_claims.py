"""The numerical claims of the chapter "TRPO and PPO" about training runs, re-checked here with
the same seeds and settings as the chapter (the notebook asserts them too)."""

import numpy as np

import rlnotes.envs  # noqa: F401  (registers rlnotes/PointMass-v0)
from rlnotes import ppo, trpo
from rlnotes.deeprl import _onpolicy as op
from rlnotes.deeprl import evaluate


def test_trpo_seed0_learns_within_20480_steps_inside_the_trust_region():
    _, scores, policy = op.evaluation_curve(trpo.train, "CartPole-v1", 20_480, seed=0,
                                            stop_at=475)
    assert scores.max() > 200  # one seed: a wide margin only
    import inspect
    max_kl = inspect.signature(trpo.train).parameters["max_kl"].default
    kappas = [d["kappa"] for d in policy.diagnostics]
    assert kappas[0] == max_kl and all(b < a for a, b in zip(kappas, kappas[1:]))  # annealed
    assert all(d["kl"] <= d["kappa"] + 1e-7 for d in policy.diagnostics)


def test_some_seed_of_each_method_reaches_475_and_every_run_learns_in_16384_steps():
    """What holds over the seeds and the floating-point builds of tools/builds.py (which seeds
    cross 475 depends on the CPU's rounding)."""
    ppo_best = np.array([op.evaluation_curve(ppo.train, "CartPole-v1", 16_384, seed=seed)[1].max()
                         for seed in range(3)])
    trpo_best = np.array([op.evaluation_curve(trpo.train, "CartPole-v1", 16_384, seed=seed)[1].max()
                          for seed in range(3)])
    assert (ppo_best >= 475).any() and (trpo_best >= 475).any()
    assert (ppo_best > 200).all() and (trpo_best > 200).all()


def test_ablation():
    def runs(**kw):
        return np.array([op.evaluation_curve(ppo.train, "CartPole-v1", 8192, seed=s, **kw)[1]
                         for s in (0, 1, 2)])
    variants = {"defaults": {}, "advantage normalisation": {"norm_adv": True},
                "no gradient clipping": {"max_grad_norm": None}, "1 epoch": {"n_epochs": 1},
                "20 epochs": {"n_epochs": 20}, "constant learning rate": {"anneal_lr": False},
                "critic at the actor's step size": {"vf_lr_scale": 1.0}}
    rows = {name: runs(**kw) for name, kw in variants.items()}
    mean = {name: r.mean() for name, r in rows.items()}
    assert mean["1 epoch"] == min(mean.values())
    for name in ("no gradient clipping", "constant learning rate"):  # ranges that overlap
        assert rows[name].mean(axis=1).min() < rows["defaults"].mean(axis=1).max(), name
        assert rows[name].mean(axis=1).max() > rows["defaults"].mean(axis=1).min(), name
    # the signs the chapter reads, of the means over the three seeds
    assert mean["advantage normalisation"] > mean["defaults"] > mean["20 epochs"]
    assert mean["critic at the actor's step size"] < mean["defaults"]


def test_early_stopping_on_kl():
    early = ppo.train("CartPole-v1", 8192, seed=0, n_epochs=10, target_kl=0.005)
    late = ppo.train("CartPole-v1", 8192, seed=0, n_epochs=10)
    assert min(d["epochs"] for d in early.diagnostics) < 10
    assert np.mean([d["approx_kl"] for d in early.diagnostics]) < \
        np.mean([d["approx_kl"] for d in late.diagnostics])
    assert all(d["approx_kl"] >= 0 for d in late.diagnostics)


def test_gaussian_ppo_on_point_mass():
    _, scores, policy = op.evaluation_curve(
        ppo.train, "rlnotes/PointMass-v0", 16_384, seed=0, eval_every=4096, num_envs=16,
        num_steps=128, gamma=0.95, lam=0.95, learning_rate=3e-3, anneal_lr=False,
        anneal_clip=False, vf_lr_scale=1.0, norm_adv=True)
    do_nothing = evaluate(lambda o: np.zeros((len(o), 1), np.float32), "rlnotes/PointMass-v0", 0)
    assert do_nothing.mean() < -50 and scores[-1] > -10
    assert policy.net.log_std.item() < -0.2


def test_performance_difference_table():
    """The chapter's exact check of the lemma, the surrogate and TRPO's bound."""
    from rlnotes.mdp import random_mdp
    from rlnotes.pg_exact import exact_gradient, softmax_policy
    mdp = random_mdp(5, 3, gamma=0.9, seed=0)
    rng = np.random.default_rng(0)
    mu0 = rng.dirichlet(np.ones(5))
    theta = rng.standard_normal((5, 3))
    direction = exact_gradient(mdp, theta, mu0)
    direction /= np.abs(direction).max()
    pdl = {size: trpo.performance_difference(mdp, softmax_policy(theta),
                                             softmax_policy(theta + size * direction), mu0)
           for size in (0.001, 0.01, 0.1, 1.0, 10.0)}
    for r in pdl.values():
        assert abs(r["gain"] - r["lemma"]) < 1e-10 * max(1.0, abs(r["gain"]))
        assert r["gain"] >= r["bound"]
    err = {size: abs(r["gain"] - r["surrogate"]) for size, r in pdl.items()}
    assert err[0.001] < err[0.01] / 50 < err[0.1] / 2500
    assert pdl[0.001]["bound"] > 0 and pdl[0.01]["bound"] > 0
    assert all(pdl[size]["bound"] < 0 < pdl[size]["gain"] for size in (0.1, 1.0, 10.0))
    assert 100 < pdl[1.0]["C"] < 1000  # "C is in the hundreds"


def test_penalty_gradient_at_old_policy_is_the_surrogates():
    import torch
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 3, dtype=torch.float64, generator=gen).requires_grad_()
    actions = torch.randint(0, 3, (64, 1), generator=gen)
    adv = torch.randn(64, dtype=torch.float64, generator=gen)
    old = logits.detach().log_softmax(-1)

    def grad(beta):
        log_pi = logits.log_softmax(-1)
        kl = (old.exp() * (old - log_pi)).sum(-1)
        loss = ppo.ppo_penalty_loss(log_pi.gather(1, actions).squeeze(1),
                                    old.gather(1, actions).squeeze(1), adv, kl, beta)
        return torch.autograd.grad(loss, logits)[0]

    assert (grad(10.0) - grad(0.0)).abs().max().item() < 1e-12
    assert grad(0.0).abs().max().item() > 1e-3  # the surrogate's gradient itself is not zero
