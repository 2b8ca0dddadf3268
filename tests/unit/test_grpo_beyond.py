"""pass@k (Chen et al. 2021), the clip fraction and the weak teacher of the GRPO chapter's
sections Beyond imitation, What sharpening is and When the clip acts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import rlnotes.grpo as grpo
from rlnotes.lm.passk import correct_counts, pass_at_k, pass_at_k_curve
from rlnotes.lm.weak_teacher import CarryDroppingAdditionTask, carry_split_tasks


def test_pass_at_k_matches_binomial_formula_and_subset_enumeration():
    n, counts = 6, [0, 1, 3, 6]
    for k in range(1, n + 1):
        want = np.mean([1 - math.comb(n - c, k) / math.comb(n, k) for c in counts])
        assert pass_at_k(n, counts, k) == pytest.approx(want, abs=1e-12)
    # the probability that a k-subset of the n samples holds a right one, by enumeration
    right = [1, 0, 0, 1, 0, 0]
    subsets = list(itertools.combinations(range(6), 3))
    assert pass_at_k(6, 2, 3) == pytest.approx(np.mean([any(right[i] for i in s) for s in subsets]))


def test_pass_at_k_edges_and_monotone():
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 8) == 1.0  # every 8-subset of 10 holds one of the 3 right ones
    curve = pass_at_k_curve(np.array([0, 1, 2, 5]), 16, range(1, 17))
    assert np.all(np.diff(curve) >= 0) and curve[0] == pytest.approx(8 / 64)


@pytest.mark.parametrize("args", [(0, 1, 1), (4, 1, 5), (4, 5, 1), (4, -1, 1), (4, 1, 0),
                                  (4, 1.5, 1), (4, [], 1), (4, True, 1), (4, [[1, 2]], 1)])
def test_pass_at_k_bad_input(args):
    with pytest.raises(ValueError):
        pass_at_k(*args)


def test_pass_at_k_curve_bad_input():
    for ks in ([], "12", None):
        with pytest.raises(ValueError):
            pass_at_k_curve(np.array([1, 2]), 4, ks)
    with pytest.raises(ValueError):
        pass_at_k_curve(np.array([1, 2]), 4, [1, 5])


def test_correct_counts_bad_input():
    task = CarryDroppingAdditionTask()
    with pytest.raises(ValueError):
        correct_counts(None, task, 0)
    with pytest.raises(ValueError):
        correct_counts(None, task, 4, temperature=0.0)
    with pytest.raises(ValueError):
        correct_counts(None, task, 4, n_prompts=0)


def test_clip_fraction():
    logp = torch.log(torch.tensor([[0.5, 0.3], [0.2, 0.1]]))
    old = torch.log(torch.tensor([[0.4, 0.3], [0.3, 0.1]]))
    adv = torch.tensor([1.0, -1.0])
    mask = torch.ones(2, 2)
    # ratio 1.25 > 1.2 with A > 0, and 0.67 < 0.8 with A < 0: two of four tokens clipped
    assert grpo.clip_fraction(logp, old, adv, mask) == 0.5
    assert grpo.clip_fraction(logp, old, -adv, mask) == 0.0  # clip never acts against the push
    assert grpo.clip_fraction(logp, logp, adv, mask) == 0.0  # first step: ratio 1
    assert grpo.clip_fraction(logp, old, adv, mask, eps_low=0.4, eps_high=0.3) == 0.0
    assert grpo.clip_fraction(logp, old, adv, torch.tensor([[1, 0], [0, 0]])) == 1.0
    # where the clip is active, grpo_loss has no gradient
    lp = logp.clone().requires_grad_(True)
    grpo.grpo_loss(lp, old, None, adv, mask).backward()
    assert lp.grad[0, 0] == 0 and lp.grad[1, 0] == 0 and lp.grad[0, 1] != 0


def test_clip_fraction_bad_input():
    logp = torch.zeros(2, 3)
    good = dict(old_logp=torch.zeros(2, 3), advantages=torch.ones(2), mask=torch.ones(2, 3))
    bad = [dict(good, old_logp=torch.zeros(3, 2)), dict(good, advantages=torch.ones(3)),
           dict(good, mask=torch.zeros(2, 3)), dict(good, mask=torch.full((2, 3), 2.0)),
           dict(good, eps_low=1.5), dict(good, advantages=torch.ones(2, dtype=torch.long))]
    for kw in bad:
        with pytest.raises(ValueError):
            grpo.clip_fraction(logp, **kw)
    with pytest.raises(ValueError):
        grpo.clip_fraction(torch.zeros(3), torch.zeros(3), torch.ones(3), torch.ones(3))


def test_weak_teacher_drops_the_carry_at_its_rate():
    task = CarryDroppingAdditionTask(p_drop=0.8)
    prompts, comp, mask = task.sft_batch(4000, torch.Generator().manual_seed(0))
    right = task.reward(prompts, comp, mask).bool()
    carry = task.carries(prompts)
    assert bool(right[~carry].all())  # never wrong without a carry
    assert abs(float((~right[carry]).double().mean()) - 0.8) < 0.03
    texts = [task.tokenizer.decode([t for t, m in zip(c, mk) if m and t != task.tokenizer.eos_id])
             for c, mk in zip(comp.tolist(), mask.tolist())]
    wrong = [(p, t) for p, t, r in zip(prompts, texts, right.tolist()) if not r]
    assert all(int(t) == sum(task.operands(p)) - 10 for p, t in wrong)  # exactly the carry dropped
    assert 0.4 < float(carry.double().mean()) < 0.5  # 45% of the pairs carry


def test_carry_split_tasks_partition_the_held_out_prompts():
    task = CarryDroppingAdditionTask()
    carry, no_carry = carry_split_tasks(task)
    assert len(carry.pairs("test")) + len(no_carry.pairs("test")) == len(task.pairs("test"))
    assert CarryDroppingAdditionTask.carry_of(carry.pairs("test")).all()
    assert not CarryDroppingAdditionTask.carry_of(no_carry.pairs("test")).any()
    assert np.array_equal(carry.pairs("train"), task.pairs("train"))


def test_weak_teacher_bad_input():
    from rlnotes.lm.weak_teacher import weak_teacher_model

    for kw in (dict(p_drop=1.5), dict(p_drop=-0.1), dict(steps=0), dict(lr=0.0), dict(seed=-1)):
        with pytest.raises(ValueError):
            weak_teacher_model(**kw)
    with pytest.raises(ValueError):
        CarryDroppingAdditionTask.carry_of(np.zeros(3))
    with pytest.raises(ValueError):
        carry_split_tasks(grpo)


def test_recorded_beyond_imitation_holds_on_every_run():
    """The record the chapter renders (benchmarks/bench_grpo_beyond.py): on every build and seed,
    greedy accuracy on the held-out carry prompts rises by >= 30 points and overall accuracy rises;
    a lower temperature lowers the weak model's pass@16 on carries, GRPO raises pass@k at every k."""
    import json
    from pathlib import Path

    record = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results"
                         / "grpo_beyond.json").read_text())
    assert len(record["builds"]) >= 3
    for build, r in record["builds"].items():
        w = r["weak"]
        assert len(w["runs"]) >= 3, build
        assert w["start"]["greedy_carry"] < 0.25 and w["start"]["greedy_no_carry"] > 0.95, build
        for seed, run in w["runs"].items():
            assert run["greedy_carry"] - w["start"]["greedy_carry"] >= 0.30, (build, seed)
            assert run["greedy"][-1] > run["greedy"][0], (build, seed)
            assert run["passk_carry"][-1] > w["start"]["passk_carry"][-1], (build, seed)
            # pass@k grows at every k = 1..16, not only at 16 (the chapter's "at every k")
            assert all(a > s for a, s in zip(run["passk_carry"], w["start"]["passk_carry"])), (build, seed)
        assert w["start"]["passk_carry_t05"][-1] < w["start"]["passk_carry"][-1], build
