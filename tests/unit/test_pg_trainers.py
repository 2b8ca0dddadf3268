"""Tests of the policy-gradient trainers (rlnotes.reinforce, rlnotes.a2c) and of the on-policy
rollout machinery (rlnotes.deeprl.rollout): the trainer contract, GAE with truncation, bad input."""

import numpy as np
import pytest
import torch

import rlnotes.envs  # noqa: F401  (registers rlnotes/GridWorld-v0, a Discrete-observation env)
from rlnotes import a2c, reinforce
from rlnotes.deeprl import evaluate, make_vec_env
from rlnotes.deeprl.rollout import (ActorCritic, Rollout, collect_rollout, masked_mean,
                                    rollout_advantages)
from rlnotes.returns import gae

TRAINERS = [a2c, reinforce]


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("trainer", TRAINERS)
@pytest.mark.parametrize("args, kwargs, name", [
    (("NoSuchEnv-v3", 100), {}, "env_id"),
    (("rlnotes/GridWorld-v0", 100), {}, "Box observation"),
    (("CartPole-v1", 0), {}, "total_steps"),
    (("CartPole-v1", -10), {}, "total_steps"),
    (("CartPole-v1", 100), {"learning_rate": -1e-3}, "learning_rate"),
    (("CartPole-v1", 100), {"learning_rate": 0.0}, "learning_rate"),
    (("CartPole-v1", 100), {"gamma": 1.5}, "gamma"),
    (("CartPole-v1", 100), {"gamma": -0.1}, "gamma"),
    (("Pendulum-v1", 100), {"init_std": 0.0}, "init_std"),
    (("Pendulum-v1", 100), {"init_std": -1.0}, "init_std"),
    (("CartPole-v1", 100), {"seed": -1}, "seed"),
    (("CartPole-v1", 100), {"callback": 3}, "callback"),
    (("CartPole-v1", 100), {"optimizer": "sgd"}, "optimizer"),
    (("CartPole-v1", 100), {"max_grad_norm": 0.0}, "max_grad_norm"),
])
def test_train_rejects_bad_input(trainer, args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        trainer.train(*args, **kwargs)


@pytest.mark.parametrize("kwargs, name", [
    ({"lam": 1.2}, "lam"), ({"num_envs": 64, "num_steps": 64}, "num_steps"),
    ({"ent_coef": -0.1}, "ent_coef"), ({"num_steps": 0}, "num_steps"),
])
def test_a2c_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        a2c.train("CartPole-v1", 100, **kwargs)


@pytest.mark.parametrize("kwargs, name", [
    ({"psi": "q"}, "psi"), ({"baseline": "mean"}, "baseline"), ({"num_envs": 0}, "num_envs"),
])
def test_reinforce_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        reinforce.train("CartPole-v1", 100, **kwargs)


# ---------------------------------------------------------------- the contract
SMALL = {a2c: dict(num_envs=4, num_steps=8, hidden_sizes=(16,)),
         reinforce: dict(num_envs=4, hidden_sizes=(16,))}


def _run(trainer, seed=3, steps=3_000, **kwargs):
    log = []

    def callback(steps, policy):
        log.append((steps, policy.net.pi(torch.zeros(1, 4)).detach().clone()))

    policy = trainer.train("CartPole-v1", steps, seed=seed, callback=callback,
                           **{**SMALL[trainer], **kwargs})
    return policy, log


@pytest.mark.parametrize("trainer", TRAINERS)
def test_same_arguments_same_run_step_for_step(trainer):
    p1, log1 = _run(trainer)
    p2, log2 = _run(trainer)
    assert len(log1) > 2
    assert [s for s, _ in log1] == [s for s, _ in log2]
    for (_, x1), (_, x2) in zip(log1, log2):
        assert torch.equal(x1, x2)
    for a, b in zip(p1.net.parameters(), p2.net.parameters()):
        assert torch.equal(a, b)
    p3, _ = _run(trainer, seed=4)
    assert not all(torch.equal(a, b) for a, b in zip(p1.net.parameters(), p3.net.parameters()))


@pytest.mark.parametrize("trainer", TRAINERS)
def test_callback_at_least_every_2048_steps_and_budget(trainer):
    _, log = _run(trainer, steps=6_000)
    steps = [s for s, _ in log]
    assert steps == sorted(steps) and steps[0] <= 2048
    assert np.all(np.diff([0] + steps) <= 2048)
    assert steps[-1] <= 6_000 + 2048


@pytest.mark.parametrize("trainer", TRAINERS)
def test_callback_returning_true_stops_training(trainer):
    calls = []
    trainer.train("CartPole-v1", 50_000, seed=0, callback=lambda s, p: calls.append(s) or True,
                  **SMALL[trainer])
    assert len(calls) == 1


@pytest.mark.parametrize("trainer", TRAINERS)
def test_policy_is_most_probable_action_and_pure(trainer):
    policy = trainer.train("CartPole-v1", 500, seed=1, **SMALL[trainer])
    obs = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    state = torch.random.get_rng_state()
    a1, a2 = policy(obs), policy(obs)
    assert torch.equal(state, torch.random.get_rng_state())
    np.testing.assert_array_equal(a1, a2)
    assert a1.shape == (32,)
    logits = policy.net.pi(torch.as_tensor(obs)).detach().numpy()
    np.testing.assert_array_equal(a1, logits.argmax(1))
    with pytest.raises(ValueError, match="obs"):
        policy(np.zeros((3, 5), np.float32))


@pytest.mark.parametrize("trainer", TRAINERS)
def test_train_leaves_global_torch_state_alone(trainer):
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    threads = torch.get_num_threads()
    trainer.train("CartPole-v1", 300, seed=0, **SMALL[trainer])
    assert torch.equal(before, torch.random.get_rng_state())
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("trainer", TRAINERS)
def test_box_actions_gaussian_policy(trainer):
    policy = trainer.train("Pendulum-v1", 1_000, seed=0, hidden_sizes=(16,), num_envs=4,
                           init_std=0.5)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    a = policy(obs)
    assert a.shape == (5, 1) and np.all(np.abs(a) <= 2.0)
    assert policy.net.log_std.shape == (1,)


def test_reinforce_options_run():
    for psi in ("total", "reward_to_go"):
        for baseline in ("none", "value"):
            reinforce.train("CartPole-v1", 600, seed=0, psi=psi, baseline=baseline,
                            normalize_advantages=True, **SMALL[reinforce])


def test_acrobot_runs():  # no native vector env: SyncVectorEnv
    a2c.train("Acrobot-v1", 256, seed=0, num_envs=2, num_steps=8, hidden_sizes=(8,))


def test_a2c_learns_cartpole_with_the_default_settings():
    from rlnotes.deeprl.curves import learning_curves
    _, scores = learning_curves(a2c.train, "CartPole-v1", 24_576, [1])
    assert scores.max() >= 475  # a perfect evaluation within 24,576 steps (the chapter's run: 4,096)


def test_reinforce_learns_cartpole_with_the_default_settings():
    policy = reinforce.train("CartPole-v1", 40_000, seed=0)
    assert evaluate(policy, "CartPole-v1", seed=0).mean() >= 195


# ---------------------------------------------------------------- pieces
def test_episode_psi_total_and_reward_to_go():
    r = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 0.0]])
    active = np.array([[1, 1], [1, 1], [1, 0]], bool)
    G = reinforce.episode_psi(r, active, 0.5, "reward_to_go")
    np.testing.assert_allclose(G[:, 0], [1.75, 1.5, 1.0])
    np.testing.assert_allclose(G[:, 1], [2.0, 2.0, 0.0])
    T = reinforce.episode_psi(r, active, 0.5, "total")
    np.testing.assert_allclose(T[:, 0], [1.75] * 3)
    np.testing.assert_allclose(T[:, 1], [2.0, 2.0, 0.0])
    with pytest.raises(ValueError, match="psi"):
        reinforce.episode_psi(r, active, 0.5, "q")
    with pytest.raises(ValueError, match="active"):
        reinforce.episode_psi(r, active[:2], 0.5)
    with pytest.raises(ValueError, match="gamma"):
        reinforce.episode_psi(r, active, 2.0)


