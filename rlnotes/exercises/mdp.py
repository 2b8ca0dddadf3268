"""Checks of the exercises of the chapter "Markov decision processes and dynamic programming".

The chapter's exercises use ``check_in_place_evaluation`` and ``check_modified_policy_iteration``;
the earlier checks (policy evaluation, Q from V, value iteration) stay available for courses that
assigned them.

Each check calls the reader's function on small random MDPs with fixed seeds and compares the
result with rlnotes.mdp and with the Bellman equations it must satisfy. On a mismatch it computes
the answers of the usual mistakes (forgot gamma, max where the policy's expectation was needed or
the reverse, transposed P, a stopping rule that stops too early, a policy taken from the wrong
values) and names the one the reader's answer matches in the hint.
"""

from __future__ import annotations

import numpy as np

from rlnotes import mdp as _mdp
from rlnotes.exercises.core import (ExerciseFailed, check, expect, expect_own_work, format_mismatch,
                                    reader_array)

__all__ = ["check_in_place_evaluation", "check_modified_policy_iteration", "check_policy_evaluation",
           "check_q_values", "check_value_iteration"]

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
    return reader_array(x, what, shape, read_hint=hint, shape_hint=hint, finite=True,
                        finite_hint="Values blew up: " + TRANSPOSED_P + " Is gamma < 1 used?")


def _diagnose(got, expected, what: str, wrong: dict, default_hint: str, atol: float = 1e-7):
    """Pass if ``got`` matches ``expected``; else fail, naming the first mistake it matches."""
    if np.allclose(got, expected, atol=atol, rtol=0):
        return
    worst = int(np.argmax(np.abs(got - expected).reshape(-1)))
    idx = np.unravel_index(worst, np.shape(expected))
    message = (f"{what} is off: at index {tuple(int(i) for i in idx)} got "
               + format_mismatch(np.asarray(got)[idx], np.asarray(expected)[idx], atol=atol,
                                 rtol=0)[len("got "):] + ".")
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


# ------------------------------------------------------------------------ in-place evaluation

SYNCHRONOUS = ("Your sweep counts are those of synchronous sweeps: you computed each sweep from "
               "a copy of the old V. In place, V[s] is overwritten at once, so the states after s "
               "in the same sweep already use its new value.")
IN_PLACE_STOP = ("Stop after the first sweep whose largest change Delta (over the states, within "
                 "that sweep) satisfies gamma / (1 - gamma) * Delta < tol; count that sweep too.")


def _in_place_cases():
    """Discounted random MDPs on which in-place sweeps need clearly fewer sweeps."""
    yield _mdp.random_mdp(8, 3, gamma=0.9, seed=21, concentration=0.3)
    yield _mdp.random_mdp(6, 2, gamma=0.8, seed=22, terminal_prob=0.1, concentration=0.2)
    yield _mdp.random_mdp(10, 4, gamma=0.95, seed=23, concentration=0.5)


def _sweeps(result, what: str):
    if not isinstance(result, tuple) or len(result) != 2:
        raise ExerciseFailed(f"{what} must return a pair (V, sweeps).", "End with `return V, sweeps`.")
    sweeps = result[1]
    if isinstance(sweeps, (bool, np.bool_)) or not float(sweeps).is_integer():
        raise ExerciseFailed(f"sweeps must be a whole number, got {sweeps!r}.",
                             "Count the sweeps over all states, starting at 1.")
    return result[0], int(sweeps)


@check
def check_in_place_evaluation(my_in_place_evaluation):
    """``my_in_place_evaluation(mdp, policy, tol=1e-10)`` returns ``(V, sweeps)``: V^pi within
    tol, by in-place (Gauss-Seidel) sweeps over the states in the order 0, 1, ..., S-1, and the
    number of sweeps, for an (S, A) policy matrix and gamma < 1."""
    expect_own_work(my_in_place_evaluation, _mdp.in_place_policy_evaluation,
                    _mdp.iterative_policy_evaluation, _mdp.policy_evaluation,
                    _mdp.bellman_expectation_backup)
    for i, mdp in enumerate(_in_place_cases()):
        pi = _random_policy(mdp, seed=200 + i)
        S = mdp.num_states
        V, sweeps = _sweeps(my_in_place_evaluation(mdp, pi.copy(), _TOL), "my_in_place_evaluation")
        got = _as_array(V, "V", (S,), "Return V with one value per state.")
        expected = _mdp.policy_evaluation(mdp, pi)
        wrong = {USED_MAX: _mdp.value_iteration(mdp)[0]}
        default = STOPPED_EARLY if _close(got, expected) else NOT_FIXED_POINT
        _diagnose(got, expected, f"V on test MDP {i}", wrong, default, atol=_WITHIN_TOL)
        _, ref_sweeps = _mdp.in_place_policy_evaluation(mdp, pi, _TOL)
        _, sync_sweeps = _mdp.iterative_policy_evaluation(mdp, pi, _TOL)
        if sweeps == sync_sweeps:
            raise ExerciseFailed(f"On test MDP {i} you needed {sweeps} sweeps, as many as "
                                 f"synchronous sweeps; in place it takes {ref_sweeps}.", SYNCHRONOUS)
        if abs(sweeps - ref_sweeps) > 1:
            raise ExerciseFailed(f"On test MDP {i} you report {sweeps} sweeps; in-place sweeps in "
                                 f"the order 0, 1, ..., S-1 need {ref_sweeps}.", IN_PLACE_STOP)


