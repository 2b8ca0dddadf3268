"""Benchmark: the language-model lab (rlnotes.lm) at the size of the peers' table.

Run from the repository root:

    .venv/bin/python benchmarks/bench_lm.py                 # CPU, one thread; and CUDA if present
    .venv/bin/python benchmarks/bench_lm.py --repeats 50 --batch 64 256

Model: TinyGPT with 2 layers, 4 heads, width 128, context 16 (0.40 M parameters), the size of
the GPT-2 that benchmarks/bench_grpo_step.py races in TRL, on the two-digit addition task
(prompts "12+35=" with BOS: 7 tokens).
It times, with the best of ``--repeats`` runs (so that other load disturbs the numbers as little
as possible):

- generation of B completions x 4 new tokens (no early stop), with and without the KV cache;
  completions/s and new tokens/s; it first checks that both give the same tokens and that the
  log-probabilities match ``completion_logprobs``;
- one SFT step (batch 64, forward, backward, AdamW);
- one PPO iteration of ``rlnotes.rlhf_ppo.train_ppo`` (64 prompts, one completion each, two epochs of
  one minibatch: generation, reference and old log-probs, critic, two updates), with the exact-
  match reward;

on the CPU with one torch thread, and on CUDA when it is available (rows skipped otherwise).
TRL's GRPO step is raced side by side by ``make bench-peers`` (benchmarks/bench_grpo_step.py).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's rlnotes
import rlnotes.lm as lm  # noqa: E402
from rlnotes.lm.sft import sft_loss  # noqa: E402
from rlnotes.rlhf_ppo import train_ppo  # noqa: E402


def best_time(fn, repeats, device):
    """Best wall time and best CPU time (of this process) over ``repeats`` runs, in seconds.
    On a machine shared with other jobs the CPU time is the steadier of the two; on CUDA the
    wall time is what counts."""
    fn()  # warm-up
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu


def row(device, what, times, count, unit):
    """A table row; throughput from the CPU time on the CPU, from the wall time on CUDA."""
    wall, cpu = times
    t = cpu if device.type == "cpu" else wall
    return (device.type, what, f"{wall * 1000:.1f}", f"{cpu * 1000:.1f}",
            ", ".join(f"{c / t:,.0f} {u}" for c, u in zip(count, unit)))


def bench_device(device, batches, repeats, rows):
    task = lm.AdditionTask()
    model = lm.TinyGPT(task.tokenizer.vocab_size, task.max_len, n_layers=2, n_heads=4, width=128,
                       seed=0).to(device)
    assert 0.39e6 < model.num_parameters() < 0.41e6
    g = torch.Generator().manual_seed(0)
    for B in batches:
        prompts = task.sample_prompts(B, g)
        # correctness first: cache and recomputation agree, and logp matches teacher forcing
        outs = [lm.decode(model, prompts, 4, generator=torch.Generator().manual_seed(1), use_cache=c)
                for c in (True, False)]
        assert torch.equal(outs[0][0], outs[1][0])
        again = lm.completion_logprobs(model, prompts, outs[0][0], outs[0][2])
        assert torch.allclose(again, outs[0][1], atol=1e-4)
        for use_cache in (True, False):
            t = best_time(lambda: lm.decode(model, prompts, 4, generator=g, use_cache=use_cache),
                          repeats, device)
            rows.append(row(device, f"generate {B} x 4 tokens, {'KV cache' if use_cache else 'no cache'}",
                            t, (B, 4 * B), ("completions/s", "new tokens/s")))
    # one SFT step, batch 64
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y, m = task.sft_batch(64, g)

    def sft_step():
        loss = sft_loss(model, x, y, m)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    t = best_time(sft_step, repeats, device)
    rows.append(row(device, "SFT step, batch 64", t, (1,), ("steps/s",)))
    # PPO iterations: time 1 + n iterations, subtract 1 (setup: copies, optimiser)
    n = max(3, repeats // 4)
    for epochs in (1, 2):
        run = lambda k: train_ppo(model, task, task.reward, iterations=k, epochs=epochs,  # noqa: E731
                                     device=device)
        t1, tn = best_time(lambda: run(1), 2, device), best_time(lambda: run(1 + n), 2, device)
        t = tuple((b - a) / n for a, b in zip(t1, tn))
        rows.append(row(device, f"PPO iteration (64 completions <= 4 tokens, {epochs} epoch{'s' * (epochs > 1)})",
                        t, (64,), ("completions/s",)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    bench_device(torch.device("cpu"), args.batch, args.repeats, rows)
    if torch.cuda.is_available():
        bench_device(torch.device("cuda"), args.batch, args.repeats, rows)
    else:
        rows.append(("cuda", "(no CUDA device: GPU rows skipped)", "-", "-", "-"))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, {args.threads} CPU thread(s)"
          + (f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""))
    print("| device | what | wall ms (best) | CPU ms (best) | throughput |")
    print("| --- | --- | ---: | ---: | ---: |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
