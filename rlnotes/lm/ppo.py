"""PPO for language models (Ziegler et al. 2019; Stiennon et al. 2020; Ouyang et al. 2022), built
from the book's tested pieces: ``rlnotes.returns.gae`` over tokens, ``rlnotes.ppo.ppo_clip_loss``.

A completion is an episode of the token-level MDP: the state is the prompt and the tokens so
far, the action the next token, the episode ends at EOS. The reward of token t is the KL penalty
-beta (log pi_theta - log pi_ref) and, on the last token only, the reward model's score.

Defined in: Reinforcement learning from human feedback, section PPO for language models.
"""

from __future__ import annotations

import torch

from rlnotes._validate import require_float_tensor, require_in_range, require_int, require_real
from rlnotes.device import get_device
from rlnotes.lm.generation import completion_forward, generate, last_index
from rlnotes.lm.heads import PolicyWithValue
from rlnotes.lm.sft import freeze, single_thread
from rlnotes.ppo import ppo_clip_loss
from rlnotes.progress import progress
from rlnotes.returns import gae

__all__ = ["kl_penalised_rewards", "token_gae", "whiten", "train_ppo"]


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
               + [t = T - 1]\, R_\phi(x, y)

    ========  ===========  =======================================================
    score     (B,)         reward model's score R_phi(x, y) of each completion
    logp      (B, L)       log pi_theta of the sampled tokens (the sampling policy)
    ref_logp  (B, L)       log pi_ref of the same tokens
    mask      (B, L) 0/1   1 on the completion's tokens; the last 1 is T - 1
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
               A_t = \delta_t + \gamma \lambda A_{t+1}, \quad V(s_T) = 0 \text{ (EOS ends it)}

    ========  ============  ====================================================
    rewards   (B, L)        per-token rewards (``kl_penalised_rewards``)
    values    (B, L)        the critic's V(s_t)
    mask      (B, L) 0/1    1 on the completion's tokens
    lam       float [0, 1]  GAE's lambda
    gamma     float [0, 1]  discount over tokens (1 in RLHF)
    returns   (adv, ret)    (B, L) each, 0 where mask is 0; ret = adv + values is
                            the critic's regression target
    ========  ============  ====================================================

    ``rewards - values`` is not this (seed error 11): it ignores every later reward, and with
    the score on the last token only, every earlier token would get no credit for it.

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """
    _check_token_tensors(mask, rewards=rewards, values=values)
    m = mask.to(rewards.dtype)
    B = mask.shape[0]
    dones = torch.zeros_like(m)
    dones[torch.arange(B, device=mask.device), last_index(mask)] = 1.0  # the episode ends at T - 1
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


def train_ppo(sft, task, reward_fn, *, iterations=60, batch_size=64, beta=0.05, lr=1e-3,
              lam=0.95, gamma=1.0, clip_eps=0.2, vf_coef=0.5, epochs=2, minibatches=1,
              whiten_advantages=True, advantage="gae", critic_target="returns", seed=0,
              gold_fn=None, device=None, callback=None, detach_value=True):
    r"""PPO for language models: returns ``(agent, history)``; ``agent.policy`` is the tuned
    TinyGPT, ``agent.value_head`` its critic (one backbone, see :class:`PolicyWithValue`).

    ===================  ==================================================================
    sft                  the TinyGPT to start from; a frozen copy is pi_ref
    task                 gives prompts (``sample_prompts``), EOS and ``max_new_tokens``
    reward_fn            ``reward_fn(prompts, completions, mask) -> (B,)``: the score to
                         maximise (a reward model, or a task's gold reward)
    iterations           rounds of sample-then-update
    batch_size           prompts per round (one completion each)
    beta                 KL coefficient of the per-token penalty
    lr                   Adam's learning rate (policy and critic)
    lam, gamma           GAE over tokens (gamma = 1: no discount inside a completion)
    clip_eps             PPO's clip range
    vf_coef              weight of the critic's squared error in the loss
    epochs, minibatches  passes over each round's samples, and minibatches per pass
    whiten_advantages    normalise advantages to mean 0, std 1 over the batch's tokens
    advantage            "gae" (correct), or "reward_minus_value" (seed 004's bug)
    critic_target        "returns" (correct: GAE's returns), or "rewards" (seed 004's bug)
    seed                 sampling and minibatch order
    gold_fn              optional: another reward (the hidden gold one) logged each round
    callback             ``callback(iteration, agent, history)``; True stops training
    detach_value         True (default): the critic reads the policy's features without
                         training them; False: its error trains the shared backbone too
    ===================  ==================================================================

    Why the critic does not train the backbone: its targets, the returns, carry the penalty
    -beta sum_t log(pi_theta / pi_ref), so its squared error grows like beta^2 when the policy
    drifts; through a shared backbone (and one clip of the total gradient norm) that error
    then outweighs the policy's gradient and moves the policy further, a loop that made
    2 of 3 runs at beta = 0.5 diverge (KL above 60 nats) when the critic shared the backbone.

    ``history`` holds per round: ``score`` (mean of reward_fn), ``gold`` (mean of gold_fn),
    ``kl`` (mean over completions of sum_t log pi_theta - log pi_ref, at sampling time),
    ``length`` (mean tokens), ``clipfrac``, ``value_loss``.

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """
    iterations = require_int(iterations, "iterations", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    beta = require_real(beta, "beta")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    lam = require_in_range(lam, "lam", 0.0, 1.0)
    gamma = require_in_range(gamma, "gamma", 0.0, 1.0)
    epochs = require_int(epochs, "epochs", minimum=1)
    minibatches = require_int(minibatches, "minibatches", minimum=1)
    if minibatches > batch_size:
        raise ValueError(f"minibatches must be at most batch_size={batch_size}, got {minibatches}")
    if advantage not in ("gae", "reward_minus_value"):
        raise ValueError(f"advantage must be 'gae' or 'reward_minus_value', got {advantage!r}")
    if critic_target not in ("returns", "rewards"):
        raise ValueError(f"critic_target must be 'returns' or 'rewards', got {critic_target!r}")
    device = get_device() if device is None else torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    eos = task.tokenizer.eos_id
    history = {k: [] for k in ("score", "gold", "kl", "length", "clipfrac", "value_loss")}
    with single_thread(device):
        ref = freeze(sft).to(device)
        agent = PolicyWithValue(sft, detach_value=detach_value).to(device)
        opt = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
        for it in progress(range(iterations), desc="PPO"):
            # 1. Roll out: one completion per prompt from the current policy.
            prompts = task.sample_prompts(batch_size, gen)
            comp, _, mask = generate(agent.policy, prompts, task.max_new_tokens, eos_id=eos,
                                     generator=gen)
            m = mask.to(torch.float32)
            with torch.no_grad():
                old_logp, values = agent(prompts, comp)
                ref_logp, _ = completion_forward(ref, prompts, comp)
                score = torch.as_tensor(reward_fn(prompts, comp, mask), dtype=torch.float32).to(device)
            old_logp, ref_logp, values = old_logp * m, ref_logp * m, values * m
            # 2. Per-token rewards, advantages and the critic's targets.
            rewards = kl_penalised_rewards(score, old_logp, ref_logp, m, beta)
            if advantage == "gae":
                adv, ret = token_gae(rewards, values, m, lam, gamma)
            else:
                adv, ret = (rewards - values) * m, rewards
            if critic_target == "rewards":
                ret = rewards
            if whiten_advantages:
                adv = whiten(adv, m)
            # 3. Several epochs of minibatch updates on this batch.
            clipped, vlosses = [], []
            for _ in range(epochs):
                order = torch.randperm(batch_size, generator=gen).tolist()
                for mb in range(minibatches):
                    idx = order[mb * batch_size // minibatches:(mb + 1) * batch_size // minibatches]
                    mm = m[idx]
                    logp, v = agent([prompts[i] for i in idx], comp[idx])
                    pg_loss = ppo_clip_loss(logp, old_logp[idx], adv[idx], clip_eps, mask=mm)
                    v_loss = (((v - ret[idx]) ** 2) * mm).sum() / mm.sum()
                    loss = pg_loss + vf_coef * v_loss
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
                    opt.step()
                    with torch.no_grad():
                        ratio = torch.exp((logp - old_logp[idx]) * mm)
                        clipped.append(float((((ratio - 1).abs() > clip_eps).float() * mm).sum() / mm.sum()))
                        vlosses.append(v_loss.item())
            history["score"].append(float(score.mean()))
            if gold_fn is not None:
                history["gold"].append(float(torch.as_tensor(gold_fn(prompts, comp.cpu(), mask.cpu())).mean()))
            history["kl"].append(float((old_logp - ref_logp).sum(1).mean()))
            history["length"].append(float(m.sum(1).mean()))
            history["clipfrac"].append(sum(clipped) / len(clipped))
            history["value_loss"].append(sum(vlosses) / len(vlosses))
            if callback is not None and callback(it, agent, history):
                break
    return agent, history
