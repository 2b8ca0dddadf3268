"""Numerical claims of the chapter "Actor-critic and generalised advantage estimation", section
A2C with continuous actions: Pendulum (the other claims of the chapter are in test_pg_exact.py
and test_pg_trainers.py)."""

import json
from pathlib import Path

import numpy as np

from rlnotes import a2c
from rlnotes.deeprl import Evaluator
from rlnotes.deeprl.curves import learning_curves

RECORD = Path(__file__).parents[2] / "benchmarks" / "results" / "pg_pendulum.json"
PENDULUM = dict(gamma=0.9, lam=0.95, num_envs=16, num_steps=16, learning_rate=1e-3,
                vf_lr_scale=10.0, max_grad_norm=None, optimizer="adam",
                normalize_advantages=True, lr_final_fraction=1.0, ent_coef=0.0,
                norm_obs=False, optimizer_eps=1e-5)


def test_recorded_pendulum_benchmark_claims():
    """The chapter's asserts on the recorded run (benchmarks/pg_pendulum.py)."""
    record = json.loads(RECORD.read_text())
    assert record["env_id"] == "Pendulum-v1" and record["settings"] == PENDULUM
    Y = np.array([run["scores"] for run in record["runs"]])
    steps = np.array(record["runs"][0]["steps"])
    assert len(Y) == 3 and steps[0] == 0 and steps[-1] == 1_200_000
    assert (Y[:, 0] < -1100).all()                              # every seed starts below -1,100
    assert np.round(Y[:, :3].mean(axis=0)[[0, 2]]).tolist() == [-1184, -849]
    last5 = Y[:, -5:].mean(axis=1)
    assert np.round(last5[:2]).tolist() == [-413, -301]
    assert (last5[:2] > -450).all() and (Y[:2, -5:].max(axis=1) > -200).all()  # seeds 0 and 1
    assert np.round(Y[:2, -5:].max(axis=1)).tolist() == [-187, -176]
    assert Y[2].max() > -500 and Y[2, -1] < -1000                         # seed 2 falls back
    assert round(Y[2].max()) == -493 and steps[np.argmax(Y[2])] == 300_000
    assert round(Y[2, -1]) == -1081
    assert all(np.abs(np.diff(row[7:])).max() > 200 for row in Y)         # jumps late on


def test_short_pendulum_runs_start_as_recorded_and_improve_on_average():
    """The chapter's short run: three seeds, 200,000 steps, the record's protocol."""
    record = json.loads(RECORD.read_text())
    long = np.array([run["scores"] for run in record["runs"]])
    start = []
    for seed in (0, 1, 2):
        evaluator = Evaluator("Pendulum-v1", seed)
        start.append(evaluator(a2c.train("Pendulum-v1", 256, seed=seed, **PENDULUM)).mean())
        evaluator.close()
    _, short = learning_curves(a2c.train, "Pendulum-v1", 200_000, [0, 1, 2],
                               eval_every=100_000, **PENDULUM)
    short = np.column_stack([start, short])
    # the same starting policies; later evaluations follow the CPU's rounding (another CPU or
    # floating-point build traces other runs from the same seeds than the record)
    np.testing.assert_allclose(short[:, 0], long[:, 0], rtol=1e-6)
    assert short[:, -1].mean() - short[:, 0].mean() > 100
