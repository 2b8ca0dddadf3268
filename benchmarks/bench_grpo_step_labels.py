"""Benchmark: Math-Shepherd's Monte Carlo step labels and a gamed rule checker on the chain task.

Run from the repository root (about a minute of CPU per seed, most of it fine-tuning):

    .venv/bin/python benchmarks/bench_grpo_step_labels.py --seeds 0,1,2 \
        --json benchmarks/results/grpo_step_labels.json

For each seed s, the lab's 450-step SFT model of seed s fine-tuned on the chain task's worked
answers (``chain_model(steps, seed=s)``) answers ``--n-chain`` held-out prompts once each (the same
prompts and sampling seed for every s). Step labels: the first ``--n-labelled`` of those answers
get Math-Shepherd's soft and hard labels (``rlnotes.lm.process.mc_step_labels``, ``--n-roll``
rollouts a step, from the same model), compared with the task's exact step verdicts
(``step_label_summary``). Rule checkers: three samples a prompt; the model's first sample, a
two-result hedge ("f1=f2", the first two samples' final results) and a three-result hedge
("f1=f2=f3", cut at the token budget) are scored by the strict outcome reward, R1's format reward,
a loose checker (the right result anywhere) and the step-1 check; per kind and checker the mean,
and for the hedges the mean per-prompt difference from the model's own sample with its standard
error. Writes per-seed values and the provenance (date, CPU, load, versions, commit, command).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the working tree's rlnotes
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from rlnotes.lm.generation import decode  # noqa: E402
from rlnotes.lm.grpo_tasks import chain_model  # noqa: E402
from rlnotes.lm.process import (final_results, format_reward, hedge_completions,  # noqa: E402
                                loose_reward, mc_step_labels, step_label_summary)
from stats import provenance, results_record  # noqa: E402


def one_seed(seed, args):
    cpu0 = time.process_time()
    chain, task = chain_model(steps=args.chain_steps, seed=seed)
    eos = task.tokenizer.eos_id
    x = task.sample_prompts(args.n_chain, torch.Generator().manual_seed(0), split="test")
    y, _, m = decode(chain, x, task.max_new_tokens, eos_id=eos, generator=torch.Generator().manual_seed(1))
    n = args.n_labelled
    xl, yl, ml = x[:n], y[:n], m[:n]
    truth, ends = task.step_rewards(xl, yl, ml)
    outcome = task.reward(xl, yl, ml)
    soft, hard = mc_step_labels(chain, task, xl, yl, ml, ends, args.n_roll,
                                generator=torch.Generator().manual_seed(100 + seed))
    labels = step_label_summary(soft, hard, truth, outcome)
    labels.update(step1_right=float(truth[:, 0].mean()), step2_right=float(truth[:, 1].mean()),
                  outcome=float(outcome.mean()))
    checkers = {"strict": task.reward, "format": partial(format_reward, task),
                "loose": partial(loose_reward, task),
                "step1": lambda x_, y_, m_: task.step_rewards(x_, y_, m_)[0][:, 0]}
    y3, _, m3 = decode(chain, [p for p in x for _ in range(3)], task.max_new_tokens, eos_id=eos,
                       generator=torch.Generator().manual_seed(200 + seed))
    finals = np.array([r if r is not None else 0 for r in final_results(task, y3, m3)]).reshape(-1, 3)
    kinds = {"own": (y3[::3], m3[::3]), "two": hedge_completions(task, finals[:, :2].tolist()),
             "three": hedge_completions(task, finals.tolist())}
    per = {(k, c): f(x, *kinds[k]).numpy() for k in kinds for c, f in checkers.items()}
    hedges = {k: {c: round(float(per[k, c].mean()), 4) for c in checkers} for k in kinds}
    for k in ("two", "three"):
        for c in ("strict", "loose"):
            d = per[k, c] - per["own", c]
            hedges[k][f"{c}_diff"] = round(float(d.mean()), 4)
            hedges[k][f"{c}_diff_se"] = round(float(d.std(ddof=1) / np.sqrt(len(d))), 4)
    loose_superset = bool(all((per[k, "loose"] >= per[k, "strict"]).all() for k in kinds))
    return dict(seed=seed, labels={k: round(v, 4) for k, v in labels.items()}, hedges=hedges,
                loose_accepts_all_strict=loose_superset, cpu_s=round(time.process_time() - cpu0, 1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--chain-steps", type=int, default=400)
    ap.add_argument("--n-chain", type=int, default=512)
    ap.add_argument("--n-labelled", type=int, default=256)
    ap.add_argument("--n-roll", type=int, default=8)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    prov = provenance(["python", "benchmarks/bench_grpo_step_labels.py"]
                      + list(sys.argv[1:] if argv is None else argv))
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = []
    for seed in seeds:
        r = one_seed(seed, args)
        lab, h = r["labels"], r["hedges"]
        print(f"seed {seed}: step 1 right {lab['step1_right']:.3f}, outcome {lab['outcome']:.3f} "
              f"(after a right step 1 {lab['outcome_if_right']:.3f}, after a wrong one "
              f"{lab['outcome_if_wrong']:.3f}); hard labels agree {lab['agree']:.3f}, false pos "
              f"{lab['false_pos']:.3f}, false neg {lab['false_neg']:.3f}; loose own/two/three "
              f"{h['own']['loose']:.3f}/{h['two']['loose']:.3f}/{h['three']['loose']:.3f}, strict "
              f"{h['own']['strict']:.3f}/{h['two']['strict']:.3f}/{h['three']['strict']:.3f} "
              f"({r['cpu_s']} s)", flush=True)
        runs.append(r)
    if args.json is not None:
        args.json.write_text(json.dumps(results_record(
            "benchmarks/bench_grpo_step_labels.py", prov,
            description=(f"chain_model(steps={args.chain_steps}, seed=s) per seed s; {args.n_chain} held-out "
                         f"prompts (generator 0), one answer each (generator 1); Monte Carlo labels of the "
                         f"first {args.n_labelled} answers, {args.n_roll} rollouts a step (generator 100 + s); "
                         "three samples a prompt (generator 200 + s) for the own-sample and hedge rows"),
            chain_steps=args.chain_steps, n_chain=args.n_chain, n_labelled=args.n_labelled,
            n_roll=args.n_roll, seeds=seeds, runs=runs), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
