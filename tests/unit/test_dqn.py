"""Tests of rlnotes.dqn: the trainer contract, its pieces, bad input."""

import copy

import numpy as np
import pytest
import torch

import rlnotes.envs  # noqa: F401  (registers rlnotes/GridWorld-v0, a Discrete-observation env)
from rlnotes import dqn
from rlnotes.deeprl import evaluate

SMALL = dict(learning_starts=200, exploration_steps=500, batch_size=32, hidden_sizes=(16,))


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("args, kwargs, name", [
    (("NoSuchEnv-v3", 100), {}, "env_id"),
    (("Pendulum-v1", 100), {}, "Discrete"),          # Box actions: not for DQN
    (("rlnotes/GridWorld-v0", 100), {}, "Box observation"),
    (("CartPole-v1", 0), {}, "total_steps"),
    (("CartPole-v1", -10), {}, "total_steps"),
    (("CartPole-v1", 100), {"learning_rate": -1e-3}, "learning_rate"),
    (("CartPole-v1", 100), {"learning_rate": 0.0}, "learning_rate"),
    (("CartPole-v1", 100), {"gamma": 1.5}, "gamma"),
    (("CartPole-v1", 100), {"gamma": -0.1}, "gamma"),
    (("CartPole-v1", 100), {"buffer_size": 10, "batch_size": 64}, "buffer_size"),
    (("CartPole-v1", 100), {"loss": "l1"}, "loss"),
    (("CartPole-v1", 100), {"tau": 0.0}, "tau"),
    (("CartPole-v1", 100), {"num_envs": 8, "train_freq": 512}, "train_freq"),
    (("CartPole-v1", 100), {"seed": -1}, "seed"),
    (("CartPole-v1", 100), {"callback": 3}, "callback"),
    (("CartPole-v1", 100), {"epsilon_end": 2.0}, "epsilon_end"),
    (("CartPole-v1", 100), {"standardize_obs": 1}, "standardize_obs"),
    (("CartPole-v1", 100), {"hidden_sizes": "64"}, "hidden_sizes"),
    (("CartPole-v1", 100), {"obs_clip": 0.0}, "obs_clip"),
])
def test_train_rejects_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        dqn.train(*args, **kwargs)


# ---------------------------------------------------------------- the contract
def _run(**kwargs):
    log = []

    def callback(steps, policy):
        log.append((steps, policy.q_values(np.zeros((1, 4), np.float32)).copy()))

    policy = dqn.train("CartPole-v1", 1_600, seed=3, callback=callback, **SMALL, **kwargs)
    return policy, log


def test_same_arguments_same_run_step_for_step():
    p1, log1 = _run()
    p2, log2 = _run()
    assert [s for s, _ in log1] == [s for s, _ in log2]
    for (_, q1), (_, q2) in zip(log1, log2):
        np.testing.assert_array_equal(q1, q2)
    for a, b in zip(p1.q_net.parameters(), p2.q_net.parameters()):
        assert torch.equal(a, b)
    _, log3 = dqn.train("CartPole-v1", 1_600, seed=4, **SMALL), None
    p4 = dqn.train("CartPole-v1", 1_600, seed=4, **SMALL)
    assert not all(torch.equal(a, b) for a, b in zip(p1.q_net.parameters(), p4.q_net.parameters()))


def test_callback_after_every_update_and_at_least_every_2048_steps():
    calls = []
    dqn.train("CartPole-v1", 5_000, seed=0, callback=lambda s, p: calls.append(s),
              num_envs=4, train_freq=16, **SMALL)
    assert calls[0] == 64 and np.all(np.diff(calls)[:-1] == 64)  # one call per training phase
    assert calls[-1] == 5_000 and calls[-1] - calls[-2] == 8  # the last phase fills the budget
    calls.clear()
    dqn.train("CartPole-v1", 6_000, seed=0, callback=lambda s, p: calls.append(s),
              num_envs=16, train_freq=128, **SMALL)
    assert np.diff([0, *calls]).max() <= 2048


def test_callback_returning_true_stops_training():
    calls = []

    def stop(steps, policy):
        calls.append(steps)
        return steps >= 1_000

    dqn.train("CartPole-v1", 50_000, seed=0, callback=stop, **SMALL)
    assert calls[-1] >= 1_000 and calls[-1] < 1_100


