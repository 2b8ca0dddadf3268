"""rlnotes.tabular: the pieces, prediction, control, the batched runs, and the chapter's claims
(every numerical claim of the chapter "Learning without a model" is tested here with the
notebook's own settings and seeds)."""

import math
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

import rlnotes.envs  # noqa: F401
from rlnotes import tabular as tb
from rlnotes.envs.random_walk import RandomWalkEnv, true_values, uniform_policy
from rlnotes.mdp import TabularMDP, value_iteration

V0_WALK = np.array([0, 0.5, 0.5, 0.5, 0.5, 0.5, 0])
ABCDE = np.arange(1, 6)


def walk():
    return gym.make("rlnotes/RandomWalk-v0")


def cliff():
    return gym.make("CliffWalking-v1")


class BoxEnv(gym.Env):
    """A continuous-observation environment the tabular methods must refuse."""
    observation_space = spaces.Box(-1.0, 1.0, shape=(2,))
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 0.0, True, False, {}


# ---------------------------------------------------------------------------------------------
# The small pieces
# ---------------------------------------------------------------------------------------------

def test_epsilon_greedy_frequencies_and_random_ties():
    rng = np.random.default_rng(0)
    q = np.array([1.0, 3.0, 3.0, 0.0])
    n = 40_000
    counts = np.bincount([tb.epsilon_greedy(q, 0.2, rng) for _ in range(n)], minlength=4) / n
    expected = tb.epsilon_greedy_probs(q, 0.2)
    np.testing.assert_allclose(expected, [0.05, 0.45, 0.45, 0.05])
    np.testing.assert_allclose(counts, expected, atol=0.01)


def test_epsilon_greedy_extremes():
    rng = np.random.default_rng(1)
    q = np.array([0.0, 2.0, 1.0])
    assert {tb.epsilon_greedy(q, 0.0, rng) for _ in range(200)} == {1}
    assert {tb.epsilon_greedy(q, 1.0, rng) for _ in range(200)} == {0, 1, 2}
    np.testing.assert_allclose(tb.epsilon_greedy_probs(np.zeros((2, 4)), 0.3), 0.25)


@pytest.mark.parametrize("kwargs,name", [
    (dict(q=np.zeros(3), epsilon=-0.1), "epsilon"), (dict(q=np.zeros(3), epsilon=1.1), "epsilon"),
    (dict(q=np.zeros(3), epsilon=float("nan")), "epsilon"), (dict(q=np.zeros((2, 2)), epsilon=0.1), "q"),
    (dict(q=np.zeros(0), epsilon=0.1), "q")])
def test_epsilon_greedy_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tb.epsilon_greedy(rng=np.random.default_rng(0), **kwargs)


