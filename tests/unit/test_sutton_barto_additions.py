"""Unit tests of the Sutton and Barto chapters 3-6 additions: four-argument dynamics, the A/B
grid world, the Gambler's problem, tied greedy actions, blackjack, importance sampling,
off-policy MC control, batch TD/MC, the windy grid world, and the split cores."""

import gymnasium as gym
import numpy as np
import pytest

import rlnotes.envs  # noqa: F401
from rlnotes import tabular
from rlnotes.envs.ab_grid import ABGridEnv
from rlnotes.envs.blackjack import blackjack_mc_prediction, blackjack_returns
from rlnotes.envs.windy import WindyGridEnv
from rlnotes.mdp import (TabularMDP, four_argument_dynamics, gamblers_problem, greedy_policy,
                         mdp_from_dynamics, policy_evaluation, random_mdp, tied_greedy_actions,
                         uniform_policy, value_iteration)
from rlnotes.returns import gae


def test_ab_grid_values_match_sutton_barto():
    mdp = TabularMDP.from_gymnasium(ABGridEnv(), gamma=0.9)
    V_star, _ = value_iteration(mdp)
    assert np.allclose(V_star[:5].round(1), [22.0, 24.4, 22.0, 19.4, 17.5])
    V_random = policy_evaluation(mdp, uniform_policy(mdp))
    assert round(V_random[1], 1) == 8.8 and round(V_random[3], 1) == 5.3


def test_four_argument_dynamics_reduce_to_P_and_R():
    env = ABGridEnv()
    p, rewards = four_argument_dynamics(env)
    assert p.shape == (25, 4, 25, 4) and rewards.tolist() == [-1.0, 0.0, 5.0, 10.0]
    assert np.allclose(p.sum(axis=(2, 3)), 1.0)
    direct = TabularMDP.from_gymnasium(env, gamma=0.9)
    via_p = mdp_from_dynamics(p, rewards, 0.9)
    assert np.allclose(direct.P, via_p.P) and np.allclose(direct.R, via_p.R)
    lake = gym.make("FrozenLake-v1")
    p, rewards = four_argument_dynamics(lake)
    direct = TabularMDP.from_gymnasium(lake, gamma=1.0)
    assert np.allclose(mdp_from_dynamics(p, rewards, 1.0).P, direct.P)


@pytest.mark.parametrize("args", [
    (np.ones((2, 1, 2)), np.zeros(1)),                     # not 4-d
    (np.full((2, 1, 2, 1), 0.5), np.zeros(2)),             # rewards of the wrong shape
    (np.full((2, 1, 2, 1), 0.4), np.zeros(1)),             # rows do not sum to 1
    (np.full((2, 1, 2, 1), 0.5), np.array([np.inf])),      # infinite reward
])
def test_mdp_from_dynamics_rejects_bad_input(args):
    with pytest.raises(ValueError):
        mdp_from_dynamics(*args, 0.9)


def test_four_argument_dynamics_rejects_bad_env():
    with pytest.raises(ValueError, match="env"):
        four_argument_dynamics(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="env"):
        four_argument_dynamics(object())
    bad = ABGridEnv()
    bad.P[0][0] = [(1.0, 99, 0.0, False)]
    with pytest.raises(ValueError, match="outside"):
        four_argument_dynamics(bad)


def test_gamblers_problem():
    mdp = gamblers_problem(0.4)
    V, pi = value_iteration(mdp)
    assert np.isclose(V[50], 0.4) and np.isclose(V[25], 0.16) and np.isclose(V[75], 0.64)
    V_exact = policy_evaluation(mdp, pi)
    tied = tied_greedy_actions(mdp, V_exact)
    s = np.arange(101)[:, None]
    tied &= np.arange(1, 51)[None, :] <= np.minimum(s, 100 - s)
    assert tied[51, 0] and tied[51, 48] and tied[50].sum() == 1 and tied[50, 49]
    for choice in (0, -1):   # the smallest and the largest tied stake: both optimal
        stakes = np.array([np.flatnonzero(row)[choice] if row.any() else 0 for row in tied])
        assert np.allclose(policy_evaluation(mdp, stakes), V_exact)
    for bad in (dict(p_heads=0.0), dict(p_heads=1.5), dict(goal=1), dict(goal=2.5)):
        with pytest.raises(ValueError):
            gamblers_problem(**bad)


