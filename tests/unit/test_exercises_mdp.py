"""Tests of the MDP chapter's exercise checks: each accepts a correct solution and rejects the
typical wrong ones with the matching hint."""

import numpy as np
import pytest

from rlnotes.exercises import core
from rlnotes.exercises.mdp import (FORGOT_GAMMA, NO_REWARD, STOPPED_EARLY, TRANSPOSED_P, USED_MAX,
                                   USED_MEAN, check_policy_evaluation, check_q_values,
                                   check_value_iteration)


# ------------------------------------------------------------------------ policy evaluation

def evaluation(mdp, policy, tol=1e-10, *, gamma=None, backup="mean", rule="contraction"):
    """Iterative policy evaluation with switchable mistakes."""
    P, R = mdp.P, mdp.R
    g = mdp.gamma if gamma is None else gamma
    V = np.zeros(mdp.num_states)
    for _ in range(100_000):
        Q = R + g * P @ V
        V_new = (policy * Q).sum(axis=1) if backup == "mean" else Q.max(axis=1)
        delta = np.abs(V_new - V).max()
        V = V_new
        if rule == "contraction" and (g == 1 and delta < tol or g < 1 and g * delta < tol * (1 - g)):
            break
        if rule == "loose" and delta < 1e-3:
            break
        if rule == "naive" and delta < tol:  # no gamma / (1 - gamma) factor
            break
    return V


def test_policy_evaluation_check_accepts_correct():
    assert check_policy_evaluation(evaluation) is None


@pytest.mark.parametrize("wrong, hint", [
    (lambda m, p, tol=1e-10: evaluation(m, p, tol, backup="max"), USED_MAX),
    (lambda m, p, tol=1e-10: evaluation(m, p, tol, gamma=1.0), FORGOT_GAMMA),
    (lambda m, p, tol=1e-10: evaluation(m, p, tol, rule="loose"), STOPPED_EARLY),
    (lambda m, p, tol=1e-10: evaluation(m, p, tol, rule="naive"), STOPPED_EARLY),
])
def test_policy_evaluation_check_rejects_typical_mistakes(wrong, hint, capsys):
    with pytest.raises(core.ExerciseFailed) as err:
        check_policy_evaluation(wrong)
    assert err.value.hint == hint
    assert "FAILED check_policy_evaluation" in capsys.readouterr().out


def test_policy_evaluation_check_rejects_transposed_p_and_bad_shapes():
    def transposed(mdp, policy, tol=1e-10):
        V = np.zeros(mdp.num_states)
        for _ in range(3000):
            V = (policy * (mdp.R + mdp.gamma * np.einsum("tas,t->sa", mdp.P, V))).sum(axis=1)
        return V
    with pytest.raises(core.ExerciseFailed) as err:
        check_policy_evaluation.raw(transposed)
    assert err.value.hint == TRANSPOSED_P
    with pytest.raises(core.ExerciseFailed, match="shape"):
        check_policy_evaluation.raw(lambda m, p, tol=1e-10: np.zeros((m.num_states, 1)))
    with pytest.raises(NotImplementedError):
        check_policy_evaluation.raw(lambda m, p, tol=1e-10: (_ for _ in ()).throw(NotImplementedError))


# ------------------------------------------------------------------------ Q from V

def test_q_values_check():
    assert check_q_values(lambda mdp, V: mdp.R + mdp.gamma * mdp.P @ V) is None
    cases = {
        FORGOT_GAMMA: lambda mdp, V: mdp.R + mdp.P @ V,
        TRANSPOSED_P: lambda mdp, V: mdp.R + mdp.gamma * np.einsum("tas,t->sa", mdp.P, V),
        NO_REWARD: lambda mdp, V: mdp.gamma * mdp.P @ V,
    }
    for hint, wrong in cases.items():
        with pytest.raises(core.ExerciseFailed) as err:
            check_q_values.raw(wrong)
        assert err.value.hint == hint
    with pytest.raises(core.ExerciseFailed, match="shape"):
        check_q_values.raw(lambda mdp, V: (mdp.R + mdp.gamma * mdp.P @ V).T)


# ------------------------------------------------------------------------ value iteration

def vi(mdp, tol=1e-10, *, gamma=None, backup="max", policy_from="final", rule="contraction"):
    P, R = mdp.P, mdp.R
    g = mdp.gamma if gamma is None else gamma
    V = np.zeros(mdp.num_states)
    while True:
        Q = R + g * P @ V
        V_new = Q.max(axis=1) if backup == "max" else Q.mean(axis=1)
        delta = np.abs(V_new - V).max()
        V = V_new
        if rule == "loose" and delta < 1e-3:
            break
        if rule == "naive" and delta < tol:  # no gamma / (1 - gamma) factor
            break
        if rule == "contraction" and (delta == 0 or g < 1 and g * delta < tol * (1 - g) or g == 1 and delta < tol):
            break
    if policy_from == "rewards":  # forgot the look-ahead: the myopic policy
        return V, np.argmax(R, axis=1)
    return V, np.argmax(R + g * P @ V, axis=1)


def test_value_iteration_check_accepts_correct():
    assert check_value_iteration(vi) is None


