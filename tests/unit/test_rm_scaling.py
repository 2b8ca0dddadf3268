"""Tests of rlnotes.lm.rm_scaling (best-of-n from a pool, the reward model's data sweep) and of
rlnotes.lm.frontier.RecordSummary, at small scale."""

import itertools
import math

import numpy as np
import pytest
import torch

import rlnotes.lm as lm
from rlnotes.lm.frontier import RecordSummary, best_gold_within
from rlnotes.lm.rm_scaling import best_of_n_from_pool, bon_pool_weights, rm_data_sweep, sample_pool

torch.set_num_threads(1)


# --- best-of-n from a pool --------------------------------------------------------------------

@pytest.mark.parametrize("m, n", [(1, 1), (5, 1), (5, 3), (7, 7), (64, 16)])
def test_pool_weights_are_the_distribution_of_the_maximum_rank(m, n):
    w = bon_pool_weights(m, n)
    assert w.shape == (m,) and float(w.sum()) == pytest.approx(1.0, abs=1e-12)
    assert (w[: n - 1] == 0).all()  # fewer than n - 1 smaller scores: never the best of n
    brute = torch.tensor([math.comb(i - 1, n - 1) / math.comb(m, n) for i in range(1, m + 1)],
                         dtype=torch.float64)
    assert torch.allclose(w, brute, atol=1e-12)


def test_pool_estimate_matches_enumeration():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 6, generator=g, dtype=torch.float64)
    gold = torch.randn(3, 6, generator=g, dtype=torch.float64)
    out = best_of_n_from_pool(scores, gold, [1, 2, 3, 6])
    for k, n in enumerate(out["n"]):  # every subset of n of the 6 samples, equally likely
        per_prompt = []
        for p in range(3):
            best = [gold[p, max(c, key=lambda i: scores[p, i])] for c in itertools.combinations(range(6), n)]
            per_prompt.append(float(torch.stack(best).mean()))
        assert out["gold"][k] == pytest.approx(np.mean(per_prompt), abs=1e-12)
    assert out["gold"][0] == pytest.approx(float(gold.mean()))  # n = 1: the pool's mean
    top = gold.gather(1, scores.argmax(1, keepdim=True))
    assert out["gold"][-1] == pytest.approx(float(top.mean()))  # n = m: the top-scored sample
    assert out["kl"][0] == 0.0 and out["d"][2] == pytest.approx(math.sqrt(lm.bon_kl(3)))
    assert all(a <= b + 1e-12 for a, b in zip(out["proxy"], out["proxy"][1:]))  # the score only rises


def test_pool_estimate_rejects_bad_input():
    s = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="scores and gold"):
        best_of_n_from_pool(s, torch.zeros(2, 3), [1])
    with pytest.raises(ValueError, match="n must be <= m"):
        best_of_n_from_pool(s, s, [1, 5])
    with pytest.raises(ValueError, match="ns"):
        best_of_n_from_pool(s, s, [])
    with pytest.raises(ValueError, match="finite"):
        best_of_n_from_pool(s, torch.full((2, 4), float("nan")), [1])
    with pytest.raises(ValueError, match="m"):
        bon_pool_weights(0, 1)
    with pytest.raises(ValueError, match="n must be <= m"):
        bon_pool_weights(3, 4)
    with pytest.raises(ValueError, match="n"):
        bon_pool_weights(3, 0)


# --- the reward model's data sweep -------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    task = lm.PreferenceTask()
    sft, _ = lm.train_sft(task, steps=60, width=32, device="cpu")
    pairs = lm.sample_preference_pairs(sft, task, 300, torch.Generator().manual_seed(0))
    pool = sample_pool(sft, task, 20, 8, torch.Generator().manual_seed(1))
    return dict(task=task, sft=sft, pairs=pairs, pool=pool)


def test_sample_pool(small):
    pool = small["pool"]
    assert pool["gold"].shape == (20, 8) and len(pool["prompts"]) == 160
    assert pool["prompts"][0] == pool["prompts"][7] and pool["completions"].shape[0] == 160
    again = small["task"].reward(pool["prompts"], pool["completions"], pool["mask"])
    assert torch.allclose(pool["gold"].flatten().float(), again)
    for bad, match in (((0, 8), "n_prompts"), ((5, 0), "m")):
        with pytest.raises(ValueError, match=match):
            sample_pool(small["sft"], small["task"], *bad, torch.Generator())
    with pytest.raises(ValueError, match="generator"):
        sample_pool(small["sft"], small["task"], 5, 2, 0)


