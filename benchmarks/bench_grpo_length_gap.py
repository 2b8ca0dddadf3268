"""Benchmark: the length bias of GRPO's per-sequence loss against Dr. GRPO on the stalling
addition task: the mean length of stalling completions (a length the reward does not depend on),
the stall rate and the gap between wrong and right completions, over more seeds and longer runs
than the chapter's.

Run from the repository root (two GRPO runs per seed):

    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --steps 40
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --steps 120 --window 20
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --losses grpo_nostd,dr_grpo_std
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --beta 0

The chapter's 450-step SFT model of the addition task is fine-tuned for ``--finetune`` steps on
``StallingAdditionTask(p_stall, max_stall)`` demonstrations (``stall_model``, cached), then trained with GRPO (per-sequence
token means, std-normalised advantages) and with Dr. GRPO (constant denominator, no std), both
with the k3 KL penalty ``--beta`` to the fine-tuned model (which keeps some stalls to measure),
the chapter's batch and learning rate; ``--losses grpo_nostd,dr_grpo_std`` runs the other two
cells of the 2 x 2 (per-sequence or constant denominator, with or without the std) to tell which
of Dr. GRPO's two changes does what. Prints, per loss and seed, in ``--window``-step windows:
the mean length of stalling completions (EOS included), the stall rate, the gap (mean length of
wrong minus right completions), the sampled accuracy, then held-out pass@1 before and after; and
a table of the first and last windows (markdown, for benchmarks/README.md).
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
from rlnotes.lm.grpo_tasks import stall_model  # noqa: E402


LOSSES = {  # name -> (label, train_grpo's loss_type and scale)
    "grpo": ("GRPO", dict(loss_type="grpo", scale="group")),
    "dr_grpo": ("Dr. GRPO", dict(loss_type="dr_grpo", scale="none")),
    "grpo_nostd": ("GRPO aggregation, no std", dict(loss_type="grpo", scale="none")),
    "dr_grpo_std": ("Dr. GRPO aggregation, std", dict(loss_type="dr_grpo", scale="group")),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p-stall", type=float, default=0.5)
    ap.add_argument("--max-stall", type=int, default=6)
    ap.add_argument("--finetune", type=int, default=100)
    ap.add_argument("--beta", type=float, default=0.2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--losses", default="grpo,dr_grpo",
                    help=f"comma-separated, from {', '.join(LOSSES)} (the last two: the 2 x 2 of "
                         "aggregation and std scaling)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    staller, task = stall_model(args.p_stall, args.max_stall, args.finetune)
    W = args.window
    metrics = {"len_stall": task.stall_length,
               "stall_rate": task.stall_rate}
    losses = {name: LOSSES[name] for name in args.losses.split(",")}
    rows, summary = [], {}
    for name, kw in losses.values():
        for seed in (int(s) for s in args.seeds.split(",")):
            t0 = time.process_time()
            _, h = train_grpo(staller, task, args.steps, n_prompts=16, group_size=8, lr=2e-4, warmup=10,
                              beta=args.beta, eval_every=args.steps, eval_greedy=False, metrics=metrics,
                              seed=seed, **kw)
            n = len(h["len_wrong"]) // W * W
            win = lambda x: np.nanmean(np.asarray(x, dtype=float)[:n].reshape(-1, W), 1)  # noqa: E731
            stall, rate = win(h["len_stall"]), win(h["stall_rate"])
            gap = win(np.asarray(h["len_wrong"]) - np.asarray(h["len_correct"]))
            acc = win(h["accuracy"])
            print(f"{name} seed {seed}: stall length {stall.round(2).tolist()}; stall rate "
                  f"{rate.round(2).tolist()}; gap {gap.round(2).tolist()}; accuracy {acc.round(2).tolist()}; "
                  f"pass@1 {h['pass1'][0]:.3f} -> {h['pass1'][-1]:.3f}; {time.process_time() - t0:.1f} s CPU",
                  flush=True)
            summary.setdefault(name, []).append((stall[0], stall[-1], rate[0], rate[-1], gap[0], gap[-1]))
            rows.append(f"| {name} | {seed} | {stall[0]:.2f} -> {stall[-1]:.2f} | {rate[0]:.2f} -> {rate[-1]:.2f} "
                        f"| {gap[0]:.2f} -> {gap[-1]:.2f} | {h['pass1'][0]:.3f} -> {h['pass1'][-1]:.3f} |")
    print(f"\n| loss | seed | stall length (first -> last {W}-step window) | stall rate | "
          "gap, wrong - right | pass@1 |\n| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    med = lambda v: f"{np.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]"  # noqa: E731
    print(f"\nmedian [min, max] over seeds, first -> last {W}-step window\n| loss | stall length | stall rate | "
          "gap, wrong - right |\n| --- | --- | --- | --- |")
    for name, v in summary.items():
        v = np.array(v)
        print(f"| {name} | " + " | ".join(f"{med(v[:, 2 * i])} -> {med(v[:, 2 * i + 1])}" for i in range(3)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
