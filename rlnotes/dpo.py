"""Direct preference optimisation (Rafailov et al. 2023): the Bradley-Terry loss with the reward
written through the policy itself, so no reward model and no RL loop are needed."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from rlnotes._losses import check_mask, require_finite_where
from rlnotes._validate import (require_float_tensor, require_in_range, require_int, require_ndim,
                               require_same_shape)

__all__ = ["dpo_implicit_reward", "dpo_loss", "sequence_logprob", "ipo_loss", "dpo_loss_variant", "pair_logps",
           "train_dpo", "dpo", "implicit_reward_accuracy", "dpo_sweep", "ppo_sweep"]


def sequence_logprob(token_logp, mask):
    r"""Log-probability of whole sequences: the sum of their masked per-token log-probs.

    .. math::  \log \pi_\theta(y \mid x) = \sum_{t=1}^{|y|} \log \pi_\theta(y_t \mid x, y_{<t})
               = \sum_t \text{mask}_t \cdot \text{token\_logp}_t .

    ==========  ===========  ==========================================================
    argument    shape        meaning
    ==========  ===========  ==========================================================
    token_logp  (B, L)       ``log pi(y_t | x, y_<t)`` of the tokens of B sequences,
                             padded to length L
    mask        (B, L)       1/True on the response tokens, 0/False on the prompt and the
                             padding (which may hold any value: it is ignored, and gets zero
                             gradient)
    returns     (B,)         the sum over each sequence's selected tokens (0 for a row
                             with no selected token)
    ==========  ===========  ==========================================================

    Defined in: Direct preference optimisation, section The DPO loss.
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

    Defined in: Direct preference optimisation, section The reward through the policy.
    """
    _check_sequence_logps(policy_logps, "policy_logps")
    _check_sequence_logps(ref_logps, "ref_logps", policy_logps, "policy_logps")
    beta = _check_beta(beta)
    return beta * (policy_logps - ref_logps.detach().to(policy_logps.dtype))


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    r"""The DPO loss (Rafailov et al. 2023), to be minimised.

    .. math::

        h_\theta^i = \left(\log \pi_\theta(y_w^i|x^i) - \log \pi_{ref}(y_w^i|x^i)\right)
                 - \left(\log \pi_\theta(y_l^i|x^i) - \log \pi_{ref}(y_l^i|x^i)\right), \qquad
        L = -\frac{1}{B} \sum_{i=1}^B \log \sigma(\beta h_\theta^i) .

    It is the Bradley-Terry loss of the implicit rewards :func:`dpo_implicit_reward` of the
    chosen (``y_w``) and rejected (``y_l``) responses. When the policy equals the reference,
    ``h_theta = 0`` and the loss is ``log 2``; its gradient raises the chosen response's
    log-probability and lowers the rejected one's, weighted by ``sigma(-beta h_theta^i)`` (pairs the
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

    Defined in: Direct preference optimisation, section The DPO loss.
    """
    pc = _check_sequence_logps(policy_chosen_logps, "policy_chosen_logps")
    pr = _check_sequence_logps(policy_rejected_logps, "policy_rejected_logps", pc, "policy_chosen_logps")
    rc = _check_sequence_logps(ref_chosen_logps, "ref_chosen_logps", pc, "policy_chosen_logps")
    rr = _check_sequence_logps(ref_rejected_logps, "ref_rejected_logps", pc, "policy_chosen_logps")
    beta = _check_beta(beta)
    dtype = pc.dtype
    h = (pc - rc.detach().to(dtype)) - (pr.to(dtype) - rr.detach().to(dtype))  # h_theta
    return -F.logsigmoid(beta * h).mean()


def ipo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    r"""The IPO loss (Azar et al. 2024) on the same pairs as DPO, to be minimised.

    .. math::  L = \frac{1}{B} \sum_{i=1}^B \left(h_\theta^i - \frac{1}{2\beta}\right)^2

    with h_theta^i the log-ratio margin of :func:`dpo_loss` (here beta is IPO's tau). Where DPO's
    loss keeps falling as h_theta grows (preferences that are deterministic in the data push margins
    to infinity), IPO's squared loss pulls every margin towards the finite target 1 / (2 beta). With
    unlimited data and a complete policy class its optimum is pi_ref(y|x) exp(p(y > b | x) / beta)
    / Z(x), p(y > b | x) the probability that y beats a completion of the sampling policy b.

    ======================  ======  =============================================
    argument                shape   meaning
    ======================  ======  =============================================
    policy_chosen_logps     (B,)    ``log pi_theta(y_w|x)``, differentiable
    policy_rejected_logps   (B,)    ``log pi_theta(y_l|x)``, differentiable
    ref_chosen_logps        (B,)    ``log pi_ref(y_w|x)`` (constant: detached)
    ref_rejected_logps      (B,)    ``log pi_ref(y_l|x)`` (constant: detached)
    beta                    > 0     regularisation strength (IPO's tau)
    returns                 ()      the mean over the B pairs
    ======================  ======  =============================================

    Defined in: Direct preference optimisation, section IPO.
    """
    pc = _check_sequence_logps(policy_chosen_logps, "policy_chosen_logps")
    pr = _check_sequence_logps(policy_rejected_logps, "policy_rejected_logps", pc, "policy_chosen_logps")
    rc = _check_sequence_logps(ref_chosen_logps, "ref_chosen_logps", pc, "policy_chosen_logps")
    rr = _check_sequence_logps(ref_rejected_logps, "ref_rejected_logps", pc, "policy_chosen_logps")
    beta = _check_beta(beta)
    dtype = pc.dtype
    h = (pc - rc.detach().to(dtype)) - (pr.to(dtype) - rr.detach().to(dtype))  # h_theta
    return ((h - 1.0 / (2.0 * beta)) ** 2).mean()


def dpo_loss_variant(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,
                     ref_rejected_logps, beta=0.1, loss_type="hinge", label_smoothing=0.0):
    r"""Three of TRL's variants of the DPO loss, on the log-ratio margin h_theta of :func:`dpo_loss`
    (z = beta h_theta, L_sigma(z) = -log sigma(z), p = p_flip = ``label_smoothing``, the
    probability that a label is flipped):

    - ``"sigmoid"``: (1 - p) L_sigma(z) + p L_sigma(-z), DPO's loss of labels flipped with
      probability p (label smoothing, conservative DPO; p = 0 is :func:`dpo_loss`);
    - ``"hinge"``: max(0, 1 - z), the hinge loss of SLiC (Zhao et al. 2023); p unused;
    - ``"robust"``: ((1 - p) L_sigma(z) - p L_sigma(-z)) / (1 - 2p), robust DPO (Chowdhury et al. 2024),
      an unbiased estimate of the clean labels' loss from the noisy ones; p in [0, 0.5).

    Returns the mean over the B pairs. The formulas are TRL's (``DPOTrainer``'s loss: hinge and
    robust as in TRL 1.16, whose margin is ``delta_score``; the smoothed sigmoid as in its earlier
    releases, whose margin was ``logits``).

    Defined in: Direct preference optimisation, section TRL's variants of the loss.
    """
    pc = _check_sequence_logps(policy_chosen_logps, "policy_chosen_logps")
    pr = _check_sequence_logps(policy_rejected_logps, "policy_rejected_logps", pc, "policy_chosen_logps")
    rc = _check_sequence_logps(ref_chosen_logps, "ref_chosen_logps", pc, "policy_chosen_logps")
    rr = _check_sequence_logps(ref_rejected_logps, "ref_rejected_logps", pc, "policy_chosen_logps")
    beta = _check_beta(beta)
    if loss_type not in ("sigmoid", "hinge", "robust"):
        raise ValueError(f"loss_type must be 'sigmoid', 'hinge' or 'robust', got {loss_type!r}")
    p = require_in_range(label_smoothing, "label_smoothing", 0.0, 0.5, high_open=True)
    dtype = pc.dtype
    z = beta * ((pc - rc.detach().to(dtype)) - (pr.to(dtype) - rr.detach().to(dtype)))
    if loss_type == "hinge":
        return torch.relu(1 - z).mean()
    if loss_type == "robust":
        return (((1 - p) * -F.logsigmoid(z) - p * -F.logsigmoid(-z)) / (1 - 2 * p)).mean()
    return ((1 - p) * -F.logsigmoid(z) + p * -F.logsigmoid(-z)).mean()


# --- Training on preference pairs (the language-model lab) ------------------------------------

def _check_pairs(pairs, name="pairs"):
    from rlnotes.lm.reward import PreferencePairs
    if not isinstance(pairs, PreferencePairs):
        raise ValueError(f"{name} must be rlnotes.lm.PreferencePairs (a non-empty set of preference "
                         f"pairs), got {type(pairs).__name__}")
    if len(pairs) == 0:
        raise ValueError(f"{name} must hold at least one preference pair")
    return pairs


def _stacked(pairs):
    """Chosen and rejected completions padded to one length and stacked: (2N, L) each."""
    L = max(pairs.chosen.shape[1], pairs.rejected.shape[1])
    pad = lambda x: torch.nn.functional.pad(x, (0, L - x.shape[1]))  # noqa: E731
    comp = torch.cat([pad(pairs.chosen), pad(pairs.rejected)]).long()
    mask = torch.cat([pad(pairs.chosen_mask), pad(pairs.rejected_mask)]).bool()
    return pairs.prompts + pairs.prompts, comp, mask


def pair_logps(model, pairs, *, average=False):
    r"""Sequence log-probabilities of the chosen and rejected completions of ``pairs`` under
    ``model``, in one teacher-forced pass: summed over tokens (:func:`sequence_logprob`), or
    length-averaged, :math:`\frac{1}{|y|} \sum_t \log \pi_\theta(y_t \mid x, y_{<t})`.

    ==========  =====================  ================================================
    argument    type / shape           meaning
    ==========  =====================  ================================================
    model       TinyGPT                the policy (or the frozen reference)
    pairs       PreferencePairs (N)    prompts, chosen and rejected completions, masks
    average     bool                   divide each sum by the completion's token count
    returns     ((N,), (N,))           log pi(y_w | x), log pi(y_l | x); differentiable
    ==========  =====================  ================================================

    Defined in: Direct preference optimisation, section DPO on the preference task.
    """
    from rlnotes.lm.generation import completion_logprobs
    pairs = _check_pairs(pairs)
    if not isinstance(average, bool):
        raise ValueError(f"average must be True or False, got {average!r}")
    device = next(model.parameters()).device
    prompts, comp, mask = _stacked(pairs)
    mask = mask.to(device)
    token_logp = completion_logprobs(model, prompts, comp.to(device), mask)
    seq = sequence_logprob(token_logp, mask)
    if average:
        seq = seq / mask.sum(1).clamp(min=1).to(seq.dtype)
    N = len(pairs)
    return seq[:N], seq[N:]


def implicit_reward_accuracy(policy, ref, pairs, beta=0.1, *, average=False, batch_size=1024):
    r"""Fraction of ``pairs`` whose chosen completion gets the higher implicit reward
    :math:`\beta \log \frac{\pi_\theta(y \mid x)}{\pi_{ref}(y \mid x)}` (ties count as misses):
    the DPO policy used as a reward model. beta > 0 does not change the ordering; it is checked.

    Defined in: Direct preference optimisation, section DPO on the preference task.
    """
    pairs = _check_pairs(pairs)
    beta = _check_beta(beta)
    batch_size = int(batch_size)
    hits = 0
    with torch.no_grad():
        for i in range(0, len(pairs), batch_size):
            sub = pairs.subset(slice(i, i + batch_size))
            pc, pr = pair_logps(policy, sub, average=average)
            rc, rr = pair_logps(ref, sub, average=average)
            rw = dpo_implicit_reward(pc, rc.to(pc.device), beta)
            rl = dpo_implicit_reward(pr, rr.to(pr.device), beta)
            hits += int((rw > rl).sum())
    return hits / len(pairs)


def train_dpo(sft, pairs, *, beta=0.1, loss_type="dpo", average_logps=False, epochs=2,
              batch_size=64, lr=1e-3, warmup=10, seed=0, device=None, ref=None, callback=None):
    r"""Direct preference optimisation of a copy of ``sft`` on preference pairs, against a frozen
    reference (``ref``, by default a frozen copy of ``sft``). Returns ``(policy, history)``.

    Pseudocode: compute log pi_ref(y_w|x), log pi_ref(y_l|x) of every pair once; then for
    ``epochs`` passes over the shuffled pairs, in minibatches: log pi_theta of both completions
    (one forward pass), the loss (:func:`dpo_loss`, or :func:`ipo_loss`), one AdamW step.

    ==============  ====================================================================
    sft             the TinyGPT to start from (not modified)
    pairs           rlnotes.lm.PreferencePairs to train on (N >= 1)
    beta            KL strength (> 0): DPO's beta, IPO's tau
    loss_type       "dpo" (Rafailov et al. 2023) or "ipo" (Azar et al. 2024)
    average_logps   False: summed sequence log-probs (the derivation's); True: per-token mean
    epochs          passes over the pairs
    batch_size      pairs per step
    lr              peak learning rate of AdamW (linear warm-up, cosine decay to lr / 10)
    warmup          warm-up steps
    seed            the order of the pairs
    ref             the reference policy (default: a frozen copy of ``sft``)
    callback        ``callback(step, policy, history)`` after each step; True stops training
    ==============  ====================================================================

    ``history`` holds per step (means over the minibatch, before the step): ``loss``,
    ``chosen`` and ``rejected`` (log pi_theta, summed or averaged as trained), ``margin``
    (beta times the log-ratio margin h_theta), ``accuracy`` (fraction with h_theta > 0).

    Defined in: Direct preference optimisation, section DPO on the preference task.
    """
    from rlnotes.device import get_device
    from rlnotes.lm.sft import freeze, single_thread
    from rlnotes.progress import progress
    pairs = _check_pairs(pairs)
    beta = _check_beta(beta)
    if loss_type not in ("dpo", "ipo"):
        raise ValueError(f"loss_type must be 'dpo' or 'ipo', got {loss_type!r}")
    if not isinstance(average_logps, bool):
        raise ValueError(f"average_logps must be True or False, got {average_logps!r}")
    epochs = require_int(epochs, "epochs", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    warmup = require_int(warmup, "warmup", minimum=1)
    device = get_device() if device is None else torch.device(device)
    loss_fn = dpo_loss if loss_type == "dpo" else ipo_loss
    gen = torch.Generator().manual_seed(require_int(seed, "seed", minimum=0))
    history = {k: [] for k in ("loss", "chosen", "rejected", "margin", "accuracy")}
    with single_thread(device):
        ref = freeze(sft if ref is None else ref).to(device)
        policy = copy.deepcopy(sft).to(device).train()
        with torch.no_grad():  # the reference's log-probs never change: compute them once
            ref_c, ref_r = pair_logps(ref, pairs, average=average_logps)
        opt = torch.optim.AdamW(policy.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
        bar = progress(total=epochs * -(-len(pairs) // batch_size), desc=loss_type.upper())
        try:
            for step, (loss, pc, pr, rc, rr) in enumerate(
                    dpo(policy, opt, pairs, ref_c, ref_r, loss_fn=loss_fn, beta=beta,
                        average_logps=average_logps, epochs=epochs, batch_size=batch_size,
                        lr=lr, warmup=warmup, generator=gen), start=1):
                bar.update(1)
                with torch.no_grad():
                    delta = (pc - rc) - (pr - rr)
                    history["loss"].append(loss.item())
                    history["chosen"].append(float(pc.mean()))
                    history["rejected"].append(float(pr.mean()))
                    history["margin"].append(float(beta * delta.mean()))
                    history["accuracy"].append(float((delta > 0).float().mean()))
                if callback is not None and callback(step, policy, history):
                    break
        finally:
            bar.close()
    return policy.eval(), history


def dpo(policy, opt, pairs, ref_c, ref_r, *, loss_fn, beta, average_logps, epochs,
        batch_size, lr, warmup, generator):
    """DPO's loop, the chapter's pseudocode (the core of :func:`train_dpo`): ``epochs``
    passes over the shuffled pairs in minibatches; on each, log pi_theta of the chosen and
    rejected completions (one forward pass), the loss against the reference's log-probs
    ``ref_c``, ``ref_r`` (computed once), one AdamW step. Yields ``(loss, pc, pr, rc,
    rr)`` a step.

    Defined in: Direct preference optimisation, section DPO on the preference task.
    """
    from rlnotes.lm.sft import lr_schedule
    N = len(pairs)
    steps, step = epochs * -(-N // batch_size), 0
    for _ in range(epochs):
        order = torch.randperm(N, generator=generator)
        for i in range(0, N, batch_size):
            idx = order[i:i + batch_size]
            for g in opt.param_groups:  # warm-up, then cosine decay to lr / 10
                g["lr"] = lr_schedule(step, steps, lr, warmup)
            pc, pr = pair_logps(policy, pairs.subset(idx), average=average_logps)
            rc, rr = ref_c[idx.to(ref_c.device)], ref_r[idx.to(ref_r.device)]
            loss = loss_fn(pc, pr, rc, rr, beta)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            step += 1
            yield loss, pc, pr, rc, rr


# --- The reward-KL frontier: one trained policy per beta ------------------------------------

def dpo_sweep(sft, pairs, task, betas, *, n_eval=1000, eval_seed=10, **train_kwargs):
    """Train one DPO policy per beta on ``pairs`` (:func:`train_dpo`) and measure each with
    :func:`rlnotes.lm.frontier.gold_and_kl`. Returns a list of dicts (method, beta, gold, kl,
    ...), in beta's order.

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """
    from rlnotes.lm import frontier
    betas = frontier._check_betas(betas)
    out = []
    for beta in betas:
        policy, _ = train_dpo(sft, pairs, beta=beta, **train_kwargs)
        out.append(dict(method="DPO", beta=beta, **frontier.gold_and_kl(
            policy, sft, task, n_prompts=n_eval, seed=eval_seed)))
    return out


def ppo_sweep(sft, task, reward_fn, betas, *, n_eval=1000, eval_seed=10, **ppo_kwargs):
    """Train one PPO policy per KL coefficient beta against ``reward_fn``
    (:func:`rlnotes.rlhf_ppo.train_ppo`) and measure each with
    :func:`rlnotes.lm.frontier.gold_and_kl`. Returns a list of dicts, in beta's order.

    Defined in: Direct preference optimisation, section DPO against PPO: the reward-KL frontier.
    """
    from rlnotes.lm import frontier
    from rlnotes.rlhf_ppo import train_ppo
    betas = frontier._check_betas(betas, allow_zero=True)
    out = []
    for beta in betas:
        agent, _ = train_ppo(sft, task, reward_fn, beta=beta, **ppo_kwargs)
        out.append(dict(method="PPO", beta=beta, **frontier.gold_and_kl(
            agent.policy, sft, task, n_prompts=n_eval, seed=eval_seed)))
    return out
