"""The start distribution has one name (initial_state_distrib) and one reader
(rlnotes.envs.tabular_env.start_distribution); exact expected returns and batched runs start
where the environments start, checked on every package environment against independent
computations (the exact linear solve of rlnotes.mdp, and Monte Carlo through env.reset)."""

import gymnasium as gym
import numpy as np
import pytest

import rlnotes.envs  # noqa: F401  (registers the ids)
from rlnotes import tabular as tb
from rlnotes.envs.gridworld import GridWorldEnv, sutton_barto_4x4
from rlnotes.envs.maze import Maze2x3Env
from rlnotes.envs.random_walk import RandomWalkEnv
from rlnotes.envs.tabular_env import START_ATTRIBUTE, TabularEnv, start_distribution
from rlnotes.mdp import TabularMDP, policy_evaluation


def package_envs():
    return {
        "maze": Maze2x3Env(),
        "grid8x8": GridWorldEnv(),
        "grid8x8_slip": GridWorldEnv(slip=0.2),
        "sutton_barto_4x4": sutton_barto_4x4(),
        "random_walk": RandomWalkEnv(),
    }


def uniform(env):
    return np.full((env.observation_space.n, env.action_space.n), 1.0 / env.action_space.n)


def test_one_name_for_the_start_distribution():
    for name, env in package_envs().items():
        mu = getattr(env.unwrapped, START_ATTRIBUTE)
        assert np.isclose(mu.sum(), 1.0), name
        assert np.array_equal(start_distribution(env), mu)
        assert np.array_equal(tb.toy_text_model(env).start_probs, mu)
        assert not hasattr(env.unwrapped, "initial_distribution")
    for env_id in ("FrozenLake-v1", "CliffWalking-v1", "Taxi-v4"):
        env = gym.make(env_id)
        assert np.array_equal(tb.toy_text_model(env).start_probs,
                              np.asarray(env.unwrapped.initial_state_distrib, dtype=float))


def test_sutton_barto_4x4_starts_in_the_14_inner_cells():
    mu = start_distribution(sutton_barto_4x4())
    assert mu[0] == mu[15] == 0.0 and np.allclose(mu[1:15], 1 / 14)


def test_an_environment_without_a_start_distribution_is_refused():
    env = GridWorldEnv()
    del env.initial_state_distrib
    with pytest.raises(ValueError, match=START_ATTRIBUTE):
        start_distribution(env)
    with pytest.raises(ValueError, match=START_ATTRIBUTE):
        tb.toy_text_model(env)
    env = GridWorldEnv()
    env.initial_state_distrib = np.ones(3) / 3
    with pytest.raises(ValueError, match="shape"):
        tb.toy_text_model(env)
    env.initial_state_distrib = np.full(64, 0.5)
    with pytest.raises(ValueError, match="summing to 1"):
        tb.toy_text_model(env)


def test_old_cliffwalking_start_state_index_is_read():
    class Old(TabularEnv):
        def __init__(self):
            super().__init__({0: {0: [(1.0, 1, 0.0, False)]}, 1: {0: [(1.0, 1, 0.0, True)]}},
                             [1.0, 0.0])
            del self.initial_state_distrib
            self.start_state_index = 1
    assert start_distribution(Old()).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("name", list(package_envs()))
def test_expected_return_matches_the_exact_linear_solve(name):
    """Random policy, undiscounted: expected_return over a long horizon equals the start-
    distribution average of V^pi from rlnotes.mdp (an independent computation)."""
    env = package_envs()[name]
    pi = uniform(env)
    mdp = TabularMDP.from_gymnasium(env, gamma=1.0)
    exact = float(start_distribution(env) @ policy_evaluation(mdp, pi))
    assert tb.expected_return(env, pi, horizon=20_000) == pytest.approx(exact, abs=1e-9)


