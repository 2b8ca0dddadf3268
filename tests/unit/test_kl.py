"""Tests of rlnotes.kl: the exact categorical KL and the k1/k2/k3 sample estimators."""

import math

import numpy as np
import pytest
import torch

from rlnotes.kl import kl_categorical, kl_k1, kl_k2, kl_k3

ESTIMATORS = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


# --- the exact KL ---------------------------------------------------------------------------


def test_kl_categorical_by_hand():
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    want = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert kl_categorical(np.log(p), np.log(q)) == pytest.approx(want, rel=1e-12)
    # logits are defined up to a constant per distribution
    got = kl_categorical(torch.tensor(np.log(p) + 3.0), torch.tensor(np.log(q) - 1.0))
    assert isinstance(got, torch.Tensor) and float(got) == pytest.approx(want, rel=1e-12)


def test_kl_categorical_properties():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(50, 7, generator=g, dtype=torch.float64), torch.randn(50, 7, generator=g, dtype=torch.float64)
    kl = kl_categorical(a, b)
    assert kl.shape == (50,) and bool((kl > 0).all())
    assert torch.allclose(kl_categorical(a, a), torch.zeros(50, dtype=torch.float64), atol=1e-15)
    assert not torch.allclose(kl, kl_categorical(b, a))  # not symmetric
    np.testing.assert_allclose(kl_categorical(a.numpy(), b.numpy()), kl.numpy(), rtol=1e-12)
    assert kl_categorical(a.float(), b.float()).dtype == torch.float32


def test_kl_categorical_zero_probabilities():
    neg_inf = float("-inf")
    # p puts no mass on the last category: 0 log 0 = 0, and the KL is that of the rest
    kl = kl_categorical(torch.tensor([0.0, 0.0, neg_inf]), torch.tensor([0.0, 1.0, 2.0]))
    q = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0)
    want = 0.5 * math.log(0.5 / q[0]) + 0.5 * math.log(0.5 / q[1])
    assert float(kl) == pytest.approx(want, rel=1e-6)
    # q puts no mass where p has some: infinite
    assert math.isinf(float(kl_categorical(torch.tensor([0.0, 0.0]), torch.tensor([0.0, neg_inf]))))
    # and the gradient stays finite where p has no mass
    logits = torch.tensor([0.0, 0.0, neg_inf], dtype=torch.float64, requires_grad=True)
    kl_categorical(logits, torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)).backward()
    assert bool(torch.isfinite(logits.grad).all())


# --- the estimators: Monte Carlo over samples from pi_theta ---------------------------------


def monte_carlo(logits_p, logits_q, n, seed):
    """Per-sample k1, k2, k3 of n actions drawn from softmax(logits_p)."""
    g = torch.Generator().manual_seed(seed)
    logp_all, logq_all = torch.log_softmax(logits_p, -1), torch.log_softmax(logits_q, -1)
    a = torch.multinomial(logp_all.exp(), n, replacement=True, generator=g)
    logp, ref_logp = logp_all[a], logq_all[a]
    return {k: f(logp, ref_logp) for k, f in ESTIMATORS.items()}


def table(samples, true_kl, title):
    n = next(iter(samples.values())).numel()
    lines = [f"{title}: exact KL(pi_theta || pi_ref) = {true_kl:.5f}, {n} samples from pi_theta",
             f"{'estimator':>9s} {'mean':>9s} {'bias':>9s} {'std err':>9s} {'variance':>9s}"]
    for k, x in samples.items():
        m, v = float(x.mean()), float(x.var())
        lines.append(f"{k:>9s} {m:9.5f} {m - true_kl:+9.5f} {math.sqrt(v / n):9.5f} {v:9.5f}")
    return "\n".join(lines)


# pi_theta close to pi_ref (KL ~ 0.03) and farther from it (KL ~ 0.4): Schulman (2020)'s two regimes
CASES = {"close": 0.25, "far": 0.7}


@pytest.mark.parametrize("case", list(CASES))
def test_k1_k3_unbiased_k2_biased_low_variance(case, record_property):
    g = torch.Generator().manual_seed(1)
    K, n = 12, 200_000
    logits_p = torch.randn(K, generator=g, dtype=torch.float64)
    logits_q = logits_p + CASES[case] * torch.randn(K, generator=g, dtype=torch.float64)
    true_kl = float(kl_categorical(logits_p, logits_q))
    samples = monte_carlo(logits_p, logits_q, n, seed=2)
    report = table(samples, true_kl, f"KL estimators, pi_theta {case} to pi_ref")
    print("\n" + report)
    record_property("kl_estimators_" + case, report)

    stats = {k: (float(x.mean()), float(x.var()), math.sqrt(float(x.var()) / n)) for k, x in samples.items()}
    for k in ("k1", "k3"):  # unbiased: within 4 standard errors of the exact KL
        mean, _, se = stats[k]
        assert abs(mean - true_kl) < 4 * se, f"{k} looks biased\n{report}"
    # k2 is biased: its expectation 0.5 E[(log p - log q)^2] is not the KL ...
    logp_all, logq_all = torch.log_softmax(logits_p, -1), torch.log_softmax(logits_q, -1)
    e_k2 = float((logp_all.exp() * 0.5 * (logp_all - logq_all) ** 2).sum())
    mean2, var2, se2 = stats["k2"]
    assert abs(mean2 - e_k2) < 4 * se2, report  # the sample mean does estimate that expectation
    assert abs(e_k2 - true_kl) > 10 * se2, f"k2's bias should be visible\n{report}"
    # k1 goes negative on single samples, k3 never does
    assert bool((samples["k1"] < 0).any())
    assert bool((samples["k3"] >= 0).all()) and bool((samples["k2"] >= 0).all())
    if case == "close":
        # near pi_ref, k2 pays for its bias with the lowest variance, and k3 is unbiased with a
        # variance well below k1's (Schulman 2020); far away the ordering is not guaranteed
        var1, var3 = stats["k1"][1], stats["k3"][1]
        assert var2 < var3 < 0.5 * var1, f"expected var(k2) < var(k3) < var(k1) / 2\n{report}"


