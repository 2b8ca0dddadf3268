"""In-place evaluation, modified policy iteration, the value-iteration bound by episode length,
the exact stopping guarantees, the greedy-policy loss bound and the gamma = 1 examples of the MDP
chapter (each claim of the chapter is also asserted in the notebook)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlnotes.envs  # noqa: F401
from rlnotes import mdp
from rlnotes.envs.gridworld import GridWorldEnv, sutton_barto_4x4


def slippery(gamma=0.9):
    return mdp.TabularMDP.from_gymnasium(GridWorldEnv(slip=0.2), gamma=gamma)


def test_in_place_evaluation_is_accurate_and_needs_fewer_sweeps():
    m = slippery()
    pi = mdp.uniform_policy(m)
    V_exact = mdp.policy_evaluation(m, pi)
    V_sync, n_sync = mdp.iterative_policy_evaluation(m, pi, tol=1e-10)
    V_gs, n_gs = mdp.in_place_policy_evaluation(m, pi, tol=1e-10)
    assert np.abs(V_gs - V_exact).max() < 1e-10 and np.abs(V_sync - V_exact).max() < 1e-10
    assert (n_sync, n_gs) == (174, 106)
    for seed in range(5):
        r = mdp.random_mdp(7, 3, gamma=0.95, seed=seed)
        p = np.random.default_rng(seed).dirichlet(np.ones(3), size=7)
        V, _ = mdp.in_place_policy_evaluation(r, p, tol=1e-9)
        assert np.abs(V - mdp.policy_evaluation(r, p)).max() < 1e-9


@pytest.mark.parametrize("bad, match", [
    (dict(tol=0.0), "tol"), (dict(max_sweeps=0), "max_sweeps"), (dict(policy=np.zeros(3)), "policy")])
def test_in_place_evaluation_bad_input(bad, match):
    m = slippery()
    kwargs = dict(policy=mdp.uniform_policy(m), tol=1e-10, max_sweeps=100)
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        mdp.in_place_policy_evaluation(m, **kwargs)


def test_in_place_evaluation_refuses_gamma_one():
    sb = mdp.TabularMDP.from_gymnasium(sutton_barto_4x4(), gamma=1.0)
    with pytest.raises(ValueError, match="gamma"):
        mdp.in_place_policy_evaluation(sb, mdp.uniform_policy(sb))


def test_iterative_evaluation_keeps_its_guarantee_when_rounding_stalls():
    # gamma close to 1: the sweep change stalls at rounding level (16 ulps of |V| ~ 1e4, times
    # gamma / (1 - gamma) ~ 1e4, is above tol), so the result is finished by the exact solve
    big = mdp.random_mdp(5, 2, gamma=0.9999, seed=3)
    pi = np.zeros(5, dtype=int)
    V_exact = mdp.policy_evaluation(big, pi)
    assert 16 * np.finfo(float).eps * np.abs(V_exact).max() * 0.9999 / 1e-4 > 1e-7
    V, sweeps = mdp.iterative_policy_evaluation(big, pi, tol=1e-7, max_sweeps=2_000_000)
    assert np.abs(V - V_exact).max() < 1e-7 and sweeps > 1000


def test_iterative_evaluation_gamma_one_error_is_bounded_by_episode_length():
    sb = mdp.TabularMDP.from_gymnasium(sutton_barto_4x4(), gamma=1.0)
    pi = mdp.uniform_policy(sb)
    V_pi = mdp.policy_evaluation(sb, pi)
    V_it, sweeps = mdp.iterative_policy_evaluation(sb, pi, tol=1e-10)
    error = np.abs(V_it - V_pi).max()
    V_before = np.zeros(16)
    for _ in range(sweeps - 1):  # V_{k-1}: the last change is that of sweep k itself
        V_before = mdp.bellman_expectation_backup(sb, V_before, pi)
    last_change = np.abs(V_it - V_before).max()
    assert sweeps == 426 and 1e-9 < error < 1e-8 and (-V_pi).max() == pytest.approx(22)
    assert last_change < 1e-10 and error <= 21 * last_change
    # the residual of V_k (the change the next sweep would make) is bounded with E[T], not E[T] - 1
    residual = np.abs(mdp.bellman_expectation_backup(sb, V_it, pi) - V_it).max()
    assert error <= 22 * residual


def test_modified_policy_iteration_interpolates():
    m = slippery()
    V_star, _ = mdp.policy_iteration(m)
    counts = []
    for k in (1, 2, 5, 20, 100):
        V, pi, improvements = mdp.modified_policy_iteration(m, k, tol=1e-10)
        assert np.abs(V - V_star).max() < 1e-10
        assert np.allclose(mdp.policy_evaluation(m, pi), V_star)
        counts.append(improvements)
    assert counts == sorted(counts, reverse=True) and counts[0] == 53 and counts[-1] == 8
    assert len(mdp.policy_iteration_trace(m)) == 7


@pytest.mark.parametrize("bad, match", [(dict(m=0), "m"), (dict(tol=-1.0), "tol"),
                                        (dict(max_iterations=0), "max_iterations")])
def test_modified_policy_iteration_bad_input(bad, match):
    kwargs = dict(m=3, tol=1e-10, max_iterations=100)
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        mdp.modified_policy_iteration(slippery(), **kwargs)
    with pytest.raises(ValueError, match="gamma"):
        mdp.modified_policy_iteration(mdp.TabularMDP.from_gymnasium(sutton_barto_4x4(), 1.0), 2)
    with pytest.raises(ValueError, match="mdp"):
        mdp.modified_policy_iteration("not an mdp", 2)


def test_value_iteration_bounds_hold_and_beat_the_contraction_bound():
    for gamma in (0.5, 0.9, 0.99):
        m = slippery(gamma)
        V_star, _ = mdp.policy_iteration(m)
        V_k, bound = mdp.value_iteration_bounds(m, 300)
        assert np.allclose(V_k[0], mdp.bellman_optimality_backup(m, np.zeros(64)))
        assert (np.abs(V_k - V_star) <= bound + 1e-12).all()
        if gamma == 0.99:
            errors = np.abs(V_k - V_star).max(axis=1)
            assert errors[99] < 1e-12 and 0.99 ** 100 * np.abs(V_star).max() > 0.3
            assert bound[99].max() < 1e-12
    with pytest.raises(ValueError, match="num_sweeps"):
        mdp.value_iteration_bounds(slippery(), 0)


def test_greedy_policy_loss_bound():
    m = slippery()
    V_star, _ = mdp.policy_iteration(m)
    rng = np.random.default_rng(0)
    worst = 0.0
    for eps in (0.01, 0.03, 0.1, 0.3):
        for _ in range(20):
            V = V_star + rng.uniform(-eps, eps, size=64)
            loss = np.abs(mdp.policy_evaluation(m, mdp.greedy_policy(m, V)) - V_star).max()
            assert loss <= 2 * 0.9 * eps / 0.1
            worst = max(worst, loss / (2 * 0.9 * eps / 0.1))
    assert 0 < worst < 0.5


def two_state(stay_reward):
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = 1.0
    P[1, :, 1] = 1.0
    return mdp.TabularMDP(P, np.array([[stay_reward, -1.0], [0.0, 0.0]]), gamma=1.0)


def test_two_state_example_has_many_solutions_of_the_optimality_equation():
    free = two_state(0.0)
    for v0 in (-1.0, -0.5, 0.0, 3.0):
        V = np.array([v0, 0.0])
        assert np.allclose(mdp.bellman_optimality_backup(free, V), V)
    assert np.allclose(mdp.policy_evaluation(free, np.array([1, 0])), [-1.0, 0.0])
    V, pi = mdp.value_iteration(free)
    assert np.allclose(V, 0.0) and pi[0] == 0
    costly = two_state(-0.1)
    assert not np.allclose(mdp.bellman_optimality_backup(costly, np.zeros(2)), 0.0)
    V, pi = mdp.value_iteration(costly)
    assert np.allclose(V, [-1.0, 0.0]) and pi[0] == 1
    for v0 in (-0.5, 0.0, 3.0):
        V = np.array([v0, 0.0])
        assert not np.allclose(mdp.bellman_optimality_backup(costly, V), V)


def test_gamma_one_exercise_claims():
    """ex-mdp-gamma-one: (a) a +1 loop beside an exit makes value iteration raise; (b) on the
    non-slippery FrozenLake every safe cell has V* = 1, and the plain argmax policy never reaches
    the goal while rlnotes' tie rule does."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[0, 1, 1] = 1.0
    P[1, :, 1] = 1.0
    loop = mdp.TabularMDP(P, np.array([[1.0, 0.0], [0.0, 0.0]]), gamma=1.0)
    with pytest.raises(ValueError, match="gamma"):
        mdp.value_iteration(loop)
    with pytest.raises(ValueError, match="gamma"):
        mdp.policy_evaluation(loop, np.array([0, 0]))
    fl = mdp.TabularMDP.from_gymnasium(gym.make("FrozenLake-v1", is_slippery=False), gamma=1.0)
    V, pi = mdp.value_iteration(fl)
    assert V[0] == 1.0 and np.allclose(mdp.policy_evaluation(fl, pi), V)
    Q = mdp.q_values(fl, V)
    plain = np.argmax(Q, axis=1)
    assert plain[0] == 0  # "left" into the wall
    assert mdp.policy_evaluation(fl, plain)[0] == 0.0  # it bumps into the wall forever