def _rollout(rewards, values, term, trunc, valid, last_value):
    T, N = np.shape(rewards)
    z = np.zeros((T, N), np.float32)
    return Rollout(np.zeros((T, N, 1), np.float32), np.zeros((T, N), np.int64), z,
                   np.asarray(values, np.float32), np.asarray(rewards, np.float32),
                   np.asarray(term, bool), np.asarray(trunc, bool), np.asarray(valid, bool),
                   np.zeros((N, 1), np.float32), np.asarray(last_value, np.float32))


def test_rollout_advantages_truncation_bootstraps_and_termination_does_not():
    # one env: steps 0, 1 (truncated at 1), 2 is the autoreset step (invalid), 3 a new episode
    g = 0.9
    ro = _rollout([[1.0], [1.0], [0.0], [1.0]], [[2.0], [3.0], [5.0], [4.0]],
                  [[0], [0], [0], [0]], [[0], [1], [0], [0]], [[1], [1], [0], [1]], [6.0])
    adv, ret = rollout_advantages(ro, g, 1.0)
    # truncated at step 1: G_1 = 1 + g V(s_trunc) = 1 + 0.9 * 5 (values[2] is s_trunc's value)
    np.testing.assert_allclose(ret[1, 0], 1 + g * 5.0, rtol=1e-6)
    np.testing.assert_allclose(ret[0, 0], 1 + g * (1 + g * 5.0), rtol=1e-6)
    np.testing.assert_allclose(ret[3, 0], 1 + g * 6.0, rtol=1e-6)
    ro_term = _rollout([[1.0], [1.0], [0.0], [1.0]], [[2.0], [3.0], [5.0], [4.0]],
                       [[0], [1], [0], [0]], [[0], [0], [0], [0]], [[1], [1], [0], [1]], [6.0])
    _, ret = rollout_advantages(ro_term, g, 1.0)
    np.testing.assert_allclose(ret[1, 0], 1.0)
    np.testing.assert_allclose(ret[0, 0], 1 + g, rtol=1e-6)
    # truncation at the last step bootstraps from last_value
    ro_last = _rollout([[1.0], [1.0]], [[2.0], [3.0]], [[0], [0]], [[0], [1]], [[1], [1]], [7.0])
    _, ret = rollout_advantages(ro_last, g, 1.0)
    np.testing.assert_allclose(ret[1, 0], 1 + g * 7.0, rtol=1e-6)


