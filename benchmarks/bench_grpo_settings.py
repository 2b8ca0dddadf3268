"""Benchmark: held-out pass@1 of GRPO on the addition task under one setting, per seed.

Run from the repository root (one GRPO run per seed; about 25 s of CPU time per 300 steps):

    .venv/bin/python benchmarks/bench_grpo_settings.py --sft-steps 450 --steps 300 --seeds 0,1,2
    .venv/bin/python benchmarks/bench_grpo_settings.py --steps 300 --seeds 0 --set lr=3e-4
    .venv/bin/python benchmarks/bench_grpo_settings.py --start slip --steps 150 --seeds 0,1,2 \
        --set cosine=True --set eval_every=50 --set eval_samples=4 --set eval_curve_samples=1

``--start sft`` (default) starts from the addition task's ``--sft-steps``-step SFT model; ``--start
slip`` from the GRPO chapter's starting point, ``rlnotes.lm.grpo_tasks.slip_model()`` (the
1,200-step SFT model fine-tuned for 200 steps on demonstrations half of which slip). Under
``tools/builds.py`` the same command measures other floating-point builds of the machine.

The GRPO chapter's settings (16 prompts x G = 8, Adam lr 2e-4 after 10 warm-up steps, beta 0.04)
unless ``--set name=value`` (any keyword of ``rlnotes.grpo.train_grpo``) changes one. Prints the
SFT model's greedy accuracy, then per seed held-out pass@1 (temperature 1, 1,000 prompts) and
greedy accuracy at each evaluation, the gain in pass@1 and the CPU seconds.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's rlnotes
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm import AdditionTask, accuracy, sft_model  # noqa: E402
from rlnotes.lm.grpo_tasks import slip_model  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", choices=("sft", "slip"), default="sft")
    ap.add_argument("--sft-steps", type=int, default=None,
                    help="SFT steps of the start (default 450 with --start sft, 1200 with --start slip)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    kw = dict(n_prompts=16, group_size=8, lr=2e-4, warmup=10, beta=0.04, eval_every=max(1, args.steps // 3))
    for item in args.set:
        name, value = item.split("=", 1)
        kw[name] = ast.literal_eval(value)
    task = AdditionTask()
    if args.start == "slip":
        sft_steps = 1200 if args.sft_steps is None else args.sft_steps
        sft, _ = slip_model(sft_steps=sft_steps)
        print(f"slip_model(sft_steps={sft_steps}): greedy accuracy {accuracy(sft, task):.3f}; "
              f"settings {kw}")
    else:
        sft_steps = 450 if args.sft_steps is None else args.sft_steps
        sft, _ = sft_model(task, seed=0, steps=sft_steps)
        print(f"SFT {sft_steps} steps: greedy accuracy {accuracy(sft, task):.3f}; settings {kw}")
    for seed in (int(s) for s in args.seeds.split(",")):
        t0 = time.process_time()
        _, h = train_grpo(sft, task, args.steps, seed=seed, **kw)
        print(f"seed {seed}: pass@1 {[round(x, 3) for x in h['pass1']]} at steps {h['eval_step']}, "
              f"greedy {[round(x, 3) for x in h['greedy']]}, gain {h['pass1'][-1] - h['pass1'][0]:+.3f}, "
              f"entropy {h['entropy'][0]:.3f} -> {h['entropy'][-1]:.3f}, KL {h['kl'][-1]:.4f}, "
              f"{time.process_time() - t0:.1f} s CPU", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
