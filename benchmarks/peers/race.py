"""Race rlnotes against its peers, side by side in one run on one machine; write the results files.

    make bench-peers          # installs the peers' environments on first use, then races
    make bench-peers-quick    # the quick form (2 seeds, smaller budget, 1 GRPO round)

or by hand (the peers' Python interpreters as arguments):

    .venv/bin/python benchmarks/peers/race.py --sb3-python SB3/bin/python --trl-python TRL/bin/python

CartPole-v1 (``harness.py``): DQN, PPO, A2C and TRPO, rlnotes' trainers with their defaults
against Stable-Baselines3 2.9.2 / sb3-contrib 2.9.2 with RL-Zoo's hyperparameters, on seeds
1000-1009, which no hyperparameter sweep of rlnotes used (see benchmarks/README.md; the earlier
races on seeds 100-109, 300-309, 400-409, 600-609 and 800-809 are
results/peers_cartpole_100.json, results/peers_cartpole_300.json,
results/peers_cartpole_400.json, results/peers_cartpole_600.json and
results/peers_cartpole_800.json). Every run is
its own process with one torch thread; ``--jobs`` processes at a time (2 by default, one per
core), and the two libraries' runs of one (algorithm, seed) are queued next to each other, the
order alternating from seed to seed, so that the machine's load hits both alike. Writes
``peers_cartpole.json``: the provenance (versions, CPU model, load average at the start and the
end, command, date), every run's record and the medians with intervals.

GRPO step (``benchmarks/bench_grpo_step.py``): rlnotes' ``train_grpo`` and TRL 1.16's
``GRPOTrainer`` on the addition task from the same SFT weights, same batch, one thread, in
alternating rounds of the same run. Writes ``peers_grpo_step.json``.

``report.py`` renders both files as Markdown (the book's appendix uses it).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from harness import ALGOS, EVAL_EVERY, ENV_ID, IN_A_ROW, RL_ZOO, THRESHOLD  # noqa: E402
from stats import provenance, repo_command, summarize  # noqa: E402

FULL = dict(seeds=list(range(1000, 1010)), budget=50_000, grpo_rounds=2, grpo_steps=40)
QUICK = dict(seeds=[1000, 1001], budget=20_480, grpo_rounds=1, grpo_steps=20)
FIGURES = ("first", "three", "s_first", "cpu_first", "steps_per_s")
RACE_ORDER = ("ppo", "a2c", "trpo", "dqn")
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def jobs_for(algos, seeds, libraries) -> list[tuple[str, str, int]]:
    """(library, algo, seed) in race order: per algorithm (in the order given), per seed, the
    libraries next to each other, their order alternating from one seed to the next. An
    algorithm's seeds all finish before the next algorithm starts, so that a race stopped early
    leaves whole algorithms behind."""
    out = []
    for algo in algos:
        for i, seed in enumerate(seeds):
            order = list(libraries) if i % 2 == 0 else list(reversed(libraries))
            out += [(lib, algo, seed) for lib in order]
    return out


def run_job(python: str, library: str, algo: str, seed: int, budget: int, timeout: float,
            hp: dict | None = None) -> dict:
    """One run in a fresh process (``harness.py``); its record, or an error record. ``hp``:
    changes to rlnotes' defaults (rlnotes' runs only)."""
    cmd = [python, str(HERE / "harness.py"), "--library", library, "--algo", algo,
           "--seed", str(seed), "--budget", str(budget)]
    if hp and library == "rlnotes":
        cmd += ["--hp", json.dumps(hp)]
    # this tree's rlnotes first, whatever the peer's environment holds
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, **THREAD_ENV, "RLNOTES_PROGRESS": "0", "PYTHONPATH": path}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return dict(library=library, algo=algo, seed=seed, error=f"timeout after {timeout} s")
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        return dict(library=library, algo=algo, seed=seed,
                    error=f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    rec["process_s"] = process_s
    return rec


def race_cartpole(pythons: dict, algos, seeds, budget: int, n_jobs: int = 2,
                  timeout: float = 900, log=print, on_record=None, hp=None) -> list[dict]:
    """Runs every (library, algo, seed) job, ``n_jobs`` processes at a time; their records.
    ``on_record(records so far)`` is called after each run (to write a partial file); ``hp``
    maps an algorithm to changes of rlnotes' defaults (none: the defaults)."""
    todo: queue.Queue = queue.Queue()
    for job in jobs_for(algos, seeds, list(pythons)):
        todo.put(job)
    records, lock = [], threading.Lock()

    def worker():
        while True:
            try:
                library, algo, seed = todo.get_nowait()
            except queue.Empty:
                return
            rec = run_job(pythons[library], library, algo, seed, budget, timeout,
                          (hp or {}).get(algo))
            rec["loadavg_end"] = list(os.getloadavg())
            with lock:
                records.append(rec)
                if "error" in rec:
                    log(f"{library:8s} {algo:4s} seed {seed}: ERROR {rec['error'][-300:]}")
                else:
                    log(f"{library:8s} {algo:4s} seed {seed}: first {rec['first']}, three "
                        f"{rec['three']}, train s to first {_f(rec['s_first'])}, "
                        f"{rec['steps_per_s']:,.0f} steps/s")
                if on_record is not None:
                    on_record(list(records))

    threads = [threading.Thread(target=worker) for _ in range(max(1, n_jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    order = {job: i for i, job in enumerate(jobs_for(algos, seeds, list(pythons)))}
    return sorted(records, key=lambda r: order[(r["library"], r["algo"], r["seed"])])


def sweep_overlap(seeds, path: Path = ROOT / "benchmarks" / "results" / "sweeps.json") -> dict:
    """{trainer: the race seeds its sweeps used} from ``sweeps.json`` (the record of which
    seeds each sweep behind rlnotes' defaults used); empty when the race's seeds are clean."""
    if not path.is_file():
        return {}
    out: dict = {}
    for sweep in json.loads(path.read_text())["sweeps"]:
        common = sorted(set(seeds) & set(sweep["seeds"]))
        if common:
            out.setdefault(sweep["trainer"], set()).update(common)
    return {k: sorted(v) for k, v in out.items()}


def _children_cpu() -> float:
    """User + system CPU seconds of this process's finished child processes."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _f(x):
    return "-" if x is None else f"{x:.2f}"


def summaries(records: list[dict]) -> dict:
    """{algo: {library: {figure: summarize(...)}}} over the runs without error."""
    out: dict = {}
    for rec in records:
        if "error" in rec:
            continue
        out.setdefault(rec["algo"], {}).setdefault(rec["library"], []).append(rec)
    return {algo: {lib: {fig: summarize([r[fig] for r in rs]) for fig in FIGURES}
                   | {"seeds": [r["seed"] for r in rs]}
                   for lib, rs in libs.items()}
            for algo, libs in out.items()}


def cartpole_results(records, *, seeds, budget, n_jobs, command, prov=None,
                     complete: bool = True, hp=None) -> dict:
    """The content of peers_cartpole.json (``complete`` False while the race still runs)."""
    prov = dict(prov or provenance(command))
    prov["loadavg_end"] = list(os.getloadavg())
    by_lib = {}
    for rec in records:
        if "versions" in rec:
            by_lib.setdefault(rec["library"], rec["versions"])
    return dict(
        kind="cartpole", complete=complete, provenance=prov, versions=by_lib,
        protocol=dict(env=ENV_ID, eval_every=EVAL_EVERY, eval_episodes=10, eval_envs=10,
                      eval_seed="seed + 10000", threshold=THRESHOLD, in_a_row=IN_A_ROW,
                      budget=budget, seeds=list(seeds), processes_at_once=n_jobs,
                      threads_per_process=1,
                      stop="at the first of three evaluations in a row >= 475, or the budget",
                      timing="training time excludes evaluation, includes building model and envs"),
        hyperparameters=dict(rlnotes="the trainers' defaults (rlnotes.<algo>.train)"
                             + (", changed as rlnotes_changes says" if hp else ""),
                             rlnotes_changes=dict(hp or {}),
                             sb3="RL-Zoo 2.9.2, hyperparams/<algo>.yml, CartPole-v1",
                             rl_zoo=RL_ZOO),
        summary=summaries(records), runs=records,
    )


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def race_grpo(trl_python: str | None, rounds: int, steps: int, out: Path, log=print) -> int:
    """Runs benchmarks/bench_grpo_step.py (rlnotes and TRL, alternating rounds) into ``out``."""
    try:  # the path as the repository sees it: the results file records the command
        out = out.resolve().relative_to(ROOT)
    except ValueError:
        pass
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_grpo_step.py"), "--rounds",
           str(rounds), "--steps", str(steps), "--json", str(out)]
    if trl_python:
        cmd += ["--trl-python", trl_python]
    log("GRPO step: " + " ".join(cmd))
    env = {**os.environ, **THREAD_ENV, "RLNOTES_PROGRESS": "0"}
    proc = subprocess.run(cmd, env=env, cwd=ROOT)
    return proc.returncode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sb3-python", default=None,
                        help="Python of the SB3 environment (without it: rlnotes only)")
    parser.add_argument("--trl-python", default=None,
                        help="Python of the TRL environment (without it: rlnotes only)")
    parser.add_argument("--quick", action="store_true", help="2 seeds, 20,480 steps, 1 round")
    parser.add_argument("--seeds", type=int, nargs="*", default=None)
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--algos", nargs="*", default=list(RACE_ORDER), choices=ALGOS,
                        help="in race order (default: the quick ones first, DQN last)")
    parser.add_argument("--jobs", type=int, default=2, help="processes at once (one thread each)")
    parser.add_argument("--hp", default="{}",
                        help='changes to rlnotes\' defaults, per algorithm: \'{"a2c": {"lam": 0.9}}\'')
    parser.add_argument("--only", choices=("cartpole", "grpo"), default=None)
    parser.add_argument("--out", default=None,
                        help="folder of the results files (default benchmarks/results; the "
                             "quick form writes to _build/peers-quick)")
    args = parser.parse_args(argv)
    plan = dict(QUICK if args.quick else FULL)
    hp = json.loads(args.hp)
    seeds = args.seeds if args.seeds else plan["seeds"]
    budget = args.budget or plan["budget"]
    out = Path(args.out) if args.out else ROOT / ("_build/peers-quick" if args.quick
                                                  else "benchmarks/results")
    command = repo_command("benchmarks/peers/race.py",
                           sys.argv[1:] if argv is None else argv, ROOT)
    t_start = time.perf_counter()
    status = 0
    if args.only in (None, "grpo"):
        t0, cpu0 = time.perf_counter(), _children_cpu()
        rc = race_grpo(args.trl_python, plan["grpo_rounds"], plan["grpo_steps"],
                       out / "peers_grpo_step.json")
        print(f"GRPO step race: exit {rc} ({time.perf_counter() - t0:.0f} s, "
              f"{_children_cpu() - cpu0:.0f} CPU s)", flush=True)
        status = status or rc
    if args.only in (None, "cartpole"):
        pythons = {"rlnotes": sys.executable}
        if args.sb3_python:
            pythons["sb3"] = args.sb3_python
        prov = provenance(command)
        prov["sweep_seed_overlap"] = sweep_overlap(seeds)
        if prov["sweep_seed_overlap"]:
            print(f"WARNING: seeds used by the sweeps behind the defaults: "
                  f"{prov['sweep_seed_overlap']} (benchmarks/results/sweeps.json)", flush=True)
        print(f"CartPole race: {len(seeds)} seeds {seeds}, budget {budget:,}, algos "
              f"{args.algos}, {args.jobs} processes at once; load {prov['loadavg_start']}",
              flush=True)
        t0, cpu0 = time.perf_counter(), _children_cpu()

        def partial(records):
            write_json(out / "peers_cartpole.json", cartpole_results(
                records, seeds=seeds, budget=budget, n_jobs=args.jobs, command=command,
                prov=prov, complete=False, hp=hp))

        records = race_cartpole(pythons, args.algos, seeds, budget, args.jobs,
                                log=lambda s: print(s, flush=True), on_record=partial, hp=hp)
        data = cartpole_results(records, seeds=seeds, budget=budget, n_jobs=args.jobs,
                                command=command, prov=prov, hp=hp)
        data["provenance"]["race_wall_s"] = time.perf_counter() - t0
        # CPU seconds of every run's process (user + sys): with the cores, what the race needs
        # on a quiet machine, whatever the load it met
        data["provenance"]["race_cpu_s"] = _children_cpu() - cpu0
        write_json(out / "peers_cartpole.json", data)
        print(f"wrote {out / 'peers_cartpole.json'} ({time.perf_counter() - t0:.0f} s, "
              f"{data['provenance']['race_cpu_s']:.0f} CPU s)", flush=True)
        if any("error" in r for r in records):
            status = 1
    sys.path.insert(0, str(HERE))
    import report

    print(report.render_all(out))
    print(f"race.py: {time.perf_counter() - t_start:.0f} s in all", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
