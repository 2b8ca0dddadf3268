"""On-policy rollouts: an actor-critic network for Discrete or Box actions, the fixed-length
rollout every on-policy trainer collects (REINFORCE, A2C, TRPO, PPO), and its GAE advantages.

A rollout is ``T`` steps of ``N`` vectorised environments, stored as (T, N, ...) arrays. gymnasium
vector envs reset an episode on the step *after* it ends (autoreset mode ``NEXT_STEP``): that step
ignores the action, returns reward 0 and the first observation of the next episode. The rollout
keeps the rectangle and marks such steps with ``valid = False``; losses average over valid steps
only (:func:`masked_mean`). :func:`rollout_advantages` turns the rollout into GAE advantages with
the two kinds of episode end kept apart:

- ``terminated`` (the task ended): no value after it, ``d_t = 1``;
- ``truncated`` (a time limit cut the episode): the state it stopped in still has a value. Its
  observation is the one the following (invalid) step was taken in, so ``values[t + 1]`` is
  V(s_trunc); the step's reward becomes ``r + gamma V(s_trunc)`` with ``d_t = 1``. At the last
  step of the rollout the bootstrap comes from ``last_value`` as usual.

Defined in: Actor-critic and generalised advantage estimation,
section A2C: synchronous advantage actor-critic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlnotes._validate import require_gamma, require_in_range, require_int, require_real
from rlnotes.deeprl.envs import space_info
from rlnotes.deeprl.networks import mlp
from rlnotes.deeprl.normalize import Normalized
from rlnotes.returns import gae

__all__ = ["ActorCritic", "MostProbablePolicy", "Rollout", "collect_rollout",
           "rollout_advantages", "masked_mean", "check_obs_space"]


def check_obs_space(envs, env_id: str) -> dict:
    """The action space's :func:`space_info`, after checking that ``envs`` observes flat Box
    vectors and acts in a Discrete or 1-d Box space (``ValueError`` naming ``env_id``)."""
    obs_info = space_info(envs.single_observation_space)
    if obs_info["discrete"] or len(obs_info["shape"]) != 1:
        raise ValueError(f"env_id {env_id!r} must have a flat Box observation space, got "
                         f"{envs.single_observation_space}")
    act_info = space_info(envs.single_action_space)
    if not act_info["discrete"] and len(act_info["shape"]) != 1:
        raise ValueError(f"env_id {env_id!r} must have Discrete or flat Box actions, got "
                         f"{envs.single_action_space}")
    return act_info


def _fast_forward(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``seq(x)`` for an :func:`mlp`, without nn.Module's per-call overhead (the same ops:
    several microseconds saved per layer, which add up over thousands of acting steps). A
    :class:`~rlnotes.deeprl.normalize.Normalized` MLP applies its normaliser first."""
    if isinstance(seq, Normalized):
        x, seq = seq.normalizer(x), seq.body
    for layer in seq:
        if isinstance(layer, nn.Linear):
            x = F.linear(x, layer.weight, layer.bias)
        elif isinstance(layer, nn.Tanh):
            x = torch.tanh(x)
        elif isinstance(layer, nn.ReLU):
            x = torch.relu(x)
        else:
            x = layer(x)
    return x


