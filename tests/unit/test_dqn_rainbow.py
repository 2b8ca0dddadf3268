"""Tests of DQN's Rainbow options: n-step transitions (rlnotes.deeprl.nstep), prioritized
replay (rlnotes.deeprl.replay_prioritized), and how rlnotes.dqn.train uses them."""

import numpy as np
import pytest
import torch

from rlnotes import dqn
from rlnotes.deeprl import ReplayBuffer
from rlnotes.deeprl.nstep import NStepWindow
from rlnotes.deeprl.replay_prioritized import PrioritizedReplayBuffer

SMALL = dict(learning_starts=200, exploration_steps=500, batch_size=32, hidden_sizes=(16,))


def step(obs, rewards, next_obs, terminated=None, truncated=None):
    k = len(obs)
    return {"obs": np.asarray(obs, np.float32).reshape(k, 1),
            "actions": np.arange(k), "rewards": np.asarray(rewards, np.float32),
            "next_obs": np.asarray(next_obs, np.float32).reshape(k, 1),
            "terminated": np.asarray(terminated or [False] * k),
            "truncated": np.asarray(truncated or [False] * k)}


# ---------------------------------------------------------------- n-step window
def test_n_step_window_sums_n_rewards_and_ends_at_termination():
    w, gamma = NStepWindow(1, 3, 0.5), 0.5
    out = [w.push(step([t], [t + 1.0], [t + 1], [t == 4]), [0]) for t in range(5)]
    assert [len(o["obs"]) for o in out] == [0, 0, 1, 1, 3]
    assert out[2]["obs"][0, 0] == 0 and out[2]["next_obs"][0, 0] == 3
    assert out[2]["rewards"][0] == pytest.approx(1 + gamma * 2 + gamma**2 * 3)
    assert not out[2]["terminated"][0]
    last = out[4]  # s_2 (3 steps), then s_3 and s_4 (shorter), all terminal at s_5
    assert list(last["obs"][:, 0]) == [2, 3, 4] and last["terminated"].all()
    assert last["rewards"] == pytest.approx([3 + gamma * 4 + gamma**2 * 5, 4 + gamma * 5, 5])
    assert (last["next_obs"][:, 0] == 5).all()


def test_n_step_window_drops_short_windows_at_a_time_limit():
    w = NStepWindow(2, 2, 0.9)
    w.push(step([0, 10], [1, 1], [1, 11]), [0, 1])
    out = w.push(step([1, 11], [1, 1], [2, 12], truncated=[True, False]), [0, 1])
    # both envs complete a 2-step window; env 0's cut leaves no shorter window behind
    assert list(out["obs"][:, 0]) == [0, 10] and not out["terminated"].any()
    assert out["rewards"] == pytest.approx([1.9, 1.9])
    assert len(w.windows[0]) == 0 and len(w.windows[1]) == 1
    assert len(w.push(step([11], [1], [13]), [1])["obs"]) == 1  # env 1 goes on


def test_one_step_window_returns_its_input():
    w = NStepWindow(3, 1, 0.99)
    b = step([1, 2], [0.5, -1.0], [3, 4], [True, False])
    out = w.push(b, [0, 2])
    for k in ("obs", "actions", "rewards", "next_obs", "terminated"):
        np.testing.assert_array_equal(out[k], b[k])


@pytest.mark.parametrize("args, name", [((0, 3, 0.9), "num_envs"), ((2, 0, 0.9), "n"),
                                        ((2, 3, 1.5), "gamma")])
def test_n_step_window_rejects_bad_arguments(args, name):
    with pytest.raises(ValueError, match=name):
        NStepWindow(*args)


@pytest.mark.parametrize("env_ids", [[0], [0, 0], [0, 5], [[0, 1]]])
def test_n_step_window_rejects_bad_env_ids(env_ids):
    with pytest.raises(ValueError, match="env_ids"):
        NStepWindow(2, 3, 0.9).push(step([1, 2], [1, 1], [2, 3]), env_ids)


def test_n_step_window_rejects_a_batch_without_its_keys():
    with pytest.raises(ValueError, match="batch"):
        NStepWindow(2, 3, 0.9).push({"obs": np.zeros((1, 1))}, [0])


# ---------------------------------------------------------------- prioritized replay
def filled(n=4, exponent=1.0):
    buf = PrioritizedReplayBuffer(8, (1,), priority_exponent=exponent)
    buf.add(np.arange(n, dtype=np.float32)[:, None], np.zeros(n, int), np.zeros(n),
            np.zeros((n, 1)), np.zeros(n))
    return buf


def test_new_transitions_get_the_largest_priority_and_the_ring_wraps():
    buf = filled()
    buf.update_priorities(torch.tensor([0, 1]), torch.tensor([3.0, -0.5]))
    assert buf.max_priority == pytest.approx(3.0 + 1e-6)
    buf.add(np.zeros((6, 1)), np.zeros(6, int), np.zeros(6), np.zeros((6, 1)), np.zeros(6))
    # rows 4..7 then 0, 1 (overwritten) at the largest priority; rows 2, 3 keep theirs (1)
    top = 3.0 + 1e-6
    assert torch.allclose(buf.priorities, torch.tensor([top, top, 1, 1, top, top, top, top]))


