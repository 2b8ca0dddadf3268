"""Tests of rlnotes.mdp, including every numerical claim of the chapter "Markov decision
processes and dynamic programming"."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlnotes.envs  # noqa: F401  (registers the ids)
from rlnotes.envs.gridworld import GridWorldEnv, sutton_barto_4x4
from rlnotes.envs.maze import Maze2x3Env
from rlnotes.mdp import (
    PROB_ATOL, TabularMDP, bellman_expectation_backup, bellman_optimality_backup, greedy_policy,
    iterative_policy_evaluation, policy_evaluation, policy_iteration, policy_iteration_trace,
    policy_matrix, q_values, random_mdp, rollout_returns, uniform_policy, value_iteration)


def small_mdp(gamma=0.9):
    P = np.zeros((2, 2, 2))
    P[0, 0] = [0.5, 0.5]
    P[0, 1] = [0.0, 1.0]
    P[1, 0] = [1.0, 0.0]
    P[1, 1] = [0.2, 0.8]
    R = np.array([[1.0, 0.0], [-1.0, 2.0]])
    return P, R, gamma


def positive_loop_mdp():
    """State 0 can loop with reward +1 forever or end in state 1 (absorbing, zero reward)."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = 1.0
    P[0, 1, 1] = 1.0
    P[1, :, 1] = 1.0
    return P, np.array([[1.0, 0.0], [0.0, 0.0]])


EXAMPLE_4_1 = np.array([[0, -14, -20, -22], [-14, -18, -20, -20],
                        [-20, -20, -18, -14], [-22, -20, -14, 0]], dtype=float)


# ------------------------------------------------------------------------------- TabularMDP

class TestTabularMDPRejects:
    def test_p_not_three_dimensional(self):
        with pytest.raises(ValueError, match="P must have shape"):
            TabularMDP(np.ones((2, 2)) / 2, np.zeros((2, 2)), 0.9)

    def test_p_not_square_in_states(self):
        with pytest.raises(ValueError, match="P must have shape"):
            TabularMDP(np.ones((2, 2, 3)) / 3, np.zeros((2, 2)), 0.9)

    def test_p_empty(self):
        with pytest.raises(ValueError, match="P must have at least one"):
            TabularMDP(np.ones((2, 0, 2)), np.zeros((2, 0)), 0.9)

    def test_r_wrong_shape(self):
        P, R, g = small_mdp()
        with pytest.raises(ValueError, match="R must have shape"):
            TabularMDP(P, R.T[:, :1], g)
        with pytest.raises(ValueError, match="R must have shape"):
            TabularMDP(P, np.zeros(2), g)

    def test_negative_probability(self):
        P, R, g = small_mdp()
        P[0, 0] = [1.1, -0.1]
        with pytest.raises(ValueError, match="P must hold probabilities >= 0"):
            TabularMDP(P, R, g)

    def test_rows_must_sum_to_one_within_tolerance(self):
        P, R, g = small_mdp()
        P[1, 1] = [0.2, 0.7]
        with pytest.raises(ValueError, match=r"P\[s, a, :\] must sum to 1 \(within 1e-08\)"):
            TabularMDP(P, R, g)
        P[1, 1] = [0.2, 0.8 + 0.5 * PROB_ATOL]  # within the stated tolerance: accepted
        TabularMDP(P, R, g)
        P[1, 1] = [0.2, 0.8 + 10 * PROB_ATOL]
        with pytest.raises(ValueError, match="P"):
            TabularMDP(P, R, g)

    @pytest.mark.parametrize("gamma", [-0.1, 1.5, float("nan"), "0.9", None])
    def test_gamma_outside_unit_interval(self, gamma):
        P, R, _ = small_mdp()
        with pytest.raises(ValueError, match="gamma"):
            TabularMDP(P, R, gamma)

    def test_gamma_one_without_termination(self):
        P, R, _ = small_mdp()  # no absorbing state: returns are not finite
        with pytest.raises(ValueError, match="gamma = 1 needs an episodic MDP"):
            TabularMDP(P, R, 1.0)

    def test_gamma_one_with_a_state_that_cannot_terminate(self):
        P = np.zeros((3, 1, 3))
        P[0, 0, 2] = 1.0   # 0 -> 2, terminal
        P[1, 0, 1] = 1.0   # 1 loops on itself with reward 1
        P[2, 0, 2] = 1.0
        R = np.array([[-1.0], [1.0], [0.0]])
        with pytest.raises(ValueError, match=r"gamma = 1.*state\(s\) 1"):
            TabularMDP(P, R, 1.0)
        TabularMDP(P, R, 0.99)  # fine with discounting

    def test_non_finite_and_mixed_kinds(self):
        P, R, g = small_mdp()
        R[0, 0] = np.nan
        with pytest.raises(ValueError, match="R must contain only finite"):
            TabularMDP(P, R, g)
        P, R, g = small_mdp()
        with pytest.raises(ValueError, match="same kind"):
            TabularMDP(torch.tensor(P), R, g)
        with pytest.raises(ValueError, match="P must be a numpy array or torch tensor"):
            TabularMDP("P", R, g)

    def test_accepts_lists_and_scalar_tensors(self):
        P, R, _ = small_mdp()
        mdp = TabularMDP(P.tolist(), R.tolist(), torch.tensor(0.5))
        assert mdp.gamma == 0.5 and mdp.num_states == 2 and mdp.num_actions == 2
        assert "TabularMDP(S=2, A=2" in repr(mdp)


