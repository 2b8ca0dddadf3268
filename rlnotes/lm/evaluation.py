"""Held-out evaluation of a sampling policy on a verifiable task: pass@1. It lives in the lab,
below the GRPO chapter's trainer (:func:`rlnotes.grpo.train_grpo`, which reports it) and the
lab's own experiments (:func:`rlnotes.lm.grpo_tasks.chain_start`, which places its starting
point by it); ``rlnotes.grpo.pass_at_1`` is the same function.

Defined in: GRPO, section Training that works.
"""

from __future__ import annotations

import torch

from rlnotes._validate import require_int
from rlnotes.lm.generation import decode

__all__ = ["pass_at_1"]


@torch.no_grad()
def pass_at_1(model, task, split="test", *, temperature=1.0, generator=None, batch_size=1000,
              samples=1):
    r"""pass@1 on every prompt of ``split``: the fraction of sampled completions (at
    ``temperature``, ``samples`` of them per prompt) that earn reward 1, an unbiased estimate of
    the expected accuracy of one sample,
    :math:`\mathbb{E}_{x}\, \mathbb{E}_{y \sim \pi_\theta(\cdot \mid x)} [R(x, y)]`; more samples
    per prompt only lower its variance. This is what GRPO maximises; greedy decoding
    (``rlnotes.lm.sft.accuracy``) reports the mode.

    Defined in: GRPO, section Training that works.
    """
    samples = require_int(samples, "samples", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    pairs = task.pairs(split)
    if len(pairs) == 0:
        raise ValueError(f"split must hold prompts, {split!r} is an empty prompt set")
    hits = 0.0
    for i in range(0, len(pairs), batch_size):
        prompts = [p for p in task.prompts_of(pairs[i:i + batch_size]) for _ in range(samples)]
        comp, _, mask = decode(model, prompts, task.max_new_tokens, temperature=temperature,
                               eos_id=task.tokenizer.eos_id, generator=generator)
        hits += float(task.reward(prompts, comp.cpu(), mask.cpu()).sum())
    return hits / (len(pairs) * samples)
