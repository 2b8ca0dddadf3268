"""Benchmark: the length gap (mean length of wrong minus right completions) under GRPO and
Dr. GRPO on the stalling addition task, over longer runs than the chapter's.

Run from the repository root (two GRPO runs per seed):

    .venv/bin/python benchmarks/bench_grpo_length_gap.py --p-stall 0.1 --max-stall 8 --steps 200 --seeds 0

The chapter's 450-step SFT model of the addition task is fine-tuned for ``--finetune`` steps on
``StallingAdditionTask(p_stall, max_stall)`` demonstrations, then trained with GRPO (per-sequence
token means, std-normalised advantages) and with Dr. GRPO (constant denominator, no std), beta 0,
the chapter's batch and learning rate. Prints, per loss and seed, the gap, the mean length of
wrong completions and the sampled accuracy in 25-step windows, and held-out pass@1 before and
after.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's rlnotes
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm import AdditionTask, sft_model  # noqa: E402
from rlnotes.lm.grpo_tasks import StallingAdditionTask, finetune  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p-stall", type=float, default=0.1)
    ap.add_argument("--max-stall", type=int, default=8)
    ap.add_argument("--finetune", type=int, default=100)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--window", type=int, default=25)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sft, _ = sft_model(AdditionTask(), seed=0, steps=450)
    task = StallingAdditionTask(p_stall=args.p_stall, max_stall=args.max_stall)
    staller = finetune(sft, task, args.finetune, lr=1e-3)
    W = args.window
    losses = {"GRPO": dict(loss_type="grpo", scale="group"), "Dr. GRPO": dict(loss_type="dr_grpo", scale="none")}
    for name, kw in losses.items():
        for seed in (int(s) for s in args.seeds.split(",")):
            t0 = time.process_time()
            _, h = train_grpo(staller, task, args.steps, n_prompts=16, group_size=8, lr=2e-4, warmup=10,
                              beta=0.0, eval_every=args.steps, seed=seed, **kw)
            n = len(h["len_wrong"]) // W * W
            win = lambda k: np.nanmean(np.asarray(h[k], dtype=float)[:n].reshape(-1, W), 1)  # noqa: E731
            gap = win("len_wrong") - win("len_correct")
            print(f"{name} seed {seed}: gap {gap.round(2).tolist()}; wrong length "
                  f"{win('len_wrong').round(2).tolist()}; accuracy {win('accuracy').round(2).tolist()}; "
                  f"pass@1 {h['pass1'][0]:.3f} -> {h['pass1'][-1]:.3f}; {time.process_time() - t0:.1f} s CPU",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
