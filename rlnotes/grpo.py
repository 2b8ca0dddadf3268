"""Group relative policy optimisation and its variants.

GRPO (Shao et al. 2024, DeepSeekMath) replaces PPO's critic by a group baseline: for each prompt
it samples G completions from pi_theta_old and scores each against the others of its group.
Dr. GRPO (Liu et al. 2025) removes the two normalisations that bias it (the 1/|o_i| length
factor and the group std); DAPO (Yu et al. 2025, ByteDance Seed and Tsinghua AIR) averages over
tokens instead of sequences, clips asymmetrically ("clip-higher"), drops groups whose rewards are
all equal (dynamic sampling) and penalises overlong completions softly.

Layout: a batch holds B prompts times G completions, contiguous by prompt, so completion i
belongs to group ``i // G``. Token tensors are (B*G, T), right-padded, with a 0/1 mask.
"""

from __future__ import annotations

import torch

from rlnotes._validate import (
    require_choice,
    require_float_tensor,
    require_in_range,
    require_int,
    require_ndim,
    require_tensor,
)
from rlnotes._losses import check_like, check_logp, check_mask, clipped_objective, k3, require_finite_where

__all__ = ["dynamic_sampling_mask", "group_advantages", "grpo_loss", "overlong_penalty"]

SCALES = ("group", "batch", "none")
LOSS_TYPES = ("grpo", "dapo", "bnpo", "dr_grpo")


def _grouped_rewards(rewards, group_size, *, float_out: bool):
    """rewards (B*G,) checked and viewed as (B, G)."""
    require_tensor(rewards, "rewards")
    require_ndim(rewards, "rewards", 1)
    if rewards.dtype.is_complex:
        raise ValueError(f"rewards must be real, got dtype {rewards.dtype}")
    if rewards.numel() == 0:
        raise ValueError("rewards must not be empty (an empty group)")
    group_size = require_int(group_size, "group_size", minimum=1)
    if rewards.numel() % group_size:
        raise ValueError(
            f"group_size must divide the number of rewards {rewards.numel()}, got {group_size}"
        )
    if float_out and not torch.is_floating_point(rewards):
        rewards = rewards.to(torch.get_default_dtype())
    if torch.is_floating_point(rewards) and not bool(torch.isfinite(rewards).all()):
        raise ValueError("rewards must contain only finite values")
    return rewards.view(-1, group_size), group_size


def group_advantages(rewards, group_size, scale="group", eps=1e-4):
    r"""GRPO's group-relative advantage of each completion (outcome supervision).

    .. math::

        \hat A_i = \frac{r_i - \mathrm{mean}(r_{g(i)})}{s + \epsilon}, \qquad
        s = \begin{cases}
              \mathrm{std}(r_{g(i)}) & \text{scale = "group" (GRPO, Shao et al. 2024)} \\
              \mathrm{std}(r_{1..BG}) & \text{scale = "batch"} \\
              \text{no division}     & \text{scale = "none" (Dr. GRPO, Liu et al. 2025)}
            \end{cases}

    where ``g(i) = i // G`` is the group of completion i. Every token of completion i gets
    ``A_i``. The std is the sample standard deviation with Bessel's correction (divide by
    ``n - 1``), as ``torch.std`` computes it; ``"batch"`` takes it over all B*G rewards, not
    over the centred ones. A group whose rewards are all equal gets advantage 0 (its
    completions carry no learning signal, see :func:`dynamic_sampling_mask`).

    ==========  =====================  ====================================================
    argument    shape                  meaning
    ==========  =====================  ====================================================
    rewards     (B*G,)                 one scalar reward per completion, groups contiguous
    group_size  int G >= 1             completions per prompt; must divide B*G
    scale       "group", "batch",      the denominator, see above
                "none"
    eps         float >= 0             added to the std
    returns     (B*G,)                 ``A_i``, in rewards' dtype and device
    ==========  =====================  ====================================================

    Integer or bool rewards (0/1 correctness) are promoted to torch's default dtype. The std of
    a single value is undefined (``torch.std`` gives NaN), so ``scale="group"`` needs
    ``group_size >= 2`` and ``scale="batch"`` at least two rewards; both raise ``ValueError``
    otherwise. ``scale="none"`` accepts ``group_size = 1`` (the advantage is then 0).

    Defined in: GRPO, Dr. GRPO and DAPO, section Group-relative advantages.
    """
    scale = require_choice(scale, "scale", SCALES)
    grouped, group_size = _grouped_rewards(rewards, group_size, float_out=True)
    eps = require_in_range(eps, "eps", 0.0, float("inf"))
    if scale == "group" and group_size < 2:
        raise ValueError(
            f"group_size must be >= 2 with scale='group' (the std of one reward is undefined), "
            f"got {group_size}"
        )
    if scale == "batch" and grouped.numel() < 2:
        raise ValueError(
            "rewards must hold at least 2 values with scale='batch' (the std of one reward is "
            "undefined)"
        )
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (grouped.std(dim=1, keepdim=True) + eps)
    elif scale == "batch":
        centred = centred / (grouped.std() + eps)
    return centred.reshape(-1)


