"""Why a CartPole run fails to hold three evaluations in a row: how its greedy episodes end.

    .venv/bin/python benchmarks/onpolicy_failures.py ppo 202
    .venv/bin/python benchmarks/onpolicy_failures.py a2c 209 '{"normalize_advantages": false}'

Trains ``rlnotes.<algo>.train`` for 50,000 steps (the race's budget) with the seed and changes
given, and at 30,000, 40,000 and 48,000 steps plays 10 greedy episodes (reset seeds
10000 + seed + i) and prints, for each, how it ended and its length: ``x`` (the cart left the
track, |x| > 2.4), ``angle`` (the pole fell) or ``trunc`` (the 500-step limit). Used to read
the runs of ``onpolicy_sweep.py`` that never held (benchmarks/README.md).
"""

from __future__ import annotations

import importlib
import json
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

CHECKPOINTS = (30_000, 40_000, 48_000)


def how_episodes_end(policy, seed: int, episodes: int = 10) -> list[tuple[str, int]]:
    env = gym.make("CartPole-v1")
    ends = []
    for i in range(episodes):
        obs, _ = env.reset(seed=10_000 + seed + i)
        n = 0
        while True:
            action = policy(obs[None].astype(np.float32))[0]
            obs, _, terminated, truncated, _ = env.step(int(action))
            n += 1
            if terminated or truncated:
                kind = "trunc" if truncated else ("x" if abs(obs[0]) > 2.4 else "angle")
                ends.append((kind, n))
                break
    env.close()
    return ends


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    algo, seed = argv[0], int(argv[1])
    changes = json.loads(argv[2]) if len(argv) == 3 else {}
    module = importlib.import_module(f"rlnotes.{algo}")
    seen: dict = {}

    def callback(steps, policy):
        for t in CHECKPOINTS:
            if steps >= t and t not in seen:
                seen[t] = how_episodes_end(policy, seed)
        return False

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    module.train("CartPole-v1", 50_000, seed=seed, callback=callback, **changes)
    for t, ends in seen.items():
        print(algo, seed, changes or "defaults", t, ends)
    return 0


if __name__ == "__main__":
    sys.exit(main())
