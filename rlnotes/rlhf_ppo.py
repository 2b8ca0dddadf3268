"""The RLHF chapter's trainer: PPO for language models (Ziegler et al. 2019; Stiennon et al. 2020;
Ouyang et al. 2022), built from the book's tested pieces: the token rewards, GAE over tokens
and whitening of the lab (:mod:`rlnotes.lm.ppo`) and ``rlnotes.ppo.ppo_clip_loss``.

A completion is an episode of the token-level MDP: the state is the prompt and the tokens so
far, the action the next token, the episode ends at EOS. The reward of token t is the KL penalty
-beta (log pi_theta - log pi_ref) and, on the last token only, the reward model's score.

Defined in: Reinforcement learning from human feedback, section PPO for language models.
"""

from __future__ import annotations

import torch

from rlnotes._validate import require_in_range, require_int, require_real
from rlnotes.device import get_device
from rlnotes.lm.generation import completion_forward, generate
from rlnotes.lm.heads import PolicyWithValue, PolicyWithValueModel, RewardModel
from rlnotes.lm.ppo import kl_penalised_rewards, token_gae, whiten
from rlnotes.lm.sft import freeze, single_thread
from rlnotes.ppo import ppo_clip_loss
from rlnotes.progress import progress

__all__ = ["train_ppo", "ppo_rlhf", "adaptive_kl_update", "explained_variance",
           "kl_penalised_rewards", "token_gae", "whiten"]


def adaptive_kl_update(beta, kl, kl_target, k_beta=0.1):
    r"""Ziegler et al.'s (2019) adaptive KL controller, one update: with the proportional error
    e = clip((KL - KL_target) / KL_target, -0.2, 0.2), the new coefficient is
    beta (1 + k_beta e). A KL above the target raises beta (a stronger pull to the reference),
    one below lowers it; the clip bounds each change to a factor 1 +- 0.2 k_beta. (TRL's
    ``AdaptiveKLController`` writes k_beta as ``n_steps / horizon``.)

    Defined in: Reinforcement learning from human feedback, section An adaptive KL coefficient.
    """
    beta = require_real(beta, "beta")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    kl = require_real(kl, "kl")
    kl_target = require_real(kl_target, "kl_target")
    if kl_target <= 0:
        raise ValueError(f"kl_target must be > 0, got {kl_target}")
    k_beta = require_in_range(k_beta, "k_beta", 0.0, 5.0, low_open=True)
    error = min(max((kl - kl_target) / kl_target, -0.2), 0.2)
    return beta * (1.0 + k_beta * error)


