"""On-policy machinery shared by TRPO and PPO: an actor-critic network (categorical or Gaussian
policy), the policy object a trainer returns, rollout collection in vectorised environments and
the advantages of a rollout.

Rollouts are collected by the one collector of every on-policy trainer,
:func:`rlnotes.deeprl.rollout.collect_rollout` (re-exported here), with its conventions for
autoreset steps (``valid``), truncation and termination.

Defined in: TRPO and PPO, section PPO on CartPole.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from rlnotes._validate import require_int
from rlnotes.deeprl.envs import env_spec, make_vec_env, space_info
from rlnotes.deeprl.networks import mlp
from rlnotes.deeprl.rollout import Rollout, collect_rollout
from rlnotes.returns import gae

__all__ = ["ActorCritic", "GreedyPolicy", "collect_rollout", "rollout_advantages",
           "make_train_envs"]

_LOG_2PI = math.log(2.0 * math.pi)


def make_train_envs(env_id: str, num_envs: int, *, discrete_only: bool = False):
    """The vector env of a trainer and what its spaces are: ``(envs, obs_dim, act_info)``.

    ``ValueError`` naming ``env_id`` when it is unknown, its observations are not a flat Box, or
    its actions are neither Discrete nor Box (or not Discrete when ``discrete_only``)."""
    env_spec(env_id)
    envs = make_vec_env(env_id, num_envs)
    try:
        obs_info = space_info(envs.single_observation_space)
        if obs_info["discrete"] or len(obs_info["shape"]) != 1:
            raise ValueError(f"env_id {env_id!r} must have a flat Box observation space, got "
                             f"{envs.single_observation_space}")
        act_info = space_info(envs.single_action_space)
        if not act_info["discrete"] and (len(act_info["shape"]) != 1 or discrete_only):
            raise ValueError(f"env_id {env_id!r} must have a Discrete or flat Box action space, "
                             f"got {envs.single_action_space}")
    except ValueError:
        envs.close()
        raise
    return envs, obs_info["shape"][0], act_info


class ActorCritic(nn.Module):
    """Two separate MLPs: the actor gives the logits of a categorical policy (Discrete actions)
    or the mean of a diagonal Gaussian whose log standard deviation is a free parameter vector
    (Box actions); the critic gives V(s).

    =====================  ===========  ===============================================
    method                 shapes       meaning
    =====================  ===========  ===============================================
    ``dist_params(obs)``   (B, d) ->    logits (B, A), or the Gaussian mean (B, k)
                           (B, A|k)
    ``log_prob(obs, a)``   -> (B,)      log pi(a|s), and the entropy (B,) of pi(.|s)
    ``value(obs)``         -> (B,)      V(s)
    =====================  ===========  ===============================================

    Defined in: TRPO and PPO, section PPO on CartPole.
    """

    def __init__(self, obs_dim: int, act_info: dict, hidden_sizes=(64, 64), *,
                 activation: str = "tanh", log_std_init: float = 0.0, device=None):
        super().__init__()
        self.discrete = bool(act_info["discrete"])
        out = act_info["n"] if self.discrete else act_info["shape"][0]
        self.actor = mlp([obs_dim, *hidden_sizes, out], activation=activation, out_gain=0.01,
                         device=device)
        self.critic = mlp([obs_dim, *hidden_sizes, 1], activation=activation, out_gain=1.0,
                          device=device)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((out,), float(log_std_init), device=device))
            self.register_buffer("low", torch.as_tensor(act_info["low"], device=device))
            self.register_buffer("high", torch.as_tensor(act_info["high"], device=device))

    def dist_params(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(obs)

    def log_prob(self, obs: torch.Tensor, actions: torch.Tensor, params=None, *,
                 entropy: bool = True):
        """``(logp, entropy)`` of ``actions`` in ``obs``; ``params`` reuses dist_params(obs);
        ``entropy=False`` skips the entropy (returned as None)."""
        out = self.actor(obs) if params is None else params
        if self.discrete:
            logits = out.log_softmax(dim=-1)
            logp = logits.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            return logp, (-(logits.exp() * logits).sum(-1) if entropy else None)
        log_std = self.log_std.expand_as(out)
        z = (actions - out) * torch.exp(-log_std)
        logp = (-0.5 * z.pow(2) - log_std - 0.5 * _LOG_2PI).sum(-1)
        return logp, ((log_std + 0.5 * (1.0 + _LOG_2PI)).sum(-1) if entropy else None)

    def kl_from(self, old_params: torch.Tensor, params: torch.Tensor,
                old_log_std: torch.Tensor | None = None) -> torch.Tensor:
        """Exact KL(pi_old(.|s) || pi(.|s)) per state, (B,), from both distributions'
        parameters (logits, or means with the log standard deviations)."""
        if self.discrete:
            old = old_params.log_softmax(-1)
            new = params.log_softmax(-1)
            return (old.exp() * (old - new)).sum(-1)
        log_std = self.log_std.expand_as(params)
        old_log_std = old_log_std.expand_as(params)
        var_ratio = torch.exp(2.0 * (old_log_std - log_std))
        diff = (params - old_params) * torch.exp(-log_std)
        return 0.5 * (var_ratio + diff.pow(2) - 1.0 - 2.0 * (old_log_std - log_std)).sum(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, rng: np.random.Generator):
        """What :func:`collect_rollout` calls: ``(actions, None, None)``, the actions of
        :meth:`sample` (the log-probabilities and values are computed later, in one pass over
        the whole rollout, by :func:`rollout_advantages`)."""
        return self.sample(obs, rng), None, None

    @torch.no_grad()
    def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions for a batch of observations, drawn with ``rng`` (one forward pass):
        inverse-CDF sampling for categorical policies, mean + std * noise for Gaussian ones."""
        out = self.actor(torch.as_tensor(obs, device=self.critic[0].weight.device))
        if self.discrete:
            cdf = out.softmax(-1).cumsum(-1).cpu().numpy()
            u = rng.random((len(cdf), 1)) * cdf[:, -1:]
            return np.minimum((cdf < u).sum(1), cdf.shape[1] - 1)
        std = self.log_std.exp().cpu().numpy()
        mean = out.cpu().numpy()
        return (mean + std * rng.standard_normal(mean.shape)).astype(np.float32)


