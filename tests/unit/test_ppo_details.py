"""PPO's implementation-detail options (chapter "TRPO and PPO", section Implementation details
that decide PPO's results): observation normalisation, value clipping, no clip, ratio logging."""

import numpy as np
import pytest
import torch

from rlnotes import ppo
from rlnotes.deeprl import _onpolicy as op
from rlnotes.deeprl.normalize import Normalized, RunningNormalizer, normalize_inputs


# --- RunningNormalizer -----------------------------------------------------------------------

def test_running_normalizer_matches_the_statistics_of_everything_seen():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 4)) for n in (1, 7, 50, 3)]
    norm = RunningNormalizer(4)
    x = torch.tensor([[1.0, -2.0, 0.5, 4.0]])
    assert torch.equal(norm(x), x)  # the identity before any update
    for b in batches:
        norm.update(torch.as_tensor(b))
    seen = np.concatenate(batches)
    np.testing.assert_allclose(norm.mean.numpy(), seen.mean(0), rtol=1e-12)
    np.testing.assert_allclose(norm.var.numpy(), seen.var(0), rtol=1e-10)
    assert float(norm.count) == len(seen)
    z = norm(torch.as_tensor(seen, dtype=torch.float32))
    assert z.dtype == torch.float32
    np.testing.assert_allclose(z.numpy().mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(z.numpy().std(0), 1.0, atol=1e-4)


def test_running_normalizer_clips():
    norm = RunningNormalizer(1, clip=2.0)
    norm.update(torch.tensor([[-1.0], [1.0]]))  # mean 0, var 1
    assert torch.allclose(norm(torch.tensor([[100.0], [-100.0], [0.5]])),
                          torch.tensor([[2.0], [-2.0], [0.5]]))


@pytest.mark.parametrize("kw, name", [({"dim": 0}, "dim"), ({"dim": 2.0}, "dim"),
                                      ({"dim": 2, "clip": 0.0}, "clip"),
                                      ({"dim": 2, "clip": float("inf")}, "clip"),
                                      ({"dim": 2, "tol": -1e-8}, "tol"),
                                      ({"dim": True}, "dim")])
def test_running_normalizer_rejects_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        RunningNormalizer(**kw)


@pytest.mark.parametrize("x", [torch.zeros(3), torch.zeros(2, 3), torch.zeros(0, 2),
                               torch.tensor([[float("nan"), 0.0]])])
def test_running_normalizer_update_rejects_bad_batches(x):
    with pytest.raises(ValueError, match="x must"):
        RunningNormalizer(2).update(x)


def test_normalize_inputs_keeps_the_parameters_and_the_greedy_policy_normalises():
    torch.manual_seed(0)
    net = op.ActorCritic(4, {"discrete": True, "n": 2, "shape": ()}, (8,))
    before = [p.detach().clone() for p in net.parameters()]
    norm = normalize_inputs(net)
    after = list(net.parameters())
    assert len(before) == len(after) and all(torch.equal(a, b) for a, b in zip(before, after))
    assert isinstance(net.actor, Normalized) and net.actor.normalizer is net.critic.normalizer
    norm.update(torch.randn(100, 4) * 5 + 2)
    policy = op.GreedyPolicy(net)
    obs = np.random.default_rng(1).normal(2.0, 5.0, (6, 4)).astype(np.float32)
    expected = net.actor.body(norm(torch.as_tensor(obs))).argmax(-1).numpy()
    np.testing.assert_array_equal(policy(obs), expected)


@pytest.mark.parametrize("net", [None, torch.nn.Linear(2, 2), "net"])
def test_normalize_inputs_rejects_a_net_without_actor_and_critic(net):
    with pytest.raises(ValueError, match="net"):
        normalize_inputs(net)


# --- value_loss ------------------------------------------------------------------------------

def test_value_loss_without_clip_is_half_the_mean_squared_error():
    v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    ret = torch.tensor([0.0, 2.0, 5.0], dtype=torch.float64)
    assert float(ppo.value_loss(v, v, ret)) == pytest.approx(0.5 * (1 + 0 + 4) / 3)


def test_value_clipping_zeroes_the_gradient_only_past_the_range_and_away_from_the_fit():
    old = torch.zeros(4, dtype=torch.float64)
    ret = torch.tensor([10.0, 10.0, -10.0, 0.05], dtype=torch.float64)
    v = torch.tensor([1.0, 0.1, 1.0, 0.5], dtype=torch.float64, requires_grad=True)
    ppo.value_loss(v, old, ret, vf_clip=0.2).backward()
    grad = v.grad.numpy() * 4  # d/dv of 0.5 (v - G)^2 is (v - G) where unclipped
    # moved 1.0 toward a target at 10: clipped branch (0.2 - 10)^2 is the larger: zero gradient
    assert grad[0] == 0.0
    # inside the range: the plain gradient
    assert grad[1] == pytest.approx(0.1 - 10.0)
    # moved 1.0 away from a target at -10: the unclipped error is the larger, gradient kept
    assert grad[2] == pytest.approx(1.0 + 10.0)
    # moved past a target inside the range: overshooting error is the larger one, kept
    assert grad[3] == pytest.approx(0.5 - 0.05)


@pytest.mark.parametrize("args, kw, name", [
    (([1.0, 2.0], torch.zeros(2), torch.zeros(2)), {}, "values"),
    ((torch.zeros(2), torch.zeros(3), torch.zeros(2)), {}, "old_values"),
    ((torch.zeros(2), torch.zeros(2), torch.zeros(2)), {"vf_clip": 0.0}, "vf_clip"),
    ((torch.zeros(2), torch.zeros(2), torch.tensor([0.0, float("nan")])), {}, "returns"),
    ((torch.zeros(0), torch.zeros(0), torch.zeros(0)), {}, "values")])
def test_value_loss_rejects_bad_inputs(args, kw, name):
    with pytest.raises(ValueError, match=name):
        ppo.value_loss(*args, **kw)


# --- ratio_stats -----------------------------------------------------------------------------

def test_ratio_stats_counts_zero_gradient_samples_apart_from_those_outside_the_range():
    ratio = torch.tensor([1.5, 1.5, 0.5, 0.5, 1.0], dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    s = ppo.ratio_stats(torch.log(ratio), torch.zeros(5, dtype=torch.float64), adv, 0.2)
    assert s["max_ratio"] == pytest.approx(1.5) and s["min_ratio"] == pytest.approx(0.5)
    assert s["outside_fraction"] == pytest.approx(4 / 5)
    assert s["zero_grad_fraction"] == pytest.approx(2 / 5)  # 1.5 with A > 0, 0.5 with A < 0
    # the zero-gradient samples are exactly those of ppo_clip_loss's zero gradient
    logp = torch.log(ratio).requires_grad_()
    ppo.ppo_clip_loss(logp, torch.zeros(5, dtype=torch.float64), adv, 0.2).backward()
    assert (logp.grad == 0).double().mean().item() == pytest.approx(s["zero_grad_fraction"])


@pytest.mark.parametrize("args, name", [
    ((torch.zeros(3), torch.zeros(3), torch.zeros(3), 1.0), "clip_eps"),
    ((torch.zeros(3), torch.zeros(2), torch.zeros(3), 0.2), "old_logp"),
    ((torch.zeros(3), torch.zeros(3), np.zeros(3), 0.2), "advantages"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(3), -0.1), "clip_eps")])
def test_ratio_stats_rejects_bad_inputs(args, name):
    with pytest.raises(ValueError, match=name):
        ppo.ratio_stats(*args)


# --- the trainer's options -------------------------------------------------------------------

@pytest.mark.parametrize("kw, name", [({"norm_obs": 1}, "norm_obs"), ({"vf_clip": -1.0}, "vf_clip"),
                                      ({"standardize_obs": 1}, "standardize_obs"),
                                      ({"standardize_obs": "yes"}, "standardize_obs"),
                                      ({"standardize_obs": True, "norm_obs": True},
                                       "standardize_obs"),
                                      ({"vf_clip": 0}, "vf_clip"),
                                      ({"log_ratios": "yes"}, "log_ratios"),
                                      ({"clip_eps": 1.0}, "clip_eps")])
def test_train_rejects_bad_options(kw, name):
    with pytest.raises(ValueError, match=name):
        ppo.train("CartPole-v1", 256, **kw)


def test_options_off_by_default_and_each_changes_the_run():
    base = ppo.train("CartPole-v1", 1024, seed=7)
    off = ppo.train("CartPole-v1", 1024, seed=7, norm_obs=False, standardize_obs=True,
                    vf_clip=None, log_ratios=False)
    assert base.diagnostics == off.diagnostics
    for kw in ({"norm_obs": True, "standardize_obs": False}, {"standardize_obs": False},
               {"vf_clip": 0.3}, {"clip_eps": None}):
        run = ppo.train("CartPole-v1", 1024, seed=7, **kw)
        assert run.diagnostics != base.diagnostics, kw
    logged = ppo.train("CartPole-v1", 1024, seed=7, log_ratios=True)
    for d, d0 in zip(logged.diagnostics, base.diagnostics):  # logging does not change training
        assert {k: d[k] for k in d0} == d0
        assert d["max_ratio"] >= 1.0 >= d["min_ratio"] > 0
        assert 0.0 <= d["zero_grad_fraction"] <= d["outside_fraction"] == d0["clip_fraction"]


def test_norm_obs_learns_statistics_and_no_clip_lets_ratios_escape():
    normed = ppo.train("CartPole-v1", 2048, seed=1, norm_obs=True, standardize_obs=False)
    norm = normed.net.actor.normalizer
    assert float(norm.count) > 1500 and (norm.var > 0).all()
    unclipped = ppo.train("CartPole-v1", 2048, seed=1, clip_eps=None, n_epochs=20,
                          log_ratios=True)
    clipped = ppo.train("CartPole-v1", 2048, seed=1, n_epochs=20, log_ratios=True)
    assert all(np.isnan(d["clip_fraction"]) for d in unclipped.diagnostics)
    assert max(d["max_ratio"] for d in unclipped.diagnostics) > \
        max(d["max_ratio"] for d in clipped.diagnostics)
