"""Direct preference optimisation (Rafailov et al. 2023): the Bradley-Terry loss with the reward
written through the policy itself, so no reward model and no RL loop are needed."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlnotes._validate import require_float_tensor, require_in_range, require_ndim, require_same_shape
from rlnotes._losses import check_mask, require_finite_where

__all__ = ["dpo_implicit_reward", "dpo_loss", "sequence_logprob"]


def sequence_logprob(token_logp, mask):
    r"""Log-probability of whole sequences: the sum of their masked per-token log-probs.

    .. math::  \log \pi_\theta(y \mid x) = \sum_{t=1}^{|y|} \log \pi_\theta(y_t \mid x, y_{<t})
               = \sum_t \text{mask}_t \cdot \text{token\_logp}_t .

    ==========  ===========  ==========================================================
    argument    shape        meaning
    ==========  ===========  ==========================================================
    token_logp  (B, T)       ``log pi(y_t | x, y_<t)`` of the tokens of B sequences,
                             padded to length T
    mask        (B, T)       1/True on the response tokens, 0/False on the prompt and the
                             padding (which may hold any value: it is ignored, and gets zero
                             gradient)
    returns     (B,)         the sum over each sequence's selected tokens (0 for a row
                             with no selected token)
    ==========  ===========  ==========================================================

    Defined in: DPO, section The DPO loss.
    """
    require_float_tensor(token_logp, "token_logp")
    require_ndim(token_logp, "token_logp", 2)
    mask = check_mask(mask, token_logp, "token_logp")
    require_finite_where(token_logp, "token_logp", mask)
    return torch.where(mask, token_logp, torch.zeros_like(token_logp)).sum(dim=1)


def _check_beta(beta) -> float:
    beta = require_in_range(beta, "beta", 0.0, float("inf"), low_open=True)
    return beta


def _check_sequence_logps(x, name, ref=None, ref_name=None):
    require_float_tensor(x, name)
    require_ndim(x, name, 1)
    if x.numel() == 0:
        raise ValueError(f"{name} must hold at least one sequence, got shape {tuple(x.shape)}")
    if ref is not None:
        require_same_shape(x, name, ref, ref_name)
        if x.device != ref.device:
            raise ValueError(f"{name} must be on {ref_name}'s device {ref.device}, got {x.device}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must contain only finite values")
    return x


def dpo_implicit_reward(policy_logps, ref_logps, beta=0.1):
    r"""DPO's implicit reward of a response: beta times the policy's log-ratio to the reference.

    .. math::  \hat r(x, y) = \beta \left(\log \pi_\theta(y \mid x) - \log \pi_{ref}(y \mid x)\right)

    (the reward that the policy is optimal for under the KL-regularised objective, up to a term
    that depends on x only and cancels in a preference). Linear in beta.

    ===========  ======  ====================================================
    argument     shape   meaning
    ===========  ======  ====================================================
    policy_logps (B,)    ``log pi_theta(y|x)`` (e.g. from :func:`sequence_logprob`)
    ref_logps    (B,)    ``log pi_ref(y|x)`` (a constant: detached)
    beta         > 0     strength of the KL regularisation
    returns      (B,)    the implicit rewards
    ===========  ======  ====================================================

    Defined in: DPO, section The implicit reward.
    """
    _check_sequence_logps(policy_logps, "policy_logps")
    _check_sequence_logps(ref_logps, "ref_logps", policy_logps, "policy_logps")
    beta = _check_beta(beta)
    return beta * (policy_logps - ref_logps.detach().to(policy_logps.dtype))


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    r"""The DPO loss (Rafailov et al. 2023), to be minimised.

    .. math::

        \Delta_i = \left(\log \pi_\theta(y_w^i|x^i) - \log \pi_{ref}(y_w^i|x^i)\right)
                 - \left(\log \pi_\theta(y_l^i|x^i) - \log \pi_{ref}(y_l^i|x^i)\right), \qquad
        L = -\frac{1}{B} \sum_{i=1}^B \log \sigma(\beta \Delta_i) .

    It is the Bradley-Terry loss of the implicit rewards :func:`dpo_implicit_reward` of the
    chosen (``y_w``) and rejected (``y_l``) responses. When the policy equals the reference,
    ``Delta = 0`` and the loss is ``log 2``; its gradient raises the chosen response's
    log-probability and lowers the rejected one's, weighted by ``sigma(-beta Delta_i)`` (pairs the
    implicit reward already orders correctly count less).

    ======================  ======  =============================================
    argument                shape   meaning
    ======================  ======  =============================================
    policy_chosen_logps     (B,)    ``log pi_theta(y_w|x)``, differentiable
    policy_rejected_logps   (B,)    ``log pi_theta(y_l|x)``, differentiable
    ref_chosen_logps        (B,)    ``log pi_ref(y_w|x)`` (constant: detached)
    ref_rejected_logps      (B,)    ``log pi_ref(y_l|x)`` (constant: detached)
    beta                    > 0     KL strength; scales the implicit reward
    returns                 ()      the mean over the B pairs
    ======================  ======  =============================================

    Sequence log-probs come from :func:`sequence_logprob`. The other three are cast to
    policy_chosen_logps' dtype.

    Defined in: DPO, section The DPO loss.
    """
    pc = _check_sequence_logps(policy_chosen_logps, "policy_chosen_logps")
    pr = _check_sequence_logps(policy_rejected_logps, "policy_rejected_logps", pc, "policy_chosen_logps")
    rc = _check_sequence_logps(ref_chosen_logps, "ref_chosen_logps", pc, "policy_chosen_logps")
    rr = _check_sequence_logps(ref_rejected_logps, "ref_rejected_logps", pc, "policy_chosen_logps")
    beta = _check_beta(beta)
    dtype = pc.dtype
    delta = (pc - rc.detach().to(dtype)) - (pr.to(dtype) - rr.detach().to(dtype))
    return -F.logsigmoid(beta * delta).mean()
