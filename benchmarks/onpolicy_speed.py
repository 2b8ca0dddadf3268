"""How fast the on-policy trainers step CartPole-v1, against the environment's own limit.

For A2C, TRPO and PPO with their defaults (N = ``num_envs`` environments), three figures in
environment steps per second, each the median of ``--repeats`` measurements in this one process
(one torch thread), by CPU time (steady under load) and by wall clock:

- ``env``: the vector environment alone, stepping N copies with actions drawn beforehand: the
  most any trainer could reach (2 x repeats + 1 measurements, the two versions taking turns). Both gymnasium's ``CartPoleVectorEnv`` and the package's
  ``LeanCartPoleVectorEnv`` (the same dynamics without the per-step action check) are timed.
- ``acting``: the rollout collector alone (``collect_rollout``: one batched policy call a step,
  then the environment step), with the trainer's untrained network and the input layer its
  defaults put in front of it (A2C's running normaliser, TRPO's and PPO's fixed layer).
- ``training``: the whole trainer, ``train(CartPole-v1, --steps, seed=...)`` without evaluation
  (seeds 300, 301, ...; no callback).

    nice -n 10 .venv/bin/python benchmarks/onpolicy_speed.py      # -> results/onpolicy_speed.json

The appendix *Races against Stable-Baselines3 and TRL* plots the file beside the peers' training
steps per second from ``peers_cartpole.json``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
from stats import provenance  # noqa: E402

ENV_ID = "CartPole-v1"
ALGOS = ("a2c", "trpo", "ppo")


def _clocks(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``fn()``."""
    c, t = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - t


def env_rate(envs, steps: int, seed: int) -> tuple[float, float]:
    """Env steps per second (CPU, wall) of ``steps`` vector steps with random actions."""
    actions = np.random.default_rng(seed).integers(0, 2, (steps, envs.num_envs))
    envs.reset(seed=seed)

    def go():
        for a in actions:
            envs.step(a)

    cpu, wall = _clocks(go)
    return steps * envs.num_envs / cpu, steps * envs.num_envs / wall


def acting_rate(algo: str, num_envs: int, steps: int, seed: int) -> tuple[float, float]:
    """Env steps per second (CPU, wall) of the rollout collector with ``algo``'s network."""
    from rlnotes.deeprl import make_vec_env
    from rlnotes.deeprl import rollout as ro
    from rlnotes.deeprl import _onpolicy as op

    from rlnotes.deeprl.normalize import normalize_inputs, standardize_inputs

    envs = make_vec_env(ENV_ID, num_envs, seed=seed)
    info = {"discrete": True, "n": 2, "shape": ()}
    torch.manual_seed(seed)
    defaults = inspect.signature(importlib.import_module(f"rlnotes.{algo}").train).parameters
    if algo == "a2c":
        net, gen = ro.ActorCritic(4, info), torch.Generator().manual_seed(seed)
    else:
        net, gen = op.ActorCritic(4, info), np.random.default_rng(seed)
    # the trainer's input layer, as its defaults put it in front of both networks
    if "norm_obs" in defaults and defaults["norm_obs"].default:
        normalize_inputs(net)
    elif "standardize_obs" in defaults and defaults["standardize_obs"].default:
        standardize_inputs(net)
    obs, _ = envs.reset(seed=seed)
    state = {"obs": np.asarray(obs, np.float32), "done": np.zeros(num_envs, bool)}

    def go():
        for _ in range(steps // 64):
            _, state["obs"], state["done"] = ro.collect_rollout(
                envs, net, state["obs"], state["done"], 64, gen)

    cpu, wall = _clocks(go)
    envs.close()
    n = (steps // 64) * 64 * num_envs
    return n / cpu, n / wall


def training_rate(algo: str, total: int, seed: int) -> tuple[float, float]:
    module = importlib.import_module(f"rlnotes.{algo}")
    module.train(ENV_ID, 512, seed=seed)  # warm: lazy imports and first calls not timed
    cpu, wall = _clocks(lambda: module.train(ENV_ID, total, seed=seed))
    return total / cpu, total / wall


def _summary(pairs) -> dict:
    cpu, wall = np.array(pairs).T
    return {"cpu": {"median": float(np.median(cpu)), "min": float(cpu.min()),
                    "max": float(cpu.max())},
            "wall": {"median": float(np.median(wall)), "min": float(wall.min()),
                     "max": float(wall.max())}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    parser.add_argument("--steps", type=int, default=20_480, help="env steps per training run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "onpolicy_speed.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    from rlnotes.deeprl.envs import LeanCartPoleVectorEnv

    out = {"kind": "onpolicy_speed", "provenance": provenance(
        "python benchmarks/onpolicy_speed.py " + " ".join(sys.argv[1:] if argv is None else argv)),
        "env": ENV_ID, "training_steps": args.steps, "repeats": args.repeats,
        "unit": "environment steps per second (summed over the N copies)", "algos": {}}
    out["provenance"]["torch"], out["provenance"]["gymnasium"] = torch.__version__, gym.__version__
    for algo in args.algos:
        module = importlib.import_module(f"rlnotes.{algo}")
        N = inspect.signature(module.train).parameters["num_envs"].default
        rec = {"num_envs": N}
        vec_steps = max(1, args.steps // N)
        env = {"env_gymnasium": [], "env_lean": []}
        for k in range(2 * args.repeats + 1):  # the two take turns, so that load hits both
            for name, cls in (("env_gymnasium", CartPoleVectorEnv),
                              ("env_lean", LeanCartPoleVectorEnv)):
                env[name].append(env_rate(cls(num_envs=N), vec_steps, 300 + k))
        rec.update({name: _summary(v) for name, v in env.items()})
        rec["acting"] = _summary([acting_rate(algo, N, vec_steps, 300 + k)
                                  for k in range(args.repeats)])
        rec["training"] = _summary([training_rate(algo, args.steps, 300 + k)
                                    for k in range(args.repeats)])
        out["algos"][algo] = rec
        print(algo, f"N={N}", {k: round(v["cpu"]["median"]) for k, v in rec.items()
                               if isinstance(v, dict)}, flush=True)
    out["provenance"]["loadavg_end"] = list(os.getloadavg())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
