"""Best-of-n sampling: draw n completions, keep the one a reward model scores highest.

Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
"""

from __future__ import annotations

import math

import torch

from rlnotes._validate import require_int
from rlnotes.lm.generation import generate

__all__ = ["bon_kl", "bon_kl_exact", "best_of_n_curve"]


def bon_kl(n) -> float:
    r"""KL(pi_BoN || pi) of best-of-n, for a continuous reward (no ties):

    .. math::  \mathrm{KL} = \log n - \frac{n - 1}{n}

    (Stiennon et al. 2020, appendix; for ties it is an upper bound, Beirami et al. 2024.)

    Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
    """
    n = require_int(n, "n", minimum=1)
    return math.log(n) - (n - 1) / n


def bon_kl_exact(probs, n) -> float:
    r"""Exact KL(pi_BoN || pi) for a discrete distribution ``probs`` over outcomes listed in
    increasing order of reward, all rewards distinct. With Phi_i the CDF,

    .. math::  \pi_{BoN}(y_i) = \Phi_i^n - \Phi_{i-1}^n .

    Each outcome is an atom (it covers an interval of u = Phi of its probability's length), so
    the result is below ``bon_kl(n)`` unless every outcome is improbable.

    Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
    """
    n = require_int(n, "n", minimum=1)
    p = torch.as_tensor(probs, dtype=torch.float64)
    if p.ndim != 1 or len(p) == 0 or bool((p < 0).any()) or abs(float(p.sum()) - 1) > 1e-9:
        raise ValueError("probs must be a 1-d probability vector summing to 1")
    F = torch.cumsum(p, 0).clamp(max=1.0)
    F_prev = torch.cat([torch.zeros(1, dtype=p.dtype), F[:-1]])
    q = F ** n - F_prev ** n
    keep = q > 0
    return float((q[keep] * (q[keep].log() - p[keep].log())).sum())


@torch.no_grad()
def best_of_n_curve(policy, task, proxy_fn, ns, n_prompts, generator, *, gold_fn=None):
    """Proxy and gold reward of best-of-n (selected by ``proxy_fn``) for each n in ``ns``.

    Samples max(ns) completions for each of ``n_prompts`` prompts (one ``generate`` call); for
    each n, splits them into max(ns) / n disjoint groups of n and keeps each group's best by
    proxy score: an unbiased estimate of E[reward of best-of-n]. Every n must divide max(ns).

    Returns a dict of lists: ``n``, ``kl`` (bon_kl), ``proxy``, ``gold`` (when gold_fn).

    Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
    """
    ns = [require_int(n, "ns", minimum=1) for n in ns]
    if not ns:
        raise ValueError("ns must hold at least one n")
    N = max(ns)
    if any(N % n for n in ns):
        raise ValueError(f"ns: every n must divide max(ns) = {N}, got {ns}")
    n_prompts = require_int(n_prompts, "n_prompts", minimum=1)
    prompts = task.sample_prompts(n_prompts, generator)
    rep = [p for p in prompts for _ in range(N)]  # the N samples of a prompt are contiguous
    comp, _, mask = generate(policy, rep, task.max_new_tokens, eos_id=task.tokenizer.eos_id,
                             generator=generator)
    proxy = torch.as_tensor(proxy_fn(rep, comp, mask)).float().cpu().view(n_prompts, N)
    gold = None if gold_fn is None else torch.as_tensor(gold_fn(rep, comp.cpu(), mask.cpu())).float().view(n_prompts, N)
    out = {"n": [], "kl": [], "proxy": [], "gold": []}
    for n in ns:
        groups = proxy.view(n_prompts, N // n, n)
        best = groups.argmax(-1, keepdim=True)
        out["n"].append(n)
        out["kl"].append(bon_kl(n))
        out["proxy"].append(float(groups.gather(-1, best).mean()))
        if gold is not None:
            out["gold"].append(float(gold.view(n_prompts, N // n, n).gather(-1, best).mean()))
    return out
