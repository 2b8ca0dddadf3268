"""Checks of the exercises of the chapter "Learning without a model: Monte Carlo and TD".

The chapter's coding exercises use ``check_certainty_equivalence`` and
``check_weighted_importance_sampling`` (batches of episodes as lists of transitions
``(s, a, r, s2, terminated)``); the one-update checks stay available for courses that assigned
them.

Each check calls the reader's function on random inputs with fixed seeds and compares with
rlnotes.tabular; on a mismatch it recognises the usual mistakes (no step size, bootstrapping
from a terminal state, the wrong sign of the TD error, max instead of the next action in SARSA)
and says so in the hint. ``check_q_learning_update`` also learns the non-slippery FrozenLake with
the reader's update, over several seeds.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlnotes import tabular
from rlnotes.exercises.core import ExerciseFailed, check, expect, expect_own_work, format_mismatch

__all__ = ["check_certainty_equivalence", "check_q_learning_update", "check_sarsa_update",
           "check_td0_update", "check_weighted_importance_sampling", "random_episodes"]


def _as_float_array(x, what: str, shape) -> np.ndarray:
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ExerciseFailed(f"{what} could not be read as a numpy array ({err}).",
                             "Return the updated array.") from None
    if x.shape != shape:
        raise ExerciseFailed(f"{what} has shape {x.shape}, expected {shape}.",
                             "Return the whole updated array, not just one entry.")
    return x


def _diagnose(got: float, expected: float, wrong: dict) -> None:
    """Raise ExerciseFailed with the hint of the first typical mistake that ``got`` matches."""
    if np.isclose(got, expected, atol=1e-9, rtol=1e-9):
        return
    mismatch = format_mismatch(got, expected, atol=1e-9, rtol=1e-9)
    for hint, value in wrong.items():
        if np.isclose(got, value, atol=1e-9, rtol=1e-9):
            raise ExerciseFailed(f"The updated entry: {mismatch}.", hint)
    raise ExerciseFailed(f"The updated entry: {mismatch}.",
                         "The new estimate is old + alpha * (target - old).")


NO_ALPHA = ("The estimate jumped all the way to the target: move only a step of size alpha, "
            "old + alpha * (target - old).")
NO_DONE_MASK = ("You bootstrapped from a terminal next state. Its value is 0: when terminated is "
                "True the target is just the reward (multiply the bootstrap by 1 - terminated).")
WRONG_SIGN = ("The estimate moved away from the target: the TD error is target - old estimate, "
              "and the update adds alpha times it.")
NO_GAMMA = "The bootstrap term is discounted: multiply the next value by gamma."
USED_MAX = ("You used the largest next action value: that is Q-learning. SARSA bootstraps from "
            "Q(s2, a2), the action the policy actually takes next.")
USED_NEXT_ACTION = ("You bootstrapped from one sampled next action: that is SARSA. Q-learning "
                    "bootstraps from max over a of Q(s2, a).")


def _cases(seed: int, S: int, A: int, n: int = 12):
    """Random transitions, half of them into a terminal state, with distinct candidate answers."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        table = rng.normal(size=(S, A)) if A else rng.normal(size=S)
        s, s2 = (int(x) for x in rng.choice(S, size=2, replace=False))
        yield dict(table=table, s=s, a=int(rng.integers(A)) if A else None,
                   a2=int(rng.integers(A)) if A else None, r=float(rng.normal()),
                   s2=s2, terminated=bool(i % 2), alpha=float(rng.uniform(0.1, 0.9)),
                   gamma=float(rng.uniform(0.5, 0.95)))


@check
def check_td0_update(my_td0_update):
    """``my_td0_update(V, s, r, s2, terminated, alpha, gamma)`` returns V after one TD(0)
    update of V[s] (updating V in place is allowed)."""
    expect_own_work(my_td0_update, tabular.td_update, tabular.td_target)
    for case in _cases(seed=1, S=6, A=0):
        V, s, s2 = case["table"], case["s"], case["s2"]
        r, term, alpha, gamma = case["r"], case["terminated"], case["alpha"], case["gamma"]
        got = _as_float_array(my_td0_update(V.copy(), s, r, s2, term, alpha, gamma),
                              "my_td0_update's result", V.shape)
        target = tabular.td_target(r, V[s2], term, gamma)
        expected = V.copy()
        expected[s] = tabular.td_update(V[s], target, alpha)
        others = np.arange(V.size) != s
        expect(np.allclose(got[others], V[others]),
               "Entries other than V[s] changed.", "TD(0) updates only the state just left, s.")
        wrong = {
            NO_ALPHA: target,
            NO_DONE_MASK: V[s] + alpha * (r + gamma * V[s2] - V[s]),
            WRONG_SIGN: V[s] - alpha * (target - V[s]),
            NO_GAMMA: V[s] + alpha * (tabular.td_target(r, V[s2], term, 1.0) - V[s]),
        }
        _diagnose(got[s], expected[s], wrong)


