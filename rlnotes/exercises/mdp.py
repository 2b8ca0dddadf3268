"""Checks of the exercises of the chapter "Markov decision processes and dynamic programming".

Each check calls the reader's function on small random MDPs with fixed seeds and compares the
result with rlnotes.mdp and with the Bellman equations it must satisfy. On a mismatch it computes
the answers of the usual mistakes (forgot gamma, max where the policy's expectation was needed or
the reverse, transposed P, a stopping rule that stops too early, a policy taken from the wrong
values) and names the one the reader's answer matches in the hint.
"""

from __future__ import annotations

import numpy as np

from rlnotes import mdp as _mdp
from rlnotes.exercises.core import ExerciseFailed, check, expect_own_work

__all__ = ["check_policy_evaluation", "check_q_values", "check_value_iteration"]

FORGOT_GAMMA = ("Your values are the undiscounted ones: multiply the expected next value by "
                "gamma (mdp.gamma).")
USED_MAX = ("Your values are the optimal ones, V*: you maximised over actions. Policy evaluation "
            "averages over actions with the policy's probabilities, sum_a pi(a|s) [...].")
USED_MEAN = ("Your values are those of the equiprobable random policy: value iteration takes the "
             "max over actions, not an average.")
TRANSPOSED_P = ("P[s, a, s2] is Pr(s2 | s, a): the expectation over next states sums over the "
                "LAST axis, sum_s2 P[s, a, s2] V[s2] (mdp.P @ V), not over the first.")
NO_REWARD = "Q(s, a) starts with the immediate reward R[s, a]; add mdp.R."
STOPPED_EARLY = ("Close, but not within the tolerance: stop only when "
                 "gamma / (1 - gamma) * max|V_new - V| < tol, which bounds the distance to the "
                 "fixed point; max|V_new - V| < tol alone stops too early.")
NOT_FIXED_POINT = ("The result does not satisfy its Bellman equation: check the backup, "
                   "V(s) = sum_a pi(a|s) (R[s, a] + gamma * sum_s2 P[s, a, s2] V[s2]).")


#: The tolerance the checks pass to the reader's functions, and how far from the exact answer a
#: result may be: the exercises ask for V within tol of the true values (plus rounding slack).
_TOL = 1e-10
_WITHIN_TOL = _TOL + 1e-13


def _cases():
    """Small random MDPs: episodic ones (where even the gamma = 1 mistake converges) first."""
    yield _mdp.random_mdp(6, 3, gamma=0.9, seed=11, terminal_prob=0.3, concentration=0.2)
    yield _mdp.random_mdp(5, 2, gamma=0.8, seed=12, concentration=0.2)
    yield _mdp.random_mdp(7, 4, gamma=0.5, seed=13, terminal_prob=0.2, concentration=0.2)


def _random_policy(mdp, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(mdp.num_actions), size=mdp.num_states)