def test_rollout_advantages_equal_gae_without_episode_ends():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    last = rng.normal(size=3)
    z = np.zeros((6, 3))
    ro = _rollout(r, v, z, z, np.ones((6, 3)), last)
    for lam in (0.0, 0.7, 1.0):
        adv, ret = rollout_advantages(ro, 0.95, lam)
        a2, r2 = gae(r.astype(np.float32).astype(np.float64), v.astype(np.float32).astype(
            np.float64), None, last.astype(np.float32).astype(np.float64), 0.95, lam)
        np.testing.assert_allclose(adv, a2, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="lam"):
        rollout_advantages(ro, 0.9, 1.5)
    with pytest.raises(ValueError, match="gamma"):
        rollout_advantages(ro, -0.9, 0.5)


def test_collect_rollout_marks_autoreset_steps_invalid():
    envs = make_vec_env("CartPole-v1", 3)
    info = {"discrete": True, "n": 2, "shape": ()}
    torch.manual_seed(0)
    net = ActorCritic(4, info, (8,))
    obs, _ = envs.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    ro, obs, autoreset = collect_rollout(envs, net, obs.astype(np.float32),
                                         np.zeros(3, bool), 200, g)
    envs.close()
    ended = ro.terminated | ro.truncated
    assert ended.any()
    np.testing.assert_array_equal(ro.valid[1:], ~ended[:-1])
    assert ro.valid[0].all()
    # logp of the stored actions matches the network's log_prob
    logp, _ = net.log_prob(torch.as_tensor(ro.obs.reshape(-1, 4)),
                           torch.as_tensor(ro.actions.reshape(-1)))
    np.testing.assert_allclose(logp.detach().numpy(), ro.logp.reshape(-1), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="num_steps"):
        collect_rollout(envs, net, obs, autoreset, 0, g)


def test_actor_critic_gaussian_log_prob_and_bad_std():
    info = {"discrete": False, "shape": (2,), "low": -np.ones(2), "high": np.ones(2)}
    net = ActorCritic(3, info, (8,), init_std=0.5)
    o = torch.randn(5, 3)
    a = torch.randn(5, 2)
    logp, ent = net.log_prob(o, a)
    mean = net.pi(o)
    ref = torch.distributions.Normal(mean, 0.5).log_prob(a).sum(-1)
    torch.testing.assert_close(logp, ref)
    torch.testing.assert_close(ent, torch.distributions.Normal(mean, 0.5).entropy().sum(-1))
    for bad in (0.0, -0.3, float("nan")):
        with pytest.raises(ValueError, match="init_std"):
            ActorCritic(3, info, (8,), init_std=bad)