# ------------------------------------------------------------------------ modified policy iteration

IGNORED_M = ("Your iteration counts do not depend on m: after each improvement, apply the new "
             "policy's backup T^pi m times in all (the first is T V itself) before improving again.")
EVALUATED_WITH_MAX = ("Between improvements, back up with the fixed policy pi (R[s, pi(s)] + gamma "
                      "P[s, pi(s)] @ V), not with the max over actions: that is value iteration.")
MPI_STOP = ("Stop when gamma / (1 - gamma) * max|T V - V| < tol, computed at the improvement step, "
            "and return T V with its greedy policy; count the improvements made before that.")


@check
def check_modified_policy_iteration(my_modified_policy_iteration):
    """``my_modified_policy_iteration(mdp, m, tol=1e-10)`` returns ``(V, policy, iterations)``:
    V within tol of V*, an optimal (S,) policy, and the number of improvements, for gamma < 1."""
    expect_own_work(my_modified_policy_iteration, _mdp.modified_policy_iteration,
                    _mdp.value_iteration, _mdp.policy_iteration, _mdp.bellman_optimality_backup,
                    _mdp.policy_evaluation)
    for i, mdp in enumerate(_in_place_cases()):
        S, A = mdp.num_states, mdp.num_actions
        V_star, _ = _mdp.policy_iteration(mdp)
        counts = {}
        for m in (1, 4, 20):
            result = my_modified_policy_iteration(mdp, m, _TOL)
            if not isinstance(result, tuple) or len(result) != 3:
                raise ExerciseFailed("my_modified_policy_iteration must return (V, policy, iterations).",
                                     "End with `return V, policy, iterations`.")
            got = _as_array(result[0], "V", (S,), "Return V with one value per state.")
            default = STOPPED_EARLY if _close(got, V_star) else "V is not V*: check the backups."
            _diagnose(got, V_star, f"V on test MDP {i} with m = {m}", {}, default, atol=_WITHIN_TOL)
            policy = np.asarray(result[1])
            if policy.shape != (S,) or not np.all(np.equal(np.mod(policy, 1), 0)) \
                    or policy.min() < 0 or policy.max() >= A:
                raise ExerciseFailed(f"policy must be an ({S},) array of integer actions in [0, {A}).",
                                     "Return the greedy actions of the final V, argmax over axis 1.")
            V_pi = _mdp.policy_evaluation(mdp, policy.astype(np.int64))
            expect(np.allclose(V_pi, V_star, atol=1e-6),
                   f"Your policy is not optimal on test MDP {i} with m = {m}.",
                   "Return the greedy policy of the final V.")
            counts[m] = int(result[2])
            _, _, ref = _mdp.modified_policy_iteration(mdp, m, _TOL)
            if abs(counts[m] - ref) > 1:
                vi = _mdp.modified_policy_iteration(mdp, 1, _TOL)[2]
                hint = (IGNORED_M if m > 1 and counts[m] == counts[1] else
                        EVALUATED_WITH_MAX if m > 1 and abs(counts[m] * m - vi) <= m else MPI_STOP)
                raise ExerciseFailed(f"On test MDP {i} with m = {m} you report {counts[m]} "
                                     f"improvements; modified policy iteration makes {ref}.", hint)
        _check_first_iteration(my_modified_policy_iteration, mdp, i)


def _check_first_iteration(my_modified_policy_iteration, mdp, i: int, m: int = 4) -> None:
    """With a tol that stops the method right after its first improvement, V must be T V_1
    where V_1 = (T^pi_1)^m V_0: this tells the policy's backups from value iteration's."""
    P, R, gamma = np.asarray(mdp.P), np.asarray(mdp.R), mdp.gamma
    S = mdp.num_states
    rows = np.arange(S)
    Q0 = R + gamma * P @ np.zeros(S)
    pi = Q0.argmax(axis=1)
    V1 = Q0.max(axis=1)
    for _ in range(m - 1):
        V1 = R[rows, pi] + gamma * P[rows, pi] @ V1
    TV1 = (R + gamma * P @ V1).max(axis=1)
    bound0 = gamma / (1 - gamma) * np.abs(Q0.max(axis=1)).max()
    bound1 = gamma / (1 - gamma) * np.abs(TV1 - V1).max()
    if not bound1 < bound0:
        return
    tol = float(np.sqrt(bound0 * bound1))
    V, _, iterations = my_modified_policy_iteration(mdp, m, tol)
    got = np.asarray(V, dtype=np.float64)
    if int(iterations) != 1 or got.shape != (S,) or not np.allclose(got, TV1, atol=1e-9):
        raise ExerciseFailed(
            f"On test MDP {i} with m = {m} and tol = {tol:.4g}, modified policy iteration stops "
            f"after one improvement and returns T V_1; you returned {int(iterations)} improvements "
            "and other values.", EVALUATED_WITH_MAX if int(iterations) == 1 else MPI_STOP)
