"""Tests of the book's grid environments (rlnotes.envs.gridworld, rlnotes.envs.maze)."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlnotes.envs  # noqa: F401  (registers the ids)
from rlnotes.envs.gridworld import DOWN, GRID_8X8, LEFT, RIGHT, UP, GridWorldEnv, sutton_barto_4x4
from rlnotes.envs.maze import Maze2x3Env
from rlnotes.envs.tabular_env import TabularEnv
from rlnotes.mdp import TabularMDP

IDS = ["rlnotes/Maze2x3-v0", "rlnotes/GridWorld-v0"]


@pytest.mark.parametrize("env_id", IDS)
def test_registered_envs_pass_gymnasium_check_env(env_id):
    for render_mode in (None, "ansi"):
        env = gym.make(env_id, render_mode=render_mode)
        check_env(env.unwrapped)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # check_env warns that gym.make wrapped the env
            check_env(gym.make(env_id, render_mode=render_mode))


@pytest.mark.parametrize("env_id", IDS)
def test_reset_is_seeded_and_episodes_end(env_id):
    env = gym.make(env_id, max_episode_steps=10_000)

    def play(seed):
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        states = [obs]
        for _ in range(10_000):
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            states.append(obs)
            if terminated or truncated:
                return states, terminated
        return states, False

    first, ended = play(3)
    assert play(3) == (first, ended)  # same seed, same episode
    assert ended  # a random walk ends in the goal or the trap
    assert all(env.observation_space.contains(s) for s in first)


def test_grid_world_layout_and_rewards():
    env = GridWorldEnv()
    assert env.observation_space.n == 64 and env.action_space.n == 4
    assert env.shape == (8, 8) and env.desc[0, 7] == b"G" and env.desc[3, 3] == b"T"
    s, _ = env.reset(seed=0)
    assert s == 56  # bottom-left start
    assert env.P[6][RIGHT] == [(1.0, 7, 1.0, True)]    # into the goal
    assert env.P[26][RIGHT] == [(1.0, 27, -1.0, True)]  # into the trap
    assert env.P[56][LEFT] == [(1.0, 56, 0.0, False)]   # bump: stay
    assert env.P[7][UP] == [(1.0, 7, 0.0, True)]        # terminal: absorbing
    assert env.terminal.sum() == 2


def test_grid_world_slip_and_walls():
    env = GridWorldEnv(("S#.", "..G"), slip=0.2)
    # From S moving right: the wall keeps it in place (0.8); sideways: down (0.1) or up (0.1, bump).
    outcomes = {s2: p for p, s2, _, _ in env.P[0][RIGHT]}
    assert outcomes == pytest.approx({0: 0.9, 3: 0.1})
    for s in env.P:
        for a in env.P[s]:
            assert sum(p for p, *_ in env.P[s][a]) == pytest.approx(1.0)
    mdp = TabularMDP.from_gymnasium(env, 0.9)
    assert mdp.absorbing[1] and mdp.absorbing[5]  # wall and goal


def test_render_ansi_marks_the_agent():
    env = Maze2x3Env(render_mode="ansi")
    env.reset(seed=0)
    env.step(RIGHT)
    text = env.render()
    assert text.splitlines()[:2] == ["S @ .", ". T G"] and "(right)" in text
    assert Maze2x3Env().render() is None


def test_maze_rewards_and_episode():
    env = Maze2x3Env()
    env.reset(seed=0)
    rewards = [env.step(a)[1:3] for a in (RIGHT, RIGHT, DOWN)]
    assert rewards == [(0.0, False), (0.0, False), (10.0, True)]
    env.reset(seed=0)
    assert env.step(DOWN)[1:3] == (0.0, False)
    assert env.step(RIGHT)[1:3] == (-10.0, True)


def test_sutton_barto_4x4():
    env = sutton_barto_4x4()
    assert env.shape == (4, 4) and env.terminal.tolist() == [True] + [False] * 14 + [True]
    starts = {env.reset(seed=i)[0] for i in range(200)}
    assert starts == set(range(1, 15))
    assert env.P[1][LEFT] == [(1.0, 0, -1.0, True)]
    assert env.P[5][UP] == [(1.0, 1, -1.0, False)]


@pytest.mark.parametrize("kwargs, match", [
    (dict(layout="S.G"), "layout must be a non-empty sequence"),
    (dict(layout=("S.", "...")), "equal length"),
    (dict(layout=("S.X",)), "characters"),
    (dict(layout=("GG",)), "to start from"),
    (dict(slip=1.0), "slip"),
    (dict(slip=-0.1), "slip"),
    (dict(goal_reward=float("inf")), "goal_reward"),
])
def test_grid_world_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GridWorldEnv(**kwargs)


def test_bad_actions_and_render_modes():
    env = GridWorldEnv(GRID_8X8)
    env.reset(seed=0)
    for action in (4, -1, "up"):
        with pytest.raises(ValueError, match="action"):
            env.step(action)
    with pytest.raises(ValueError, match="render_mode"):
        GridWorldEnv(render_mode="human")


def test_tabular_env_rejects_bad_tables():
    with pytest.raises(ValueError, match="P must be a non-empty dict"):
        TabularEnv({}, [1.0])
    with pytest.raises(ValueError, match="sum to 1"):
        TabularEnv({0: {0: [(0.5, 0, 0.0, False)]}}, [1.0])
    with pytest.raises(ValueError, match="initial_state_distrib"):
        TabularEnv({0: {0: [(1.0, 0, 0.0, False)]}}, [0.5])


# ------------------------------------------------------------------------ grid plots

def test_plot_value_grid_draws_and_rejects_bad_input():
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation

    from rlnotes.plotting.grid import cell_labels, plot_value_grid

    def count(ax):
        arrows = [t for t in ax.texts if isinstance(t, Annotation)]
        return len(ax.texts) - len(arrows), len(arrows)

    env = GridWorldEnv()
    labels = cell_labels(env.desc)
    assert labels == {7: "G", 27: "T"}
    assert cell_labels(env.desc, show="S") == {56: "S"}
    V = np.linspace(-1, 1, 64)
    fig, ax = plt.subplots()
    plot_value_grid(V, (8, 8), policy=np.zeros(64, dtype=int), labels=labels, title="t", ax=ax)
    assert ax.get_title() == "t" and count(ax) == (64, 62)  # no arrows on G and T
    fig, ax = plt.subplots()
    plot_value_grid(V, (8, 8), policy=np.full((64, 4), 0.25), annotate=False, ax=ax)
    assert count(ax) == (0, 64 * 4)
    with pytest.raises(ValueError, match="shape"):
        plot_value_grid(V, (8, 7))
    with pytest.raises(ValueError, match="policy"):
        plot_value_grid(V, (8, 8), policy=np.zeros(10, dtype=int))
    with pytest.raises(ValueError, match="hide"):
        plot_value_grid(V, (8, 8), hide=np.zeros(3, dtype=bool))
    plt.close("all")
