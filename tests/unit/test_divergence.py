"""rlnotes.divergence: importance sampling and the KL estimators, against exact values; these
are the chapter's claims in the sections Importance sampling and KL divergence."""

import numpy as np
import pytest

from rlnotes import divergence as dv

MU = np.array([0.4, 0.3, 0.2, 0.1])
F = np.array([1.0, 2.0, 3.0, 4.0])
TILT = np.array([-1.0, -0.5, 0.5, 1.0])


def tilted(p, t):
    q = np.exp(np.log(p) + t * TILT)
    return q / q.sum()


def test_importance_sampling_unbiased_and_variance_grows_with_kl():
    rng = np.random.default_rng(0)
    stats = [dv.is_estimate_stats(tilted(MU, t), MU, F, 100, 2000, rng) for t in (0, 1, 2, 3)]
    for s in stats:
        assert abs(s["mean"] - s["true"]) < 4 * np.sqrt(s["exact_var"] / 2000) + 1e-12
        assert abs(s["var"] - s["exact_var"]) <= 0.15 * s["exact_var"] + 1e-12
    kls = [s["kl"] for s in stats]
    variances = [s["exact_var"] for s in stats]
    assert np.all(np.diff(kls) > 0) and np.all(np.diff(variances) > 0)
    assert variances[-1] > 50 * variances[0]


def test_importance_weights_and_bad_inputs():
    assert np.allclose(dv.importance_weights(np.log([0.5]), np.log([0.25])), [2.0])
    with pytest.raises(ValueError, match="logp_behaviour"):
        dv.importance_weights([0.0, 0.0], [0.0])
    with pytest.raises(ValueError, match="mu"):
        dv.is_estimate_stats(MU, np.array([0.5, 0.5, 0.0, 0.0]), F, 10, 10,
                             np.random.default_rng(0))
    with pytest.raises(ValueError, match="pi"):
        dv.is_estimate_stats(np.array([0.5, 0.6, 0, 0]), MU, F, 10, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n"):
        dv.is_estimate_stats(MU, MU, F, 0, 10, np.random.default_rng(0))


NEAR = tilted(MU, 0.1)
FAR = np.array([0.05, 0.05, 0.1, 0.8])


def test_kl_estimators_near_and_far():
    near = dv.kl_estimator_stats(MU, NEAR, 200_000, np.random.default_rng(1))
    far = dv.kl_estimator_stats(MU, FAR, 200_000, np.random.default_rng(1))
    for s in (near, far):
        ex = s["exact"]
        assert abs(ex["k1"][0]) < 1e-12 and abs(ex["k3"][0]) < 1e-12  # unbiased
        for name in ("k1", "k2", "k3"):  # sampling agrees with the exact numbers
            assert abs(s[name][0] - ex[name][0]) < 0.02 * max(ex[name][1], 1e-3) + 1e-4
            assert abs(s[name][1] - ex[name][1]) < 0.02 * ex[name][1]
    # near: k3 has a far lower variance than k1, and k2's bias is tiny against the KL
    assert near["exact"]["k3"][1] < near["exact"]["k1"][1] / 10
    assert abs(near["exact"]["k2"][0]) < 0.02 * near["kl"]
    # far: k3 is no longer the lowest-variance estimator, and k2's bias is large
    assert far["exact"]["k3"][1] > far["exact"]["k1"][1]
    assert far["exact"]["k2"][0] > 0.2 * far["kl"]


def test_forward_and_reverse_kl_fits():
    x = np.linspace(-6, 6, 301)
    target = dv.gaussian_mixture(x, [-2.0, 2.0], [0.6, 0.6], [0.5, 0.5])
    assert abs(target.sum() * (x[1] - x[0]) - 1) < 1e-6
    mu_f, sigma_f = dv.fit_gaussian(x, target, "forward")
    mu_r, sigma_r = dv.fit_gaussian(x, target, "reverse")
    assert abs(mu_f) < 0.1 and sigma_f > 1.8  # mass-covering: between the modes, wide
    assert abs(abs(mu_r) - 2.0) < 0.15 and abs(sigma_r - 0.6) < 0.1  # mode-seeking
    with pytest.raises(ValueError, match="direction"):
        dv.fit_gaussian(x, target, "sideways")
    with pytest.raises(ValueError, match="stds"):
        dv.gaussian_mixture(x, [0.0], [0.0], [1.0])
    with pytest.raises(ValueError, match="weights"):
        dv.gaussian_mixture(x, [0.0, 1.0], [1.0, 1.0], [0.7, 0.7])