@pytest.mark.parametrize("epsilon", [-0.1, 1.1, "0.1"])
def test_epsilon_greedy_probs_bad_input(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        tb.epsilon_greedy_probs(np.zeros(3), epsilon)
    with pytest.raises(ValueError, match="q"):
        tb.epsilon_greedy_probs(np.zeros((3, 0)), 0.1)


def test_td_target_masks_terminal_states_only():
    assert tb.td_target(1.0, 5.0, False, 0.9) == pytest.approx(5.5)
    assert tb.td_target(1.0, 5.0, True, 0.9) == pytest.approx(1.0)
    np.testing.assert_allclose(tb.td_target(np.ones(3), np.array([1.0, 2, 3]),
                                            np.array([0, 1, 0]), 0.5), [1.5, 1.0, 2.5])


def test_td_update_is_a_step_of_size_alpha():
    assert tb.td_update(1.0, 3.0, 0.25) == pytest.approx(1.5)
    assert tb.td_update(1.0, 3.0, 1.0) == pytest.approx(3.0)


@pytest.mark.parametrize("alpha", [0, 1.5, float("nan"), -0.2])
def test_td_update_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        tb.td_update(0.0, 1.0, alpha)


@pytest.mark.parametrize("gamma", [-0.1, 1.5, float("inf")])
def test_targets_bad_gamma(gamma):
    q = np.array([1.0, 2.0])
    for call in (lambda: tb.td_target(0.0, 1.0, False, gamma),
                 lambda: tb.sarsa_target(0.0, q, 0, False, gamma),
                 lambda: tb.q_learning_target(0.0, q, False, gamma),
                 lambda: tb.expected_sarsa_target(0.0, q, False, gamma, 0.1)):
        with pytest.raises(ValueError, match="gamma"):
            call()


def test_control_targets():
    q = np.array([1.0, 4.0, 2.0])
    assert tb.sarsa_target(1.0, q, 2, False, 0.5) == pytest.approx(2.0)
    assert tb.q_learning_target(1.0, q, False, 0.5) == pytest.approx(3.0)
    # expected SARSA, epsilon = 0.3: probs 0.1, 0.8, 0.1 -> 0.1 + 3.2 + 0.2 = 3.5
    assert tb.expected_sarsa_target(1.0, q, False, 0.5, 0.3) == pytest.approx(1.0 + 0.5 * 3.5)
    # greedy target policy: expected SARSA is Q-learning
    assert tb.expected_sarsa_target(1.0, q, False, 0.5, 0.0) == tb.q_learning_target(1.0, q, False, 0.5)
    for f in (lambda t: tb.sarsa_target(1.0, q, 1, t, 0.5), lambda t: tb.q_learning_target(1.0, q, t, 0.5),
              lambda t: tb.expected_sarsa_target(1.0, q, t, 0.5, 0.3)):
        assert f(True) == pytest.approx(1.0)
    # batched rows
    Q = np.array([[1.0, 4.0], [3.0, 0.0]])
    np.testing.assert_allclose(tb.sarsa_target(np.zeros(2), Q, np.array([0, 1]), np.zeros(2), 1.0), [1, 0])
    np.testing.assert_allclose(tb.q_learning_target(np.zeros(2), Q, np.array([0, 1]), 1.0), [4, 0])


def test_expected_sarsa_target_bad_epsilon():
    for eps in (-0.5, 2.0, None):
        with pytest.raises(ValueError, match="epsilon"):
            tb.expected_sarsa_target(0.0, np.zeros(2), False, 1.0, eps)


def test_greedy_policy_and_rms_error():
    np.testing.assert_array_equal(tb.greedy_policy([[0, 1], [2, 2], [5, -1]]), [1, 0, 0])
    with pytest.raises(ValueError, match="Q"):
        tb.greedy_policy(np.zeros(3))
    assert tb.rms_error(V0_WALK, true_values(), ABCDE) == pytest.approx(math.sqrt(1 / 18))
    with pytest.raises(ValueError, match="V"):
        tb.rms_error(np.zeros(4), true_values())


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------

def test_td0_first_episode_changes_only_the_last_state():
    """Only V(A) or V(E) moves in the first episode (from 0.5, by alpha / 2)."""
    for seed in range(10):
        h = tb.td0_prediction(walk(), uniform_policy(), 1, 0.1, V0=V0_WALK, seed=seed)
        changed = np.flatnonzero(h[1] != h[0])
        assert changed.tolist() in ([1], [5])
        assert abs(h[1, changed[0]] - 0.5) == pytest.approx(0.05)


def test_td0_chapter_run_values_after_100_episodes_near_true():
    """The chapter's Example 6.2 (left) run: alpha 0.1, seed 0."""
    h = tb.td0_prediction(walk(), uniform_policy(), 100, 0.1, V0=V0_WALK, seed=0)
    np.testing.assert_array_equal(h[0], V0_WALK)
    assert h[1, 1] == pytest.approx(0.45)  # the first episode ended on the left, as in the book
    assert np.abs(h[100] - true_values())[ABCDE].max() < 0.1
    assert tb.rms_error(h[100], true_values(), ABCDE) < tb.rms_error(h[10], true_values(), ABCDE)


def test_prediction_is_reproducible():
    for f in (tb.td0_prediction, tb.mc_prediction):
        a = f(walk(), uniform_policy(), 20, 0.1, V0=V0_WALK, seed=5)
        b = f(walk(), uniform_policy(), 20, 0.1, V0=V0_WALK, seed=5)
        np.testing.assert_array_equal(a, b)


def test_mc_first_episode_moves_every_visited_state_to_the_outcome():
    h = tb.mc_prediction(walk(), uniform_policy(), 1, 0.5, V0=V0_WALK, seed=0)
    G = 1.0 if h[1, 5] > 0.5 else 0.0
    moved = h[1] != h[0]
    assert moved[3]  # C is always visited
    np.testing.assert_allclose(h[1, moved], 0.5 + 0.5 * (G - 0.5))


class Loop(gym.Env):
    """Two states; action 0 stays in 0 with reward 1, action 1 goes to terminal 1 with reward 10."""
    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)
    P = {0: {0: [(1.0, 0, 1.0, False)], 1: [(1.0, 1, 10.0, True)]},
         1: {0: [(1.0, 1, 0.0, True)], 1: [(1.0, 1, 0.0, True)]}}
    initial_state_distrib = np.array([1.0, 0.0])   # reset starts in state 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return 0, {}

    def step(self, action):
        if action == 1:
            return 1, 10.0, True, False, {}
        return 0, 1.0, False, False, {}