def test_absorbing_set():
    P, R = positive_loop_mdp()
    mdp = TabularMDP(P, R, 1.0)  # state 0 can reach the absorbing state 1
    assert mdp.absorbing.tolist() == [False, True]


# ------------------------------------------------------------------------------- from_gymnasium

class _FakeToyText:
    def __init__(self, table, S, A):
        self.P = table
        self.observation_space = gym.spaces.Discrete(S)
        self.action_space = gym.spaces.Discrete(A)
        self.unwrapped = self


def test_from_gymnasium_adds_repeated_outcomes_and_makes_terminals_absorbing():
    table = {
        0: {0: [(0.25, 1, 1.0, False), (0.25, 1, 3.0, False), (0.5, 2, 10.0, True)],
            1: [(1.0, 0, -1.0, False)]},
        1: {0: [(1.0, 0, 0.0, False)], 1: [(1.0, 2, 5.0, True)]},
        2: {0: [(1.0, 0, 7.0, False)], 1: [(1.0, 1, 7.0, False)]},  # terminal row rewritten
    }
    mdp = TabularMDP.from_gymnasium(_FakeToyText(table, 3, 2), 0.9)
    assert np.allclose(mdp.P[0, 0], [0.0, 0.5, 0.5])
    assert np.isclose(mdp.R[0, 0], 0.25 * 1 + 0.25 * 3 + 0.5 * 10)
    assert np.allclose(mdp.P[2, :, 2], 1.0) and np.all(mdp.R[2] == 0)
    assert mdp.R[1, 1] == 5.0  # the reward of entering the terminal state is kept
    assert mdp.absorbing.tolist() == [False, False, True]


def test_from_gymnasium_frozenlake():
    env = gym.make("FrozenLake-v1", is_slippery=True)
    mdp = TabularMDP.from_gymnasium(env, 0.99)
    assert mdp.P.shape == (16, 4, 16) and mdp.R.shape == (16, 4)
    holes_and_goal = [5, 7, 11, 12, 15]
    assert np.flatnonzero(mdp.absorbing).tolist() == holes_and_goal
    assert np.isclose(mdp.R[14, 2], 1 / 3)  # slippery: reaches the goal with probability 1/3


def test_from_gymnasium_cliffwalking_and_taxi():
    mdp = TabularMDP.from_gymnasium(gym.make("CliffWalking-v1"), 1.0)
    start, goal = 36, 47
    assert mdp.P[start, 2, start] == 1.0 and mdp.R[start, 1] == -100  # the cliff sends back
    assert mdp.absorbing[goal] and mdp.absorbing.sum() == 1
    V, pi = value_iteration(mdp)
    assert V[start] == pytest.approx(-13.0)  # the shortest path along the cliff: 13 steps
    taxi = TabularMDP.from_gymnasium(gym.make("Taxi-v4"), 0.9)
    assert taxi.P.shape == (500, 6, 500)
    assert np.allclose(taxi.P.sum(axis=2), 1.0)
    assert taxi.absorbing.sum() == 4


