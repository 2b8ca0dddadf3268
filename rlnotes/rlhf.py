"""Reward modelling from pairwise preferences: the Bradley-Terry model (Bradley & Terry 1952)."""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from rlnotes._validate import require_float_tensor, require_real, require_same_shape

__all__ = ["bradley_terry_loss", "bradley_terry_prob"]


def _check_rewards(r_chosen, r_rejected):
    require_float_tensor(r_chosen, "r_chosen")
    require_float_tensor(r_rejected, "r_rejected")
    if r_chosen.numel() == 0:
        raise ValueError(f"r_chosen must hold at least one pair, got shape {tuple(r_chosen.shape)}")
    require_same_shape(r_rejected, "r_rejected", r_chosen, "r_chosen")
    if r_rejected.device != r_chosen.device:
        raise ValueError(
            f"r_rejected must be on r_chosen's device {r_chosen.device}, got {r_rejected.device}"
        )
    for x, name in ((r_chosen, "r_chosen"), (r_rejected, "r_rejected")):
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must contain only finite values")


def bradley_terry_prob(r_chosen, r_rejected):
    r"""Bradley-Terry probability that the first response is preferred to the second.

    .. math::  P(y_w \succ y_l \mid x) = \sigma(r(x, y_w) - r(x, y_l))
               = \frac{e^{r(x, y_w)}}{e^{r(x, y_w)} + e^{r(x, y_l)}} .

    ==========  ===========  ===============================================
    argument    shape        meaning
    ==========  ===========  ===============================================
    r_chosen    (B,) or any  reward ``r(x, y_w)`` of the first response
    r_rejected  r_chosen's   reward ``r(x, y_l)`` of the second
    returns     r_chosen's   the probability, in (0, 1)
    ==========  ===========  ===============================================

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """
    _check_rewards(r_chosen, r_rejected)
    return torch.sigmoid(r_chosen - r_rejected.to(r_chosen.dtype))


def bradley_terry_loss(r_chosen, r_rejected, margin=None):
    r"""Negative log-likelihood of observed preferences under Bradley-Terry (Bradley & Terry 1952).

    .. math::

        L = -\frac{1}{B} \sum_{i=1}^{B} \log \sigma\left(r(x_i, y_{w,i}) - r(x_i, y_{l,i}) - m_i\right)

    with the margin ``m_i = 0`` when ``margin`` is None. Minimising it fits a reward model to
    pairs in which ``y_w`` (chosen) was preferred to ``y_l`` (rejected). A positive margin asks
    for a reward gap of at least about m_i (used for pairs rated as clearly different, as in
    Llama 2). The loss depends only on the reward difference, so adding a constant to every
    reward changes nothing.

    ==========  ======================  ================================================
    argument    shape                   meaning
    ==========  ======================  ================================================
    r_chosen    (B,) (any shape works)  rewards of the preferred responses
    r_rejected  r_chosen's              rewards of the other responses
    margin      None, a number, or a    ``m_i``; a tensor is treated as a constant
                tensor of r_chosen's    (detached)
                shape
    returns     () scalar               the mean over the B pairs
    ==========  ======================  ================================================

    Differentiable with respect to both rewards (computed with ``logsigmoid``, stable for large
    differences). r_rejected and margin are cast to r_chosen's dtype.

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """
    _check_rewards(r_chosen, r_rejected)
    diff = r_chosen - r_rejected.to(r_chosen.dtype)
    if margin is not None:
        if isinstance(margin, numbers.Number) and not isinstance(margin, torch.Tensor):
            diff = diff - require_real(margin, "margin")
        else:
            require_float_tensor(margin, "margin")
            require_same_shape(margin, "margin", r_chosen, "r_chosen")
            if margin.device != r_chosen.device:
                raise ValueError(
                    f"margin must be on r_chosen's device {r_chosen.device}, got {margin.device}"
                )
            if not bool(torch.isfinite(margin).all()):
                raise ValueError("margin must contain only finite values")
            diff = diff - margin.detach().to(r_chosen.dtype)
    return -F.logsigmoid(diff).mean()