def test_mc_first_and_every_visit_differ_as_derived():
    # policy: stay, stay, leave -> rewards 1, 1, 10; returns from t=0,1,2: 12, 11, 10
    class Scripted(Loop):
        pass
    env = Scripted()
    policy = np.array([[1.0, 0.0], [1.0, 0.0]])
    env_limit = TimeLimit(env, max_episode_steps=3)
    # truncated after 3 stays: G_T = V(S_T) completes the return (V0 = 2 everywhere)
    h = tb.mc_prediction(env_limit, policy, 1, 1.0, first_visit=True, V0=[2.0, 0.0], seed=0)
    assert h[1, 0] == pytest.approx(1 + 1 + 1 + 2)
    # every visit with alpha 1/2: updates backward from G_2 = 3, G_1 = 4, G_0 = 5 (V(S_3) = 2)
    h = tb.mc_prediction(env_limit, policy, 1, 0.5, first_visit=False, V0=[2.0, 0.0], seed=0)
    v = 2.0
    for G in (3.0, 4.0, 5.0):
        v = v + 0.5 * (G - v)
    assert h[1, 0] == pytest.approx(v)


def test_td0_bootstraps_on_truncation_not_on_termination():
    policy = np.array([[1.0, 0.0], [1.0, 0.0]])
    env = TimeLimit(Loop(), max_episode_steps=1)
    h = tb.td0_prediction(env, policy, 1, 1.0, V0=[5.0, 0.0], seed=0)
    assert h[1, 0] == pytest.approx(1.0 + 5.0)  # truncated: r + V(s')
    leave = np.array([[0.0, 1.0], [0.0, 1.0]])
    h = tb.td0_prediction(Loop(), leave, 1, 1.0, V0=[5.0, 7.0], seed=0)
    assert h[1, 0] == pytest.approx(10.0)  # terminated: no bootstrap from V(1) = 7


def test_batch_prediction_matches_single_runs_statistically():
    n, k = 200, 15
    for single, batch, alpha in ((tb.td0_prediction, tb.td0_prediction_batch, 0.1),
                                 (tb.mc_prediction, tb.mc_prediction_batch, 0.05)):
        s = np.stack([single(walk(), uniform_policy(), k, alpha, V0=V0_WALK, seed=i)[k]
                      for i in range(n)])
        b = batch(walk(), uniform_policy(), n, k, alpha, V0=V0_WALK, seed=123)[k]
        se = np.sqrt(s.var(0) / n + b.var(0) / n)[ABCDE]
        assert np.all(np.abs(s.mean(0) - b.mean(0))[ABCDE] < 4 * se + 1e-12)


def test_batch_first_episode_like_single():
    h = tb.td0_prediction_batch(walk(), uniform_policy(), 50, 1, 0.1, V0=V0_WALK, seed=0)
    diff = h[1] - h[0]
    assert np.all((diff != 0).sum(1) == 1)
    assert np.allclose(np.abs(diff).sum(1), 0.05)
    assert set(np.flatnonzero(diff.any(0))) <= {1, 5}


def test_mc_batch_every_visit_and_truncation():
    env = TimeLimit(Loop(), max_episode_steps=3)
    policy = np.array([[1.0, 0.0], [1.0, 0.0]])
    hb = tb.mc_prediction_batch(env, policy, 4, 1, 0.5, first_visit=False, V0=[2.0, 0.0], seed=0)
    hs = tb.mc_prediction(env, policy, 1, 0.5, first_visit=False, V0=[2.0, 0.0], seed=0)
    np.testing.assert_allclose(hb[1], np.tile(hs[1], (4, 1)))


# ---------------------------------------------------------------------------------------------
# Example 6.2: the chapter's RMS experiment (100 runs, seed 1, same episodes for every alpha;
# every-visit MC, equation (6.1) applied at every time step)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rms_curves():
    curves = {}
    for alpha in (0.05, 0.1, 0.15):
        h = tb.td0_prediction_batch(walk(), uniform_policy(), 100, 100, alpha, V0=V0_WALK, seed=1)
        curves["TD", alpha] = tb.rms_error(h, true_values(), ABCDE).mean(1)
    for alpha in (0.01, 0.02, 0.03, 0.04):
        h = tb.mc_prediction_batch(walk(), uniform_policy(), 100, 100, alpha, first_visit=False,
                                   V0=V0_WALK, seed=1)
        curves["MC", alpha] = tb.rms_error(h, true_values(), ABCDE).mean(1)
    return curves


def test_example_6_2_initial_error(rms_curves):
    for c in rms_curves.values():
        assert c[0] == pytest.approx(math.sqrt(1 / 18)) and c[0] == pytest.approx(0.2357, abs=1e-4)


