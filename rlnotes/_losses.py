"""Building blocks shared by the policy losses of several chapters (PPO, GRPO, DPO).

The losses take per-token tensors that may be right-padded: a mask selects the real tokens, and
padding may hold any value. These helpers check such inputs (each raising a ``ValueError`` that
names the argument) and compute the pieces the losses have in common, so that each lives once:

- :func:`check_logp`, :func:`check_like`, :func:`check_mask`, :func:`require_finite_where`:
  input checks for masked token tensors;
- :func:`clipped_objective`: PPO's per-element ``min(ratio A, clip(ratio) A)``, which GRPO and
  DAPO reuse with asymmetric clip ranges;
- :func:`k3`: the k3 estimator of KL without input checks (:func:`rlnotes.kl.kl_k3` is the
  checked public version).
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import (
    is_tensor,
    require_binary,
    require_float_tensor,
    require_same_shape,
    require_tensor,
)


def check_logp(logp, name: str = "logp") -> torch.Tensor:
    """A non-empty floating-point tensor."""
    require_float_tensor(logp, name)
    if logp.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(logp.shape)}")
    return logp


def check_like(x, name: str, ref: torch.Tensor, ref_name: str) -> torch.Tensor:
    """A float tensor of ``ref``'s shape and device, returned detached in ``ref``'s dtype."""
    require_float_tensor(x, name)
    require_same_shape(x, name, ref, ref_name)
    if x.device != ref.device:
        raise ValueError(f"{name} must be on {ref_name}'s device {ref.device}, got {x.device}")
    return x.detach().to(ref.dtype)


def check_mask(mask, ref: torch.Tensor, ref_name: str = "logp") -> torch.Tensor:
    """A 0/1 or bool tensor of ``ref``'s shape and device, returned as bool."""
    require_tensor(mask, "mask")
    require_same_shape(mask, "mask", ref, ref_name)
    if mask.device != ref.device:
        raise ValueError(f"mask must be on {ref_name}'s device {ref.device}, got {mask.device}")
    require_binary(mask, "mask")
    return mask.bool()


def require_finite_where(x: torch.Tensor, name: str, mask: torch.Tensor | None) -> None:
    """Values at selected positions must be finite; padding may hold anything."""
    bad = ~torch.isfinite(x)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):
        raise ValueError(f"{name} must be finite" + (" where mask is 1" if mask is not None else ""))


def clipped_objective(logp, old_logp, adv, eps_low, eps_high, mask):
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


def k3(logp, ref_logp):
    """k3 = rho - log rho - 1 with rho = pi_ref / pi_theta, without input checks.

    Written with ``expm1`` so that it is exactly 0 when the log-probabilities agree and never
    negative in floating point."""
    log_rho = ref_logp - logp
    return (torch if is_tensor(log_rho) else np).expm1(log_rho) - log_rho