def test_rm_data_sweep(small):
    rows = rm_data_sweep(small["sft"], small["pairs"], [50, 300], small["pool"], [1, 2, 4, 8],
                         epochs=1, seed=0, device="cpu", valid=small["pairs"].subset(slice(0, 100)))
    assert [r["pairs"] for r in rows] == [50, 300]
    for r in rows:
        assert len(r["gold"]) == 4 and r["gold"][0] == pytest.approx(float(small["pool"]["gold"].mean()))
        assert math.isfinite(r["q1"]) and math.isfinite(r["q2"]) and 0 <= r["acc"] <= 1
        fitted = [d * (r["q1"] - r["q2"] * d) for d in r["d"]]  # the fit is of the gain over n = 1
        resid = np.array(r["gold"]) - r["gold"][0] - np.array(fitted)
        assert np.abs(resid).max() < np.abs(np.array(r["gold"]) - r["gold"][0]).max() + 1e-9
    # a model passed in is used, not retrained: the same rows
    rm, _ = lm.train_reward_model(small["sft"], small["pairs"].subset(slice(0, 50)), epochs=1, seed=0,
                                  device="cpu")
    again = rm_data_sweep(small["sft"], small["pairs"], [50], small["pool"], [1, 2, 4, 8], trained={50: rm})
    assert again[0]["gold"] == pytest.approx(rows[0]["gold"]) and again[0]["q1"] == pytest.approx(rows[0]["q1"])


def test_rm_data_sweep_rejects_bad_input(small):
    args = (small["sft"], small["pairs"])
    with pytest.raises(ValueError, match="sizes"):
        rm_data_sweep(*args, [301], small["pool"], [1, 2])
    with pytest.raises(ValueError, match="pool"):
        rm_data_sweep(*args, [50], {"gold": None}, [1, 2])
    with pytest.raises(ValueError, match="ns"):
        rm_data_sweep(*args, [50], small["pool"], [2, 4])
    with pytest.raises(ValueError, match="pairs"):
        rm_data_sweep(small["sft"], [1, 2], [50], small["pool"], [1, 2])


# --- the recorded sweep's summary --------------------------------------------------------------

def rows():
    out = []
    for seed in range(3):
        for b, kl, gold in ((0.1, 4.0, 1.5), (0.5, 2.0, 1.2), (1.0, 1.0, 1.0)):
            out.append(dict(method="DPO", beta=b, kl=kl + 0.1 * seed, gold=gold + 0.01 * seed, length=5.0, seed=seed))
        for b, kl, gold in ((0.05, 3.0, 1.6), (0.2, 1.5, 1.3)):
            out.append(dict(method="PPO", beta=b, kl=kl, gold=gold - 0.01 * seed, length=6.0, seed=seed))
    return out


def test_record_summary():
    rec = RecordSummary(rows())
    assert rec.at("DPO", 0.1, "kl") == [4.0, 4.1, 4.2]
    assert rec.table[("DPO", 0.1)] == pytest.approx((4.1, 1.51))
    kl, gold = rec.means("DPO")  # by increasing beta
    assert kl == pytest.approx([4.1, 2.1, 1.1]) and gold == pytest.approx([1.51, 1.21, 1.01])
    assert rec.means("DPO", (0.1, 1.0))[0] == pytest.approx([4.1, 1.1])
    assert rec.best("PPO") == pytest.approx((3.0, 1.59))
    lead = best_gold_within([3.0, 1.5], [1.59, 1.29], 2.5) - best_gold_within([4.1, 2.1, 1.1], [1.51, 1.21, 1.01], 2.5)
    assert rec.lead_within(2.5) == pytest.approx(lead)
    assert rec.widest_hole((0.1, 0.5, 1.0)) == pytest.approx((2.1, 4.1))


def test_record_summary_rejects_bad_input():
    with pytest.raises(ValueError, match="rows"):
        RecordSummary([])
    with pytest.raises(ValueError, match="each row"):
        RecordSummary([dict(method="DPO", beta=0.1)])
    rec = RecordSummary(rows())
    with pytest.raises(ValueError, match="method"):
        rec.best("IPO")
    with pytest.raises(ValueError, match="method, beta"):
        rec.at("DPO", 0.3, "kl")
    with pytest.raises(ValueError, match="betas"):
        rec.widest_hole((0.1,))
