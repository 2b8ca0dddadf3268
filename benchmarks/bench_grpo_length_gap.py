"""Benchmark: the length bias of GRPO's per-sequence loss against Dr. GRPO on the stalling
addition task: the gap between the mean lengths of wrong and right completions, the mean length
of stalling completions (a length the reward does not depend on) and the stall rate, over more
seeds (and, optionally, longer runs) than the chapter's.

Run from the repository root (two GRPO runs per seed):

    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --steps 120 --window 20
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --losses grpo_nostd,dr_grpo_std
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --beta 0
    .venv/bin/python benchmarks/bench_grpo_length_gap.py --seeds 0,1,2,3,4 --digits 2 --finetune 100 --n-prompts 32

Each command is one *set* of runs. With ``--json PATH`` (the chapter's record:
``benchmarks/results/grpo_length_gap.json``) the set is written into that file, replacing the
set of the same name (``--set``; by default a name made from the options, such as
``"one digit, beta = 0, 40 steps"``) and keeping the others, with the provenance of the command
that wrote it (``stats.results_record``: date, CPU, load, versions, commit, command).

By default (the chapter's setting) the task is one-digit addition (``--digits 1``): the chapter's
450-step SFT model of the two-digit task is fine-tuned for ``--finetune`` steps (1,200) on
``StallingAdditionTask(p_stall, max_stall, digits=1)`` demonstrations (``stall_model``, cached),
after which it gets nearly every sum right when it does not stall, so that nearly every wrong
completion is a stall. ``--digits 2 --finetune 100 --beta 0.2 --n-prompts 16`` is the earlier
two-digit experiment, in which only about half to two thirds of the wrong completions stall
at the start and fewer later (the rest are the model's own short arithmetic errors). The model
is trained with GRPO (per-sequence token means, std-normalised advantages) and
with Dr. GRPO (constant denominator, no std), both with the k3 KL penalty ``--beta`` to the
fine-tuned model (which keeps some stalls to measure), ``--n-prompts`` prompts a step (32: twice
the chapter's usual batch) in groups of 8 and the chapter's learning rate; ``--losses
grpo_nostd,dr_grpo_std`` runs the other two cells of the 2 x 2 (per-sequence or constant
denominator, with or without the std) to tell which of Dr. GRPO's two changes does what. Prints,
per loss and seed, in ``--window``-step windows: the gap (mean length of wrong minus right
completions), the mean length of stalling completions (EOS included), the stall rate, the share
of wrong completions that stall and the sampled accuracy, then held-out pass@1 before and after
and the probability of stopping after a stall of k ``=`` (``stop_probability``) relative to the
start's, its range over the k whose stop shortens the completion (1 to ``max_new_tokens - 2``);
and tables of the first and last windows (markdown, for benchmarks/README.md).
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
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm.grpo_tasks import stall_model  # noqa: E402
from stats import provenance, results_record  # noqa: E402

DESCRIPTION = (
    "The length bias of GRPO's per-sequence loss against Dr. GRPO on the stalling addition task "
    "(book/grpo_variants.ipynb, section Loss aggregation and the length bias). Per run: first -> last "
    "window of the gap (mean length of wrong minus right completions), the mean length of stalling "
    "completions (EOS included), the stall rate, the share of wrong completions that stall, and the "
    "range over k = 1..6 of P(stop | k) of the final policy divided by the fine-tuned model's. Losses: "
    "grpo (per-sequence mean, group std), dr_grpo (constant denominator, no std), grpo_nostd, dr_grpo_std. "
    "Each set is written by one command (its own provenance); a set marked 'transcribed' was copied "
    "from the tables of benchmarks/README.md and not rerun since.")


def set_name(args) -> str:
    """The default name of a set of runs, from the options that differ from the chapter's."""
    parts = ["one digit" if args.digits == 1 else f"{'two' if args.digits == 2 else args.digits} digits"]
    if args.losses == "grpo_nostd,dr_grpo_std":
        parts.append("the 2 x 2's other cells")
    elif args.losses != "grpo,dr_grpo":
        parts.append(f"losses {args.losses}")
    if args.beta != 0.5:
        parts.append(f"beta = {args.beta:g}")
    if args.n_prompts != 32:
        parts.append(f"{args.n_prompts} prompts")
    return ", ".join(parts + [f"{args.steps} steps"])


