"""Benchmark: one GRPO step of rlnotes on the two-digit addition task, beside TRL's GRPOTrainer.

Run from the repository root:

    .venv/bin/python benchmarks/bench_grpo_step.py              # 8 prompts x G = 8, 60 timed steps
    .venv/bin/python benchmarks/bench_grpo_step.py --beta 0.04  # with the k3 penalty

The workload is the one of ../shared/PEERS.md (TRL 1.16's measurement on this kind of machine):
the GRPO chapter's SFT model of ``AdditionTask`` (450 SFT steps; 2 layers, 4 heads, width 128: 0.40 M parameters), 8
prompts a step, G = 8 completions of at most 4 tokens each (64 completions), one gradient step
per batch, lr 3e-5, one torch thread. The step is timed in two parts, as ``train_grpo`` records
them: *generation* (sampling the 64 completions with the KV cache, and scoring them) and
*update* (pi_ref's log-probs, one grouped teacher-forced forward, the loss, backward, Adam).
Held-out evaluations are not timed. Each figure is the median over the timed steps (after
``--warmup`` untimed ones); the process CPU time per step (user + sys) is printed too, since
it is less sensitive to other load on the machine than the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's rlnotes
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm import AdditionTask, sft_model  # noqa: E402

# TRL 1.16 GRPOTrainer, same task, model size and batch, beta 0 (../shared/PEERS.md)
TRL = {"step_s": 0.096, "gen_share": 0.28, "beta_0.04_step_s": 0.110}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--beta", type=float, default=0.0, help="k3 penalty weight (TRL default 0)")
    ap.add_argument("--min-speedup", type=float, default=2.0,
                    help="exit 1 when the median step is not this many times faster than TRL's")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    os.environ.setdefault("RLNOTES_PROGRESS", "0")
    task = AdditionTask()
    model, _ = sft_model(task, seed=0, steps=450)  # the GRPO chapter's SFT model
    n = args.warmup + args.steps
    cpu0 = time.process_time()
    _, hist = train_grpo(model, task, n, n_prompts=8, group_size=8, lr=3e-5, beta=args.beta,
                         eval_every=n, seed=0)
    cpu = time.process_time() - cpu0
    gen = np.array(hist["gen_s"][args.warmup:])
    upd = np.array(hist["update_s"][args.warmup:])
    gen_cpu = np.array(hist["gen_cpu_s"][args.warmup:])
    upd_cpu = np.array(hist["update_cpu_s"][args.warmup:])
    step = gen + upd
    ms = lambda x: 1000 * float(np.median(x))  # noqa: E731
    trl = TRL["step_s"] if args.beta == 0 else TRL["beta_0.04_step_s"]
    speedup = trl / float(np.median(step))
    speedup_cpu = trl / float(np.median(gen_cpu + upd_cpu))
    print(f"GRPO step, addition task, 8 prompts x G=8, beta={args.beta}, {args.steps} timed steps")
    print("| part | rlnotes wall (ms, median) | rlnotes CPU (ms, median) | TRL 1.16 GRPOTrainer wall (ms) |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| generation (+ reward) | {ms(gen):.1f} | {ms(gen_cpu):.1f} | "
          f"{1000 * TRL['step_s'] * TRL['gen_share']:.0f} (28%) |")
    print(f"| update (ref, forward, backward, Adam) | {ms(upd):.1f} | {ms(upd_cpu):.1f} | "
          f"{1000 * TRL['step_s'] * (1 - TRL['gen_share']):.0f} (72%) |")
    print(f"| whole step | {ms(step):.1f} [{1000 * step.min():.1f}, {1000 * step.max():.1f}] | "
          f"{ms(gen_cpu + upd_cpu):.1f} | {1000 * trl:.0f} |")
    print(f"speed-up over TRL's wall time: {speedup:.1f}x by wall time, {speedup_cpu:.1f}x by CPU time; "
          f"process CPU time per step, "
          f"over all {n} steps (warm-up and two held-out evaluations included): {1000 * cpu / n:.1f} ms")
    return 0 if speedup >= args.min_speedup else 1


if __name__ == "__main__":
    sys.exit(main())