def test_from_gymnasium_rejects_envs_without_a_table():
    with pytest.raises(ValueError, match="env must be a toy-text"):
        TabularMDP.from_gymnasium(gym.make("CartPole-v1"), 0.9)
    env = _FakeToyText({0: {0: [(1.0, 3, 0.0, False)]}}, 1, 1)
    with pytest.raises(ValueError, match="outside"):
        TabularMDP.from_gymnasium(env, 0.9)
    with pytest.raises(ValueError, match="gamma"):
        TabularMDP.from_gymnasium(gym.make("FrozenLake-v1"), 1.2)


# ------------------------------------------------------------------------------- evaluation

def test_example_4_1_random_policy_values():
    """Sutton and Barto's Example 4.1: the values of the equiprobable random policy."""
    mdp = TabularMDP.from_gymnasium(sutton_barto_4x4(), 1.0)
    V = policy_evaluation(mdp, uniform_policy(mdp))
    assert np.abs(V.reshape(4, 4) - EXAMPLE_4_1).max() < 1e-9  # whole numbers
    # The greedy policy of these values is optimal: it reaches a corner by a shortest path.
    V_star, _ = policy_iteration(mdp)
    assert np.allclose(policy_evaluation(mdp, greedy_policy(mdp, V)), V_star)
    assert np.allclose(V_star.reshape(4, 4), [[0, -1, -2, -3], [-1, -2, -3, -2],
                                              [-2, -3, -2, -1], [-3, -2, -1, 0]])
    # Iterative evaluation stops when a sweep changes V by less than tol = 1e-10, after 426
    # sweeps; with gamma = 1 that does not bound the error, which is still above 1e-9.
    V_it, sweeps = iterative_policy_evaluation(mdp, uniform_policy(mdp), tol=1e-10)
    assert sweeps == 426
    assert 1e-9 < np.abs(V_it - V).max() < 1e-8
    # "up" everywhere never ends outside the first column: no finite value with gamma = 1.
    with pytest.raises(ValueError, match="gamma = 1"):
        policy_evaluation(mdp, np.full(16, 3))


def test_exact_and_iterative_evaluation_agree():
    mdp = TabularMDP.from_gymnasium(GridWorldEnv(slip=0.2), 0.9)
    pi = uniform_policy(mdp)
    V_exact = policy_evaluation(mdp, pi)
    V_iter, sweeps = iterative_policy_evaluation(mdp, pi, tol=1e-10)
    assert np.abs(V_exact - V_iter).max() < 1e-10
    residual = bellman_expectation_backup(mdp, V_exact, pi) - V_exact
    assert np.abs(residual).max() < 1e-12


def test_policy_as_actions_or_matrix():
    mdp = random_mdp(5, 3, 0.8, seed=1)
    actions = np.array([0, 2, 1, 1, 0])
    V1 = policy_evaluation(mdp, actions)
    V2 = policy_evaluation(mdp, policy_matrix(mdp, actions))
    assert np.allclose(V1, V2)
    assert np.allclose(V1, policy_evaluation(mdp, torch.tensor(actions)))


def test_v_is_the_policy_average_of_q_and_advantages_average_to_zero():
    mdp = TabularMDP.from_gymnasium(GridWorldEnv(slip=0.2), 0.9)
    pi = np.random.default_rng(0).dirichlet(np.ones(4), size=64)
    V = policy_evaluation(mdp, pi)
    Q = q_values(mdp, V)
    assert np.allclose((pi * Q).sum(axis=1), V, atol=1e-12)
    adv = Q - V[:, None]
    assert np.abs((pi * adv).sum(axis=1)).max() < 1e-12


@pytest.mark.parametrize("bad, match", [
    (np.zeros((3, 2)), "policy must have shape"),
    (np.array([0, 1, 2, 3]), r"actions in \[0, 3\)"),
    (np.array([0.5, 1, 2, 0]), "integer actions"),
    (np.full((4, 3), 0.5), "must sum to 1"),
    (np.array([[1.5, -0.5, 0]] * 4), ">= 0"),
])
def test_policy_evaluation_rejects_bad_policies(bad, match):
    mdp = random_mdp(4, 3, 0.9, seed=2)
    with pytest.raises(ValueError, match=match):
        policy_evaluation(mdp, bad)


def test_policy_evaluation_rejects_bad_tol_and_mdp():
    mdp = random_mdp(4, 3, 0.9, seed=2)
    with pytest.raises(ValueError, match="tol"):
        policy_evaluation(mdp, [0, 0, 0, 0], tol=0)
    with pytest.raises(ValueError, match="mdp must be"):
        policy_evaluation((mdp.P, mdp.R), [0, 0, 0, 0])
    with pytest.raises(ValueError, match="max_sweeps"):
        iterative_policy_evaluation(mdp, [0, 0, 0, 0], max_sweeps=0)
    with pytest.raises(ValueError, match="max_sweeps=3"):
        iterative_policy_evaluation(mdp, [0, 0, 0, 0], max_sweeps=3)


