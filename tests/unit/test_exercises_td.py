"""The checks of the TD chapter's exercises: a correct solution passes, typical mistakes fail with
the hint that names them."""

import numpy as np
import pytest

from rlnotes.exercises import core

from rlnotes.exercises import CHECKS, ExerciseFailed
from rlnotes.exercises.td import (NO_ALPHA, NO_DONE_MASK, NO_GAMMA, USED_MAX, WRONG_SIGN,
                                  check_q_learning_update, check_sarsa_update, check_td0_update)


def run(check, solution, **kwargs):
    check.raw(solution, **kwargs)


def fails_with(check, solution, hint, **kwargs):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution, **kwargs)
    assert err.value.hint == hint, err.value.hint
    return err.value


def test_checks_are_registered():
    for name in ("check_td0_update", "check_sarsa_update", "check_q_learning_update"):
        assert name in CHECKS


# ---- TD(0) ---------------------------------------------------------------------------------

def td0_ok(V, s, r, s_next, terminated, alpha, gamma):
    V[s] += alpha * (r + gamma * (1 - terminated) * V[s_next] - V[s])
    return V


def test_td0_correct_passes(capsys):
    assert check_td0_update(td0_ok) is None
    assert "PASSED check_td0_update" in capsys.readouterr().out


def test_td0_correct_returning_a_copy_passes():
    def td0_copy(V, s, r, s_next, terminated, alpha, gamma):
        V = V.copy()
        target = r if terminated else r + gamma * V[s_next]
        V[s] = V[s] + alpha * (target - V[s])
        return V
    run(check_td0_update, td0_copy)


@pytest.mark.parametrize("wrong,hint", [
    (lambda V, s, r, s2, d, alpha, g: _set(V, s, r + g * (1 - d) * V[s2]), NO_ALPHA),
    (lambda V, s, r, s2, d, alpha, g: _set(V, s, V[s] + alpha * (r + g * V[s2] - V[s])), NO_DONE_MASK),
    (lambda V, s, r, s2, d, alpha, g: _set(V, s, V[s] - alpha * (r + g * (1 - d) * V[s2] - V[s])), WRONG_SIGN),
    (lambda V, s, r, s2, d, alpha, g: _set(V, s, V[s] + alpha * (r + (1 - d) * V[s2] - V[s])), NO_GAMMA),
])
def test_td0_typical_mistakes(wrong, hint):
    fails_with(check_td0_update, wrong, hint)


def _set(table, index, value):
    table[index] = value
    return table


def test_td0_other_mistakes():
    def updates_next_state(V, s, r, s2, d, alpha, g):
        V[s2] += alpha * (r + g * (1 - d) * V[s2] - V[s])
        return V
    err = fails_with(check_td0_update, updates_next_state, "TD(0) updates only the state just left, s.")
    assert "other than V[s]" in err.message
    with pytest.raises(ExerciseFailed, match="shape"):
        check_td0_update.raw(lambda V, s, r, s2, d, alpha, g: V[s])


def test_not_implemented_is_reported(capsys):
    def stub(*args):
        raise NotImplementedError
    with pytest.raises(NotImplementedError):
        check_td0_update(stub)
    assert "NOT DONE" in capsys.readouterr().out


# ---- SARSA ---------------------------------------------------------------------------------

def sarsa_ok(Q, s, a, r, s_next, a_next, terminated, alpha, gamma):
    Q[s, a] += alpha * (r + gamma * (1 - terminated) * Q[s_next, a_next] - Q[s, a])
    return Q


def test_sarsa_correct_passes():
    run(check_sarsa_update, sarsa_ok)


@pytest.mark.parametrize("wrong,hint", [
    (lambda Q, s, a, r, s2, a2, d, al, g: _set(Q, (s, a), Q[s, a] + al * (r + g * (1 - d) * Q[s2].max() - Q[s, a])), USED_MAX),
    (lambda Q, s, a, r, s2, a2, d, al, g: _set(Q, (s, a), r + g * (1 - d) * Q[s2, a2]), NO_ALPHA),
    (lambda Q, s, a, r, s2, a2, d, al, g: _set(Q, (s, a), Q[s, a] + al * (r + g * Q[s2, a2] - Q[s, a])), NO_DONE_MASK),
    (lambda Q, s, a, r, s2, a2, d, al, g: _set(Q, (s, a), Q[s, a] + al * (Q[s, a] - r - g * (1 - d) * Q[s2, a2])), WRONG_SIGN),
    (lambda Q, s, a, r, s2, a2, d, al, g: _set(Q, (s, a), Q[s, a] + al * (r + (1 - d) * Q[s2, a2] - Q[s, a])), NO_GAMMA),
])
def test_sarsa_typical_mistakes(wrong, hint):
    fails_with(check_sarsa_update, wrong, hint)


# ---- Q-learning ----------------------------------------------------------------------------

def q_ok(Q, s, a, r, s_next, terminated, alpha, gamma):
    Q[s, a] += alpha * (r + gamma * (not terminated) * Q[s_next].max() - Q[s, a])
    return Q


def test_q_learning_correct_passes():
    run(check_q_learning_update, q_ok)


