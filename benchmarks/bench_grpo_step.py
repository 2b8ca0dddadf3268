"""Benchmark: one GRPO step of rlnotes on the two-digit addition task, raced against TRL's
GRPOTrainer in the same run.

Run from the repository root:

    .venv/bin/python benchmarks/bench_grpo_step.py --trl-python TRL/bin/python   # race, 3 rounds
    .venv/bin/python benchmarks/bench_grpo_step.py                               # rlnotes only
    .venv/bin/python benchmarks/bench_grpo_step.py --beta 0.04  # with the k3 penalty

(``make bench-peers`` makes the TRL environment and runs this script through
``benchmarks/peers/race.py``.) The workload: the GRPO chapter's SFT model of ``AdditionTask``
(450 SFT steps; 2 layers, 4 heads, width 128: 0.40 M parameters, fp32), 8 prompts a step,
G = 8 completions of at most 4 tokens each (64 completions), one gradient step per batch,
lr 3e-5, one torch thread. TRL's side (``benchmarks/peers/trl_grpo.py``, in its own process and
environment) starts from the very same weights in a transformers GPT-2, with the same
character tokenizer and batch. The libraries take turns, ``--rounds`` times, the order
alternating, so that a change in the machine's load hits both.

rlnotes' step is timed in two parts, as ``train_grpo`` records them: *generation* (sampling the
64 completions with the KV cache, each distinct prefix once, and scoring them) and *update*
(pi_ref's log-probs when beta > 0, one grouped teacher-forced forward, the loss, backward,
Adam); TRL's from its trainer's
``on_step_begin`` to ``on_step_end`` (generation, rewards, loss, backward, optimiser). Held-out
evaluations are not timed. Each round reports the median over its timed steps (after
``--warmup`` untimed ones); wall time and the process's CPU time (user + sys). ``--json``
writes every step time, the medians with intervals and the provenance.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the working tree's rlnotes
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from rlnotes.grpo import train_grpo  # noqa: E402
from rlnotes.lm import AdditionTask, TinyGPT, sft_model  # noqa: E402
from stats import provenance, repo_command, summarize  # noqa: E402

WORKLOAD = dict(task="AdditionTask(digits=2): 8,100 pairs, 1,000 held out, 15 tokens",
                model="TinyGPT / GPT-2, 2 layers, 4 heads, width 128, context 16, 0.40 M parameters",
                sft_steps=450, prompts_per_step=8, group_size=8, max_new_tokens=4, lr=3e-5,
                dtype="float32", threads=1)


def run_rlnotes(state: dict, task, steps: int, warmup: int, beta: float) -> dict:
    """One rlnotes round from the SFT weights: per-step wall and CPU times (timed steps only)."""
    model = TinyGPT(task.tokenizer.vocab_size, task.max_len)
    model.load_state_dict(state)
    n = warmup + steps
    _, hist = train_grpo(model, task, n, n_prompts=8, group_size=8, lr=3e-5, beta=beta,
                         eval_every=n, seed=0)
    gen, upd = np.array(hist["gen_s"][warmup:]), np.array(hist["update_s"][warmup:])
    gen_cpu, upd_cpu = np.array(hist["gen_cpu_s"][warmup:]), np.array(hist["update_cpu_s"][warmup:])
    return dict(library="rlnotes", step_s=(gen + upd).tolist(),
                step_cpu_s=(gen_cpu + upd_cpu).tolist(), gen_s=gen.tolist(), update_s=upd.tolist())


def run_trl(python: str, weights: Path, steps: int, warmup: int, beta: float,
            timeout: float = 900) -> dict:
    """One TRL round, in a process of the TRL environment."""
    cmd = [python, str(ROOT / "benchmarks" / "peers" / "trl_grpo.py"), "--weights", str(weights),
           "--steps", str(steps), "--warmup", str(warmup), "--beta", str(beta)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"TRL's run failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary_of(rounds: list[dict], library: str) -> dict:
    """Pooled median step (ms) with its bootstrap interval, and each round's median."""
    mine = [r for r in rounds if r["library"] == library]
    wall = [1000 * t for r in mine for t in r["step_s"]]
    cpu = [1000 * t for r in mine for t in r["step_cpu_s"]]
    return dict(step_ms=summarize(wall), step_cpu_ms=summarize(cpu),
                round_median_ms=[1000 * float(np.median(r["step_s"])) for r in mine],
                round_median_cpu_ms=[1000 * float(np.median(r["step_cpu_s"])) for r in mine])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="timed steps a round")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each library")
    ap.add_argument("--beta", type=float, default=0.0, help="k3 penalty weight (TRL default 0)")
    ap.add_argument("--trl-python", default=None,
                    help="Python of the TRL environment (benchmarks/peers/requirements-trl.txt); "
                         "without it, rlnotes only")
    ap.add_argument("--json", default=None, help="write the results file here")
    ap.add_argument("--min-speedup", type=float, default=1.0,
                    help="exit 1 when rlnotes' median step is not this many times faster than "
                         "TRL's, measured in this run")
    args = ap.parse_args(argv)
    for name in ("steps", "warmup", "rounds"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            ap.error(f"--{name} must be >= {0 if name == 'warmup' else 1}")
    torch.set_num_threads(1)
    os.environ.setdefault("RLNOTES_PROGRESS", "0")
    command = repo_command("benchmarks/bench_grpo_step.py",
                           sys.argv[1:] if argv is None else argv, ROOT)
    prov = provenance(command)
    task = AdditionTask()
    model, _ = sft_model(task, seed=0, steps=450)  # the GRPO chapter's SFT model
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    libraries = ["rlnotes"] + (["trl"] if args.trl_python else [])
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "sft.pt"
        torch.save(state, weights)
        for r in range(args.rounds):
            for lib in (libraries if r % 2 == 0 else libraries[::-1]):
                t0 = time.perf_counter()
                if lib == "rlnotes":
                    rec = run_rlnotes(state, task, args.steps, args.warmup, args.beta)
                else:
                    rec = run_trl(args.trl_python, weights, args.steps, args.warmup, args.beta)
                rec["round"], rec["round_wall_s"] = r, time.perf_counter() - t0
                rounds.append(rec)
                print(f"round {r} {lib:8s}: median step {1000 * np.median(rec['step_s']):.1f} ms "
                      f"(CPU {1000 * np.median(rec['step_cpu_s']):.1f} ms)", flush=True)
    prov["loadavg_end"] = list(os.getloadavg())
    summary = {lib: summary_of(rounds, lib) for lib in libraries}
    ms = lambda x: 1000 * float(np.median(x))  # noqa: E731
    ours = [r for r in rounds if r["library"] == "rlnotes"]
    print(f"\nGRPO step, addition task, 8 prompts x G=8, beta={args.beta}, "
          f"{args.rounds} round(s) of {args.steps} timed steps")
    print("| part | rlnotes wall (ms, median) | rlnotes CPU (ms, median) |")
    print("| --- | ---: | ---: |")
    print(f"| generation (+ reward) | {ms([t for r in ours for t in r['gen_s']]):.1f} | |")
    print(f"| update (forward, backward, Adam; ref if beta > 0) | "
          f"{ms([t for r in ours for t in r['update_s']]):.1f} | |")
    for lib in libraries:
        s = summary[lib]["step_ms"]
        c = summary[lib]["step_cpu_ms"]
        print(f"| whole step, {lib} | {s['median']:.1f} [{s['ci_low']:.1f}, {s['ci_high']:.1f}] "
              f"| {c['median']:.1f} |")
    status = 0
    ratio = None
    if "trl" in summary:
        ratio = summary["trl"]["step_ms"]["median"] / summary["rlnotes"]["step_ms"]["median"]
        ratio_cpu = (summary["trl"]["step_cpu_ms"]["median"]
                     / summary["rlnotes"]["step_cpu_ms"]["median"])
        print(f"TRL's median step / rlnotes': {ratio:.2f} by wall time, {ratio_cpu:.2f} by CPU "
              f"time (same run)")
        status = 0 if ratio >= args.min_speedup else 1
    if args.json:
        versions = {"rlnotes": dict(torch=torch.__version__, numpy=np.__version__,
                                    python=sys.version.split()[0])}
        for r in rounds:
            if r["library"] == "trl":
                versions["trl"] = r["versions"]
        data = dict(kind="grpo_step", provenance=prov, versions=versions,
                    workload=dict(WORKLOAD, beta=args.beta, timed_steps=args.steps,
                                  warmup_steps=args.warmup, rounds=args.rounds),
                    summary=summary, ratio_trl_over_rlnotes=ratio, rounds=rounds)
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
