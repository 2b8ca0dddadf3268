"""The DPO chapter's claims on the preference task, with the chapter's settings (the cached SFT
model, the RLHF chapter's 2,000 training pairs and its reward model): each assert of
book/dpo.ipynb's lab sections, as a unit test. About a minute of CPU."""

import numpy as np
import pytest
import torch

import rlnotes.dpo as dpo
import rlnotes.lm as lm
from rlnotes.dpo import dpo_sweep, ppo_sweep
from rlnotes.lm.frontier import best_gold_within, gold_and_kl

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
    assert 1.5 < lab["dpo_eval"]["gold"] - lab["sft_eval"]["gold"] < 2.0


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
    d += dpo_sweep(sft, lab["train"], task, [0.3, 1.0], epochs=3, lr=1e-3, device=device)
    p = ppo_sweep(sft, task, proxy, [0.05, 0.1, 0.2], iterations=60, batch_size=64, lr=1e-3,
                  seed=0, device=device)
    kl_d, gold_d = [x["kl"] for x in d], [x["gold"] for x in d]
    kl_p, gold_p = [x["kl"] for x in p], [x["gold"] for x in p]
    sft_gold = lab["sft_eval"]["gold"]
    assert max(gold_d) > sft_gold + 1.5 and max(gold_p) > sft_gold + 1.5
    assert abs(max(gold_d) - max(gold_p)) < 0.2
    assert 2.05 < min(max(gold_d), max(gold_p)) and max(max(gold_d), max(gold_p)) < 2.35
    assert abs(sft_gold - 0.35) < 0.05
    assert best_gold_within(kl_p, gold_p, 2.0) > best_gold_within(kl_d, gold_d, 2.0) + 0.4


def test_averaged_logprobs_shorten_and_gain_less(lab):
    pol, _ = dpo.train_dpo(lab["sft"], lab["train"], beta=0.1, average_logps=True, epochs=3, lr=1e-3,
                           device=device)
    e = gold_and_kl(pol, lab["sft"], lab["task"])
    s, d = lab["sft_eval"], lab["dpo_eval"]
    assert e["length"] < s["length"] - 0.5 < d["length"] - 0.5
    assert e["gold"] < d["gold"]


def test_one_on_policy_round_does_not_pay_here(lab):
    fresh = lm.sample_preference_pairs(lab["policy"], lab["task"], 2000, torch.Generator().manual_seed(1))
    p2, _ = dpo.train_dpo(lab["policy"], fresh, beta=0.1, epochs=3, lr=1e-3, device=device, ref=lab["sft"])
    r2 = gold_and_kl(p2, lab["sft"], lab["task"])
    assert abs(r2["gold"] - lab["dpo_eval"]["gold"]) < 0.3 and r2["kl"] > lab["dpo_eval"]["kl"] + 1
    assert abs(fresh.ceiling() - lab["train"].ceiling()) < 0.01


def test_ipo_on_the_same_pairs_raises_gold(lab):
    pol, _ = dpo.train_dpo(lab["sft"], lab["train"], beta=0.1, loss_type="ipo", epochs=3, lr=1e-3,
                           device=device)
    assert gold_and_kl(pol, lab["sft"], lab["task"])["gold"] > lab["sft_eval"]["gold"] + 1.0


def test_recorded_frontier_claims():
    """The chapter's asserts on the recorded sweep (benchmarks/results/dpo_frontier.json)."""
    import json
    from pathlib import Path
    record = json.loads((Path(__file__).parents[2] / "benchmarks" / "results" / "dpo_frontier.json").read_text())
    groups = {}
    for row in record["rows"]:
        groups.setdefault((row["method"], row["beta"]), []).append(row)
    table = {k: (np.mean([x["kl"] for x in v]), np.mean([x["gold"] for x in v])) for k, v in groups.items()}
    best = lambda m: max((v for k, v in table.items() if k[0] == m), key=lambda v: v[1])  # noqa: E731
    means = lambda m: ([v[0] for k, v in table.items() if k[0] == m], [v[1] for k, v in table.items() if k[0] == m])  # noqa: E731
    assert abs(best("DPO")[1] - best("PPO")[1]) < 0.1 and abs(best("PPO")[0] - best("DPO")[0]) < 1
    assert best_gold_within(*means("PPO"), 2.0) > best_gold_within(*means("DPO"), 2.0) + 0.5
    assert best("PPO, gold reward")[1] > best("DPO")[1] + 0.4
    assert table[("PPO", 0.01)][1] < 0.35 < table[("DPO", 0.03)][1]
    assert abs(table[("DPO", 0.03)][0] - table[("DPO", 0.1)][0]) < 0.1
    shared = [x["kl"] for x in record["rows"] if x["method"] == "PPO, shared critic"]
    detached = [x["kl"] for x in record["rows"] if x["method"] == "PPO" and x["beta"] == 0.5]
    assert sum(k > 60 for k in shared) == 2 and max(detached) < 1
    kl_ppo = [table[k][0] for k in sorted(k for k in table if k[0] == "PPO")]
    assert all(a > b for a, b in zip(kl_ppo, kl_ppo[1:]))
