"""Benchmark: the DAPO ablation ladder of the GRPO chapter over several seeds.

Run from the repository root (about 4 x seeds x steps GRPO steps; minutes on a CPU):

    .venv/bin/python benchmarks/bench_grpo_ladder.py --seeds 5 --steps 150

Each rung adds one of DAPO's pieces (Yu et al. 2025) to the one above: GRPO with two gradient
steps per batch, then the token-level loss, clip-higher (eps_high 0.28), dynamic sampling. All
start from the chapter's SFT model of the addition task, with the chapter's batch (16 prompts x
G = 8) and learning rate. It prints, per rung, the median [min, max] over seeds of held-out pass@1
at the end, the entropy of the last step and the fraction of zero-variance groups over the last
10 steps, as a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's rlnotes
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm import AdditionTask, sft_model  # noqa: E402

LADDER = {
    "GRPO (mu = 2)": dict(loss_type="grpo", epochs=2),
    "+ token-level loss": dict(loss_type="dapo", epochs=2),
    "+ clip-higher (0.28)": dict(loss_type="dapo", epochs=2, eps_high=0.28),
    "+ dynamic sampling": dict(loss_type="dapo", epochs=2, eps_high=0.28, dynamic_sampling=True),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=2e-4)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    task = AdditionTask()
    sft, _ = sft_model(task, seed=0, steps=450)
    fmt = lambda x: f"{np.median(x):.3f} [{np.min(x):.3f}, {np.max(x):.3f}]"  # noqa: E731
    print(f"| rung ({args.seeds} seeds, {args.steps} steps) | pass@1 | final entropy | zero-variance groups |")
    print("| --- | --- | --- | --- |")
    for name, kw in LADDER.items():
        res = []
        for seed in range(args.seeds):
            _, h = train_grpo(sft, task, args.steps, n_prompts=16, group_size=8, lr=args.lr, warmup=10,
                              beta=0.0, eval_every=args.steps, seed=seed, **kw)
            res.append((h["pass1"][-1], h["entropy"][-1], float(np.mean(h["zero_var"][-10:]))))
        res = np.array(res)
        print(f"| {name} | {fmt(res[:, 0])} | {fmt(res[:, 1])} | {fmt(res[:, 2])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
