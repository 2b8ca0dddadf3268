"""The learning claims of the chapters "GRPO" and "Dr. GRPO, DAPO and process supervision" (the same runs the chapter makes;
about a minute of CPU time with a warm SFT cache)."""

import numpy as np
import torch

import rlnotes.grpo as grpo
import rlnotes.lm as lm
from rlnotes.lm.grpo_tasks import StallingAdditionTask, finetune


def test_grpo_raises_held_out_pass_at_1_on_three_seeds():
    torch.set_num_threads(1)
    task = lm.AdditionTask()
    sft, _ = lm.sft_model(task, seed=0, steps=450)
    for seed in (0, 1, 2):
        _, h = grpo.train_grpo(sft, task, 150, n_prompts=16, group_size=8, lr=2e-4, warmup=10,
                               beta=0.04, eval_every=50, seed=seed)
        assert h["pass1"][-1] - h["pass1"][0] >= 0.10
        assert h["kl"][0] < 1e-5 < h["kl"][-1]


def test_stalling_model_gains_20_points_and_the_gap_does_not_grow():
    torch.set_num_threads(1)
    task = lm.AdditionTask()
    sft, _ = lm.sft_model(task, seed=0, steps=450)
    stall_task = StallingAdditionTask(p_stall=0.3, max_stall=6)
    staller = finetune(sft, stall_task, 100, lr=1e-3)
    for kw in (dict(loss_type="grpo", scale="group"), dict(loss_type="dr_grpo", scale="none")):
        _, h = grpo.train_grpo(staller, stall_task, 100, n_prompts=16, group_size=8, lr=2e-4,
                               warmup=10, beta=0.0, eval_every=100, seed=0, **kw)
        assert h["pass1"][-1] - h["pass1"][0] >= 0.20
        g = np.asarray(h["len_wrong"]) - np.asarray(h["len_correct"])
        windows = np.nanmean(g.reshape(-1, 20), axis=1)
        assert windows[-1] - windows[0] < 0.1
