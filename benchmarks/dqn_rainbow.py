"""Two of Rainbow's components on CartPole-v1: n-step returns and prioritized replay, over
several seeds, relative to rlnotes' DQN defaults.

Since the defaults use three-step returns (``n_step=3``), the variants are the defaults, the
same with one-step returns (``n_step=1``), the defaults with prioritized replay added, and
one-step returns with prioritized replay. Each variant trains ``rlnotes.dqn.train`` with its
defaults plus the variant's options for ``--budget`` environment steps; every 2,048 steps the greedy policy plays 10 evaluation
episodes (``rlnotes.deeprl.Evaluator``, seeded ``seed + 10000``). Per run it records the mean
evaluation return at each evaluation, the steps to the first evaluation >= 475 and to the
first of three in a row, the mean of the last five evaluations and the training CPU seconds
(evaluation excluded). Runs alternate variants within each seed, so that every variant sees
the same conditions.

    .venv/bin/python benchmarks/dqn_rainbow.py                       # seeds 300-302, 30,720 steps
    .venv/bin/python benchmarks/dqn_rainbow.py --seeds 300 --budget 8192 --out /tmp/x

The default seeds are ones that no DQN sweep used (seeds 200-229 tuned the defaults).

Writes ``<out>/dqn_rainbow.json``.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlnotes import dqn  # noqa: E402
from rlnotes.deeprl import Evaluator  # noqa: E402

ENV_ID, EVAL_EVERY = "CartPole-v1", 2_048
VARIANTS = {   # relative to the defaults, whose n_step is 3 (main() checks it)
    "DQN (defaults, n = 3)": {},
    "one-step (n = 1)": dict(n_step=1),
    "prioritized replay (n = 3)": dict(prioritized=True),
    "one-step + prioritized": dict(n_step=1, prioritized=True),
}


def run(seed: int, budget: int, hp: dict) -> dict:
    evaluator = Evaluator(ENV_ID, seed)
    curve, eval_cpu = [], 0.0

    def callback(steps, policy):
        nonlocal eval_cpu
        if steps % EVAL_EVERY == 0:
            t = time.process_time()
            curve.append(float(evaluator(policy).mean()))
            eval_cpu += time.process_time() - t

    start = time.process_time()
    dqn.train(ENV_ID, budget, seed=seed, callback=callback, **hp)
    cpu = time.process_time() - start - eval_cpu
    evaluator.close()
    c = np.asarray(curve)
    good = c >= 475
    first = int(EVAL_EVERY * (np.argmax(good) + 1)) if good.any() else None
    three = next((EVAL_EVERY * (i + 1) for i in range(len(c) - 2) if good[i:i + 3].all()), None)
    return {"seed": seed, "curve": [round(v, 1) for v in curve], "first_475": first,
            "three_in_a_row": three, "last5_mean": round(float(c[-5:].mean()), 1),
            "train_cpu_s": round(cpu, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[300, 301, 302])
    parser.add_argument("--budget", type=int, default=30_720)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    defaults = {name: p.default for name, p in inspect.signature(dqn.train).parameters.items()}
    assert defaults["n_step"] == 3 and not defaults["prioritized"], "the variants assume these"
    torch.set_num_threads(1)
    started = datetime.datetime.now(datetime.timezone.utc)
    runs = {name: [] for name in VARIANTS}
    for seed in args.seeds:
        for name, hp in VARIANTS.items():
            runs[name].append(run(seed, args.budget, hp))
            r = runs[name][-1]
            print(f"seed {seed} {name:22s} first {r['first_475']} three {r['three_in_a_row']} "
                  f"last5 {r['last5_mean']} cpu {r['train_cpu_s']}", flush=True)
    ended = datetime.datetime.now(datetime.timezone.utc)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    record = {
        "benchmark": "benchmarks/dqn_rainbow.py: n-step returns and prioritized replay as "
                     "options of rlnotes' DQN, CartPole-v1",
        "date": f"{started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC",
        "machine": f"{cpu}, {os.cpu_count()} cores (shared), one torch thread",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "gymnasium": gymnasium.__version__, "numpy": np.__version__},
        "command": "nice -n 10 .venv/bin/python " + " ".join(["benchmarks/dqn_rainbow.py",
                                                             *(argv or sys.argv[1:])]),
        "seeds": args.seeds, "budget_steps": args.budget, "eval_every": EVAL_EVERY,
        "eval_episodes": 10,
        "variants": {name: hp for name, hp in VARIANTS.items()},
        "defaults": {k: defaults[k] for k in ("n_step", "prioritized", "exploration_steps",
                                              "buffer_size")},
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "dqn_rainbow.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
