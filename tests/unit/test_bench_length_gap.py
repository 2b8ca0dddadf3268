"""benchmarks/bench_grpo_length_gap.py writes each command's set into the results file: a set
replaces the set of the same name in place and keeps the others (no training here)."""

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
    spec = importlib.util.spec_from_file_location("bench_grpo_length_gap",
                                                  ROOT / "benchmarks" / "bench_grpo_length_gap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs(name, value):
    return [dict(set=name, loss=loss, seed=seed, gap=[value, value]) for loss in ("grpo", "dr_grpo") for seed in (0, 1)]


def test_write_set_replaces_in_place(tmp_path):
    bench = _bench()
    path = tmp_path / "gap.json"
    bench.write_set(path, dict(set="a", steps=40), _runs("a", 1.0))
    bench.write_set(path, dict(set="b", steps=120), _runs("b", 2.0))
    bench.write_set(path, dict(set="a", steps=40, command="again"), _runs("a", 3.0))  # replaces a, keeps b
    record = json.loads(path.read_text())
    assert [s["set"] for s in record["sets"]] == ["a", "b"] and record["sets"][0]["command"] == "again"
    assert [r["gap"][0] for r in record["runs"]] == [3.0] * 4 + [2.0] * 4  # in the order of the sets
    assert [(r["loss"], r["seed"]) for r in record["runs"][:4]] == [("grpo", 0), ("grpo", 1),
                                                                     ("dr_grpo", 0), ("dr_grpo", 1)]
    assert record["benchmark"] == "benchmarks/bench_grpo_length_gap.py"


def test_set_names_match_the_record():
    bench = _bench()
    default = dict(digits=1, losses="grpo,dr_grpo", beta=0.5, n_prompts=32, steps=40)
    args = lambda **kw: SimpleNamespace(**{**default, **kw})  # noqa: E731
    names = [bench.set_name(args()), bench.set_name(args(steps=120)),
             bench.set_name(args(losses="grpo_nostd,dr_grpo_std")), bench.set_name(args(beta=0.0)),
             bench.set_name(args(digits=2))]
    record = json.loads((ROOT / "benchmarks" / "results" / "grpo_length_gap.json").read_text())
    assert names == [s["set"] for s in record["sets"]]  # the chapter reads the sets in this order
