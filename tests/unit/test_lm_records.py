"""Tests of rlnotes.lm.records: reading the GRPO benchmarks' results files."""

import json
from pathlib import Path

import numpy as np
import pytest

from rlnotes.lm.records import ladder_runs, median_range, process_runs, run_change, run_values

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

GAP = {"sets": [{"set": "a"}], "runs": [
    {"set": "a", "loss": "grpo", "seed": 0, "gap": [1.0, 3.0]},
    {"set": "a", "loss": "grpo", "seed": 1, "gap": [2.0, 1.5]},
    {"set": "a", "loss": "dr_grpo", "seed": 0, "gap": [0.0, 0.0]}]}


def test_median_range():
    assert median_range([3, 1, 2]) == "2.00 [1.00, 3.00]"
    assert median_range(np.array([[0.5, -0.25]]), "{:+.2f}") == "+0.12 [-0.25, +0.50]"
    for bad, kw, match in (([], {}, "x"), ([1], dict(fmt="%d"), "fmt"), ([1], dict(fmt=3), "fmt")):
        with pytest.raises(ValueError, match=match):
            median_range(bad, **kw)


def test_run_values_and_change():
    assert run_values(GAP, "a", "grpo", "gap").tolist() == [[1.0, 3.0], [2.0, 1.5]]
    assert run_change(GAP, "a", "grpo", "gap").tolist() == [2.0, -0.5]
    for args, match in ((("b", "grpo", "gap"), "set_"), (("a", "dapo", "gap"), "set_"),
                        (("a", "grpo", "length"), "key")):
        with pytest.raises(ValueError, match=match):
            run_values(GAP, *args)
    with pytest.raises(ValueError, match="record"):
        run_values({"runs": []}, "a", "grpo", "gap")
    real = json.loads((RESULTS / "grpo_length_gap.json").read_text())
    first = real["sets"][0]["set"]
    assert run_values(real, first, "grpo", "gap").shape == (5, 2)


def test_process_runs():
    rec = {"seeds": [0, 1], "starts": [{"start": 0}, {"start": 1, "error": "no"}], "runs": [
        {"start": 0, "seed": s, "supervision": sup, "final_pass1": f, "start_pass1": 0.2,
         "samples_to_threshold": t}
        for s, sup, f, t in ((0, "outcome", 0.3, None), (0, "process", 0.4, 100),
                             (1, "outcome", 0.25, 200), (1, "process", 0.2, None))]}
    pr = process_runs(rec)
    assert pr["diff"].shape == (1, 2) and np.allclose(pr["diff"], [[0.1, -0.05]])
    assert np.allclose(pr["gain"]["process"], [[0.2, 0.0]]) and pr["reach"]["outcome"][0, 0] == np.inf
    assert [s["start"] for s in pr["starts"]] == [0]
    for bad in ({}, [], {"seeds": [0], "starts": []}):
        with pytest.raises(ValueError, match="record"):
            process_runs(bad)
    real = process_runs(json.loads((RESULTS / "grpo_process.json").read_text()))
    assert real["diff"].shape == (len(real["starts"]), len(real["seeds"]))


def test_ladder_runs():
    rec = {"start_pass1": 0.4, "rungs": [{"rung": "GRPO", "per_seed": {
        "seed": [0, 1], "pass1": [0.5, 0.6], "entropy": [0.2, 0.3], "zero_var": [0.4, 0.5]}}]}
    out = ladder_runs(rec)
    assert list(out) == ["GRPO"] and out["GRPO"]["pass1"].tolist() == [0.5, 0.6]
    with pytest.raises(ValueError, match="per-seed"):
        ladder_runs({"start_pass1": 0.4, "rungs": [{"rung": "GRPO", "pass1": [0.5, 0.4, 0.6]}]})
    for bad in ({}, {"rungs": []}, None):
        with pytest.raises(ValueError, match="record"):
            ladder_runs(bad)


def test_step_label_runs():
    from rlnotes.lm.records import step_label_runs
    rec = {"seeds": [0, 1], "runs": [{"labels": {"agree": 0.5, "false_pos": 0.3}},
                                     {"labels": {"agree": 0.6, "false_pos": 0.2}}]}
    out = step_label_runs(rec)
    assert out["agree"].tolist() == [0.5, 0.6] and out["false_pos"].tolist() == [0.3, 0.2]
    for bad, match in (({}, "record"), ({"seeds": [0], "runs": []}, "labels"),
                       ({"seeds": [0], "runs": [{"hedges": {}}]}, "labels")):
        with pytest.raises(ValueError, match=match):
            step_label_runs(bad)


def test_run_change_bad_input():
    for args, match in ((("b", "grpo", "gap"), "set_"), (("a", "grpo", "stall"), "key"), (("a", None, "gap"), "set_")):
        with pytest.raises(ValueError, match=match):
            run_change(GAP, *args)
    with pytest.raises(ValueError, match="record"):
        run_change([], "a", "grpo", "gap")