def test_policy_is_greedy_and_pure():
    policy = dqn.train("CartPole-v1", 600, seed=1, **SMALL)
    obs = np.random.default_rng(0).normal(size=(7, 4)).astype(np.float32)
    state = torch.get_rng_state()
    np_state = np.random.get_state()[1].copy()
    a1, a2 = policy(obs), policy(obs)
    assert torch.equal(state, torch.get_rng_state())
    np.testing.assert_array_equal(np_state, np.random.get_state()[1])
    assert a1.shape == (7,) and a1.dtype == np.int64
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(a1, policy.q_values(obs).argmax(1))
    for bad in (obs[:, :3], obs[0], np.zeros((2, 4, 1))):
        with pytest.raises(ValueError, match="obs"):
            policy(bad)


def test_calling_the_policy_in_the_callback_changes_nothing():
    quiet = dqn.train("CartPole-v1", 1_200, seed=2, **SMALL)
    busy = dqn.train("CartPole-v1", 1_200, seed=2, **SMALL,
                     callback=lambda s, p: evaluate(p, "CartPole-v1", 0, num_episodes=2) is None)
    for a, b in zip(quiet.q_net.parameters(), busy.q_net.parameters()):
        assert torch.equal(a, b)


def test_train_leaves_global_torch_state_alone():
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    dqn.train("CartPole-v1", 300, seed=0, num_threads=1, **SMALL)
    assert torch.get_num_threads() == threads and torch.equal(rng, torch.get_rng_state())


@pytest.mark.parametrize("options", [dict(double=False, loss="mse"),
                                     dict(tau=1.0, target_update_interval=50),
                                     dict(epsilon_kind="exponential", max_grad_norm=None,
                                          lr_final_fraction=0.0)])
def test_options_run(options):
    policy = dqn.train("CartPole-v1", 800, seed=0, **SMALL, **options)
    assert policy(np.zeros((3, 4), np.float32)).shape == (3,)


def test_acrobot_runs():  # another Discrete env, through SyncVectorEnv (no native vector env)
    policy = dqn.train("Acrobot-v1", 400, seed=0, **SMALL)
    assert policy(np.zeros((2, 6), np.float32)).shape == (2,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runs_on_cuda():
    policy = dqn.train("CartPole-v1", 600, seed=0, device="cuda", **SMALL)
    assert policy.device.type == "cuda" and policy(np.zeros((3, 4), np.float32)).shape == (3,)


# Learning itself is tested with the chapter's own seeds and budgets in test_dqn_chapter.py.


# ---------------------------------------------------------------- pieces
def test_td_targets_double_and_plain_and_the_done_mask():
    r = torch.tensor([1.0, 1.0, 1.0])
    q_online = torch.tensor([[1.0, 5.0], [2.0, 0.0], [3.0, 4.0]])
    q_target = torch.tensor([[10.0, 2.0], [1.0, 7.0], [6.0, 8.0]])
    term = torch.tensor([0.0, 0.0, 1.0])
    gamma = 0.5
    # double: the online net picks a* = [1, 0, 1], the target net values it
    torch.testing.assert_close(dqn.td_targets(r, q_online, q_target, term, gamma),
                               torch.tensor([1 + 0.5 * 2.0, 1 + 0.5 * 1.0, 1.0]))
    # plain: max of the target net
    torch.testing.assert_close(dqn.td_targets(r, q_online, q_target, term, gamma, double=False),
                               torch.tensor([1 + 0.5 * 10.0, 1 + 0.5 * 7.0, 1.0]))


def test_a_truncated_transition_bootstraps_and_a_terminated_one_does_not():
    # Both come from the same state; only `terminated` is stored, so the time-limit one
    # (terminated = 0, truncated = 1) keeps gamma * Q(s') in its target.
    r = torch.tensor([1.0, 1.0])
    q = torch.tensor([[4.0, 6.0], [4.0, 6.0]])
    y = dqn.td_targets(r, q, q, torch.tensor([0.0, 1.0]), 0.9)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * 6.0, 1.0]))


