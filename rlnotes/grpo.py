"""Group relative policy optimisation and its variants.

GRPO (Shao et al. 2024, DeepSeekMath) replaces PPO's critic by a group baseline: for each prompt
it samples G completions from pi_theta_old and scores each against the others of its group.
Dr. GRPO (Liu et al. 2025) removes the two normalisations that bias it (the 1/|y_i| length
factor and the group std); DAPO (Yu et al. 2025, ByteDance Seed and Tsinghua AIR) averages over
tokens instead of sequences, clips asymmetrically ("clip-higher"), drops groups whose rewards are
all equal (dynamic sampling) and penalises overlong completions softly.

Layout: a batch holds B prompts times G completions, contiguous by prompt, so completion i
belongs to group ``i // G``. Token tensors are (B G, L), right-padded, with a 0/1 mask.
"""

from __future__ import annotations

import copy
import time

import torch

from rlnotes._validate import (
    require_binary,
    require_choice,
    require_float_tensor,
    require_in_range,
    require_int,
    require_ndim,
    require_tensor,
)
from rlnotes._losses import check_like, check_logp, check_mask, clipped_objective, k3, require_finite_where
from rlnotes.lm.evaluation import pass_at_1
from rlnotes.lm.passk import pass_at_k
from rlnotes.lm.generation import decode
from rlnotes.progress import progress