@check
def check_sarsa_update(my_sarsa_update):
    """``my_sarsa_update(Q, s, a, r, s2, a2, terminated, alpha, gamma)`` returns Q after
    one SARSA update of Q[s, a] (updating Q in place is allowed)."""
    expect_own_work(my_sarsa_update, tabular.td_update, tabular.sarsa_target)
    for case in _cases(seed=2, S=5, A=3):
        Q, s, a, s2, a2 = case["table"], case["s"], case["a"], case["s2"], case["a2"]
        r, term, alpha, gamma = case["r"], case["terminated"], case["alpha"], case["gamma"]
        a2 = int(np.argmin(Q[s2]))  # the next action is not the greedy one: max would differ
        got = _as_float_array(my_sarsa_update(Q.copy(), s, a, r, s2, a2, term, alpha, gamma),
                              "my_sarsa_update's result", Q.shape)
        target = tabular.sarsa_target(r, Q[s2], a2, term, gamma)
        mask = np.ones(Q.shape, dtype=bool)
        mask[s, a] = False
        expect(np.allclose(got[mask], Q[mask]), "Entries other than Q[s, a] changed.",
               "SARSA updates only the pair just taken, Q[s, a].")
        wrong = {
            USED_MAX: Q[s, a] + alpha * (tabular.q_learning_target(r, Q[s2], term, gamma) - Q[s, a]),
            NO_ALPHA: target,
            NO_DONE_MASK: Q[s, a] + alpha * (r + gamma * Q[s2, a2] - Q[s, a]),
            WRONG_SIGN: Q[s, a] - alpha * (target - Q[s, a]),
            NO_GAMMA: Q[s, a] + alpha * (tabular.sarsa_target(r, Q[s2], a2, term, 1.0) - Q[s, a]),
        }
        _diagnose(got[s, a], tabular.td_update(Q[s, a], target, alpha), wrong)


def learn_with_update(env, update, num_episodes: int, alpha: float, epsilon: float,
                      gamma: float, seed: int) -> np.ndarray:
    """Q-learning's loop (as :func:`rlnotes.tabular.q_learning`) with a given update function
    ``update(Q, s, a, r, s2, terminated, alpha, gamma) -> Q``; returns Q."""
    S, A = env.observation_space.n, env.action_space.n
    rng = np.random.default_rng(seed)
    Q = np.zeros((S, A))
    s, _ = env.reset(seed=seed)
    for k in range(num_episodes):
        if k > 0:
            s, _ = env.reset()
        done = False
        while not done:
            a = tabular.epsilon_greedy(Q[s], epsilon, rng)
            s2, r, terminated, truncated, _ = env.step(a)
            Q = np.asarray(update(Q, s, a, r, s2, terminated, alpha, gamma), dtype=np.float64)
            s, done = s2, terminated or truncated
    return Q


@check
def check_q_learning_update(my_q_learning_update, seeds=(0, 1, 2), num_episodes: int = 1500):
    """``my_q_learning_update(Q, s, a, r, s2, terminated, alpha, gamma)`` returns Q after one
    Q-learning update of Q[s, a]. Then it must learn the non-slippery FrozenLake: with
    alpha = 0.5, epsilon = 0.1, gamma = 0.99 and ``num_episodes`` episodes, the greedy policy
    reaches the goal with probability 1 for every seed in ``seeds``."""
    expect_own_work(my_q_learning_update, tabular.td_update, tabular.q_learning_target)
    for case in _cases(seed=3, S=5, A=3):
        Q, s, a, s2 = case["table"], case["s"], case["a"], case["s2"]
        r, term, alpha, gamma = case["r"], case["terminated"], case["alpha"], case["gamma"]
        got = _as_float_array(my_q_learning_update(Q.copy(), s, a, r, s2, term, alpha, gamma),
                              "my_q_learning_update's result", Q.shape)
        target = tabular.q_learning_target(r, Q[s2], term, gamma)
        mask = np.ones(Q.shape, dtype=bool)
        mask[s, a] = False
        expect(np.allclose(got[mask], Q[mask]), "Entries other than Q[s, a] changed.",
               "Q-learning updates only the pair just taken, Q[s, a].")
        wrong = {
            NO_ALPHA: target,
            NO_DONE_MASK: Q[s, a] + alpha * (r + gamma * Q[s2].max() - Q[s, a]),
            WRONG_SIGN: Q[s, a] - alpha * (target - Q[s, a]),
            NO_GAMMA: Q[s, a] + alpha * (tabular.q_learning_target(r, Q[s2], term, 1.0) - Q[s, a]),
        }
        _diagnose(got[s, a], tabular.td_update(Q[s, a], target, alpha), wrong)
    env = gym.make("FrozenLake-v1", is_slippery=False)
    for seed in seeds:
        Q = learn_with_update(env, my_q_learning_update, num_episodes, 0.5, 0.1, 0.99, seed)
        success = tabular.expected_return(env, tabular.greedy_policy(Q))
        expect(success > 1 - 1e-9,
               f"With seed {seed}, the greedy policy of the learned Q reaches the goal with "
               f"probability {success:.3f}, not 1.",
               "Check the update on a terminal transition (reward 1, no bootstrap) and that "
               "values flow back: the target uses max over the next state's actions.")