@pytest.mark.parametrize("kwargs, name", [
    (dict(gamma=1.2), "gamma"),
    (dict(rewards=np.ones(2)), "rewards"),
    (dict(next_q_target=torch.zeros(2, 3)), "next_q"),
    (dict(terminated=torch.zeros(3)), "terminated"),
])
def test_td_targets_reject_bad_input(kwargs, name):
    args = dict(rewards=torch.ones(2), next_q_online=torch.zeros(2, 2),
                next_q_target=torch.zeros(2, 2), terminated=torch.zeros(2), gamma=0.9)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        dqn.td_targets(**args)


def test_dqn_loss_huber_is_quadratic_then_linear():
    q = torch.tensor([0.0, 0.0], requires_grad=True)
    y = torch.tensor([0.5, 3.0])
    huber = dqn.dqn_loss(q, y, "huber")
    torch.testing.assert_close(huber, torch.tensor((0.5 * 0.25 + (3.0 - 0.5)) / 2))
    huber.backward()
    torch.testing.assert_close(q.grad, torch.tensor([-0.5, -1.0]) / 2)  # slope capped at 1
    torch.testing.assert_close(dqn.dqn_loss(q, y, "mse"), torch.tensor((0.25 + 9.0) / 2))
    with pytest.raises(ValueError, match="loss"):
        dqn.dqn_loss(q, y, "l2")
    with pytest.raises(ValueError, match="q_sa"):
        dqn.dqn_loss(q, y[:1])
    with pytest.raises(ValueError, match="q_sa"):
        dqn.dqn_loss([0.0, 0.0], y)


def test_epsilon_schedule():
    assert dqn.epsilon_schedule(0, start=1.0, end=0.1, decay_steps=100) == 1.0
    assert dqn.epsilon_schedule(50, start=1.0, end=0.1, decay_steps=100) == pytest.approx(0.55)
    assert dqn.epsilon_schedule(500, start=1.0, end=0.1, decay_steps=100) == pytest.approx(0.1)
    e = dqn.epsilon_schedule(100, start=1.0, end=0.0, decay_steps=100, kind="exponential")
    assert e == pytest.approx(np.exp(-5.0))
    for kwargs, name in ((dict(steps=-1), "steps"), (dict(steps=0, start=1.5), "start"),
                         (dict(steps=0, decay_steps=0), "decay_steps"),
                         (dict(steps=0, kind="cosine"), "kind")):
        with pytest.raises(ValueError, match=name):
            dqn.epsilon_schedule(**kwargs)


def test_start_value_estimate():
    policy = dqn.train("CartPole-v1", 600, seed=0, **SMALL)
    predicted, actual = dqn.start_value_estimate(policy, "CartPole-v1", 0.9, num_episodes=4)
    assert np.isfinite(predicted) and 1.0 <= actual <= 10.0  # sum of 0.9^t, at least one step
    with pytest.raises(ValueError, match="policy"):
        dqn.start_value_estimate(lambda o: o, "CartPole-v1", 0.9)
    with pytest.raises(ValueError, match="gamma"):
        dqn.start_value_estimate(policy, "CartPole-v1", 2.0)
    with pytest.raises(ValueError, match="num_episodes"):
        dqn.start_value_estimate(policy, "CartPole-v1", 0.9, num_episodes=0)


def test_polyak_update():
    target = [torch.zeros(2, 2), torch.zeros(3)]
    online = [torch.ones(2, 2), torch.full((3,), 2.0)]
    dqn.polyak_update(target, online, 0.1)
    torch.testing.assert_close(target[1], torch.full((3,), 0.2))
    for _ in range(9):
        dqn.polyak_update(target, online, 0.1)
    # after k updates the online weights carry 1 - (1 - tau)^k of the target
    torch.testing.assert_close(target[0], torch.full((2, 2), 1 - 0.9 ** 10))
    dqn.polyak_update(target, online, 1.0)  # a hard copy
    torch.testing.assert_close(target[1], online[1])
    for args, name in (((target, online, 0.0), "tau"), ((target, online, 1.5), "tau"),
                       ((target, online[:1], 0.5), "target_params"),
                       (([torch.zeros(2)], [torch.zeros(3)], 0.5), "params")):
        with pytest.raises(ValueError, match=name):
            dqn.polyak_update(*args)


