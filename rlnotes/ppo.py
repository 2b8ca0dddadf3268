"""PPO (Schulman et al. 2017): the clipped surrogate loss, the KL-penalty variant with its adaptive
coefficient, and the PPO trainer :func:`train`. The masked-tensor checks and the clipped objective
the loss shares with the GRPO and DPO losses live in :mod:`rlnotes._losses`."""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._losses import check_like, check_logp, check_mask, clipped_objective, require_finite_where
from rlnotes._validate import (require_choice, require_float_tensor, require_in_range, require_int,
                               require_same_shape)
from rlnotes.deeprl import _onpolicy as op
from rlnotes.deeprl.normalize import normalize_inputs, standardize_inputs
from rlnotes.deeprl.training import (Reporter, check_common, check_flag, check_hidden_sizes,
                                     check_max_grad_norm, check_positive, check_rollout_size,
                                     choose_device, torch_threads)
from rlnotes.kl import kl_k3

__all__ = ["ppo_clip_loss", "ppo_penalty_loss", "adapt_kl_coef", "value_loss", "ratio_stats",
           "ppo", "train"]


def ppo_clip_loss(logp, old_logp, advantages, clip_eps=0.2, mask=None):
    r"""PPO's clipped surrogate loss (Schulman et al. 2017), to be minimised.

    .. math::

        \rho_t(\theta) = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\theta_{old}}(a_t \mid s_t)}
                    = \exp(\text{logp}_t - \text{old\_logp}_t), \qquad
        L(\theta) = -\frac{1}{|M|} \sum_{t \in M}
            \min\left(\rho_t(\theta) A_t,\ \mathrm{clip}(\rho_t(\theta), 1 - \epsilon_\text{clip}, 1 + \epsilon_\text{clip}) A_t\right)

    where M is the set of selected elements (all of them when ``mask`` is None). The minimum
    makes the objective a pessimistic bound: once the ratio has moved past ``1 + epsilon_clip`` with
    ``A_t > 0`` (or below ``1 - epsilon_clip`` with ``A_t < 0``) the clipped branch is active and the
    element's gradient is zero; everywhere else the gradient is the plain surrogate's,
    ``-A_t rho_t(theta) grad log pi_theta``.

    ===========  =====================  ===================================================
    argument     shape                  meaning
    ===========  =====================  ===================================================
    logp         any (...), float       ``log pi_theta(a_t|s_t)``, differentiable
    old_logp     logp's, or None        ``log pi_theta_old(a_t|s_t)`` of the policy that
                                        collected the data; None means on-policy
                                        (``logp.detach()``, ratio 1)
    advantages   logp's                 ``A_t`` (e.g. from :func:`rlnotes.returns.gae`)
    clip_eps     float in [0, 1)        epsilon_clip
    mask         None or logp's         1/True selects an element, 0/False drops it
    returns      () scalar              the mean over the selected elements
    ===========  =====================  ===================================================

    Gradients flow only through ``logp``: ``old_logp`` and ``advantages`` are treated as
    constants (detached) and cast to logp's dtype. Dropped elements may hold any finite value
    (or inf/NaN): they change neither the loss nor its gradient, which is exactly 0 there.
    A mask that selects nothing raises ``ValueError``.

    Defined in: TRPO and PPO, section The clipped surrogate objective.
    """
    logp = check_logp(logp)
    old_logp = logp.detach() if old_logp is None else check_like(old_logp, "old_logp", logp, "logp")
    adv = check_like(advantages, "advantages", logp, "logp")
    clip_eps = require_in_range(clip_eps, "clip_eps", 0.0, 1.0, high_open=True)
    if mask is not None:
        mask = check_mask(mask, logp)
        if not bool(mask.any()):
            raise ValueError("mask must select at least one element (it is all 0)")
    for x, name in ((logp, "logp"), (old_logp, "old_logp"), (adv, "advantages")):
        require_finite_where(x, name, mask)
    objective = clipped_objective(logp, old_logp, adv, clip_eps, clip_eps, mask)
    if mask is None:
        return -objective.mean()
    return -objective.sum() / mask.sum().to(logp.dtype)


