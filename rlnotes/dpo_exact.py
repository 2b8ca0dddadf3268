r"""DPO verified exactly: a completion space small enough to enumerate, where the optimum of the
KL-regularised objective is known in closed form,

.. math::  \pi^*(y \mid x) = \frac{1}{Z(x)}\, \pi_{ref}(y \mid x) \exp(r(x, y) / \beta),

and every KL is a finite sum. Completions are 0 to ``max_words`` words over a vocabulary of
``vocab_size`` words, then EOS; the policy is an autoregressive table of token logits, one row
per (prompt, prefix), which can represent every distribution over these completions. Pairs are
drawn from pi_ref and labelled by Bradley-Terry noise around r; since duplicates only add up,
a data set is a count tensor ``counts[x, w, l]`` (how often y_w was preferred to y_l after x),
and the expected counts give the infinite-data limit.

Defined in: Direct preference optimisation, section Verified exactly.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from rlnotes._validate import require_float_tensor, require_in_range, require_int, require_ndim

__all__ = ["CompletionSpace", "data_sweep", "kl_optimal_policy", "length_averaged_optimum", "sample_pair_counts",
           "expected_pair_counts", "fit_tabular", "kl_per_prompt", "implicit_reward_error"]


def _check_beta(beta) -> float:
    return require_in_range(beta, "beta", 0.0, float("inf"), low_open=True)


def _check_logp_table(x, name):
    require_float_tensor(x, name)
    require_ndim(x, name, 2)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (X, Y) table, got shape {tuple(x.shape)}")
    return x


class CompletionSpace:
    """Every completion of 0 to ``max_words`` words over ``vocab_size`` words, then EOS, and an
    autoregressive tabular policy over them.

    ==============  ================================================================
    attribute       meaning
    ==============  ================================================================
    completions     list of Y word tuples (the empty completion first)
    lengths         (Y,) float64: tokens of each completion, EOS included
    n_states        prefixes that choose a token (length 0 .. max_words - 1)
    ==============  ================================================================

    ``seq_logp(logits)`` turns token logits (X, n_states, vocab_size + 1) (the last column is
    EOS) into the (X, Y) table of log pi(y | x); after ``max_words`` words EOS is forced
    (probability 1) and still counts in the length.

    Defined in: Direct preference optimisation, section Verified exactly.
    """

    def __init__(self, vocab_size: int = 3, max_words: int = 2):
        self.vocab_size = require_int(vocab_size, "vocab_size", minimum=1)
        self.max_words = require_int(max_words, "max_words", minimum=1)
        if vocab_size ** max_words > 10_000:
            raise ValueError(f"max_words: vocab_size ** max_words must be at most 10,000 to "
                             f"enumerate, got {vocab_size} ** {max_words}")
        V, K = vocab_size, max_words
        prefixes = [p for k in range(K) for p in itertools.product(range(V), repeat=k)]
        state = {p: i for i, p in enumerate(prefixes)}
        self.n_states = len(prefixes)
        self.completions = [c for k in range(K + 1) for c in itertools.product(range(V), repeat=k)]
        Y = len(self.completions)
        self.state_idx = torch.zeros((Y, K + 1), dtype=torch.long)
        self.token_idx = torch.zeros((Y, K + 1), dtype=torch.long)
        self.step_mask = torch.zeros((Y, K + 1), dtype=torch.float64)
        for j, c in enumerate(self.completions):
            for t, w in enumerate(c):
                self.state_idx[j, t], self.token_idx[j, t], self.step_mask[j, t] = state[c[:t]], w, 1.0
            if len(c) < K:  # EOS chosen; after K words it is forced (log-prob 0)
                self.state_idx[j, len(c)], self.token_idx[j, len(c)] = state[c], V
                self.step_mask[j, len(c)] = 1.0
        self.lengths = torch.tensor([len(c) + 1 for c in self.completions], dtype=torch.float64)

    def __len__(self) -> int:
        return len(self.completions)

    def seq_logp(self, logits):
        """(X, Y) log pi(y | x) from (X, n_states, vocab_size + 1) token logits."""
        require_float_tensor(logits, "logits")
        if logits.ndim != 3 or logits.shape[1:] != (self.n_states, self.vocab_size + 1):
            raise ValueError(f"logits must have shape (X, {self.n_states}, {self.vocab_size + 1}), "
                             f"got {tuple(logits.shape)}")
        logp_tok = torch.log_softmax(logits, dim=-1)  # (X, S, V + 1)
        per_step = logp_tok[:, self.state_idx, self.token_idx]  # (X, Y, K + 1)
        return (per_step * self.step_mask.to(per_step.dtype)).sum(-1)

    def random_logits(self, n_prompts: int, generator, scale: float = 1.0):
        """Random token logits (float64), N(0, scale^2): a random reference policy."""
        n_prompts = require_int(n_prompts, "n_prompts", minimum=1)
        return scale * torch.randn((n_prompts, self.n_states, self.vocab_size + 1),
                                   generator=generator, dtype=torch.float64)


def kl_optimal_policy(ref_probs, r, beta):
    r"""The optimum of the KL-regularised objective, in closed form (for each prompt x):

    .. math::  \pi^*(y \mid x) = \frac{\pi_{ref}(y \mid x)\, e^{r(x, y) / \beta}}
               {\sum_{y'} \pi_{ref}(y' \mid x)\, e^{r(x, y') / \beta}}

    =========  ======  ===========================================================
    argument   shape   meaning
    =========  ======  ===========================================================
    ref_probs  (X, Y)  pi_ref(y | x); each row a probability vector
    r          (X, Y)  the reward r(x, y)
    beta       > 0     KL strength
    returns    (X, Y)  pi*(y | x), computed in log space (no overflow)
    =========  ======  ===========================================================

    Defined in: Direct preference optimisation, section The KL-regularised objective.
    """
    _check_logp_table(ref_probs, "ref_probs")
    require_float_tensor(r, "r")
    if r.shape != ref_probs.shape:
        raise ValueError(f"r must have ref_probs' shape {tuple(ref_probs.shape)} (one reward per "
                         f"prompt and completion), got {tuple(r.shape)}")
    if bool((ref_probs < 0).any()) or not torch.allclose(ref_probs.sum(-1), torch.ones_like(ref_probs[:, 0]), atol=1e-6):
        raise ValueError("ref_probs must hold probability rows: non-negative, each summing to 1")
    beta = _check_beta(beta)
    return torch.softmax(torch.log(ref_probs) + r.to(ref_probs.dtype) / beta, dim=-1)


def length_averaged_optimum(ref_logp, r, beta, lengths, *, iters=200):
    r"""Where DPO with length-averaged log-probs ends up with unlimited data, on a complete
    policy class: the implicit reward is (beta / |y|) log(pi / pi_ref), and it matches r up to a
    per-prompt constant Lambda(x) when

    .. math::  \pi(y \mid x) = \pi_{ref}(y \mid x) \exp\big(|y|\, (r(x, y) + \Lambda(x)) / \beta\big),

    with Lambda(x) the unique value that makes the row sum to 1 (found by bisection; the sum
    increases with Lambda). Differs from pi* unless every completion has the same length.

    =========  ======  ============================================
    ref_logp   (X, Y)  log pi_ref(y | x)
    r          (X, Y)  reward
    beta       > 0     KL strength
    lengths    (Y,)    tokens of each completion (>= 1)
    returns    (X, Y)  log-probabilities of the averaged optimum
    =========  ======  ============================================

    Defined in: Direct preference optimisation, section Summed or averaged log-probabilities.
    """
    _check_logp_table(ref_logp, "ref_logp")
    require_float_tensor(r, "r")
    if r.shape != ref_logp.shape:
        raise ValueError(f"r must have ref_logp's shape {tuple(ref_logp.shape)}, got {tuple(r.shape)}")
    beta = _check_beta(beta)
    require_float_tensor(lengths, "lengths")
    if lengths.shape != ref_logp.shape[1:] or bool((lengths < 1).any()):
        raise ValueError(f"lengths must be a ({ref_logp.shape[1]},) tensor of token counts >= 1")
    r, L = r.to(ref_logp.dtype), lengths.to(ref_logp.dtype)

    def log_total(lam):  # log sum_y pi_ref exp(|y| (r + Lambda) / beta), per prompt
        return torch.logsumexp(ref_logp + L * (r + lam[:, None]) / beta, dim=-1)

    lo = -r.max(-1).values - 50 * beta
    hi = -r.min(-1).values + 50 * beta
    for _ in range(iters):
        mid = (lo + hi) / 2
        above = log_total(mid) > 0
        hi, lo = torch.where(above, mid, hi), torch.where(above, lo, mid)
    lam = (lo + hi) / 2  # Lambda(x)
    out = ref_logp + L * (r + lam[:, None]) / beta
    return out - torch.logsumexp(out, dim=-1, keepdim=True)  # removes the bisection's last error


def _check_ref_and_r(ref_logp, r):
    _check_logp_table(ref_logp, "ref_logp")
    require_float_tensor(r, "r")
    if r.shape != ref_logp.shape:
        raise ValueError(f"r must have ref_logp's shape {tuple(ref_logp.shape)}, got {tuple(r.shape)}")


def sample_pair_counts(ref_logp, r, n_pairs, generator):
    r"""Draw ``n_pairs`` preference pairs: x uniform over the X prompts, y_1, y_2 independent from
    pi_ref(. | x), y_1 preferred with probability sigma(r(x, y_1) - r(x, y_2)) (Bradley-Terry).

    Returns ``counts`` (X, Y, Y) float64: ``counts[x, w, l]`` = how often y_w was preferred to
    y_l after x (pairs of a completion with itself included: they carry no gradient).

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    _check_ref_and_r(ref_logp, r)
    n_pairs = require_int(n_pairs, "n_pairs", minimum=1)
    X, Y = ref_logp.shape
    x = torch.randint(X, (n_pairs,), generator=generator)
    probs = ref_logp.exp().double()
    y1 = torch.multinomial(probs[x], 1, replacement=True, generator=generator)[:, 0]
    y2 = torch.multinomial(probs[x], 1, replacement=True, generator=generator)[:, 0]
    first = torch.rand(n_pairs, generator=generator, dtype=torch.float64) < torch.sigmoid(
        (r[x, y1] - r[x, y2]).double())
    w, l = torch.where(first, y1, y2), torch.where(first, y2, y1)
    counts = torch.zeros((X, Y, Y), dtype=torch.float64)
    counts.index_put_((x, w, l), torch.ones(n_pairs, dtype=torch.float64), accumulate=True)
    return counts


def expected_pair_counts(ref_logp, r, n_pairs=1.0):
    r"""The expected ``counts`` of :func:`sample_pair_counts` (the infinite-data limit, scaled to
    ``n_pairs``): 2 (n / X) pi_ref(w|x) pi_ref(l|x) sigma(r(x, w) - r(x, l)) for w != l (either
    draw can be the winner), and (n / X) pi_ref(w|x)^2 on the diagonal w = l.

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    _check_ref_and_r(ref_logp, r)
    n_pairs = require_in_range(n_pairs, "n_pairs", 0.0, float("inf"), low_open=True)
    p = ref_logp.exp().double()
    r = r.double()
    both = p[:, :, None] * p[:, None, :]
    win = 2 * torch.sigmoid(r[:, :, None] - r[:, None, :])
    win = win - torch.diag_embed(torch.diagonal(win, dim1=1, dim2=2)) + torch.eye(p.shape[1], dtype=p.dtype)
    return n_pairs / p.shape[0] * both * win


def fit_tabular(space, ref_logits, counts, beta, *, loss_type="dpo", average=False, steps=500,
                lr=0.1):
    r"""Minimise the DPO (or IPO) loss of the pairs in ``counts`` over the tabular policy's
    logits, starting at the reference, with full-batch Adam; returns the (X, Y) log pi_theta.

    The loss is the count-weighted mean over pairs of -log sigma(beta h_theta) (DPO) or
    (h_theta - 1 / (2 beta))^2 (IPO), h_theta the log-ratio margin, with summed or (``average``)
    length-averaged log-probs.

    ==========  ========================  ===========================================
    space       CompletionSpace           the completions and the policy's table
    ref_logits  (X, n_states, V + 1)      the reference's token logits
    counts      (X, Y, Y)                 pair counts (sample_pair_counts or expected)
    beta        > 0                       KL strength
    steps, lr   int, float                Adam's steps and learning rate
    ==========  ========================  ===========================================

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    if not isinstance(space, CompletionSpace):
        raise ValueError(f"space must be a CompletionSpace, got {type(space).__name__}")
    ref_logp = space.seq_logp(ref_logits)
    X, Y = ref_logp.shape
    require_float_tensor(counts, "counts")
    if counts.shape != (X, Y, Y):
        raise ValueError(f"counts must have shape ({X}, {Y}, {Y}) (prompt, chosen, rejected), "
                         f"got {tuple(counts.shape)}")
    total = float(counts.sum())
    if total <= 0 or bool((counts < 0).any()):
        raise ValueError("counts must be non-negative and hold at least one preference pair")
    beta = _check_beta(beta)
    if loss_type not in ("dpo", "ipo"):
        raise ValueError(f"loss_type must be 'dpo' or 'ipo', got {loss_type!r}")
    steps = require_int(steps, "steps", minimum=1)
    weights = counts / total
    scale = 1.0 / space.lengths if average else torch.ones_like(space.lengths)
    logits = ref_logits.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([logits], lr=lr)
    for _ in range(steps):
        log_ratio = (space.seq_logp(logits) - ref_logp) * scale  # (X, Y), summed or mean
        h = log_ratio[:, :, None] - log_ratio[:, None, :]  # (X, w, l): the margin h_theta
        if loss_type == "dpo":
            per_pair = -F.logsigmoid(beta * h)
        else:
            per_pair = (h - 1 / (2 * beta)) ** 2
        loss = (weights * per_pair).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return space.seq_logp(logits)


def kl_per_prompt(p_logp, q_logp):
    r"""KL(p(. | x) || q(. | x)) = sum_y p (log p - log q), one value per prompt: (X,).

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    _check_logp_table(p_logp, "p_logp")
    _check_logp_table(q_logp, "q_logp")
    if p_logp.shape != q_logp.shape:
        raise ValueError(f"q_logp must have p_logp's shape {tuple(p_logp.shape)}, got {tuple(q_logp.shape)}")
    return (p_logp.exp() * (p_logp - q_logp)).sum(-1)


def implicit_reward_error(policy_logp, ref_logp, r, beta):
    r"""How far the implicit reward beta log(pi_theta / pi_ref) is from r up to a per-prompt
    constant: both are centred per prompt (pi_ref-weighted mean), and the result is the
    pi_ref-weighted root-mean-square difference, averaged over prompts. 0 means
    beta log(pi_theta / pi_ref) = r + Lambda(x) exactly.

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    _check_ref_and_r(ref_logp, r)
    _check_logp_table(policy_logp, "policy_logp")
    if policy_logp.shape != ref_logp.shape:
        raise ValueError(f"policy_logp must have ref_logp's shape {tuple(ref_logp.shape)}")
    beta = _check_beta(beta)
    w = ref_logp.exp()
    diff = beta * (policy_logp - ref_logp) - r
    diff = diff - (w * diff).sum(-1, keepdim=True)
    return float(((w * diff ** 2).sum(-1)).sqrt().mean())


def data_sweep(space, ref_logits, r, beta, sizes, seeds=(0, 1, 2), *, loss_type="dpo", steps=300,
               lr=0.1):
    r"""KL(pi_theta || pi*) and the implicit-reward error after fitting DPO (or IPO) to ``n``
    sampled pairs, for each n in ``sizes`` (None: the infinite-data limit) and each seed.

    Returns a dict of (len(sizes), len(seeds)) numpy arrays: ``kl`` (mean over prompts of
    KL(pi_theta(.|x) || pi*(.|x))) and ``reward_error`` (:func:`implicit_reward_error`).

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    import numpy as np
    if not isinstance(space, CompletionSpace):
        raise ValueError(f"space must be a CompletionSpace, got {type(space).__name__}")
    sizes, seeds = list(sizes), list(seeds)
    if not sizes or not seeds:
        raise ValueError("sizes and seeds must each hold at least one entry")
    ref_logp = space.seq_logp(ref_logits)
    _check_ref_and_r(ref_logp, r)
    beta = _check_beta(beta)
    star = torch.log(kl_optimal_policy(ref_logp.exp(), r, beta))
    kl = np.zeros((len(sizes), len(seeds)))
    err = np.zeros_like(kl)
    for i, n in enumerate(sizes):
        for j, s in enumerate(seeds):
            counts = expected_pair_counts(ref_logp, r) if n is None else \
                sample_pair_counts(ref_logp, r, n, torch.Generator().manual_seed(int(s)))
            lp = fit_tabular(space, ref_logits, counts, beta, loss_type=loss_type, steps=steps, lr=lr)
            kl[i, j] = float(kl_per_prompt(lp, star).mean())
            err[i, j] = implicit_reward_error(lp, ref_logp, r, beta)
    return {"kl": kl, "reward_error": err}
