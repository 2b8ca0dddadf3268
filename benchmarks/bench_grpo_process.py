"""Benchmark: outcome against process supervision on the chain-addition task, over several
seeds and several starting models, with the GRPO chapter's learning-rate recipe for both.

Run from the repository root (2 x starts x seeds GRPO runs, plus one fine-tuning per start;
minutes on a CPU):

    .venv/bin/python benchmarks/bench_grpo_process.py --starts 0,1 --seeds 0,1,2 \
        --json benchmarks/results/grpo_process.json

The experiment of book/grpo_variants.ipynb, section "Outcome and process supervision".
``ChainAdditionTask`` asks for two additions in a row with the intermediate result written out;
its outcome reward checks the final result, its step rewards check each step on its own. Each
starting model is ``chain_start(seed=s)`` for ``s`` in ``--starts``: the addition task's
450-step SFT model of seed ``s`` fine-tuned on worked answers until its held-out pass@1 lies in
(0.15, 0.35). From each start, GRPO runs with ``supervision="outcome"`` and with
``supervision="process"`` for each seed of ``--seeds``, on the GRPO chapter's recipe: Adam at
2e-4 after a 10-step warm-up, decayed along a cosine to a tenth (``cosine=True``), k3 penalty
beta 0.04, 16 prompts x G = 8 a step. Held-out pass@1 (1,000 prompts, ``--eval-samples``
samples each) every ``--eval-every`` steps; both supervisions of one seed share the evaluation's
generator, so their step-0 pass@1 is the same number.

Recorded per run: the learning curve (evaluation steps, completions sampled, pass@1), the
start's pass@1, the final pass@1, the completions sampled before pass@1 first reaches the
start's threshold (the start's step-0 pass@1, averaged over its seeds, plus ``--gain``; null:
never) and the CPU seconds; with the provenance (date, CPU, load, versions, commit, command).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the working tree's rlnotes
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
import rlnotes  # noqa: E402
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm.grpo_tasks import chain_start  # noqa: E402
from stats import provenance  # noqa: E402

# The GRPO chapter's recipe (book/grpo.ipynb, section "Training that works"), for both supervisions.
RECIPE = dict(n_prompts=16, group_size=8, lr=2e-4, warmup=10, cosine=True, beta=0.04)


def samples_to(samples, pass1, threshold):
    """Completions sampled before ``pass1`` first reaches ``threshold`` (None: never)."""
    hit = np.nonzero(np.asarray(pass1) >= threshold)[0]
    return int(samples[hit[0]]) if len(hit) else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", default="0,1", help="chain_start seeds (one starting model each)")
    ap.add_argument("--seeds", default="0,1,2", help="GRPO seeds per start")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--eval-samples", type=int, default=2)
    ap.add_argument("--gain", type=float, default=0.05)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    starts = [int(s) for s in args.starts.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    torch.set_num_threads(1)
    prov = provenance(["python", "benchmarks/bench_grpo_process.py"] + list(sys.argv[1:] if argv is None else argv))
    cpu0 = time.process_time()
    record = dict(
        benchmark="benchmarks/bench_grpo_process.py",
        description=("Outcome vs process supervision (GRPO) on ChainAdditionTask, the GRPO chapter's "
                     "recipe for both: lr 2e-4, 10 warm-up steps, cosine decay to lr/10, beta 0.04 (k3), "
                     f"16 prompts x G = 8, {args.steps} steps; held-out pass@1 on 1,000 prompts, "
                     f"{args.eval_samples} samples each, every {args.eval_every} steps; starting models "
                     "chain_start(seed=s), the first snapshot of a fine-tuning on worked answers whose "
                     "held-out pass@1 lies in (0.15, 0.35); threshold: the start's step-0 pass@1 "
                     f"(mean over seeds) + {args.gain}"),
        provenance=prov,
        versions=dict(python=sys.version.split()[0], torch=torch.__version__, numpy=np.__version__,
                      rlnotes=getattr(rlnotes, "__version__", "?")),
        recipe=RECIPE, steps=args.steps, eval_every=args.eval_every, eval_samples=args.eval_samples,
        gain=args.gain, seeds=seeds, starts=[], runs=[])

    def save():
        if args.json is not None:
            record["cpu_s"] = round(time.process_time() - cpu0, 1)
            record["provenance"]["loadavg_end"] = list(os.getloadavg())
            args.json.write_text(json.dumps(record, indent=1) + "\n")

    for s in starts:
        c0 = time.process_time()
        try:
            model, task, ft_steps, start_pass1 = chain_start(seed=s)
        except RuntimeError as err:  # no snapshot inside the band: recorded, not run
            record["starts"].append(dict(start=s, error=str(err)))
            print(f"start {s}: {err}", flush=True)
            save()
            continue
        entry = dict(start=s, finetune_steps=int(ft_steps), chain_start_pass1=float(start_pass1),
                     cpu_s=round(time.process_time() - c0, 1))
        record["starts"].append(entry)
        print(f"start {s}: {ft_steps} fine-tuning steps, held-out pass@1 {start_pass1:.3f}", flush=True)
        runs = []
        for seed in seeds:
            for sup in ("outcome", "process"):
                c1 = time.process_time()
                _, h = train_grpo(model, task, args.steps, supervision=sup, eval_every=args.eval_every,
                                  eval_samples=args.eval_samples, eval_greedy=False, seed=seed, **RECIPE)
                eval_step = [int(x) for x in h["eval_step"]]
                runs.append(dict(start=s, seed=seed, supervision=sup, eval_step=eval_step,
                                 samples=[x * RECIPE["n_prompts"] * RECIPE["group_size"] for x in eval_step],
                                 pass1=[float(p) for p in h["pass1"]], start_pass1=float(h["pass1"][0]),
                                 final_pass1=float(h["pass1"][-1]),
                                 cpu_s=round(time.process_time() - c1, 1)))
                print(f"start {s} seed {seed} {sup:8s} pass@1 " + " ".join(f"{p:.3f}" for p in h["pass1"]),
                      flush=True)
        threshold = round(float(np.mean([r["start_pass1"] for r in runs])) + args.gain, 3)
        entry["threshold"] = threshold
        for r in runs:
            r["threshold"] = threshold
            r["samples_to_threshold"] = samples_to(r["samples"], r["pass1"], threshold)
        record["runs"].extend(runs)
        save()
    print(f"{'start':>5} {'seed':>4} {'outcome final':>14} {'process final':>14} {'outcome to thr':>15} {'process to thr':>15}")
    for s in starts:
        for seed in seeds:
            rr = {r["supervision"]: r for r in record["runs"] if r["start"] == s and r["seed"] == seed}
            if len(rr) == 2:
                print(f"{s:5d} {seed:4d} {rr['outcome']['final_pass1']:14.3f} {rr['process']['final_pass1']:14.3f} "
                      f"{str(rr['outcome']['samples_to_threshold']):>15} {str(rr['process']['samples_to_threshold']):>15}")
    save()
    print(f"CPU time: {time.process_time() - cpu0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