def train_ppo(sft, task, reward_fn, *, iterations=60, batch_size=64, beta=0.05, lr=1e-3,
              lam=0.95, gamma=1.0, clip_eps=0.2, vf_coef=0.5, epochs=2, minibatches=1,
              whiten_advantages=True, advantage="gae", critic_target="returns", seed=0,
              gold_fn=None, device=None, callback=None, detach_value=True, kl_target=None,
              k_beta=0.1, critic="head"):
    r"""PPO for language models: returns ``(agent, history)``; ``agent.policy`` is the tuned
    TinyGPT, ``agent.value_head`` its critic (one backbone, see :class:`PolicyWithValue`; or
    a separate value network, see ``critic``).

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
    advantage            "gae" (correct), or "reward_minus_value" (a known bug, kept to
                         show its effect: the per-token reward minus the value)
    critic_target        "returns" (correct: GAE's returns), or "rewards" (the same bug's
                         critic target)
    seed                 sampling and minibatch order
    gold_fn              optional: another reward (the hidden gold one) logged each round
    callback             ``callback(iteration, agent, history)``; True stops training
    detach_value         True (default): the critic reads the policy's features without
                         training them; False: its error trains the shared backbone too
    kl_target, k_beta    optional: adapt beta after each round towards a KL of kl_target
                         nats per completion (:func:`adaptive_kl_update`; beta is then the
                         starting coefficient and must be > 0)
    critic               "head" (default): a linear value head on the policy's features
                         (:class:`~rlnotes.lm.PolicyWithValue`); or a ``RewardModel``: a
                         separate value network initialised from it, as in Stiennon et al.
                         (:class:`~rlnotes.lm.PolicyWithValueModel`; its gradient is clipped
                         apart from the policy's, and ``detach_value`` must stay True)
    ===================  ==================================================================

    Why the critic does not train the backbone: its targets, the returns, carry the penalty
    -beta sum_t log(pi_theta / pi_ref), so its squared error grows like beta^2 when the policy
    drifts; through a shared backbone (and one clip of the total gradient norm) that error
    then outweighs the policy's gradient and moves the policy further, a loop that made
    2 of 3 runs at beta = 0.5 diverge (KL above 60 nats) when the critic shared the backbone.

    ``history`` holds per round: ``score`` (mean of reward_fn), ``gold`` (mean of gold_fn),
    ``kl`` (mean over completions of sum_t log pi_theta - log pi_ref, at sampling time),
    ``length`` (mean tokens), ``clipfrac``, ``value_loss``, ``beta`` (the coefficient used),
    ``explained_variance`` (of the critic's targets by its values at sampling time, over the
    batch's tokens: 1 - Var(targets - V) / Var(targets)).

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
    if kl_target is not None:
        if beta <= 0:
            raise ValueError(f"beta must be > 0 when kl_target is set (the starting coefficient), got {beta}")
        adaptive_kl_update(beta, kl_target, kl_target, k_beta)  # checks kl_target and k_beta
    if not (isinstance(critic, RewardModel) or (isinstance(critic, str) and critic == "head")):
        raise ValueError(f"critic must be 'head' or a RewardModel (the value network's start), "
                         f"got {critic!r}")
    if isinstance(critic, RewardModel) and critic.backbone.vocab_size != sft.vocab_size:
        raise ValueError(f"critic must read the policy's vocabulary of {sft.vocab_size} tokens, "
                         f"got a reward model of {critic.backbone.vocab_size}")
    if isinstance(critic, RewardModel) and detach_value is not True:
        raise ValueError("detach_value must be True with a RewardModel critic (it shares no "
                         f"parameter with the policy), got {detach_value!r}")
    device = get_device() if device is None else torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    history = {k: [] for k in ("score", "gold", "kl", "length", "clipfrac", "value_loss", "beta",
                               "explained_variance")}
    coef = [beta]  # the current KL coefficient (changed between rounds by the controller)
    with single_thread(device):
        ref = freeze(sft).to(device)
        if isinstance(critic, RewardModel):
            agent = PolicyWithValueModel(sft, critic).to(device)
        else:
            agent = PolicyWithValue(sft, detach_value=detach_value).to(device)
        opt = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
        rounds = ppo_rlhf(agent, ref, opt, task, reward_fn, iterations, gen,
                          batch_size=batch_size, beta=lambda: coef[0], lam=lam, gamma=gamma,
                          clip_eps=clip_eps, vf_coef=vf_coef, epochs=epochs,
                          minibatches=minibatches, whiten_advantages=whiten_advantages,
                          advantage=advantage, critic_target=critic_target)
        for it, r in enumerate(progress(rounds, total=iterations, desc="PPO")):
            history["score"].append(float(r["score"].mean()))
            if gold_fn is not None:
                gold = gold_fn(r["prompts"], r["comp"].cpu(), r["mask"].cpu())
                history["gold"].append(float(torch.as_tensor(gold).mean()))
            history["kl"].append(float((r["old_logp"] - r["ref_logp"]).sum(1).mean()))
            history["length"].append(float(r["m"].sum(1).mean()))
            history["clipfrac"].append(sum(r["clipped"]) / len(r["clipped"]))
            history["value_loss"].append(sum(r["vlosses"]) / len(r["vlosses"]))
            history["beta"].append(coef[0])
            history["explained_variance"].append(explained_variance(r["values"], r["ret"], r["m"]))
            if kl_target is not None:
                coef[0] = adaptive_kl_update(coef[0], history["kl"][-1], kl_target, k_beta)
            if callback is not None and callback(it, agent, history):
                break
    return agent, history


def ppo_rlhf(agent, ref, opt, task, reward_fn, iterations, generator, *, batch_size, beta,
             lam, gamma, clip_eps, vf_coef, epochs, minibatches, whiten_advantages,
             advantage, critic_target):
    """PPO for language models, the chapter's pseudocode (the core of :func:`train_ppo`):
    each round samples one completion per prompt, turns the reward model's score and the
    per-token KL penalty into token rewards and GAE advantages, and takes ``epochs``
    passes of minibatch steps on the clipped loss plus the critic's. Yields each round's
    samples and statistics. ``beta`` is the KL coefficient, or a function returning the
    current one (an adaptive controller changes it between rounds).

    Defined in: Reinforcement learning from human feedback, section PPO for language
    models.
    """
    for _ in range(iterations):
        # 1. Roll out: one completion per prompt from the current policy.
        x = task.sample_prompts(batch_size, generator)
        y, _, mask = generate(agent.policy, x, task.max_new_tokens,
                              eos_id=task.tokenizer.eos_id, generator=generator)
        m = mask.to(torch.float32)
        with torch.no_grad():
            old_logp, values = agent(x, y)
            ref_logp, _ = completion_forward(ref, x, y)
            score = torch.as_tensor(reward_fn(x, y, mask), dtype=torch.float32)
            score = score.to(m.device)
        old_logp, ref_logp, values = old_logp * m, ref_logp * m, values * m
        # 2. Per-token rewards, advantages and the critic's targets.
        beta_t = beta() if callable(beta) else beta  # or the adaptive controller's
        rewards = kl_penalised_rewards(score, old_logp, ref_logp, m, beta_t)
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
            order = torch.randperm(batch_size, generator=generator).tolist()
            for k in range(minibatches):
                idx = order[k * batch_size // minibatches:
                            (k + 1) * batch_size // minibatches]
                mm = m[idx]
                logp, v = agent([x[i] for i in idx], y[idx])
                pg_loss = ppo_clip_loss(logp, old_logp[idx], adv[idx], clip_eps, mask=mm)
                v_loss = (((v - ret[idx]) ** 2) * mm).sum() / mm.sum()
                loss = pg_loss + vf_coef * v_loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                for group in agent.clip_groups():  # one network, or policy and critic
                    torch.nn.utils.clip_grad_norm_(group, 1.0)
                opt.step()
                with torch.no_grad():
                    ratio = torch.exp((logp - old_logp[idx]) * mm)
                    out = ((ratio - 1).abs() > clip_eps).float() * mm
                    clipped.append(float(out.sum() / mm.sum()))
                    vlosses.append(v_loss.item())
        yield dict(prompts=x, comp=y, mask=mask, m=m, score=score, old_logp=old_logp,
                   ref_logp=ref_logp, clipped=clipped, vlosses=vlosses, values=values,
                   ret=ret)


def explained_variance(values, targets, mask):
    """1 - Var(targets - values) / Var(targets) over the tokens where ``mask`` is 1: 1 for a
    perfect critic, 0 for one no better than a constant (nan when the targets do not vary).

    Defined in: Reinforcement learning from human feedback, section Four more details.
    """
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2:
        raise ValueError("mask must be a (B, L) tensor")
    for name, x in (("values", values), ("targets", targets)):
        if not isinstance(x, torch.Tensor) or x.shape != mask.shape:
            raise ValueError(f"{name} must have mask's shape {tuple(mask.shape)}")
    sel = mask.bool()
    if not sel.any():
        raise ValueError("mask must select at least one token")
    t, v = targets[sel].double(), values[sel].double()
    var = float(t.var(unbiased=False))
    return float("nan") if var == 0 else 1.0 - float((t - v).var(unbiased=False)) / var
