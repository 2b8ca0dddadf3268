"""The checks of the TD chapter's exercises: a correct solution passes, typical mistakes fail with
the hint that names them."""

import numpy as np
import pytest

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
    # seed error 2: Q-learning as an assignment, without a learning rate
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
