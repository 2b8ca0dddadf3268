"""The learning claims of the chapters "GRPO" and "Dr. GRPO, DAPO and process supervision" (the
same runs the chapters make; a few minutes of CPU time with a warm SFT cache)."""

import numpy as np
import torch

import rlnotes.grpo as grpo
import rlnotes.lm as lm
from rlnotes.lm.grpo_tasks import StallingAdditionTask, chain_model, finetune

BASE = dict(n_prompts=16, group_size=8, lr=2e-4, warmup=10)


def test_grpo_raises_held_out_pass_at_1_by_20_points_on_three_seeds():
    torch.set_num_threads(1)
    task = lm.AdditionTask()
    sft, _ = lm.sft_model(task, seed=0, steps=450)
    for seed in (0, 1, 2):
        _, h = grpo.train_grpo(sft, task, 375, beta=0.04, cosine=True, eval_every=125, eval_samples=4,
                               eval_curve_samples=1,
                               seed=seed, **BASE)
        assert h["pass1"][-1] - h["pass1"][0] >= 0.20
        assert h["greedy"][-1] > h["greedy"][0]
        assert h["kl"][0] < 1e-5 < h["kl"][-1]


def test_stalling_model_gains_20_points_and_the_gap_falls_under_both_losses():
    torch.set_num_threads(1)
    task = lm.AdditionTask()
    sft, _ = lm.sft_model(task, seed=0, steps=450)
    stall_task = StallingAdditionTask(p_stall=0.3, max_stall=6)
    staller = finetune(sft, stall_task, 100, lr=1e-3)
    for kw in (dict(loss_type="grpo", scale="group"), dict(loss_type="dr_grpo", scale="none")):
        for seed in (0, 1):
            _, h = grpo.train_grpo(staller, stall_task, 100, beta=0.0, eval_every=100, seed=seed, **BASE, **kw)
            assert h["pass1"][-1] - h["pass1"][0] >= 0.20
            g = np.asarray(h["len_wrong"]) - np.asarray(h["len_correct"])
            windows = np.nanmean(g.reshape(-1, 20), axis=1)
            assert windows[-1] - windows[0] < 0


def test_process_supervision_reaches_the_threshold_with_fewer_samples_than_outcome():
    torch.set_num_threads(1)
    chain, task = chain_model(400)
    runs = {sup: [grpo.train_grpo(chain, task, 150, beta=0.0, eval_every=50, supervision=sup,
                                  eval_samples=2, eval_greedy=False, seed=seed, **BASE)[1]
                  for seed in (0, 1)]
            for sup in ("outcome", "process")}
    samples = np.asarray(runs["outcome"][0]["eval_step"]) * 16 * 8
    start = float(np.mean([h["pass1"][0] for hs in runs.values() for h in hs]))
    assert 0.15 < start < 0.35
    threshold = round(start + 0.05, 2)

    def samples_to(h):
        hit = np.nonzero(np.asarray(h["pass1"]) >= threshold)[0]
        return samples[hit[0]] if len(hit) else np.inf

    need = {sup: [samples_to(h) for h in hs] for sup, hs in runs.items()}
    assert all(np.isfinite(n) for n in need["process"])
    assert all(p < o for p, o in zip(need["process"], need["outcome"]))
    assert all(hp["pass1"][-1] > ho["pass1"][-1] for hp, ho in zip(runs["process"], runs["outcome"]))
