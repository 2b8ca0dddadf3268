"""PPO's clipped surrogate loss (Schulman et al. 2017), and the masked-tensor helpers the losses
of the later chapters (GRPO) share with it."""

from __future__ import annotations

import torch

from rlnotes._validate import (
    require_binary,
    require_float_tensor,
    require_in_range,
    require_same_shape,
    require_tensor,
)

__all__ = ["ppo_clip_loss"]


# --- shared input checks for the torch losses -----------------------------------------------


def _check_logp(logp, name: str = "logp") -> torch.Tensor:
    require_float_tensor(logp, name)
    if logp.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(logp.shape)}")
    return logp


def _check_like(x, name: str, ref: torch.Tensor, ref_name: str) -> torch.Tensor:
    """A float tensor of ``ref``'s shape and device, returned detached in ``ref``'s dtype."""
    require_float_tensor(x, name)
    require_same_shape(x, name, ref, ref_name)
    if x.device != ref.device:
        raise ValueError(f"{name} must be on {ref_name}'s device {ref.device}, got {x.device}")
    return x.detach().to(ref.dtype)


def _check_mask(mask, ref: torch.Tensor, ref_name: str = "logp") -> torch.Tensor:
    """A 0/1 or bool tensor of ``ref``'s shape and device, returned as bool."""
    require_tensor(mask, "mask")
    require_same_shape(mask, "mask", ref, ref_name)
    if mask.device != ref.device:
        raise ValueError(f"mask must be on {ref_name}'s device {ref.device}, got {mask.device}")
    require_binary(mask, "mask")
    return mask.bool()


def _require_finite_where(x: torch.Tensor, name: str, mask: torch.Tensor | None) -> None:
    """Values at selected positions must be finite; padding may hold any finite value."""
    bad = ~torch.isfinite(x)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):
        raise ValueError(f"{name} must be finite" + (" where mask is 1" if mask is not None else ""))


def _clipped_objective(logp, old_logp, adv, eps_low, eps_high, mask):
    """``min(ratio A, clip(ratio, 1 - eps_low, 1 + eps_high) A)`` per element, 0 where masked out.

    Masked-out positions are replaced by 0 *before* the exponential, so that garbage in the
    padding can produce neither inf in the forward pass nor ``0 * inf = NaN`` in the backward."""
    log_ratio = logp - old_logp
    if mask is not None:
        log_ratio = torch.where(mask, log_ratio, torch.zeros_like(log_ratio))
        adv = torch.where(mask, adv, torch.zeros_like(adv))
    ratio = torch.exp(log_ratio)
    surrogate = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    return torch.minimum(surrogate, clipped)


def ppo_clip_loss(logp, old_logp, advantages, clip_eps=0.2, mask=None):
    r"""PPO's clipped surrogate loss (Schulman et al. 2017), to be minimised.

    .. math::

        r_t(\theta) = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\theta_{old}}(a_t \mid s_t)}
                    = \exp(\text{logp}_t - \text{old\_logp}_t), \qquad
        L(\theta) = -\frac{1}{|M|} \sum_{t \in M}
            \min\left(r_t(\theta) A_t,\ \mathrm{clip}(r_t(\theta), 1 - \epsilon, 1 + \epsilon) A_t\right)

    where M is the set of selected elements (all of them when ``mask`` is None). The minimum
    makes the objective a pessimistic bound: once the ratio has moved past ``1 + epsilon`` with
    ``A_t > 0`` (or below ``1 - epsilon`` with ``A_t < 0``) the clipped branch is active and the
    element's gradient is zero; everywhere else the gradient is the plain surrogate's,
    ``-A_t r_t(theta) grad log pi_theta``.

    ===========  =====================  ===================================================
    argument     shape                  meaning
    ===========  =====================  ===================================================
    logp         any (...), float       ``log pi_theta(a_t|s_t)``, differentiable
    old_logp     logp's, or None        ``log pi_theta_old(a_t|s_t)`` of the policy that
                                        collected the data; None means on-policy
                                        (``logp.detach()``, ratio 1)
    advantages   logp's                 ``A_t`` (e.g. from :func:`rlnotes.returns.gae`)
    clip_eps     float in [0, 1)        epsilon
    mask         None or logp's         1/True selects an element, 0/False drops it
    returns      () scalar              the mean over the selected elements
    ===========  =====================  ===================================================

    Gradients flow only through ``logp``: ``old_logp`` and ``advantages`` are treated as
    constants (detached) and cast to logp's dtype. Dropped elements may hold any finite value
    (or inf/NaN): they change neither the loss nor its gradient, which is exactly 0 there.
    A mask that selects nothing raises ``ValueError``.

    Defined in: TRPO and PPO, section The clipped surrogate objective.
    """
    logp = _check_logp(logp)
    old_logp = logp.detach() if old_logp is None else _check_like(old_logp, "old_logp", logp, "logp")
    adv = _check_like(advantages, "advantages", logp, "logp")
    clip_eps = require_in_range(clip_eps, "clip_eps", 0.0, 1.0, high_open=True)
    if mask is not None:
        mask = _check_mask(mask, logp)
        if not bool(mask.any()):
            raise ValueError("mask must select at least one element (it is all 0)")
    for x, name in ((logp, "logp"), (old_logp, "old_logp"), (adv, "advantages")):
        _require_finite_where(x, name, mask)
    objective = _clipped_objective(logp, old_logp, adv, clip_eps, clip_eps, mask)
    if mask is None:
        return -objective.mean()
    return -objective.sum() / mask.sum().to(logp.dtype)
