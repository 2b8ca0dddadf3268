"""pass@k: the chance that at least one of k sampled completions of a prompt is right, estimated
without bias from n >= k samples (Chen et al. 2021), and the pass@k curve of a policy on a
verifiable task. It sits beside :mod:`rlnotes.lm.evaluation` (pass@1) in a module of its own, so
that the cache keys of the models placed by pass@1 stay as they are.

Defined in: GRPO, section What sharpening is.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_in_range, require_int
from rlnotes.lm.generation import decode

__all__ = ["pass_at_k", "correct_counts", "pass_at_k_curve"]


def pass_at_k(n, m, k):
    r"""The unbiased estimator of pass@k of Chen et al. (2021), averaged over prompts:
    :math:`\mathrm{pass@}k = \mathbb{E}_x\left[1 - \binom{n - m_x}{k} \big/ \binom{n}{k}\right]`,
    where ``n`` completions of each prompt were sampled and ``m`` (an int or an array, one entry a
    prompt) of them were right. It is the probability that a set of k completions drawn without
    replacement from the n holds a right one; its expectation is the pass@k of the policy.
    Computed as a product, :math:`1 - \prod_{j=n-m+1}^{n} (1 - k/j)`, which never forms a large
    binomial coefficient. Returns a float.

    Defined in: GRPO, section What sharpening is.
    """
    n = require_int(n, "n", minimum=1)
    k = require_int(k, "k", minimum=1)
    if k > n:
        raise ValueError(f"k must be at most n = {n} (the samples drawn per prompt), got {k}")
    m = np.asarray(m)
    if m.size == 0 or not np.issubdtype(m.dtype, np.integer) or m.ndim > 1:
        raise ValueError(f"m must be an int or a 1-D array of ints (right samples per prompt), got {m!r}")
    m = m.reshape(-1).astype(np.int64)
    if (m < 0).any() or (m > n).any():
        raise ValueError(f"m must lie in 0..n = {n}, got values from {m.min()} to {m.max()}")
    out = np.ones(len(m))
    for i, m_x in enumerate(m.tolist()):
        if n - m_x >= k:  # else every k-subset holds a right one
            out[i] = 1.0 - float(np.prod(1.0 - k / np.arange(n - m_x + 1, n + 1)))
    return float(out.mean())


@torch.no_grad()
def correct_counts(model, task, n, *, split="test", temperature=1.0, generator=None, n_prompts=None,
                   batch_size=4000):
    """How many of ``n`` completions sampled at ``temperature`` are right, for every prompt of
    ``split`` of a verifiable task (``task.pairs``, ``task.prompts_of``, ``task.reward``), or for
    its first ``n_prompts``: an int array, one entry a prompt, for :func:`pass_at_k`.

    Defined in: GRPO, section What sharpening is.
    """
    n = require_int(n, "n", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    temperature = require_in_range(temperature, "temperature", 0.0, float("inf"), low_open=True)
    pairs = task.pairs(split)
    if n_prompts is not None:
        pairs = pairs[:require_int(n_prompts, "n_prompts", minimum=1)]
    if len(pairs) == 0:
        raise ValueError(f"split must hold prompts, {split!r} is an empty prompt set")
    per = max(1, batch_size // n)  # prompts per generation call
    counts = []
    for i in range(0, len(pairs), per):
        prompts = [p for p in task.prompts_of(pairs[i:i + per]) for _ in range(n)]
        comp, _, mask = decode(model, prompts, task.max_new_tokens, temperature=temperature,
                               eos_id=task.tokenizer.eos_id, generator=generator)
        right = task.reward(prompts, comp.cpu(), mask.cpu()).view(-1, n)
        counts.append(right.sum(1).round().long().numpy())
    return np.concatenate(counts)


def pass_at_k_curve(counts, n, ks):
    """pass@k for every k of ``ks`` from the right-sample ``counts`` (:func:`correct_counts`) of
    ``n`` samples a prompt: a float array, one entry per k.

    Defined in: GRPO, section What sharpening is.
    """
    ks = list(ks) if hasattr(ks, "__iter__") and not isinstance(ks, (str, bytes)) else None
    if not ks:
        raise ValueError("ks must be a non-empty sequence of ints in 1..n")
    return np.array([pass_at_k(n, counts, k) for k in ks])
