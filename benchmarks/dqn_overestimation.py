"""The maximisation bias of DQN on CartPole-v1: plain DQN against double DQN, several seeds.

Every ``--every`` environment steps of a run with rlnotes' DQN defaults (``double=True``, and
the same with ``double=False``), ``rlnotes.dqn.start_value_estimate`` compares the predicted
value of 10 start states, the mean of max_a Q(s_0, a), with the discounted return the greedy
policy then obtains from them, discounted with the gamma the agent trains with (``--gamma``,
default: the trainer's default; an episode cut at 500 steps makes that return a lower bound,
sum_{t<500} gamma^t). Overestimation = predicted - obtained. ``--gamma`` and ``--obs-clip`` are
passed to ``dqn.train``, so the recorded run of the former defaults is reproduced with
``--gamma 0.99 --obs-clip 10``.

    .venv/bin/python benchmarks/dqn_overestimation.py                 # 4 seeds, 50,000 steps
    .venv/bin/python benchmarks/dqn_overestimation.py --seeds 0 --budget 8192
    .venv/bin/python benchmarks/dqn_overestimation.py --merge a/dqn_overestimation.json b/...

Writes ``<out>/dqn_overestimation.md`` (table), ``.json`` (every measurement) and ``.png``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlnotes import dqn  # noqa: E402

ENV_ID = "CartPole-v1"
_TRAIN_DEFAULTS = inspect.signature(dqn.train).parameters
GAMMA = _TRAIN_DEFAULTS["gamma"].default        # replaced by --gamma in main()
OBS_CLIP = _TRAIN_DEFAULTS["obs_clip"].default  # replaced by --obs-clip in main()
VARIANTS = {"double DQN (defaults)": dict(double=True), "plain DQN": dict(double=False)}


def measure(seed: int, budget: int, every: int, hp: dict) -> list[tuple[int, float, float]]:
    """(steps, predicted, obtained) every ``every`` steps of one run."""
    rows = []
    next_at = every

    def callback(steps, policy):
        nonlocal next_at
        if steps >= next_at or steps >= budget:  # and once at the end of the run
            next_at += every
            predicted, obtained = dqn.start_value_estimate(policy, ENV_ID, GAMMA, seed=seed)
            rows.append((int(steps), predicted, obtained))

    dqn.train(ENV_ID, budget, seed=seed, callback=callback,
              **{"gamma": GAMMA, "obs_clip": OBS_CLIP, **hp})
    return rows


def table(records: list[dict]) -> str:
    lines = ["| variant | steps | predicted max_a Q(s0, a) | discounted return obtained "
             "| predicted - obtained | seeds with predicted > obtained "
             "| seeds with predicted > 1/(1 - gamma) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    ceiling = 1.0 / (1.0 - GAMMA)  # the most any policy is worth: a certain overestimate above it
    for name in VARIANTS:
        rs = [r for r in records if r["variant"] == name]
        if not rs:
            continue
        for k, steps in enumerate(s for s, _, _ in rs[0]["rows"]):
            pred = np.array([r["rows"][k][1] for r in rs])
            got = np.array([r["rows"][k][2] for r in rs])
            over = pred - got
            lines.append(f"| {name} | {steps:,} | {np.median(pred):.1f} [{pred.min():.1f}, "
                         f"{pred.max():.1f}] | {np.median(got):.1f} [{got.min():.1f}, "
                         f"{got.max():.1f}] | {np.median(over):+.1f} [{over.min():+.1f}, "
                         f"{over.max():+.1f}] | {(over > 0).sum()} of {len(rs)} "
                         f"| {(pred > ceiling).sum()} of {len(rs)} |")
    return "\n".join(lines)


def figure(records: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlnotes.plotting import plot_band

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    curves = {}
    for name in VARIANTS:
        rs = [r for r in records if r["variant"] == name]
        if not rs:
            continue
        x = np.array([s for s, _, _ in rs[0]["rows"]])
        curves[name] = np.array([[p - g for _, p, g in r["rows"]] for r in rs])
    plot_band(x, curves, ax=ax, title=f"{ENV_ID}: predicted minus obtained start value")
    ax.axhline(0.0, color="k", lw=0.8)
    # Bootstrapping through the time limit, the values aim at up to 1/(1 - gamma), above the
    # return of a full 500-step episode: for full episodes only a difference above the gap
    # between the two is certainly an overestimate.
    gap = 1.0 / (1.0 - GAMMA) - sum(GAMMA ** t for t in range(500))
    ax.axhline(gap, color="k", lw=0.8, ls="--",
               label=f"1/(1-gamma) - full-episode return = {gap:.1f}")
    ax.legend(frameon=False, fontsize=8)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(r"$\max_a \hat Q(s_0, a)$ - discounted return")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    global GAMMA, OBS_CLIP
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=list(range(4)))
    parser.add_argument("--budget", type=int, default=50_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--figure", default=None, help="also copy the figure here")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--merge", nargs="*", default=None,
                        help="build the table and the figure from these .json files instead")
    parser.add_argument("--gamma", type=float, default=GAMMA,
                        help="discount of training and of the obtained return (default: dqn.train's)")
    parser.add_argument("--obs-clip", type=float, default=OBS_CLIP,
                        help="dqn.train's obs_clip (default: dqn.train's, no clip)")
    args = parser.parse_args(argv)
    GAMMA, OBS_CLIP = args.gamma, args.obs_clip
    torch.set_num_threads(1)
    records = []
    if args.merge:
        for path in args.merge:
            records += json.loads(Path(path).read_text())
        args.seeds = sorted({r["seed"] for r in records})
    for seed in [] if args.merge else args.seeds:
        for name, hp in VARIANTS.items():
            if name not in args.variants:
                continue
            rows = measure(seed, args.budget, args.every, hp)
            records.append(dict(variant=name, seed=seed, rows=rows))
            print(f"{name:22s} seed {seed}: " + "; ".join(
                f"{s}: {p:.1f} vs {g:.1f}" for s, p, g in rows), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = (f"{ENV_ID}, seeds {args.seeds}, budget {args.budget:,} steps, gamma {GAMMA}, "
              f"obs_clip {OBS_CLIP}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"torch {torch.__version__}; command: python {' '.join(sys.argv)}")
    text = f"{header}\n\n{table(records)}\n"
    (out / "dqn_overestimation.md").write_text(text)
    (out / "dqn_overestimation.json").write_text(json.dumps(records, indent=1))
    figure(records, out / "dqn_overestimation.png")
    if args.figure:
        figure(records, Path(args.figure))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