def write_set(path: Path, set_info: dict, runs: list) -> None:
    """Write one set of runs into the results file ``path``, replacing the set of the same name
    (in place, so the order of the sets is kept) and keeping the others."""
    record = json.loads(path.read_text()) if path.exists() else {}
    sets = [s for s in record.get("sets", [])]
    names = [s["set"] for s in sets]
    if set_info["set"] in names:
        sets[names.index(set_info["set"])] = set_info
    else:
        sets.append(set_info)
    old = [r for r in record.get("runs", []) if r["set"] != set_info["set"]]
    order = [s["set"] for s in sets]
    new_runs = sorted(old + runs, key=lambda r: order.index(r["set"]))  # stable: seeds keep their order
    out = dict(benchmark="benchmarks/bench_grpo_length_gap.py", description=DESCRIPTION, sets=sets,
               runs=new_runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


LOSSES = {  # name -> (label, train_grpo's loss_type and scale)
    "grpo": ("GRPO", dict(loss_type="grpo", scale="group")),
    "dr_grpo": ("Dr. GRPO", dict(loss_type="dr_grpo", scale="none")),
    "grpo_nostd": ("GRPO aggregation, no std", dict(loss_type="grpo", scale="none")),
    "dr_grpo_std": ("Dr. GRPO aggregation, std", dict(loss_type="dr_grpo", scale="group")),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--digits", type=int, default=1)
    ap.add_argument("--p-stall", type=float, default=0.5)
    ap.add_argument("--max-stall", type=int, default=6)
    ap.add_argument("--finetune", type=int, default=1200)
    ap.add_argument("--beta", type=float, default=0.5)
    ap.add_argument("--n-prompts", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--losses", default="grpo,dr_grpo",
                    help=f"comma-separated, from {', '.join(LOSSES)} (the last two: the 2 x 2 of "
                         "aggregation and std scaling)")
    ap.add_argument("--json", type=Path, default=None, help="results file to write this set into")
    ap.add_argument("--set", default=None, help="the set's name in --json (default: from the options)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    prov = provenance(["python", "benchmarks/bench_grpo_length_gap.py"]
                      + list(sys.argv[1:] if argv is None else argv))
    name_of_set = args.set or set_name(args)
    records = []
    t0 = time.process_time()
    staller, task = stall_model(args.p_stall, args.max_stall, args.finetune, digits=args.digits)
    print(f"stall model: {time.process_time() - t0:.1f} s CPU (0 when cached)", flush=True)
    K = task.max_new_tokens - 2  # k = 1..K: stopping after k "=" gives a shorter completion than going on
    p_ref = task.stop_probability(staller, max_k=K)
    W = args.window

    metrics = {"len_stall": task.stall_length, "stall_rate": task.stall_rate, "stall_share": task.stall_share}
    losses = {name: LOSSES[name] for name in args.losses.split(",")}
    rows, summary = [], {}
    for key, (name, kw) in losses.items():
        for seed in (int(s) for s in args.seeds.split(",")):
            t0 = time.process_time()
            policy, h = train_grpo(staller, task, args.steps, n_prompts=args.n_prompts, group_size=8, lr=2e-4,
                                   warmup=10, beta=args.beta, eval_every=args.steps, eval_greedy=False,
                                   metrics=metrics, seed=seed, **kw)
            cpu = time.process_time() - t0
            n = len(h["len_wrong"]) // W * W
            win = lambda x: np.nanmean(np.asarray(x, dtype=float)[:n].reshape(-1, W), 1)  # noqa: E731
            gap = win(np.asarray(h["len_wrong"]) - np.asarray(h["len_correct"]))
            stall, rate, share = win(h["len_stall"]), win(h["stall_rate"]), win(h["stall_share"])
            acc = win(h["accuracy"])
            ratio = task.stop_probability(policy, max_k=K) / p_ref
            print(f"{name} seed {seed}: gap {gap.round(2).tolist()}; stall length {stall.round(2).tolist()}; "
                  f"stall rate {rate.round(2).tolist()}; stalls among wrong {share.round(2).tolist()}; "
                  f"accuracy {acc.round(2).tolist()}; pass@1 {h['pass1'][0]:.3f} -> {h['pass1'][-1]:.3f}; "
                  f"P(stop | k) / start {ratio.min():.2f}-{ratio.max():.2f}; {cpu:.1f} s CPU", flush=True)
            records.append(dict(set=name_of_set, loss=key, seed=seed, gap=[round(gap[0], 2), round(gap[-1], 2)],
                                stall_length=[round(stall[0], 2), round(stall[-1], 2)],
                                stall_rate=[round(rate[0], 2), round(rate[-1], 2)],
                                stall_share=[round(share[0], 2), round(share[-1], 2)],
                                p_stop_ratio_range=[round(float(ratio.min()), 2), round(float(ratio.max()), 2)],
                                pass1=[round(h["pass1"][0], 3), round(h["pass1"][-1], 3)], cpu_s=round(cpu, 1)))
            summary.setdefault(name, []).append((gap[0], gap[-1], stall[0], stall[-1], rate[0], rate[-1],
                                                 share[0], share[-1]))
            rows.append(f"| {name} | {seed} | {gap[0]:.2f} -> {gap[-1]:.2f} | {stall[0]:.2f} -> {stall[-1]:.2f} "
                        f"| {rate[0]:.2f} -> {rate[-1]:.2f} | {share[0]:.2f} -> {share[-1]:.2f} "
                        f"| {ratio.min():.2f}-{ratio.max():.2f} |")
    print(f"\n| loss | seed | gap, wrong - right (first -> last {W}-step window) | stall length | stall rate | "
          "stalls among wrong | P(stop &#124; k) / start |\n| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    med = lambda v: f"{np.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]"  # noqa: E731
    print(f"\nmedian [min, max] over seeds, first -> last {W}-step window\n| loss | gap, wrong - right | "
          "change of the gap | stall length | stall rate |\n| --- | --- | --- | --- | --- |")
    for name, v in summary.items():
        v = np.array(v)
        print(f"| {name} | {med(v[:, 0])} -> {med(v[:, 1])} | {med(v[:, 1] - v[:, 0])} | "
              + " | ".join(f"{med(v[:, 2 * i])} -> {med(v[:, 2 * i + 1])}" for i in (1, 2)) + " |")
    if args.json:
        info = results_record("benchmarks/bench_grpo_length_gap.py", prov, set=name_of_set, steps=args.steps,
                              window=W, beta=args.beta, n_prompts=args.n_prompts, digits=args.digits,
                              finetune=args.finetune, p_stall=args.p_stall, max_stall=args.max_stall,
                              losses=list(losses), seeds=[int(s) for s in args.seeds.split(",")])
        info = dict(set=info.pop("set"), **info)  # the name first
        write_set(args.json, info, records)
        print(f"wrote the set {name_of_set!r} into {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