__all__ = ["dynamic_sampling_mask", "group_advantages", "grpo_loss", "overlong_penalty",
           "rloo_advantages", "process_advantages", "train_grpo", "grpo_sample", "grpo_update",
           "grpo_step_metrics",
           "group_forward", "group_decode", "pass_at_1", "pass_at_k", "clip_fraction", "tis_weights",
           "gradient_coefficients"]

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

    Defined in: GRPO, section From PPO to GRPO.
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

    Defined in: Dr. GRPO, DAPO and process supervision, section DAPO.
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

    A linear ramp from 0 to -1 over the last ``cache_len`` tokens of the budget. With
    ``cache_len = 0`` there is no ramp: the hard limit, 0 up to ``max_len`` and -1 beyond (as
    DAPO's formula reads with L_cache = 0, and as TRL allows).

    ==========  ================  ===================================================
    argument    shape             meaning
    ==========  ================  ===================================================
    lengths     any (...)         completion lengths |o| (integer or float, >= 0)
    max_len     int >= 1          L_max, the length budget
    cache_len   int, 0..max_len   L_cache, the length of the ramp (0: a hard limit)
    returns     lengths' shape    the penalty, in [-1, 0]; float (lengths' dtype if it
                                  is floating, else torch's default dtype)
    ==========  ================  ===================================================

    Defined in: Dr. GRPO, DAPO and process supervision, section DAPO.
    """
    require_tensor(lengths, "lengths")
    if lengths.dtype == torch.bool or lengths.dtype.is_complex:
        raise ValueError(f"lengths must hold real numbers, got dtype {lengths.dtype}")
    max_len = require_int(max_len, "max_len", minimum=1)
    cache_len = require_int(cache_len, "cache_len", minimum=0)
    if cache_len > max_len:
        raise ValueError(f"cache_len must be <= max_len ({max_len}), got {cache_len}")
    dtype = lengths.dtype if torch.is_floating_point(lengths) else torch.get_default_dtype()
    length = lengths.to(dtype)
    if not bool(torch.isfinite(length).all()):
        raise ValueError("lengths must contain only finite values")
    if bool((length < 0).any()):
        raise ValueError("lengths must be >= 0")
    if cache_len == 0:  # the hard limit: no ramp
        penalty = torch.zeros_like(length)
    else:
        ramp = ((max_len - cache_len) - length) / cache_len
        penalty = torch.clamp(ramp, max=0.0)  # 0 up to max_len - cache_len, then the ramp ...
    return torch.where(length > max_len, torch.full_like(penalty, -1.0), penalty)  # ... then -1


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, *, eps_low=0.2, eps_high=None,
              beta=0.0, loss_type="grpo", max_tokens=None, ratio_level="token"):
    r"""The GRPO policy loss and its Dr. GRPO and DAPO variants, to be minimised.

    Per token t of completion i, with the ratio ``rho_{i,t} = exp(logp - old_logp)``:

    .. math::

        f_{i,t} = -\min\left(\rho_{i,t} \hat A_i,\ \mathrm{clip}(\rho_{i,t},
                  1 - \epsilon_{low}, 1 + \epsilon_{high}) \hat A_i\right)
                  + \beta\, k_3(\pi_\theta, \pi_{ref})_{i,t}

    (k_3: :func:`rlnotes.kl.kl_k3`). The tokens are aggregated over the B G rows of a
    batch (B prompts, G completions each; |y_i| the selected tokens of row i) by
    ``loss_type``:

    - ``"grpo"`` (Shao et al. 2024): ``(1/(B G)) sum_i (1/|y_i|) sum_t f_{i,t}``; a
      token of a long completion weighs less (the length bias of Liu et al. 2025).
    - ``"dapo"`` = ``"bnpo"`` (Yu et al. 2025): ``sum_{i,t} f_{i,t} / sum_i |y_i|``.
    - ``"dr_grpo"`` (Liu et al. 2025): ``sum_{i,t} f_{i,t} / (B G * max_tokens)``.

    ``eps_high > eps_low`` is DAPO's clip-higher. ``ratio_level="sequence"`` is GSPO
    (Zheng et al. 2025): every token of completion i uses one ratio, the geometric mean
    of its token ratios, ``exp((1/|y_i|) sum_t (logp - old_logp))``, so the clip keeps
    or drops whole completions (GSPO clips it with ``eps_low=3e-4, eps_high=4e-4``).

    ===========  =====================  ==================================================
    argument     shape                  meaning
    ===========  =====================  ==================================================
    logp         (B G, L) float         ``log pi_theta(y_{i,t} | x, y_{i,<t})``, right-padded,
                                        differentiable
    old_logp     (B G, L) or None       ``log pi_theta_old`` of the same tokens (the policy
                                        that sampled the group); None means on-policy
                                        (``logp.detach()``)
    ref_logp     (B G, L) or None       ``log pi_ref``; may be None when ``beta == 0``
    advantages   (B G,) or (B G, L)     ``A_i`` of each completion (:func:`group_advantages`),
                                        or ``A_{i,t}`` of each token (:func:`process_advantages`)
    mask         (B G, L) 0/1 or bool   1 on completion tokens, 0 on padding
    eps_low      float in [0, 1)        lower clip: ratio >= 1 - eps_low
    eps_high     float >= 0 or None     upper clip: ratio <= 1 + eps_high; None = eps_low
    beta         float >= 0             weight of the k3 KL penalty
    loss_type    str                    "grpo", "dapo" (= "bnpo") or "dr_grpo"
    max_tokens   int >= 1 or None       dr_grpo's constant (the generation budget);
                                        None means L; ignored by the other loss types
    ratio_level  str                    "token" (GRPO, PPO) or "sequence" (GSPO)
    returns      () scalar              the loss
    ===========  =====================  ==================================================

    Conventions: gradients flow only through ``logp`` (old_logp, ref_logp and advantages are
    detached constants, cast to logp's dtype). Padded positions may hold any value (finite
    garbage, inf, NaN): they change neither the loss nor its gradient. With ``loss_type="grpo"``
    every row needs at least one selected token (``|y_i| = 0`` has no token mean) and
    ``ValueError`` names ``mask`` otherwise; ``"dapo"`` needs one selected token in the batch;
    ``"dr_grpo"`` accepts an all-zero mask (loss 0). With ``beta == 0`` the KL term is skipped
    entirely (ref_logp is not read).

    Defined in: GRPO, section The GRPO loss and its variants (``ratio_level``: Dr. GRPO,
    DAPO and process supervision, section RLOO and GSPO).
    """
    logp = check_logp(logp)
    require_ndim(logp, "logp", 2)
    BG, L = logp.shape
    mask = check_mask(mask, logp)
    old_logp = logp.detach() if old_logp is None else check_like(old_logp, "old_logp", logp, "logp")
    require_float_tensor(advantages, "advantages")
    if tuple(advantages.shape) not in ((BG,), (BG, L)):
        raise ValueError(
            f"advantages must have shape ({BG},) (one per row of logp) or ({BG}, {L}) (one per "
            f"token, process supervision), got {tuple(advantages.shape)}"
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
    ratio_level = require_choice(ratio_level, "ratio_level", ("token", "sequence"))
    if ratio_level == "sequence" and adv.ndim == 2:
        raise ValueError(f"advantages must have shape ({BG},) with ratio_level='sequence' (GSPO's ratio "
                         f"is one per completion), got {tuple(advantages.shape)}")
    if beta > 0:
        if ref_logp is None:
            raise ValueError("ref_logp must be given when beta > 0 (the KL penalty needs pi_ref)")
        ref_logp = check_like(ref_logp, "ref_logp", logp, "logp")
    elif ref_logp is not None:
        check_like(ref_logp, "ref_logp", logp, "logp")
    require_finite_where(logp, "logp", mask)
    require_finite_where(old_logp, "old_logp", mask)
    if adv.ndim == 2:  # per-token advantages: padding may hold anything
        adv = torch.where(mask, adv, torch.zeros_like(adv))
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

    adv_tokens = adv if adv.ndim == 2 else adv[:, None].expand(BG, L)
    if ratio_level == "sequence":  # GSPO: one ratio per completion (geometric mean)
        log_ratio = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
        n_row = tokens_per_row.clamp(min=1).to(logp.dtype)[:, None]
        log_s = log_ratio.sum(dim=1, keepdim=True) / n_row
        per_token = -clipped_objective(log_s.expand(BG, L), torch.zeros_like(logp),
                                       adv_tokens, eps_low, eps_high, mask)
    else:
        per_token = -clipped_objective(logp, old_logp, adv_tokens, eps_low, eps_high,
                                       mask)
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
    return per_token.sum() / (BG * (L if max_tokens is None else max_tokens))


def clip_fraction(logp, old_logp, advantages, mask, *, eps_low=0.2, eps_high=None):
    r"""The share of the selected tokens whose clip is *active*, so that their gradient
    is 0: :math:`\rho_t > 1 + \epsilon_\text{high}` with :math:`\hat A > 0`, or
    :math:`\rho_t < 1 - \epsilon_\text{low}` with :math:`\hat A < 0`, where
    :math:`\rho_t = \pi_\theta / \pi_{\theta_\text{old}}` (TRL logs the same counts as
    ``clip_ratio/high_mean`` and ``clip_ratio/low_mean``). At the first gradient step on
    a batch :math:`\rho_t = 1` and it is 0. Arguments as :func:`grpo_loss`'s
    (``advantages`` (B G,) or (B G, L)); returns a float.

    Defined in: GRPO, section When the clip acts.
    """
    logp = require_float_tensor(logp, "logp")
    require_ndim(logp, "logp", 2)
    logp = logp.detach()
    old_logp = check_like(old_logp, "old_logp", logp, "logp")
    mask = check_mask(mask, logp)
    if not bool(mask.any()):
        raise ValueError("mask must select at least one token")
    eps_low = require_in_range(eps_low, "eps_low", 0.0, 1.0, high_open=True)
    eps_high = eps_low if eps_high is None else require_in_range(eps_high, "eps_high", 0.0, float("inf"))
    adv = require_float_tensor(advantages, "advantages").detach()
    if adv.ndim == 1 and adv.shape[0] == logp.shape[0]:
        adv = adv[:, None].expand_as(logp)
    elif adv.shape != logp.shape:
        raise ValueError(f"advantages must have shape ({logp.shape[0]},) or {tuple(logp.shape)}, "
                         f"got {tuple(adv.shape)}")
    ratio = torch.exp(torch.where(mask, logp - old_logp, torch.zeros_like(logp)))
    active = ((ratio > 1 + eps_high) & (adv > 0)) | ((ratio < 1 - eps_low) & (adv < 0))
    return float((active & mask).sum()) / float(mask.sum())


def tis_weights(trainer_logp, sampler_logp, mask, cap=2.0):
    r"""Truncated importance sampling (Yao et al. 2025): each token's weight for the
    mismatch between the sampler that generated it and the trainer that scores it,

    .. math::  \rho^{tis}_{i,t} = \min\left(\frac{\pi_\text{trainer}(y_{i,t} \mid \cdot)}
               {\pi_\text{sampler}(y_{i,t} \mid \cdot)},\ C_{tis}\right),

    both under the same parameters theta_old. Multiplying each token's clipped policy term
    (:func:`grpo_loss`'s min(rho A, clip(rho) A)) by it corrects the expectation for the
    sampler's distribution; the cap C_tis bounds the variance that tokens the sampler
    rarely picks would add.

    ============  ============  ===================================================
    trainer_logp  (B G, L)      log pi_trainer of the sampled tokens (float)
    sampler_logp  (B G, L)      log pi_sampler of the same tokens (same shape)
    mask          (B G, L) 0/1  1 on completion tokens
    cap           float >= 1    C_tis, the truncation
    returns       (B G, L)      rho^tis, 0 on padding (no gradient: a constant weight)
    ============  ============  ===================================================

    Defined in: GRPO, section The training-inference mismatch.
    """
    trainer_logp = require_float_tensor(trainer_logp, "trainer_logp")
    require_ndim(trainer_logp, "trainer_logp", 2)
    sampler_logp = check_like(sampler_logp, "sampler_logp", trainer_logp, "trainer_logp")
    mask = check_mask(mask, trainer_logp)
    cap = require_in_range(cap, "cap", 1.0, float("inf"))
    require_finite_where(trainer_logp, "trainer_logp", mask)
    require_finite_where(sampler_logp, "sampler_logp", mask)
    zero = torch.zeros_like(trainer_logp)
    log_ratio = torch.where(mask, trainer_logp.detach() - sampler_logp.detach(), zero)
    return torch.where(mask, torch.clamp(torch.exp(log_ratio), max=cap), zero)


GC_METHODS = ("sft", "rft", "online_rft", "grpo")


def gradient_coefficients(method, rewards, group_size, mask, *, logp=None, ref_logp=None,
                          beta=0.0):
    r"""The gradient coefficient GC of DeepSeekMath's unified view (Shao et al. 2024,
    section 5.2.1): every method's gradient is

    .. math::  \mathbb{E}_{(x, y) \sim \mathcal D}\Big[\frac{1}{|y|} \sum_t
               GC(x, y, t)\, \nabla_\theta \log \pi_\theta(y_t \mid x, y_{<t})\Big]

    and the methods differ in the data source (demonstrations, samples of the start model,
    samples of the current policy), the reward function and GC. Here, per token:

    - ``"sft"``: 1 (on demonstrations);
    - ``"rft"``, ``"online_rft"``: the reward, 1 on correct completions and 0 elsewhere (on
      the start model's samples, or on the current policy's);
    - ``"grpo"``: ``A_i + beta (pi_ref / pi_theta - 1)``, the group advantage
      (:func:`group_advantages`) plus the gradient of the k3 penalty.

    ==========  ==============  ===================================================
    method      str             "sft", "rft", "online_rft" or "grpo"
    rewards     (B G,) float    r_i; 0/1 for "rft" and "online_rft"
    group_size  int G >= 1      completions per prompt (>= 2 for "grpo")
    mask        (B G, L) 0/1    1 on completion tokens
    logp        (B G, L)        log pi_theta (needed by "grpo" when beta > 0)
    ref_logp    (B G, L)        log pi_ref (needed by "grpo" when beta > 0)
    beta        float >= 0      the KL coefficient of "grpo"
    returns     (B G, L)        GC, 0 on padding
    ==========  ==============  ===================================================

    Defined in: GRPO, section DeepSeekMath's recipe and the unified view.
    """
    method = require_choice(method, "method", GC_METHODS)
    rewards = require_float_tensor(rewards, "rewards")
    require_ndim(rewards, "rewards", 1)
    require_tensor(mask, "mask")
    require_ndim(mask, "mask", 2)
    if mask.shape[0] != rewards.shape[0]:
        raise ValueError(f"mask must have {rewards.shape[0]} rows (one per reward), got {mask.shape[0]}")
    require_binary(mask, "mask")
    group_size = require_int(group_size, "group_size", minimum=1)
    if rewards.shape[0] % group_size:
        raise ValueError(f"group_size must divide the number of rewards {rewards.shape[0]}, "
                         f"got {group_size}")
    beta = require_in_range(beta, "beta", 0.0, float("inf"))
    m = mask.to(rewards.dtype)
    if method == "sft":
        return m.clone()
    if method in ("rft", "online_rft"):
        require_binary(rewards, "rewards")
        return rewards[:, None] * m
    if beta > 0 and (logp is None or ref_logp is None):
        raise ValueError("logp and ref_logp must be given for method='grpo' with beta > 0")
    gc = group_advantages(rewards, group_size)[:, None] * m
    if beta > 0:
        logp = check_like(logp, "logp", m, "mask")
        ref_logp = check_like(ref_logp, "ref_logp", m, "mask")
        ell = torch.where(mask.bool(), logp.detach() - ref_logp.detach(), torch.zeros_like(m))
        gc = gc + beta * (torch.exp(-ell) - 1) * m
    return gc


def rloo_advantages(rewards, group_size):
    r"""REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024): each completion's
    baseline is the mean reward of the *other* completions of its group.

    .. math::  A_i = r_i - \frac{1}{G - 1} \sum_{j \ne i} r_j = \frac{G}{G - 1} (r_i - \bar r)

    so RLOO's advantage is the group-mean advantage (``group_advantages(scale="none")``) times
    G / (G - 1): the same direction, a constant factor larger.

    ==========  ===========  ====================================================
    rewards     (B*G,)       rewards, groups of G contiguous
    group_size  int G >= 2   completions per prompt; must divide B*G
    returns     (B*G,)       A_i, in rewards' dtype (float)
    ==========  ===========  ====================================================

    Defined in: GRPO, section From PPO to GRPO.
    """
    grouped, group_size = _grouped_rewards(rewards, group_size, float_out=True)
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (leave-one-out needs another sample), got {group_size}")
    others = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    return (grouped - others).reshape(-1)


def process_advantages(step_rewards, step_ends, mask, group_size, eps=1e-4):
    r"""GRPO with process supervision (Shao et al. 2024, section 4.1.3): one reward per step.

    The rewards of every step of every completion of a group are normalised together,
    ``r~ = (r - mean(R_g)) / (std(R_g) + eps)`` with R_g all step rewards of group g, and a
    token's advantage is the sum of the normalised rewards of the steps that end at or after it:

    .. math::  \hat A_{i,t} = \sum_{j:\ \text{end}(i, j) \ge t} \tilde r_{i,j}

    with j a step of completion i (rows: B G completions, B prompts of G each; L the padded
    length; n_steps the most steps of a completion)

    ============  =================  ===================================================
    step_rewards  (B G, n_steps)     reward of step j of completion i (float)
    step_ends     (B G, n_steps)     index of the last token of step j (long, increasing in j)
    mask          (B G, L) 0/1       1 on the completion's tokens
    group_size    int G >= 1         completions per prompt; must divide the rows
    eps           float >= 0         added to the std
    returns       (B G, L)           A_{i,t}, 0 where mask is 0
    ============  =================  ===================================================

    Defined in: Dr. GRPO, DAPO and process supervision, section Outcome and process supervision.
    """
    require_float_tensor(step_rewards, "step_rewards")
    require_ndim(step_rewards, "step_rewards", 2)
    require_tensor(step_ends, "step_ends")
    if tuple(step_ends.shape) != tuple(step_rewards.shape) or step_ends.dtype.is_floating_point:
        raise ValueError(f"step_ends must be an integer tensor of step_rewards' shape "
                         f"{tuple(step_rewards.shape)}, got {tuple(step_ends.shape)} {step_ends.dtype}")
    require_tensor(mask, "mask")
    require_ndim(mask, "mask", 2)
    BG, n_steps = step_rewards.shape
    if BG == 0 or n_steps == 0:
        raise ValueError("step_rewards must not be empty (an empty group)")
    if mask.shape[0] != BG:
        raise ValueError(f"mask must have {BG} rows (one per completion), got {mask.shape[0]}")
    require_binary(mask, "mask")
    group_size = require_int(group_size, "group_size", minimum=1)
    if BG % group_size:
        raise ValueError(f"group_size must divide the number of completions {BG}, got {group_size}")
    eps = require_in_range(eps, "eps", 0.0, float("inf"))
    if not bool(torch.isfinite(step_rewards).all()):
        raise ValueError("step_rewards must contain only finite values")
    grouped = step_rewards.reshape(BG // group_size, group_size * n_steps)
    if group_size * n_steps < 2:
        raise ValueError("group_size * n_steps must be >= 2 (the std of one reward is undefined)")
    norm = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + eps)
    norm = norm.reshape(BG, n_steps)
    L = mask.shape[1]
    t = torch.arange(L, device=mask.device)
    counts = (step_ends.to(mask.device)[:, :, None] >= t[None, None, :]).to(norm.dtype)  # (BG, n_steps, L)
    adv = (norm[:, :, None] * counts).sum(dim=1)
    return adv * mask.to(adv.dtype)


# --- training -------------------------------------------------------------------------------


def group_forward(model, prompts, completions, group_size, *, temperature=1.0):
    r"""Teacher-forced log-probs of ``G`` completions per prompt, computing each prompt once.

    The G completions of a group share their prompt, so its keys and values (and the logits at
    its last position, which score the first completion token) are computed once per group and
    repeated G times, instead of once per completion as
    :func:`rlnotes.lm.generation.completion_forward` does; and identical completions of a group
    are computed once and indexed. Same numbers (up to float rounding), same gradients, and
    less than half the token positions on the addition task (7 prompt tokens, 4 answer tokens,
    G = 8: 2.6 times fewer before the identical completions are merged).

    ============  ================  ======================================================
    model         TinyGPT           the policy
    prompts       list of B lists   one prompt per group (token ids; lengths may differ)
    completions   (B*G, L) long     the completions, groups contiguous, right-padded
    group_size    int G >= 1        completions per prompt
    returns       logp (B*G, L)     log pi_theta(y_t | x, y_<t) under logits / temperature
                                    (not masked: multiply by the mask)
                  hidden (B*G, L, W)  final hidden state at the position predicting y_t
    ============  ================  ======================================================

    Defined in: GRPO, section Training that works.
    """
    from rlnotes.lm.generation import gather_logprobs, left_pad

    group_size = require_int(group_size, "group_size", minimum=1)
    if not isinstance(prompts, (list, tuple)) or len(prompts) == 0:
        raise ValueError("prompts must be a non-empty list of token-id lists (one per group)")
    require_tensor(completions, "completions")
    require_ndim(completions, "completions", 2)
    N, L = completions.shape
    if N != len(prompts) * group_size or L == 0:
        raise ValueError(f"completions must have shape ({len(prompts) * group_size}, L >= 1) "
                         f"(group_size rows per prompt), got {tuple(completions.shape)}")
    G, device = group_size, completions.device
    tokens, valid, positions = left_pad(prompts, device)
    B, P = tokens.shape
    if P + L - 1 > model.max_len:
        raise ValueError(f"completions: prompt + completion exceed the model's max_len={model.max_len}")
    W = model.width
    # the identical completions of a group (a sharpened policy samples many) have identical
    # log-probs: compute each distinct (prompt, completion) once, then index; gradients add up
    group = torch.arange(N, device=device) // G
    distinct, inverse = torch.unique(torch.cat([group[:, None], completions], dim=1), dim=0,
                                     return_inverse=True)
    g_u, comp_u = distinct[:, 0], distinct[:, 1:]
    U = comp_u.shape[0]
    ar_p = torch.arange(P, device=device)
    allowed_p = ((ar_p[None, :] <= ar_p[:, None])[None, None] & valid[:, None, None, :]) \
        | torch.eye(P, dtype=torch.bool, device=device)[None, None]
    x = model.tok_emb(tokens) + model.pos_emb(positions)  # (B, P, W)
    has_c = L > 1
    if has_c:  # completion tokens 0..L-2 are inputs; each sees the prompt's real tokens and its past
        ar_c = torch.arange(L - 1, device=device)
        causal = (ar_c[None, :] <= ar_c[:, None]).expand(U, 1, L - 1, L - 1)
        seen_p = valid[g_u][:, None, None, :].expand(U, 1, L - 1, P)
        allowed_c = torch.cat([seen_p, causal], dim=3)
        pos_c = (positions[:, -1:] + 1 + ar_c)[g_u]
        y = model.tok_emb(comp_u[:, :-1]) + model.pos_emb(pos_c)  # (U, L-1, W)

    def heads(z, n, t, attn):
        return z.view(n, t, attn.n_heads, attn.head_dim).transpose(1, 2)

    # every token-wise layer (layer norms, qkv, projection, MLP) runs on the prompt rows and
    # the completion rows at once, (B P + U (L-1), W); only the attention tells them apart
    F, BP = torch.nn.functional, B * P
    h = torch.cat([x.reshape(BP, W), y.reshape(-1, W)]) if has_c else x.reshape(BP, W)
    for block in model.blocks:
        attn = block.attn
        qkv = attn.qkv(block.ln1(h))
        q, k, v = (heads(z, B, P, attn) for z in qkv[:BP].view(B, P, 3 * W).split(W, dim=2))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed_p)
        a = a.transpose(1, 2).reshape(BP, W)
        if has_c:
            qc, kc, vc = (heads(z, U, L - 1, attn)
                          for z in qkv[BP:].view(U, L - 1, 3 * W).split(W, dim=2))
            K = torch.cat([k[g_u], kc], dim=2)
            V = torch.cat([v[g_u], vc], dim=2)
            ac = F.scaled_dot_product_attention(qc, K, V, attn_mask=allowed_c)
            a = torch.cat([a, ac.transpose(1, 2).reshape(U * (L - 1), W)])
        h = h + attn.proj(a)
        h = h + block.mlp(block.ln2(h))
    x = h[:BP].view(B, P, W)
    hidden = model.ln_f(x[:, -1:])[g_u]  # predicts completion token 0
    if has_c:
        hidden = torch.cat([hidden, model.ln_f(h[BP:].view(U, L - 1, W))], dim=1)
    logits = model.head(hidden)
    return gather_logprobs(logits / temperature, comp_u)[inverse], hidden[inverse]




@torch.no_grad()
def group_decode(model, prompts, group_size, max_new_tokens, *, temperature=1.0, eos_id=None,
                 generator=None):
    """``decode(model, [x for x in prompts for _ in range(group_size)], max_new_tokens, ...)``
    with each distinct prefix computed once: the forward passes run on the B prompts, then on
    the distinct (prompt, tokens so far) of the B G rows, whose logits and keys and values the
    rows that share them index (as :func:`group_forward` shares them when scoring; a sharpened
    policy samples the same few completions of a prompt). The uniforms are drawn as ``decode``
    draws them (one (B G, 1) batch a token), so the same generator gives the same completions;
    the log-probs agree to float rounding (``tests/unit/test_grpo_fast_path.py`` compares
    them). Returns ``(completions, logp, mask)`` of B G rows, groups contiguous, as ``decode``.

    Defined in: GRPO, section Training that works.
    """
    from rlnotes.lm.generation import _check_decode_args, inverse_cdf, left_pad

    prompts, max_new_tokens, temperature, eos_id = _check_decode_args(
        model, prompts, max_new_tokens, temperature, eos_id, generator)
    G = require_int(group_size, "group_size", minimum=1)
    device = next(model.parameters()).device
    tokens, valid, positions = left_pad(prompts, device)
    B, P = tokens.shape
    if P + max_new_tokens - 1 > model.max_len:
        raise ValueError(f"max_new_tokens: the longest prompt ({P}) plus {max_new_tokens} new tokens "
                         f"exceeds the model's max_len={model.max_len} (+1 for the last token)")
    cache = model.new_cache(B, P + max_new_tokens)
    logits_u = model(tokens, positions=positions, key_valid=valid, cache=cache)[:, -1]
    # The forward passes run on the distinct prefixes only: row_u maps each of the N = B G rows
    # to its prefix (prompt and tokens so far), and identical prefixes share their logits and
    # keys and values. At the start the prefixes are the B prompts; a sharpened policy keeps
    # them few.
    N = B * G
    row_u = torch.arange(N, device=device) // G
    grp_u = torch.arange(B, device=device)  # the prompt of each distinct prefix
    key_valid = torch.cat([valid, torch.ones((B, max_new_tokens), dtype=torch.bool,
                                             device=device)], 1)
    last_pos = positions[:, -1]
    out = torch.zeros((N, max_new_tokens), dtype=torch.long, device=device)
    logp = torch.zeros((N, max_new_tokens), dtype=torch.float32, device=device)
    mask = torch.zeros((N, max_new_tokens), dtype=torch.bool, device=device)
    alive = torch.ones(N, dtype=torch.bool, device=device)
    fill = torch.full((N,), eos_id if eos_id is not None else 0, dtype=torch.long, device=device)
    u_device = generator.device if generator is not None else "cpu"
    L = max_new_tokens
    for t in range(max_new_tokens):  # decode's sampling loop, on the N rows
        logp_all = torch.log_softmax(logits_u.float() / temperature, dim=-1)[row_u]
        u = torch.rand((N, 1), generator=generator, device=u_device).to(device)
        tok = inverse_cdf(logp_all.exp(), u)
        lp = logp_all.gather(-1, tok[:, None]).squeeze(-1)
        out[:, t] = torch.where(alive, tok, fill)
        logp[:, t] = torch.where(alive, lp, 0.0)
        mask[:, t] = alive
        if eos_id is not None:
            alive &= tok != eos_id
            if not bool(alive.any()):
                L = t + 1
                break
        if t == max_new_tokens - 1:
            break
        prefix, row_u = torch.unique(torch.stack([row_u, out[:, t]], 1), dim=0,
                                     return_inverse=True)
        parent, grp_u = prefix[:, 0], grp_u[prefix[:, 0]]
        cache.k, cache.v = cache.k[:, parent], cache.v[:, parent]
        logits_u = model(prefix[:, 1:], positions=(last_pos[grp_u] + t + 1)[:, None],
                         key_valid=key_valid[grp_u], cache=cache)[:, -1]
    return out[:, :L], logp[:, :L], mask[:, :L].long()


def _entropy_of(model, hidden, mask, temperature):
    """Mean per-token entropy at the completion's tokens (no gradient) of ``model.head`` applied
    to ``hidden``. train_grpo passes the hidden states of the last forward pass and the head as it
    is after the optimiser step, so the figure mixes the policies before and after one step (a
    small difference at these learning rates; recorded benchmark tables use it as it is)."""
    with torch.no_grad():
        logits = model.head(hidden.detach()) / temperature
        logq = torch.log_softmax(logits.float(), dim=-1)
        ent = -(logq.exp() * logq).sum(-1)
        m = mask.to(ent.dtype)
        return float((ent * m).sum() / m.sum().clamp(min=1))


def grpo_step_metrics(rewards, correct, lengths, group_size):
    """Per-step statistics of a batch of groups: mean reward, accuracy, mean length, the mean
    length of correct and of incorrect completions (NaN when there are none) and the fraction
    of groups whose rewards are all equal.

    Defined in: GRPO, section Training that works.
    """
    keep = dynamic_sampling_mask(rewards, group_size)
    lengths = lengths.to(torch.float64)
    c = correct.bool()
    nan = float("nan")
    return dict(
        reward=float(rewards.mean()),
        accuracy=float(c.double().mean()),
        length=float(lengths.mean()),
        len_correct=float(lengths[c].mean()) if bool(c.any()) else nan,
        len_wrong=float(lengths[~c].mean()) if bool((~c).any()) else nan,
        zero_var=1.0 - float(keep.view(-1, group_size)[:, 0].double().mean()),
    )


def train_grpo(model, task, steps, *, n_prompts=16, group_size=8, lr=2e-4, warmup=20, cosine=False,
               beta=0.04,
               eps_low=0.2, eps_high=None, loss_type="grpo", scale="group", epochs=1,
               dynamic_sampling=False, oversample=2, overlong=None, temperature=1.0,
               grad_clip=1.0, supervision="outcome", eval_every=10, eval_split="test",
               eval_samples=1, eval_greedy=True, eval_curve_samples=None, metrics=None, seed=0,
               callback=None):
    r"""Train ``model`` on a verifiable ``task`` with GRPO (or Dr. GRPO, or DAPO); returns
    ``(policy, history)``, ``policy`` a trained copy (``model`` itself is left unchanged and
    serves as pi_ref).

    One step: sample ``n_prompts`` training prompts, sample a group of ``group_size``
    completions of each from pi_theta_old (the current policy, before this step's update) in
    one batched generation with the KV cache, score them with the task's verifiable reward,
    compute group advantages, then ``epochs`` gradient steps on :func:`grpo_loss` (one
    teacher-forced forward and backward each; pi_theta_old's log-probs come from the sampler).

    ================  ==========================================================================
    model             the starting policy (a TinyGPT, usually the SFT model); also pi_ref
    task              a verifiable task (``sample_prompts``, ``reward``, ``max_new_tokens``)
    steps             number of GRPO steps (each: one batch of groups)
    n_prompts         prompts per step (B); the batch holds B * G completions
    group_size        completions per prompt (G >= 2)
    lr                Adam's learning rate, reached after a linear warm-up
    warmup            warm-up steps (Adam's first steps move every weight by about lr, whatever
                      the gradient's size: a noisy policy gradient needs them small)
    cosine            after the warm-up, decay the learning rate to lr / 10 along a cosine
                      (``rlnotes.lm.sft.lr_schedule``) instead of keeping it constant
    beta              weight of the k3 KL penalty to pi_ref in the loss (0: no reference pass)
    eps_low           lower clip of the ratio (1 - eps_low)
    eps_high          upper clip (1 + eps_high); None = eps_low; DAPO's clip-higher: 0.28
    loss_type         "grpo", "dapo" (token-level) or "dr_grpo", see :func:`grpo_loss`
    scale             advantage denominator: "group" (GRPO), "batch", "none" (Dr. GRPO)
    epochs            gradient steps per batch (mu); > 1 makes the ratio and the clip matter
    dynamic_sampling  DAPO: sample ``oversample * n_prompts`` groups and train on (up to)
                      ``n_prompts`` whose rewards are not all equal
    oversample        how many times more groups to sample with dynamic sampling (>= 1)
    overlong          None or ``(max_len, cache_len)``: add :func:`overlong_penalty` of the
                      completion length (EOS included) to the reward
    temperature       sampling temperature (the ratio and KL use the same logits / tau)
    grad_clip         gradient norm clip (None: none)
    supervision       "outcome": one advantage per completion (:func:`group_advantages`);
                      "process": one per token from the task's ``step_rewards``
                      (:func:`process_advantages`; ``scale`` is then not used)
    eval_every        held-out pass@1 and greedy accuracy every this many steps, and at the end
    eval_split        the split it is measured on
    eval_samples      sampled completions per held-out prompt for pass@1 (more: less noise)
    eval_greedy       also measure greedy accuracy at each evaluation (False: NaN, saves time)
    eval_curve_samples  None: every evaluation as above; an int: the evaluations between the
                      first and the last use this many samples a prompt, drawn from a
                      generator of their own, so the first and last are those of a run that
                      evaluates only at the start and the end (a cheaper curve)
    metrics           None or a dict ``{name: f}`` of extra per-step statistics of the samples:
                      ``f(prompts, completions, mask)`` returns a float (NaN allowed), recorded
                      under ``history[name]`` (names must not clash with the keys below)
    seed              sampling of prompts and completions
    callback          ``callback(step, policy, history)`` after each step; True stops training
    ================  ==========================================================================

    ``history`` holds one value per step for ``reward`` (the mean reward trained on, the
    overlong penalty included), ``accuracy`` (of the samples), ``length``, ``len_correct``,
    ``len_wrong``, ``zero_var`` (fraction of sampled groups with all-equal rewards), ``entropy``
    (per token; see ``_entropy_of`` for which policy it is), ``kl`` (k3 per token, to pi_ref;
    NaN at beta = 0, which makes no reference pass), ``loss``, ``gen_s`` and ``update_s``
    (wall seconds), ``gen_cpu_s`` and ``update_cpu_s`` (CPU seconds of this process); ``eval_step``, ``pass1`` (:func:`pass_at_1`) and ``greedy`` (greedy exact-match
    accuracy) hold the held-out evaluations (step 0 is the start); each of ``metrics`` one value
    per step, computed on all the step's samples (before dynamic sampling's selection).

    Defined in: GRPO, section Training that works.
    """
    from rlnotes.lm.sft import accuracy, freeze, lr_schedule, single_thread

    steps = require_int(steps, "steps", minimum=1)
    n_prompts = require_int(n_prompts, "n_prompts", minimum=1)
    group_size = require_int(group_size, "group_size", minimum=2)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    warmup = require_int(warmup, "warmup", minimum=0)
    epochs = require_int(epochs, "epochs", minimum=1)
    oversample = require_int(oversample, "oversample", minimum=1)
    eval_every = require_int(eval_every, "eval_every", minimum=1)
    eval_samples = require_int(eval_samples, "eval_samples", minimum=1)
    if eval_curve_samples is not None:
        eval_curve_samples = require_int(eval_curve_samples, "eval_curve_samples", minimum=1)
    beta = require_in_range(beta, "beta", 0.0, float("inf"))
    require_choice(loss_type, "loss_type", LOSS_TYPES)
    require_choice(scale, "scale", SCALES)
    supervision = require_choice(supervision, "supervision", ("outcome", "process"))
    if supervision == "process" and not hasattr(task, "step_rewards"):
        raise ValueError("task must have step_rewards(prompts, completions, mask) with "
                         "supervision='process'")
    temperature = require_in_range(temperature, "temperature", 0.0, float("inf"), low_open=True)
    if overlong is not None:
        if not isinstance(overlong, (tuple, list)) or len(overlong) != 2:
            raise ValueError(f"overlong must be None or a pair (max_len, cache_len), got {overlong!r}")
        overlong_penalty(torch.zeros(1), *overlong)  # validates max_len and cache_len
    if grad_clip is not None:
        grad_clip = require_in_range(grad_clip, "grad_clip", 0.0, float("inf"), low_open=True)
    if hasattr(task, "pairs") and len(task.pairs("train")) == 0:
        raise ValueError("task must have training prompts, got an empty prompt set")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(require_int(seed, "seed", minimum=0))
    hist = {k: [] for k in ("reward", "accuracy", "length", "len_correct", "len_wrong", "zero_var",
                            "entropy", "kl", "loss", "gen_s", "update_s", "gen_cpu_s", "update_cpu_s", "eval_step", "pass1",
                            "greedy")}
    metrics = {} if metrics is None else metrics
    if not isinstance(metrics, dict) or not all(isinstance(k, str) and callable(f) for k, f in metrics.items()):
        raise ValueError(f"metrics must be None or a dict of name -> callable, got {metrics!r}")
    clash = sorted(set(metrics) & set(hist))
    if clash:
        raise ValueError(f"metrics must not reuse history's keys, got {clash}")
    hist.update({k: [] for k in metrics})
    with single_thread(device):
        ref = freeze(model)
        policy = copy.deepcopy(model).train()
        for p in policy.parameters():
            p.requires_grad_(True)
        # fused: Adam's element-wise update in one pass over the weights (the same rule; it
        # rounds differently from the unfused loop by about one float32 ulp)
        opt = torch.optim.Adam(policy.parameters(), lr=lr, fused=True)

        eval_gen = torch.Generator().manual_seed(10_000 + seed)
        curve_gen = torch.Generator().manual_seed(20_000 + seed)

        def evaluate(step):
            policy.eval()
            hist["eval_step"].append(step)
            curve = eval_curve_samples is not None and 0 < step < steps
            hist["pass1"].append(pass_at_1(policy, task, eval_split, temperature=temperature,
                                           generator=curve_gen if curve else eval_gen,
                                           samples=eval_curve_samples if curve else eval_samples))
            hist["greedy"].append(accuracy(policy, task, eval_split) if eval_greedy else float("nan"))
            policy.train()

        evaluate(0)
        for step in progress(range(1, steps + 1), desc=f"GRPO ({loss_type})"):
            t0, c0 = time.perf_counter(), time.process_time()
            for group in opt.param_groups:
                if cosine:
                    group["lr"] = lr_schedule(step - 1, steps, lr, warmup)
                else:
                    group["lr"] = lr * min(1.0, step / warmup) if warmup else lr
            samples, batch = grpo_sample(policy, task, n_prompts, group_size, gen,
                                         temperature=temperature, overlong=overlong,
                                         dynamic_sampling=dynamic_sampling,
                                         oversample=oversample, supervision=supervision,
                                         scale=scale)
            t1, c1 = time.perf_counter(), time.process_time()
            loss, kl, hidden = grpo_update(policy, ref, opt, batch, group_size, epochs=epochs,
                                           eps_low=eps_low, eps_high=eps_high, beta=beta,
                                           loss_type=loss_type, temperature=temperature,
                                           grad_clip=grad_clip, max_tokens=task.max_new_tokens)
            t2, c2 = time.perf_counter(), time.process_time()
            stats = grpo_step_metrics(samples["rewards"], samples["correct"],
                                      samples["mask"].sum(1), group_size)
            for k, f in metrics.items():
                value = f(samples["prompts"], samples["comp"], samples["mask"])
                try:
                    stats[k] = float(value)
                except (TypeError, ValueError, RuntimeError):
                    raise ValueError(f"metrics[{k!r}] must return a number (or a one-element "
                                     f"tensor), got {value!r}") from None
            stats.update(entropy=_entropy_of(policy, hidden, batch["mask"].bool(), temperature),
                         kl=kl, loss=float(loss.detach()), gen_s=t1 - t0, update_s=t2 - t1,
                         gen_cpu_s=c1 - c0, update_cpu_s=c2 - c1)
            for k, v in stats.items():
                hist[k].append(v)
            if step % eval_every == 0 or step == steps:
                evaluate(step)
            if callback is not None and callback(step, policy, hist):
                break
    policy.eval()
    return policy, hist


def grpo_sample(policy, task, n_prompts, group_size, generator, *, temperature, overlong,
                dynamic_sampling, oversample, supervision, scale):
    """GRPO's sampling half (with :func:`grpo_update`, the core of :func:`train_grpo`): B
    prompts, a group of G completions of each from pi_theta_old, their rewards and their
    advantages. Returns ``(samples, batch)``: every sampled group, and the B groups to
    train on.

    Defined in: GRPO, section Training that works.
    """
    n_groups = n_prompts * (oversample if dynamic_sampling else 1)
    uniq = task.sample_prompts(n_groups, generator)
    prompts = [x for x in uniq for _ in range(group_size)]  # groups contiguous
    with torch.no_grad():  # pi_theta_old samples the groups
        comp, old_logp, mask = group_decode(policy, uniq, group_size, task.max_new_tokens,
                                            temperature=temperature, generator=generator,
                                            eos_id=task.tokenizer.eos_id)
    comp, mask = comp.cpu(), mask.cpu()
    correct = task.reward(prompts, comp, mask)
    r = correct.clone()
    if overlong is not None:
        r = r + overlong_penalty(mask.sum(1), *overlong).to(r.dtype)
    groups = torch.arange(n_groups)
    if dynamic_sampling:  # keep the first n_prompts informative groups
        informative = dynamic_sampling_mask(r, group_size).view(-1, group_size)[:, 0]
        groups = torch.nonzero(informative).flatten()[:n_prompts]
        if len(groups) == 0:  # nothing informative: advantages 0, only a KL penalty acts
            groups = torch.arange(n_prompts)
    rows = (groups[:, None] * group_size + torch.arange(group_size)).flatten()
    dev = next(policy.parameters()).device
    comp_b, mask_b = comp[rows].to(dev), mask[rows].to(dev)
    if supervision == "process":  # per-token advantages from per-step rewards
        x_b = [prompts[i] for i in rows.tolist()]
        step_r, step_end = task.step_rewards(x_b, comp[rows], mask[rows])
        adv = process_advantages(step_r.to(dev), step_end.to(dev), mask_b, group_size)
    else:
        adv = group_advantages(r[rows].to(dev), group_size, scale=scale)
    samples = dict(prompts=prompts, comp=comp, mask=mask, correct=correct, rewards=r)
    batch = dict(prompts=[uniq[i] for i in groups.tolist()], comp=comp_b, mask=mask_b,
                 old_logp=old_logp[rows.to(old_logp.device)].to(dev), adv=adv)
    return samples, batch


def grpo_update(policy, ref, opt, batch, group_size, *, epochs, eps_low, eps_high, beta,
                loss_type, temperature, grad_clip, max_tokens):
    """GRPO's update half (the core of :func:`train_grpo`): pi_ref's log-probabilities
    of the batch (when beta > 0), then ``epochs`` gradient steps on :func:`grpo_loss`.
    Returns the last loss, the k3 KL to pi_ref per token (NaN at beta = 0: no reference
    pass) and the policy's hidden states (for the entropy).

    Defined in: GRPO, section Training that works.
    """
    x, y, m = batch["prompts"], batch["comp"], batch["mask"]
    ref_logp = None  # at beta = 0 nothing reads pi_ref: no reference pass (TRL's default)
    if beta > 0:
        with torch.no_grad():  # pi_ref's log-probs: the penalty, and the KL
            ref_logp, _ = group_forward(ref, x, y, group_size, temperature=temperature)
    for _ in range(epochs):
        logp, hidden = group_forward(policy, x, y, group_size, temperature=temperature)
        loss = grpo_loss(logp, batch["old_logp"], ref_logp, batch["adv"], m,
                         eps_low=eps_low, eps_high=eps_high, beta=beta,
                         loss_type=loss_type, max_tokens=max_tokens)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), grad_clip)
        opt.step()
    if ref_logp is None:
        return loss, float("nan"), hidden
    m = m.bool()
    with torch.no_grad():
        kl = k3(torch.where(m, logp.detach(), 0.0), torch.where(m, ref_logp, 0.0))
    return loss, float((kl * m).sum() / m.sum()), hidden