class ActorCritic(nn.Module):
    """A policy network and a value network side by side (no shared layers).

    Discrete actions: the policy network outputs logits, pi(a|s) = softmax(logits)_a.
    Box actions: it outputs the mean mu(s) of a Gaussian with a state-independent standard
    deviation ``sigma = exp(log_std)`` (one learned parameter per action dimension,
    initialised to ``init_std``):

        log pi(a|s) = -sum_i [ (a_i - mu_i)^2 / (2 sigma_i^2) + log sigma_i + log(2 pi) / 2 ].

    ==============  ==========  ============================================
    argument        type        meaning
    ==============  ==========  ============================================
    ``obs_dim``     int         length of an observation vector
    ``act_info``    dict        :func:`rlnotes.deeprl.space_info` of actions
    ``hidden``      ints        hidden widths of both networks
    ``init_std``    float > 0   Gaussian policies: the initial sigma
    ==============  ==========  ============================================

    Defined in: Actor-critic and generalised advantage estimation,
    section A2C: synchronous advantage actor-critic.
    """

    def __init__(self, obs_dim: int, act_info: dict, hidden=(64, 64), *,
                 activation: str = "tanh", init_std: float = 1.0, device=None,
                 dtype=torch.float32):
        super().__init__()
        init_std = require_real(init_std, "init_std")
        if init_std <= 0:
            raise ValueError(f"init_std must be > 0 (a Gaussian's standard deviation), "
                             f"got {init_std}")
        self.discrete = bool(act_info["discrete"])
        act_dim = act_info["n"] if self.discrete else int(np.prod(act_info["shape"]))
        self.act_dim = act_dim
        self.pi = mlp([obs_dim, *hidden, act_dim], activation=activation, out_gain=0.01,
                      device=device, dtype=dtype)
        self.v = mlp([obs_dim, *hidden, 1], activation=activation, out_gain=1.0,
                     device=device, dtype=dtype)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((act_dim,), math.log(init_std),
                                                   device=device, dtype=dtype))
            self.register_buffer("low", torch.as_tensor(act_info["low"], dtype=dtype,
                                                        device=device))
            self.register_buffer("high", torch.as_tensor(act_info["high"], dtype=dtype,
                                                         device=device))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) for a (B, d) batch: shape (B,)."""
        return _fast_forward(self.v, obs).squeeze(-1)

    def log_prob(self, obs: torch.Tensor, actions: torch.Tensor):
        """``(logp, entropy)`` of ``actions`` in ``obs``, each of shape (B,)."""
        out = _fast_forward(self.pi, obs)
        if self.discrete:
            logits = out - out.logsumexp(dim=-1, keepdim=True)
            logp = logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            entropy = -(logits.exp() * logits).sum(-1)
            return logp, entropy
        log_std = self.log_std.expand_as(out)
        z = (actions - out) * torch.exp(-log_std)
        logp = (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)
        return logp, entropy

    @torch.no_grad()
    def act(self, obs: torch.Tensor, generator: torch.Generator):
        """Sample one action per row: ``(actions, logp, values)``, no gradients.

        Discrete: inverse-CDF sampling with one uniform number per row (actions (B,) long).
        Box: ``mu + sigma * eps`` with eps ~ N(0, I) (actions (B, act_dim), not clipped).
        """
        pi, v = self.pi, self.v
        if isinstance(pi, Normalized) and isinstance(v, Normalized) \
                and pi.normalizer is v.normalizer:  # one shared layer: normalise once
            obs, pi, v = pi.normalizer(obs), pi.body, v.body
        out = _fast_forward(pi, obs)
        values = _fast_forward(v, obs).squeeze(-1)
        if self.discrete:
            logits = out - out.logsumexp(dim=-1, keepdim=True)
            cdf = logits.exp().cumsum(-1)
            u = torch.rand(obs.shape[0], 1, generator=generator, device=obs.device,
                           dtype=cdf.dtype)
            actions = (cdf < u * cdf[:, -1:]).sum(-1).clamp_(max=self.act_dim - 1)
            logp = logits.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            return actions, logp, values
        eps = torch.randn(out.shape, generator=generator, device=obs.device, dtype=out.dtype)
        std = self.log_std.exp()
        actions = out + std * eps
        logp = (-0.5 * eps.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return actions, logp, values

    @torch.no_grad()
    def most_probable(self, obs: torch.Tensor) -> torch.Tensor:
        """argmax_a pi(a|s) (Discrete) or the mean clipped to the action bounds (Box)."""
        out = _fast_forward(self.pi, obs)
        if self.discrete:
            return out.argmax(dim=-1)
        return torch.maximum(torch.minimum(out, self.high), self.low)


class MostProbablePolicy:
    """What the policy-gradient trainers return: ``policy(obs)`` is the most probable action
    (the Gaussian's mean, clipped to the action bounds, for Box actions).

    Pure: no random numbers, no gradients, no state. ``policy.net`` is the trained
    :class:`ActorCritic`; ``policy.value(obs)`` gives the critic's V(s) as a numpy array.

    ==========  ==========  ========================================
    argument    shape       dtype
    ==========  ==========  ========================================
    ``obs``     (N, d)      float32 numpy array
    returns     (N,)        int64 (Discrete) or (N, k) float32 (Box)
    ==========  ==========  ========================================

    Defined in: Actor-critic and generalised advantage estimation,
    section A2C: synchronous advantage actor-critic.
    """

    def __init__(self, net: ActorCritic):
        self.net = net
        first = next(net.pi.parameters())
        self.device, self.dtype, self.obs_dim = first.device, first.dtype, first.shape[1]

    def _tensor(self, obs) -> torch.Tensor:
        obs = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device,
                              dtype=self.dtype)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (N, {self.obs_dim}), got {tuple(obs.shape)}")
        return obs

    def __call__(self, obs) -> np.ndarray:
        return self.net.most_probable(self._tensor(obs)).cpu().numpy()

    @torch.no_grad()
    def value(self, obs) -> np.ndarray:
        return self.net.value(self._tensor(obs)).cpu().numpy()


@dataclass
class Rollout:
    """T steps of N environments; every field is a (T, N, ...) numpy array.

    ``obs`` (T, N, d), ``actions`` (T, N) or (T, N, k), ``logp`` and ``values`` (T, N) as the
    acting policy computed them (None when its ``act`` does not give them), ``rewards`` (in
    the env's dtype), ``terminated``, ``truncated`` (T, N), and ``valid`` (T, N) bool: False on the autoreset
    steps that are not transitions of the task. ``last_obs`` (N, d) is the observation after
    the last step; ``last_value`` its V (None without values).
    """

    obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray | None
    values: np.ndarray | None
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    last_obs: np.ndarray
    last_value: np.ndarray | None


def _numpy(x):
    return x.cpu().numpy() if torch.is_tensor(x) else x


def collect_rollout(envs, net, obs: np.ndarray, autoreset: np.ndarray, num_steps: int,
                    generator, *, device=None, until=None):
    """The on-policy rollout collector of every policy-gradient trainer (REINFORCE, A2C,
    TRPO, PPO). Plays ``num_steps`` steps of every env of ``envs`` with the stochastic
    policy of ``net`` (one forward pass for all envs a step): ``net.act(obs, generator)``
    returns ``(actions, logp, values)`` (``logp`` and ``values`` may be None). Returns
    ``(rollout, obs, autoreset)``: the :class:`Rollout` and the state to continue from.

    One convention for every trainer: gymnasium's NEXT_STEP autoreset step (the step after
    an episode ends ignores the action) is kept, so that time stays aligned, with ``valid
    = False``; ``terminated`` and ``truncated`` are kept apart, for the advantages to
    bootstrap a truncation from V(s_trunc), the value of the next row's observation. Box
    actions are clipped to the action space's bounds only when sent to the env; the
    rollout keeps the sampled action, whose log-probability the loss needs.
    ``until(done)``, if given, is called after each step with the (N,) flags ``terminated
    | truncated``; True ends the rollout there (it then has fewer than ``num_steps``
    rows).

    Defined in: Actor-critic and generalised advantage estimation, section A2C:
    synchronous advantage actor-critic.
    """
    require_int(num_steps, "num_steps", minimum=1)
    first = next(net.parameters())
    dtype, device = first.dtype, (device if device is not None else first.device)
    as_tensor = partial(torch.as_tensor, dtype=dtype, device=device)
    space = envs.single_action_space
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    rows = []
    for _ in range(num_steps):
        actions, logp, values = map(_numpy, net.act(as_tensor(obs), generator))
        env_actions = actions if net.discrete else np.clip(actions, low, high)
        next_obs, rewards, terminated, truncated, _ = envs.step(env_actions)
        valid = ~autoreset  # False on the autoreset step after an episode's end
        rows.append((obs, actions, logp, values, rewards, terminated, truncated, valid))
        obs = np.asarray(next_obs, dtype=np.float32)
        autoreset = np.logical_or(terminated, truncated)
        if until is not None and until(autoreset):
            break
    last_value = None
    if values is not None:  # the acting policy has a critic: V of the last observation
        with torch.no_grad():
            last_value = _numpy(net.value(as_tensor(obs)))
    return _stack_rows(rows, obs, last_value), obs, autoreset


def _stack_rows(rows, last_obs, last_value) -> Rollout:
    """The :class:`Rollout` of :func:`collect_rollout`'s per-step rows: each field stacked
    to (T, N, ...); rewards keep the env's dtype, the rest the networks' float32 or bool."""
    dtypes = {"obs": np.float32, "logp": np.float32, "values": np.float32,
              "terminated": bool, "truncated": bool, "valid": bool}
    names = ("obs", "actions", "logp", "values", "rewards", "terminated", "truncated", "valid")
    out = {}
    for k, column in zip(names, zip(*rows)):
        out[k] = (None if column[0] is None else
                  np.stack(column).astype(dtypes.get(k, column[0].dtype), copy=False))
    return Rollout(**out, last_obs=last_obs, last_value=last_value)


def rollout_advantages(rollout: Rollout, gamma: float, lam: float):
    """GAE advantages and lambda-returns of a rollout, ``(adv, returns)`` of shape (T, N).

    Calls :func:`rlnotes.returns.gae` with ``d_t = terminated_t or truncated_t`` and, for a
    step truncated by a time limit inside the rollout, the reward ``r_t + gamma V(s_trunc)``
    where V(s_trunc) is ``values[t + 1]`` (the observation the autoreset step was taken in).
    A truncation at the last step bootstraps from ``last_value`` (its flag stays 0).
    Invalid (autoreset) steps get ``d_t = 1``, so they never leak into their neighbours;
    their own entries are meaningless and the losses mask them out.

    Defined in: Actor-critic and generalised advantage estimation,
    section Generalised advantage estimation.
    """
    gamma = require_gamma(gamma)
    lam = require_in_range(lam, "lam", 0.0, 1.0)
    r = rollout.rewards.astype(np.float32).astype(np.float64)  # in the networks' precision
    V = rollout.values.astype(np.float64)
    term, trunc, valid = rollout.terminated, rollout.truncated, rollout.valid
    cut = trunc & ~term  # a time limit: bootstrap from the state it stopped in
    inside = cut.copy()
    inside[-1] = False
    r = r.copy()
    r[:-1] += gamma * np.where(inside[:-1], V[1:], 0.0)
    dones = (term | inside | ~valid).astype(np.float64)
    adv, ret = gae(r, V, dones, rollout.last_value.astype(np.float64), gamma, lam)
    return adv, ret


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``x`` over the entries where ``mask`` is true (valid steps)."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)