def test_expected_return_on_sutton_barto_4x4_is_the_mean_of_figure_4_1():
    figure = [-14, -20, -22, -14, -18, -20, -20, -20, -20, -18, -14, -22, -20, -14]
    got = tb.expected_return(sutton_barto_4x4(), uniform(sutton_barto_4x4()), horizon=20_000)
    assert got == pytest.approx(np.mean(figure), abs=1e-9)   # -256 / 14, not 0
    assert got == pytest.approx(-256 / 14, abs=1e-9)


@pytest.mark.parametrize("env_id, policy_seed", [("rlnotes/Maze2x3-v0", 1)])
def test_expected_return_within_the_time_limit_matches_monte_carlo(env_id, policy_seed):
    """Through env.reset and env.step (gymnasium's own sampling, time limit included): the Monte
    Carlo mean agrees with the exact finite-horizon value within 4 standard errors."""
    env = gym.make(env_id)
    rng = np.random.default_rng(policy_seed)
    pi = rng.dirichlet(np.ones(4), size=env.observation_space.n)
    exact = tb.expected_return(env, pi)
    G = tb.evaluate_policy(env, pi, num_episodes=3000, seed=0)
    se = G.std(ddof=1) / np.sqrt(G.size)
    assert abs(G.mean() - exact) < 4 * se + 1e-12


def test_expected_return_on_the_4x4_matches_monte_carlo():
    env = gym.wrappers.TimeLimit(sutton_barto_4x4(), max_episode_steps=500)
    pi = uniform(env)
    exact = tb.expected_return(env, pi)
    G = tb.evaluate_policy(env, pi, num_episodes=3000, seed=0)
    se = G.std(ddof=1) / np.sqrt(G.size)
    assert abs(G.mean() - exact) < 4 * se and exact == pytest.approx(-256 / 14, abs=1e-6)


def test_batched_runs_start_where_reset_starts():
    env = sutton_barto_4x4()
    model = tb.toy_text_model(env)
    starts = model.sample_start(20_000, np.random.default_rng(0))
    freq = np.bincount(starts, minlength=16) / starts.size
    mu = start_distribution(env)
    assert np.abs(freq - mu).max() < 4 * np.sqrt(mu.max() * (1 - mu.max()) / starts.size)
    assert freq[0] == freq[15] == 0.0


def test_batched_prediction_starts_from_the_start_distribution():
    """On the 4x4 every move pays -1. After one episode, every run of batched TD(0) and MC has
    changed some value (a run started in a terminal corner would change nothing), and first-visit
    MC with alpha = 1 sets V(s) to the return from s, whose mean over the runs in each start cell
    is V^pi of that cell within 4 standard errors."""
    env = sutton_barto_4x4()
    pi = uniform(env)
    td = tb.td0_prediction_batch(env, pi, num_runs=300, num_episodes=1, alpha=0.5, seed=0)[-1]
    assert (td.min(axis=1) < 0).all()
    V_pi = policy_evaluation(TabularMDP.from_gymnasium(env, gamma=1.0), pi)
    mc = tb.mc_prediction_batch(env, pi, num_runs=2000, num_episodes=1, alpha=1.0, seed=1)[-1]
    assert (mc.min(axis=1) < 0).all()
    for s in (1, 6, 14):
        visited = mc[:, s] < 0
        G = mc[visited, s]
        assert abs(G.mean() - V_pi[s]) < 4 * G.std(ddof=1) / np.sqrt(G.size)


def test_batched_control_episodes_start_from_the_start_distribution():
    """On the 4x4 every move pays -1: an episode that started in a terminal corner would have
    return 0. Batched SARSA's online returns are all negative, and their mean over the first
    episodes (random behaviour, Q = 0) matches the random policy's exact expected return."""
    env = sutton_barto_4x4()
    _, R = tb.td_control_batch(env, "sarsa", num_runs=400, num_episodes=1, alpha=1e-9,
                               epsilon=1.0, seed=0)
    assert (R < 0).all()
    exact = tb.expected_return(env, uniform(env), horizon=20_000)
    assert abs(R.mean() - exact) < 4 * R.std(ddof=1) / np.sqrt(R.size)