# --- PPO-penalty ------------------------------------------------------------------------------


def ppo_penalty_loss(logp, old_logp, advantages, kl, beta):
    r"""PPO's KL-penalised surrogate (Schulman et al. 2017, section 4), to be minimised:

    .. math::

        L(\theta) = -\frac{1}{B} \sum_t \left( \rho_t(\theta) A_t
                     - \beta\, \mathrm{KL}[\pi_{\theta_{old}}(\cdot|s_t), \pi_\theta(\cdot|s_t)]
                     \right)

    ==========  ======  ==========================================================
    argument    shape   meaning
    ==========  ======  ==========================================================
    logp        (B,)    log pi_theta(a_t|s_t), differentiable
    old_logp    (B,)    log pi_theta_old(a_t|s_t) (a constant)
    advantages  (B,)    A_t (a constant)
    kl          (B,)    the KL of each state, differentiable (exact, or k3 with samples
                        from pi_old: ``kl_k3(old_logp, logp)``)
    beta        >= 0    the penalty coefficient
    ==========  ======  ==========================================================

    Defined in: TRPO and PPO, section PPO with a KL penalty.
    """
    logp = check_logp(logp)
    old_logp = check_like(old_logp, "old_logp", logp, "logp")
    advantages = check_like(advantages, "advantages", logp, "logp")
    require_float_tensor(kl, "kl")
    require_same_shape(kl, "kl", logp, "logp")
    beta = require_in_range(beta, "beta", 0.0, float("inf"))
    ratio = torch.exp(logp - old_logp)
    return -(ratio * advantages - beta * kl).mean()


def adapt_kl_coef(beta: float, kl: float, target_kl: float, *, factor: float = 2.0,
                  tolerance: float = 1.5) -> float:
    """The adaptive penalty coefficient of PPO-penalty: after an update whose mean KL was ``kl``,
    ``beta / factor`` if ``kl < target_kl / tolerance`` (the step was timid), ``beta * factor``
    if ``kl > target_kl * tolerance`` (it went too far), else ``beta`` unchanged. Schulman et al.
    (2017) use factor 2 and tolerance 1.5.

    Defined in: TRPO and PPO, section PPO with a KL penalty.
    """
    beta = require_in_range(beta, "beta", 0.0, float("inf"), low_open=True)
    kl = require_in_range(kl, "kl", 0.0, float("inf"))
    target_kl = require_in_range(target_kl, "target_kl", 0.0, float("inf"), low_open=True)
    factor = require_in_range(factor, "factor", 1.0, float("inf"), low_open=True)
    tolerance = require_in_range(tolerance, "tolerance", 1.0, float("inf"))
    if kl < target_kl / tolerance:
        return beta / factor
    if kl > target_kl * tolerance:
        return beta * factor
    return beta


# --- implementation details: value clipping, ratio statistics ---------------------------------


def value_loss(values, old_values, returns, vf_clip=None):
    r"""The critic's loss, to be minimised: :math:`\frac12 (V_w(s_t) - G^\lambda_t)^2` averaged
    over the batch, or with ``vf_clip`` = c the clipped form of OpenAI's PPO2 code (not in the
    PPO paper):

    .. math::

        \tfrac12 \max\big((V_w(s_t) - G^\lambda_t)^2,\;
        (V_\text{old}(s_t) + \mathrm{clip}(V_w(s_t) - V_\text{old}(s_t), -c, c) - G^\lambda_t)^2\big)

    so that a value that has moved more than c (in the units of the return) from the rollout's
    value loses its gradient when moving further helps the fit.

    ==========  ============  ======================================================
    argument    shape         meaning
    ==========  ============  ======================================================
    values      (B,) float    V_w(s_t), differentiable
    old_values  (B,) float    the values when the rollout was collected (constants)
    returns     (B,) float    the targets G^lambda_t (constants)
    vf_clip     None or > 0   the clip range c of the value (None: no clipping)
    returns     () scalar     the mean over the batch
    ==========  ============  ======================================================

    Defined in: TRPO and PPO, section Implementation details that decide PPO's results.
    """
    values = check_logp(values, "values")
    old_values = check_like(old_values, "old_values", values, "values")
    returns = check_like(returns, "returns", values, "values")
    if vf_clip is not None:
        vf_clip = check_positive(vf_clip, "vf_clip")
    for x, name in ((values, "values"), (old_values, "old_values"), (returns, "returns")):
        require_finite_where(x, name, None)
    return _value_loss(values, old_values, returns, vf_clip)