def test_tied_greedy_actions_bad_input_and_consistency():
    mdp = random_mdp(6, 3, 0.9, seed=1)
    V, pi = value_iteration(mdp)
    tied = tied_greedy_actions(mdp, V)
    assert tied[np.arange(6), pi].all()
    assert (np.argmax(tied, axis=1) == greedy_policy(mdp, V)).all()
    for bad in [(mdp, np.zeros(5)), (mdp, V, -1.0), (mdp, V, 0.5), ("mdp", V)]:
        with pytest.raises(ValueError):
            tied_greedy_actions(*bad)


def test_windy_grid():
    env = WindyGridEnv()
    mdp = TabularMDP.from_gymnasium(env, gamma=1.0)
    V, pi = value_iteration(mdp)
    assert V[30] == -15.0
    with pytest.raises(ValueError, match="gamma = 1"):
        policy_evaluation(mdp, np.full(70, 2))          # always right never ends
    for bad in ([1, 2], "0000000000", [0] * 9 + [-1]):
        with pytest.raises(ValueError, match="wind"):
            WindyGridEnv(bad)


def test_ab_grid_bad_input():
    for bad in (dict(a_reward=np.inf), dict(b_reward="5"), dict(wall_reward=None)):
        with pytest.raises(ValueError):
            ABGridEnv(**bad)


def test_blackjack_agrees_with_gymnasium():
    R = blackjack_returns(200_000, seed=1)
    env = gym.make("Blackjack-v1", sab=True)
    G = []
    for i in range(4000):
        obs, _ = env.reset(seed=i)
        done = False
        while not done:
            obs, r, terminated, truncated, _ = env.step(int(obs[0] < 20))
            done = terminated or truncated
        G.append(r)
    G = np.array(G)
    se = np.hypot(G.std() / np.sqrt(G.size), R.std() / np.sqrt(R.size))
    assert abs(G.mean() - R.mean()) < 4 * se
    V, visits = blackjack_mc_prediction(200_000, seed=0)
    assert V.shape == visits.shape == (2, 10, 10) and visits.min() > 0
    assert (V[:, 8:] > 0.1).all() and (V[:, :8] < 0).all()
    for bad in (dict(num_episodes=0), dict(num_episodes=10, stick_at=11),
                dict(num_episodes=10, stick_at=23), dict(num_episodes=10, seed=-1)):
        with pytest.raises(ValueError):
            blackjack_mc_prediction(**bad)


def test_blackjack_naturals_follow_sutton_barto():
    from rlnotes.envs.blackjack import _play
    p_win = 1 - 8 / 169                  # a natural wins unless the dealer's two cards are one
    R, _, natural = _play(200_000, 20, 3)
    assert natural.sum() > 5000 and set(np.unique(R[natural])) <= {0.0, 1.0}
    assert abs(R[natural].mean() - p_win) < 4 * np.sqrt(p_win * (1 - p_win) / natural.sum())
    R22, _, natural22 = _play(20_000, 22, 3)   # hitting on 21 forfeits the natural
    assert not natural22.any()
    env = gym.make("Blackjack-v1", sab=True)  # gymnasium's S&B rules agree
    G = []
    for i in range(3000):
        obs, _ = env.reset(seed=i)
        if obs[0] == 21:
            G.append(env.step(0)[1])
    G = np.array(G)
    assert G.size > 100 and abs(G.mean() - p_win) < 4 * np.sqrt(p_win * (1 - p_win) / G.size)


def test_importance_sampling_estimates():
    ratios, G = np.array([0.0, 2.0, 4.0]), np.array([0.0, 1.0, 1.0])
    ordinary, weighted = tabular.importance_sampling_estimates(ratios, G)
    assert np.allclose(ordinary, [0.0, 1.0, 2.0]) and np.allclose(weighted, [0.0, 1.0, 1.0])
    for bad in [(np.array([-1.0]), np.array([1.0])), (np.ones(2), np.ones(3)),
                (np.array([]), np.array([])), (np.array([np.nan]), np.array([1.0]))]:
        with pytest.raises(ValueError):
            tabular.importance_sampling_estimates(*bad)


def test_infinite_variance_episodes():
    ratios, G = tabular.infinite_variance_episodes(4, 200_000, seed=0)
    assert ratios.shape == G.shape == (4, 200_000)
    assert set(np.unique(G)) <= {0.0, 1.0} and (ratios[G == 0] == 0).all()
    assert abs((G > 0).mean() - 1 / 11) < 0.003         # ends on the left with probability 1/11
    _, weighted = tabular.importance_sampling_estimates(ratios, G)
    assert np.allclose(weighted[:, -1], 1.0)
    for bad in (dict(num_runs=0, num_episodes=1), dict(num_runs=1, num_episodes=0),
                dict(num_runs=1, num_episodes=1, seed=-3)):
        with pytest.raises(ValueError):
            tabular.infinite_variance_episodes(**bad)


