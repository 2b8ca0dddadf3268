"""The peers' race harness (benchmarks/peers/) on a tiny budget: rlnotes' side, the results
file writer and the Markdown renderer. The peers' own environments are not needed here."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

PEER_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"
sys.path.insert(0, str(PEER_DIR))

import harness  # noqa: E402
import race  # noqa: E402
import report  # noqa: E402
from stats import repo_command, separated, summarize  # noqa: E402


def test_summarize_median_interval_and_censoring():
    s = summarize([4, 1, 3, 2, 5])
    assert s["median"] == 3 and s["min"] == 1 and s["max"] == 5
    assert 1 <= s["ci_low"] <= 3 <= s["ci_high"] <= 5
    assert s["n"] == 5 and s["n_reached"] == 5
    # a censored run (None) counts as beyond the budget: the median moves up, min stays finite
    c = summarize([2048, 4096, None, None, None])
    assert math.isinf(c["median"]) and c["n_reached"] == 2 and c["min"] == 2048
    assert summarize([1, 2, 3], seed=1) == summarize([1, 2, 3], seed=1)  # deterministic


@pytest.mark.parametrize("bad", [[], [1, float("nan")], [1, True], [1, float("inf")]])
def test_summarize_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="values"):
        summarize(bad)


@pytest.mark.parametrize("kwargs", [dict(level=0), dict(level=1.5), dict(resamples=0)])
def test_summarize_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        summarize([1, 2, 3], **kwargs)


def test_separated_needs_disjoint_intervals():
    low = summarize([1, 2, 3, 2, 1, 2])
    high = summarize([10, 11, 12, 11, 10, 12])
    assert separated(low, high) == -1 and separated(high, low) == 1
    assert separated(low, summarize([1, 2, 11, 2, 12, 3])) == 0


@pytest.mark.parametrize("kwargs,name", [
    (dict(library="cleanrl", algo="ppo", seed=0, budget=4096), "library"),
    (dict(library="rlnotes", algo="sac", seed=0, budget=4096), "algo"),
    (dict(library="rlnotes", algo="ppo", seed=-1, budget=4096), "seed"),
    (dict(library="rlnotes", algo="ppo", seed=0, budget=100), "budget"),
    (dict(library="sb3", algo="a2c", seed=0, budget=4096, hp={"lam": 0.9}), "hp"),
    (dict(library="rlnotes", algo="a2c", seed=0, budget=4096, hp=[("lam", 0.9)]), "hp"),
    (dict(library="rlnotes", algo="a2c", seed=0, budget=4096, hp="lam=0.9"), "hp"),
])
def test_run_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        harness.run(**kwargs)


def test_jobs_pair_libraries_and_alternate_order():
    jobs = race.jobs_for(["ppo", "dqn"], [100, 101], ["rlnotes", "sb3"])
    assert jobs[:2] == [("rlnotes", "ppo", 100), ("sb3", "ppo", 100)]
    assert jobs[2:4] == [("sb3", "ppo", 101), ("rlnotes", "ppo", 101)]
    assert {a for _, a, _ in jobs[4:]} == {"dqn"}  # one algorithm's seeds, then the next
    assert len(jobs) == 8 and len(set(jobs)) == 8


@pytest.fixture(scope="module")
def tiny_race(tmp_path_factory):
    """rlnotes' PPO, two seeds, 4,096 steps, each run in its own process."""
    records = race.race_cartpole({"rlnotes": sys.executable}, ["ppo"], [100, 101],
                                 4096, n_jobs=2, timeout=300, log=lambda s: None)
    data = race.cartpole_results(records, seeds=[100, 101], budget=4096, n_jobs=2,
                                 command="pytest tiny race")
    out = tmp_path_factory.mktemp("peers")
    race.write_json(out / "peers_cartpole.json", data)
    return records, out