def _value_loss(values, old_values, returns, vf_clip):
    """:func:`value_loss` without its input checks (the trainer's tensors are known good)."""
    if vf_clip is None:
        return 0.5 * (values - returns).pow(2).mean()
    clipped = old_values + torch.clamp(values - old_values, -vf_clip, vf_clip)
    return 0.5 * torch.maximum((values - returns).pow(2), (clipped - returns).pow(2)).mean()


def _surrogate_loss(logp, old_logp, adv, clip_eps):
    """Minus the mean clipped surrogate (:func:`ppo_clip_loss` without its checks), or minus the
    plain surrogate mean(rho_t A_t) when ``clip_eps`` is None (PPO without a clip)."""
    if clip_eps is None:
        return -(torch.exp(logp - old_logp) * adv).mean()
    return -clipped_objective(logp, old_logp, adv, clip_eps, clip_eps, None).mean()


@torch.no_grad()
def ratio_stats(logp, old_logp, advantages, clip_eps):
    r"""What the ratios :math:`\rho_t = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)` of a
    batch did in an update (floats):

    - ``max_ratio``, ``min_ratio``: the largest and smallest :math:`\rho_t`;
    - ``outside_fraction``: the share with :math:`|\rho_t - 1| > \epsilon_\text{clip}` at the
      update's end (SB3 and CleanRL log as the "clip fraction" the same share measured on each
      minibatch before its step, averaged over the epochs);
    - ``zero_grad_fraction``: the share whose clipped objective has zero gradient,
      :math:`\rho_t > 1 + \epsilon_\text{clip}` with :math:`A_t > 0` or
      :math:`\rho_t < 1 - \epsilon_\text{clip}` with :math:`A_t < 0` (a sample outside the
      range on the side its advantage disfavours keeps its gradient).

    ==========  ============  ===================================================
    argument    shape         meaning
    ==========  ============  ===================================================
    logp        (B,) float    log pi_theta(a_t|s_t) after the update
    old_logp    (B,) float    log pi_theta_old(a_t|s_t)
    advantages  (B,) float    A_t as the loss saw them (normalised, if it was)
    clip_eps    [0, 1)        epsilon_clip
    ==========  ============  ===================================================

    Defined in: TRPO and PPO, section Diagnostics and early stopping.
    """
    logp = check_logp(logp)
    old_logp = check_like(old_logp, "old_logp", logp, "logp")
    adv = check_like(advantages, "advantages", logp, "logp")
    clip_eps = require_in_range(clip_eps, "clip_eps", 0.0, 1.0, high_open=True)
    for x, name in ((logp, "logp"), (old_logp, "old_logp"), (adv, "advantages")):
        require_finite_where(x, name, None)
    return _ratio_stats(torch.exp(logp - old_logp), adv, clip_eps)


def _ratio_stats(ratio, adv, clip_eps):
    """:func:`ratio_stats` from the ratios, without input checks; ``clip_eps`` None (no clip)
    gives NaN fractions."""
    out = {"max_ratio": float(ratio.max()), "min_ratio": float(ratio.min())}
    if clip_eps is None:
        return {**out, "outside_fraction": float("nan"), "zero_grad_fraction": float("nan")}
    high, low = ratio > 1.0 + clip_eps, ratio < 1.0 - clip_eps
    return {**out, "outside_fraction": float((high | low).float().mean()),
            "zero_grad_fraction": float(((high & (adv > 0)) | (low & (adv < 0))).float().mean())}


# --- the trainer ------------------------------------------------------------------------------