def test_off_policy_mc_control_finds_the_maze_policy():
    maze = gym.make("rlnotes/Maze2x3-v0")
    _, pi_star = value_iteration(TabularMDP.from_gymnasium(maze, gamma=0.9))
    for seed in range(3):
        _, pi = tabular.off_policy_mc_control(maze, 2000, gamma=0.9, seed=seed)
        assert (pi[:4] == pi_star[:4]).all()
    for bad in (dict(num_episodes=0), dict(num_episodes=5, gamma=1.5),
                dict(num_episodes=5, max_steps=0)):
        with pytest.raises(ValueError):
            tabular.off_policy_mc_control(maze, **bad)


def test_batch_td_mc_example_6_4():
    episodes = ([[(0, 0, 0.0, 1, False), (1, 0, 0.0, 2, True)]] + [[(1, 0, 1.0, 2, True)]] * 6
                + [[(1, 0, 0.0, 2, True)]])
    V_td, V_mc = tabular.batch_td_mc(episodes, 3)
    assert np.allclose(V_td[:2], [0.75, 0.75]) and np.allclose(V_mc[:2], [0.0, 0.75])
    for bad in [([], 3), ([[]], 3), ([[(0, 0, 0.0, 5, True)]], 3), ([[(0, 0, 0.0, 1, False)]], 3)]:
        with pytest.raises(ValueError):
            tabular.batch_td_mc(*bad)
    with pytest.raises(ValueError, match="alpha"):
        tabular.batch_td_mc(episodes, 3, alpha=0.0)


def test_n_step_core_matches_gae_and_td_target():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(9, 2)), rng.normal(size=(9, 2))
    d, last = (rng.random((9, 2)) < 0.3).astype(float), rng.normal(size=2)
    assert np.allclose(tabular.n_step_returns(r, v, d, last, 0.9, 50), gae(r, v, d, last, 0.9, 1.0)[1])
    next_v = np.concatenate([v[1:], last[None]])
    assert np.allclose(tabular.n_step_returns(r, v, d, last, 0.9, 1), r + 0.9 * (1 - d) * next_v)
    # two steps by hand at t = 0
    G2 = r[0] + 0.9 * (1 - d[0]) * (r[1] + 0.9 * (1 - d[1]) * v[2])
    assert np.allclose(tabular.n_step_returns(r, v, d, last, 0.9, 2)[0], G2)


def test_value_iteration_greedy_policy_is_two_tol_optimal():
    for seed in range(5):
        mdp = random_mdp(8, 3, 0.95, seed=seed)
        V_star = policy_evaluation(mdp, value_iteration(mdp, tol=1e-12)[1])
        for tol in (1e-1, 1e-2, 1e-3):
            _, pi = value_iteration(mdp, tol=tol)
            assert np.abs(policy_evaluation(mdp, pi) - V_star).max() <= 2 * tol


def test_td_control_batch_per_run_step_sizes():
    cliff = gym.make("CliffWalking-v1")
    alphas = np.array([0.5, 0.5, 0.1])
    Q, R = tabular.td_control_batch(cliff, "expected_sarsa", num_runs=3, num_episodes=5, alpha=alphas,
                                    epsilon=0.1, seed=0)
    assert Q.shape == (3, 48, 4) and R.shape == (3, 5)
    Q_scalar, _ = tabular.td_control_batch(cliff, "expected_sarsa", num_runs=3, num_episodes=5,
                                           alpha=0.5, epsilon=0.1, seed=0)
    Q_array, _ = tabular.td_control_batch(cliff, "expected_sarsa", num_runs=3, num_episodes=5,
                                          alpha=np.full(3, 0.5), epsilon=0.1, seed=0)
    assert np.array_equal(Q_scalar, Q_array)             # one step size per run, all equal
    assert not np.array_equal(Q, Q_scalar)
    for bad in (np.ones(2) * 0.5, np.array([0.5, 0.0, 0.1]), np.array([0.5, 1.5, 0.1]),
                np.array([0.5, np.nan, 0.1])):
        with pytest.raises(ValueError, match="alpha"):
            tabular.td_control_batch(cliff, "sarsa", num_runs=3, num_episodes=2, alpha=bad,
                                     epsilon=0.1, seed=0)
