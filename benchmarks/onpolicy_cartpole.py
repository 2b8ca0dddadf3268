"""rlnotes' PPO and TRPO on CartPole-v1 under the book's benchmark protocol.

Protocol (the book's, as in benchmarks/peers/harness.py): every 2,048 environment steps
the greedy policy plays 10 episodes on a separate 10-env evaluation env seeded seed + 10000
(``rlnotes.deeprl.Evaluator``); a run stops at the first evaluation whose mean return is >= 475.
Training time excludes evaluation and includes building the model and the environments.

    .venv/bin/python benchmarks/onpolicy_cartpole.py --algo ppo --seeds 0 1 2 3 4 5
    .venv/bin/python benchmarks/onpolicy_cartpole.py --algo trpo --seeds 0 1 2 3 4 5 \
        --set max_kl=0.02

Prints one row per seed and the median [min, max]. The side-by-side race with SB3 is
``make bench-peers`` (benchmarks/peers/); this script is the quick per-algorithm check (rlnotes
only), also used for tuning.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from rlnotes.deeprl import Evaluator  # noqa: E402



def race(algo: str, seed: int, budget: int, threshold: float = 475.0, eval_every: int = 2048,
         **hyper):
    """(steps to first eval >= threshold or None, training seconds to then, evals)."""
    trainer = importlib.import_module(f"rlnotes.{algo}").train
    evaluator = Evaluator("CartPole-v1", seed)
    state = {"next": eval_every, "paused": 0.0, "cpu_paused": 0.0, "hit": None, "evals": []}

    def callback(steps, policy):
        if steps < state["next"]:
            return False
        state["next"] += eval_every
        t0, c0 = time.perf_counter(), time.process_time()
        score = float(evaluator(policy).mean())
        state["paused"] += time.perf_counter() - t0
        state["cpu_paused"] += time.process_time() - c0
        state["evals"].append((steps, score))
        if score >= threshold:
            state["hit"] = steps
            return True
        return False

    start = time.perf_counter()
    cpu0 = time.process_time()
    trainer("CartPole-v1", budget, seed=seed, callback=callback, **hyper)
    wall = time.perf_counter() - start - state["paused"]
    evaluator.close()
    return state["hit"], wall, state["evals"], time.process_time() - cpu0 - state["cpu_paused"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algo", choices=("ppo", "trpo"), default="ppo")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--budget", type=int, default=50_000)
    parser.add_argument("--set", nargs="*", default=[], help="hyperparameters, name=value")
    args = parser.parse_args()
    hyper = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    rows = []
    print(f"{args.algo} {hyper}")
    for seed in args.seeds:
        hit, wall, evals, cpu = race(args.algo, seed, args.budget, **hyper)
        rows.append((hit, wall, cpu))
        print(f"seed {seed}: steps {hit}, train s {wall:.2f} (cpu {cpu:.2f}), evals "
              + " ".join(f"{s:.0f}" for _, s in evals), flush=True)
    steps = np.array([np.inf if h is None else h for h, _, _ in rows])
    walls = np.array([w for _, w, _ in rows])
    cpus = np.array([c for _, _, c in rows])
    print(f"median steps {np.median(steps):,.0f} [{steps.min():,.0f}, {steps.max():,.0f}]"
          f"; median train s {np.median(walls):.2f} "
          f"[{walls.min():.2f}, {walls.max():.2f}]; median "
          f"train CPU s {np.median(cpus):.2f} [{cpus.min():.2f}, {cpus.max():.2f}]")


if __name__ == "__main__":
    main()
