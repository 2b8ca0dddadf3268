"""The random walk of Sutton and Barto's Example 6.2 (rlnotes.envs.random_walk)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlnotes.envs  # noqa: F401  (registers the ids)
from rlnotes.envs.random_walk import LEFT, RIGHT, RandomWalkEnv, true_values, uniform_policy
from rlnotes.mdp import TabularMDP, policy_evaluation


def test_passes_gymnasium_check_env():
    check_env(RandomWalkEnv(), skip_render_check=True)


def test_registered_id_makes_the_walk():
    env = gym.make("rlnotes/RandomWalk-v0")
    assert isinstance(env.unwrapped, RandomWalkEnv)
    assert env.observation_space.n == 7 and env.action_space.n == 2
    s, info = env.reset(seed=3)
    assert s == 3 and info["prob"] == 1.0


def test_moves_rewards_and_termination():
    env = RandomWalkEnv()
    env.reset(seed=0)
    # C -> D -> E -> right end: reward 1 only on the last move, which terminates
    out = [env.step(RIGHT) for _ in range(3)]
    assert [o[0] for o in out] == [4, 5, 6]
    assert [o[1] for o in out] == [0.0, 0.0, 1.0]
    assert [o[2] for o in out] == [False, False, True]
    assert not any(o[3] for o in out)
    env.reset()
    out = [env.step(LEFT) for _ in range(3)]
    assert [o[0] for o in out] == [2, 1, 0]
    assert sum(o[1] for o in out) == 0.0 and out[-1][2]


def test_toy_text_model_format_and_terminal_self_loops():
    P = RandomWalkEnv().P
    assert set(P) == set(range(7))
    for s in range(7):
        for a in (LEFT, RIGHT):
            (prob, s2, r, term), = P[s][a]
            assert prob == 1.0
            if s in (0, 6):
                assert (s2, r, term) == (s, 0.0, True)
    assert P[5][RIGHT][0] == (1.0, 6, 1.0, True)
    assert P[1][LEFT][0] == (1.0, 0, 0.0, True)


def test_true_values_are_one_sixth_to_five_sixths():
    np.testing.assert_allclose(true_values(), [0, 1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6, 0])
    np.testing.assert_allclose(true_values(3), [0, 0.25, 0.5, 0.75, 0])


def test_policy_evaluation_of_the_mdp_gives_the_true_values():
    mdp = TabularMDP.from_gymnasium(RandomWalkEnv(), 1.0)
    V = policy_evaluation(mdp, uniform_policy())
    np.testing.assert_allclose(V, true_values(), atol=1e-8)


def test_larger_walks_and_render():
    env = RandomWalkEnv(num_states=19, render_mode="ansi")
    s, _ = env.reset(seed=0)
    assert s == 10 and env.observation_space.n == 21
    assert "[J]" in env.render()
    assert RandomWalkEnv().render() is None


@pytest.mark.parametrize("kwargs", [dict(num_states=4), dict(num_states=0),
                                    dict(num_states=2.5), dict(render_mode="human")])
def test_bad_constructor_arguments(kwargs):
    with pytest.raises(ValueError, match="num_states|render_mode"):
        RandomWalkEnv(**kwargs)


@pytest.mark.parametrize("action", [2, -1, 0.5])
def test_bad_action(action):
    env = RandomWalkEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(action)


def test_bad_helper_arguments():
    for bad in (0, -3, 1.5):
        with pytest.raises(ValueError, match="num_states"):
            true_values(bad)
        with pytest.raises(ValueError, match="num_states"):
            uniform_policy(bad)