def dynamic_sampling_mask(rewards, group_size):
    r"""DAPO's dynamic sampling (Yu et al. 2025): which completions to keep.

    True for the completions of groups whose rewards are not all equal. A group in which every
    completion got the same reward (all correct or all wrong) has zero group-relative advantage
    and so no policy gradient; DAPO filters such groups out and samples more prompts instead.

    .. math::  \text{keep}_i = \left[\max r_{g(i)} \neq \min r_{g(i)}\right]

    ==========  ===========  ======================================================
    argument    shape        meaning
    ==========  ===========  ======================================================
    rewards     (B*G,)       rewards, groups of G contiguous (any real dtype)
    group_size  int G >= 1   completions per prompt; must divide B*G
    returns     (B*G,) bool  True where the completion's group is kept
    ==========  ===========  ======================================================

    Equality is exact (floating-point ``==``); with ``group_size = 1`` every group is all-equal
    and nothing is kept.

    Defined in: GRPO, Dr. GRPO and DAPO, section DAPO.
    """
    grouped, group_size = _grouped_rewards(rewards, group_size, float_out=False)
    keep = grouped.amax(dim=1) != grouped.amin(dim=1)
    return keep.repeat_interleave(group_size)


def overlong_penalty(lengths, max_len, cache_len):
    r"""DAPO's soft overlong punishment (Yu et al. 2025), added to the reward of each completion.

    .. math::

        R_{length}(|o|) = \begin{cases}
            0 & |o| \le L_{max} - L_{cache} \\
            \dfrac{(L_{max} - L_{cache}) - |o|}{L_{cache}} & L_{max} - L_{cache} < |o| \le L_{max} \\
            -1 & |o| > L_{max}
        \end{cases}

    A linear ramp from 0 to -1 over the last ``cache_len`` tokens of the budget.

    ==========  ================  ===================================================
    argument    shape             meaning
    ==========  ================  ===================================================
    lengths     any (...)         completion lengths |o| (integer or float, >= 0)
    max_len     int >= 1          L_max, the length budget
    cache_len   int, 1..max_len   L_cache, the length of the ramp
    returns     lengths' shape    the penalty, in [-1, 0]; float (lengths' dtype if it
                                  is floating, else torch's default dtype)
    ==========  ================  ===================================================

    Defined in: GRPO, Dr. GRPO and DAPO, section DAPO.
    """
    require_tensor(lengths, "lengths")
    if lengths.dtype == torch.bool or lengths.dtype.is_complex:
        raise ValueError(f"lengths must hold real numbers, got dtype {lengths.dtype}")
    max_len = require_int(max_len, "max_len", minimum=1)
    cache_len = require_int(cache_len, "cache_len", minimum=1)
    if cache_len > max_len:
        raise ValueError(f"cache_len must be <= max_len ({max_len}), got {cache_len}")
    dtype = lengths.dtype if torch.is_floating_point(lengths) else torch.get_default_dtype()
    length = lengths.to(dtype)
    if not bool(torch.isfinite(length).all()):
        raise ValueError("lengths must contain only finite values")
    if bool((length < 0).any()):
        raise ValueError("lengths must be >= 0")
    ramp = ((max_len - cache_len) - length) / cache_len
    penalty = torch.clamp(ramp, max=0.0)  # 0 up to max_len - cache_len, then the ramp ...
    return torch.where(length > max_len, torch.full_like(penalty, -1.0), penalty)  # ... then -1


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, *, eps_low=0.2, eps_high=None,
              beta=0.0, loss_type="grpo", max_tokens=None):
    r"""The GRPO policy loss and its Dr. GRPO and DAPO variants, to be minimised.

    Per token t of completion i, with ``r_{i,t}(theta) = exp(logp - old_logp)``:

    .. math::

        \ell_{i,t} = -\min\left(r_{i,t}(\theta) \hat A_i,\
                     \mathrm{clip}(r_{i,t}(\theta), 1 - \epsilon_{low}, 1 + \epsilon_{high}) \hat A_i\right)
                     + \beta\, k_3(\pi_\theta, \pi_{ref})_{i,t},

    ``k_3`` being :func:`rlnotes.kl.kl_k3` of the token (an estimate of
    KL(pi_theta || pi_ref)). The tokens are then aggregated according to ``loss_type``:

    - ``"grpo"`` (Shao et al. 2024): ``(1/B) sum_i (1/|o_i|) sum_t l_{i,t}``, the mean over
      sequences of each sequence's token mean. A token of a long completion weighs less than
      one of a short completion: long wrong answers are penalised less per token (the length
      bias Liu et al. 2025 point out).
    - ``"dapo"``, alias ``"bnpo"`` (Yu et al. 2025): ``sum_{i,t} l_{i,t} / sum_i |o_i|``, every
      token of the batch weighs the same.
    - ``"dr_grpo"`` (Liu et al. 2025): ``sum_{i,t} l_{i,t} / (B * max_tokens)``, a constant
      denominator: no 1/|o_i| factor (pair it with ``group_advantages(scale="none")`` for no
      std factor either).

    Here B is the number of rows (completions, B*G in :func:`group_advantages`' terms) and
    |o_i| the number of selected tokens of row i. Asymmetric clipping (DAPO's clip-higher,
    ``eps_high > eps_low``) lets the ratio of a token with a positive advantage rise to
    ``1 + eps_high`` before its gradient stops, so low-probability tokens can grow further.

    ===========  =====================  ==================================================
    argument     shape                  meaning
    ===========  =====================  ==================================================
    logp         (B, T) float           ``log pi_theta(o_{i,t} | q, o_{i,<t})``, right-padded,
                                        differentiable
    old_logp     (B, T) or None         ``log pi_theta_old`` of the same tokens (the policy
                                        that sampled the group); None means on-policy
                                        (``logp.detach()``)
    ref_logp     (B, T) or None         ``log pi_ref``; may be None when ``beta == 0``
    advantages   (B,)                   ``A_i`` of each completion (:func:`group_advantages`)
    mask         (B, T) 0/1 or bool     1 on completion tokens, 0 on padding
    eps_low      float in [0, 1)        lower clip: ratio >= 1 - eps_low
    eps_high     float >= 0 or None     upper clip: ratio <= 1 + eps_high; None = eps_low
    beta         float >= 0             weight of the k3 KL penalty
    loss_type    str                    "grpo", "dapo" (= "bnpo") or "dr_grpo"
    max_tokens   int >= 1 or None       dr_grpo's constant (the generation budget);
                                        None means T; ignored by the other loss types
    returns      () scalar              the loss
    ===========  =====================  ==================================================

    Conventions: gradients flow only through ``logp`` (old_logp, ref_logp and advantages are
    detached constants, cast to logp's dtype). Padded positions may hold any value (finite
    garbage, inf, NaN): they change neither the loss nor its gradient. With ``loss_type="grpo"``
    every row needs at least one selected token (``|o_i| = 0`` has no token mean) and
    ``ValueError`` names ``mask`` otherwise; ``"dapo"`` needs one selected token in the batch;
    ``"dr_grpo"`` accepts an all-zero mask (loss 0). With ``beta == 0`` the KL term is skipped
    entirely (ref_logp is not read).

    Defined in: GRPO, Dr. GRPO and DAPO, section The GRPO loss and its variants.
    """
    logp = check_logp(logp)
    require_ndim(logp, "logp", 2)
    B, T = logp.shape
    mask = check_mask(mask, logp)
    old_logp = logp.detach() if old_logp is None else check_like(old_logp, "old_logp", logp, "logp")
    require_float_tensor(advantages, "advantages")
    if tuple(advantages.shape) != (B,):
        raise ValueError(
            f"advantages must have shape ({B},) (one per row of logp), got {tuple(advantages.shape)}"
        )
    if advantages.device != logp.device:
        raise ValueError(f"advantages must be on logp's device {logp.device}, got {advantages.device}")
    adv = advantages.detach().to(logp.dtype)
    eps_low = require_in_range(eps_low, "eps_low", 0.0, 1.0, high_open=True)
    eps_high = eps_low if eps_high is None else require_in_range(eps_high, "eps_high", 0.0, float("inf"))
    beta = require_in_range(beta, "beta", 0.0, float("inf"))
    loss_type = require_choice(loss_type, "loss_type", LOSS_TYPES)
    if max_tokens is not None:
        max_tokens = require_int(max_tokens, "max_tokens", minimum=1)
    if beta > 0:
        if ref_logp is None:
            raise ValueError("ref_logp must be given when beta > 0 (the KL penalty needs pi_ref)")
        ref_logp = check_like(ref_logp, "ref_logp", logp, "logp")
    elif ref_logp is not None:
        check_like(ref_logp, "ref_logp", logp, "logp")
    require_finite_where(logp, "logp", mask)
    require_finite_where(old_logp, "old_logp", mask)
    if not bool(torch.isfinite(adv).all()):
        raise ValueError("advantages must contain only finite values")
    tokens_per_row = mask.sum(dim=1)
    if loss_type == "grpo" and bool((tokens_per_row == 0).any()):
        rows = torch.nonzero(tokens_per_row == 0).flatten().tolist()
        raise ValueError(
            f"mask must select at least one token in every row with loss_type='grpo', "
            f"rows {rows} are empty"
        )
    if loss_type in ("dapo", "bnpo") and not bool(mask.any()):
        raise ValueError(f"mask must select at least one token with loss_type={loss_type!r}")

    adv_tokens = adv[:, None].expand(B, T)
    per_token = -clipped_objective(logp, old_logp, adv_tokens, eps_low, eps_high, mask)
    if beta > 0:
        require_finite_where(ref_logp, "ref_logp", mask)
        zero = torch.zeros_like(logp)
        kl = k3(torch.where(mask, logp, zero), torch.where(mask, ref_logp, zero))
        per_token = per_token + beta * kl
    per_token = torch.where(mask, per_token, torch.zeros_like(per_token))

    if loss_type == "grpo":
        return (per_token.sum(dim=1) / tokens_per_row.to(logp.dtype)).mean()
    if loss_type in ("dapo", "bnpo"):
        return per_token.sum() / tokens_per_row.sum().to(logp.dtype)
    return per_token.sum() / (B * (T if max_tokens is None else max_tokens))
