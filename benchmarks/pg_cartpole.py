"""Race rlnotes' policy-gradient trainers (A2C, REINFORCE) on CartPole-v1 under the benchmark
protocol of the book (benchmarks/peers/harness.py): every 2,048 env steps, 10 greedy episodes on a separate 10-env
evaluation env seeded seed + 10000; training time excludes evaluation.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/pg_cartpole.py [--algo a2c] [--seeds 6]
        [--steps 50000] [--set key=value ...]

Prints one row per seed and the median [min, max]. The side-by-side race with SB3's A2C is
``make bench-peers`` (benchmarks/peers/); this script stays as the policy-gradient chapter's own
runner and tuning tool.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import time

import numpy as np
import torch

from rlnotes.deeprl import Evaluator

EVAL_EVERY = 2048


def sb3_a2c_train(env_id, total_steps, *, seed=0, callback=None, **hp):
    """SB3's A2C with RL-Zoo's CartPole-v1 settings (n_envs 8, ent_coef 0, SB3's defaults
    otherwise), behind the book's trainer contract so that the same race runs it. Needs
    stable-baselines3 (not a dependency of rlnotes: install it beside, e.g. with
    ``pip install --target DIR stable-baselines3==2.9.2 pandas cloudpickle`` and PYTHONPATH)."""
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env as sb3_vec_env

    envs = sb3_vec_env(env_id, n_envs=8, seed=seed)
    model = A2C("MlpPolicy", envs, ent_coef=0.0, seed=seed, device="cpu", **hp)
    policy = lambda obs: model.predict(obs, deterministic=True)[0]

    class Hook(BaseCallback):
        def _on_step(self):
            return True

        def _on_rollout_end(self):
            if callback is not None and callback(self.num_timesteps, policy):
                self.model._stop = True

    class Stop(BaseCallback):
        def _on_step(self):
            return not getattr(self.model, "_stop", False)

    model.learn(total_steps, callback=[Hook(), Stop()])
    return policy


def race(algo: str, seed: int, total_steps: int, target: float = 475.0, stop_first=False,
         **hp):
    """Train once; return (steps to first eval >= target or None, train seconds to it,
    steps to 3 evals in a row >= target or None, train steps/s)."""
    trainer = (importlib.import_module(f"rlnotes.{algo}") if algo != "sb3_a2c"
               else type("sb3", (), {"train": staticmethod(sb3_a2c_train)}))
    evaluator = Evaluator("CartPole-v1", seed)
    state = {"next": EVAL_EVERY, "train": 0.0, "t0": time.perf_counter(), "cpu": 0.0,
             "c0": time.process_time(), "first_cpu": None, "first": None,
             "first_s": None, "streak": 0, "three": None, "steps": 0}

    def callback(steps, policy):
        state["steps"] = steps
        if steps < state["next"]:
            return False
        state["train"] += time.perf_counter() - state["t0"]
        state["cpu"] += time.process_time() - state["c0"]
        checkpoint = EVAL_EVERY * (steps // EVAL_EVERY)  # the protocol's step count
        while state["next"] <= steps:
            state["next"] += EVAL_EVERY
        score = float(evaluator(policy).mean())
        if score >= target:
            state["streak"] += 1
            if state["first"] is None:
                state["first"], state["first_s"] = checkpoint, state["train"]
                state["first_cpu"] = state["cpu"]
            if state["streak"] >= 3 and state["three"] is None:
                state["three"] = checkpoint
        else:
            state["streak"] = 0
        state["t0"] = time.perf_counter()
        state["c0"] = time.process_time()
        return state["three"] is not None or (stop_first and state["first"] is not None)

    trainer.train("CartPole-v1", total_steps, seed=seed, callback=callback, **hp)
    state["train"] += time.perf_counter() - state["t0"]
    state["cpu"] += time.process_time() - state["c0"]
    evaluator.close()
    return (state["first"], state["first_s"], state["three"], state["steps"] / state["train"],
            state["first_cpu"], state["steps"] / state["cpu"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", default="a2c", choices=["a2c", "reinforce", "sb3_a2c"])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--set", nargs="*", default=[])
    parser.add_argument("--stop-first", action="store_true",
                        help="stop a run at its first evaluation >= 475 (for tuning)")
    torch.set_num_threads(1)
    args = parser.parse_args()
    hp = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}
    rows = []
    for seed in range(args.seeds):
        first, first_s, three, sps, first_cpu, cps = race(args.algo, seed, args.steps,
                                                      stop_first=args.stop_first, **hp)
        rows.append((first, first_s, three, sps, first_cpu, cps))
        show = lambda x: None if x is None else round(x, 3)
        print(f"seed {seed}: first >= 475 at {first} steps ({show(first_s)} s wall, "
              f"{show(first_cpu)} s CPU), 3 in a row at {three}, {sps:,.0f} steps/s wall, "
              f"{cps:,.0f} steps/s CPU", flush=True)

    def med(xs, fmt):
        ok = [x for x in xs if x is not None]
        if not ok:
            return "never"
        miss = len(xs) - len(ok)
        arr = np.array([x if x is not None else np.inf for x in xs], dtype=float)
        return (f"{fmt(np.median(arr))} [{fmt(min(ok))}, {fmt(max(ok))}]"
                + (f"; {miss} never" if miss else ""))
    i = lambda x: f"{x:,.0f}"
    f = lambda x: f"{x:.2f}"
    print(f"| {args.algo} ({args.seeds}) {hp} | {med([r[0] for r in rows], i)} | "
          f"{med([r[2] for r in rows], i)} | {med([r[1] for r in rows], f)} | "
          f"{np.median([r[3] for r in rows]):,.0f} | {med([r[4] for r in rows], f)} | "
          f"{np.median([r[5] for r in rows]):,.0f} |")


if __name__ == "__main__":
    main()
