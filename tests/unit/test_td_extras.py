"""n-step returns and n-step TD, batch updating, Monte Carlo control, the time-limited optimum,
exploration and step-size schedules, and truncated Monte Carlo targets (rlnotes.tabular)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit

import rlnotes.envs  # noqa: F401
from rlnotes import tabular as tb
from rlnotes.envs.random_walk import RandomWalkEnv, true_values, uniform_policy
from rlnotes.exercises.td import certainty_equivalence
from rlnotes.mdp import TabularMDP, value_iteration
from rlnotes.returns import gae


def brute_n_step(r, v, d, last, gamma, n):
    T, N = r.shape
    G = np.zeros((T, N))
    for j in range(N):
        for t in range(T):
            g, ended = 0.0, False
            for k in range(n):
                if t + k >= T:
                    break
                g += gamma**k * r[t + k, j]
                if d[t + k, j]:
                    ended = True
                    break
            if not ended:
                h = min(n, T - t)
                g += gamma**h * (v[t + h, j] if t + h < T else last[j])
            G[t, j] = g
    return G


def test_n_step_returns_against_a_brute_force_loop_and_its_limits():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(9, 3)), rng.normal(size=(9, 3))
    d = (rng.random((9, 3)) < 0.25).astype(float)
    last = rng.normal(size=3)
    for n in (1, 2, 3, 5, 9, 20):
        assert np.allclose(tb.n_step_returns(r, v, d, last, 0.9, n), brute_n_step(r, v, d, last, 0.9, n))
    next_v = np.concatenate([v[1:], last[None]])
    assert np.allclose(tb.n_step_returns(r, v, d, last, 0.9, 1), tb.td_target(r, next_v, d, 0.9))
    assert np.allclose(tb.n_step_returns(r, v, d, last, 0.9, 50), gae(r, v, d, last, 0.9, 1.0)[1])
    one = tb.n_step_returns(r[:, 0], v[:, 0], d[:, 0], last[0], 0.9, 3)
    assert np.allclose(one, brute_n_step(r, v, d, last, 0.9, 3)[:, 0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0), "n"), (dict(gamma=1.5), "gamma"), (dict(values=np.zeros((4, 2))), "values"),
    (dict(dones=np.full((5, 2), 0.5)), "dones"), (dict(last_value=np.zeros(3)), "last_value"),
    (dict(rewards=np.zeros((0, 2)), values=np.zeros((0, 2)), dones=np.zeros((0, 2))), "rewards")])
def test_n_step_returns_bad_input(kwargs, match):
    args = dict(rewards=np.zeros((5, 2)), values=np.zeros((5, 2)), dones=np.zeros((5, 2)),
                last_value=np.zeros(2), gamma=0.9, n=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        tb.n_step_returns(**args)


def test_n_step_td_is_td0_for_n_1_and_monte_carlo_for_long_n():
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi, V0 = uniform_policy(), np.r_[0.0, np.full(5, 0.5), 0.0]
    h1 = tb.n_step_td_prediction_batch(walk, pi, 1, num_runs=50, num_episodes=30, alpha=0.1, V0=V0, seed=1)
    h0 = tb.td0_prediction_batch(walk, pi, num_runs=50, num_episodes=30, alpha=0.1, V0=V0, seed=1)
    assert np.array_equal(h1, h0)
    hn = tb.n_step_td_prediction_batch(walk, pi, 500, num_runs=50, num_episodes=30, alpha=0.05, V0=V0, seed=1)
    hm = tb.mc_prediction_batch(walk, pi, num_runs=50, num_episodes=30, alpha=0.05, first_visit=False,
                                V0=V0, seed=1)
    assert np.allclose(hn, hm)


def test_n_step_td_per_run_step_sizes_and_bad_input():
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi = uniform_policy()
    h = tb.n_step_td_prediction_batch(walk, pi, 2, num_runs=4, num_episodes=5,
                                      alpha=np.array([0.1, 0.1, 0.5, 0.5]), seed=0)
    assert h.shape == (6, 4, 7)
    with pytest.raises(ValueError, match="alpha"):
        tb.n_step_td_prediction_batch(walk, pi, 2, num_runs=4, num_episodes=5, alpha=np.ones(3))
    with pytest.raises(ValueError, match="alpha"):
        tb.n_step_td_prediction_batch(walk, pi, 2, num_runs=2, num_episodes=5, alpha=np.array([0.1, 0.0]))
    with pytest.raises(ValueError, match="n"):
        tb.n_step_td_prediction_batch(walk, pi, 0, num_runs=2, num_episodes=5, alpha=0.1)
    with pytest.raises(ValueError, match="num_episodes"):
        tb.n_step_td_prediction_batch(walk, pi, 2, num_runs=2, num_episodes=0, alpha=0.1)


def test_n_step_td_beats_td0_and_mc_on_the_19_state_walk():
    """The chapter's Figure 7.2 claim, at the chapter's scale."""
    walk19, pi19, v19 = RandomWalkEnv(19), uniform_policy(19), true_values(19)
    inner = np.arange(1, 20)
    V0 = np.where(np.isin(np.arange(21), inner), 0.5, 0.0)
    alphas = np.array([0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0])
    best = {}
    for n in (1, 2, 4):
        h = tb.n_step_td_prediction_batch(walk19, pi19, n, num_runs=700, num_episodes=10,
                                          alpha=np.repeat(alphas, 100), V0=V0, seed=2)
        best[n] = tb.rms_error(h[1:], v19, inner).mean(axis=0).reshape(7, 100).mean(axis=1).min()
    best["mc"] = min(tb.rms_error(tb.mc_prediction_batch(walk19, pi19, 100, 10, a, first_visit=False,
                                                         V0=V0, seed=2)[1:], v19, inner).mean()
                     for a in alphas)
    assert best[4] < best[1] and best[4] < best["mc"] and best[2] < best[1]


def test_batch_prediction_limits_and_the_chapter_claim():
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi = uniform_policy()
    V_td, V_mc = tb.batch_prediction(walk, pi, num_runs=100, num_episodes=100, seed=0)
    rms_td = tb.rms_error(V_td, true_values(), np.arange(1, 6)).mean(axis=1)
    rms_mc = tb.rms_error(V_mc, true_values(), np.arange(1, 6)).mean(axis=1)
    assert np.all(rms_td[1:] < rms_mc[1:]) and rms_td[99] < 0.7 * rms_mc[99]
    # the limits, checked on one small run against direct computations from the same episodes
    V_td, V_mc = tb.batch_prediction(walk, pi, num_runs=1, num_episodes=1, seed=5)
    assert V_td.shape == (1, 1, 7)
    with pytest.raises(ValueError, match="time limit"):
        tb.batch_prediction(TimeLimit(RandomWalkEnv(), 50), pi, 1, 1)
    with pytest.raises(ValueError, match="num_runs"):
        tb.batch_prediction(walk, pi, 0, 1)
    with pytest.raises(ValueError, match="tol"):
        tb.batch_prediction(walk, pi, 1, 1, tol=0.0)


def test_batch_td_is_certainty_equivalence_and_batch_mc_the_mean_return():
    """Replay the episodes batch_prediction sampled (same seed, same model calls) to compute the
    certainty-equivalence values and the mean returns directly."""
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi = uniform_policy()
    model = tb.toy_text_model(walk)
    rng = np.random.default_rng(7)
    episodes = []
    for _ in range(6):
        s = model.sample_start(1, rng)
        episode = []
        while True:
            a = tb._sample_actions(pi[s], rng)
            s2, r, term = model.sample_step(s, a, rng)
            episode.append((int(s[0]), int(a[0]), float(r[0]), int(s2[0]), bool(term[0])))
            s = s2
            if term[0]:
                break
        episodes.append(episode)
    V_td, V_mc = tb.batch_prediction(walk, pi, num_runs=1, num_episodes=6, seed=7)
    assert np.allclose(V_td[-1, 0], certainty_equivalence(episodes, 7, 1.0), atol=1e-8)
    total, count = np.zeros(7), np.zeros(7)
    for episode in episodes:
        G = 0.0
        for s, a, r, s2, term in reversed(episode):
            G = r + G
            total[s] += G
            count[s] += 1
    assert np.allclose(V_mc[-1, 0], np.divide(total, count, out=np.zeros(7), where=count > 0))


def test_mc_control_finds_the_maze_optimum():
    maze = gym.make("rlnotes/Maze2x3-v0")
    _, pi_star = value_iteration(TabularMDP.from_gymnasium(maze, gamma=0.9))
    Q_es = tb.mc_control_batch(maze, 100, 200, gamma=0.9, exploring_starts=True, seed=0)
    Q_soft = tb.mc_control_batch(maze, 100, 200, gamma=0.9, epsilon=0.1, seed=0)
    assert ((Q_es.argmax(2)[:, :4] == pi_star[:4]).all(axis=1)).sum() == 100
    assert ((Q_soft.argmax(2)[:, :4] == pi_star[:4]).all(axis=1)).sum() >= 95
    with pytest.raises(ValueError, match="epsilon"):
        tb.mc_control_batch(maze, 2, 2)
    with pytest.raises(ValueError, match="exploring_starts"):
        tb.mc_control_batch(maze, 2, 2, exploring_starts=1)
    with pytest.raises(ValueError, match="max_steps"):
        tb.mc_control_batch(maze, 2, 2, epsilon=0.1, max_steps=0)


def test_best_expected_return_is_the_time_limited_optimum():
    lake = gym.make("FrozenLake-v1", is_slippery=True)
    best, actions = tb.best_expected_return(lake)
    _, pi_star = value_iteration(TabularMDP.from_gymnasium(lake, gamma=1.0))
    stationary = tb.expected_return(lake, pi_star)
    assert abs(best - 0.7442) < 1e-4 and abs(stationary - 0.7402) < 1e-4 and best > stationary
    assert actions.shape == (100, 16) and (actions != actions[0]).any()
    assert tb.best_expected_return(lake, horizon=1)[0] == 0.0
    with pytest.raises(ValueError, match="horizon"):
        tb.best_expected_return(lake, horizon=0)
    with pytest.raises(ValueError, match="horizon"):
        tb.best_expected_return(RandomWalkEnv())


def test_schedules_default_to_the_constant_run_and_reject_bad_values():
    cliff = gym.make("CliffWalking-v1")
    a = tb.td_control_batch(cliff, "sarsa", 5, 20, 0.5, 0.1, seed=0)
    b = tb.td_control_batch(cliff, "sarsa", 5, 20, 0.5, 0.1, seed=0, epsilon_decay=0.0, alpha_decay=0.0)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    c = tb.td_control_batch(cliff, "expected_sarsa", 5, 20, 0.5, 0.1, seed=0, epsilon_decay=1.0,
                            alpha_decay=0.6)
    assert np.isfinite(c[0]).all()
    for kwargs in (dict(epsilon_decay=-1.0), dict(alpha_decay=-0.5), dict(epsilon_decay=float("nan"))):
        with pytest.raises(ValueError):
            tb.td_control_batch(cliff, "sarsa", 2, 2, 0.5, 0.1, **kwargs)


def test_sample_targets_complete_truncated_returns_with_the_estimate():
    """With a time limit of 1 step on the random walk, no episode from C terminates in time: the MC
    target is r + V(s_1), the same as the TD target, instead of the cut-off return r = 0."""
    walk = TimeLimit(RandomWalkEnv(), max_episode_steps=1)
    V = np.linspace(0.0, 1.0, 7)
    mc, td = tb.sample_targets(walk, uniform_policy(), V, 3, num_samples=200, seed=0)
    assert np.allclose(mc, td) and set(np.round(mc, 6)) == {round(V[2], 6), round(V[4], 6)}


def test_best_expected_return_bad_env():
    from gymnasium import spaces

    class Box(gym.Env):
        observation_space = spaces.Box(0, 1, (2,))
        action_space = spaces.Discrete(2)
    with pytest.raises(ValueError, match="env"):
        tb.best_expected_return(Box(), horizon=5)
