"""Benchmark: Gao et al.'s best-of-n form against the reward model's data, over several seeds.

Run from the repository root (4 sizes x 5 seeds reward models; a few CPU minutes):

    .venv/bin/python benchmarks/bench_rm_scaling.py --json benchmarks/results/rlhf_rm_scaling.json

The experiment of book/rlhf.ipynb, section "Over-optimisation and the reward model's data". For
each seed s: 3,000 preference pairs of the SFT model (``sample_preference_pairs`` with generator
seed s; the first 2,000 to train on, the other 1,000 held out, as in the chapter, whose pairs are
those of seed 0), and for each size in ``--sizes`` a reward model trained on the first ``size``
pairs with the chapter's recipe (4 epochs, lr 3e-3, training seed s). Best-of-n for n = 1 ... 64
from one fixed pool of 64 SFT samples for each of 500 prompts (generator seed 20, shared by every
reward model and seed), selected by each reward model and scored by the gold reward, and the fit
of ``gain = D (q1 - q2 D)`` (``rlnotes.lm.rm_scaling.rm_data_sweep``). Recorded per seed and
size: q1, q2, R^2, the best-of-n gold rewards, the held-out accuracy; with the provenance.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the working tree's rlnotes
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
import rlnotes.lm as lm  # noqa: E402
from rlnotes.lm.rm_scaling import rm_data_sweep, sample_pool  # noqa: E402
from stats import provenance  # noqa: E402

NS = [1, 2, 4, 8, 16, 32, 64]
POOL = dict(n_prompts=500, m=64, seed=20)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--sizes", default="250,500,1000,2000")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "rlhf_rm_scaling.json"))
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    torch.set_num_threads(1)
    prov = provenance(["python", "benchmarks/bench_rm_scaling.py"] + (argv if argv is not None else sys.argv[1:]))
    t0 = time.process_time()
    task = lm.PreferenceTask(seed=0)
    sft, _ = lm.sft_model(task, seed=0, device="cpu")
    pool = sample_pool(sft, task, POOL["n_prompts"], POOL["m"], torch.Generator().manual_seed(POOL["seed"]))
    rows = []
    for seed in seeds:
        pairs = lm.sample_preference_pairs(sft, task, 3000, torch.Generator().manual_seed(seed))
        train, test = pairs.subset(slice(0, 2000)), pairs.subset(slice(2000, 3000))
        for row in rm_data_sweep(sft, train, sizes, pool, NS, seed=seed, device="cpu", valid=test):
            rows.append(dict(row, seed=seed))
            print(f"seed {seed} pairs {row['pairs']:5d}: q1 {row['q1']:.3f} q2 {row['q2']:.3f} "
                  f"R^2 {row['r2']:.3f} acc {row['acc']:.3f} gold(64) {row['gold'][-1]:.2f} "
                  f"({time.process_time() - t0:.0f} s CPU)", flush=True)
    out = dict(provenance=prov, cpu_seconds=round(time.process_time() - t0, 1), ns=NS, pool=POOL,
               sizes=sizes, seeds=seeds, rows=rows)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