# ------------------------------------------------------------------------ batches of episodes

def random_episodes(num_episodes: int, num_states: int = 5, num_actions: int = 2, *, seed: int,
                    policy=None, end_prob: float = 0.25):
    """Episodes of a small random MDP, as lists of transitions ``(s, a, r, s2, terminated)``.

    States 0..num_states-1 are non-terminal; ``num_states`` is the terminal state, entered with
    probability ``end_prob`` on every step. Rewards are rounded normal draws that depend on
    (s, a). ``policy`` is an (num_states, num_actions) matrix of probabilities (uniform if None).
    Returns ``(episodes, policy)``.
    """
    rng = np.random.default_rng(seed)
    S, A = num_states, num_actions
    P = rng.dirichlet(np.full(S, 0.5), size=(S, A))
    R = np.round(rng.normal(size=(S, A)), 1)
    policy = np.full((S, A), 1.0 / A) if policy is None else np.asarray(policy, dtype=np.float64)
    episodes = []
    for _ in range(num_episodes):
        s, episode = int(rng.integers(S)), []
        while True:
            a = int(rng.choice(A, p=policy[s]))
            r = float(R[s, a] + np.round(rng.normal(scale=0.5), 1))
            if rng.random() < end_prob:
                episode.append((s, a, r, S, True))
                break
            s2 = int(rng.choice(S, p=P[s, a]))
            episode.append((s, a, r, s2, False))
            s = s2
        episodes.append(episode)
    return episodes, policy


def certainty_equivalence(episodes, num_states: int, gamma: float) -> np.ndarray:
    """The reference answer of ``ex-td-certainty-equivalence`` (not shown in the chapter)."""
    n = np.zeros(num_states)
    r_sum = np.zeros(num_states)
    counts = np.zeros((num_states, num_states))
    for episode in episodes:
        for s, _, r, s2, terminated in episode:
            n[s] += 1
            r_sum[s] += r
            if not terminated:
                counts[s, s2] += 1
    V = np.zeros(num_states)
    seen = n > 0
    P_hat = counts[np.ix_(seen, seen)] / n[seen, None]
    V[seen] = np.linalg.solve(np.eye(int(seen.sum())) - gamma * P_hat, r_sum[seen] / n[seen])
    return V


def _batch_mc(episodes, num_states: int, gamma: float, weights=None) -> np.ndarray:
    num, den = np.zeros(num_states), np.zeros(num_states)
    for episode in episodes:
        G, rho = 0.0, 1.0
        for s, a, r, _, _ in reversed(episode):
            G = r + gamma * G
            w = 1.0 if weights is None else weights(s, a)
            rho *= w
            num[s] += rho * G
            den[s] += rho
    return np.divide(num, den, out=np.zeros(num_states), where=den > 0)


CE_IS_MC = ("Your values are the averages of the observed returns: that is batch Monte Carlo. The "
            "certainty-equivalence estimate first builds the model: the mean reward of leaving s "
            "and the fraction of departures from s that go to each non-terminal s2, then solves "
            "V = r_hat + gamma * P_hat V.")
CE_NO_GAMMA = "Discount the next value: V = r_hat + gamma * P_hat V."
CE_COUNTS = ("P_hat[s, s2] is the number of transitions s -> s2 divided by the number of departures "
             "from s (terminal transitions included in that number, as they leave s too).")


