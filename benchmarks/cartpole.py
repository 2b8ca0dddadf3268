"""rlnotes' deep-RL trainers against Stable-Baselines3 on CartPole-v1, under one protocol.

Protocol (the book's, see benchmarks/README.md): every 2,048 environment steps the current
greedy policy plays 10 episodes on a separate 10-env evaluation env seeded seed + 10000
(``rlnotes.deeprl.Evaluator``); per seed we report the steps to the first evaluation with mean
return >= 475, the steps to the first of three such evaluations in a row, and the training wall
time to the first one (model construction included, evaluation excluded), with one torch
thread. SB3 runs with the RL-Zoo hyperparameters (rl_zoo3 2.9.2, hyperparams/*.yml, CartPole-v1)
when it is installed (``make bench-peers`` makes an environment with it, see benchmarks/peers/);
rlnotes and SB3 alternate seed by seed, so that machine load hits both alike. The race the book
reports is ``make bench-peers`` (one process per run); this script is the older in-process form.

    .venv/bin/python benchmarks/cartpole.py                       # every trainer, 6 seeds
    .venv/bin/python benchmarks/cartpole.py --algos dqn --seeds 0 1 --no-peers

Writes ``<out>/cartpole.md`` (the table), ``cartpole.json`` (every evaluation) and
``cartpole.png`` (learning curves, median and min-max band over seeds).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import harness  # noqa: E402
from harness import ENV_ID, EVAL_EVERY, THRESHOLD  # noqa: E402

# rlnotes' trainers: a later chapter adds its algorithm here, one line each.
RLNOTES = {
    "dqn": "rlnotes.dqn",
    "reinforce": "rlnotes.reinforce",
    "a2c": "rlnotes.a2c",
    "trpo": "rlnotes.trpo",
    "ppo": "rlnotes.ppo",
}


def run_rlnotes(algo: str, seed: int, budget: int, stop_after_three: bool, hp: dict) -> dict:
    """rlnotes' run under the race's protocol (``peers/harness.py``, the one clock)."""
    return harness.run_rlnotes(algo, seed, budget, hp=hp, stop_after_three=stop_after_three)


def run_sb3(algo: str, seed: int, budget: int, stop_after_three: bool) -> dict | None:
    """SB3's run under the race's protocol, or None when SB3 (or sb3-contrib) is missing."""
    try:
        import sb3_contrib  # noqa: F401
        import stable_baselines3  # noqa: F401
    except ImportError:
        return None
    if algo not in harness.RL_ZOO:
        return None
    return harness.run_sb3(algo, seed, budget, stop_after_three=stop_after_three)


def available_algos() -> list[str]:
    found = []
    for algo, module in RLNOTES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(mod, "train"):
            found.append(algo)
    return found


def _fmt_steps(values, n) -> str:
    """Median over all seeds, a seed that never got there counting as beyond the budget
    (censored), then [min, max] over the seeds that did."""
    got = [v for v in values if v is not None]
    if not got:
        return f"never within budget (0 of {n})"
    median = np.median([np.inf if v is None else v for v in values])
    text = "never" if np.isinf(median) else f"{median:,.0f}"
    text += f" [{min(got):,}, {max(got):,}]"
    return text if len(got) == n else f"{text}; {n - len(got)} of {n} seeds never"


def _fmt_time(values) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    return f"{np.median(got):.2f} [{min(got):.2f}, {max(got):.2f}]"


def table(records: list[dict]) -> str:
    lines = ["| trainer (seeds) | steps to first eval >= 475 | steps to 3 evals in a row >= 475 "
             "| train s to first >= 475 | train CPU s to first >= 475 | train steps/s |",
             "| --- | --- | --- | --- | --- | --- |"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["algo"], r["library"]), []).append(r)
    for (algo, library), rs in sorted(groups.items()):
        n = len(rs)
        lines.append(f"| {library} {algo.upper()} ({n}) | {_fmt_steps([r['first'] for r in rs], n)} "
                     f"| {_fmt_steps([r['three'] for r in rs], n)} "
                     f"| {_fmt_time([r['s_first'] for r in rs])} "
                     f"| {_fmt_time([r.get('cpu_first') for r in rs])} "
                     f"| {np.median([r['steps_per_s'] for r in rs]):,.0f} |")
    return "\n".join(lines)


def per_seed(records: list[dict]) -> str:
    lines = ["| trainer | seed | first >= 475 | 3 in a row | train s to first | CPU s to first "
             "| train s total | CPU s total |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(records, key=lambda r: (r["algo"], r["library"], r["seed"])):
        tf = "-" if r["s_first"] is None else f"{r['s_first']:.2f}"
        cf = "-" if r.get("cpu_first") is None else f"{r['cpu_first']:.2f}"
        ct = "-" if r.get("train_cpu") is None else f"{r['train_cpu']:.2f}"
        lines.append(f"| {r['library']} {r['algo'].upper()} | {r['seed']} | {r['first'] or '-'} "
                     f"| {r['three'] or '-'} | {tf} | {cf} | {r['train_s']:.2f} | {ct} |")
    return "\n".join(lines)


def figure(records: list[dict], budget: int, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlnotes.plotting import plot_band

    algos = sorted({r["algo"] for r in records})
    fig, axes = plt.subplots(1, len(algos), figsize=(6 * len(algos), 3.6), squeeze=False)
    x = np.arange(EVAL_EVERY, budget + 1, EVAL_EVERY)
    for ax, algo in zip(axes[0], algos):
        curves = {}
        for library in ("rlnotes", "sb3"):
            rows = []
            for r in records:
                if r["algo"] != algo or r["library"] != library:
                    continue
                got = dict(r["evals"])
                # a run stopped after three evaluations in a row keeps its last value
                last = np.nan
                row = []
                for step in x:
                    last = got.get(int(step), last)
                    row.append(last)
                rows.append(row)
            if rows:
                curves[f"{library} {algo.upper()}"] = np.asarray(rows)
        plot_band(x, curves, ax=ax, hline=THRESHOLD, title=f"{ENV_ID}, {algo.upper()}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="*", default=None, help="default: every rlnotes trainer")
    parser.add_argument("--seeds", nargs="*", type=int, default=list(range(6)))
    parser.add_argument("--budget", type=int, default=50_000)
    parser.add_argument("--no-peers", action="store_true", help="rlnotes only")
    parser.add_argument("--only-peers", action="store_true", help="SB3 only")
    parser.add_argument("--merge", nargs="*", default=None,
                        help="build the table and figure from these cartpole.json files")
    parser.add_argument("--stop-after-three", action="store_true",
                        help="stop a run after three evaluations in a row >= 475")
    parser.add_argument("--hp", default="{}", help="JSON hyperparameters for rlnotes' trainer")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--figure", default=None, help="also copy the figure here")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    harness.warm_imports()  # the race's protocol: imports are not training time
    algos = args.algos or available_algos()
    hp = json.loads(args.hp)
    records = []
    if args.merge:
        for path in args.merge:
            records += json.loads(Path(path).read_text())
        for r in records:  # files written before the one clock call it time_first, SB3 "SB3"
            r.setdefault("s_first", r.get("time_first"))
            r["library"] = r["library"].lower()
        args.seeds = sorted({r["seed"] for r in records})
    for i, seed in enumerate([] if args.merge else args.seeds):
        for algo in algos:
            order = ["rlnotes", "sb3"] if i % 2 == 0 else ["sb3", "rlnotes"]
            for library in order:
                if library == "rlnotes" and args.only_peers:
                    continue
                if library == "rlnotes":
                    rec = run_rlnotes(algo, seed, args.budget, args.stop_after_three, hp)
                elif args.no_peers:
                    continue
                else:
                    rec = run_sb3(algo, seed, args.budget, args.stop_after_three)
                    if rec is None:
                        continue
                records.append(rec)
                print(f"{library:8s} {algo} seed {seed}: first {rec['first']}, three "
                      f"{rec['three']}, time to first {rec['s_first']} (CPU {rec['cpu_first']}), "
                      f"{rec['steps_per_s']:,.0f} steps/s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = (f"{ENV_ID}, {len(args.seeds)} seeds, budget {args.budget:,} steps; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"torch {torch.__version__}, 1 thread; command: python {' '.join(sys.argv)}")
    text = f"{header}\n\n{table(records)}\n\nPer seed:\n\n{per_seed(records)}\n"
    (out / "cartpole.md").write_text(text)
    (out / "cartpole.json").write_text(json.dumps(records, indent=1))
    figure(records, args.budget, out / "cartpole.png")
    if args.figure:
        figure(records, args.budget, Path(args.figure))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
