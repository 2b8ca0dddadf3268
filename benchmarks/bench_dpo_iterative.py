"""Iterative DPO against its offline control, on the DPO chapter's preference task.

Every arm starts with the same first round: the chapter's DPO (beta = 0.1, 3 epochs, lr 1e-3)
on the 2,000 pairs sampled from the SFT model. Then each arm runs ``--rounds - 1`` more rounds of
the same budget (2,000 newly labelled pairs, 3 epochs), each starting from the last round's
policy; the arms differ only in where the pairs come from and which reference DPO uses:

- ``iterative``: fresh pairs sampled from the last round's policy, and that policy as the
  reference (the reference moves every round, as in iterative DPO, Xu et al. 2023);
- ``on-policy, fixed reference``: fresh pairs from the last round's policy too (its own samples),
  the SFT model as reference
  (separates the moved reference from the fresh pairs);
- ``offline`` (the control): fresh pairs sampled from the SFT model, the SFT model as reference:
  the same number of labelled pairs and DPO steps, all offline.

The labeller is the chapter's simulated one (Bradley-Terry noise around the gold reward) for
every arm, so that no arm inherits a reward model's errors. After every round the policy is
measured by ``rlnotes.lm.frontier.gold_and_kl`` against the SFT model (1,000 fresh prompts, the
same for every policy) and by the accuracy of its implicit reward beta log pi / pi_SFT on the
1,000 held-out SFT pairs of the chapter; the Bradley-Terry ceiling of each round's pairs is
recorded. The SFT model and the first round's pairs are fixed; the seed sets the order of the
pairs, the sampling of fresh pairs and the labels.

    nice -n 19 .venv/bin/python benchmarks/bench_dpo_iterative.py   # -> results/dpo_iterative.json
    .venv/bin/python benchmarks/bench_dpo_iterative.py --seeds 0 --rounds 2 --json /tmp/x.json  # quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))

import rlnotes.lm as lm  # noqa: E402
from rlnotes.dpo import implicit_reward_accuracy, train_dpo  # noqa: E402
from rlnotes.lm.frontier import gold_and_kl  # noqa: E402
from stats import provenance, results_record  # noqa: E402

ARMS = ("iterative", "on-policy, fixed reference", "offline")
DPO = dict(beta=0.1, epochs=3, lr=1e-3)
N_PAIRS = 2000


def measure(policy, sft, task, test, **fields):
    return dict(fields, **gold_and_kl(policy, sft, task),
                held_out_acc=implicit_reward_accuracy(policy, sft, test, beta=DPO["beta"]))


def run_seed(sft, task, train, test, seed, rounds):
    """One seed: the shared first round, then every arm's later rounds; a row per (arm, round)."""
    first, _ = train_dpo(sft, train, seed=seed, device="cpu", **DPO)
    start = measure(sft, sft, task, test, round=0, seed=seed, ceiling=None)
    shared = measure(first, sft, task, test, round=1, seed=seed, ceiling=train.ceiling())
    rows = [dict(r, arm=arm) for r in (start, shared) for arm in ARMS]
    for i, arm in enumerate(ARMS):
        policy = first
        for k in range(2, rounds + 1):
            g = torch.Generator().manual_seed(1000 * seed + 100 * i + k)
            source = sft if arm == "offline" else policy
            pairs = lm.sample_preference_pairs(source, task, N_PAIRS, g)
            ref = policy if arm == "iterative" else sft
            policy, _ = train_dpo(policy, pairs, ref=ref, seed=seed, device="cpu", **DPO)
            rows.append(measure(policy, sft, task, test, arm=arm, round=k, seed=seed,
                                ceiling=pairs.ceiling()))
            r = rows[-1]
            print(f"seed {seed} {arm:27} round {k}: gold {r['gold']:.2f} KL {r['kl']:.2f} "
                  f"acc {r['held_out_acc']:.3f} ceiling {r['ceiling']:.3f}", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "dpo_iterative.json"))
    args = ap.parse_args(argv)
    if args.rounds < 2:
        raise ValueError(f"--rounds must be >= 2, got {args.rounds}")
    torch.set_num_threads(1)
    prov = provenance(["python", "benchmarks/bench_dpo_iterative.py"]
                      + (argv if argv is not None else sys.argv[1:]))
    t0 = time.process_time()
    task = lm.PreferenceTask(seed=0)
    sft, _ = lm.sft_model(task, seed=0, device="cpu")
    pairs = lm.sample_preference_pairs(sft, task, 3000, torch.Generator().manual_seed(0))  # the chapter's
    train, test = pairs.subset(slice(0, 2000)), pairs.subset(slice(2000, 3000))
    rows = []
    for seed in args.seeds:
        rows += run_seed(sft, task, train, test, seed, args.rounds)
        print(f"seed {seed} done, {time.process_time() - t0:.0f} s CPU", flush=True)
    out = results_record("bench_dpo_iterative.py", prov, cpu_seconds=round(time.process_time() - t0, 1),
                         arms=list(ARMS), rounds=args.rounds, seeds=args.seeds, pairs_per_round=N_PAIRS,
                         dpo=DPO, labeller="Bradley-Terry around the gold reward", rows=rows)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