def test_gamma_one_evaluation_of_a_policy_that_never_ends():
    P, R = positive_loop_mdp()
    mdp = TabularMDP(P, R, 1.0)
    with pytest.raises(ValueError, match="gamma = 1 and the policy does not reach"):
        policy_evaluation(mdp, [0, 0])
    assert np.allclose(policy_evaluation(mdp, [1, 0]), 0.0)
    # A loop that earns nothing is fine: its value is 0.
    R0 = np.zeros((2, 2))
    R0[0, 1] = -1.0
    assert np.allclose(policy_evaluation(TabularMDP(P, R0, 1.0), [0, 0]), 0.0)


# ------------------------------------------------------------------------------- kinds

def test_numpy_in_numpy_out_torch_in_torch_out():
    mdp_np = random_mdp(6, 3, 0.9, seed=3)
    mdp_t = random_mdp(6, 3, 0.9, seed=3, torch_tensors=True)
    V_np, pi_np = value_iteration(mdp_np)
    V_t, pi_t = value_iteration(mdp_t)
    assert isinstance(V_np, np.ndarray) and V_np.dtype == np.float64 and pi_np.dtype == np.int64
    assert isinstance(V_t, torch.Tensor) and V_t.dtype == torch.float64 and pi_t.dtype == torch.int64
    assert np.allclose(V_np, V_t.numpy()) and (pi_np == pi_t.numpy()).all()
    V2, pi2 = policy_iteration(mdp_t)
    assert isinstance(V2, torch.Tensor) and isinstance(pi2, torch.Tensor)
    assert isinstance(policy_evaluation(mdp_t, pi_t), torch.Tensor)
    Q = q_values(mdp_np, torch.tensor(V_np, dtype=torch.float32))
    assert isinstance(Q, torch.Tensor) and Q.dtype == torch.float32 and Q.shape == (6, 3)
    assert isinstance(bellman_optimality_backup(mdp_np, V_np), np.ndarray)
    assert isinstance(greedy_policy(mdp_np, torch.tensor(V_np)), torch.Tensor)


def test_float32_in_float32_out():
    mdp = random_mdp(4, 2, 0.9, seed=4)
    mdp32 = TabularMDP(torch.tensor(mdp.P, dtype=torch.float32),
                       torch.tensor(mdp.R, dtype=torch.float32), 0.9)
    V, _ = value_iteration(mdp32, tol=1e-5)
    assert V.dtype == torch.float32
    mdp32np = TabularMDP(mdp.P.astype(np.float32), mdp.R.astype(np.float32), 0.9)
    assert policy_evaluation(mdp32np, [0, 1, 0, 1]).dtype == np.float32


# ------------------------------------------------------------------------------- Q and greedy

def test_q_values_formula():
    mdp = random_mdp(5, 3, 0.7, seed=5)
    V = np.random.default_rng(1).standard_normal(5)
    Q = q_values(mdp, V)
    for s in range(5):
        for a in range(3):
            assert np.isclose(Q[s, a], mdp.R[s, a] + 0.7 * sum(mdp.P[s, a, t] * V[t] for t in range(5)))
    assert np.allclose(bellman_optimality_backup(mdp, V), Q.max(axis=1))


@pytest.mark.parametrize("bad, match", [
    (np.zeros(4), r"V must have shape \(S,\)"),
    (np.zeros((5, 1)), "V must have shape"),
    (np.array([0, np.inf, 0, 0, 0]), "finite"),
    ("V", "numpy array or torch tensor"),
])
def test_q_values_and_greedy_reject_bad_values(bad, match):
    mdp = random_mdp(5, 3, 0.7, seed=5)
    with pytest.raises(ValueError, match=match):
        q_values(mdp, bad)
    with pytest.raises(ValueError, match=match):
        greedy_policy(mdp, bad)
    with pytest.raises(ValueError, match=match):
        bellman_optimality_backup(mdp, bad)


