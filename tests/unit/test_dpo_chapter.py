"""The DPO chapter's claims on the preference task, with the chapter's settings (the cached SFT
model, the RLHF chapter's 2,000 training pairs and its reward model): each assert of
book/dpo.ipynb's lab sections, as a unit test. About a minute of CPU."""

import numpy as np
import pytest
import torch

import rlnotes.dpo as dpo
import rlnotes.lm as lm
from rlnotes.dpo import dpo_sweep, ppo_sweep
from rlnotes.lm.frontier import best_gold_within, frontier_gap, gold_and_kl, upper_frontier

torch.set_num_threads(1)
device = torch.device("cpu")


@pytest.fixture(scope="module")
def lab():
    task = lm.PreferenceTask(seed=0)
    sft, _ = lm.sft_model(task, seed=0, device=device)
    pairs = lm.sample_preference_pairs(sft, task, 3000, torch.Generator().manual_seed(0))
    train, test = pairs.subset(slice(0, 2000)), pairs.subset(slice(2000, 3000))
    rm, rm_history = lm.train_reward_model(sft, train, epochs=4, lr=3e-3, seed=0, device=device, valid=test)
    ref_x, ref_y, ref_m = task.sft_batch(1000, torch.Generator().manual_seed(2))
    rm.normalise(ref_x, ref_y, ref_m)
    policy, hist = dpo.train_dpo(sft, train, beta=0.1, epochs=3, lr=1e-3, device=device)
    return dict(task=task, sft=sft, train=train, test=test, rm=rm, rm_acc=rm_history["valid_acc"][-1],
                policy=policy, hist=hist, sft_eval=gold_and_kl(sft, sft, task),
                dpo_eval=gold_and_kl(policy, sft, task))


def test_dpo_matches_the_reward_model_and_raises_gold(lab):
    acc = dpo.implicit_reward_accuracy(lab["policy"], lab["sft"], lab["test"], beta=0.1)
    assert abs(acc - lab["rm_acc"]) < 0.03 and acc > 0.65
    assert lab["dpo_eval"]["gold"] > lab["sft_eval"]["gold"] + 1.5
    assert lab["test"].ceiling() - max(acc, lab["rm_acc"]) < 0.07
    assert 2.0 < lab["dpo_eval"]["gold"] - lab["sft_eval"]["gold"] < 2.8


def test_chosen_logprob_falls_while_margin_grows(lab):
    h = lab["hist"]
    start = {k: np.mean(h[k][:5]) for k in ("chosen", "rejected", "margin")}
    end = {k: np.mean(h[k][-10:]) for k in ("chosen", "rejected", "margin")}
    assert end["chosen"] < start["chosen"] - 2
    assert end["rejected"] < end["chosen"] - 2
    assert end["margin"] > start["margin"] + 0.15


def test_frontier_small_sweep(lab):
    task, sft, rm = lab["task"], lab["sft"], lab["rm"]

    def proxy(x, y, m):
        with torch.no_grad():
            return rm(x, y, m)

    d = [dict(method="DPO", beta=0.1, **lab["dpo_eval"])]
    d += dpo_sweep(sft, lab["train"], task, [0.3, 0.5, 1.0], epochs=3, lr=1e-3, device=device)
    p = ppo_sweep(sft, task, proxy, [0.05, 0.1, 0.2], iterations=60, batch_size=64, lr=1e-3,
                  seed=0, device=device)
    kl_d, gold_d = [x["kl"] for x in d], [x["gold"] for x in d]
    kl_p, gold_p = [x["kl"] for x in p], [x["gold"] for x in p]
    sft_gold = lab["sft_eval"]["gold"]
    assert max(gold_d) > sft_gold + 1.5 and max(gold_p) > sft_gold + 1.5
    assert abs(max(gold_d) - max(gold_p)) < 0.25
    assert -0.4 < sft_gold < 0.2
    assert frontier_gap(kl_d, gold_d, kl_p, gold_p) < 0.35


def test_averaged_logprobs_shorten_and_gain_less(lab):
    pol, _ = dpo.train_dpo(lab["sft"], lab["train"], beta=0.1, average_logps=True, epochs=3, lr=1e-3,
                           device=device)
    e = gold_and_kl(pol, lab["sft"], lab["task"])
    s, d = lab["sft_eval"], lab["dpo_eval"]
    assert e["length"] < s["length"] - 0.5 < d["length"] - 0.5
    assert e["gold"] < d["gold"]


def test_one_on_policy_round_does_not_pay_here(lab):
    fresh = lm.sample_preference_pairs(lab["policy"], lab["task"], 2000, torch.Generator().manual_seed(100))
    kw = dict(beta=0.1, epochs=3, lr=1e-3, device=device, ref=lab["sft"])
    on = gold_and_kl(dpo.train_dpo(lab["policy"], fresh, **kw)[0], lab["sft"], lab["task"])
    off = gold_and_kl(dpo.train_dpo(lab["policy"], lab["train"], **kw)[0], lab["sft"], lab["task"])
    assert off["gold"] > on["gold"] + 0.15  # the control (the offline pairs again) does better
    assert abs(fresh.ceiling() - lab["train"].ceiling()) < 0.01