@check
def check_certainty_equivalence(my_certainty_equivalence):
    """``my_certainty_equivalence(episodes, num_states, gamma)`` returns the (num_states,)
    values of the maximum-likelihood model of the episodes (0 for states never left)."""
    expect_own_work(my_certainty_equivalence, tabular.batch_prediction, tabular.batch_td_mc)
    for i, (num_episodes, gamma) in enumerate([(3, 1.0), (12, 0.9), (40, 1.0)]):
        episodes, _ = random_episodes(num_episodes, seed=30 + i)
        S = 5
        got = _as_float_array(my_certainty_equivalence([list(e) for e in episodes], S, gamma),
                              "my_certainty_equivalence's result", (S,))
        expected = certainty_equivalence(episodes, S, gamma)
        if np.allclose(got, expected, atol=1e-8):
            continue
        message = (f"On batch {i} ({num_episodes} episodes, gamma = {gamma}) got "
                   f"{np.round(got, 4).tolist()}, expected {np.round(expected, 4).tolist()}.")
        if np.allclose(got, _batch_mc(episodes, S, gamma), atol=1e-8):
            raise ExerciseFailed(message, CE_IS_MC)
        if gamma < 1 and np.allclose(got, certainty_equivalence(episodes, S, 1.0), atol=1e-8):
            raise ExerciseFailed(message, CE_NO_GAMMA)
        raise ExerciseFailed(message, CE_COUNTS)


IS_ORDINARY = ("You divided by the number of visits: that is ordinary importance sampling. The "
               "weighted estimate divides the sum of rho * G by the sum of the ratios rho.")
IS_FROM_NEXT = ("Your ratio starts one step late: V(s_t) averages over the action a_t too, so "
                "rho_t = prod over k = t, ..., T-1 of pi(a_k | s_k) / b(a_k | s_k) includes a_t.")
IS_INVERTED = "The ratio is pi / b (target over behaviour), not b / pi."
IS_NONE = ("These are the behaviour policy's values: weight each return by the importance ratio of "
           "the actions that produced it.")


@check
def check_weighted_importance_sampling(my_off_policy_mc):
    """``my_off_policy_mc(episodes, target, behaviour, gamma)`` returns the every-visit weighted
    importance-sampling estimate of V^pi, shape (S,), from episodes played with ``behaviour``;
    ``target`` and ``behaviour`` are (S, A) probability matrices; 0 where no weight arrived."""
    expect_own_work(my_off_policy_mc, tabular.mc_prediction, tabular.mc_prediction_batch,
                    tabular.importance_sampling_estimates, tabular.off_policy_mc_control)
    S, A = 5, 3
    rng = np.random.default_rng(44)
    for i, (num_episodes, gamma) in enumerate([(4, 1.0), (30, 0.9)]):
        behaviour = rng.dirichlet(np.ones(A) * 2, size=S)
        target = rng.dirichlet(np.ones(A), size=S)
        episodes, _ = random_episodes(num_episodes, S, A, seed=50 + i, policy=behaviour)
        got = _as_float_array(my_off_policy_mc([list(e) for e in episodes], target.copy(),
                                                behaviour.copy(), gamma),
                              "my_off_policy_mc's result", (S,))
        ratio = target / behaviour
        expected = _batch_mc(episodes, S, gamma, lambda s, a: ratio[s, a])
        if np.allclose(got, expected, atol=1e-8):
            continue
        message = (f"On batch {i} got {np.round(got, 4).tolist()}, expected "
                   f"{np.round(expected, 4).tolist()}.")
        num = np.zeros(S)
        visits = np.zeros(S)
        for episode in episodes:
            G, rho = 0.0, 1.0
            for s, a, r, _, _ in reversed(episode):
                G, rho = r + gamma * G, rho * ratio[s, a]
                num[s] += rho * G
                visits[s] += 1
        ordinary = np.divide(num, visits, out=np.zeros(S), where=visits > 0)
        late = np.zeros(S)
        late_num, late_den = np.zeros(S), np.zeros(S)
        for episode in episodes:
            G, rho = 0.0, 1.0
            for s, a, r, _, _ in reversed(episode):
                G = r + gamma * G
                late_num[s] += rho * G
                late_den[s] += rho
                rho *= ratio[s, a]
        late = np.divide(late_num, late_den, out=late, where=late_den > 0)
        candidates = {
            IS_ORDINARY: ordinary,
            IS_FROM_NEXT: late,
            IS_INVERTED: _batch_mc(episodes, S, gamma, lambda s, a: 1.0 / ratio[s, a]),
            IS_NONE: _batch_mc(episodes, S, gamma),
        }
        for hint, value in candidates.items():
            if np.allclose(got, value, atol=1e-8):
                raise ExerciseFailed(message, hint)
        raise ExerciseFailed(message, "V(s) = sum of rho_t G_t over the visits of s, divided by "
                                      "the sum of rho_t over the same visits.")
