"""A2C with a Gaussian policy on Pendulum-v1, a gymnasium task with a Box action (a torque in
[-2, 2]): does it learn, and how many environment steps does it need?

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/pg_pendulum.py [--seeds 0 1 2]
        [--steps 1200000] [--eval-every 100000] [--set key=value ...] [--out FILE]

Trains ``rlnotes.a2c.train`` with the settings below (the actor-critic chapter's Pendulum
settings; the trainer's defaults are its CartPole settings), one run per seed. Each run is
evaluated every ``--eval-every`` steps by ``rlnotes.deeprl.curves.learning_curves`` (10 greedy
episodes, the Gaussian's mean, on a separate 10-environment evaluation env seeded seed + 10000,
as in the CartPole benchmarks); its starting point, reported at step 0, is the policy after
its first update (256 steps), evaluated the same way. An episode lasts 200 steps and returns
between about -1,600 and 0; a policy that swings the pendulum up and holds it scores about -150
to -200 on average over random start states, one that never swings it up about -1,200.

Prints one row per seed and the median [min, max] over seeds at every checkpoint, and writes
them with the command, date, CPU seconds and machine load to ``--out``
(benchmarks/results/pg_pendulum.json), which the chapter plots.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from rlnotes import a2c
from rlnotes.deeprl import Evaluator
from rlnotes.deeprl.curves import learning_curves

# The chapter's settings (section A2C with continuous actions: Pendulum): gamma 0.9 (the usual
# discount for Pendulum, whose reward is dense), a critic step 10x the actor's, no gradient
# clipping, 16 environments x 16 steps per update, Adam with standardised advantages and a
# constant step size, no entropy bonus and raw observations (the defaults with which the
# record was made).
SETTINGS = dict(gamma=0.9, lam=0.95, num_envs=16, num_steps=16, learning_rate=1e-3,
                vf_lr_scale=10.0, max_grad_norm=None, optimizer="adam",
                normalize_advantages=True, lr_final_fraction=1.0, ent_coef=0.0,
                norm_obs=False, optimizer_eps=1e-5)
ENV_ID = "Pendulum-v1"


def initial_score(seed: int, **settings) -> float:
    """Mean evaluation return of the policy after its first update (num_envs * num_steps
    steps): the starting point of a run, on its own evaluation env (seeded seed + 10000)."""
    settings = {**SETTINGS, **settings}
    evaluator = Evaluator(ENV_ID, seed)
    try:
        policy = a2c.train(ENV_ID, settings["num_envs"] * settings["num_steps"], seed=seed,
                           **settings)
        return float(evaluator(policy).mean())
    finally:
        evaluator.close()


def run(seed: int, total_steps: int, eval_every: int, **settings):
    """One run: (steps, scores, CPU s), the first entry the initial policy's score at step 0,
    then ``learning_curves``' checkpoints (the protocol the chapter's short run uses, so that
    its numbers are the first ones here)."""
    t = time.process_time()
    first = initial_score(seed, **settings)
    steps, Y = learning_curves(a2c.train, ENV_ID, total_steps, [seed], eval_every=eval_every,
                               **{**SETTINGS, **settings})
    return [0] + steps.tolist(), [first] + Y[0].tolist(), time.process_time() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1_200_000)
    parser.add_argument("--eval-every", type=int, default=100_000)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="override a setting, e.g. --set learning_rate=3e-3")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"
                                                / "pg_pendulum.json"))
    args = parser.parse_args(argv)
    settings = dict(SETTINGS)
    for item in args.set:
        key, value = item.split("=", 1)
        settings[key] = ast.literal_eval(value)
    rows = []
    for seed in args.seeds:
        steps, scores, cpu = run(seed, args.steps, args.eval_every, **settings)
        rows.append({"seed": seed, "steps": steps, "scores": scores, "cpu_s": cpu})
        print(f"seed {seed}: CPU {cpu:.1f} s (evaluation included); " + ", ".join(
            f"{s:,}: {x:.0f}" for s, x in zip(steps, scores)), flush=True)
    # every run has the same checkpoints (same settings, same total)
    steps = rows[0]["steps"]
    Y = np.array([r["scores"] for r in rows])
    print("median [min, max] over seeds:")
    for j, s in enumerate(steps):
        print(f"  {s:>9,}: {np.median(Y[:, j]):7.0f} [{Y[:, j].min():6.0f}, {Y[:, j].max():6.0f}]")
    record = {
        "command": ("OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/pg_pendulum.py "
                   + " ".join(sys.argv[1:] if argv is None else argv)).strip(),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
                   f"{os.getloadavg()[0]:.1f} at the end (shared machine)",
        "env_id": ENV_ID, "settings": settings, "eval_every": args.eval_every,
        "runs": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