def test_ipo_on_the_same_pairs_raises_gold(lab):
    pol, hist = dpo.train_dpo(lab["sft"], lab["train"], beta=0.1, loss_type="ipo", epochs=3, lr=1e-3,
                              device=device)
    assert gold_and_kl(pol, lab["sft"], lab["task"])["gold"] > lab["sft_eval"]["gold"] + 1.0
    assert np.mean(hist["margin"][-10:]) / 0.1 < 0.6 * 5  # after 3 epochs, far below its target 5


def test_recorded_frontier_claims(lab):
    """The chapter's asserts on the recorded sweep (benchmarks/results/dpo_frontier.json)."""
    import json
    from pathlib import Path
    record = json.loads((Path(__file__).parents[2] / "benchmarks" / "results" / "dpo_frontier.json").read_text())
    groups = {}
    for row in record["rows"]:
        groups.setdefault((row["method"], row["beta"]), []).append(row)
    table = {k: (np.mean([x["kl"] for x in v]), np.mean([x["gold"] for x in v])) for k, v in groups.items()}
    best = lambda m: max((v for k, v in table.items() if k[0] == m), key=lambda v: v[1])  # noqa: E731

    def means(m, betas=None):
        keys = [k for k in table if k[0] == m and (betas is None or k[1] in betas)]
        return [table[k][0] for k in keys], [table[k][1] for k in keys]

    assert abs(best("DPO")[1] - best("PPO")[1]) < 0.15
    old = best_gold_within(*means("PPO"), 2.0) - best_gold_within(*means("DPO", (0.03, 0.1, 0.3, 1.0, 3.0)), 2.0)
    full = best_gold_within(*means("PPO"), 2.0) - best_gold_within(*means("DPO"), 2.0)
    assert old > 0.25 and abs(full) < 0.15
    assert frontier_gap(*means("DPO"), *means("PPO")) < 0.2
    assert best("PPO, gold reward")[1] > best("DPO")[1] + 0.4
    task = lab["task"]  # the gold optimum, live: over every completion a policy can write
    optimum = float(task.gold_optimum(task.sample_prompts(1000, torch.Generator().manual_seed(10)))[0].mean())
    assert best("PPO, gold reward")[1] < optimum - 1.5
    kl_at = lambda m, b: [x["kl"] for x in groups[(m, b)]]  # noqa: E731
    gold_at = lambda m, b: [x["gold"] for x in groups[(m, b)]]  # noqa: E731
    for b in (0.1, 0.3, 1.0):
        assert min(kl_at("DPO", b)) > 1.5 * max(kl_at("PPO", b))
    assert max(kl_at("DPO", 0.03)) < min(kl_at("PPO", 0.03))
    sft_gold = lab["sft_eval"]["gold"]  # the SFT policy on the evaluation prompts
    assert max(gold_at("PPO", 0.0)) < sft_gold
    assert sum(g < sft_gold for g in gold_at("PPO", 0.01)) >= 1
    assert min(gold_at("DPO", 0.03)) > sft_gold + 1
    on, off = gold_at("DPO, on-policy round", 0.1), gold_at("DPO, offline round", 0.1)
    assert all(b > a + 0.15 for a, b in zip(on, off))
    shared = kl_at("PPO, shared critic", 0.5)
    assert min(shared) > 10 * max(kl_at("PPO", 0.5)) and max(kl_at("PPO", 0.5)) < 1.5
    kl_ppo = [table[k][0] for k in sorted(k for k in table if k[0] == "PPO")]
    assert all(a > b for a, b in zip(kl_ppo, kl_ppo[1:]))


def test_recorded_iterative_claims():
    """The chapter's asserts on the recorded iterative DPO and its control
    (benchmarks/results/dpo_iterative.json), per seed."""
    import json
    from pathlib import Path
    record = json.loads((Path(__file__).parents[2] / "benchmarks" / "results" / "dpo_iterative.json").read_text())
    assert record["arms"] == ["iterative", "on-policy, fixed reference", "offline"] and record["rounds"] == 3
    assert len(record["seeds"]) >= 3 and record["provenance"]["commit"]
    it = {(r["arm"], r["round"], r["seed"]): r for r in record["rows"]}
    assert len(it) == len(record["rows"]) == 3 * 4 * len(record["seeds"])
    for s in record["seeds"]:
        first = it["offline", 1, s]
        same = lambda r: {k: v for k, v in r.items() if k != "arm"}  # noqa: E731
        assert all(same(it[a, 1, s]) == same(first) for a in record["arms"])  # the shared first round
        last_it, last_off = it["iterative", 3, s], it["offline", 3, s]
        assert abs(it["iterative", 2, s]["gold"] - first["gold"]) < 0.4
        assert last_it["gold"] < first["gold"] - 0.5 and last_it["gold"] < last_off["gold"] - 0.5
        assert last_it["kl"] > first["kl"] + 1.0 and last_it["kl"] > last_off["kl"] + 1.0
        assert abs(last_off["gold"] - first["gold"]) < 0.3
        assert last_it["ceiling"] < last_off["ceiling"] - 0.02
        assert last_it["held_out_acc"] < last_off["held_out_acc"]


def test_bench_dpo_iterative_rejects_bad_rounds():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).parents[2] / "benchmarks" / "bench_dpo_iterative.py"
    spec = importlib.util.spec_from_file_location("bench_dpo_iterative", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for bad in ("1", "0", "-2"):
        with pytest.raises(ValueError, match="--rounds"):
            bench.main(["--rounds", bad, "--json", "/nonexistent/x.json"])
