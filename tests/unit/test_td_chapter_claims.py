"""Claims of the TD chapter's prose and written solutions, checked at the scale they state (the
notebook asserts the prose claims too; written solutions are not executed by the build)."""

from collections import Counter

import gymnasium as gym
import numpy as np

import rlnotes.envs  # noqa: F401
from rlnotes import tabular as tb
from rlnotes.envs.random_walk import true_values, uniform_policy

START, GOAL = 36, 47
OPTIMAL = tuple([START, 24, *range(25, 36), GOAL])


def test_first_visit_exercise_solution():
    """ex-td-first-visit: 100 runs of 100 episodes, seed 1, V0 = 0.5."""
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi, v, states = uniform_policy(), true_values(), np.arange(1, 6)
    V0 = np.where(np.isin(np.arange(7), states), 0.5, 0.0)

    def final(first_visit, alpha):
        h = tb.mc_prediction_batch(walk, pi, 100, 100, alpha, first_visit=first_visit, V0=V0, seed=1)
        return tb.rms_error(h, v, states).mean(axis=1)[100]

    assert final(True, 0.01) > final(False, 0.01)     # slower with a small step
    assert final(True, 0.04) < final(False, 0.04)     # lower with the largest step
    td = tb.rms_error(tb.td0_prediction_batch(walk, pi, 100, 100, 0.05, V0=V0, seed=1), v,
                      states).mean(axis=1)[100]
    assert all(td < final(fv, a) for fv in (True, False) for a in (0.01, 0.02, 0.03, 0.04))


def test_cliff_epsilon_exercise_solution():
    """ex-td-cliff-epsilon: epsilon_k = 0.1 / k, alpha = 0.5, 100 runs of 500 episodes."""
    cliff = gym.make("CliffWalking-v1")
    kw = dict(num_runs=100, num_episodes=500, alpha=0.5, epsilon=0.1, seed=0)
    Q_s, R_s = tb.td_control_batch(cliff, "sarsa", epsilon_decay=1.0, **kw)
    Q_q, R_q = tb.td_control_batch(cliff, "q_learning", epsilon_decay=1.0, **kw)
    sarsa_paths = Counter(tuple(tb.greedy_path(cliff, q)[0]) for q in Q_s)
    assert len(sarsa_paths.most_common(1)[0][0]) - 1 == 15
    assert 0 < sarsa_paths[OPTIMAL] < 50
    assert all(tuple(tb.greedy_path(cliff, q)[0]) == OPTIMAL for q in Q_q)
    assert abs(R_s[:, -100:].mean() - R_q[:, -100:].mean()) < 3
    _, R_s0 = tb.td_control_batch(cliff, "sarsa", **kw)
    _, R_q0 = tb.td_control_batch(cliff, "q_learning", **kw)
    assert R_s0[:, -100:].mean() - R_q0[:, -100:].mean() > 10


def test_cliff_glie_and_small_step_claims():
    cliff = gym.make("CliffWalking-v1")
    Q, _ = tb.td_control_batch(cliff, "sarsa", num_runs=40, num_episodes=1000, alpha=1.0,
                               epsilon=0.1, epsilon_decay=1.0, epsilon_clock="state",
                               alpha_decay=0.51, seed=0)
    assert sum(tuple(tb.greedy_path(cliff, q)[0]) == OPTIMAL for q in Q) >= 20  # half of 40
    Q, _ = tb.td_control_batch(cliff, "sarsa", num_runs=100, num_episodes=500, alpha=0.1,
                               epsilon=0.1, seed=0)
    mode = Counter(tuple(tb.greedy_path(cliff, q)[0]) for q in Q).most_common(1)[0][0]
    assert len(mode) - 1 == 15 and min(mode) == 12   # along row 1, one row clear of the edge