def test_example_6_2_td_beats_mc(rms_curves):
    mc_final = [c[100] for (m, _), c in rms_curves.items() if m == "MC"]
    assert rms_curves["TD", 0.05][100] < min(mc_final)
    # from episode 25 on, every TD curve lies below every MC curve
    td = np.stack([c for (m, _), c in rms_curves.items() if m == "TD"])
    mc = np.stack([c for (m, _), c in rms_curves.items() if m == "MC"])
    assert np.all(td[:, 25:].max(axis=0) < mc[:, 25:].min(axis=0))
    # every TD curve is below every MC curve over the last 50 episodes on average
    td_late = [c[50:].mean() for (m, _), c in rms_curves.items() if m == "TD"]
    mc_late = [c[50:].mean() for (m, _), c in rms_curves.items() if m == "MC"]
    assert max(td_late) < min(mc_late)
    # the largest TD step size learns fastest at first, then levels off above alpha = 0.05
    assert rms_curves["TD", 0.15][10] < rms_curves["TD", 0.05][10]
    assert rms_curves["TD", 0.15][100] > rms_curves["TD", 0.05][100]
    # the chapter's ordering: after 10 episodes larger TD steps have lower errors, after 100 higher
    assert np.all(np.diff(td[:, 10]) < 0) and np.all(np.diff(td[:, 100]) > 0)
    # among the MC curves, alpha = 0.04 is lowest after 10 episodes and highest after 100
    assert mc[3, 10] == mc[:, 10].min() and mc[3, 100] == mc[:, 100].max()


def test_td_and_mc_batches_see_the_same_episodes(monkeypatch):
    """The chapter's common random numbers: with one seed, TD(0) and MC (any alpha) draw the same
    actions, hence play the same episodes, because the random walk's policy ignores V."""
    drawn = []
    original = tb._sample_actions

    def recording(probs, rng):
        a = original(probs, rng)
        drawn[-1].append(a.copy())
        return a

    monkeypatch.setattr(tb, "_sample_actions", recording)
    for f, alpha in ((tb.td0_prediction_batch, 0.05), (tb.mc_prediction_batch, 0.01),
                     (tb.mc_prediction_batch, 0.04)):
        drawn.append([])
        kwargs = dict(first_visit=False) if f is tb.mc_prediction_batch else {}
        f(walk(), uniform_policy(), 20, 10, alpha, V0=V0_WALK, seed=1, **kwargs)
    assert len(drawn[0]) == len(drawn[1]) == len(drawn[2]) > 10
    for other in drawn[1:]:
        assert all(np.array_equal(x, y) for x, y in zip(drawn[0], other))


def test_first_visit_mc_against_every_visit(rms_curves):
    """Exercise ex-td-first-visit: every-visit MC acts like a larger step size: first-visit MC is
    slower with alpha = 0.01 and ends lower with alpha = 0.04; TD(0.05) still ends lowest."""
    first = {a: tb.rms_error(tb.mc_prediction_batch(walk(), uniform_policy(), 100, 100, a,
                                                    first_visit=True, V0=V0_WALK, seed=1),
                             true_values(), ABCDE).mean(1) for a in (0.01, 0.04)}
    assert first[0.01][100] > rms_curves["MC", 0.01][100]
    assert first[0.04][100] < rms_curves["MC", 0.04][100]
    assert first[0.01][10] > rms_curves["MC", 0.01][10]
    assert rms_curves["TD", 0.05][100] < min(c[100] for c in first.values())


# ---------------------------------------------------------------------------------------------
# Bias and variance of the two targets (the chapter's table: V after 10 TD episodes, seed 0)
# ---------------------------------------------------------------------------------------------

def test_bias_and_variance_of_the_targets():
    V = tb.td0_prediction(walk(), uniform_policy(), 10, 0.1, V0=V0_WALK, seed=0)[10]
    v = true_values()
    for s in ABCDE:
        mc, td = tb.sample_targets(walk(), uniform_policy(), V, s, 20_000, seed=int(s))
        se_mc = mc.std() / math.sqrt(mc.size)
        se_td = td.std() / math.sqrt(td.size)
        assert abs(mc.mean() - v[s]) < 4 * se_mc            # MC target: unbiased
        assert abs(td.mean() - v[s]) > 4 * se_td + 0.02     # TD target: biased (V is wrong)
        assert mc.var() > 2 * td.var()                      # ... but with far less variance
        # exact mean of the TD target: 1/2 (r_left + V(s-1)) + 1/2 (r_right + V(s+1))
        exact = 0.5 * V[s - 1] + 0.5 * (V[s + 1] + (s == 5))
        assert abs(td.mean() - exact) < 4 * se_td + 1e-12


