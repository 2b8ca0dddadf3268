"""Learning curves of a trainer under the evaluation protocol, over several seeds.

Defined in: Policy gradients, section REINFORCE on CartPole.
"""

from __future__ import annotations

import numpy as np

from rlnotes._validate import require_int
from rlnotes.deeprl.evaluation import Evaluator

__all__ = ["learning_curves"]


def learning_curves(train, env_id: str, total_steps: int, seeds, *, eval_every: int = 2048,
                    **hyperparameters):
    """Train once per seed with ``train(env_id, total_steps, seed=seed, callback=...,
    **hyperparameters)`` (any trainer of the book's contract) and evaluate the policy every
    ``eval_every`` environment steps (10 greedy episodes, :class:`Evaluator`, seeded
    seed + 10000). Returns ``(steps, scores)``: ``steps`` (K,) the checkpoints
    eval_every, 2 eval_every, ..., and ``scores`` (len(seeds), K) the mean evaluation return
    at the first callback at or after each checkpoint.

    Defined in: Policy gradients, section REINFORCE on CartPole.
    """
    if not callable(train):
        raise ValueError(f"train must be a trainer function, got {train!r}")
    total_steps = require_int(total_steps, "total_steps", minimum=1)
    eval_every = require_int(eval_every, "eval_every", minimum=1)
    seeds = [require_int(s, "seeds", minimum=0) for s in seeds]
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    K = total_steps // eval_every
    if K < 1:
        raise ValueError(f"total_steps must be >= eval_every={eval_every}, got {total_steps}")
    scores = np.full((len(seeds), K), np.nan)
    for i, seed in enumerate(seeds):
        evaluator = Evaluator(env_id, seed)
        k = [0]

        def callback(steps, policy, row=scores[i], k=k, evaluator=evaluator):
            if k[0] < K and steps >= (k[0] + 1) * eval_every:
                score = float(evaluator(policy).mean())
                while k[0] < K and steps >= (k[0] + 1) * eval_every:
                    row[k[0]] = score
                    k[0] += 1
            return k[0] >= K

        try:
            train(env_id, total_steps, seed=seed, callback=callback, **hyperparameters)
        finally:
            evaluator.close()
    return eval_every * np.arange(1, K + 1), scores
