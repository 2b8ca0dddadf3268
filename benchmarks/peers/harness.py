"""One CartPole-v1 run of rlnotes or of a peer (Stable-Baselines3, sb3-contrib) under one protocol.

Protocol: every 2,048 environment steps the current greedy policy plays 10 episodes on a
separate 10-env evaluation env seeded ``seed + 10000`` (``rlnotes.deeprl.Evaluator``, the same
code for every library); per run we record the steps to the first evaluation with mean return
>= 475, the steps to the first of three such evaluations in a row (the run stops there, or at
its budget), the training time to the first one (wall clock and this process's CPU time; model
and environment construction included; evaluation and imports excluded, torch's lazy imports
too: ``warm_imports``) and the training steps per second. One process per run, one torch
thread.

    python benchmarks/peers/harness.py --library rlnotes --algo ppo --seed 100
    ~/.cache/rlnotes/peers-sb3-2.9.2/bin/python benchmarks/peers/harness.py --library sb3 --algo ppo --seed 100

prints the run's record as one JSON line. ``race.py`` starts these processes and collects them.

SB3's side uses RL-Zoo's CartPole-v1 hyperparameters (rl_zoo3 2.9.2, ``hyperparams/*.yml``;
``lin_X`` decays linearly from X to 0 over training); rlnotes' side its trainers' defaults.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ENV_ID = "CartPole-v1"
EVAL_EVERY = 2_048
THRESHOLD = 475.0
IN_A_ROW = 3
ALGOS = ("dqn", "ppo", "a2c", "trpo")
LIBRARIES = ("rlnotes", "sb3")

# RL-Zoo's CartPole-v1 entries (rl_zoo3 2.9.2); anything unlisted is SB3's default.
RL_ZOO = {
    "dqn": dict(n_envs=1, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                learning_starts=1_000, gamma=0.99, target_update_interval=10, train_freq=256,
                gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                policy_kwargs=dict(net_arch=[256, 256])),
    "ppo": dict(n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                ent_coef=0.0, learning_rate="lin_1e-3", clip_range="lin_0.2"),
    "a2c": dict(n_envs=8, ent_coef=0.0),
    "trpo": dict(n_envs=2, n_steps=512, batch_size=512, cg_damping=1e-3, gae_lambda=0.98,
                 gamma=0.99, learning_rate=1e-3, n_critic_updates=20),
}


def _lin(x: float):
    """RL-Zoo's ``lin_X``: X times SB3's progress_remaining (1 at the start, 0 at the end)."""
    return lambda progress_remaining: progress_remaining * x


def sb3_model(algo: str, seed: int):
    """The SB3 (or sb3-contrib, for TRPO) model of ``algo`` with RL-Zoo's CartPole-v1 settings."""
    from stable_baselines3 import A2C, DQN, PPO
    from stable_baselines3.common.env_util import make_vec_env

    kwargs = dict(RL_ZOO[algo])
    env = make_vec_env(ENV_ID, n_envs=kwargs.pop("n_envs"), seed=seed)
    for key, value in list(kwargs.items()):
        if isinstance(value, str) and value.startswith("lin_"):
            kwargs[key] = _lin(float(value[4:]))
    if algo == "trpo":
        from sb3_contrib import TRPO as cls
    else:
        cls = {"dqn": DQN, "ppo": PPO, "a2c": A2C}[algo]
    return cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)


class Protocol:
    """Evaluates every 2,048 steps and keeps the clocks: training time excludes evaluation."""

    def __init__(self, seed: int, budget: int, stop_after_three: bool = True):
        from rlnotes.deeprl import Evaluator

        self.evaluator = Evaluator(ENV_ID, seed)
        self.budget, self.stop_after_three = budget, stop_after_three
        self.next_eval = EVAL_EVERY
        self.evals: list[tuple[int, float]] = []
        self.eval_s = self.eval_cpu = 0.0
        self.first = self.three = self.s_first = self.cpu_first = None
        self.run = 0
        self.start()

    def start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def train_s(self) -> float:
        return time.perf_counter() - self.t0 - self.eval_s

    def train_cpu(self) -> float:
        return time.process_time() - self.c0 - self.eval_cpu

    def __call__(self, steps: int, policy) -> bool:
        """Evaluates when 2,048 more steps are done; True when the run may stop."""
        stop = False
        while steps >= self.next_eval and self.next_eval <= self.budget:
            self.next_eval += EVAL_EVERY
            if self.evals and self.evals[-1][0] == steps:  # one evaluation per step count
                continue
            train_s, train_cpu = self.train_s(), self.train_cpu()
            t, c = time.perf_counter(), time.process_time()
            mean = float(np.mean(self.evaluator(policy)))
            self.eval_s += time.perf_counter() - t
            self.eval_cpu += time.process_time() - c
            self.evals.append((int(steps), mean))
            if mean >= THRESHOLD:
                self.run += 1
                if self.first is None:
                    self.first, self.s_first, self.cpu_first = int(steps), train_s, train_cpu
                if self.run == IN_A_ROW and self.three is None:
                    self.three = self.evals[-IN_A_ROW][0]
                    stop = self.stop_after_three
            else:
                self.run = 0
        return stop

    def record(self, library: str, algo: str, seed: int, steps: int) -> dict:
        train_s, train_cpu = self.train_s(), self.train_cpu()
        self.evaluator.close()
        return dict(library=library, algo=algo, seed=seed, budget=self.budget,
                    first=self.first, three=self.three, s_first=self.s_first,
                    cpu_first=self.cpu_first, steps=int(steps), train_s=train_s,
                    train_cpu=train_cpu, eval_s=self.eval_s,
                    steps_per_s=steps / train_s if train_s > 0 else None, evals=self.evals)