def _as_array(x, what: str, shape, hint: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ExerciseFailed(f"{what} could not be read as a numpy array ({err}).", hint) from None
    if x.shape != shape:
        raise ExerciseFailed(f"{what} has shape {x.shape}, expected {shape}.", hint)
    if not np.all(np.isfinite(x)):
        raise ExerciseFailed(f"{what} contains NaN or infinite values.",
                             "Values blew up: " + TRANSPOSED_P + " Is gamma < 1 used?")
    return x


def _diagnose(got, expected, what: str, wrong: dict, default_hint: str, atol: float = 1e-7):
    """Pass if ``got`` matches ``expected``; else fail, naming the first mistake it matches."""
    if np.allclose(got, expected, atol=atol, rtol=0):
        return
    worst = int(np.argmax(np.abs(got - expected).reshape(-1)))
    idx = np.unravel_index(worst, np.shape(expected))
    message = (f"{what} is off: at index {tuple(int(i) for i in idx)} got "
               f"{np.asarray(got)[idx]:.6g}, expected {np.asarray(expected)[idx]:.6g}.")
    for hint, value in wrong.items():
        if value is not None and np.shape(value) == np.shape(got) and np.allclose(got, value, atol=1e-5):
            raise ExerciseFailed(message, hint)
    raise ExerciseFailed(message, default_hint)


def _close(got, expected) -> bool:
    """Near the answer but not within the tolerance: the mark of a loop that stopped early."""
    return float(np.abs(got - expected).max()) < 1e-2 * max(1.0, float(np.abs(expected).max()))


def _iterate(backup, S: int, sweeps: int = 2000):
    """Fixed point of ``backup`` by iteration (None if it blows up)."""
    V = np.zeros(S)
    with np.errstate(all="ignore"):
        for _ in range(sweeps):
            V_new = backup(V)
            if not np.all(np.isfinite(V_new)):
                return None
            if np.abs(V_new - V).max() < 1e-13:
                return V_new
            V = V_new
    return V if np.all(np.isfinite(V)) else None


def _undiscounted(mdp):
    """The same MDP with gamma = 1, when that is allowed (episodic); else None."""
    try:
        return _mdp.TabularMDP(mdp.P, mdp.R, 1.0)
    except ValueError:
        return None


@check
def check_policy_evaluation(my_policy_evaluation):
    """``my_policy_evaluation(mdp, policy, tol=1e-10)`` returns V^pi, shape (S,), for an (S, A)
    matrix of action probabilities, by repeated Bellman expectation backups."""
    expect_own_work(my_policy_evaluation, _mdp.policy_evaluation, _mdp.iterative_policy_evaluation,
                    _mdp.bellman_expectation_backup)
    for i, mdp in enumerate(_cases()):
        pi = _random_policy(mdp, seed=100 + i)
        S = mdp.num_states
        got = _as_array(my_policy_evaluation(mdp, pi.copy(), _TOL), "my_policy_evaluation's result",
                        (S,), "Return V as an array with one value per state.")
        expected = _mdp.policy_evaluation(mdp, pi)
        undiscounted = _undiscounted(mdp)
        P, R, gamma = mdp.P, mdp.R, mdp.gamma
        wrong = {
            USED_MAX: _mdp.value_iteration(mdp)[0],
            FORGOT_GAMMA: None if undiscounted is None else _mdp.policy_evaluation(undiscounted, pi),
            TRANSPOSED_P: _iterate(
                lambda V: (pi * (R + gamma * np.einsum("tas,t->sa", P, V))).sum(axis=1), S),
        }
        default = STOPPED_EARLY if _close(got, expected) else NOT_FIXED_POINT
        _diagnose(got, expected, f"V on test MDP {i}", wrong, default, atol=_WITHIN_TOL)


@check
def check_q_values(my_q_values):
    """``my_q_values(mdp, V)`` returns Q, shape (S, A), with
    Q[s, a] = R[s, a] + gamma * sum_s2 P[s, a, s2] V[s2]."""
    expect_own_work(my_q_values, _mdp.q_values)
    rng = np.random.default_rng(7)
    for i, mdp in enumerate(_cases()):
        S, A = mdp.num_states, mdp.num_actions
        V = rng.standard_normal(S)
        got = _as_array(my_q_values(mdp, V.copy()), "my_q_values's result", (S, A),
                        "Return Q with one row per state and one column per action, shape (S, A).")
        P, R, gamma = mdp.P, mdp.R, mdp.gamma
        expected = _mdp.q_values(mdp, V)
        wrong = {
            FORGOT_GAMMA: R + P @ V,
            TRANSPOSED_P: R + gamma * np.einsum("tas,t->sa", P, V),
            NO_REWARD: gamma * P @ V,
            "Q(s, a) looks ahead one step: the next value is the expectation over s2 of V[s2], "
            "not V[s]; the discount applies to that expectation.": R + gamma * V[:, None],
        }
        _diagnose(got, expected, f"Q on test MDP {i}", wrong,
                  "Q[s, a] = R[s, a] + gamma * sum over s2 of P[s, a, s2] * V[s2].", atol=1e-9)


@check
def check_value_iteration(my_value_iteration):
    """``my_value_iteration(mdp, tol=1e-10)`` returns ``(V, policy)``: V within tol of V* and an
    (S,) array of greedy (optimal) actions."""
    expect_own_work(my_value_iteration, _mdp.value_iteration, _mdp.policy_iteration,
                    _mdp.bellman_optimality_backup)
    for i, mdp in enumerate(_cases()):
        S, A = mdp.num_states, mdp.num_actions
        result = my_value_iteration(mdp, _TOL)
        if not isinstance(result, tuple) or len(result) != 2:
            raise ExerciseFailed("my_value_iteration must return a pair (V, policy).",
                                 "End with `return V, policy`.")
        V_star, _ = _mdp.policy_iteration(mdp)
        got = _as_array(result[0], "V", (S,), "Return V with one value per state.")
        undiscounted = _undiscounted(mdp)
        P, R, gamma = mdp.P, mdp.R, mdp.gamma
        wrong = {
            USED_MEAN: _mdp.policy_evaluation(mdp, _mdp.uniform_policy(mdp)),
            FORGOT_GAMMA: None if undiscounted is None else _mdp.value_iteration(undiscounted)[0],
            TRANSPOSED_P: _iterate(lambda V: (R + gamma * np.einsum("tas,t->sa", P, V)).max(axis=1), S),
        }
        default = (STOPPED_EARLY if _close(got, V_star) else
                   "V is not a fixed point of V(s) = max_a (R[s, a] + gamma * sum_s2 P[s, a, s2] V[s2]).")
        _diagnose(got, V_star, f"V on test MDP {i}", wrong, default, atol=_WITHIN_TOL)

        policy = np.asarray(result[1].detach().cpu().numpy() if hasattr(result[1], "detach")
                            else result[1])
        if policy.shape != (S,):
            raise ExerciseFailed(
                f"policy has shape {policy.shape}, expected ({S},): one action per state.",
                "Take the argmax of Q over the actions, axis=1.")
        if not np.all(np.equal(np.mod(policy, 1), 0)) or policy.min() < 0 or policy.max() >= A:
            raise ExerciseFailed(f"policy must hold integer actions in [0, {A}).",
                                 "Take the argmax of Q over the actions, axis=1.")
        V_pi = _mdp.policy_evaluation(mdp, policy.astype(np.int64))
        if not np.allclose(V_pi, V_star, atol=1e-6):
            s = int(np.argmax(V_star - V_pi))
            raise ExerciseFailed(
                f"Your policy is not optimal on test MDP {i}: in state {s} it earns "
                f"{V_pi[s]:.6g}, the best policy {V_star[s]:.6g}.",
                "Extract the policy from the final V: the argmax over actions (axis=1) of "
                "Q = R + gamma * P @ V, computed with the same gamma and P as the values.")