def test_sample_targets_bad_input():
    V = np.zeros(7)
    with pytest.raises(ValueError, match="state"):
        tb.sample_targets(walk(), uniform_policy(), V, 7, 10)
    with pytest.raises(ValueError, match="V"):
        tb.sample_targets(walk(), uniform_policy(), np.zeros(3), 3, 10)
    with pytest.raises(ValueError, match="num_samples"):
        tb.sample_targets(walk(), uniform_policy(), V, 3, 0)
    with pytest.raises(ValueError, match="env"):
        tb.sample_targets(BoxEnv(), uniform_policy(), V, 3, 10)


# ---------------------------------------------------------------------------------------------
# Control
# ---------------------------------------------------------------------------------------------

CONTROL = [tb.sarsa, tb.q_learning, tb.expected_sarsa]


@pytest.mark.parametrize("method", CONTROL, ids=lambda f: f.__name__)
def test_control_shapes_and_reproducibility(method):
    Q1, R1 = method(cliff(), 30, 0.5, 0.1, seed=3)
    Q2, R2 = method(cliff(), 30, 0.5, 0.1, seed=3)
    assert Q1.shape == (48, 4) and R1.shape == (30,)
    np.testing.assert_array_equal(Q1, Q2)
    np.testing.assert_array_equal(R1, R2)
    assert np.all(R1 <= -13)  # no episode beats the shortest path


def test_cliff_single_runs_learn_the_expected_paths():
    Q, _ = tb.q_learning(cliff(), 500, 0.5, 0.1, seed=0)
    path, ret = tb.greedy_path(cliff(), Q)
    assert len(path) - 1 == 13 and ret == -13
    Q, _ = tb.sarsa(cliff(), 500, 0.5, 0.1, seed=0)
    path, ret = tb.greedy_path(cliff(), Q)
    assert path[-1] == 47 and len(path) - 1 > 13


def test_q_learning_on_frozen_lake_matches_the_optimum():
    """The chapter's FrozenLake section: gamma 0.99, epsilon 0.1, seed 0."""
    env = gym.make("FrozenLake-v1", is_slippery=False)
    Q, _ = tb.q_learning(env, 2000, 0.5, 0.1, gamma=0.99, seed=0)
    assert tb.expected_return(env, tb.greedy_policy(Q)) == pytest.approx(1.0)
    assert tb.evaluate_policy(env, tb.greedy_policy(Q), 200, seed=0).mean() == 1.0
    env = gym.make("FrozenLake-v1", is_slippery=True)
    mdp = TabularMDP.from_gymnasium(env, 1.0)
    V_star, pi_star = value_iteration(mdp)
    assert V_star[0] == pytest.approx(14 / 17, abs=1e-6)  # 0.8235: reaching the goal at all
    optimum = tb.expected_return(env, pi_star)            # ... within the 100-step limit
    assert optimum == pytest.approx(0.7402, abs=1e-4)
    Q, _ = tb.q_learning(env, 5000, 0.1, 0.1, gamma=0.99, seed=0)
    learned = tb.expected_return(env, tb.greedy_policy(Q))
    assert learned >= 0.9 * optimum
    assert abs(learned - optimum) < 1e-4  # with this seed it matches to four decimals
    # the best success probability for an agent that knows the number of steps left
    m = tb.toy_text_model(env)
    u = np.zeros(16)
    for _ in range(100):
        u = (m.prob * (m.reward + ~m.terminated * u[m.next_state])).sum(-1).max(1)
    assert u[0] == pytest.approx(0.7442, abs=1e-4) and u[0] > optimum


def test_value_iteration_gamma_one_and_first_action_ties_trap():
    """With gamma = 1 every safe action of the deterministic lake is worth 1: the greedy policy
    with ties to the first action (left) never reaches the goal; gamma < 1 breaks the ties."""
    env = gym.make("FrozenLake-v1", is_slippery=False)
    m = tb.toy_text_model(env)
    V = np.zeros(16)
    for _ in range(50):
        Qm = (m.prob * (m.reward + (~m.terminated) * V[m.next_state])).sum(-1)
        V = Qm.max(1)
    assert tb.expected_return(env, Qm.argmax(1)) == 0.0
    mdp = TabularMDP.from_gymnasium(env, 0.99)
    _, pi = value_iteration(mdp)
    assert tb.expected_return(env, pi) == 1.0