def test_tiny_race_records(tiny_race):
    records, _ = tiny_race
    assert [r.get("error") for r in records] == [None] * 2
    for r in records:
        assert r["library"] == "rlnotes" and r["threads"] == 1
        steps = [s for s, _ in r["evals"]]
        # evaluated every 2,048 steps (the trainer may overshoot by less than one batch)
        assert steps and all(2048 * (i + 1) <= s < 2048 * (i + 2) for i, s in enumerate(steps))
        assert r["steps"] >= steps[-1] and r["train_s"] > 0 and r["steps_per_s"] > 0
        assert all(0 < m <= 500 for _, m in r["evals"])
        if r["first"] is not None:  # the first evaluation at 475 or more
            assert r["first"] == next(s for s, m in r["evals"] if m >= 475)
        else:
            assert all(m < 475 for _, m in r["evals"])


def test_tiny_race_is_deterministic_in_steps(tiny_race):
    records, _ = tiny_race
    again = race.run_job(sys.executable, "rlnotes", "ppo", 100, 4096, 300)
    first = next(r for r in records if r["algo"] == "ppo" and r["seed"] == 100)
    assert again["evals"] == first["evals"]


def test_results_file_and_renderer(tiny_race):
    _, out = tiny_race
    data = report.load(out / "peers_cartpole.json")
    prov = data["provenance"]
    for key in ("date", "cpu", "cpu_count", "loadavg_start", "loadavg_end", "command"):
        assert prov[key] not in (None, "")
    assert data["versions"]["rlnotes"]["torch"]
    s = data["summary"]["ppo"]["rlnotes"]
    assert s["seeds"] == [100, 101] and s["first"]["n"] == 2
    table = report.cartpole_table(data)
    assert "| PPO (SB3 PPO) |" in table and "A2C" not in table
    assert "seeds 100, 101 (2 seeds per side)" in table
    line = report.provenance_line(data)
    assert prov["cpu"] in line and "pytest tiny race" in line
    assert report.cartpole_per_seed(data).count("| rlnotes |") == 2
    assert "no peers_grpo_step.json" in report.render_all(out)


