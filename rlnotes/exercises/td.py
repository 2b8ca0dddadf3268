"""Checks of the exercises of the chapter "Learning without a model: Monte Carlo and TD".

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
from rlnotes.exercises.core import ExerciseFailed, check, expect, expect_own_work

__all__ = ["check_td0_update", "check_sarsa_update", "check_q_learning_update"]


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
    for hint, value in wrong.items():
        if np.isclose(got, value, atol=1e-9, rtol=1e-9):
            raise ExerciseFailed(f"The updated entry is {got:.6g}, expected {expected:.6g}.", hint)
    raise ExerciseFailed(f"The updated entry is {got:.6g}, expected {expected:.6g}.",
                         "The new estimate is old + alpha * (target - old).")


NO_ALPHA = ("The estimate jumped all the way to the target: move only a step of size alpha, "
            "old + alpha * (target - old).")
NO_DONE_MASK = ("You bootstrapped from a terminal next state. Its value is 0: when terminated is "
                "True the target is just the reward (multiply the bootstrap by 1 - terminated).")
WRONG_SIGN = ("The estimate moved away from the target: the TD error is target - old estimate, "
              "and the update adds alpha times it.")
NO_GAMMA = "The bootstrap term is discounted: multiply the next value by gamma."
USED_MAX = ("You used the largest next action value: that is Q-learning. SARSA bootstraps from "
            "Q(s_next, a_next), the action the policy actually takes next.")
USED_NEXT_ACTION = ("You bootstrapped from one sampled next action: that is SARSA. Q-learning "
                    "bootstraps from max over a of Q(s_next, a).")


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
    """``my_td0_update(V, s, r, s_next, terminated, alpha, gamma)`` returns V after one TD(0)
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
    """``my_sarsa_update(Q, s, a, r, s_next, a_next, terminated, alpha, gamma)`` returns Q after
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
    ``update(Q, s, a, r, s_next, terminated, alpha, gamma) -> Q``; returns Q."""
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
    """``my_q_learning_update(Q, s, a, r, s_next, terminated, alpha, gamma)`` returns Q after one
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
