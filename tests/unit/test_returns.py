"""Tests of rlnotes.returns: discounted returns and GAE, as identities."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from rlnotes.returns import _sequential_scan, discounted_returns, gae, reverse_scan

ROOT = Path(__file__).resolve().parents[2]


def random_batch(T, N, seed=0, done_prob=0.1, dtype=np.float64):
    rng = np.random.default_rng(seed)
    shape = (T,) if N is None else (T, N)
    rewards = rng.standard_normal(shape).astype(dtype)
    values = rng.standard_normal(shape).astype(dtype)
    dones = (rng.random(shape) < done_prob).astype(dtype)
    last_value = rng.standard_normal(() if N is None else (N,)).astype(dtype)
    return rewards, values, dones, last_value


def to_torch(*xs):
    return tuple(torch.from_numpy(np.asarray(x)) for x in xs)


# --- discounted returns ---------------------------------------------------------------------


def test_discounted_returns_by_hand():
    np.testing.assert_allclose(discounted_returns([1.0, 2.0, 3.0], 0.5), [2.75, 3.5, 3.0])
    # the episode ends after step 1: G_1 = r_1, and step 2 starts a new episode
    np.testing.assert_allclose(discounted_returns([1.0, 2.0, 3.0], 0.5, dones=[0, 1, 0]), [2.0, 2.0, 3.0])
    # gamma = 1 and no dones: the reversed cumulative sum
    r = np.arange(5.0)
    np.testing.assert_allclose(discounted_returns(r, 1.0), np.cumsum(r[::-1])[::-1])
    # gamma = 0: the immediate reward
    np.testing.assert_array_equal(discounted_returns(r, 0.0), r)


def test_discounted_returns_satisfies_its_recursion():
    rewards, _, dones, _ = random_batch(300, 5, seed=1)
    G = discounted_returns(rewards, 0.97, dones)
    np.testing.assert_allclose(G[:-1], rewards[:-1] + 0.97 * (1 - dones[:-1]) * G[1:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(G[-1], rewards[-1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_discounted_returns_kind_and_dtype(dtype):
    rewards, _, dones, _ = random_batch(50, 3, seed=2)
    G_np = discounted_returns(rewards.astype(np.float32 if dtype == torch.float32 else np.float64), 0.9, dones)
    G_t = discounted_returns(torch.from_numpy(rewards).to(dtype), 0.9, torch.from_numpy(dones).bool())
    assert isinstance(G_np, np.ndarray) and isinstance(G_t, torch.Tensor)
    assert G_t.dtype == dtype and G_np.dtype == (np.float32 if dtype == torch.float32 else np.float64)
    np.testing.assert_allclose(G_t.numpy(), G_np, rtol=1e-6, atol=1e-6)
    # integer rewards are promoted
    assert discounted_returns(np.array([1, 2, 3]), 0.5).dtype == np.float64
    assert discounted_returns(torch.tensor([1, 2, 3]), 0.5).dtype == torch.get_default_dtype()


# --- GAE identities -------------------------------------------------------------------------


@pytest.mark.parametrize("N", [None, 4])
def test_gae_lambda_one_is_discounted_return_minus_value(N):
    rewards, values, dones, last_value = random_batch(200, N, seed=3)
    gamma = 0.95
    adv, ret = gae(rewards, values, dones, last_value, gamma, 1.0)
    # the bootstrapped return: last_value is one more reward after the last step, cut by dones
    aug_r = np.concatenate([rewards, np.asarray(last_value)[None]])
    aug_d = np.concatenate([dones, np.zeros_like(dones[:1])])
    G = discounted_returns(aug_r, gamma, aug_d)[:-1]
    np.testing.assert_allclose(adv, G - values, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ret, G, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("N", [None, 4])
def test_gae_lambda_zero_is_td_error(N):
    rewards, values, dones, last_value = random_batch(100, N, seed=4)
    gamma = 0.9
    adv, ret = gae(rewards, values, dones, last_value, gamma, 0.0)
    next_values = np.concatenate([values[1:], np.asarray(last_value)[None]])
    delta = rewards + gamma * (1 - dones) * next_values - values
    np.testing.assert_allclose(adv, delta, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ret, adv + values, rtol=1e-12, atol=1e-12)


def test_gae_satisfies_its_recursion():
    rewards, values, dones, last_value = random_batch(500, 6, seed=5)
    gamma, lam = 0.99, 0.95
    adv, _ = gae(rewards, values, dones, last_value, gamma, lam)
    adv0, _ = gae(rewards, values, dones, last_value, gamma, 0.0)  # delta
    np.testing.assert_allclose(
        adv[:-1], adv0[:-1] + gamma * lam * (1 - dones[:-1]) * adv[1:], rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(adv[-1], adv0[-1])


def test_done_stops_bootstrap_and_credit():
    T, N, t0 = 40, 3, 17
    rewards, values, dones, last_value = random_batch(T, N, seed=6, done_prob=0.0)
    dones[t0] = 1  # every environment's episode ends at step t0
    adv, ret = gae(rewards, values, dones, last_value, 0.99, 0.9)
    # no bootstrap from the next episode's first state: A_t0 = r_t0 - V(s_t0)
    np.testing.assert_allclose(adv[t0], rewards[t0] - values[t0], rtol=1e-12)
    np.testing.assert_allclose(ret[t0], rewards[t0], rtol=1e-12)
    # nothing after the boundary changes any advantage up to it
    r2, v2 = rewards.copy(), values.copy()
    r2[t0 + 1:] += 100.0
    v2[t0 + 1:] -= 50.0
    adv2, _ = gae(r2, v2, dones, last_value + 7.0, 0.99, 0.9)
    np.testing.assert_array_equal(adv2[: t0 + 1], adv[: t0 + 1])
    assert not np.allclose(adv2[t0 + 1:], adv[t0 + 1:])
    # and an episode that is not over keeps bootstrapping: without the done, A_t0 changes
    adv3, _ = gae(rewards, values, np.zeros_like(dones), last_value, 0.99, 0.9)
    assert not np.allclose(adv3[t0], adv[t0])


def test_last_value_ignored_after_final_done():
    rewards, values, dones, last_value = random_batch(30, 4, seed=7)
    dones[-1] = 1
    a1, _ = gae(rewards, values, dones, last_value, 0.99, 0.95)
    a2, _ = gae(rewards, values, dones, last_value + 1e3, 0.99, 0.95)
    np.testing.assert_array_equal(a1, a2)


@pytest.mark.parametrize("T", [1, 2, 7, 64, 333])
def test_batch_equals_separate_runs(T):
    N = 5
    rewards, values, dones, last_value = random_batch(T, N, seed=8)
    adv, ret = gae(rewards, values, dones, last_value, 0.98, 0.9)
    for n in range(N):
        a_n, r_n = gae(rewards[:, n], values[:, n], dones[:, n], last_value[n], 0.98, 0.9)
        np.testing.assert_allclose(adv[:, n], a_n, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(ret[:, n], r_n, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_and_torch_agree(dtype):
    rewards, values, dones, last_value = random_batch(257, 8, seed=9, dtype=dtype)
    adv_np, ret_np = gae(rewards, values, dones, last_value, 0.99, 0.95)
    adv_t, ret_t = gae(*to_torch(rewards, values, dones, last_value), 0.99, 0.95)
    assert isinstance(adv_np, np.ndarray) and adv_np.dtype == dtype
    assert isinstance(adv_t, torch.Tensor) and adv_t.dtype == torch.from_numpy(rewards).dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(adv_t.numpy(), adv_np, rtol=tol, atol=tol)
    np.testing.assert_allclose(ret_t.numpy(), ret_np, rtol=tol, atol=tol)


def test_bool_dones_scalar_last_value_and_lists():
    rewards, values, dones, last_value = random_batch(20, 3, seed=10)
    a_float, _ = gae(rewards, values, dones, last_value, 0.9, 0.8)
    a_bool, _ = gae(rewards, values, dones.astype(bool), last_value, 0.9, 0.8)
    np.testing.assert_array_equal(a_float, a_bool)
    # a scalar last value is shared by the environments
    a_s, _ = gae(rewards, values, dones, 0.5, 0.9, 0.8)
    a_v, _ = gae(rewards, values, dones, np.full(3, 0.5), 0.9, 0.8)
    np.testing.assert_array_equal(a_s, a_v)
    # lists behave like float64 arrays
    a_l, r_l = gae(rewards[:, 0].tolist(), values[:, 0].tolist(), dones[:, 0].tolist(), float(last_value[0]), 0.9, 0.8)
    assert isinstance(a_l, np.ndarray) and a_l.dtype == np.float64
    np.testing.assert_allclose(a_l, a_float[:, 0], rtol=1e-13)


def test_gae_is_differentiable_in_values():
    rewards, values, dones, last_value = random_batch(12, 2, seed=11)
    r, d = to_torch(rewards, dones)
    v = torch.from_numpy(values).requires_grad_()
    lv = torch.from_numpy(last_value).requires_grad_()
    assert torch.autograd.gradcheck(lambda v, lv: gae(r, v, d, lv, 0.9, 0.7)[0], (v, lv))


@pytest.mark.parametrize("T", list(range(1, 40)) + [100, 2048])
def test_chunked_scan_equals_sequential_scan(T):
    rng = np.random.default_rng(T)
    x = rng.standard_normal((T, 3))
    c = rng.random((T, 3)) * (rng.random((T, 3)) > 0.1)
    np.testing.assert_allclose(reverse_scan(x, c), _sequential_scan(x, c), rtol=1e-12, atol=1e-12)
    xt, ct = torch.from_numpy(x), torch.from_numpy(c)
    np.testing.assert_allclose(reverse_scan(xt, ct).numpy(), _sequential_scan(x, c), rtol=1e-12, atol=1e-12)


def test_empty_trajectory():
    assert discounted_returns(np.zeros(0), 0.9).shape == (0,)
    adv, ret = gae(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(2), 0.9, 0.9)
    assert adv.shape == ret.shape == (0, 2)


# --- bad input ------------------------------------------------------------------------------

R = np.ones((4, 2))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(rewards=R, gamma=1.5), "gamma"),
        (dict(rewards=R, gamma=-0.1), "gamma"),
        (dict(rewards=R, gamma=float("nan")), "gamma"),
        (dict(rewards=np.ones((2, 2, 2)), gamma=0.9), "rewards"),
        (dict(rewards=np.array([1.0, np.nan]), gamma=0.9), "rewards"),
        (dict(rewards="abc", gamma=0.9), "rewards"),
        (dict(rewards=R, gamma=0.9, dones=np.ones(4)), "dones"),
        (dict(rewards=R, gamma=0.9, dones=np.full((4, 2), 2.0)), "dones"),
    ],
)
def test_discounted_returns_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        discounted_returns(**kwargs)


GOOD = dict(rewards=R, values=R, dones=np.zeros((4, 2)), last_value=np.zeros(2), gamma=0.9, lam=0.95)


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(values=np.ones((4, 3))), "values"),
        (dict(values=torch.ones(4, 2)), "values"),
        (dict(values=np.full((4, 2), np.inf)), "values"),
        (dict(last_value=np.zeros(3)), "last_value"),
        (dict(last_value=np.zeros((4, 2))), "last_value"),
        (dict(lam=1.2), "lam"),
        (dict(lam=-0.5), "lam"),
        (dict(gamma="0.9"), "gamma"),
        (dict(dones=np.full((4, 2), 0.5)), "dones"),
        (dict(rewards=np.ones((4, 2, 1))), "rewards"),
    ],
)
def test_gae_bad_input(change, name):
    with pytest.raises(ValueError, match=name):
        gae(**{**GOOD, **change})


# --- the benchmark's comparison, small and untimed ------------------------------------------


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_gae", ROOT / "benchmarks" / "bench_gae.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_comparison_small():
    bench = load_bench()
    res = bench.run(T=70, N=3, repeats=1, naive_repeats=1)  # raises if the versions disagree
    assert res["max_abs_diff"] < 1e-4
    assert bench.main(["--T", "33", "--N", "2", "--repeats", "1", "--naive-repeats", "1", "--min-speedup", "0"]) == 0
    # the loop is an independent reference: in float64 it agrees to rounding
    rewards, values, dones, last_value = random_batch(90, 4, seed=12)
    adv_loop, ret_loop = bench.naive_gae(rewards, values, dones, last_value, 0.97, 0.9)
    adv, ret = gae(rewards, values, dones, last_value, 0.97, 0.9)
    np.testing.assert_allclose(adv, adv_loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ret, ret_loop, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "args, name",
    [
        ((np.ones((3, 2)), np.ones((3, 3))), "c"),
        ((np.ones((3, 2)), torch.ones(3, 2)), "c"),
        ((np.ones((3, 2), dtype=int), np.ones((3, 2))), "x"),
        ((np.array(1.0), np.array(1.0)), "x"),
        ((np.ones(3), np.array([1.0, np.nan, 1.0])), "c"),
        (("x", np.ones(3)), "x"),
    ],
)
def test_reverse_scan_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        reverse_scan(*args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_in_cuda_out():
    rewards, values, dones, last_value = random_batch(300, 16, seed=13, dtype=np.float32)
    cpu = gae(*to_torch(rewards, values, dones, last_value), 0.99, 0.95)
    cuda = gae(*(x.cuda() for x in to_torch(rewards, values, dones, last_value)), 0.99, 0.95)
    for a, b in zip(cpu, cuda):
        assert b.device.type == "cuda" and b.dtype == torch.float32
        torch.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=1e-5)
    G = discounted_returns(torch.from_numpy(rewards).cuda(), 0.9, torch.from_numpy(dones).cuda().bool())
    assert G.device.type == "cuda"
    with pytest.raises(ValueError, match="values"):
        gae(torch.from_numpy(rewards).cuda(), torch.from_numpy(values), torch.from_numpy(dones).cuda(),
            torch.from_numpy(last_value).cuda(), 0.99, 0.95)