def test_grpo_renderer_states_only_what_the_interval_supports():
    def side(values):
        return dict(step_ms=summarize(values), step_cpu_ms=summarize(values),
                    round_median_ms=[float(sorted(values)[len(values) // 2])])

    base = dict(kind="grpo_step", provenance={}, workload=dict(
        prompts_per_step=8, group_size=8, max_new_tokens=4, beta=0.0, lr=3e-5, rounds=1,
        timed_steps=6, warmup_steps=1))
    apart = dict(base, summary=dict(rlnotes=side([25, 26, 24, 25, 27, 25]),
                                    trl=side([50, 52, 51, 49, 50, 53])))
    text = report.grpo_table(apart)
    assert "rlnotes' step is the shorter: TRL's median is 2.0 times" in text
    close = dict(base, summary=dict(rlnotes=side([25, 40, 24, 50, 27, 45]),
                                    trl=side([30, 26, 51, 28, 50, 29])))
    assert "no difference shown" in report.grpo_table(close)


@pytest.mark.parametrize("content", ["[]", '{"kind": "other"}'])
def test_load_rejects_other_files(tmp_path, content):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="path"):
        report.load(path)


def test_load_rejects_missing_file(tmp_path):
    with pytest.raises(ValueError, match="path"):
        report.load(tmp_path / "missing.json")


def test_tables_reject_the_wrong_kind(tiny_race):
    _, out = tiny_race
    data = json.loads((out / "peers_cartpole.json").read_text())
    with pytest.raises(ValueError, match="grpo_step"):
        report.grpo_table(data)
    with pytest.raises(ValueError, match="cartpole"):
        report.cartpole_table(dict(data, kind="grpo_step"))


def _fake_run(library, algo, seed, first, three, s_first):
    return dict(library=library, algo=algo, seed=seed, first=first, three=three,
                s_first=s_first, cpu_first=None if s_first is None else s_first * 0.9,
                steps_per_s=1000.0, steps=first or 8192, train_s=1.0, train_cpu=1.0, evals=[])


def test_bar_table_says_met_or_by_how_much_missed():
    seeds = [100, 101, 102]
    records = []
    for seed in seeds:  # A2C: fewer steps, under half the time, every seed holds 3 in a row
        records += [_fake_run("rlnotes", "a2c", seed, 4096, 4096, 1.0),
                    _fake_run("sb3", "a2c", seed, 8192, 8192, 3.0)]
    for seed in seeds:  # TRPO: more steps, 0.8 of the time, one seed never holds 3 in a row
        records += [_fake_run("rlnotes", "trpo", seed, 8192, None if seed == 101 else 8192, 4.0),
                    _fake_run("sb3", "trpo", seed, 6144, 6144, 5.0)]
    data = race.cartpole_results(records, seeds=seeds, budget=20480, n_jobs=2, command="test",
                                 hp={"a2c": {"lam": 0.9}})
    assert data["hyperparameters"]["rlnotes_changes"] == {"a2c": {"lam": 0.9}}
    assert "A2C `lam=0.9`" in report.cartpole_table(data)
    rows = report.bar_rows(data)
    assert rows["a2c"]["wall_ratio"] == pytest.approx(1 / 3) and rows["a2c"]["held"] == 3
    table = report.bar_table(data)
    a2c = next(line for line in table.splitlines() if line.startswith("| A2C"))
    trpo = next(line for line in table.splitlines() if line.startswith("| TRPO"))
    assert a2c.endswith("| met |") and "4,096 / 8,192" in a2c and "3 / 3 of 3" in a2c
    assert "missed: steps; wall ratio 0.80 > 0.5; 1 seed(s) never held 3 in a row" in trpo
    side = report.side_by_side(data)
    assert "| TRPO | 101 | 8,192 / 6,144 | - / 6,144 | 4.00 / 5.00 | 3.60 / 4.50 |" in side
    # a chapter shows its own algorithm's rows, and quotes its figures
    quoted = report.chapter_figures(data, "a2c")
    assert quoted["seeds"] == seeds and quoted["held"] == 3 and quoted["first"] == 4096
    assert quoted["steps_side"] == -1 and quoted["time_side"] == -1  # min-max apart, rlnotes lower
    for bad in ("sac", 3, "dqn"):  # "dqn": not in this file
        with pytest.raises(ValueError, match="algo|race"):
            report.chapter_figures(data, bad)
    for render in (report.cartpole_table, report.bar_table, report.side_by_side):
        only = render(data, algos=("trpo",))
        assert "TRPO" in only and "A2C" not in only
        assert render(data, algos=["a2c", "trpo"]).index("A2C") < render(data).index("TRPO")
        for bad in ("trpo", (), ("sac",)):
            with pytest.raises(ValueError, match="algos"):
                render(data, algos=bad)


def test_rlnotes_run_takes_hyperparameters_and_may_run_on():
    """``hp`` reaches the trainer (a bad one raises its ValueError); ``stop_after_three=False``
    runs to the budget."""
    with pytest.raises(ValueError, match="num_steps"):
        harness.run_rlnotes("a2c", 100, 2048, hp={"num_steps": 0})
    rec = harness.run_rlnotes("a2c", 100, 4096, hp={"num_steps": 16},
                              stop_after_three=False)
    assert rec["steps"] >= 4096 and [s for s, _ in rec["evals"]] == [2048, 4096]


def test_race_seeds_are_disjoint_from_every_recorded_sweep(tmp_path):
    assert race.sweep_overlap(race.FULL["seeds"]) == {}
    assert race.sweep_overlap(race.QUICK["seeds"]) == {}
    assert race.sweep_overlap([0, 5, 100, 201, 250])["dqn"] == [0, 5, 201]
    assert race.sweep_overlap([201])["a2c"] == [201]
    assert race.sweep_overlap([1], tmp_path / "missing.json") == {}


def test_repo_command_holds_no_path_of_the_machine(tmp_path):
    root = tmp_path / "clone"
    argv = ["--sb3-python", "/tmp/x/peers-sb3-2.9.2/bin/python",
            "--trl-python", "/home/u/.cache/rlnotes/peers-trl-1.16.0/bin/python",
            "--out", str(root / "benchmarks" / "results"), "--seeds", "100", "101"]
    command = repo_command("benchmarks/peers/race.py", argv, root)
    assert command == ("python benchmarks/peers/race.py"
                       " --sb3-python $(TOOLS_CACHE)/peers-sb3-2.9.2/bin/python"
                       " --trl-python $(TOOLS_CACHE)/peers-trl-1.16.0/bin/python"
                       " --out benchmarks/results --seeds 100 101")
    for path in ("/tmp/", "/home/", str(tmp_path)):
        assert path not in command
