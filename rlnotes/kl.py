"""KL divergence: the exact KL of two categorical distributions and three per-sample estimators.

The estimators follow Schulman (2020), "Approximating KL divergence". Actions a are sampled from
pi_theta; for each one we know ``logp = log pi_theta(a)`` and ``ref_logp = log pi_ref(a)``.
Writing ``rho = pi_ref(a) / pi_theta(a)`` (so ``log rho = ref_logp - logp``), each estimator is a
function of rho whose average over the samples approximates KL(pi_theta || pi_ref):

    k1 = -log rho,   k2 = (log rho)^2 / 2,   k3 = (rho - 1) - log rho.

k1 and k3 are unbiased (E[rho] = 1 under pi_theta); k3 is never negative and usually has a much
lower variance than k1; k2 is biased (its mean is close to the KL only when the distributions
are close) but has low variance.

All functions take numpy arrays or torch tensors (both arguments of one kind) and return the same
kind, element-wise, in the inputs' dtype and device.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._losses import k3
from rlnotes._validate import as_array, is_tensor, require_same_shape

__all__ = ["kl_categorical", "kl_k1", "kl_k2", "kl_k3"]


def _float_pair(logp, ref_logp, name_p="logp", name_q="ref_logp", *, finite=True):
    """Two float arrays/tensors of one kind and one shape; NaN (and, if ``finite``, inf) rejected."""
    p = as_array(logp, name_p)
    q = as_array(ref_logp, name_q)
    if is_tensor(p) != is_tensor(q):
        raise ValueError(
            f"{name_p} and {name_q} must both be numpy arrays or both torch tensors, got "
            f"{type(p).__name__} and {type(q).__name__}"
        )
    for x, name in ((p, name_p), (q, name_q)):
        floating = torch.is_floating_point(x) if is_tensor(x) else np.issubdtype(x.dtype, np.floating)
        if not floating:
            raise ValueError(f"{name} must hold floating-point log-probabilities, got dtype {x.dtype}")
    if is_tensor(p) and p.device != q.device:
        raise ValueError(f"{name_q} must be on {name_p}'s device {p.device}, got {q.device}")
    require_same_shape(q, name_q, p, name_p)
    for x, name in ((p, name_p), (q, name_q)):
        xp = torch if is_tensor(x) else np
        bad = xp.isnan(x).any() if not finite else ~xp.isfinite(x).all()
        if bool(bad):
            want = "contain only finite values" if finite else "not contain NaN"
            raise ValueError(f"{name} must {want}")
    return p, q


def kl_k1(logp, ref_logp):
    r"""The k1 estimator of KL(pi_theta || pi_ref): the log-ratio itself.

    .. math::  k_1 = \log \pi_\theta(a) - \log \pi_{ref}(a), \qquad a \sim \pi_\theta .

    Unbiased, since ``E_{pi_theta}[k1] = KL(pi_theta || pi_ref)``, but a single sample is
    negative whenever pi_theta(a) < pi_ref(a), and its variance is high (Schulman 2020).

    ==========  ===========  ===============================================
    argument    shape        meaning
    ==========  ===========  ===============================================
    logp        any (...)    ``log pi_theta(a)`` of actions a ~ pi_theta
    ref_logp    logp's       ``log pi_ref(a)`` of the same actions
    returns     logp's       per-sample estimate; average it over samples
    ==========  ===========  ===============================================

    Defined in: TRPO and PPO, section KL divergence.
    """
    logp, ref_logp = _float_pair(logp, ref_logp)
    return logp - ref_logp


def kl_k2(logp, ref_logp):
    r"""The k2 estimator of KL(pi_theta || pi_ref): half the squared log-ratio.

    .. math::  k_2 = \tfrac12 \left(\log \pi_\theta(a) - \log \pi_{ref}(a)\right)^2,
               \qquad a \sim \pi_\theta .

    Never negative and low-variance, but biased: its mean is an f-divergence that agrees with the
    KL only to second order in the difference of the distributions (Schulman 2020).

    ==========  ===========  ===============================================
    argument    shape        meaning
    ==========  ===========  ===============================================
    logp        any (...)    ``log pi_theta(a)`` of actions a ~ pi_theta
    ref_logp    logp's       ``log pi_ref(a)`` of the same actions
    returns     logp's       per-sample estimate; average it over samples
    ==========  ===========  ===============================================

    Defined in: TRPO and PPO, section KL divergence.
    """
    logp, ref_logp = _float_pair(logp, ref_logp)
    return 0.5 * (logp - ref_logp) ** 2


def kl_k3(logp, ref_logp):
    r"""The k3 estimator of KL(pi_theta || pi_ref), the one GRPO uses.

    .. math::

        k_3 = \rho - \log \rho - 1, \qquad
        \rho = \frac{\pi_{ref}(a)}{\pi_\theta(a)} = \exp(\text{ref\_logp} - \text{logp}),
        \qquad a \sim \pi_\theta .

    The ratio is pi_ref over pi_theta (not the other way round): then ``E[rho - 1] = 0`` under
    pi_theta, so k3 is unbiased like k1, and since ``x - 1 >= log x`` it is never negative
    (Schulman 2020). Computed as ``expm1(log rho) - log rho``, which keeps small values accurate
    and non-negative in floating point.

    ==========  ===========  ===============================================
    argument    shape        meaning
    ==========  ===========  ===============================================
    logp        any (...)    ``log pi_theta(a)`` of actions a ~ pi_theta
    ref_logp    logp's       ``log pi_ref(a)`` of the same actions
    returns     logp's       per-sample estimate, >= 0; average it over samples
    ==========  ===========  ===============================================

    Defined in: TRPO and PPO, section KL divergence.
    """
    logp, ref_logp = _float_pair(logp, ref_logp)
    return k3(logp, ref_logp)


def _log_softmax(logits):
    if is_tensor(logits):
        return torch.log_softmax(logits, dim=-1)
    m = np.max(logits, axis=-1, keepdims=True)
    shifted = logits - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def kl_categorical(logits_p, logits_q):
    r"""Exact KL(p || q) of categorical distributions given by logits (the last axis).

    .. math::  \mathrm{KL}(p \,\|\, q) = \sum_k p_k (\log p_k - \log q_k),
               \qquad p = \mathrm{softmax}(\text{logits\_p}),\ q = \mathrm{softmax}(\text{logits\_q}).

    The reference the sample estimators :func:`kl_k1`, :func:`kl_k2`, :func:`kl_k3` are tested
    against. A logit of ``-inf`` gives a category probability 0: it contributes nothing where
    ``p_k = 0`` (``0 log 0 = 0``) and makes the KL ``+inf`` where ``p_k > 0 = q_k``.

    ==========  ===========  ===============================================
    argument    shape        meaning
    ==========  ===========  ===============================================
    logits_p    (..., K)     logits of p (pi_theta in the book's use)
    logits_q    logits_p's   logits of q (pi_ref)
    returns     (...)        the KL of each pair of distributions, >= 0
    ==========  ===========  ===============================================

    Both numpy arrays or both torch tensors; NaN and ``+inf`` are rejected, and each
    distribution needs at least one finite logit.

    Defined in: TRPO and PPO, section KL divergence.
    """
    p_logits, q_logits = _float_pair(logits_p, logits_q, "logits_p", "logits_q", finite=False)
    for x, name in ((p_logits, "logits_p"), (q_logits, "logits_q")):
        xp = torch if is_tensor(x) else np
        if x.ndim < 1 or x.shape[-1] < 1:
            raise ValueError(
                f"{name} must have a last axis of K >= 1 categories, got shape {tuple(x.shape)}"
            )
        if bool((x == float("inf")).any()):
            raise ValueError(f"{name} must not contain +inf")
        if not bool(xp.isfinite(x).any(-1).all()):
            raise ValueError(f"{name} must have at least one finite logit per distribution")
    xp = torch if is_tensor(p_logits) else np
    logp, logq = _log_softmax(p_logits), _log_softmax(q_logits)
    p = xp.exp(logp)
    # where p_k = 0 the term is 0 (and log p_k = -inf must not turn it into NaN)
    safe_diff = xp.where(p > 0, logp - xp.where(p > 0, logq, 0.0), 0.0)
    terms = xp.where(p > 0, p * safe_diff, 0.0)
    return terms.sum(-1)
