"""The gold-reward vs KL frontier (the shape of Rafailov et al. 2023, Figure 2): every trained
policy, whatever trained it, is measured the same way, by fresh samples from fixed prompts.

Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rlnotes._validate import require_int
from rlnotes.lm.generation import completion_logprobs, generate
from rlnotes.lm.sft import single_thread

__all__ = ["gold_and_kl", "upper_frontier", "best_gold_within", "frontier_gap", "RecordSummary"]


@torch.no_grad()
def gold_and_kl(policy, ref, task, *, n_prompts=1000, seed=10):
    r"""Mean gold reward and KL(pi || pi_ref) of ``policy``, from one completion for each of
    ``n_prompts`` fresh prompts (the same prompts and random numbers for every policy):

    .. math::  \widehat{\mathrm{KL}} = \frac{1}{n} \sum_{i=1}^n \sum_t
               \left(\log \pi(y_{i,t} \mid s_{i,t}) - \log \pi_{ref}(y_{i,t} \mid s_{i,t})\right),
               \quad y_i \sim \pi(\cdot \mid x_i)

    (the k1 estimator summed over tokens: unbiased for the KL of whole completions).

    ==========  =============================================================
    policy      TinyGPT to measure
    ref         the reference TinyGPT (the SFT model)
    task        the task: prompts, EOS, ``max_new_tokens`` and the gold ``reward``
    n_prompts   completions sampled (one per prompt)
    seed        prompts and sampling
    returns     dict: gold, gold_se, kl, kl_se (standard errors), length
    ==========  =============================================================

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """
    n_prompts = require_int(n_prompts, "n_prompts", minimum=2)
    seed = require_int(seed, "seed", minimum=0)
    device = next(policy.parameters()).device
    with single_thread(device):
        g = torch.Generator().manual_seed(seed)
        x = task.sample_prompts(n_prompts, g)
        y, logp, m = generate(policy, x, task.max_new_tokens, eos_id=task.tokenizer.eos_id, generator=g)
        ref_logp = completion_logprobs(ref, x, y.to(next(ref.parameters()).device), m)
        kl = ((logp.double() - ref_logp.double().to(logp.device)) * m).sum(1).cpu()
        gold = task.reward(x, y.cpu(), m.cpu()).double()
    sq = math.sqrt(n_prompts)
    return dict(gold=float(gold.mean()), gold_se=float(gold.std()) / sq, kl=float(kl.mean()),
                kl_se=float(kl.std()) / sq, length=float(m.sum(1).float().mean()))


def _check_betas(betas, allow_zero=False):
    try:
        betas = [float(b) for b in betas]
    except TypeError:
        raise ValueError(f"betas must be a list of numbers, got {type(betas).__name__}") from None
    if not betas:
        raise ValueError("betas must hold at least one beta")
    if any(not math.isfinite(b) or b < 0 or (b == 0 and not allow_zero) for b in betas):
        raise ValueError(f"betas must be {'non-negative' if allow_zero else 'positive'} finite numbers, got {betas}")
    return betas


def _kl_gold(kl, gold):
    kl = np.asarray(kl, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if kl.ndim != 1 or kl.shape != gold.shape:
        raise ValueError(f"gold must have kl's shape (n,), got {kl.shape} and {gold.shape}")
    if kl.size == 0:
        raise ValueError("kl must hold at least one point")
    if not (np.isfinite(kl).all() and np.isfinite(gold).all()):
        raise ValueError("kl and gold must be finite")
    return kl, gold


def upper_frontier(kl, gold):
    """Indices of the points on the upper frontier, in increasing KL: those that no other point
    beats with both less (or equal) KL and more gold reward.

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """
    kl, gold = _kl_gold(kl, gold)
    keep, best = [], -np.inf
    for i in np.lexsort((-gold, kl)):
        if gold[i] > best:
            keep.append(int(i))
            best = gold[i]
    return keep


def best_gold_within(kl, gold, kl_max):
    """The highest gold reward among points with KL at most ``kl_max`` (``-inf`` when none).

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """
    kl, gold = _kl_gold(kl, gold)
    kl_max = float(kl_max)
    if not math.isfinite(kl_max):
        raise ValueError(f"kl_max must be a finite number, got {kl_max}")
    inside = kl <= kl_max
    return float(gold[inside].max()) if inside.any() else -math.inf


def frontier_gap(kl_a, gold_a, kl_b, gold_b, n=50):
    """The largest ``|gold_a - gold_b|`` between two upper frontiers (each linear between its
    points), over the KLs both frontiers cover; ``n`` grid points. Raises ValueError when the two
    frontiers cover no common KL.

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """
    kl_a, gold_a = _kl_gold(kl_a, gold_a)
    kl_b, gold_b = _kl_gold(kl_b, gold_b)
    n = require_int(n, "n", minimum=2)
    fa, fb = upper_frontier(kl_a, gold_a), upper_frontier(kl_b, gold_b)
    ka, ga, kb, gb = kl_a[fa], gold_a[fa], kl_b[fb], gold_b[fb]  # in increasing KL
    lo, hi = max(ka.min(), kb.min()), min(ka.max(), kb.max())
    if lo > hi:
        raise ValueError(f"the frontiers must share a range of KL, got [{ka.min()}, {ka.max()}] "
                         f"and [{kb.min()}, {kb.max()}]")
    grid = np.linspace(lo, hi, n)
    return float(np.abs(np.interp(grid, ka, ga) - np.interp(grid, kb, gb)).max())


class RecordSummary:
    """The recorded sweep's rows (``benchmarks/results/dpo_frontier.json``), grouped by
    ``(method, beta)``, with the means over seeds that the chapter plots and compares.

    ==================  ======================================================================
    ``groups``          ``{(method, beta): [row, ...]}``, one row per seed
    ``table``           ``{(method, beta): (mean KL, mean gold)}``
    ``at(m, b, key)``   the per-seed values of ``key`` ("kl", "gold", "length") at (m, b)
    ``means(m, betas)`` the mean KLs and mean golds of method m (of the ``betas`` only, if given)
    ``best(m)``         (mean KL, mean gold) of m's setting with the highest mean gold
    ``lead_within``     PPO's best mean gold within ``kl_max`` nats minus DPO's (DPO's betas: all,
                        or ``betas``)
    ``widest_hole``     the two consecutive mean KLs of DPO's ``betas`` that lie furthest apart
    ==================  ======================================================================

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """

    def __init__(self, rows):
        rows = list(rows)
        if not rows:
            raise ValueError("rows must hold at least one row")
        for row in rows:
            if not isinstance(row, dict) or not {"method", "beta", "kl", "gold"} <= set(row):
                raise ValueError(f"each row must be a dict with method, beta, kl and gold, got {row!r}")
        self.groups = {}
        for row in rows:
            self.groups.setdefault((row["method"], row["beta"]), []).append(row)
        self.table = {k: (float(np.mean([r["kl"] for r in rs])), float(np.mean([r["gold"] for r in rs])))
                      for k, rs in self.groups.items()}

    def _method(self, method):
        if not any(k[0] == method for k in self.table):
            raise ValueError(f"method must be one of {sorted({k[0] for k in self.table})}, got {method!r}")
        return method

    def at(self, method, beta, key):
        if (method, beta) not in self.groups:
            raise ValueError(f"(method, beta) must be a recorded setting, got {(method, beta)!r}")
        return [r[key] for r in self.groups[(method, beta)]]

    def means(self, method, betas=None):
        method = self._method(method)
        keys = sorted(k for k in self.table if k[0] == method and (betas is None or k[1] in betas))
        return [self.table[k][0] for k in keys], [self.table[k][1] for k in keys]

    def best(self, method):
        method = self._method(method)
        return max((v for k, v in self.table.items() if k[0] == method), key=lambda v: v[1])

    def lead_within(self, kl_max, betas=None):
        return (best_gold_within(*self.means("PPO"), kl_max)
                - best_gold_within(*self.means("DPO", betas), kl_max))

    def widest_hole(self, betas):
        kl = np.sort(self.means("DPO", betas)[0])
        if len(kl) < 2:
            raise ValueError(f"betas must select at least two of DPO's settings, got {betas!r}")
        i = int(np.argmax(np.diff(kl)))
        return float(kl[i]), float(kl[i + 1])
