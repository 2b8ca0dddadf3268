"""The local PPO sweep behind the defaults of ``rlnotes.ppo.train`` (see benchmarks/README.md).

Runs every (setting, seed) pair under the benchmark protocol (``onpolicy_cartpole.race``: the
steps to the first evaluation >= 475, the run stopping there) on a pool of processes, appends one
JSON line per run to ``--out`` (a rerun skips the pairs already there), and prints a table:
median, number of seeds that never got there, mean, CPU ms per 1,000 steps, steps per seed.

    nice -n 5 .venv/bin/python benchmarks/ppo_sweep.py --seeds 0 1 2 3 4 5 6 7 8 9 10 11 \
        --set '{"n_epochs": 5}' '{"n_epochs": 5, "learning_rate": 3e-3}' '{"clip_eps": 0.2}'

Each ``--set`` is a JSON dict of changes to ``--base`` (by default the setting the sweep
started from, the previous session's 16-core result); ``'{}'`` runs the base itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from multiprocessing import Pool
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

BASE = dict(num_envs=8, num_steps=32, minibatch_size=256, n_epochs=10, learning_rate=2e-3,
            anneal_lr=False, gamma=0.98, lam=0.95, clip_eps=0.3, vf_coef=1.0, max_grad_norm=0.5,
            # the trainer's defaults of the day, now spelled out (they have changed since)
            norm_adv=True, vf_lr_scale=1.0, anneal_clip=False)


def _job(args):
    name, setting, seed, budget = args
    sys.path.insert(0, str(Path(__file__).parent))
    from onpolicy_cartpole import race
    hit, wall, evals, cpu = race("ppo", seed, budget, **setting)
    return dict(name=name, cfg=setting, seed=seed, hit=hit, wall=wall, cpu=cpu, evals=evals)


def _name(change: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(change.items())) or "base"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", nargs="+", default=["{}"], help="JSON changes to the base")
    parser.add_argument("--base", default=json.dumps(BASE), help="JSON base setting")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(12)))
    parser.add_argument("--budget", type=int, default=30_720)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/ppo_sweep.jsonl")
    args = parser.parse_args(argv)
    base = json.loads(args.base)
    changes = [json.loads(s) for s in args.set]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {(r["name"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())}
    jobs = [(_name(c), {**base, **c}, s, args.budget) for c in changes for s in args.seeds
            if (_name(c), s) not in done]
    with Pool(args.processes) as pool, out.open("a") as f:
        for r in pool.imap_unordered(_job, jobs):
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(r["name"], "seed", r["seed"], "steps", r["hit"], flush=True)
    runs = {}
    for r in map(json.loads, out.read_text().splitlines()):
        runs.setdefault(r["name"], {})[r["seed"]] = r
    print("| setting | median steps | never | mean (never = budget) | CPU ms / 1k steps | per seed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, by_seed in runs.items():
        rs = [by_seed[s] for s in args.seeds if s in by_seed]
        steps = np.array([np.inf if r["hit"] is None else r["hit"] for r in rs])
        cpu = np.median([r["cpu"] / (r["hit"] or args.budget) * 1e6 for r in rs])
        print(f"| {name} | {np.median(steps):,.0f} | {int(np.isinf(steps).sum())} "
              f"| {np.minimum(steps, args.budget).mean():,.0f} | {cpu:.0f} | "
              + " ".join("-" if r["hit"] is None else str(r["hit"]) for r in rs) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
