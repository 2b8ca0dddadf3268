"""A DQN hyperparameter sweep on CartPole-v1 under the benchmark protocol, for a many-core machine.

    python benchmarks/dqn_sweep.py CONFIGS.json NSEEDS DEADLINE_S [SEED0]

CONFIGS.json is a list of keyword dicts for ``rlnotes.dqn.train``; every (config, seed) runs in
its own process ($SWEEP_PROCS at a time, default 16, one torch thread each) for 50,000 steps, evaluated every 2,048
steps as in cartpole.py, stopping after three evaluations in a row >= 475 (SWEEP_STOP=0 runs
on). Jobs are ordered seed-major, so a deadline leaves every config with about as many seeds.
Writes ``$OUT/<CONFIGS>.jsonl``: per run the first and three-in-a-row steps, the process CPU
seconds to the first (evaluation excluded) and every evaluation. See benchmarks/README.md.
"""
import json
import os
import sys
import time
os.environ["OMP_NUM_THREADS"] = "1"
import multiprocessing as mp

def run(job):
    import torch
    torch.set_num_threads(1)
    from rlnotes import dqn
    from rlnotes.deeprl.evaluation import Evaluator
    ci, cfg, seed, budget = job
    ev = Evaluator("CartPole-v1", seed)
    st = {"next": 2048, "eval": 0.0, "first": None, "streak": 0, "three": None, "t_first": None,
          "evals": []}
    t0 = time.process_time()
    def cb(steps, policy):
        stop = False
        while steps >= st["next"] and st["next"] <= budget:
            st["next"] += 2048
            if st["evals"] and st["evals"][-1][0] == steps:
                continue
            a = time.process_time()
            m = float(ev(policy).mean())
            st["eval"] += time.process_time() - a
            st["evals"].append((steps, round(m, 1)))
            if m >= 475:
                st["streak"] += 1
                if st["first"] is None:
                    st["first"] = steps
                    st["t_first"] = time.process_time() - t0 - st["eval"]
                if st["streak"] >= 3 and st["three"] is None:
                    st["three"] = st["evals"][-3][0]
                    stop = STOP
            else:
                st["streak"] = 0
        return stop
    err = None
    try:
        dqn.train("CartPole-v1", budget, seed=seed, callback=cb, **cfg)
    except Exception as e:
        err = repr(e)
    tot = time.process_time() - t0 - st["eval"]
    return dict(ci=ci, cfg=cfg, seed=seed, first=st["first"], three=st["three"],
                t_first=st["t_first"], train_cpu=tot, evals=st["evals"], err=err)

STOP = os.environ.get("SWEEP_STOP", "1") == "1"

if __name__ == "__main__":
    cfgs = json.load(open(sys.argv[1]))
    nseeds, deadline = int(sys.argv[2]), float(sys.argv[3])
    seed0 = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    for c in cfgs:
        if "hidden_sizes" in c:
            c["hidden_sizes"] = tuple(c["hidden_sizes"])
    jobs = [(i, c, s, 50000) for s in range(seed0, seed0 + nseeds) for i, c in enumerate(cfgs)]
    name = os.path.splitext(os.path.basename(sys.argv[1]))[0]
    out = open(os.path.join(os.environ.get("OUT", "."), name + ".jsonl"), "w")
    t, n = time.time(), 0
    pool = mp.Pool(int(os.environ.get("SWEEP_PROCS", "16")))
    try:
        for r in pool.imap_unordered(run, jobs, chunksize=1):
            out.write(json.dumps(r) + "\n")
            out.flush()
            n += 1
            if time.time() - t > deadline:
                print("deadline hit"); break
    finally:
        pool.terminate()
    print("done", n, "of", len(jobs), "jobs in", round(time.time() - t), "s")
