"""Benchmark: batched GAE (rlnotes.returns.gae) against a naive double loop.

Run from the repository root:

    .venv/bin/python benchmarks/bench_gae.py            # T=2048, N=64, float32
    .venv/bin/python benchmarks/bench_gae.py --T 256 --N 8 --repeats 3

It times ``gae`` on numpy arrays and on torch CPU tensors (float32, shape (T, N)) against the
straightforward double loop over environments and time steps on the same numpy arrays, checks
that all three agree, prints a table, and exits with status 1 when either batched version is
less than ``--min-speedup`` (default 20) times faster than the loop. Timings are the best of
``--repeats`` runs, so that other load on the machine disturbs them as little as possible.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's rlnotes
from rlnotes.returns import gae  # noqa: E402


def naive_gae(rewards, values, dones, last_value, gamma, lam):
    """GAE as a double loop: for each environment n, backwards over time t (the reference)."""
    T, N = rewards.shape
    adv = np.zeros_like(rewards)
    for n in range(N):
        next_adv = 0.0
        next_value = last_value[n]
        for t in reversed(range(T)):
            not_done = 1.0 - dones[t, n]
            delta = rewards[t, n] + gamma * not_done * next_value - values[t, n]
            next_adv = delta + gamma * lam * not_done * next_adv
            adv[t, n] = next_adv
            next_value = values[t, n]
    return adv, adv + values


def time_loop_gae(rewards, values, dones, last_value, gamma, lam):
    """The middle ground: one Python step per time step, vectorised over the N environments
    (works for numpy arrays and torch tensors alike). Not gated, shown for comparison."""
    adv = rewards * 0
    next_adv = last_value * 0
    next_value = last_value
    for t in reversed(range(rewards.shape[0])):
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * not_done * next_value - values[t]
        next_adv = delta + gamma * lam * not_done * next_adv
        adv[t] = next_adv
        next_value = values[t]
    return adv, adv + values


def make_inputs(T, N, seed=0, dtype=np.float32, done_prob=0.01):
    rng = np.random.default_rng(seed)
    rewards = rng.standard_normal((T, N)).astype(dtype)
    values = rng.standard_normal((T, N)).astype(dtype)
    dones = (rng.random((T, N)) < done_prob).astype(dtype)
    last_value = rng.standard_normal(N).astype(dtype)
    return rewards, values, dones, last_value


def best_time(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def run(T=2048, N=64, repeats=20, naive_repeats=3, gamma=0.99, lam=0.95, seed=0):
    """Time the three versions and check they agree; return a dict of results (seconds)."""
    r, v, d, lv = make_inputs(T, N, seed)
    rt, vt, dt, lvt = (torch.from_numpy(x) for x in (r, v, d, lv))
    gae(r, v, d, lv, gamma, lam), gae(rt, vt, dt, lvt, gamma, lam)  # warm-up
    t_naive, (adv_loop, ret_loop) = best_time(lambda: naive_gae(r, v, d, lv, gamma, lam), naive_repeats)
    t_numpy, (adv_np, ret_np) = best_time(lambda: gae(r, v, d, lv, gamma, lam), repeats)
    t_torch, (adv_t, ret_t) = best_time(lambda: gae(rt, vt, dt, lvt, gamma, lam), repeats)
    t_tl_np, (adv_tl_np, _) = best_time(lambda: time_loop_gae(r, v, d, lv, gamma, lam), max(1, repeats // 4))
    t_tl_t, (adv_tl_t, _) = best_time(lambda: time_loop_gae(rt, vt, dt, lvt, gamma, lam), max(1, repeats // 4))
    for name, adv in (("time-loop numpy", adv_tl_np), ("time-loop torch", adv_tl_t.numpy())):
        if not np.allclose(adv, adv_loop, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name} gae disagrees with the double loop")
    assert adv_np.dtype == np.float32 and adv_t.dtype == torch.float32
    for name, adv, ret in (("numpy", adv_np, ret_np), ("torch", adv_t.numpy(), ret_t.numpy())):
        err = float(np.max(np.abs(adv - adv_loop))) if adv.size else 0.0
        if not (np.allclose(adv, adv_loop, rtol=1e-4, atol=1e-4) and np.allclose(ret, ret_loop, rtol=1e-4, atol=1e-4)):
            raise AssertionError(f"{name} gae disagrees with the double loop (max |diff| {err:.3g})")
    return {
        "T": T, "N": N, "naive": t_naive, "numpy": t_numpy, "torch": t_torch,
        "time_loop_numpy": t_tl_np, "time_loop_torch": t_tl_t,
        "speedup_numpy": t_naive / t_numpy, "speedup_torch": t_naive / t_torch,
        "max_abs_diff": max(float(np.max(np.abs(adv_np - adv_loop))),
                            float(np.max(np.abs(adv_t.numpy() - adv_loop)))),
    }


def format_table(res):
    rows = [
        ("naive double loop (numpy)", res["naive"], 1.0),
        ("rlnotes.returns.gae, numpy", res["numpy"], res["speedup_numpy"]),
        ("rlnotes.returns.gae, torch (CPU)", res["torch"], res["speedup_torch"]),
        ("loop over t only, numpy", res["time_loop_numpy"], res["naive"] / res["time_loop_numpy"]),
        ("loop over t only, torch (CPU)", res["time_loop_torch"], res["naive"] / res["time_loop_torch"]),
    ]
    lines = [
        f"gae on (T={res['T']}, N={res['N']}) float32, best of repeats; torch threads {torch.get_num_threads()}",
        f"{'version':34s} {'time (ms)':>10s} {'speedup':>9s}",
    ]
    lines += [f"{name:34s} {t * 1e3:10.2f} {s:8.1f}x" for name, t, s in rows]
    lines.append("(the speedup gate applies to the two rlnotes rows; the last two are for comparison)")
    lines.append(f"max |advantage difference| vs the loop: {res['max_abs_diff']:.2e}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, default=2048)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--naive-repeats", type=int, default=3)
    parser.add_argument("--min-speedup", type=float, default=20.0)
    args = parser.parse_args(argv)
    res = run(args.T, args.N, args.repeats, args.naive_repeats)
    print(format_table(res))
    slow = [k for k in ("numpy", "torch") if res[f"speedup_{k}"] < args.min_speedup]
    if slow:
        print(f"FAIL: {', '.join(slow)} below the required {args.min_speedup:g}x speedup")
        return 1
    print(f"OK: both batched versions are at least {args.min_speedup:g}x faster than the loop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