def test_expected_return_and_evaluate_policy_agree():
    env = gym.make("FrozenLake-v1", is_slippery=True)
    pi = np.zeros(16, dtype=int) + 1
    exact = tb.expected_return(env, pi)
    sample = tb.evaluate_policy(env, pi, 3000, seed=0)
    assert abs(sample.mean() - exact) < 4 * math.sqrt(exact * (1 - exact) / 3000) + 1e-9
    with pytest.raises(ValueError, match="horizon"):
        tb.expected_return(cliff(), np.zeros(48, dtype=int))


# ---------------------------------------------------------------------------------------------
# Example 6.6: the chapter's cliff-walking experiment (100 runs, 500 episodes, seed 0)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cliff_runs():
    return {m: tb.td_control_batch(cliff(), m, 100, 500, 0.5, 0.1, seed=0)
            for m in ("sarsa", "q_learning", "expected_sarsa")}


def _paths(Q):
    return [tuple(tb.greedy_path(cliff(), q)[0]) for q in Q]


def test_example_6_6_online_returns(cliff_runs):
    late = {m: R[:, -100:].mean() for m, (_, R) in cliff_runs.items()}
    assert late["sarsa"] > late["q_learning"] + 10
    assert -35 < late["sarsa"] < -20       # the book's figure: about -25
    assert -60 < late["q_learning"] < -40  # the book's figure: about -50
    assert late["expected_sarsa"] > late["sarsa"]


def test_example_6_6_greedy_paths(cliff_runs):
    q_paths = _paths(cliff_runs["q_learning"][0])
    optimal = tuple([36, 24] + list(range(25, 36)) + [47])
    assert all(p == optimal for p in q_paths)  # every run: the 13-step path along the cliff
    sarsa_paths = _paths(cliff_runs["sarsa"][0])
    safe = [p for p in sarsa_paths if p[-1] == 47 and len(p) - 1 > 13]
    assert len(safe) >= 75
    mode, count = Counter(sarsa_paths).most_common(1)[0]
    assert len(mode) - 1 == 17 and min(mode) == 0  # along the top row, as far from the cliff as can be
    e_mode = Counter(_paths(cliff_runs["expected_sarsa"][0])).most_common(1)[0][0]
    assert len(e_mode) - 1 == 15 and e_mode[-1] == 47  # one row further from the edge than Q-learning
    assert len(safe) == 86  # the number the chapter prints


def test_example_6_6_epsilon_greedy_optimum_is_expected_sarsa_path(cliff_runs):
    """The fixed point of the expected SARSA backup (the values of the epsilon-greedy policy of
    Q itself, epsilon = 0.1) has the 15-step greedy path one row from the edge row, the most
    common greedy path of expected SARSA; SARSA's most common path is longer."""
    m = tb.toy_text_model(cliff())
    Q = np.zeros((48, 4))
    for _ in range(1000):
        V = (tb.epsilon_greedy_probs(Q, 0.1) * Q).sum(1)
        Q_new = (m.prob * (m.reward + ~m.terminated * V[m.next_state])).sum(-1)
        Q, change = Q_new, np.abs(Q_new - Q).max()
    assert change < 1e-9
    path = tuple(tb.greedy_path(cliff(), Q)[0])
    assert len(path) - 1 == 15 and all(12 <= s < 24 for s in path[2:-2])  # along row 1
    assert path == Counter(_paths(cliff_runs["expected_sarsa"][0])).most_common(1)[0][0]
    assert len(Counter(_paths(cliff_runs["sarsa"][0])).most_common(1)[0][0]) - 1 > 15


def _control_with_decaying_epsilon(method, num_episodes, seed):
    """SARSA or Q-learning on the cliff with epsilon_k = 0.1 / k in episode k, alpha = 0.5."""
    env = cliff()
    rng = np.random.default_rng(seed)
    Q = np.zeros((48, 4))
    returns = []
    for k in range(1, num_episodes + 1):
        eps = 0.1 / k
        s, _ = env.reset(seed=seed if k == 1 else None)
        a = tb.epsilon_greedy(Q[s], eps, rng)
        done, G = False, 0.0
        while not done:
            s2, r, terminated, truncated, _ = env.step(a)
            G += r
            a2 = tb.epsilon_greedy(Q[s2], eps, rng)
            if method == "sarsa":
                target = tb.sarsa_target(r, Q[s2], a2, terminated, 1.0)
            else:
                target = tb.q_learning_target(r, Q[s2], terminated, 1.0)
            Q[s, a] = tb.td_update(Q[s, a], target, 0.5)
            s, a, done = s2, a2, terminated or truncated
        returns.append(G)
    return Q, np.array(returns)


