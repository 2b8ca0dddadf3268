"""The pieces of PPO for language models (Ziegler et al. 2019; Stiennon et al. 2020; Ouyang et al.
2022): the per-token KL-penalised rewards, GAE over tokens (``rlnotes.returns.gae``) and
whitening. The trainer that puts them together is the RLHF chapter's
:func:`rlnotes.rlhf_ppo.train_ppo`.

A completion is an episode of the token-level MDP: the state is the prompt and the tokens so
far, the action the next token, the episode ends at EOS. The reward of token t is the KL penalty
-beta (log pi_theta - log pi_ref) and, on the last token only, the reward model's score.

Defined in: Reinforcement learning from human feedback, section PPO for language models.
"""

from __future__ import annotations

import torch

from rlnotes._validate import require_float_tensor, require_real
from rlnotes.lm.generation import last_index
from rlnotes.returns import gae

__all__ = ["kl_penalised_rewards", "token_gae", "whiten"]


def _check_token_tensors(mask, **tensors):
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2:
        raise ValueError(f"mask must be a (B, L) tensor, got "
                         f"{tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__}")
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("mask must hold only 0 and 1")
    if bool((mask.sum(1) == 0).any()):
        raise ValueError("mask must have at least one token in every row")
    for name, x in tensors.items():
        require_float_tensor(x, name)
        if x.shape != mask.shape:
            raise ValueError(f"{name} must have mask's shape {tuple(mask.shape)}, got {tuple(x.shape)}")


def kl_penalised_rewards(score, logp, ref_logp, mask, beta):
    r"""Per-token rewards of RLHF: the KL penalty on every token, the score on the last one.

    .. math::  r_t = -\beta \left(\log \pi_\theta(y_t \mid s_t) - \log \pi_{ref}(y_t \mid s_t)\right)
               + [t = |y| - 1]\, r_\psi(x, y)

    ========  ===========  =======================================================
    score     (B,)         reward model's score r_psi(x, y) of each completion
    logp      (B, L)       log pi_theta of the sampled tokens (the sampling policy)
    ref_logp  (B, L)       log pi_ref of the same tokens
    mask      (B, L) 0/1   1 on the completion's tokens; the last 1 is |y| - 1
    beta      float >= 0   KL coefficient
    returns   (B, L)       r_t, 0 where mask is 0
    ========  ===========  =======================================================

    Summed over t, the penalty is -beta times the k1 estimate of KL(pi_theta || pi_ref) of the
    whole completion (``rlnotes.kl.kl_k1``, summed over tokens).

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """
    _check_token_tensors(mask, logp=logp, ref_logp=ref_logp)
    require_float_tensor(score, "score")
    if score.shape != mask.shape[:1]:
        raise ValueError(f"score must have shape ({mask.shape[0]},), one per completion, got {tuple(score.shape)}")
    beta = require_real(beta, "beta")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    m = mask.to(logp.dtype)
    rewards = -beta * (logp - ref_logp) * m
    B = mask.shape[0]
    bonus = torch.zeros_like(rewards)
    bonus[torch.arange(B, device=mask.device), last_index(mask)] = score.to(rewards.dtype)
    return rewards + bonus


def token_gae(rewards, values, mask, lam=0.95, gamma=1.0):
    r"""GAE over the tokens of right-padded completions, with ``rlnotes.returns.gae``.

    .. math::  \delta_t = r_t + \gamma V(s_{t+1}) - V(s_t), \quad
               A_t = \delta_t + \gamma \lambda A_{t+1}, \quad V(s_{|y|}) = 0 \text{ (EOS ends it)}

    ========  ============  ====================================================
    rewards   (B, L)        per-token rewards (``kl_penalised_rewards``)
    values    (B, L)        the critic's V(s_t)
    mask      (B, L) 0/1    1 on the completion's tokens
    lam       float [0, 1]  GAE's lambda
    gamma     float [0, 1]  discount over tokens (1 in RLHF)
    returns   (adv, ret)    (B, L) each, 0 where mask is 0; ret = adv + values is
                            the critic's regression target
    ========  ============  ====================================================

    ``rewards - values`` is not this (a common mistake): it ignores every later reward, and with
    the score on the last token only, every earlier token would get no credit for it.

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """
    _check_token_tensors(mask, rewards=rewards, values=values)
    m = mask.to(rewards.dtype)
    B = mask.shape[0]
    dones = torch.zeros_like(m)
    dones[torch.arange(B, device=mask.device), last_index(mask)] = 1.0  # the episode ends at |y| - 1
    adv, ret = gae((rewards * m).T, (values.to(rewards.dtype) * m).T, dones.T,
                   torch.zeros(B, dtype=rewards.dtype, device=rewards.device), gamma, lam)
    return adv.T * m, ret.T * m


def whiten(x, mask, shift_mean=True, eps=1e-8):
    """(x - mean) / std over the masked elements, 0 where mask is 0; with ``shift_mean=False``
    the mean is added back (only the spread is normalised).

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """
    require_float_tensor(x, "x")
    if not isinstance(mask, torch.Tensor) or mask.shape != x.shape:
        raise ValueError(f"mask must be a tensor of x's shape {tuple(x.shape)}")
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("mask must hold only 0 and 1")
    m = mask.to(x.dtype)
    n = m.sum().clamp(min=1)
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / n
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * m