def train(env_id: str, total_steps: int, *, seed: int = 0, callback=None,
          num_envs: int = 8,
          num_steps: int = 64,
          n_epochs: int = 5,
          minibatch_size: int = 256,
          learning_rate: float = 2e-3,
          vf_lr_scale: float = 10.0,
          anneal_lr: bool = True,
          anneal_clip: bool = True,
          gamma: float = 0.99,
          lam: float = 0.95,
          clip_eps: float = 0.3,
          vf_coef: float = 1.0,
          ent_coef: float = 0.0,
          max_grad_norm: float | None = 0.5,
          norm_adv: bool = False,
          target_kl: float | None = None,
          norm_obs: bool = False,
          standardize_obs: bool = True,
          vf_clip: float | None = None,
          log_ratios: bool = False,
          hidden_sizes=(64, 64),
          activation: str = "tanh",
          log_std_init: float = 0.0,
          num_threads: int = 1,
          device=None,
          progress: bool = False):
    """Train a PPO-clip agent (Schulman et al. 2017) on ``env_id`` for ``total_steps``
    environment steps; return its greedy policy (a :class:`rlnotes.deeprl._onpolicy.GreedyPolicy`:
    ``policy(obs)`` maps (N, obs_dim) observations to (N,) int64 actions for a Discrete action
    space, (N, k) float32 actions for a k-dimensional Box). Follows the trainer contract of the
    book (same arguments, same run).

    Each update: play ``num_steps`` steps in each of ``num_envs`` envs with the current policy,
    compute GAE advantages and the old log-probabilities of the rollout's B valid transitions
    (autoreset steps left out), then take ``n_epochs`` epochs of Adam steps (see
    :func:`_ppo_epochs`: each epoch shuffles the B transitions and cuts them into
    max(1, round(B / minibatch_size)) minibatches whose sizes differ by at most one, one Adam
    step each; every transition is used once an epoch),
    minimising

        ppo_clip_loss(logp, old_logp, adv) + vf_coef * 0.5 (V(s) - G^lambda)^2 - ent_coef * H.

    Hyperparameters (the defaults are the chapter's CartPole-v1 settings, chosen by three
    rounds of sweeps, on seeds 0-23, 200-229 and 500-549, the last checked on seeds 700-749:
    see benchmarks/README.md; with 8 x 64 = 512 steps a rollout and minibatches of 256, every
    epoch takes two Adam steps; the step size and the clip range decay to 0, the critic steps
    10 times as fast as the actor, the advantages are not normalised, and the observations
    pass through a fixed standardisation fitted to the first rollout):

    - num_envs: environments stepped together; total_steps counts steps summed over them
    - num_steps: steps per env per rollout (num_envs * num_steps <= 2048)
    - n_epochs: epochs (shuffles) of Adam steps per rollout
    - minibatch_size: about the transitions per gradient step: each epoch takes
      max(1, round(B / minibatch_size)) steps on nearly equal parts of the B transitions
    - learning_rate: Adam's step size at the start
    - vf_lr_scale: the critic's step size is learning_rate * vf_lr_scale (as in
      :func:`rlnotes.a2c.train`: its targets are on the scale of the returns, so it may need
      larger steps than the actor; 1: one step size for both; 10 by default)
    - anneal_lr: decay the step size linearly to 0 over total_steps (the critic's too)
    - anneal_clip: decay the clip range linearly from clip_eps to 0 over total_steps (as
      RL-Zoo's CartPole setting does); with clip_eps None there is nothing to anneal
    - gamma: discount factor in [0, 1]
    - lam: the GAE parameter lambda in [0, 1]
    - clip_eps: the clip range epsilon_clip in [0, 1), or None: no clip at all (the plain
      surrogate mean(rho_t A_t), maximised for n_epochs epochs)
    - vf_coef: weight of the value loss
    - ent_coef: weight of the entropy bonus (>= 0)
    - max_grad_norm: clip the gradient's global norm to this (None: no clipping)
    - norm_adv: normalise the advantages of each minibatch to mean 0, std 1
    - target_kl: stop an update's epochs once the k3 estimate of KL(pi_old || pi) over the
      rollout exceeds it (None: never)
    - norm_obs: normalise the observations by their running mean and variance (clipped to
      +-10) in front of the actor and the critic (:mod:`rlnotes.deeprl.normalize`), in place
      of standardize_obs (which must then be False); the statistics are updated once per
      rollout, after its epochs
    - standardize_obs: standardise the observations, for the actor and the critic, with the
      mean and standard deviation of the first rollout's valid observations, fixed afterwards
      (TRPO's input layer, ``rlnotes.deeprl.Standardize``); norm_obs needs it False
    - vf_clip: clip the value's move from the rollout's value to +-vf_clip in the value loss
      (:func:`value_loss`; None: no clipping)
    - log_ratios: add to each update's diagnostics :func:`ratio_stats` of the batch after the
      update (the largest and smallest ratio, the share outside the clip range and the share
      with zero gradient), with the advantages normalised over the batch when norm_adv
    - hidden_sizes: widths of the hidden layers of the actor and of the critic (separate nets)
    - activation: "tanh" or "relu"
    - log_std_init: the Gaussian policy's initial log standard deviation (Box actions)
    - num_threads: torch threads during training (1 is fastest for small networks)
    - device: None = CPU unless RLNOTES_DEVICE is set; "auto" = rlnotes.get_device(); or a name
    - progress: show a progress bar

    ``callback(steps, policy)`` is called after every update (every num_envs * num_steps <=
    2,048 steps); returning True stops training. ``policy.diagnostics`` lists, per update, the
    steps, the valid transitions of the rollout, the mean approx KL (k3), the clip fraction,
    the explained variance, the losses and the epochs run.

    Defined in: TRPO and PPO, section PPO on CartPole.
    """
    total_steps, seed, num_threads = check_common(total_steps, seed, callback, num_threads)
    num_envs, num_steps = check_rollout_size(num_envs, num_steps)
    n_epochs = require_int(n_epochs, "n_epochs", minimum=1)
    minibatch_size = require_int(minibatch_size, "minibatch_size", minimum=1)
    learning_rate = check_positive(learning_rate, "learning_rate")
    vf_lr_scale = check_positive(vf_lr_scale, "vf_lr_scale")
    check_flag(anneal_lr, "anneal_lr")
    check_flag(anneal_clip, "anneal_clip")
    gamma = require_in_range(gamma, "gamma", 0.0, 1.0)
    lam = require_in_range(lam, "lam", 0.0, 1.0)
    if clip_eps is not None:
        clip_eps = require_in_range(clip_eps, "clip_eps", 0.0, 1.0, high_open=True)
    vf_coef = require_in_range(vf_coef, "vf_coef", 0.0, float("inf"))
    ent_coef = require_in_range(ent_coef, "ent_coef", 0.0, float("inf"))
    max_grad_norm = check_max_grad_norm(max_grad_norm)
    check_flag(norm_adv, "norm_adv")
    if target_kl is not None:
        target_kl = check_positive(target_kl, "target_kl")
    check_flag(norm_obs, "norm_obs")
    check_flag(standardize_obs, "standardize_obs")
    if norm_obs and standardize_obs:
        raise ValueError("norm_obs and standardize_obs must not both be True (one input layer)")
    if vf_clip is not None:
        vf_clip = check_positive(vf_clip, "vf_clip")
    check_flag(log_ratios, "log_ratios")
    hidden_sizes = check_hidden_sizes(hidden_sizes)
    require_choice(activation, "activation", ("tanh", "relu"))
    log_std_init = require_in_range(log_std_init, "log_std_init", -20.0, 20.0)
    dev = choose_device(device)

    envs, obs_dim, act_info = op.make_train_envs(env_id, num_envs)
    with torch_threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # network initialisation; the global stream is restored after
        net = op.ActorCritic(obs_dim, act_info, hidden_sizes, activation=activation,
                             log_std_init=log_std_init, device=dev)
        obs_norm = normalize_inputs(net) if norm_obs else None
        standardize = standardize_inputs(net) if standardize_obs else None  # fitted later
        critic = list(net.critic.parameters())
        others = [p for p in net.parameters() if all(p is not c for c in critic)]
        optimizer = torch.optim.Adam([{"params": others, "scale": 1.0},
                                      {"params": critic, "scale": vf_lr_scale}],
                                     lr=learning_rate, eps=1e-5, fused=True)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate * group["scale"]
        generator = torch.Generator(device=dev).manual_seed(seed)
        rng = np.random.default_rng(seed)
        policy = op.GreedyPolicy(net)

        def lr(steps):  # anneal_lr: linear decay to 0 over total_steps
            return learning_rate * (1.0 - steps / total_steps)

        def clip(steps):  # anneal_clip: linear decay to 0 over total_steps
            return clip_eps * (1.0 - steps / total_steps)

        obs, _ = envs.reset(seed=seed)
        reporter = Reporter(total_steps, callback, policy, progress=progress, desc="PPO")
        try:
            for steps, stats in ppo(envs, obs, net, optimizer, total_steps,
                                    num_steps=num_steps, n_epochs=n_epochs,
                                    minibatch_size=minibatch_size,
                                    lr=lr if anneal_lr else None, gamma=gamma, lam=lam,
                                    clip_eps=clip_eps, vf_coef=vf_coef, ent_coef=ent_coef,
                                    max_grad_norm=max_grad_norm, norm_adv=norm_adv,
                                    target_kl=target_kl, rng=rng, generator=generator,
                                    obs_norm=obs_norm, standardize=standardize,
                                    vf_clip=vf_clip,
                                    log_ratios=log_ratios,
                                    clip=clip if anneal_clip and clip_eps is not None
                                    else None):
                policy.diagnostics.append(stats)
                if reporter(steps):
                    break
        finally:
            envs.close()
            reporter.close()
    net.eval()
    return policy


