"""DPO against PPO on the RLHF chapter's preference data: the gold-reward vs KL frontier.

Every point is a trained policy measured by ``rlnotes.lm.frontier.gold_and_kl`` (1,000 fresh
prompts, one completion each, the same prompts for every policy): gold reward and
KL(pi || pi_ref), the k1 estimate summed over tokens. DPO trains on the 2,000 preference pairs of
the RLHF chapter; PPO trains against the reward model fitted to the same 2,000 pairs (as in the
RLHF chapter: 60 iterations of 64 completions); "PPO, gold reward" maximises the hidden gold
reward itself (a reference point no method with only preference data has; the gold optimum, the
best completion of each evaluation prompt, is recorded as ``gold_optimum``). DPO's betas fill
the gap between 0.3 and 1 (0.5, 0.7), and PPO's include DPO's 0.3 and 1 so that the two can be
compared at equal beta (0.03, 0.1, 0.3, 1). "DPO, on-policy round" trains the beta = 0.1 DPO
policy for 3 more epochs on 2,000 fresh pairs sampled from it; "DPO, offline round", its
control, trains it for the same 3 epochs on the original pairs again. Each setting runs for
several training seeds (the SFT model, the pairs and the reward model are fixed). "PPO, shared
critic" repeats PPO at the largest KL coefficient with ``detach_value=False`` (the critic's
error trains the policy's backbone, the lab's old default) to record why that default changed.

    .venv/bin/python benchmarks/bench_dpo_frontier.py            # writes results/dpo_frontier.json
    .venv/bin/python benchmarks/bench_dpo_frontier.py --seeds 1  # quicker
    .venv/bin/python benchmarks/bench_dpo_frontier.py --only ppo # rerun PPO, keep the recorded DPO rows
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

import torch

import rlnotes.lm as lm
from rlnotes.dpo import dpo_sweep, ppo_sweep, train_dpo
from rlnotes.lm.frontier import gold_and_kl

DPO_BETAS = [0.03, 0.1, 0.3, 0.5, 0.7, 1.0, 3.0]
PPO_BETAS = [0.0, 0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0]
GOLD_PPO_BETAS = [0.05, 0.2, 0.5]
SHARED_CRITIC_BETAS = [0.5]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "dpo_frontier.json"))
    ap.add_argument("--only", choices=["dpo", "ppo"], default=None,
                    help="rerun one method's rows and keep the other's from the recorded --out file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    device = torch.device("cpu")
    t0 = time.process_time()
    task = lm.PreferenceTask(seed=0)
    sft, _ = lm.sft_model(task, seed=0, device=device)
    pairs = lm.sample_preference_pairs(sft, task, 3000, torch.Generator().manual_seed(0))
    train, test = pairs.subset(slice(0, 2000)), pairs.subset(slice(2000, 3000))
    rm, _ = lm.train_reward_model(sft, train, epochs=4, lr=3e-3, seed=0, device=device, valid=test)
    ref_x, ref_y, ref_m = task.sft_batch(1000, torch.Generator().manual_seed(2))
    rm.normalise(ref_x, ref_y, ref_m)

    def proxy(x, y, m):
        with torch.no_grad():
            return rm(x, y, m)

    rows, kept, previous = [], [], {}
    if args.only is not None:
        previous = json.loads(Path(args.out).read_text())
        kept = [r for r in previous["rows"] if not r["method"].startswith(args.only.upper())]
    for seed in range(args.seeds):
        if args.only in (None, "dpo"):
            for r in dpo_sweep(sft, train, task, DPO_BETAS, epochs=3, lr=1e-3, seed=seed, device=device):
                rows.append(dict(r, seed=seed))
            # a second round on the same budget (3 epochs of 2,000 pairs): fresh pairs sampled
            # from the DPO policy (on-policy), or the original pairs again (the control)
            dpo_kw = dict(beta=0.1, epochs=3, lr=1e-3, seed=seed, device=device)
            first, _ = train_dpo(sft, train, **dpo_kw)
            fresh = lm.sample_preference_pairs(first, task, 2000, torch.Generator().manual_seed(100 + seed))
            for name, data in (("DPO, on-policy round", fresh), ("DPO, offline round", train)):
                second, _ = train_dpo(first, data, ref=sft, **dpo_kw)
                rows.append(dict(method=name, beta=0.1, seed=seed, **gold_and_kl(second, sft, task)))
        if args.only in (None, "ppo"):
            ppo = dict(iterations=60, batch_size=64, lr=1e-3, seed=seed, device=device)
            for r in ppo_sweep(sft, task, proxy, PPO_BETAS, **ppo):
                rows.append(dict(r, seed=seed))
            for r in ppo_sweep(sft, task, task.reward, GOLD_PPO_BETAS, **ppo):
                rows.append(dict(r, method="PPO, gold reward", seed=seed))
            for r in ppo_sweep(sft, task, proxy, SHARED_CRITIC_BETAS, detach_value=False, **ppo):
                rows.append(dict(r, method="PPO, shared critic", seed=seed))
        print(f"seed {seed} done, {time.process_time() - t0:.0f} s CPU", flush=True)
    command = "python benchmarks/bench_dpo_frontier.py --seeds %d" % args.seeds
    machine = f"{platform.machine()}, torch {torch.__version__.split('+')[0]}, 1 thread"
    eval_prompts = task.sample_prompts(1000, torch.Generator().manual_seed(10))  # gold_and_kl's
    optimum = float(task.gold_optimum(eval_prompts)[0].mean())
    out = dict(date=datetime.date.today().isoformat(), command=command, machine=machine,
               cpu_seconds=round(time.process_time() - t0, 1), kept=None, gold_optimum=optimum,
               rows=kept + rows)
    if args.only is not None:  # say which rows come from which run
        other = "ppo" if args.only == "dpo" else "dpo"
        out["command"] = f"{command} --only {args.only}"
        out["kept"] = dict(method=other, date=previous.get("date"), command=previous.get("command"),
                           cpu_seconds=previous.get("cpu_seconds"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    by = {}
    for r in rows:
        by.setdefault((r["method"], r["beta"]), []).append(r)
    print(f"{'method':18} {'beta':>6} {'KL (nats)':>10} {'gold':>7}   (mean over {args.seeds} seeds)")
    for (method, beta), rs in by.items():
        kl = sum(r["kl"] for r in rs) / len(rs)
        gold = sum(r["gold"] for r in rs) / len(rs)
        print(f"{method:18} {beta:6.2f} {kl:10.2f} {gold:7.2f}")


if __name__ == "__main__":
    main()