@pytest.mark.parametrize("wrong,hint", [
    # a common mistake: Q-learning as an assignment, without a learning rate
    (lambda Q, s, a, r, s2, d, al, g: _set(Q, (s, a), r + g * (1 - d) * Q[s2].max()), NO_ALPHA),
    (lambda Q, s, a, r, s2, d, al, g: _set(Q, (s, a), Q[s, a] + al * (r + g * Q[s2].max() - Q[s, a])), NO_DONE_MASK),
    (lambda Q, s, a, r, s2, d, al, g: _set(Q, (s, a), Q[s, a] - al * (r + g * (1 - d) * Q[s2].max() - Q[s, a])), WRONG_SIGN),
    (lambda Q, s, a, r, s2, d, al, g: _set(Q, (s, a), Q[s, a] + al * (r + (1 - d) * Q[s2].max() - Q[s, a])), NO_GAMMA),
])
def test_q_learning_typical_mistakes(wrong, hint):
    fails_with(check_q_learning_update, wrong, hint)


def test_q_learning_that_does_not_learn_fails_the_learning_part(monkeypatch):
    """An update that is right on the random transitions but never learns from the goal's
    reward (it ignores rewards on the lake's 16 states) fails the learning threshold."""
    def q_blind(Q, s, a, r, s_next, terminated, alpha, gamma):
        if Q.shape == (16, 4):
            r = 0.0
        return q_ok(Q, s, a, r, s_next, terminated, alpha, gamma)
    err = fails_with(check_q_learning_update, q_blind,
                     "Check the update on a terminal transition (reward 1, no bootstrap) and that "
                     "values flow back: the target uses max over the next state's actions.",
                     seeds=(0,), num_episodes=200)
    assert "probability 0.000" in err.message


def test_q_learning_wrong_shape():
    with pytest.raises(ExerciseFailed, match="shape"):
        check_q_learning_update.raw(lambda Q, s, a, r, s2, d, al, g: Q[s])


# ------------------------------------------------------------------------ batches of episodes

from rlnotes.exercises.td import (CE_IS_MC, CE_NO_GAMMA, IS_FROM_NEXT, IS_INVERTED,  # noqa: E402
                                  IS_NONE, IS_ORDINARY, certainty_equivalence,
                                  check_certainty_equivalence, check_weighted_importance_sampling,
                                  random_episodes)


def ce(episodes, num_states, gamma, *, drop_gamma=False):
    n = np.zeros(num_states)
    r_sum = np.zeros(num_states)
    C = np.zeros((num_states, num_states))
    for episode in episodes:
        for s, a, r, s2, terminated in episode:
            n[s] += 1
            r_sum[s] += r
            if not terminated:
                C[s, s2] += 1
    g = 1.0 if drop_gamma else gamma
    V = np.zeros(num_states)
    seen = n > 0
    V[seen] = np.linalg.solve(np.eye(seen.sum()) - g * C[seen][:, seen] / n[seen, None],
                              r_sum[seen] / n[seen])
    return V


def batch_mc(episodes, num_states, gamma):
    total, count = np.zeros(num_states), np.zeros(num_states)
    for episode in episodes:
        G = 0.0
        for s, a, r, s2, terminated in reversed(episode):
            G = r + gamma * G
            total[s] += G
            count[s] += 1
    return np.divide(total, count, out=np.zeros(num_states), where=count > 0)


def test_certainty_equivalence_check():
    assert check_certainty_equivalence(ce) is None
    for wrong, hint in [(batch_mc, CE_IS_MC),
                        (lambda e, S, g: ce(e, S, g, drop_gamma=True), CE_NO_GAMMA)]:
        with pytest.raises(core.ExerciseFailed) as err:
            check_certainty_equivalence.raw(wrong)
        assert err.value.hint == hint
    with pytest.raises(core.ExerciseFailed, match="shape"):
        check_certainty_equivalence.raw(lambda e, S, g: np.zeros(S + 1))


def test_certainty_equivalence_is_the_limit_of_batch_td():
    """The reference answer is the fixed point of batch TD(0) on the same data."""
    episodes, _ = random_episodes(20, seed=3)
    V = certainty_equivalence(episodes, 5, 0.9)
    for _ in range(2000):
        inc = np.zeros(5)
        for episode in episodes:
            for s, a, r, s2, terminated in episode:
                inc[s] += r + 0.9 * (0.0 if terminated else V[s2]) - V[s]
    assert np.abs(inc).max() < 1e-9


def off_policy_mc(episodes, target, behaviour, gamma, *, mode="weighted"):
    S = target.shape[0]
    num, den = np.zeros(S), np.zeros(S)
    for episode in episodes:
        G, rho = 0.0, 1.0
        for s, a, r, s2, terminated in reversed(episode):
            G = r + gamma * G
            ratio = target[s, a] / behaviour[s, a]
            if mode == "late":
                num[s] += rho * G
                den[s] += rho
                rho *= ratio
                continue
            rho *= {"weighted": ratio, "ordinary": ratio, "inverted": 1 / ratio, "none": 1.0}[mode]
            num[s] += rho * G
            den[s] += 1.0 if mode == "ordinary" else rho
    return np.divide(num, den, out=np.zeros(S), where=den > 0)


def test_weighted_importance_sampling_check():
    assert check_weighted_importance_sampling(off_policy_mc) is None
    for mode, hint in [("ordinary", IS_ORDINARY), ("late", IS_FROM_NEXT), ("inverted", IS_INVERTED),
                       ("none", IS_NONE)]:
        with pytest.raises(core.ExerciseFailed) as err:
            check_weighted_importance_sampling.raw(
                lambda e, t, b, g, mode=mode: off_policy_mc(e, t, b, g, mode=mode))
        assert err.value.hint == hint, mode
