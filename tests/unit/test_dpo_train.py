"""Tests of the DPO training pieces of rlnotes.dpo (IPO's loss, sequence log-probs of pairs, the
training loop, implicit-reward accuracy) and of rlnotes.lm.frontier, at small scale: a TinyGPT of
width 32 briefly fine-tuned on the preference task."""

import copy
import math

import numpy as np
import pytest
import torch

import rlnotes.lm as lm
from rlnotes.dpo import (dpo_loss, implicit_reward_accuracy, ipo_loss, pair_logps, sequence_logprob,
                         train_dpo)
from rlnotes.dpo import dpo_sweep, ppo_sweep
from rlnotes.lm.frontier import best_gold_within, frontier_gap, gold_and_kl, upper_frontier

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def small():
    task = lm.PreferenceTask()
    sft, _ = lm.train_sft(task, steps=60, width=32, device="cpu")
    pairs = lm.sample_preference_pairs(sft, task, 600, torch.Generator().manual_seed(0))
    return dict(task=task, sft=sft, train=pairs.subset(slice(0, 400)), test=pairs.subset(slice(400, 600)))


def logps(B=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(-5.0 + torch.randn(B, generator=g, dtype=torch.float64) for _ in range(4))


# --- IPO ------------------------------------------------------------------------------------

@pytest.mark.parametrize("beta", [0.1, 0.5, 2.0])
def test_ipo_at_reference_and_at_target(beta):
    pc, pr, _, _ = logps()
    assert float(ipo_loss(pc, pr, pc.clone(), pr.clone(), beta)) == pytest.approx(1 / (4 * beta ** 2))
    # a margin of exactly 1 / (2 beta) costs nothing; more costs again (unlike DPO)
    target = pc + 1 / (2 * beta)
    assert float(ipo_loss(target, pr, pc, pr, beta)) == pytest.approx(0.0, abs=1e-20)
    assert float(ipo_loss(pc + 5 / beta, pr, pc, pr, beta)) > 1.0
    assert float(dpo_loss(pc + 5 / beta, pr, pc, pr, beta)) < float(dpo_loss(target, pr, pc, pr, beta))


def test_ipo_gradient_is_zero_at_target_and_detaches_reference():
    pc, pr, rc, rr = logps(seed=1)
    beta = 0.2
    pc = (rc + 1 / (2 * beta) + (pr - rr)).clone().requires_grad_()
    rc = rc.clone().requires_grad_()
    ipo_loss(pc, pr, rc, rr, beta).backward()
    assert float(pc.grad.abs().max()) < 1e-12 and rc.grad is None


def test_ipo_rejects_bad_input():
    pc, pr, rc, rr = logps()
    with pytest.raises(ValueError, match="policy_rejected_logps"):
        ipo_loss(pc, pr[:3], rc, rr)  # mismatched batch sizes
    with pytest.raises(ValueError, match="ref_chosen_logps"):
        ipo_loss(pc, pr, rc[:2], rr)
    for beta in (0.0, -0.1):
        with pytest.raises(ValueError, match="beta"):
            ipo_loss(pc, pr, rc, rr, beta)
    empty = torch.zeros(0, dtype=torch.float64)
    with pytest.raises(ValueError, match="policy_chosen_logps"):
        ipo_loss(empty, empty, empty, empty)
    with pytest.raises(ValueError, match="policy_chosen_logps"):
        ipo_loss(pc.view(1, -1), pr, rc, rr)


# --- pair_logps -----------------------------------------------------------------------------

def test_pair_logps_sums_and_averages(small):
    sub = small["train"].subset(slice(0, 7))
    pc, pr = pair_logps(small["sft"], sub)
    tok = lm.completion_logprobs(small["sft"], sub.prompts, sub.chosen, sub.chosen_mask)
    torch.testing.assert_close(pc, sequence_logprob(tok, sub.chosen_mask))
    tok = lm.completion_logprobs(small["sft"], sub.prompts, sub.rejected, sub.rejected_mask)
    torch.testing.assert_close(pr, sequence_logprob(tok, sub.rejected_mask))
    ac, ar = pair_logps(small["sft"], sub, average=True)
    torch.testing.assert_close(ac, pc / sub.chosen_mask.sum(1))
    torch.testing.assert_close(ar, pr / sub.rejected_mask.sum(1))
    assert bool((pc < 0).all()) and pc.requires_grad


def test_pair_logps_rejects_bad_input(small):
    with pytest.raises(ValueError, match="pairs"):
        pair_logps(small["sft"], [])  # an empty preference set
    with pytest.raises(ValueError, match="pairs"):
        pair_logps(small["sft"], (small["train"].chosen, small["train"].rejected))
    with pytest.raises(ValueError, match="average"):
        pair_logps(small["sft"], small["train"], average="yes")


# --- train_dpo ------------------------------------------------------------------------------

def test_train_dpo_learns_and_leaves_sft_alone(small):
    before = copy.deepcopy(small["sft"].state_dict())
    policy, h = train_dpo(small["sft"], small["train"], beta=0.5, epochs=3, batch_size=50, lr=3e-3,
                          device="cpu")
    assert set(h) == {"loss", "chosen", "rejected", "margin", "accuracy"}
    assert len(h["loss"]) == 3 * 8
    assert h["loss"][0] == pytest.approx(math.log(2), abs=1e-6)  # policy = reference at step 0
    assert np.mean(h["loss"][-4:]) < math.log(2) - 0.03
    assert np.mean(h["margin"][-4:]) > 0.05 and np.mean(h["accuracy"][-4:]) > 0.6
    for k, v in small["sft"].state_dict().items():
        assert torch.equal(v, before[k])
    train_acc = implicit_reward_accuracy(policy, small["sft"], small["train"], 0.5)
    assert train_acc > 0.65
    assert implicit_reward_accuracy(small["sft"], small["sft"], small["train"], 0.1) == 0.0  # ties miss


def test_train_dpo_is_deterministic_and_callback_stops(small):
    a, ha = train_dpo(small["sft"], small["train"], epochs=1, batch_size=100, device="cpu", seed=3)
    b, hb = train_dpo(small["sft"], small["train"], epochs=1, batch_size=100, device="cpu", seed=3)
    assert ha["loss"] == hb["loss"]
    _, hc = train_dpo(small["sft"], small["train"], epochs=2, batch_size=100, device="cpu",
                      callback=lambda step, policy, hist: step >= 2)
    assert len(hc["loss"]) == 2


def test_train_ipo_margins_head_for_their_target(small):
    beta = 1.0  # target margin 1 / (2 beta) = 0.5 nats, beta * target = 0.5
    _, h = train_dpo(small["sft"], small["train"], beta=beta, loss_type="ipo", epochs=4,
                     batch_size=50, lr=3e-3, average_logps=True, device="cpu")
    assert h["loss"][0] == pytest.approx(1 / (4 * beta ** 2), abs=1e-5)
    assert np.mean(h["loss"][-4:]) < 0.9 * h["loss"][0]  # noisy labels: the loss has a floor
    assert 0 < np.mean(h["margin"][-4:]) < 0.5


def test_train_dpo_rejects_bad_input(small):
    sft, pairs = small["sft"], small["train"]
    for beta in (0.0, -1.0):
        with pytest.raises(ValueError, match="beta"):
            train_dpo(sft, pairs, beta=beta)
    with pytest.raises(ValueError, match="pairs"):
        train_dpo(sft, [])  # an empty preference set
    with pytest.raises(ValueError, match="loss_type"):
        train_dpo(sft, pairs, loss_type="kto")
    with pytest.raises(ValueError, match="average_logps"):
        train_dpo(sft, pairs, average_logps=1)
    with pytest.raises(ValueError, match="epochs"):
        train_dpo(sft, pairs, epochs=0)
    with pytest.raises(ValueError, match="lr"):
        train_dpo(sft, pairs, lr=0.0)
    with pytest.raises(ValueError, match="beta"):
        implicit_reward_accuracy(sft, sft, pairs, beta=0.0)
    with pytest.raises(ValueError, match="pairs"):
        implicit_reward_accuracy(sft, sft, [])
    with pytest.raises(ValueError, match="chosen"):  # mismatched counts cannot even be built
        lm.PreferencePairs(pairs.prompts[:-1], pairs.chosen, pairs.chosen_mask, pairs.rejected,
                           pairs.rejected_mask)


# --- the frontier ---------------------------------------------------------------------------

def test_gold_and_kl_of_the_reference_is_its_gold_and_zero_kl(small):
    task, sft = small["task"], small["sft"]
    m = gold_and_kl(sft, sft, task, n_prompts=200)
    assert abs(m["kl"]) < 1e-5 and m["kl_se"] < 1e-5
    g = torch.Generator().manual_seed(10)
    x = task.sample_prompts(200, g)
    y, _, mask = lm.generate(sft, x, task.max_new_tokens, eos_id=task.tokenizer.eos_id, generator=g)
    assert m["gold"] == pytest.approx(float(task.reward(x, y, mask).double().mean()), abs=1e-6)


def test_sweeps_measure_trained_policies_the_same_way(small):
    task, sft, pairs = small["task"], small["sft"], small["train"]
    d = dpo_sweep(sft, pairs, task, [0.1], n_eval=200, epochs=1, batch_size=100, device="cpu")
    p = ppo_sweep(sft, task, task.reward, [0.1], n_eval=200, iterations=3, batch_size=16, device="cpu")
    for row, method in ((d[0], "DPO"), (p[0], "PPO")):
        assert row["method"] == method and row["beta"] == 0.1
        assert row["kl"] > 0 and math.isfinite(row["gold"])
    with pytest.raises(ValueError, match="betas"):
        dpo_sweep(sft, pairs, task, [])
    with pytest.raises(ValueError, match="betas"):
        dpo_sweep(sft, pairs, task, [0.0])
    with pytest.raises(ValueError, match="betas"):
        ppo_sweep(sft, task, task.reward, [-0.1])
    with pytest.raises(ValueError, match="pairs"):
        dpo_sweep(sft, [], task, [0.1])


def test_upper_frontier_and_best_gold_within():
    kl = [0.0, 1.0, 2.0, 3.0, 1.5]
    gold = [0.0, 1.0, 0.5, 2.0, 1.5]
    assert upper_frontier(kl, gold) == [0, 1, 4, 3]
    assert best_gold_within(kl, gold, 1.2) == 1.0
    assert best_gold_within(kl, gold, -1) == -math.inf
    with pytest.raises(ValueError, match="gold"):
        upper_frontier(kl, gold[:2])
    with pytest.raises(ValueError, match="kl"):
        upper_frontier([], [])
    with pytest.raises(ValueError, match="finite"):
        upper_frontier([0.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="kl_max"):
        best_gold_within(kl, gold, float("inf"))


def test_frontier_gap():
    # frontier a: (0, 0) (1, 1) (3, 2); b: (0, 0) (2, 2) (4, 2), and a dominated point of b
    kl_a, gold_a = [0.0, 1.0, 3.0], [0.0, 1.0, 2.0]
    kl_b, gold_b = [0.0, 2.0, 4.0, 3.0], [0.0, 2.0, 2.0, 1.0]
    # on [0, 3]: a = k on [0, 1], 1 + (k - 1) / 2 on [1, 3]; b = k on [0, 2], 2 after: largest gap 0.5 at k = 2
    assert frontier_gap(kl_a, gold_a, kl_b, gold_b, n=301) == pytest.approx(0.5)
    assert frontier_gap(kl_a, gold_a, kl_a, gold_a) == 0.0
    assert frontier_gap(kl_b, gold_b, kl_a, gold_a, n=301) == pytest.approx(0.5)  # symmetric
    with pytest.raises(ValueError, match="share"):
        frontier_gap([0.0, 1.0], [0.0, 1.0], [2.0, 3.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="gold"):
        frontier_gap(kl_a, gold_a[:2], kl_b, gold_b)
    with pytest.raises(ValueError, match="n"):
        frontier_gap(kl_a, gold_a, kl_b, gold_b, n=1)
    with pytest.raises(ValueError, match="finite"):
        frontier_gap(kl_a, [0.0, float("nan"), 1.0], kl_b, gold_b)

