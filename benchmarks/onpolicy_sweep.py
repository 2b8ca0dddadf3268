"""The sweeps behind the A2C defaults and the TRPO, PPO and DQN candidates (``rlnotes.<algo>.train``).

Runs every (setting, seed) pair under the race's own protocol (``peers/harness.py``: an
evaluation every 2,048 steps, a run stopping at the first of three evaluations in a row >= 475
or at its budget), on seeds that the races do not use (200-249, 500-549, 700-749 and 900-999; the races use 100-109,
300-309, 400-409, 600-609, 800-809 and 1000-1009), on a pool of one-threaded processes. Appends one JSON line per run to ``--out`` (``settings`` and ``seed``
in each line: the file records which seeds the sweep used; a rerun skips the pairs already
there) and prints a table: median steps to the first evaluation >= 475, seeds that never held
three in a row, median CPU seconds to the first.

    nice -n 10 .venv/bin/python benchmarks/onpolicy_sweep.py --algo a2c --seeds 200 201 202 \
        --set '{}' '{"lr_final_fraction": 0.0}'

Each ``--set`` is a JSON dict of changes to the trainer's defaults; ``'{}'`` runs the defaults.
Each line records those defaults too (``defaults``: the numbers, flags and strings of the
trainer's signature), so that a run is a setting whatever the defaults later become; lines
without it were written before the field existed, against the defaults of their day (the
defaults of PPO and DQN changed after the fourth round: see benchmarks/README.md). A rerun
skips a (setting, seed) pair only when it was run against the same defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from multiprocessing import Pool
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
RACE_SEEDS = (set(range(100, 110)) | set(range(300, 310)) | set(range(400, 410))
              | set(range(600, 610)) | set(range(800, 810))
              | set(range(1000, 1010)))


def _job(args):
    algo, name, setting, seed, budget = args
    sys.path.insert(0, str(HERE / "peers"))
    import torch

    import harness

    torch.set_num_threads(1)
    harness.warm_imports()
    torch.manual_seed(seed)
    rec = harness.run_rlnotes(algo, seed, budget, hp=setting)
    return dict(rec, name=name, settings=setting, defaults=trainer_defaults(algo))


def trainer_defaults(algo: str) -> dict:
    """The JSON-able defaults of ``rlnotes.<algo>.train`` (what a ``--set`` changes)."""
    import importlib
    import inspect

    signature = inspect.signature(importlib.import_module(f"rlnotes.{algo}").train)
    return {k: p.default for k, p in signature.parameters.items()
            if isinstance(p.default, (bool, int, float, str)) and k not in ("seed", "progress")}


def _name(change: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(change.items())) or "defaults"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=("a2c", "trpo", "ppo", "dqn"), required=True)
    parser.add_argument("--set", nargs="+", default=["{}"], help="JSON changes to the defaults")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(200, 210)))
    parser.add_argument("--budget", type=int, default=50_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--out", default=None,
                        help="default benchmarks/results/<algo>_sweep.jsonl")
    args = parser.parse_args(argv)
    if RACE_SEEDS & set(args.seeds):
        raise SystemExit(f"seeds {sorted(RACE_SEEDS & set(args.seeds))} are the races' own")
    changes = [json.loads(s) for s in args.set]
    out = Path(args.out or HERE / "results" / f"{args.algo}_sweep.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    defaults = trainer_defaults(args.algo)
    done = set()
    if out.exists():
        done = {(r["name"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())
                if r.get("defaults") == defaults}
    jobs = [(args.algo, _name(c), c, s, args.budget) for c in changes for s in args.seeds
            if (_name(c), s) not in done]
    with Pool(args.processes, maxtasksperchild=1) as pool, out.open("a") as f:
        for r in pool.imap_unordered(_job, jobs):
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(r["name"], "seed", r["seed"], "first", r["first"], "three", r["three"],
                  flush=True)
    runs: dict = {}
    for r in map(json.loads, out.read_text().splitlines()):
        if r.get("defaults") == defaults:  # the table: runs against today's defaults only
            runs.setdefault(r["name"], {})[r["seed"]] = r
    print(f"seeds {args.seeds}, budget {args.budget:,}")
    print("| setting | median first | seeds without 3 in a row | median CPU s to first "
          "| steps/s | first per seed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in [_name(c) for c in changes]:
        rs = [runs[name][s] for s in args.seeds if s in runs.get(name, {})]
        if not rs:
            continue
        first = np.array([np.inf if r["first"] is None else r["first"] for r in rs])
        cpu = [r["cpu_first"] for r in rs if r["cpu_first"] is not None]
        print(f"| {name} | {np.median(first):,.0f} | {sum(r['three'] is None for r in rs)} "
              f"| {np.median(cpu) if cpu else float('nan'):.2f} "
              f"| {np.median([r['steps_per_s'] for r in rs]):,.0f} | "
              + " ".join("-" if r["first"] is None else str(r["first"]) for r in rs) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
