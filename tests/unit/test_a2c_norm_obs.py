"""A2C's observation normalisation (``rlnotes.a2c.train(norm_obs=True)``): the running normaliser
of :mod:`rlnotes.deeprl.normalize` in front of the policy and the value network of
:class:`rlnotes.deeprl.rollout.ActorCritic`, whose fast forward pass must apply it."""

import numpy as np
import pytest
import torch

from rlnotes import a2c
from rlnotes.deeprl.normalize import Normalized, normalize_inputs, standardize_inputs
from rlnotes.deeprl.rollout import ActorCritic, MostProbablePolicy

DISCRETE = {"discrete": True, "n": 2, "shape": ()}


def _fitted_net(act_info=DISCRETE):
    torch.manual_seed(0)
    net = ActorCritic(4, act_info, (8,))
    before = [p.detach().clone() for p in net.parameters()]
    norm = normalize_inputs(net)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    norm.update(torch.randn(200, 4, dtype=torch.float64) * 5 + 2)
    return net, norm


def test_every_forward_pass_of_the_rollout_net_applies_the_normaliser():
    net, norm = _fitted_net()
    assert isinstance(net.pi, Normalized) and net.pi.normalizer is net.v.normalizer is norm
    x = torch.as_tensor(np.random.default_rng(1).normal(2.0, 5.0, (6, 4)), dtype=torch.float32)
    logits = net.pi.body(norm(x))
    logits_raw = net.pi.body(x)
    assert not torch.allclose(logits, logits_raw)  # the normaliser matters for these inputs
    logp, _ = net.log_prob(x, torch.zeros(6, dtype=torch.long))
    torch.testing.assert_close(logp, torch.log_softmax(logits, -1)[:, 0])
    torch.testing.assert_close(net.value(x), net.v.body(norm(x)).squeeze(-1))
    _, _, values = net.act(x, torch.Generator().manual_seed(0))
    torch.testing.assert_close(values, net.v.body(norm(x)).squeeze(-1))
    policy = MostProbablePolicy(net)
    np.testing.assert_array_equal(policy(x.numpy()), logits.argmax(-1).numpy())


def test_a2c_norm_obs_learns_the_statistics_of_the_valid_observations():
    run = a2c.train("CartPole-v1", 1024, seed=3, norm_obs=True)
    norm = run.net.pi.normalizer
    assert run.net.v.normalizer is norm
    # 16 updates of 8 x 8 steps; the autoreset steps are left out
    assert 900 <= float(norm.count) < 1024 and (norm.var > 0).all()
    assert abs(float(norm.mean[2])) < 0.1  # the pole angle stays near upright


def test_a2c_norm_obs_is_on_by_default_and_changes_the_run_when_off():
    obs = np.random.default_rng(2).normal(0.0, 0.5, (200, 4)).astype(np.float32)
    base = a2c.train("CartPole-v1", 2048, seed=5)
    on = a2c.train("CartPole-v1", 2048, seed=5, norm_obs=True)
    off = a2c.train("CartPole-v1", 2048, seed=5, norm_obs=False)
    assert isinstance(base.net.pi, Normalized) and not isinstance(off.net.pi, Normalized)
    np.testing.assert_array_equal(base(obs), on(obs))
    for p, q in zip(base.net.parameters(), on.net.parameters()):
        assert torch.equal(p, q)
    assert any(not torch.equal(p, q) for p, q in zip(base.net.parameters(), off.net.parameters()))


@pytest.mark.parametrize("value", [1, "yes", None, 0.0])
def test_a2c_rejects_a_norm_obs_that_is_not_a_bool(value):
    with pytest.raises(ValueError, match="norm_obs"):
        a2c.train("CartPole-v1", 64, norm_obs=value)


@pytest.mark.parametrize("wrap", [normalize_inputs, standardize_inputs])
@pytest.mark.parametrize("net", [None, torch.nn.Linear(2, 2), "net"])
def test_input_layers_reject_a_net_without_two_networks(wrap, net):
    with pytest.raises(ValueError, match="net"):
        wrap(net)


def test_standardize_inputs_shares_one_identity_layer_until_fitted():
    torch.manual_seed(0)
    net = ActorCritic(4, DISCRETE, (8,))
    layer = standardize_inputs(net)
    assert net.pi.normalizer is net.v.normalizer is layer
    x = torch.randn(5, 4)
    torch.testing.assert_close(net.value(x), net.v.body(x).squeeze(-1))  # the identity
    layer.fit(torch.randn(50, 4) * 3 + 1)
    torch.testing.assert_close(net.value(x), net.v.body((x - layer.mean) / layer.std).squeeze(-1))


def test_act_normalises_once_and_matches_the_two_networks_on_normalised_inputs():
    net, norm = _fitted_net()
    x = torch.as_tensor(np.random.default_rng(2).normal(2.0, 5.0, (7, 4)), dtype=torch.float32)
    calls = []
    handle = norm.register_forward_hook(lambda *args: calls.append(1))
    try:
        actions, logp, values = net.act(x, torch.Generator().manual_seed(4))
    finally:
        handle.remove()
    assert len(calls) == 1  # one shared layer, applied once per act
    z = norm(x)
    assert torch.equal(values, net.v.body(z).squeeze(-1))
    torch.testing.assert_close(
        logp, torch.log_softmax(net.pi.body(z), -1).gather(-1, actions[:, None]).squeeze(-1))


def test_the_normalisers_cached_scale_follows_every_change_of_the_variance():
    """The layer caches sqrt(var + tol) between updates; an update, a loaded state or a
    direct write of ``var`` must each be seen by the next forward pass."""
    from rlnotes.deeprl.normalize import RunningNormalizer
    norm = RunningNormalizer(3)
    x = torch.tensor([[1.0, 2.0, 3.0]])
    torch.testing.assert_close(norm(x), x)  # the identity before any update

    def expected(n):
        return ((x.double() - n.mean) / torch.sqrt(n.var + n.tol)).clamp(-10, 10).float()

    norm.update(torch.randn(50, 3, dtype=torch.float64) * 3)
    assert torch.equal(norm(x), expected(norm))
    norm.update(torch.randn(50, 3, dtype=torch.float64) * 0.1 + 1)
    assert torch.equal(norm(x), expected(norm))
    norm.var.fill_(4.0)
    assert torch.equal(norm(x), expected(norm))
    other = RunningNormalizer(3)
    other.update(torch.randn(20, 3, dtype=torch.float64) * 7)
    norm.load_state_dict(other.state_dict())
    assert torch.equal(norm(x), expected(other))
