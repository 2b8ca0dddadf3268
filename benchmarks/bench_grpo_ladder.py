"""Benchmark: the DAPO ablation ladder of the GRPO chapter over several seeds.

Run from the repository root (about 4 x seeds x steps GRPO steps; minutes on a CPU):

    .venv/bin/python benchmarks/bench_grpo_ladder.py --seeds 5 --steps 150 \
        --json benchmarks/results/grpo_ladder.json

Each rung adds one of DAPO's pieces (Yu et al. 2025) to the one above: GRPO with two gradient
steps per batch, then the token-level loss, clip-higher (eps_high 0.28), dynamic sampling. All
start from the chapter's SFT model of the addition task, with the chapter's batch (16 prompts x
G = 8) and learning rate. It prints, per rung, the median [min, max] over seeds of held-out pass@1
at the end, the entropy of the last step and the fraction of zero-variance groups over the last
10 steps, as a Markdown table; with ``--json``, writes the same statistics per rung (median, min,
max) and per seed, the start's held-out pass@1 and the provenance (date, CPU, load, versions,
commit, command), the format of benchmarks/results/grpo_ladder.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the working tree's rlnotes
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from rlnotes.grpo import pass_at_1, train_grpo  # noqa: E402
from rlnotes.lm import AdditionTask, sft_model  # noqa: E402
from stats import provenance, results_record  # noqa: E402

LADDER = {  # rung -> (its label in the results file, train_grpo's arguments)
    "GRPO (K = 2)": ("grpo", dict(loss_type="grpo", epochs=2)),
    "+ token-level loss": ("dapo", dict(loss_type="dapo", epochs=2)),
    "+ clip-higher (0.28)": ("dapo, eps_high 0.28", dict(loss_type="dapo", epochs=2, eps_high=0.28)),
    "+ dynamic sampling": ("dapo, eps_high 0.28, dynamic_sampling (oversample 2)",
                           dict(loss_type="dapo", epochs=2, eps_high=0.28, dynamic_sampling=True)),
}


def _stat(x):
    return [round(float(np.median(x)), 4), round(float(np.min(x)), 4), round(float(np.max(x)), 4)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    prov = provenance(["python", "benchmarks/bench_grpo_ladder.py"] + list(sys.argv[1:] if argv is None else argv))
    cpu0 = time.process_time()
    torch.set_num_threads(1)
    task = AdditionTask()
    sft, _ = sft_model(task, seed=0, steps=450)
    start_pass1 = pass_at_1(sft, task, generator=torch.Generator().manual_seed(0))
    rungs = []
    fmt = lambda x: f"{np.median(x):.3f} [{np.min(x):.3f}, {np.max(x):.3f}]"  # noqa: E731
    print(f"| rung ({args.seeds} seeds, {args.steps} steps) | pass@1 | final entropy | zero-variance groups |")
    print("| --- | --- | --- | --- |")
    for name, (label, kw) in LADDER.items():
        res = []
        for seed in range(args.seeds):
            _, h = train_grpo(sft, task, args.steps, n_prompts=16, group_size=8, lr=args.lr, warmup=10,
                              beta=0.0, eval_every=args.steps, seed=seed, **kw)
            res.append((h["pass1"][-1], h["entropy"][-1], float(np.mean(h["zero_var"][-10:]))))
        res = np.array(res)
        print(f"| {name} | {fmt(res[:, 0])} | {fmt(res[:, 1])} | {fmt(res[:, 2])} |", flush=True)
        rungs.append(dict(rung=name, loss=label, pass1=_stat(res[:, 0]), entropy=_stat(res[:, 1]),
                          zero_var=_stat(res[:, 2]),
                          per_seed=dict(seed=list(range(args.seeds)), pass1=res[:, 0].round(4).tolist(),
                                        entropy=res[:, 1].round(4).tolist(), zero_var=res[:, 2].round(4).tolist())))
    if args.json is not None:
        args.json.write_text(json.dumps(results_record(
            "benchmarks/bench_grpo_ladder.py", prov,
            cpu_s=round(time.process_time() - cpu0, 1),
            description=("DAPO's pieces added one at a time, K = 2 gradient steps per batch, beta 0, "
                         f"16 prompts x G = 8, lr {args.lr:g} after 10 warm-up steps, from the 450-step SFT "
                         f"model (held-out pass@1 {start_pass1:.3f}, one sample a prompt); per rung, median, min, "
                         f"max over {args.seeds} seeds and the per-seed values (same seed: same generator) "
                         "of held-out pass@1 (1,000 prompts, one sample each), the entropy of the last step, "
                         "the share of zero-variance groups among those sampled over the last 10 steps"),
            seeds=args.seeds, steps=args.steps, start_pass1=round(float(start_pass1), 4), rungs=rungs),
            indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