def test_greedy_ties_go_to_the_lowest_index():
    P = np.zeros((1, 3, 1))
    P[0, :, 0] = 1.0
    mdp = TabularMDP(P, np.array([[0.0, 1.0, 1.0]]), 0.5)
    assert greedy_policy(mdp, np.zeros(1)).tolist() == [1]
    mdp = TabularMDP(P, np.array([[1.0, 1.0 - 1e-12, 0.0]]), 0.5)
    assert greedy_policy(mdp, np.zeros(1)).tolist() == [0]


def test_gamma_one_greedy_ties_prefer_terminating():
    """Non-slippery FrozenLake with gamma = 1: V* = 1 on every safe cell, so "left" into the wall
    ties with the way to the goal; the greedy policy must still reach the goal."""
    env = gym.make("FrozenLake-v1", is_slippery=False)
    mdp = TabularMDP.from_gymnasium(env, 1.0)
    V, pi = value_iteration(mdp)
    assert V[0] == pytest.approx(1.0)
    assert np.allclose(policy_evaluation(mdp, pi), V)
    assert np.allclose(greedy_policy(mdp, V), pi)


# ------------------------------------------------------------------------------- control

@pytest.mark.parametrize("seed, gamma", [(0, 0.0), (1, 0.5), (2, 0.9), (3, 0.99), (4, 0.999)])
def test_value_iteration_is_within_tol_of_policy_iteration(seed, gamma):
    mdp = random_mdp(12, 4, gamma, seed=seed)
    V_pi, pi_pi = policy_iteration(mdp)
    for tol in (1e-3, 1e-10):
        V, pi = value_iteration(mdp, tol=tol)
        assert np.abs(V - V_pi).max() < tol
    assert (pi == pi_pi).all()
    assert np.abs(bellman_optimality_backup(mdp, V_pi) - V_pi).max() < 1e-10
    if gamma == 0.0:
        assert np.allclose(V, mdp.R.max(axis=1))


def test_value_iteration_stopping_rule_is_not_too_loose():
    """A stopping rule max|V_{k+1} - V_k| < tol would stop with an error of about
    tol * gamma / (1 - gamma) = 99 tol here; the contraction-based rule does not."""
    mdp = random_mdp(10, 3, 0.99, seed=7)
    V_star, _ = policy_iteration(mdp)
    V, _ = value_iteration(mdp, tol=1e-4)
    assert np.abs(V - V_star).max() < 1e-4


def test_episodic_control_with_gamma_one():
    mdp = random_mdp(8, 3, 1.0, seed=8, terminal_prob=0.2)
    V, pi = value_iteration(mdp)
    V2, pi2 = policy_iteration(mdp)
    assert np.abs(V - V2).max() < 1e-10 and (pi == pi2).all()
    assert np.allclose(policy_evaluation(mdp, pi), V2)


def test_gamma_one_divergence_raises():
    P, R = positive_loop_mdp()
    mdp = TabularMDP(P, R, 1.0)
    with pytest.raises(ValueError, match="gamma = 1: value iteration does not converge"):
        value_iteration(mdp)
    with pytest.raises(ValueError, match="gamma = 1"):
        policy_iteration(mdp)


@pytest.mark.parametrize("func", [value_iteration, policy_iteration, policy_iteration_trace])
def test_control_rejects_bad_input(func):
    with pytest.raises(ValueError, match="mdp must be"):
        func("mdp")
    with pytest.raises(ValueError, match="mdp must be"):
        func(None)
    with pytest.raises(ValueError, match="mdp must be"):
        func(small_mdp())


@pytest.mark.parametrize("tol", [0.0, -1e-3, float("nan"), "small"])
def test_value_iteration_rejects_bad_tol(tol):
    with pytest.raises(ValueError, match="tol"):
        value_iteration(random_mdp(3, 2, 0.9), tol=tol)


def test_policy_iteration_improves_monotonically():
    """The policy improvement theorem: each policy is at least as good as the one before."""
    mdp = TabularMDP.from_gymnasium(GridWorldEnv(slip=0.2), 0.9)
    trace = policy_iteration_trace(mdp)
    for (V_old, _), (V_new, _) in zip(trace, trace[1:]):
        assert (V_new >= V_old - 1e-12).all()


# ------------------------------------------------------------------------------- chapter claims

def test_claim_maze_values():
    mdp = TabularMDP.from_gymnasium(Maze2x3Env(), 0.9)
    V, pi = value_iteration(mdp)
    assert np.allclose(V, [8.1, 9.0, 10.0, 7.29, 0.0, 0.0])
    assert pi[:4].tolist() == [2, 2, 1, 3]  # right, right, down around the trap; up below the start