def ppo(envs, obs, net, optimizer, total_steps, *, num_steps, n_epochs, minibatch_size,
        lr, gamma, lam, clip_eps, vf_coef, ent_coef, max_grad_norm, norm_adv, target_kl,
        rng, generator, obs_norm=None, standardize=None, vf_clip=None, log_ratios=False,
        clip=None):
    """PPO-clip's loop, the chapter's pseudocode (the core of :func:`train`): collect a
    rollout of T = ``num_steps`` steps in each of the N envs, compute the GAE advantages
    and the old log-probabilities of its valid transitions, then take the epochs of
    minibatch steps of :func:`_ppo_epochs`. ``lr(steps)``, ``clip(steps)``: the step
    size's and the clip range's schedules (None: constant); ``obs_norm``: a running
    observation normaliser, updated after the epochs (None: none); ``standardize``: a
    fixed input layer, fitted to the first rollout before its advantages (None: none).
    Yields ``(steps, stats)`` after each update.

    Defined in: TRPO and PPO, section PPO on CartPole.
    """
    N = envs.num_envs
    params = list(net.parameters())
    autoreset = np.zeros(N, dtype=bool)
    steps = 0
    while steps < total_steps:
        T = min(num_steps, -(-(total_steps - steps) // N))  # the last may be shorter
        if lr is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr(steps) * group.get("scale", 1.0)
        eps = clip_eps if clip is None else clip(steps)
        rollout, obs, autoreset = op.collect_rollout(envs, net, obs, autoreset, T, rng)
        steps += T * N
        # the input layer is fitted once, to the first rollout's valid observations
        if standardize is not None and steps == T * N and rollout.valid.sum() > 1:
            standardize.fit(torch.as_tensor(rollout.obs[rollout.valid],
                                            device=params[0].device))
        # the valid transitions: obs, actions, old logp, adv, returns, values
        batch = op.rollout_advantages(net, rollout, gamma, lam)
        B = len(batch["adv"])
        stats = {"steps": steps, "epochs": 0, "transitions": B}
        if B > 1:
            stats.update(_ppo_epochs(net, optimizer, params, batch, generator,
                                     n_epochs=n_epochs, minibatch_size=minibatch_size,
                                     clip_eps=eps, vf_coef=vf_coef,
                                     ent_coef=ent_coef, max_grad_norm=max_grad_norm,
                                     norm_adv=norm_adv, target_kl=target_kl,
                                     kl_k3=kl_k3, vf_clip=vf_clip, log_ratios=log_ratios))
            stats["explained_variance"] = op.explained_variance(batch["values"],
                                                                batch["returns"])
        if obs_norm is not None and B > 0:
            obs_norm.update(batch["obs"])  # the statistics move between updates only
        yield steps, stats


def _ppo_epochs(net, optimizer, params, batch, generator, *, n_epochs, minibatch_size,
                clip_eps, vf_coef, ent_coef, max_grad_norm, norm_adv, target_kl, kl_k3,
                vf_clip=None, log_ratios=False):
    """The optimisation phase of one PPO update on a rollout's batch (the dict of
    :func:`rlnotes.deeprl._onpolicy.rollout_advantages`, B transitions).

    ``n_epochs`` times: shuffle the B transitions and cut the shuffle into
    max(1, round(B / minibatch_size)) minibatches whose sizes differ by at most one (every
    transition is used once an epoch); on each, normalise the
    advantages (with ``norm_adv``), add the clipped surrogate loss, ``vf_coef`` times the
    value loss and the entropy bonus, and take one Adam step on the gradient clipped to
    ``max_grad_norm``.
    After an epoch, stop if the k3 estimate of KL(pi_old || pi) over the batch exceeds
    ``target_kl``. Returns the update's diagnostics.

    Defined in: TRPO and PPO, section PPO on CartPole.
    """
    obs, actions, old_logp = batch["obs"], batch["actions"], batch["logp"]
    adv_all, returns = batch["adv"], batch["returns"]
    B = len(adv_all)
    n_mb = max(1, round(B / minibatch_size))  # minibatches of B / n_mb, none left out
    epochs = 0
    for _ in range(n_epochs):
        perm = torch.randperm(B, generator=generator, device=obs.device)
        for idx in torch.tensor_split(perm, n_mb):
            mb = len(idx)
            logp, entropy = net.log_prob(obs[idx], actions[idx], entropy=ent_coef > 0)
            adv = adv_all[idx]
            if norm_adv and mb > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            # ppo_clip_loss and value_loss without their input checks (tensors known good)
            pg_loss = _surrogate_loss(logp, old_logp[idx], adv, clip_eps)
            v_loss = _value_loss(net.value(obs[idx]), batch["values"][idx], returns[idx],
                                 vf_clip)
            loss = pg_loss + vf_coef * v_loss
            if ent_coef > 0:
                loss = loss - ent_coef * entropy.mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=True)
            optimizer.step()
        epochs += 1
        if target_kl is not None:
            with torch.no_grad():
                logp_all, _ = net.log_prob(obs, actions)
                if float(kl_k3(old_logp, logp_all).mean()) > target_kl:
                    break
    return _update_stats(net, batch, epochs, pg_loss, v_loss, clip_eps=clip_eps,
                         norm_adv=norm_adv, kl_k3=kl_k3, log_ratios=log_ratios)


@torch.no_grad()
def _update_stats(net, batch, epochs, pg_loss, v_loss, *, clip_eps, norm_adv, kl_k3,
                  log_ratios):
    """The diagnostics of one PPO update (:func:`_ppo_epochs`), measured on the whole batch
    after its last epoch: the k3 KL estimate to the old policy, the clip fraction, the
    entropy and the last minibatch's losses (and, with ``log_ratios``, the ratio
    statistics of :func:`_ratio_stats`)."""
    obs, actions, old_logp = batch["obs"], batch["actions"], batch["logp"]
    logp_all, entropy = net.log_prob(obs, actions)
    ratio = torch.exp(logp_all - old_logp)
    stats = {"epochs": epochs,
             "approx_kl": float(kl_k3(old_logp, logp_all).mean()),
             "clip_fraction": (float(((ratio - 1.0).abs() > clip_eps).float().mean())
                               if clip_eps is not None else float("nan")),
             "entropy": float(entropy.mean()),
             "pg_loss": float(pg_loss), "v_loss": float(v_loss)}
    if log_ratios:
        adv = batch["adv"]
        if norm_adv and len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        stats.update(_ratio_stats(ratio, adv, clip_eps))
    return stats
