"""Tests of Baird's counterexample (rlnotes.approx) and Example 6.7 (rlnotes.max_bias), with the
DQN chapter's claims about them."""

import numpy as np
import pytest

from rlnotes.approx import baird_expected_td, baird_features, baird_initial_weights
from rlnotes.max_bias import maximization_bias_experiment


def _rms_value(history):
    v = history @ baird_features().T
    return np.sqrt((v ** 2).mean(axis=1))


def test_baird_features_and_start():
    X = baird_features()
    assert X.shape == (7, 8) and np.linalg.matrix_rank(X) == 7  # every value function fits
    np.testing.assert_array_equal(X @ baird_initial_weights(), [3] * 6 + [12])


def test_semi_gradient_off_policy_td_diverges_and_its_fixes_converge():
    # the chapter's claims (section The deadly triad), 5,000 expected sweeps
    off = _rms_value(baird_expected_td(5_000))
    on = baird_expected_td(5_000, distribution="on-policy") @ baird_features().T
    lagged = _rms_value(baird_expected_td(5_000, alpha=0.1, target_sync=20))
    short = _rms_value(baird_expected_td(5_000, alpha=0.1, target_sync=5))
    assert off[-1] > 1e6 and np.all(np.diff(off[1000:]) > 0)
    assert abs(on[-1, 6]) < 1.0 and np.all(np.diff(np.abs(on[:, 6])) <= 0)
    assert lagged[-1] < 0.5
    assert short[-1] > 1e6


def test_baird_without_bootstrapping_target_zero_gamma():
    # gamma = 0: the target is the reward, 0, and semi-gradient TD is plain regression
    assert _rms_value(baird_expected_td(3_000, gamma=0.0, alpha=0.1))[-1] < 1e-3


@pytest.mark.parametrize("kwargs, name", [(dict(num_sweeps=-1), "num_sweeps"),
                                          (dict(num_sweeps=3, alpha=0.0), "alpha"),
                                          (dict(num_sweeps=3, gamma=1.1), "gamma"),
                                          (dict(num_sweeps=3, distribution="uniform"), "distribution"),
                                          (dict(num_sweeps=3, target_sync=0), "target_sync")])
def test_baird_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        baird_expected_td(**kwargs)


def test_maximization_bias_example_6_7():
    # the chapter's claims (section The maximisation bias and double DQN)
    left_q, q_q = maximization_bias_experiment(2_000, 300, seed=0)
    left_d, q_d = maximization_bias_experiment(2_000, 300, double=True, seed=0)
    assert left_q.shape == (300,) and q_q.shape == (300,)
    assert abs(left_q[0] - 0.5) < 0.05 and abs(left_d[0] - 0.5) < 0.05  # ties at the start
    assert left_q.max() > 0.9 and left_d.max() < 0.55
    assert left_q[-50:].mean() > left_d[-50:].mean() > 0.05
    assert q_q[:50].max() > 0.05 and q_d[:50].max() < 0.01  # true value of left: -0.1


def test_maximization_bias_is_reproducible():
    a = maximization_bias_experiment(50, 20, seed=3)
    b = maximization_bias_experiment(50, 20, seed=3)
    np.testing.assert_array_equal(a[0], b[0])


@pytest.mark.parametrize("kwargs, name", [(dict(num_runs=0), "num_runs"),
                                          (dict(num_episodes=0), "num_episodes"),
                                          (dict(alpha=0.0), "alpha"),
                                          (dict(epsilon=1.5), "epsilon"),
                                          (dict(double="yes"), "double")])
def test_maximization_bias_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        maximization_bias_experiment(**kwargs)


def test_baird_target_sync_20_diverges_with_a_ten_times_smaller_step():
    # the DQN chapter's exercise on how long the copy must be held: alpha 0.01, copies every 20
    w = baird_expected_td(5_000, alpha=0.01, target_sync=20)
    assert np.sqrt(((w[-1] @ baird_features().T) ** 2).mean()) > 1e4
