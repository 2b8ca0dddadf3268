"""Advantage actor-critic (A2C): the synchronous, vectorised form of A3C (Mnih et al. 2016).

The loop, top to bottom, in :func:`a2c` (the core that :func:`train` calls): play ``num_steps``
steps in each of ``num_envs`` environments with the current stochastic policy (one forward pass
for all of them a step), compute GAE advantages and lambda-returns of the rollout
(:func:`rlnotes.returns.gae`; ``lam = 1`` gives the n-step returns of A3C), and take one
gradient step on

    L = -mean_t[ logp(a_t|s_t) * A_t ] + vf_coef * mean_t[ (G_t - V(s_t))^2 ]
        - ent_coef * mean_t[ H(pi(.|s_t)) ].

Defined in: Actor-critic and generalised advantage estimation.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from rlnotes._validate import (require_choice, require_gamma, require_in_range, require_int,
                               require_real)
from rlnotes.deeprl.envs import env_spec, make_vec_env
from rlnotes.deeprl.normalize import normalize_inputs
from rlnotes.deeprl.rollout import (ActorCritic, MostProbablePolicy, check_obs_space,
                                    collect_rollout, masked_mean, rollout_advantages)
from rlnotes.deeprl.training import (Reporter, check_common, check_flag, check_hidden_sizes,
                                     check_max_grad_norm, check_positive, check_rollout_size,
                                     choose_device, torch_threads)

__all__ = ["train", "a2c", "a2c_loss", "n_step_returns", "make_optimizer"]


def n_step_returns(rewards, values, dones, last_value, gamma: float, n: int) -> np.ndarray:
    """The n-step returns of a rollout, the critic's targets in A3C:

        G_t^(n) = r_{t+1} + gamma r_{t+2} + ... + gamma^(m-1) r_{t+m} + gamma^m V(s_{t+m}),

    with m = n, or fewer where the rollout ends first (then V(s_T) = ``last_value``) or the
    episode ends first (then nothing is bootstrapped: d_{t+m-1} = 1).

    ==============  ==============  ================================================
    argument        shape           meaning
    ==============  ==============  ================================================
    ``rewards``     (T,) or (T, N)  ``rewards[t] = r_{t+1}``
    ``values``      rewards' shape  ``values[t] = V(s_t)``
    ``dones``       rewards' shape  ``d_t = 1`` when step t ended the episode; or None
    ``last_value``  () or (N,)      V(s_T)
    ``n``           int >= 1        steps before bootstrapping
    ==============  ==============  ================================================

    Returns a float64 numpy array of rewards' shape. n = 1 gives the TD targets
    r_{t+1} + gamma (1 - d_t) V(s_{t+1}); n >= T gives GAE's lambda = 1 returns.

    Defined in: Actor-critic and generalised advantage estimation, section n-step returns.
    """
    r = np.asarray(rewards, dtype=np.float64)
    V = np.asarray(values, dtype=np.float64)
    if r.ndim not in (1, 2) or V.shape != r.shape:
        raise ValueError(f"rewards and values must have the same shape (T,) or (T, N), got "
                         f"{r.shape} and {V.shape}")
    d = np.zeros_like(r) if dones is None else np.asarray(dones, dtype=np.float64)
    if d.shape != r.shape:
        raise ValueError(f"dones must have the shape of rewards {r.shape}, got {d.shape}")
    last = np.broadcast_to(np.asarray(last_value, dtype=np.float64), r.shape[1:])
    gamma = require_gamma(gamma)
    n = require_int(n, "n", minimum=1)
    T = len(r)
    next_V = np.concatenate([V[1:], last[None]])  # V(s_{t+1})
    G = np.empty_like(r)
    for t in range(T):
        acc, disc, alive = np.zeros(r.shape[1:]), 1.0, np.ones(r.shape[1:])
        for k in range(min(n, T - t)):
            i = t + k
            acc = acc + disc * alive * r[i]
            disc *= gamma
            if k == n - 1 or i == T - 1:  # bootstrap from the state the sum stops in
                acc = acc + disc * alive * (1 - d[i]) * next_V[i]
            alive = alive * (1 - d[i])
        G[t] = acc
    return G


def _check_loss_args(logp, adv, values, returns, entropy, mask, vf_coef, ent_coef):
    """:func:`a2c_loss`'s argument checks; returns ``(mask, vf_coef, ent_coef)`` cleaned (an
    all-true mask for None)."""
    for x, name in ((logp, "logp"), (adv, "adv"), (values, "values"), (returns, "returns"),
                    (entropy, "entropy")):
        if not torch.is_tensor(x) or x.ndim != 1:
            raise ValueError(f"{name} must be a 1-d torch tensor (B,), got "
                             f"{getattr(x, 'shape', type(x).__name__)}")
        if x.shape != logp.shape:
            raise ValueError(f"{name} must have the shape of logp {tuple(logp.shape)}, got "
                             f"{tuple(x.shape)}")
    vf_coef = require_real(vf_coef, "vf_coef")
    ent_coef = require_real(ent_coef, "ent_coef")
    if vf_coef < 0 or ent_coef < 0:
        raise ValueError(f"vf_coef and ent_coef must be >= 0, got {vf_coef} and {ent_coef}")
    if mask is None:
        mask = torch.ones_like(logp, dtype=torch.bool)
    elif not torch.is_tensor(mask) or mask.shape != logp.shape:
        raise ValueError(f"mask must be a tensor of shape {tuple(logp.shape)} or None")
    return mask, vf_coef, ent_coef


def a2c_loss(logp, adv, values, returns, entropy, mask=None, *, vf_coef: float = 0.5,
             ent_coef: float = 0.0):
    """The A2C loss of a batch and its parts, ``(loss, policy_loss, value_loss)``:

        policy_loss = -mean[ logp * A ],   value_loss = mean[ (G - V)^2 ],
        loss = policy_loss + vf_coef * value_loss - ent_coef * mean[ H ],

    means over the entries where ``mask`` is true (all when None). ``adv`` and ``returns`` are
    targets: no gradient flows through them.

    ===========  ======  ===============================================
    argument     shape   meaning
    ===========  ======  ===============================================
    ``logp``     (B,)    log pi(a_t|s_t), differentiable
    ``adv``      (B,)    advantage estimates A_t
    ``values``   (B,)    V(s_t), differentiable
    ``returns``  (B,)    the critic's targets G_t (e.g. lambda-returns)
    ``entropy``  (B,)    H(pi(.|s_t))
    ``mask``     (B,)    bool or 0/1: which entries count (None: all)
    ===========  ======  ===============================================

    Defined in: Actor-critic and generalised advantage estimation,
    section A2C: synchronous advantage actor-critic.
    """
    mask, vf_coef, ent_coef = _check_loss_args(logp, adv, values, returns, entropy, mask,
                                               vf_coef, ent_coef)
    policy_loss = -masked_mean(logp * adv.detach(), mask)
    value_loss = masked_mean((returns.detach() - values).pow(2), mask)
    loss = policy_loss + vf_coef * value_loss
    if ent_coef:
        loss = loss - ent_coef * masked_mean(entropy, mask)
    return loss, policy_loss, value_loss


def check_policy_args(env_id, hidden_sizes, learning_rate, gamma, init_std):
    """Check the arguments REINFORCE and A2C share beyond the trainer contract's (see
    :func:`rlnotes.deeprl.training.check_common`); returns the cleaned ones."""
    env_spec(env_id)
    hidden_sizes = check_hidden_sizes(hidden_sizes)
    learning_rate = check_positive(learning_rate, "learning_rate")
    gamma = require_gamma(gamma)
    init_std = require_real(init_std, "init_std")
    if init_std <= 0:
        raise ValueError(f"init_std must be > 0 (a Gaussian's standard deviation), got {init_std}")
    return hidden_sizes, learning_rate, gamma, init_std


def make_optimizer(params, name: str, learning_rate: float, eps: float = 1e-5):
    """Adam or RMSprop (alpha 0.99 as in A3C), with ``eps`` added to the square root of the
    running mean square of the gradients (PyTorch's convention, outside the root): a parameter
    whose recent gradients are much smaller than ``eps`` takes a plain gradient step of about
    ``learning_rate / eps`` times its gradient. The default 1e-5 is SB3's A2C's and the one
    REINFORCE uses; :func:`train` passes its ``optimizer_eps`` (1e-3 by default, chosen for
    RMSProp on CartPole).

    Defined in: Actor-critic and generalised advantage estimation, section RMSProp's optimizer_eps.
    """
    require_choice(name, "optimizer", ("adam", "rmsprop"))
    learning_rate = check_positive(learning_rate, "learning_rate")
    eps = check_positive(eps, "eps")
    if name == "adam":
        return torch.optim.Adam(params, lr=learning_rate, eps=eps)
    return torch.optim.RMSprop(params, lr=learning_rate, alpha=0.99, eps=eps)


def train(env_id: str, total_steps: int, *, seed: int = 0, callback=None,
          num_envs: int = 8,
          num_steps: int = 8,
          hidden_sizes=(64, 64),
          learning_rate: float = 3e-3,
          vf_lr_scale: float = 3.0,
          lr_final_fraction: float = 0.2,
          optimizer: str = "rmsprop",
          optimizer_eps: float = 1e-3,
          gamma: float = 0.99,
          lam: float = 0.95,
          vf_coef: float = 0.5,
          ent_coef: float = 0.01,
          normalize_advantages: bool = False,
          norm_obs: bool = True,
          max_grad_norm: float | None = 0.5,
          init_std: float = 1.0,
          num_threads: int = 1,
          device=None,
          progress: bool = False) -> MostProbablePolicy:
    """Train an A2C agent on ``env_id`` for ``total_steps`` environment steps; return its policy
    (the most probable action; the Gaussian's mean for Box actions): ``policy(obs)`` maps
    (N, obs_dim) observations to (N,) int64 actions for a Discrete action space, (N, k) float32
    actions for a k-dimensional Box. Follows the trainer contract of the book (same arguments,
    same run).

    Hyperparameters (the defaults are the chapter's CartPole-v1 settings, chosen by a sweep on
    seeds 200-229, then, for norm_obs and ent_coef, by sweeps on seeds 500-549 checked on
    700-749, and for optimizer_eps on 500-549 and 700-749 checked on 900-999: see
    benchmarks/README.md):

    - num_envs: environments stepped together; total_steps counts steps summed over them
    - num_steps: steps per env in a rollout (n of the n-step returns); one update per rollout
    - hidden_sizes: widths of the hidden layers of the policy and of the value network (tanh)
    - learning_rate: the optimiser's step size at the start
    - vf_lr_scale: the critic's step size is learning_rate * vf_lr_scale (its targets are on
      the scale of the returns, so it may need larger steps than the actor)
    - lr_final_fraction: the step size decays linearly to this fraction of it by total_steps
    - optimizer: "adam" or "rmsprop"
    - optimizer_eps: the constant the optimiser adds to the square root of its running mean
      square (> 0): parameters whose recent gradients are well below it take plain gradient
      steps of learning_rate / optimizer_eps times the gradient (with the default, most of them
      on CartPole); it applies to Adam too, for which 1e-3 was not tuned
    - gamma: discount factor in [0, 1]
    - lam: the GAE parameter lambda in [0, 1] (1: n-step returns; 0: one-step TD errors)
    - vf_coef: weight of the value loss
    - ent_coef: weight of the entropy bonus
    - normalize_advantages: standardise the advantages of each rollout (mean 0, std 1)
    - norm_obs: normalise the observations by their running mean and variance (clipped to
      +-10) in front of the policy and the value network
      (:func:`rlnotes.deeprl.normalize.normalize_inputs`); the statistics are updated with each
      rollout's valid observations after its gradient step
    - max_grad_norm: clip the gradient's global norm to this (None: no clipping)
    - init_std: Box actions: the Gaussian policy's initial standard deviation (> 0)
    - num_threads: torch threads during training (1 is fastest for small networks)
    - device: None = CPU unless RLNOTES_DEVICE is set; "auto" = rlnotes.get_device(); or a name
    - progress: show a progress bar

    ``callback(steps, policy)`` is called after every update (num_envs * num_steps <= 2048
    steps); returning True stops training. The total is rounded up to whole rollouts.

    Defined in: Actor-critic and generalised advantage estimation, section A2C on CartPole.
    """
    total_steps, seed, num_threads = check_common(total_steps, seed, callback, num_threads)
    hidden_sizes, learning_rate, gamma, init_std = check_policy_args(
        env_id, hidden_sizes, learning_rate, gamma, init_std)
    num_envs, num_steps = check_rollout_size(num_envs, num_steps)
    lr_final_fraction = require_in_range(lr_final_fraction, "lr_final_fraction", 0.0, 1.0)
    vf_lr_scale = check_positive(vf_lr_scale, "vf_lr_scale")
    require_choice(optimizer, "optimizer", ("adam", "rmsprop"))
    optimizer_eps = check_positive(optimizer_eps, "optimizer_eps")
    lam = require_in_range(lam, "lam", 0.0, 1.0)
    vf_coef = require_real(vf_coef, "vf_coef")
    ent_coef = require_real(ent_coef, "ent_coef")
    if vf_coef < 0 or ent_coef < 0:
        raise ValueError(f"vf_coef and ent_coef must be >= 0, got {vf_coef} and {ent_coef}")
    check_flag(normalize_advantages, "normalize_advantages")
    check_flag(norm_obs, "norm_obs")
    max_grad_norm = check_max_grad_norm(max_grad_norm)
    dev = choose_device(device)

    envs = make_vec_env(env_id, num_envs)
    try:
        act_info = check_obs_space(envs, env_id)
    except ValueError:
        envs.close()
        raise
    obs_dim = envs.single_observation_space.shape[0]

    with torch_threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # network initialisation; the global stream is restored after
        net = ActorCritic(obs_dim, act_info, hidden_sizes, init_std=init_std, device=dev)
        obs_norm = normalize_inputs(net) if norm_obs else None
        actor = list(net.pi.parameters()) + ([] if net.discrete else [net.log_std])
        groups = [{"params": actor, "scale": 1.0},
                  {"params": list(net.v.parameters()), "scale": vf_lr_scale}]
        opt = make_optimizer(groups, optimizer, learning_rate, optimizer_eps)
        for group in opt.param_groups:
            group["lr"] = learning_rate * group["scale"]
        generator = torch.Generator(device=dev).manual_seed(seed)
        policy = MostProbablePolicy(net)
        obs, _ = envs.reset(seed=seed)
        obs = np.asarray(obs, dtype=np.float32)

        def lr_scale(steps):  # linear decay to lr_final_fraction of the step size
            return 1.0 - (1.0 - lr_final_fraction) * min(1.0, steps / total_steps)

        reporter = Reporter(total_steps, callback, policy, progress=progress, desc="A2C")
        try:
            for steps in a2c(envs, obs, net, opt, total_steps, num_steps=num_steps,
                             lr=learning_rate, lr_scale=lr_scale, gamma=gamma, lam=lam,
                             vf_coef=vf_coef, ent_coef=ent_coef,
                             normalize_advantages=normalize_advantages,
                             max_grad_norm=max_grad_norm, generator=generator,
                             obs_norm=obs_norm):
                if reporter(steps):
                    break
        finally:
            envs.close()
            reporter.close()
    net.eval()
    return policy


def a2c(envs, obs, net, opt, total_steps, *, num_steps, lr, lr_scale, gamma, lam, vf_coef,
        ent_coef, normalize_advantages, max_grad_norm, generator, obs_norm=None):
    """A2C's loop, the chapter's pseudocode (the core of :func:`train`): a rollout of T =
    ``num_steps`` steps in each of the N envs, its GAE advantages and lambda-returns, one
    gradient step on :func:`a2c_loss`. Each of ``opt``'s parameter groups has the step
    size ``lr * group["scale"] * lr_scale(steps)``; ``obs_norm``: a running observation
    normaliser, updated after the step (None: none). Yields the env steps after each
    update.

    Defined in: Actor-critic and generalised advantage estimation,
    section A2C: synchronous advantage actor-critic.
    """
    N, obs_dim = obs.shape
    params = list(net.parameters())
    tensor = partial(torch.as_tensor, device=params[0].device)
    autoreset = np.zeros(N, dtype=bool)
    steps = 0
    while steps < total_steps:
        ro, obs, autoreset = collect_rollout(envs, net, obs, autoreset, num_steps,
                                             generator)
        steps += N * num_steps
        adv, ret = rollout_advantages(ro, gamma, lam)  # (T, N): A_t and G_t^lambda
        mask = tensor(ro.valid.reshape(-1))  # False on autoreset steps
        adv = tensor(adv.reshape(-1), dtype=torch.float32)
        ret = tensor(ret.reshape(-1), dtype=torch.float32)
        if normalize_advantages:
            m = mask.float()
            n = m.sum().clamp(min=2.0)
            mean = (adv * m).sum() / n
            std = (((adv - mean) ** 2 * m).sum() / (n - 1)).sqrt()
            adv = (adv - mean) / (std + 1e-8)
        o = tensor(ro.obs.reshape(-1, obs_dim))
        a = tensor(ro.actions.reshape((-1,) + ro.actions.shape[2:]))
        logp, entropy = net.log_prob(o, a)
        values = net.value(o)
        loss, _, _ = a2c_loss(logp, adv, values, ret, entropy, mask,
                              vf_coef=vf_coef, ent_coef=ent_coef)
        for group in opt.param_groups:
            group["lr"] = lr * group["scale"] * lr_scale(steps)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=True)
        opt.step()
        if obs_norm is not None and bool(mask.any()):
            obs_norm.update(o[mask])  # the statistics move between updates only
        yield steps