class GreedyPolicy:
    """The policy a trainer returns: the most probable action (Discrete) or the mean clipped to
    the action bounds (Box). Pure: no random numbers, no gradients, no state. During training
    it wraps the live network, so it acts with the current weights.

    ==========  ==========  ====================================================
    argument    shape       dtype
    ==========  ==========  ====================================================
    ``obs``     (N, d)      float32 numpy array
    returns     (N,) or     int64 actions (Discrete); float32 (N, k) actions (Box,
                (N, k)      k = action dimension)
    ==========  ==========  ====================================================

    ``policy.net`` is the :class:`ActorCritic`; ``policy.diagnostics`` the per-update
    statistics of the run that produced it (a list of dicts).

    Defined in: TRPO and PPO, section PPO on CartPole.
    """

    def __init__(self, net: ActorCritic):
        self.net = net
        self.device = next(net.parameters()).device
        self.obs_dim = net.actor[0].in_features
        self.diagnostics: list[dict] = []

    @torch.no_grad()
    def __call__(self, obs) -> np.ndarray:
        obs = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (N, {self.obs_dim}), got {tuple(obs.shape)}")
        out = self.net.actor(obs)
        if self.net.discrete:
            return out.argmax(-1).cpu().numpy()
        return torch.clamp(out, self.net.low, self.net.high).cpu().numpy()


