"""Reward over-optimisation against the reward model's data: Gao et al.'s best-of-n form
R_BoN(D) = D (q1 - q2 D), fitted for reward models trained on more or fewer preference pairs.

Best-of-n is estimated without resampling from one pool of ``m`` reference samples per prompt:
sorted by the proxy's score, the i-th of m (1-based, ascending) is the best of n samples drawn
without replacement from the pool with probability C(i-1, n-1) / C(m, n), which gives an
unbiased estimate of E[reward of best-of-n] for every n <= m, the average over every subset of n
samples of the pool. One pool serves every reward model, so their curves differ only by the reward model.

Defined in: Reinforcement learning from human feedback, section Over-optimisation and the
reward model's data.
"""

from __future__ import annotations

import math

import torch

from rlnotes._validate import require_int
from rlnotes.lm.bon import bon_kl
from rlnotes.lm.generation import generate
from rlnotes.lm.overopt import fit_bon_form

__all__ = ["bon_pool_weights", "best_of_n_from_pool", "sample_pool", "rm_data_sweep"]


def bon_pool_weights(m, n) -> torch.Tensor:
    """(m,) float64 weights: the probability that the i-th smallest of m scores (i = 1..m) is the
    largest of n of them drawn without replacement, C(i-1, n-1) / C(m, n). They sum to 1.

    Defined in: Reinforcement learning from human feedback, section Over-optimisation and the
    reward model's data.
    """
    m = require_int(m, "m", minimum=1)
    n = require_int(n, "n", minimum=1)
    if n > m:
        raise ValueError(f"n must be <= m = {m} (a pool of m samples), got {n}")
    i = torch.arange(1, m + 1, dtype=torch.float64)
    log_w = torch.full((m,), -math.inf, dtype=torch.float64)
    ok = i >= n
    log_comb_mn = math.lgamma(m + 1) - math.lgamma(n + 1) - math.lgamma(m - n + 1)
    # log C(i-1, n-1) - log C(m, n), in float64
    log_w[ok] = (torch.lgamma(i[ok]) - math.lgamma(n) - torch.lgamma(i[ok] - n + 1)) - log_comb_mn
    return log_w.exp()


def best_of_n_from_pool(scores, gold, ns) -> dict:
    """Best-of-n, for each n in ``ns``, from a pool: ``scores`` and ``gold`` are (P, m) tensors, the
    proxy's scores and the gold rewards of m reference samples for each of P prompts.

    Returns a dict of lists: ``n``, ``kl`` (``bon_kl(n)``, the continuous formula), ``d``
    (its square root), ``proxy`` and ``gold`` (unbiased estimates of the mean over prompts of
    the best-of-n sample's score and gold reward; see the module doc).

    Defined in: Reinforcement learning from human feedback, section Over-optimisation and the
    reward model's data.
    """
    scores = torch.as_tensor(scores, dtype=torch.float64)
    gold = torch.as_tensor(gold, dtype=torch.float64)
    if scores.ndim != 2 or scores.shape != gold.shape or scores.shape[1] < 1:
        raise ValueError(f"scores and gold must be (P, m) tensors of one shape, got "
                         f"{tuple(scores.shape)} and {tuple(gold.shape)}")
    if not (torch.isfinite(scores).all() and torch.isfinite(gold).all()):
        raise ValueError("scores and gold must be finite")
    ns = [require_int(n, "ns", minimum=1) for n in ns]
    if not ns:
        raise ValueError("ns must hold at least one n")
    m = scores.shape[1]
    order = scores.argsort(dim=1, stable=True)
    s_sorted, g_sorted = scores.gather(1, order), gold.gather(1, order)
    out = {"n": [], "kl": [], "d": [], "proxy": [], "gold": []}
    for n in ns:
        w = bon_pool_weights(m, n)  # raises if n > m
        out["n"].append(n)
        out["kl"].append(bon_kl(n))
        out["d"].append(math.sqrt(bon_kl(n)))
        out["proxy"].append(float((s_sorted @ w).mean()))
        out["gold"].append(float((g_sorted @ w).mean()))
    return out