def _one_fast_update(loss, double, max_grad_norm):
    """One phase of dqn.dqn with a single gradient step, and the nets before it."""
    from rlnotes.deeprl.buffer import ReplayBuffer
    from rlnotes.deeprl.envs import make_vec_env
    from rlnotes.deeprl.networks import Standardize, mlp
    torch.manual_seed(0)
    q_net = torch.nn.Sequential(Standardize(4), mlp([4, 16, 16, 2]))
    nets = dqn.QNetworks(q_net, 1e-2)
    with torch.no_grad():  # a target that differs from the online net
        nets.target_params[0].add_(0.1 * torch.randn_like(nets.target_params[0]))
    before = copy.deepcopy((nets.q_net, nets.q_target))
    envs = make_vec_env("CartPole-v1", 2, seed=0)
    obs, _ = envs.reset(seed=0)
    buffer = ReplayBuffer(100, (4,))
    steps = dqn.dqn(envs, obs, nets, buffer, 16, epsilon=lambda s: 1.0, lr=lambda s: 1e-2,
                    gamma=0.9, batch_size=8, learning_starts=0, train_freq=8,
                    gradient_steps=1, double=double, loss=loss, tau=0.3,
                    target_update_interval=1, max_grad_norm=max_grad_norm,
                    standardize_obs=True, rng=np.random.default_rng(0),
                    generator=torch.Generator().manual_seed(0))
    assert list(steps) == [16]
    envs.close()
    return nets, before, buffer


@pytest.mark.parametrize("loss,double,max_grad_norm",
                         [("mse", True, None), ("huber", False, None), ("mse", True, 0.05)])
def test_reference_update_matches_one_update_of_the_fast_loop(loss, double, max_grad_norm):
    nets, (ref_net, ref_target), buffer = _one_fast_update(loss, double, max_grad_norm)
    # the same standardisation (fitted to every state seen before the first update) ...
    ref_net[0].load_state_dict(nets.q_net[0].state_dict())
    ref_target[0].load_state_dict(nets.q_net[0].state_dict())
    # ... and the same minibatch (the fast loop draws it with the generator seeded 0)
    batch = buffer.sample(8, torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(ref_net.parameters(), lr=1e-2)
    moved = [p.detach().clone() for p in ref_net.parameters()]
    value = dqn.reference_update(ref_net, ref_target, optimizer, batch, gamma=0.9,
                                 double=double, loss=loss, tau=0.3,
                                 max_grad_norm=max_grad_norm)
    assert value > 0
    for ref, fast, old in zip(ref_net.parameters(), nets.q_net.parameters(), moved):
        assert not torch.equal(ref, old)            # the update moved the weights
        torch.testing.assert_close(ref, fast, rtol=1e-5, atol=1e-6)
    for ref, fast in zip(ref_target.parameters(), nets.q_target.parameters()):
        torch.testing.assert_close(ref, fast, rtol=1e-5, atol=1e-6)


def _reference_inputs():
    from rlnotes.deeprl.networks import mlp
    torch.manual_seed(0)
    net, target = mlp([4, 8, 2]), mlp([4, 8, 2])
    batch = (torch.randn(5, 4), torch.tensor([0, 1, 0, 1, 1]), torch.ones(5),
             torch.randn(5, 4), torch.zeros(5))
    return net, target, torch.optim.Adam(net.parameters(), lr=1e-3), batch


@pytest.mark.parametrize("change,name", [
    (lambda a: {**a, "q_net": "not a module"}, "q_net"),
    (lambda a: {**a, "optimizer": object()}, "optimizer"),
    (lambda a: {**a, "batch": a["batch"][:4]}, "batch"),
    (lambda a: {**a, "batch": (a["batch"][0], a["batch"][1].float(), *a["batch"][2:])}, "actions"),
    (lambda a: {**a, "gamma": 1.5}, "gamma"),
    (lambda a: {**a, "loss": "l1"}, "loss"),
    (lambda a: {**a, "max_grad_norm": -1.0}, "max_grad_norm"),
])
def test_reference_update_rejects_bad_input(change, name):
    net, target, optimizer, batch = _reference_inputs()
    args = dict(q_net=net, q_target=target, optimizer=optimizer, batch=batch, gamma=0.9)
    with pytest.raises(ValueError, match=name):
        dqn.reference_update(**change(args))
