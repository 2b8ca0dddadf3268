"""Benchmark: GRPO beyond imitation and what sharpening is (book/grpo.ipynb), over seeds and the
floating-point builds of tools/builds.py.

    .venv/bin/python benchmarks/bench_grpo_beyond.py --builds default,avx2,compatible --seeds 0,1,2
    .venv/bin/python benchmarks/bench_grpo_beyond.py --builds avx2-mkl512 --merge   # add a build

For each build (a child process under that build's environment and model cache, one at a time)
and seed, with the chapter's settings:

- *beyond imitation*: GRPO from ``weak_teacher_model()`` (the converged SFT model fine-tuned on a
  teacher that drops the units carry with probability 0.8), 80 steps; greedy accuracy on the
  held-out prompts with a carry, without one and on all of them, at the start and at the end;
  sampled pass@1 (two samples a held-out prompt); pass@k (k = 1..16, 16 samples a prompt) on
  the held-out carry prompts, at the start (temperatures 1 and 0.5) and after training;
- *sharpening*: GRPO from ``slip_model()`` (the GRPO chapter's slipping model), 100 steps;
  greedy and pass@1 at start and end, pass@k on the first 300 held-out prompts at the start
  (temperatures 1, 0.5, 0.3) and after training.

Writes ``benchmarks/results/grpo_beyond.json`` (with the versions, CPU, command and date), which
the GRPO chapter renders and asserts on, and the appendix *Reproducibility and benchmarks* shows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KS = list(range(1, 17))
N_SAMPLES = 16
WEAK = dict(p_drop=0.8, finetune_steps=200, steps=80)
SLIP = dict(p_slip=0.5, finetune_steps=200, steps=100, n_prompts_passk=300)
CONFIG = dict(n_prompts=16, group_size=8, lr=2e-4, warmup=10, cosine=True, beta=0.04)
CURVE_EVERY = 10


def child(seeds, out):
    import numpy as np
    import torch

    import rlnotes.grpo as grpo
    import rlnotes.lm as lm
    from rlnotes.lm.grpo_tasks import slip_model
    from rlnotes.lm.passk import correct_counts, pass_at_k_curve
    from rlnotes.lm.weak_teacher import carry_split_tasks, weak_teacher_model

    torch.set_num_threads(1)
    t_start = time.process_time()
    res = dict(capability=torch.backends.cpu.get_cpu_capability(), weak={}, slip={})

    def curve(model, task, temperature=1.0, n_prompts=None):
        counts = correct_counts(model, task, N_SAMPLES, temperature=temperature, n_prompts=n_prompts,
                                generator=torch.Generator().manual_seed(0))
        return [round(float(v), 4) for v in pass_at_k_curve(counts, N_SAMPLES, KS)]

    # beyond imitation
    weak, wtask = weak_teacher_model(p_drop=WEAK["p_drop"], steps=WEAK["finetune_steps"])
    carry, no_carry = carry_split_tasks(wtask)
    res["weak"]["start"] = dict(
        greedy_carry=lm.accuracy(weak, carry), greedy_no_carry=lm.accuracy(weak, no_carry),
        greedy=lm.accuracy(weak, wtask),
        passk_carry=curve(weak, carry), passk_carry_t05=curve(weak, carry, 0.5))
    res["weak"]["runs"] = {}
    for seed in seeds:
        curve_steps, curve_greedy = [0], [res["weak"]["start"]["greedy_carry"]]

        def track(step, policy, hist):
            if step % CURVE_EVERY == 0:
                policy.eval()
                curve_steps.append(step)
                curve_greedy.append(lm.accuracy(policy, carry))
                policy.train()
            return False

        t0 = time.process_time()
        policy, h = grpo.train_grpo(weak, wtask, WEAK["steps"], seed=seed, eval_every=WEAK["steps"],
                                    eval_samples=2, callback=track, **CONFIG)
        res["weak"]["runs"][str(seed)] = dict(
            cpu_s=round(time.process_time() - t0, 1),
            pass1=h["pass1"], greedy=h["greedy"],
            greedy_carry=lm.accuracy(policy, carry), greedy_no_carry=lm.accuracy(policy, no_carry),
            curve_steps=curve_steps, curve_greedy_carry=curve_greedy,
            passk_carry=curve(policy, carry),
            zero_var_first10=float(np.mean(h["zero_var"][:10])),
            zero_var_last10=float(np.mean(h["zero_var"][-10:])))
        print(f"weak seed {seed}: carry greedy {curve_greedy[0]:.3f} -> "
              f"{res['weak']['runs'][str(seed)]['greedy_carry']:.3f}", flush=True)

    # sharpening
    task = lm.AdditionTask()
    slip, _ = slip_model(p_slip=SLIP["p_slip"], steps=SLIP["finetune_steps"], sft_steps=1200)
    n = SLIP["n_prompts_passk"]
    res["slip"]["start"] = dict(greedy=lm.accuracy(slip, task),
                                passk={str(t): curve(slip, task, t, n) for t in (1.0, 0.5, 0.3)})
    res["slip"]["runs"] = {}
    for seed in seeds:
        t0 = time.process_time()
        policy, h = grpo.train_grpo(slip, task, SLIP["steps"], seed=seed, eval_every=SLIP["steps"],
                                    eval_samples=2, **CONFIG)
        res["slip"]["runs"][str(seed)] = dict(cpu_s=round(time.process_time() - t0, 1),
                                              pass1=h["pass1"], greedy=h["greedy"],
                                              passk=curve(policy, task, 1.0, n))
        print(f"slip seed {seed}: pass@1 {h['pass1'][0]:.3f} -> {h['pass1'][-1]:.3f}", flush=True)
    res["cpu_s"] = round(time.process_time() - t_start, 1)
    Path(out).write_text(json.dumps(res))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", default="default,avx2,compatible")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "grpo_beyond.json"))
    ap.add_argument("--merge", action="store_true",
                    help="add the builds to the record already in --out (same settings) instead of starting anew")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.child:
        child(seeds, args.child)
        return 0
    from tools.builds import build_env, parse_builds

    import torch

    builds = parse_builds(args.builds)
    record = {
        "benchmark": "benchmarks/bench_grpo_beyond.py",
        "description": ("GRPO beyond imitation (from a model fine-tuned on a teacher that drops the units "
                        "carry with probability 0.8) and GRPO's sharpening (from the slipping model), per "
                        "floating-point build of tools/builds.py and seed, with the GRPO chapter's settings; "
                        "accuracies on the 1,000 held-out prompts (434 with a units carry), pass@k by the "
                        "unbiased estimator from 16 samples a prompt"),
        "command": ".venv/bin/python benchmarks/bench_grpo_beyond.py --builds " + args.builds
                   + " --seeds " + args.seeds,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {_cpu_name()}, {os.cpu_count()} cores",
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "settings": dict(weak=WEAK, slip=SLIP, grpo=CONFIG, ks=KS, n_samples=N_SAMPLES,
                         curve_every=CURVE_EVERY, seeds=seeds),
        "builds": {},
    }
    if args.merge and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        if old["settings"] != json.loads(json.dumps(record["settings"])):
            raise SystemExit(f"--merge: the record in {args.out} has other settings")
        old["builds"] = {b: r for b, r in old["builds"].items() if b not in builds}
        commands = old.pop("commands", None) or [old.pop("command")]
        old["commands"] = commands + [record["command"] + " --merge"]
        old.pop("command", None)
        old["date"] = old["date"] + ", " + record["date"] if record["date"] not in old["date"] else old["date"]
        record = dict(old, builds=old["builds"])
    for build in builds:
        with tempfile.TemporaryDirectory() as tmp:
            part = Path(tmp) / "part.json"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, __file__, "--seeds", args.seeds, "--child", str(part)],
                           env=dict(build_env(build), RLNOTES_PROGRESS="0"), check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            record["builds"][build] = json.loads(part.read_text())
            record["builds"][build]["process_cpu_s"] = round(
                after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1)
        print(f"build {build} done", flush=True)
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    return 0


def _cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