def test_claim_returns_are_bounded():
    mdp = TabularMDP.from_gymnasium(GridWorldEnv(slip=0.2), 0.9)
    V = policy_evaluation(mdp, uniform_policy(mdp))
    assert np.isclose(np.abs(mdp.R).max(), 0.8)  # a step into the goal succeeds with prob. 0.8
    assert np.abs(V).max() <= np.abs(mdp.R).max() / (1 - 0.9)


def test_claim_policy_iteration_on_the_grid_world():
    mdp = TabularMDP.from_gymnasium(GridWorldEnv(), 0.9)
    assert len(policy_iteration_trace(mdp)) == 15  # 15 evaluations, 14 improvements
    V, pi = policy_iteration(mdp)
    V2, pi2 = value_iteration(mdp)
    assert (pi == pi2).all() and np.abs(V - V2).max() < 1e-10


def test_claim_value_iteration_error_below_the_contraction_bound():
    for gamma in (0.5, 0.9, 0.99):
        mdp = TabularMDP.from_gymnasium(GridWorldEnv(slip=0.2), gamma)
        V_star, _ = policy_iteration(mdp)
        V = np.zeros(64)
        for k in range(1, 301):
            V = bellman_optimality_backup(mdp, V)
            error, bound = np.abs(V - V_star).max(), gamma ** k * np.abs(V_star).max()
            assert error <= bound + 1e-12
            if gamma == 0.99 and k == 100:  # the bound is a worst case, far from the real error
                assert error < 1e-12 and bound > 0.3


def test_claim_deterministic_grid_values_are_powers_of_gamma():
    """Without slip, V*(s) = gamma^(d(s) - 1) with d(s) the Manhattan distance to the goal."""
    rows, cols = np.divmod(np.arange(64), 8)
    d = rows + (7 - cols)
    for gamma in (0.5, 0.9, 0.99):
        mdp = TabularMDP.from_gymnasium(GridWorldEnv(), gamma)
        V, _ = value_iteration(mdp)
        free = (d > 0) & (np.arange(64) != 27)
        assert np.allclose(V[free], gamma ** (d[free] - 1.0))
    V0, pi0 = value_iteration(TabularMDP.from_gymnasium(GridWorldEnv(), 0.0))
    assert np.flatnonzero(V0).tolist() == [6, 15]  # only the goal's two neighbours
    # Elsewhere all actions tie and "left" (0) wins, except right of the trap (28): moves down.
    assert np.flatnonzero(pi0).tolist() == [6, 15, 28]


def test_claim_frozenlake():
    plain = TabularMDP.from_gymnasium(gym.make("FrozenLake-v1", is_slippery=False), 0.99)
    V, _ = value_iteration(plain)
    assert V[0] == pytest.approx(0.99 ** 5)  # six moves to the goal
    slippery = TabularMDP.from_gymnasium(gym.make("FrozenLake-v1", is_slippery=True), 1.0)
    V, pi = value_iteration(slippery)
    assert V[0] == pytest.approx(14 / 17, abs=1e-10)
    env = gym.make("FrozenLake-v1", is_slippery=True, max_episode_steps=100_000)
    G = rollout_returns(env, pi, 500, gamma=1.0, seed=0)
    se = np.sqrt(V[0] * (1 - V[0]) / len(G))
    assert abs(G.mean() - V[0]) < 3 * se


def test_rollout_returns_rejects_bad_input():
    env = gym.make("FrozenLake-v1")
    with pytest.raises(ValueError, match="num_episodes"):
        rollout_returns(env, np.zeros(16, dtype=int), 0)
    with pytest.raises(ValueError, match="gamma"):
        rollout_returns(env, np.zeros(16, dtype=int), 2, gamma=2.0)
    with pytest.raises(ValueError, match="policy"):
        rollout_returns(env, np.zeros((16, 4)), 2)


def test_random_mdp_rejects_bad_input():
    with pytest.raises(ValueError, match="num_states"):
        random_mdp(0, 2)
    with pytest.raises(ValueError, match="terminal_prob"):
        random_mdp(3, 2, terminal_prob=1.5)
    with pytest.raises(ValueError, match="gamma"):
        random_mdp(3, 2, gamma=1.0)  # not episodic without terminal_prob