def test_sampling_is_proportional_to_priority_and_weights_undo_it():
    buf = filled(exponent=1.0)
    buf.update_priorities(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    idx, w, (obs, *_) = buf.sample_prioritized(40_000, torch.Generator().manual_seed(0),
                                               importance_exponent=1.0)
    freq = np.bincount(idx.numpy(), minlength=4) / 40_000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    assert torch.equal(obs[:, 0].long(), idx)
    # e_is = 1: weight 1/P normalised by the largest (index 0): w_i = P(0)/P(i)
    expect = torch.tensor([1.0, 0.5, 1 / 3, 0.25])[idx]
    assert torch.allclose(w, expect, rtol=1e-4)
    # with the exponent 0 the draw is uniform and every weight is 1
    buf0 = filled(exponent=0.0)
    buf0.update_priorities(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    _, w0, _ = buf0.sample_prioritized(100, importance_exponent=1.0)
    assert torch.allclose(w0, torch.ones(100))


@pytest.mark.parametrize("kwargs, name", [({"priority_exponent": -0.1}, "priority_exponent"),
                                          ({"priority_exponent": 1.5}, "priority_exponent"),
                                          ({"min_priority": 0.0}, "min_priority"),
                                          ({"capacity": 0}, "capacity")])
def test_prioritized_buffer_rejects_bad_arguments(kwargs, name):
    args = {"capacity": 8, "obs_shape": (1,), **kwargs}
    with pytest.raises(ValueError, match=name):
        PrioritizedReplayBuffer(**args)


@pytest.mark.parametrize("idx, td, name", [
    (torch.tensor([0, 1]), torch.tensor([1.0]), "idx and td_errors"),
    ([0, 1], torch.tensor([1.0, 2.0]), "idx and td_errors"),
    (torch.tensor([0, 6]), torch.tensor([1.0, 2.0]), "idx"),
    (torch.tensor([0, 1]), torch.tensor([1.0, float("nan")]), "td_errors"),
])
def test_update_priorities_rejects_bad_input(idx, td, name):
    with pytest.raises(ValueError, match=name):
        filled().update_priorities(idx, td)


def test_sample_prioritized_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        PrioritizedReplayBuffer(8, (1,)).sample_prioritized(4)
    with pytest.raises(ValueError, match="importance_exponent"):
        filled().sample_prioritized(4, importance_exponent=2.0)
    with pytest.raises(ValueError, match="batch_size"):
        filled().sample_prioritized(0)


@pytest.mark.parametrize("buffer, e_is, n, name", [
    ("not a buffer", None, 4, "buffer"),
    (ReplayBuffer(8, (1,)), 0.4, 4, "PrioritizedReplayBuffer"),
    (filled(), None, 0, "batch_size"),
])
def test_sample_minibatches_rejects_bad_input(buffer, e_is, n, name):
    with pytest.raises(ValueError, match=name):
        dqn.sample_minibatches(buffer, n, None, e_is)


def test_sample_minibatches_uniform_and_prioritized():
    idx, w, batch = dqn.sample_minibatches(filled(), 5, torch.Generator().manual_seed(0))
    assert idx is None and w is None and batch[0].shape == (5, 1)
    idx, w, batch = dqn.sample_minibatches(filled(), 5, None, 0.4)
    assert idx.shape == w.shape == (5,) and batch[0].shape == (5, 1)


# ---------------------------------------------------------------- the trainer's options
@pytest.mark.parametrize("kwargs, name", [({"n_step": 0}, "n_step"), ({"n_step": 2.5}, "n_step"),
                                          ({"prioritized": 1}, "prioritized"),
                                          ({"priority_exponent": 2.0}, "priority_exponent"),
                                          ({"importance_exponent": -0.1}, "importance_exponent")])
def test_train_rejects_bad_rainbow_options(kwargs, name):
    with pytest.raises(ValueError, match=name):
        dqn.train("CartPole-v1", 100, **kwargs)


@pytest.mark.parametrize("options", [dict(n_step=3), dict(prioritized=True),
                                     dict(n_step=2, prioritized=True, double=False)])
def test_rainbow_options_run_and_are_reproducible(options):
    obs = np.random.default_rng(0).normal(size=(7, 4)).astype(np.float32)
    q = [dqn.train("CartPole-v1", 1_024, seed=1, **SMALL, **options).q_values(obs)
         for _ in range(2)]
    assert np.isfinite(q[0]).all() and np.array_equal(q[0], q[1])


def test_standardisation_ignores_the_buffer_size():
    """The input standardisation is fitted to the steps before the first update, also when the
    buffer is too small to hold them (the no-replay ablation changes the replay only)."""
    kw = dict(learning_starts=512, hidden_sizes=(16,), batch_size=64)
    small = dqn.train("CartPole-v1", 1_024, seed=0, buffer_size=64, **kw)
    full = dqn.train("CartPole-v1", 1_024, seed=0, **kw)
    assert torch.equal(small.q_net[0].mean, full.q_net[0].mean)
    assert torch.equal(small.q_net[0].std, full.q_net[0].std)