def test_exercise_cliff_decaying_epsilon():
    """Exercise ex-td-cliff-epsilon: with epsilon_k = 0.1 / k, Q-learning keeps the optimal
    13-step path and its online return nears -13; SARSA keeps the safe 15-step path (return
    -15) instead of moving to the edge; the gap of about 20 shrinks to about 2."""
    for seed in range(3):
        for method, steps in (("q_learning", 13), ("sarsa", 15)):
            Q, R = _control_with_decaying_epsilon(method, 500, seed)
            path, ret = tb.greedy_path(cliff(), Q)
            assert len(path) - 1 == steps and ret == -steps
            assert -steps - 1 < R[-100:].mean() <= -steps


def test_batch_control_matches_single_runs_statistically(cliff_runs):
    R = np.stack([tb.q_learning(cliff(), 60, 0.5, 0.1, seed=i)[1] for i in range(40)])
    single = R[:, 30:].mean(1)
    batch = cliff_runs["q_learning"][1][:, 30:60].mean(1)
    se = math.sqrt(single.var() / single.size + batch.var() / batch.size)
    assert abs(single.mean() - batch.mean()) < 4 * se


def test_batch_control_truncates_at_the_time_limit():
    env = gym.make("FrozenLake-v1", is_slippery=True)
    Q, R = tb.td_control_batch(env, "q_learning", 8, 50, 0.1, 1.0, gamma=0.99, seed=0)
    assert Q.shape == (8, 16, 4) and R.shape == (8, 50) and set(np.unique(R)) <= {0.0, 1.0}


# ---------------------------------------------------------------------------------------------
# Bad input: discrete spaces, alpha, epsilon, num_episodes, gamma, for every public runner
# ---------------------------------------------------------------------------------------------

GOOD = dict(num_episodes=2, alpha=0.5, epsilon=0.1, gamma=1.0)
BAD = [("alpha", 0), ("alpha", 1.5), ("alpha", float("nan")), ("epsilon", -0.1),
       ("epsilon", 1.1), ("num_episodes", 0), ("num_episodes", 2.5), ("gamma", 1.5),
       ("gamma", -0.5)]