def test_maze_by_hand_solution():
    maze = mdp.TabularMDP.from_gymnasium(gym.make("rlnotes/Maze2x3-v0"), gamma=0.9)
    V, pi = mdp.value_iteration(maze)
    assert np.allclose(V[:4], [8.1, 9.0, 10.0, 7.29]) and pi[:4].tolist() == [2, 2, 1, 3]


def test_contraction_exercise_euclidean_counterexample():
    P_pi = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert np.isclose(np.linalg.norm(P_pi, 2), np.sqrt(2))
    gamma, x = 0.8, np.array([1.0, 0.0])
    assert np.linalg.norm(gamma * P_pi @ x) > np.linalg.norm(x) > 0 and gamma > 1 / np.sqrt(2)


def test_new_solvers_accept_torch_mdps():
    m = mdp.random_mdp(4, 2, gamma=0.9, seed=0, torch_tensors=True)
    pi = torch.full((4, 2), 0.5, dtype=torch.float64)
    V, _ = mdp.in_place_policy_evaluation(m, pi)
    assert np.allclose(V, mdp.policy_evaluation(m, pi).numpy(), atol=1e-9)
    V, _, _ = mdp.modified_policy_iteration(m, 3)
    assert np.allclose(V, mdp.value_iteration(m)[0].numpy(), atol=1e-9)


@pytest.mark.parametrize("args, match", [((None, 5), "mdp"), (("grid", 0), "num_sweeps"),
                                         (("grid", 2.5), "num_sweeps")])
def test_value_iteration_bounds_bad_input(args, match):
    m = slippery() if args[0] == "grid" else "not an mdp"
    with pytest.raises(ValueError, match=match):
        mdp.value_iteration_bounds(m, args[1])


def test_backup_diagrams_draw_four_panels():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlnotes.plotting.backup import plot_backup_diagrams
    fig = plot_backup_diagrams()
    assert len(fig.axes) == 4 and all(ax.patches for ax in fig.axes)
    plt.close(fig)