def test_a2c_loss_parts_and_mask():
    logp = torch.tensor([-0.5, -1.0, -2.0], requires_grad=True)
    adv = torch.tensor([1.0, -1.0, 5.0])
    V = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    G = torch.tensor([1.0, 1.0, 0.0])
    H = torch.tensor([0.6, 0.6, 0.6])
    mask = torch.tensor([True, True, False])
    loss, pl, vl = a2c.a2c_loss(logp, adv, V, G, H, mask, vf_coef=0.5, ent_coef=0.1)
    assert pl.item() == pytest.approx(-(-0.5 * 1.0 + -1.0 * -1.0) / 2)
    assert vl.item() == pytest.approx((1.0 + 0.0) / 2)
    assert loss.item() == pytest.approx(pl.item() + 0.25 - 0.06)
    loss.backward()
    assert logp.grad[2] == 0 and V.grad[2] == 0
    with pytest.raises(ValueError, match="adv"):
        a2c.a2c_loss(logp, adv[:2], V, G, H)
    with pytest.raises(ValueError, match="vf_coef"):
        a2c.a2c_loss(logp, adv, V, G, H, vf_coef=-1.0)
    with pytest.raises(ValueError, match="mask"):
        a2c.a2c_loss(logp, adv, V, G, H, mask[:2])
    assert masked_mean(torch.tensor([1.0, 3.0]), torch.tensor([True, False])).item() == 1.0


# ---------------------------------------------------------------- the chapters' claims
def test_reinforce_variants_on_cartpole_as_the_chapter_states():
    from rlnotes.deeprl.curves import learning_curves
    variants = {"total": dict(psi="total", baseline="none"),
                "rtg": dict(psi="reward_to_go", baseline="none"),
                "base": dict(psi="reward_to_go", baseline="value")}
    curves = {k: learning_curves(reinforce.train, "CartPole-v1", 24_576, [0, 1, 2], **v)[1]
              for k, v in variants.items()}
    mean = {k: Y.mean() for k, Y in curves.items()}
    assert mean["total"] < mean["rtg"] < mean["base"]
    reached = curves["total"].max(axis=1) >= 475
    assert reached.sum() >= 1
    assert curves["base"][:, -1].min() < 475


def test_learning_curves_checkpoints_and_bad_input():
    from rlnotes.deeprl.curves import learning_curves
    steps, Y = learning_curves(a2c.train, "CartPole-v1", 4096, [0, 1], num_envs=4,
                               num_steps=8, hidden_sizes=(8,))
    np.testing.assert_array_equal(steps, [2048, 4096])
    assert Y.shape == (2, 2) and np.isfinite(Y).all() and (Y >= 8).all()
    with pytest.raises(ValueError, match="total_steps"):
        learning_curves(a2c.train, "CartPole-v1", 1000, [0])
    with pytest.raises(ValueError, match="seeds"):
        learning_curves(a2c.train, "CartPole-v1", 4096, [])
    with pytest.raises(ValueError, match="train"):
        learning_curves(None, "CartPole-v1", 4096, [0])


def test_a2c_claims_of_the_actor_critic_chapter():
    # the chapter's section A2C on CartPole: defaults, lambda and rollout length
    from rlnotes.deeprl.curves import learning_curves
    steps, default = learning_curves(a2c.train, "CartPole-v1", 24_576, [0, 1, 2])
    first = [steps[np.argmax(row >= 475)] if (row >= 475).any() else None for row in default]
    assert sum(f is not None for f in first) >= 2  # two of three seeds within the budget
    runs = {"default": {}, "lam0": dict(lam=0.0), "lam1": dict(lam=1.0), "n2": dict(num_steps=2),
            "n32": dict(num_steps=32)}
    seed_auc = {k: learning_curves(a2c.train, "CartPole-v1", 12_288, [0, 1, 2], **kw)[1].mean(axis=1)
                for k, kw in runs.items()}
    assert min(v.min() for v in seed_auc.values()) > 40  # every run learns
    for k in ("lam0", "lam1", "n2", "n32"):  # three seeds: each range overlaps the defaults'
        assert seed_auc[k].min() < seed_auc["default"].max()
        assert seed_auc[k].max() > seed_auc["default"].min()