@pytest.mark.parametrize("method", CONTROL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("arg,value", BAD)
def test_control_bad_arguments(method, arg, value):
    with pytest.raises(ValueError, match=arg):
        method(cliff(), **{**GOOD, arg: value})


@pytest.mark.parametrize("method", CONTROL, ids=lambda f: f.__name__)
def test_control_rejects_non_discrete_spaces(method):
    for env in (BoxEnv(), gym.make("CartPole-v1")):
        with pytest.raises(ValueError, match="env"):
            method(env, 2, 0.5, 0.1)


@pytest.mark.parametrize("arg,value", [b for b in BAD if b[0] != "epsilon"] + [("seed", -1)])
def test_prediction_bad_arguments(arg, value):
    good = dict(num_episodes=2, alpha=0.1, gamma=1.0)
    for f in (tb.td0_prediction, tb.mc_prediction):
        with pytest.raises(ValueError, match=arg):
            f(walk(), uniform_policy(), **{**good, arg: value})
    for f in (tb.td0_prediction_batch, tb.mc_prediction_batch):
        with pytest.raises(ValueError, match=arg):
            f(walk(), uniform_policy(), 3, **{**good, arg: value})


def test_prediction_bad_policy_env_and_V0():
    for f in (tb.td0_prediction, tb.mc_prediction):
        with pytest.raises(ValueError, match="policy"):
            f(walk(), np.full((7, 2), 0.7), 2, 0.1)
        with pytest.raises(ValueError, match="policy"):
            f(walk(), np.zeros((3, 2)), 2, 0.1)
        with pytest.raises(ValueError, match="V0"):
            f(walk(), uniform_policy(), 2, 0.1, V0=np.zeros(3))
        with pytest.raises(ValueError, match="env"):
            f(BoxEnv(), uniform_policy(), 2, 0.1)
    with pytest.raises(ValueError, match="first_visit"):
        tb.mc_prediction(walk(), uniform_policy(), 2, 0.1, first_visit="yes")


@pytest.mark.parametrize("kwargs,name", [
    (dict(method="dqn"), "method"), (dict(num_runs=0), "num_runs"), (dict(alpha=2.0), "alpha"),
    (dict(epsilon=-1.0), "epsilon"), (dict(num_episodes=0), "num_episodes"), (dict(gamma=2.0), "gamma")])
def test_td_control_batch_bad_arguments(kwargs, name):
    args = dict(method="sarsa", num_runs=2, num_episodes=2, alpha=0.5, epsilon=0.1)
    with pytest.raises(ValueError, match=name):
        tb.td_control_batch(cliff(), **{**args, **kwargs})


def test_toy_text_model_needs_a_model():
    with pytest.raises(ValueError, match="env"):
        tb.toy_text_model(gym.make("CartPole-v1"))
    m = tb.toy_text_model(gym.make("FrozenLake-v1"))
    assert m.prob.shape == (16, 4, 3) and m.max_episode_steps == 100
    np.testing.assert_allclose(m.prob.sum(-1), 1.0)


def test_greedy_path_and_evaluate_policy_bad_input():
    with pytest.raises(ValueError, match="Q"):
        tb.greedy_path(cliff(), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="max_steps"):
        tb.greedy_path(cliff(), np.zeros((48, 4)), max_steps=0)
    with pytest.raises(ValueError, match="env"):
        tb.greedy_path(BoxEnv(), np.zeros((48, 4)))
    with pytest.raises(ValueError, match="num_episodes"):
        tb.evaluate_policy(walk(), uniform_policy(), 0)
    with pytest.raises(ValueError, match="policy"):
        tb.evaluate_policy(walk(), np.array([0, 1, 2, 0, 0, 0, 0]), 3)
    with pytest.raises(ValueError, match="env"):
        tb.evaluate_policy(BoxEnv(), uniform_policy(), 3)


def test_random_walk_env_via_class_and_registry_agree():
    a = tb.td0_prediction(RandomWalkEnv(), uniform_policy(), 5, 0.1, V0=V0_WALK, seed=2)
    b = tb.td0_prediction(walk(), uniform_policy(), 5, 0.1, V0=V0_WALK, seed=2)
    np.testing.assert_array_equal(a, b)


def test_every_visit_mc_first_episode_shrinks_by_powers_of_0_9():
    """Exercise ex-td-first-episode: same seed, same first episode as the TD run (it ends on the
    left, return 0); every-visit MC with alpha 0.1 multiplies V(s) by 0.9 per visit."""
    td = tb.td0_prediction(walk(), uniform_policy(), 1, 0.1, V0=V0_WALK, seed=0)
    assert td[1, 1] == pytest.approx(0.45)
    mc = tb.mc_prediction(walk(), uniform_policy(), 1, 0.1, first_visit=False, V0=V0_WALK, seed=0)
    visits = np.log(mc[1, ABCDE] / 0.5) / np.log(0.9)
    assert np.allclose(visits, np.round(visits)) and visits[2] >= 1  # C is visited at least once


@pytest.mark.parametrize("Q", [np.zeros(3), np.zeros((2, 2, 2)), 5.0])
def test_greedy_policy_bad_shapes(Q):
    with pytest.raises(ValueError, match="Q"):
        tb.greedy_policy(Q)


@pytest.mark.parametrize("V", [np.zeros(4), np.zeros((3, 6)), np.zeros(8)])
def test_rms_error_bad_shapes(V):
    with pytest.raises(ValueError, match="V"):
        tb.rms_error(V, true_values())


def test_expected_return_bad_input():
    lake = gym.make("FrozenLake-v1")
    with pytest.raises(ValueError, match="horizon"):
        tb.expected_return(lake, np.zeros(16, dtype=int), horizon=0)
    with pytest.raises(ValueError, match="policy"):
        tb.expected_return(lake, np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="env"):
        tb.expected_return(BoxEnv(), np.zeros(16, dtype=int))


def test_toy_text_model_bad_envs():
    class NoModel(Loop):
        P = None
    for env in (BoxEnv(), gym.make("CartPole-v1"), NoModel()):
        with pytest.raises(ValueError, match="env"):
            tb.toy_text_model(env)


def test_plots_draw_and_reject_bad_input():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rlnotes.plotting import moving_average, plot_curves, plot_grid_paths, plot_value_estimates
    np.testing.assert_allclose(moving_average([1.0, 2, 3, 4], 2), [1.5, 2.5, 3.5])
    np.testing.assert_allclose(moving_average([1.0, 2], 1), [1.0, 2.0])
    for x, w in (([1.0, 2.0], 0), ([1.0, 2.0], 3), (np.zeros((2, 2)), 1)):
        with pytest.raises(ValueError, match="window|x"):
            moving_average(x, w)
    ax = plot_curves({"a": np.arange(20.0), "b": np.ones(20)}, smooth=5, ylabel="y")
    assert len(ax.lines) == 2 and len(ax.lines[0].get_xdata()) == 16
    ax = plot_value_estimates({"V": np.full(5, 0.5)}, true_values()[ABCDE], "ABCDE")
    assert len(ax.lines) == 2
    ax = plot_grid_paths((4, 12), {"p": [36, 24, 25]}, blocked=range(37, 47), start=36, goal=47)
    assert len(ax.lines) == 1 + 5 + 13  # the path, the horizontal and the vertical grid lines
    plt.close("all")