@torch.no_grad()
def sample_pool(policy, task, n_prompts, m, generator) -> dict:
    """A pool of ``m`` samples of ``policy`` for each of ``n_prompts`` prompts (one ``generate``
    call): ``prompts`` (P m lists, the m samples of a prompt contiguous), ``completions``,
    ``mask`` and ``gold`` ((P, m), the task's gold reward).

    Defined in: Reinforcement learning from human feedback, section Over-optimisation and the
    reward model's data.
    """
    n_prompts = require_int(n_prompts, "n_prompts", minimum=1)
    m = require_int(m, "m", minimum=1)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    prompts = task.sample_prompts(n_prompts, generator)
    rep = [p for p in prompts for _ in range(m)]
    comp, _, mask = generate(policy, rep, task.max_new_tokens, eos_id=task.tokenizer.eos_id,
                             generator=generator)
    comp, mask = comp.cpu(), mask.cpu()
    gold = torch.as_tensor(task.reward(rep, comp, mask)).double().view(n_prompts, m)
    return {"prompts": rep, "completions": comp, "mask": mask, "gold": gold}


@torch.no_grad()
def _score(rm, pool, batch_size=4096):
    out = [rm(pool["prompts"][i:i + batch_size], pool["completions"][i:i + batch_size],
              pool["mask"][i:i + batch_size]).double().cpu()
           for i in range(0, len(pool["prompts"]), batch_size)]
    return torch.cat(out).view(pool["gold"].shape)


def rm_data_sweep(backbone, pairs, sizes, pool, ns, *, seed=0, epochs=4, lr=3e-3, device=None,
                  valid=None, trained=None) -> list:
    """For each size in ``sizes``: a reward model trained on the first ``size`` of ``pairs``
    (``train_reward_model(backbone, ..., epochs, lr, seed)``, the chapter's recipe), best-of-n
    from ``pool`` selected by it (:func:`best_of_n_from_pool`, n in ``ns``), and the fit of
    Gao et al.'s form ``gain = D (q1 - q2 D)`` to its gold-reward gain over n = 1.
    ``trained`` may map a size to a reward model already trained that way (it is not retrained).

    Returns one dict per size: ``pairs``, ``q1``, ``q2``, ``r2``, ``d``, ``gold`` (best-of-n's
    gold reward per n), ``proxy`` and, with ``valid`` pairs, the held-out accuracy ``acc``.

    Defined in: Reinforcement learning from human feedback, section Over-optimisation and the
    reward model's data.
    """
    from rlnotes.lm.reward import PreferencePairs, preference_accuracy, train_reward_model

    if not isinstance(pairs, PreferencePairs):
        raise ValueError(f"pairs must be PreferencePairs, got {type(pairs).__name__}")
    sizes = [require_int(s, "sizes", minimum=2) for s in sizes]
    if not sizes or max(sizes) > len(pairs):
        raise ValueError(f"sizes must be non-empty, each <= len(pairs) = {len(pairs)}, got {sizes}")
    if not isinstance(pool, dict) or not {"prompts", "completions", "mask", "gold"} <= set(pool):
        raise ValueError("pool must be a dict from sample_pool")
    ns = [require_int(n, "ns", minimum=1) for n in ns]
    if len(ns) < 2 or 1 not in ns:
        raise ValueError(f"ns must hold 1 (the reference) and at least one more n, got {ns}")
    trained = {} if trained is None else dict(trained)
    rows = []
    for size in sizes:
        rm = trained.get(size)
        if rm is None:
            rm, _ = train_reward_model(backbone, pairs.subset(slice(0, size)), epochs=epochs, lr=lr,
                                       seed=seed, device=device)
        curve = best_of_n_from_pool(_score(rm, pool), pool["gold"], ns)
        base = curve["gold"][curve["n"].index(1)]
        fit = fit_bon_form(curve["d"], [g - base for g in curve["gold"]])
        row = dict(pairs=size, q1=fit["alpha"], q2=fit["beta"], r2=fit["r2"], d=curve["d"],
                   gold=curve["gold"], proxy=curve["proxy"])
        if valid is not None:
            row["acc"] = preference_accuracy(rm, valid)
        rows.append(row)
    return rows