def test_epsilon_clock_state_decays_per_visit_and_bad_input():
    """epsilon_clock="state": epsilon / n(s) when acting in s for the n(s)-th time; with no decay
    the clock changes nothing, and a bad clock name is refused."""
    import pytest
    cliff = gym.make("CliffWalking-v1")
    kw = dict(num_runs=5, num_episodes=20, alpha=0.5, epsilon=0.1, seed=3)
    for method in ("sarsa", "q_learning", "expected_sarsa"):
        Q1, R1 = tb.td_control_batch(cliff, method, **kw)
        Q2, R2 = tb.td_control_batch(cliff, method, epsilon_clock="state", **kw)
        assert np.array_equal(Q1, Q2) and np.array_equal(R1, R2)   # no decay: same run
    # greedy from the first visit on (epsilon = 1 / n(s) with a huge decay exponent) against the
    # episode clock, where the first episode still explores with epsilon = 1
    _, R_state = tb.td_control_batch(cliff, "sarsa", num_runs=20, num_episodes=1, alpha=0.5,
                                     epsilon=1.0, epsilon_decay=10.0, epsilon_clock="state", seed=0)
    _, R_episode = tb.td_control_batch(cliff, "sarsa", num_runs=20, num_episodes=1, alpha=0.5,
                                       epsilon=1.0, epsilon_decay=10.0, seed=0)
    assert R_state.mean() > R_episode.mean()
    for bad in ("visit", "", None):
        with pytest.raises(ValueError, match="epsilon_clock"):
            tb.td_control_batch(cliff, "sarsa", epsilon_clock=bad, **kw)


def test_first_episode_exercise_solution():
    """ex-td-first-episode: TD(0) changes only the last state of the first episode, by
    alpha * 0.5; every-visit MC (alpha = 0.1) multiplies a state visited k times by 0.9^k when
    the return is 0, and moves it toward 1 (0.5 -> 1 - 0.5 * 0.9^k) when the return is 1."""
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi, states = uniform_policy(), np.arange(1, 6)
    V0 = np.where(np.isin(np.arange(7), states), 0.5, 0.0)
    for seed in range(6):
        td = tb.td0_prediction(walk, pi, 1, 0.1, V0=V0, seed=seed)[1]
        changed = np.flatnonzero(td != V0)
        assert changed.size == 1 and changed[0] in (1, 5)
        assert np.isclose(td[changed[0]], 0.45 if changed[0] == 1 else 0.55)
        mc = tb.mc_prediction(walk, pi, 1, 0.1, first_visit=False, V0=V0, seed=seed)[1]
        moved = states[mc[states] != 0.5]
        assert moved.size >= 1
        left = mc[moved] < 0.5
        assert left.all() or (~left).all()                    # one return for the whole episode
        gap = np.where(left, mc[moved], 1.0 - mc[moved]) / 0.5  # 0.9^k for k visits
        k = np.log(gap) / np.log(0.9)
        assert np.allclose(k, np.round(k)) and (np.round(k) >= 1).all()


def test_rms_rise_exercise_solution():
    """ex-td-rms-rise: with alpha = 0.15 the dip below the final level comes from the start
    V = 0.5; from V = 0 or V = 1 the curve falls to the same floor without a dip, and from the
    true values the error only rises to that floor (100 runs of 300 episodes)."""
    walk = gym.make("rlnotes/RandomWalk-v0")
    pi, v, states = uniform_policy(), true_values(), np.arange(1, 6)
    inside = np.isin(np.arange(7), states)
    curves = {}
    for name, V0 in {"0.5": np.where(inside, 0.5, 0.0), "0": np.zeros(7),
                     "1": np.where(inside, 1.0, 0.0), "true": v.copy()}.items():
        h = tb.td0_prediction_batch(walk, pi, 100, 300, 0.15, V0=V0, seed=1)
        curves[name] = tb.rms_error(h, v, states).mean(axis=1)
    floor = {name: c[150:].mean() for name, c in curves.items()}
    assert max(floor.values()) - min(floor.values()) < 0.005       # the floor is alpha's
    assert 10 < curves["0.5"].argmin() < 40 and curves["0.5"].min() < floor["0.5"] - 0.01
    for name in ("0", "1"):
        assert curves[name][:150].min() > floor[name] - 0.007      # no dip
    assert curves["true"][0] == 0.0 and curves["true"][1:50].max() < floor["true"] + 0.01