def rollout_advantages(net: ActorCritic, rollout: Rollout, gamma: float, lam: float):
    """The training batch of a rollout: its valid transitions, flattened, with GAE advantages.

    The conventions of the collector and of :func:`rlnotes.deeprl.rollout.rollout_advantages`
    (A2C's), computed in one pass: all T + 1 observations (the rollout's and ``last_obs``) are
    valued at once, since this network does not record values while acting. A step cut by a
    time limit bootstraps: ``gamma V(s_trunc)`` is added to its reward and the advantage
    recursion stops there (see :func:`rlnotes.returns.gae`); in NEXT_STEP mode ``obs[t + 1]``
    after such a step is the state the episode was cut in. Autoreset steps (``valid`` False)
    are left out of the batch. The log-probabilities of the policy that collected the data are
    computed here too, in one pass, before any update.

    Returns a dict of tensors with B valid transitions: ``obs`` (B, d), ``actions``, ``logp``,
    ``adv``, ``returns``, ``values`` (B,), ``params`` (the actor's outputs, (B, A|k)).

    Defined in: TRPO and PPO, section PPO on CartPole.
    """
    device = next(net.parameters()).device
    obs = torch.as_tensor(np.concatenate([rollout.obs, rollout.last_obs[None]]), device=device)
    T, N = rollout.rewards.shape
    with torch.no_grad():
        values = net.value(obs.reshape((T + 1) * N, -1)).reshape(T + 1, N)
        rewards = torch.as_tensor(rollout.rewards, dtype=torch.float32, device=device)
        truncated = torch.as_tensor(rollout.truncated, device=device)
        terminated = torch.as_tensor(rollout.terminated, device=device)
        # a truncated (not terminated) step bootstraps from the state it was cut in
        cut = truncated & ~terminated
        rewards = rewards + gamma * cut.to(rewards.dtype) * values[1:]
        adv, returns = gae(rewards, values[:-1], terminated | truncated, values[-1], gamma, lam)
        valid = torch.as_tensor(rollout.valid, device=device).reshape(-1)
        flat_obs = obs[:-1].reshape(T * N, -1)[valid]
        actions = torch.as_tensor(rollout.actions, device=device)
        actions = actions.reshape(T * N, *actions.shape[2:])[valid]
        params = net.dist_params(flat_obs)
        logp, _ = net.log_prob(flat_obs, actions, params)
    return {"obs": flat_obs, "actions": actions, "logp": logp, "params": params,
            "adv": adv.reshape(-1)[valid], "returns": returns.reshape(-1)[valid],
            "values": values[:-1].reshape(-1)[valid]}


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)``: 1 for a perfect critic, 0 for one no better
    than a constant, negative for a worse one (NaN when the returns do not vary).

    Defined in: TRPO and PPO, section Diagnostics and early stopping.
    """
    var = returns.var()
    if float(var) == 0.0:
        return float("nan")
    return float(1.0 - (returns - values).var() / var)


def evaluation_curve(train, env_id: str, total_steps: int, *, seed: int = 0,
                     eval_every: int = 2048, stop_at: float | None = None, **hyperparameters):
    """Run ``train(env_id, total_steps, seed=seed, callback=..., **hyperparameters)`` and
    evaluate the policy under the benchmark protocol (:class:`rlnotes.deeprl.Evaluator`) every
    ``eval_every`` steps. Returns ``(steps, scores, policy)``: the (K,) steps at which it was
    evaluated, the (K,) mean returns there, and the final policy. With ``stop_at`` training
    stops at the first evaluation whose mean return reaches it.

    Defined in: TRPO and PPO, section PPO on CartPole.
    """
    from rlnotes.deeprl.evaluation import Evaluator
    eval_every = require_int(eval_every, "eval_every", minimum=1)
    evaluator = Evaluator(env_id, seed)
    steps_seen, scores = [], []
    state = {"next": eval_every}

    def callback(steps, policy):
        if steps < state["next"]:
            return False
        state["next"] += eval_every
        steps_seen.append(steps)
        scores.append(float(evaluator(policy).mean()))
        return stop_at is not None and scores[-1] >= stop_at

    try:
        policy = train(env_id, total_steps, seed=seed, callback=callback, **hyperparameters)
    finally:
        evaluator.close()
    return np.asarray(steps_seen), np.asarray(scores), policy
