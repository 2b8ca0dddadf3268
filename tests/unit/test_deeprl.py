"""Tests of the shared deep-RL machinery (rlnotes.deeprl) and of plot_band."""

import gymnasium as gym
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from rlnotes.deeprl import (Evaluator, ReplayBuffer, env_spec, evaluate, make_vec_env, mlp,  # noqa: E402
                            space_info, step_transitions)
from rlnotes.plotting import plot_band  # noqa: E402


class Corridor(gym.Env):
    """obs = [t]; action 1 ends the episode (terminated), action 0 walks on; reward 1 a step.
    Registered with a time limit of 4 steps, so walking on is truncated."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, bool(action == 1), False, {}


gym.register("rlnotes-test/Corridor-v0", entry_point=Corridor, max_episode_steps=4)


# ---------------------------------------------------------------- envs
def test_cartpole_uses_the_native_vector_env():
    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    from rlnotes.deeprl.envs import LeanCartPoleVectorEnv

    envs = make_vec_env("CartPole-v1", 8, seed=0)
    assert isinstance(envs.unwrapped, CartPoleVectorEnv)
    assert type(envs.unwrapped) is LeanCartPoleVectorEnv
    assert envs.num_envs == 8 and envs.max_episode_steps == 500
    envs.close()


@pytest.mark.parametrize("num_envs", [1, 8])
def test_lean_cartpole_steps_as_gymnasium_bit_for_bit(num_envs):
    """Same observations, rewards, flags and resets as gymnasium's vector CartPole, over
    thousands of steps with many episode ends (random actions end episodes quickly)."""
    lean = make_vec_env("CartPole-v1", num_envs, seed=3)
    ref = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")
    ref.reset(seed=3)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(2000):
        action = rng.integers(0, 2, num_envs)
        got, want = lean.step(action), ref.step(action)
        for x, y in zip(got[:4], want[:4]):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)
        ends += int(got[2].sum())
    assert ends > 50


def test_make_vec_env_is_seeded():
    a, b = make_vec_env("CartPole-v1", 3, seed=5), make_vec_env("CartPole-v1", 3, seed=5)
    oa, _ = a.step(np.zeros(3, dtype=np.int64))[:2]
    ob, _ = b.step(np.zeros(3, dtype=np.int64))[:2]
    np.testing.assert_array_equal(oa, ob)


def test_step_transitions_drops_the_autoreset_step_and_keeps_terminated_apart_from_truncated():
    envs = make_vec_env("rlnotes-test/Corridor-v0", 2, seed=0)
    obs, _ = envs.reset(seed=0)
    autoreset = np.zeros(2, dtype=bool)
    stored = []
    # env 0 always walks on (truncated after 4 steps); env 1 stops at once (terminated).
    for _ in range(10):
        actions = np.array([0, 1])
        obs, batch, autoreset = step_transitions(envs, actions, obs, autoreset)
        stored.append(batch)
    obs_all = np.concatenate([b["obs"] for b in stored])
    rewards = np.concatenate([b["rewards"] for b in stored])
    term = np.concatenate([b["terminated"] for b in stored])
    trunc = np.concatenate([b["truncated"] for b in stored])
    actions = np.concatenate([b["actions"] for b in stored])
    assert (rewards == 1.0).all(), "an autoreset step (reward 0) was stored as a transition"
    # env 0: steps 1-4, reset, 6-9 -> 8 transitions, two of them truncated, none terminated
    walk = actions == 0
    assert walk.sum() == 8 and trunc[walk].sum() == 2 and not term[walk].any()
    # env 1: terminated at every real step, every other step is an autoreset -> 5 transitions
    stop = actions == 1
    assert stop.sum() == 5 and term[stop].all() and not trunc[stop].any()
    assert (obs_all[stop] == 0).all()  # each of them started from a fresh reset
    envs.close()


def test_native_cartpole_autoreset_step_is_not_stored():
    envs = make_vec_env("CartPole-v1", 4, seed=1)
    obs, _ = envs.reset(seed=1)
    autoreset = np.zeros(4, dtype=bool)
    n_term, n_kept, n_steps = 0, 0, 0
    for _ in range(60):  # always pushing left topples the pole in ~10 steps
        obs, batch, autoreset = step_transitions(envs, np.zeros(4, dtype=np.int64), obs, autoreset)
        n_term += batch["terminated"].sum()
        n_kept += len(batch["rewards"])
        n_steps += 4
        assert (batch["rewards"] == 1.0).all()
    assert n_term >= 8
    assert n_steps - n_kept == n_term - autoreset.sum()  # one skipped reset per finished episode


@pytest.mark.parametrize("bad", ["NoSuchEnv-v0", "", 3])
def test_env_spec_rejects_unknown_ids(bad):
    with pytest.raises(ValueError, match="env_id"):
        env_spec(bad)


@pytest.mark.parametrize("kwargs, name", [(dict(env_id="Nope-v9", num_envs=2), "env_id"),
                                          (dict(env_id="CartPole-v1", num_envs=0), "num_envs"),
                                          (dict(env_id="CartPole-v1", num_envs=2.5), "num_envs"),
                                          (dict(env_id="CartPole-v1", num_envs=2, seed=-1), "seed")])
def test_make_vec_env_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_vec_env(**kwargs)


def test_space_info():
    assert space_info(gym.spaces.Discrete(3)) == {"discrete": True, "n": 3, "shape": ()}
    box = space_info(gym.spaces.Box(-1, 1, (2,)))
    assert not box["discrete"] and box["shape"] == (2,)
    for bad in (gym.spaces.MultiBinary(3), gym.spaces.Tuple([gym.spaces.Discrete(2)]), None):
        with pytest.raises(ValueError, match="space"):
            space_info(bad)


def test_step_transitions_rejects_bad_input():
    envs = make_vec_env("CartPole-v1", 2, seed=0)
    obs, _ = envs.reset(seed=0)
    a = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="autoreset"):
        step_transitions(envs, a, obs, np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="obs"):
        step_transitions(envs, a, obs[:1], np.zeros(2, dtype=bool))
    with pytest.raises(ValueError, match="actions"):
        step_transitions(envs, a[:1], obs, np.zeros(2, dtype=bool))


# ---------------------------------------------------------------- networks
def test_mlp_shapes_and_orthogonal_init():
    net = mlp([4, 32, 16, 3], out_gain=0.5)
    assert net(torch.zeros(7, 4)).shape == (7, 3)
    W1, W3 = net[0].weight.detach(), net[4].weight.detach()
    # (32, 4): orthonormal columns scaled by sqrt(2); (3, 16): orthonormal rows scaled by 0.5
    torch.testing.assert_close(W1.T @ W1, 2.0 * torch.eye(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(W3 @ W3.T, 0.25 * torch.eye(3), atol=1e-5, rtol=0)
    assert all((layer.bias == 0).all() for layer in net if hasattr(layer, "bias"))
    assert isinstance(mlp([2, 5, 1], activation="tanh")[1], torch.nn.Tanh)


@pytest.mark.parametrize("kwargs, name", [(dict(sizes=[4]), "sizes"), (dict(sizes="44"), "sizes"),
                                          (dict(sizes=[4, 0, 2]), "sizes"),
                                          (dict(sizes=[4, 2], activation="gelu"), "activation"),
                                          (dict(sizes=[4, 2], out_gain=0.0), "out_gain")])
def test_mlp_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        mlp(**kwargs)


# ---------------------------------------------------------------- replay buffer
def _transitions(B, start=0):
    idx = np.arange(start, start + B, dtype=np.float32)
    return (np.stack([idx, -idx], 1), idx.astype(np.int64) % 2, idx, np.stack([idx + 1, -idx], 1),
            (idx % 3 == 0).astype(np.float32))


def test_buffer_stores_and_wraps_around():
    buf = ReplayBuffer(5, (2,))
    buf.add(*_transitions(3))
    assert len(buf) == 3
    buf.add(*_transitions(4, start=3))  # 7 added into 5 slots: 0 and 1 are overwritten
    assert len(buf) == 5 and buf.pos == 2
    assert sorted(buf.rewards.tolist()) == [2, 3, 4, 5, 6]
    s, a, r, s2, d = buf.sample(1000, torch.Generator().manual_seed(0))
    assert set(r.tolist()) == {2, 3, 4, 5, 6}  # uniform over what is stored
    torch.testing.assert_close(s[:, 0], r)
    torch.testing.assert_close(s2[:, 0], r + 1)
    assert a.dtype == torch.int64 and (a == r.long() % 2).all()
    torch.testing.assert_close(d, (r % 3 == 0).float())
    counts = np.bincount(r.long().numpy(), minlength=7)[2:]
    assert counts.min() > 150  # ~200 each


def test_buffer_add_of_nothing_is_a_no_op():
    buf = ReplayBuffer(5, (2,))
    buf.add(np.zeros((0, 2)), np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 2)), np.zeros(0))
    assert len(buf) == 0 and buf.pos == 0


def test_buffer_sample_is_reproducible():
    buf = ReplayBuffer(100, (2,))
    buf.add(*_transitions(50))
    x = buf.sample(8, torch.Generator().manual_seed(3))[2]
    y = buf.sample(8, torch.Generator().manual_seed(3))[2]
    torch.testing.assert_close(x, y)


def test_buffer_box_actions():
    buf = ReplayBuffer(4, (3,), (2,), discrete=False)
    buf.add(np.zeros((2, 3)), np.ones((2, 2)), np.zeros(2), np.zeros((2, 3)), np.zeros(2))
    a = buf.sample(3)[1]
    assert a.dtype == torch.float32 and a.shape == (3, 2) and (a == 1).all()


@pytest.mark.parametrize("kwargs, name", [(dict(capacity=0, obs_shape=(2,)), "capacity"),
                                          (dict(capacity=5, obs_shape=()), "obs_shape"),
                                          (dict(capacity=5, obs_shape=(0,)), "obs_shape"),
                                          (dict(capacity=5, obs_shape=(2,), action_shape=(2,)),
                                           "action_shape"),
                                          (dict(capacity=1.5, obs_shape=(2,)), "capacity")])
def test_buffer_rejects_bad_construction(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ReplayBuffer(**kwargs)


def test_buffer_add_and_sample_reject_bad_input():
    buf = ReplayBuffer(4, (2,))
    s, a, r, s2, d = _transitions(3)
    with pytest.raises(ValueError, match="obs"):
        buf.add(s[:, :1], a, r, s2, d)
    with pytest.raises(ValueError, match="rewards"):
        buf.add(s, a, r[:2], s2, d)
    with pytest.raises(ValueError, match="terminated"):
        buf.add(s, a, r, s2, d[:, None])
    with pytest.raises(ValueError, match="capacity"):
        buf.add(*_transitions(5))
    with pytest.raises(ValueError, match="empty"):
        buf.sample(2)
    buf.add(s, a, r, s2, d)
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="batch_size"):
            buf.sample(bad)


# ---------------------------------------------------------------- evaluation
def test_evaluator_plays_one_episode_per_env_and_is_deterministic():
    def left(obs):
        return np.zeros(len(obs), dtype=np.int64)

    ev1, ev2 = Evaluator("CartPole-v1", 3), Evaluator("CartPole-v1", 3)
    r1, r2 = ev1(left), ev2(left)
    assert r1.shape == (10,) and (r1 >= 8).all() and (r1 <= 12).all()  # always-left falls fast
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_array_equal(evaluate(left, "CartPole-v1", 3), r1)
    # a good hand-made controller (push toward the side the pole leans to) reaches 500
    balance = lambda obs: (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)  # noqa: E731
    r = evaluate(balance, "CartPole-v1", 0, num_episodes=7, num_envs=3)
    assert r.shape == (7,) and r.max() > 100


@pytest.mark.parametrize("kwargs, name", [(dict(env_id="Nope-v0"), "env_id"),
                                          (dict(env_id="CartPole-v1", seed=-1), "seed"),
                                          (dict(env_id="CartPole-v1", num_episodes=0), "num_episodes"),
                                          (dict(env_id="CartPole-v1", num_envs=0), "num_envs")])
def test_evaluator_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Evaluator(**kwargs)
    with pytest.raises(ValueError, match=name):
        evaluate(lambda o: np.zeros(len(o), dtype=np.int64), **kwargs)


def test_evaluator_rejects_a_non_callable_policy():
    with pytest.raises(ValueError, match="policy"):
        Evaluator("CartPole-v1")("not a policy")


# ---------------------------------------------------------------- plot_band
def test_plot_band_draws_median_and_band():
    x = np.arange(4)
    ax = plot_band(x, {"a": np.array([[0, 1, 2, 3], [2, 3, 4, 5], [1, 2, 3, 4]])}, hline=4)
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), [1, 2, 3, 4])
    assert len(ax.collections) == 1 and ax.get_xlabel() == "environment steps"


@pytest.mark.parametrize("args, kwargs, name", [((np.arange(3), {}), {}, "curves"),
                                                ((np.arange(3), {"a": np.zeros((2, 4))}), {}, "curves"),
                                                ((np.zeros((2, 2)), {"a": np.zeros((2, 2))}), {}, "x"),
                                                ((np.arange(2), {"a": np.zeros((2, 2))}),
                                                 {"band": "std"}, "band")])
def test_plot_band_rejects_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        plot_band(*args, **kwargs)


# ---------------------------------------------------------------- Standardize
def test_standardize_starts_as_identity_then_fits_and_stays_fixed():
    from rlnotes.deeprl import Standardize
    layer = Standardize(3)
    x = torch.randn(10, 3)
    torch.testing.assert_close(layer(x), x)
    data = torch.randn(500, 3) * torch.tensor([0.1, 2.0, 0.0]) + torch.tensor([1.0, -1.0, 5.0])
    layer.fit(data)
    out = layer(data)
    torch.testing.assert_close(out[:, :2].mean(0), torch.zeros(2), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[:, :2].std(0), torch.ones(2), atol=1e-5, rtol=0)
    assert layer.std[2] == pytest.approx(1e-2)  # a constant input: the std floor, no division by 0
    assert not list(layer.parameters())  # buffers, not trained


@pytest.mark.parametrize("bad", [torch.zeros(5, 2), torch.zeros(1, 3), np.zeros((5, 3))])
def test_standardize_fit_rejects_bad_input(bad):
    from rlnotes.deeprl import Standardize
    with pytest.raises(ValueError, match="obs"):
        Standardize(3).fit(bad)


def test_standardize_rejects_bad_dim_and_clip():
    from rlnotes.deeprl import Standardize
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="dim"):
            Standardize(bad)
    for bad in (0.0, -1.0, "5"):
        with pytest.raises(ValueError, match="clip"):
            Standardize(3, clip=bad)


def test_standardize_clips():
    from rlnotes.deeprl import Standardize
    layer = Standardize(2, clip=3.0)
    torch.testing.assert_close(layer(torch.tensor([[10.0, -0.5]])), torch.tensor([[3.0, -0.5]]))