@pytest.mark.parametrize("wrong, hint", [
    (lambda m, tol=1e-10: vi(m, tol, backup="mean"), USED_MEAN),
    (lambda m, tol=1e-10: vi(m, tol, gamma=1.0), FORGOT_GAMMA),
    (lambda m, tol=1e-10: vi(m, tol, rule="loose"), STOPPED_EARLY),
    (lambda m, tol=1e-10: vi(m, tol, rule="naive"), STOPPED_EARLY),
])
def test_value_iteration_check_rejects_typical_mistakes(wrong, hint):
    with pytest.raises(core.ExerciseFailed) as err:
        check_value_iteration.raw(wrong)
    assert err.value.hint == hint


def test_value_iteration_check_rejects_bad_policies_and_results():
    with pytest.raises(core.ExerciseFailed, match="not optimal"):
        check_value_iteration.raw(lambda m, tol=1e-10: vi(m, tol, policy_from="rewards"))
    with pytest.raises(core.ExerciseFailed, match="pair"):
        check_value_iteration.raw(lambda m, tol=1e-10: vi(m, tol)[0])
    with pytest.raises(core.ExerciseFailed, match="policy has shape"):
        check_value_iteration.raw(lambda m, tol=1e-10: (vi(m, tol)[0], np.eye(m.num_actions)[vi(m, tol)[1]]))


# ------------------------------------------------------------------------ in-place evaluation

from rlnotes.exercises.mdp import (EVALUATED_WITH_MAX, IGNORED_M, SYNCHRONOUS,  # noqa: E402
                                   check_in_place_evaluation, check_modified_policy_iteration)


def in_place(mdp, policy, tol=1e-10, *, synchronous=False, rule="contraction", backup="mean"):
    P, R, gamma = mdp.P, mdp.R, mdp.gamma
    V = np.zeros(mdp.num_states)
    sweeps = 0
    while True:
        sweeps += 1
        old = V.copy()
        change = 0.0
        for s in range(mdp.num_states):
            source = old if synchronous else V
            q = R[s] + gamma * P[s] @ source
            v = (policy[s] * q).sum() if backup == "mean" else q.max()
            change = max(change, abs(v - V[s]))
            V[s] = v
        if rule == "contraction" and gamma * change < tol * (1 - gamma):
            return V, sweeps
        if rule == "naive" and change < tol:
            return V, sweeps


def test_in_place_check_accepts_correct_and_rejects_typical_mistakes():
    assert check_in_place_evaluation(in_place) is None
    with pytest.raises(core.ExerciseFailed) as err:
        check_in_place_evaluation.raw(lambda m, p, tol=1e-10: in_place(m, p, tol, synchronous=True))
    assert err.value.hint == SYNCHRONOUS
    with pytest.raises(core.ExerciseFailed) as err:
        check_in_place_evaluation.raw(lambda m, p, tol=1e-10: in_place(m, p, tol, rule="naive"))
    assert err.value.hint == STOPPED_EARLY
    with pytest.raises(core.ExerciseFailed) as err:
        check_in_place_evaluation.raw(lambda m, p, tol=1e-10: in_place(m, p, tol, backup="max"))
    assert err.value.hint == USED_MAX
    with pytest.raises(core.ExerciseFailed, match="pair"):
        check_in_place_evaluation.raw(lambda m, p, tol=1e-10: in_place(m, p, tol)[0])
    with pytest.raises(core.ExerciseFailed, match="rlnotes"):
        from rlnotes.mdp import in_place_policy_evaluation
        check_in_place_evaluation.raw(lambda m, p, tol=1e-10: in_place_policy_evaluation(m, p, tol))


# ------------------------------------------------------------------------ modified policy iteration

def mpi(mdp, m, tol=1e-10, *, ignore_m=False, use_max=False, rule="contraction"):
    P, R, gamma = mdp.P, mdp.R, mdp.gamma
    S = mdp.num_states
    V = np.zeros(S)
    k = 0
    while True:
        Q = R + gamma * P @ V
        pi = Q.argmax(axis=1)
        TV = Q.max(axis=1)
        change = np.abs(TV - V).max()
        if (rule == "contraction" and gamma * change < tol * (1 - gamma)) or \
                (rule == "naive" and change < tol):
            return TV, (R + gamma * P @ TV).argmax(axis=1), k
        k += 1
        V = TV
        for _ in range(0 if ignore_m else m - 1):
            if use_max:
                V = (R + gamma * P @ V).max(axis=1)
            else:
                V = R[np.arange(S), pi] + gamma * P[np.arange(S), pi] @ V


def test_modified_policy_iteration_check():
    assert check_modified_policy_iteration(mpi) is None
    for kwargs, hint in [(dict(ignore_m=True), IGNORED_M), (dict(use_max=True), EVALUATED_WITH_MAX),
                         (dict(rule="naive"), STOPPED_EARLY)]:
        with pytest.raises(core.ExerciseFailed) as err:
            check_modified_policy_iteration.raw(lambda mdp, m, tol=1e-10: mpi(mdp, m, tol, **kwargs))
        assert err.value.hint == hint, kwargs
    with pytest.raises(core.ExerciseFailed, match="iterations"):
        check_modified_policy_iteration.raw(lambda mdp, m, tol=1e-10: mpi(mdp, m, tol)[:2])