def run_rlnotes(algo: str, seed: int, budget: int, *, hp: dict | None = None,
                stop_after_three: bool = True) -> dict:
    """rlnotes.<algo>.train with its defaults (changed by ``hp``), evaluated by the protocol."""
    module = importlib.import_module(f"rlnotes.{algo}")
    protocol = Protocol(seed, budget, stop_after_three)
    seen = {"steps": 0}

    def callback(steps, policy):
        seen["steps"] = steps
        return protocol(steps, policy)

    protocol.start()  # construction of model and envs counts as training time
    module.train(ENV_ID, budget, seed=seed, callback=callback, **(hp or {}))
    return protocol.record("rlnotes", algo, seed, seen["steps"])


def run_sb3(algo: str, seed: int, budget: int, *, stop_after_three: bool = True) -> dict:
    """SB3's (sb3-contrib's for TRPO) ``algo`` with RL-Zoo's settings, evaluated by the protocol."""
    import sb3_contrib  # noqa: F401  (imported before the clock starts, as rlnotes' trainer is)
    import stable_baselines3  # noqa: F401
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env  # noqa: F401

    protocol = Protocol(seed, budget, stop_after_three)
    protocol.start()  # construction of model and envs counts as training time
    model = sb3_model(algo, seed)

    def policy(obs):
        return model.predict(obs, deterministic=True)[0]

    class Every2048(BaseCallback):
        def _on_step(self) -> bool:
            return not protocol(self.num_timesteps, policy)

    model.learn(total_timesteps=budget, callback=Every2048())
    return protocol.record("sb3", algo, seed, int(model.num_timesteps))


def versions(library: str) -> dict:
    """Versions of what this process runs: Python, numpy, torch, gymnasium, and the peer's."""
    import gymnasium
    import torch

    import rlnotes

    out = dict(python=platform.python_version(), numpy=np.__version__, torch=torch.__version__,
               gymnasium=gymnasium.__version__, rlnotes=getattr(rlnotes, "__version__", "?"))
    if library == "sb3":
        import sb3_contrib
        import stable_baselines3

        out.update({"stable-baselines3": stable_baselines3.__version__,
                    "sb3-contrib": sb3_contrib.__version__})
    return out


def warm_imports() -> None:
    """Import before the clock what torch imports lazily on first use, for both libraries
    alike: constructing the first optimiser pulls in torch's compiler stack (torch._dynamo,
    sympy: over a second of CPU), which is import time, not training."""
    import torch

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def run(library: str, algo: str, seed: int, budget: int, hp: dict | None = None) -> dict:
    """One run in this process, with one torch thread: its record, versions included.
    ``hp``: changes to rlnotes' defaults (rlnotes only; recorded in the record)."""
    import torch

    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if not isinstance(budget, int) or budget < EVAL_EVERY:
        raise ValueError(f"budget must be an int >= {EVAL_EVERY}, got {budget!r}")
    if hp is not None and (not isinstance(hp, dict) or (hp and library != "rlnotes")):
        raise ValueError(f"hp must be a dict of rlnotes hyperparameters (rlnotes only), got {hp!r}")
    torch.set_num_threads(1)
    warm_imports()
    torch.manual_seed(seed)
    if library == "rlnotes":
        rec = run_rlnotes(algo, seed, budget, hp=hp)
        rec["hp"] = dict(hp or {})
    else:
        rec = run_sb3(algo, seed, budget)
    rec["threads"] = torch.get_num_threads()
    rec["versions"] = versions(library)
    rec["process_cpu"] = time.process_time()  # this process's CPU seconds, imports included
    return rec


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=LIBRARIES, required=True)
    parser.add_argument("--algo", choices=ALGOS, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--budget", type=int, default=50_000)
    parser.add_argument("--hp", default="{}", help="JSON changes to rlnotes' defaults")
    args = parser.parse_args(argv)
    rec = run(args.library, args.algo, args.seed, args.budget, hp=json.loads(args.hp))
    print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
