"""Benchmark: PPO's critic for RLHF, a value head on the policy against a value model initialised
from the reward model, over several seeds.

Run from the repository root (2 critics x 3 seeds of the chapter's PPO run; a few CPU minutes):

    .venv/bin/python benchmarks/bench_rlhf_critic.py --json benchmarks/results/rlhf_critic.json

The experiment of book/rlhf.ipynb, section "Four more details" (the value model). The chapter's
SFT model and reward model (2,000 pairs of generator seed 0, 4 epochs, lr 3e-3, training seed 0,
shifted so that 1,000 demonstrations score 0 on average), and its PPO run (60 iterations of 64
completions, beta 0.05, lr 1e-3, two epochs, one minibatch) with training seed s for each seed in
``--seeds``, once per critic:

- ``head``: ``train_ppo``'s default, a linear value head on the policy's features, started at 0,
  whose error does not train them (``detach_value=True``);
- ``reward_model``: ``train_ppo(..., critic=rm)``, a separate value network, a copy of the reward
  model whose value at s_t starts as the reward model's score of the partial completion.

Recorded per run: the gold reward of the final policy (1,000 fresh prompts, generator seed 10, as
the chapter's ``gold_of``), the means over the last 10 iterations of the gold reward, the proxy
score, the KL from the reference (nats per completion), the critic's value loss and explained
variance, the explained variance of the first iteration and over the first 10, and the CPU seconds
of the run; with the provenance.
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
import rlnotes.lm as lm  # noqa: E402
from rlnotes.rlhf_ppo import train_ppo  # noqa: E402
from stats import provenance, results_record  # noqa: E402

PPO = dict(iterations=60, batch_size=64, beta=0.05, lr=1e-3)


def chapter_reward_model(sft, task):
    """The RLHF chapter's reward model, trained and normalised as there."""
    pairs = lm.sample_preference_pairs(sft, task, 3000, torch.Generator().manual_seed(0))
    rm, hist = lm.train_reward_model(sft, pairs.subset(slice(0, 2000)), epochs=4, lr=3e-3, seed=0,
                                     device="cpu", valid=pairs.subset(slice(2000, 3000)))
    rm.normalise(*task.sft_batch(1000, torch.Generator().manual_seed(2)))
    return rm.eval(), float(hist["valid_acc"][-1])


def gold_of(policy, task, n=1000, seed=10):
    g = torch.Generator().manual_seed(seed)
    x = task.sample_prompts(n, g)
    y, _, m = lm.generate(policy, x, task.max_new_tokens, eos_id=task.tokenizer.eos_id, generator=g)
    return float(task.reward(x, y, m).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    prov = provenance(["python", "benchmarks/bench_rlhf_critic.py"] + list(sys.argv[1:] if argv is None else argv))
    cpu0 = time.process_time()
    torch.set_num_threads(1)
    task = lm.PreferenceTask(seed=0)
    sft, _ = lm.sft_model(task, seed=0, device="cpu")
    rm, rm_acc = chapter_reward_model(sft, task)

    def proxy(x, y, m):
        with torch.no_grad():
            return rm(x, y, m)

    rows = []
    last = lambda h, k: round(float(np.mean(h[k][-10:])), 4)  # noqa: E731
    for seed in seeds:
        for name, critic in (("head", "head"), ("reward_model", rm)):
            t0 = time.process_time()
            agent, h = train_ppo(sft, task, proxy, gold_fn=task.reward, seed=seed, device="cpu",
                                 critic=critic, **PPO)
            cpu = time.process_time() - t0
            row = dict(critic=name, seed=seed, gold_final=round(gold_of(agent.policy, task), 4),
                       gold=last(h, "gold"), proxy=last(h, "score"), kl=last(h, "kl"),
                       value_loss=last(h, "value_loss"), ev=last(h, "explained_variance"),
                       ev_first=round(h["explained_variance"][0], 4),
                       ev_first10=round(float(np.mean(h["explained_variance"][:10])), 4),
                       value_loss_first10=round(float(np.mean(h["value_loss"][:10])), 4),
                       cpu_s=round(cpu, 1),
                       curves={k: [round(v, 4) for v in h[k]] for k in
                               ("gold", "score", "kl", "value_loss", "explained_variance")})
            rows.append(row)
            print(f"seed {seed} critic {name:12}: gold final {row['gold_final']:.2f} (last 10 {row['gold']:.2f}) "
                  f"proxy {row['proxy']:.2f} KL {row['kl']:.2f} value loss {row['value_loss']:.4f} "
                  f"EV first {row['ev_first']:.2f} first 10 {row['ev_first10']:.2f} last 10 {row['ev']:.2f} "
                  f"({cpu:.0f} s CPU)", flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results_record(
            "benchmarks/bench_rlhf_critic.py", prov, cpu_s=round(time.process_time() - cpu0, 1),
            description=("PPO for RLHF with the chapter's SFT model, reward model (held-out accuracy "
                         f"{rm_acc:.3f}) and settings (60 iterations of 64 completions, beta 0.05, lr 1e-3), "
                         "per critic and training seed: 'head', a linear value head on the policy's "
                         "detached features started at 0 (train_ppo's default), against 'reward_model', a "
                         "separate value network copied from the reward model (train_ppo(critic=rm)). "
                         "gold_final: gold reward of the final policy on 1,000 fresh prompts; gold, proxy, "
                         "kl, value_loss, ev: means over the last 10 iterations; ev_first, ev_first10: the "
                         "critic's explained variance at the first iteration and over the first 10"),
            settings=PPO, seeds=seeds, rm_valid_acc=round(rm_acc, 4), rows=rows), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