def test_orientation_is_kl_theta_to_ref():
    """The estimators estimate KL(pi_theta || pi_ref) for samples from pi_theta, not the reverse."""
    logits_p = torch.tensor([3.0, 0.0, 0.0, -2.0], dtype=torch.float64)
    logits_q = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    forward, reverse = float(kl_categorical(logits_p, logits_q)), float(kl_categorical(logits_q, logits_p))
    assert abs(forward - reverse) > 0.5
    samples = monte_carlo(logits_p, logits_q, 100_000, seed=3)
    for k in ("k1", "k3"):
        mean = float(samples[k].mean())
        assert abs(mean - forward) < 0.05 < abs(mean - reverse), k
    # the ratio inside k3 is pi_ref / pi_theta: with pi_theta(a) = 1/2, pi_ref(a) = 1/4, rho = 1/2
    assert float(kl_k3(torch.tensor(math.log(0.5)), torch.tensor(math.log(0.25)))) == pytest.approx(
        0.5 - math.log(0.5) - 1, rel=1e-6
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_k3_never_negative(dtype):
    log_rho = torch.cat([
        torch.linspace(-50, 50, 20001, dtype=torch.float64),
        torch.logspace(-12, 0, 5000, dtype=torch.float64),
        -torch.logspace(-12, 0, 5000, dtype=torch.float64),
        torch.randn(50_000, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 1e-3,
    ]).to(dtype)
    logp = torch.randn(log_rho.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64).to(dtype)
    k3 = kl_k3(logp, logp + log_rho)
    assert bool((k3 >= 0).all())
    assert k3.dtype == dtype


def test_estimators_elementwise_values_and_kinds():
    logp = np.log(np.array([0.5, 0.2, 0.9]))
    ref = np.log(np.array([0.25, 0.2, 0.3]))
    d = logp - ref
    np.testing.assert_allclose(kl_k1(logp, ref), d)
    np.testing.assert_allclose(kl_k2(logp, ref), 0.5 * d**2)
    np.testing.assert_allclose(kl_k3(logp, ref), np.exp(-d) + d - 1, rtol=1e-12)
    assert float(kl_k3(np.array(0.3), np.array(0.3))) == 0.0
    for f in ESTIMATORS.values():
        out = f(torch.tensor(logp, dtype=torch.float32), torch.tensor(ref, dtype=torch.float32))
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
        assert isinstance(f(logp, ref), np.ndarray)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimators_gradcheck(name):
    g = torch.Generator().manual_seed(6)
    logp = torch.randn(6, generator=g, dtype=torch.float64, requires_grad=True)
    ref = torch.randn(6, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda lp: ESTIMATORS[name](lp, ref), (logp,))


def test_kl_categorical_gradcheck():
    g = torch.Generator().manual_seed(7)
    a = torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 5, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda a: kl_categorical(a, b), (a,))


# --- bad input ------------------------------------------------------------------------------

X = torch.zeros(3)


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize(
    "args, arg",
    [
        ((X, torch.zeros(4)), "ref_logp"),
        ((torch.zeros(3, dtype=torch.long), X), "logp"),
        ((X, np.zeros(3)), "ref_logp"),
        ((torch.tensor([0.0, float("nan"), 0.0]), X), "logp"),
        ((X, torch.tensor([0.0, float("inf"), 0.0])), "ref_logp"),
        (("logp", X), "logp"),
    ],
)
def test_estimators_bad_input(name, args, arg):
    with pytest.raises(ValueError, match=arg):
        ESTIMATORS[name](*args)


@pytest.mark.parametrize(
    "args, arg",
    [
        ((torch.zeros(2, 3), torch.zeros(2, 4)), "logits_q"),
        ((torch.tensor([0.0, float("inf")]), torch.zeros(2)), "logits_p"),
        ((torch.zeros(2), torch.tensor([float("nan"), 0.0])), "logits_q"),
        ((torch.full((2,), float("-inf")), torch.zeros(2)), "logits_p"),
        ((torch.tensor(1.0), torch.tensor(1.0)), "logits_p"),
        ((torch.zeros(2, dtype=torch.long), torch.zeros(2)), "logits_p"),
    ],
)
def test_kl_categorical_bad_input(args, arg):
    with pytest.raises(ValueError, match=arg):
        kl_categorical(*args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_in_cuda_out():
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    torch.testing.assert_close(kl_categorical(a.cuda(), b.cuda()).cpu(), kl_categorical(a, b))
    for f in ESTIMATORS.values():
        out = f(a.cuda(), b.cuda())
        assert out.device.type == "cuda"
        torch.testing.assert_close(out.cpu(), f(a, b))
    with pytest.raises(ValueError, match="ref_logp"):
        kl_k3(a.cuda(), b)
