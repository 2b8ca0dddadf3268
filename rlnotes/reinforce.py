"""REINFORCE (Williams 1992): the Monte Carlo policy gradient, with the choice of Psi_t and an
optional learned state-value baseline.

The loop, top to bottom, in :func:`reinforce` (the core that :func:`train` calls): each of
``num_envs`` environments plays one whole episode with the current stochastic policy (one
forward pass for all of them a step); then one gradient step on

    L = -mean_t[ logp(a_t|s_t) * Psi_t ]  (+ vf_coef * mean_t[ (G_t - V(s_t))^2 ] with a baseline)

where Psi_t is the discounted return of the whole episode G_0 (``psi="total"``) or the
reward-to-go G_t (``psi="reward_to_go"``), minus V(s_t) when ``baseline="value"``.

Defined in: Policy gradients.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from rlnotes._validate import require_choice, require_int, require_real
from rlnotes.a2c import check_policy_args, make_optimizer
from rlnotes.deeprl.envs import make_vec_env
from rlnotes.deeprl.rollout import (ActorCritic, MostProbablePolicy, check_obs_space,
                                    collect_rollout, masked_mean)
from rlnotes.deeprl.training import (CALLBACK_INTERVAL, Reporter, check_common, check_flag,
                                     check_max_grad_norm, choose_device, torch_threads)
from rlnotes.returns import discounted_returns

__all__ = ["train", "reinforce", "episode_psi"]


def episode_psi(rewards, active, gamma: float, psi: str = "reward_to_go"):
    """Psi_t of a batch of whole episodes, one per column, shape (T, N):

        total:         Psi_t = G_0 = sum_k gamma^k r_{k+1}   (the same for every t)
        reward_to_go:  Psi_t = G_t = sum_{k >= t} gamma^(k-t) r_{k+1}

    ==============  ======  ================================================
    argument        shape   meaning
    ==============  ======  ================================================
    ``rewards``     (T, N)  r_{t+1} of episode n (0 after it ended)
    ``active``      (T, N)  bool: step t belongs to episode n
    ``gamma``       float   discount factor in [0, 1]
    ``psi``         str     "total" or "reward_to_go"
    ==============  ======  ================================================

    Returns Psi as a (T, N) float64 numpy array, 0 where ``active`` is False.

    Defined in: Policy gradients, section The Psi_t family.
    """
    require_choice(psi, "psi", ("total", "reward_to_go"))
    rewards = np.asarray(rewards, dtype=np.float64)
    active = np.asarray(active, dtype=bool)
    if rewards.ndim != 2 or active.shape != rewards.shape:
        raise ValueError(f"rewards and active must both have shape (T, N), got "
                         f"{rewards.shape} and {active.shape}")
    G = discounted_returns(np.where(active, rewards, 0.0), gamma)
    if psi == "total":
        G = np.broadcast_to(G[:1], G.shape)
    return np.where(active, G, 0.0)


def train(env_id: str, total_steps: int, *, seed: int = 0, callback=None,
          num_envs: int = 8,
          psi: str = "reward_to_go",
          baseline: str = "value",
          hidden_sizes=(64, 64),
          learning_rate: float = 1e-2,
          optimizer: str = "adam",
          gamma: float = 0.99,
          vf_coef: float = 0.5,
          normalize_advantages: bool = False,
          max_grad_norm: float | None = 1.0,
          init_std: float = 1.0,
          num_threads: int = 1,
          device=None,
          progress: bool = False) -> MostProbablePolicy:
    """Train REINFORCE on ``env_id`` for ``total_steps`` environment steps; return its policy
    (the most probable action; the Gaussian's mean for Box actions): ``policy(obs)`` maps
    (N, obs_dim) observations to (N,) int64 actions for a Discrete action space, (N, k) float32
    actions for a k-dimensional Box. Follows the trainer contract of the book (same arguments,
    same run).

    One update per batch of ``num_envs`` whole episodes, one per environment. The vector env
    steps every copy until the longest episode of the batch ends; the steps a copy takes after
    its episode ended are not learned from but count toward ``total_steps`` (they are
    environment steps all the same). A time-limit truncation ends the episode's return there
    (without a critic there is no value to bootstrap from); with ``baseline="value"`` the
    reward-to-go is bootstrapped with gamma^k V(s_trunc).

    Hyperparameters (the defaults are the chapter's CartPole-v1 settings):

    - num_envs: episodes per update (one per environment, stepped together)
    - psi: "total" (G_0 for every step) or "reward_to_go" (G_t)
    - baseline: "none" or "value" (a learned V(s), regressed on the reward-to-go)
    - hidden_sizes: widths of the hidden layers of the policy (and value) network (tanh)
    - learning_rate: the optimiser's step size
    - optimizer: "adam" or "rmsprop"
    - gamma: discount factor in [0, 1]
    - vf_coef: weight of the baseline's regression loss
    - normalize_advantages: standardise Psi_t over the batch (mean 0, std 1)
    - max_grad_norm: clip the gradient's global norm to this (None: no clipping)
    - init_std: Box actions: the Gaussian policy's initial standard deviation (> 0)
    - num_threads: torch threads during training (1 is fastest for small networks)
    - device: None = CPU unless RLNOTES_DEVICE is set; "auto" = rlnotes.get_device(); or a name
    - progress: show a progress bar

    ``callback(steps, policy)`` is called after every update and whenever another 2,048 steps
    have been taken; returning True stops training. A batch cut off by the budget is dropped.

    Defined in: Policy gradients, section REINFORCE on CartPole.
    """
    total_steps, seed, num_threads = check_common(total_steps, seed, callback, num_threads)
    hidden_sizes, learning_rate, gamma, init_std = check_policy_args(
        env_id, hidden_sizes, learning_rate, gamma, init_std)
    num_envs = require_int(num_envs, "num_envs", minimum=1)
    require_choice(psi, "psi", ("total", "reward_to_go"))
    require_choice(baseline, "baseline", ("none", "value"))
    require_choice(optimizer, "optimizer", ("adam", "rmsprop"))
    vf_coef = require_real(vf_coef, "vf_coef")
    if vf_coef < 0:
        raise ValueError(f"vf_coef must be >= 0, got {vf_coef}")
    check_flag(normalize_advantages, "normalize_advantages")
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
        torch.manual_seed(seed)
        net = ActorCritic(obs_dim, act_info, hidden_sizes, init_std=init_std, device=dev)
        params = list(net.pi.parameters())
        if not net.discrete:
            params.append(net.log_std)
        if baseline == "value":
            params += list(net.v.parameters())
        opt = make_optimizer(params, optimizer, learning_rate)
        generator = torch.Generator(device=dev).manual_seed(seed)
        policy = MostProbablePolicy(net)
        reporter = Reporter(total_steps, callback, policy, progress=progress, desc="REINFORCE")
        next_call = CALLBACK_INTERVAL

        def on_step(steps):  # the contract's callback every 2,048 steps, also inside a batch
            nonlocal next_call
            reporter.update(steps)
            if steps < next_call:
                return False
            next_call += CALLBACK_INTERVAL
            return reporter(steps)

        try:
            for steps in reinforce(envs, net, opt, params, total_steps, psi=psi,
                                   baseline=baseline, gamma=gamma, vf_coef=vf_coef,
                                   normalize_advantages=normalize_advantages,
                                   max_grad_norm=max_grad_norm, seed=seed,
                                   generator=generator, on_step=on_step):
                if reporter(steps):
                    break
        finally:
            envs.close()
            reporter.close()
    net.eval()
    return policy


def _play_episodes(envs, net, steps, total_steps, seed, generator, on_step):
    """One batch of :func:`reinforce`: reset every env and play one whole episode in each
    with the stochastic policy of ``net`` (the rollout ends when all have ended). Returns
    ``(rollout, mask, steps)``: the :class:`~rlnotes.deeprl.rollout.Rollout`, the (T, N)
    bool mask of the steps that belong to each env's episode, and the env steps counted so
    far (``N`` per vector step, including the steps of envs whose episode had ended).
    ``on_step(steps)`` is called after every vector step; when it returns True, or the
    budget ``total_steps`` runs out before every episode ended, the rollout and mask are
    None (a cut batch is not learned from).

    Defined in: Policy gradients, section REINFORCE on CartPole.
    """
    N, stop = envs.num_envs, False
    obs, _ = envs.reset(seed=seed) if steps == 0 else envs.reset()
    active = np.ones(N, dtype=bool)  # the env's first episode is still running

    def until(done):
        nonlocal steps, stop
        steps += N
        np.logical_and(active, ~done, out=active)
        stop = on_step(steps)
        return stop or not active.any() or steps >= total_steps

    T_max = -(-(total_steps - steps) // N)  # vector steps left in the budget
    ro, _, _ = collect_rollout(envs, net, np.asarray(obs, dtype=np.float32),
                               np.zeros(N, dtype=bool), T_max, generator, until=until)
    if stop or active.any():
        return None, None, steps
    done = ro.terminated | ro.truncated
    mask = np.ones_like(done)  # step t belongs to the env's first episode
    mask[1:] = ~np.logical_or.accumulate(done, axis=0)[:-1]
    return ro, mask, steps


def reinforce(envs, net, opt, params, total_steps, *, psi, baseline, gamma, vf_coef,
              normalize_advantages, max_grad_norm, seed, generator, on_step):
    """REINFORCE's loop, the chapter's pseudocode (the core of :func:`train`): each env
    plays one whole episode (the rollout ends when all have ended), then one gradient step
    on -mean_t[logp(a_t|s_t) Psi_t] (+ the baseline's regression). ``on_step(steps)`` is
    called after every vector step (True stops: a batch cut short is not learned from).
    Yields the env steps after each update.

    Defined in: Policy gradients, section REINFORCE on CartPole.
    """
    N, steps = envs.num_envs, 0
    tensor = partial(torch.as_tensor, device=params[0].device)
    while steps < total_steps:
        # one whole episode per env; mask (T, N): step t belongs to env n's episode
        ro, mask, steps = _play_episodes(envs, net, steps, total_steps, seed, generator,
                                        on_step)
        if ro is None:
            break  # the budget (or on_step) cut the batch: it is not used
        done = ro.terminated | ro.truncated
        R = np.where(mask, ro.rewards, 0.0)
        T, t_end = len(R), np.argmax(mask & done, axis=0)  # the step each episode ended
        if baseline == "value":  # a time limit: add gamma V(s_trunc) to the last reward
            cut = (ro.truncated & ~ro.terminated)[t_end, np.arange(N)]
            V_next = np.concatenate([ro.values[1:], ro.last_value[None]])
            boot = np.where(cut, V_next[t_end, np.arange(N)].astype(np.float64), 0.0)
            R[t_end, np.arange(N)] += gamma * boot
        Psi = episode_psi(R, mask, gamma, psi)
        G = episode_psi(R, mask, gamma, "reward_to_go")
        o, m = tensor(ro.obs.reshape(T * N, -1)), tensor(mask.reshape(-1))
        a = tensor(ro.actions.reshape((T * N,) + ro.actions.shape[2:]))
        logp, _ = net.log_prob(o, a)
        psi_t = tensor(Psi.reshape(-1), dtype=logp.dtype)
        loss = 0.0
        if baseline == "value":
            values = net.value(o)
            psi_t = psi_t - values.detach()
            G_t = tensor(G.reshape(-1), dtype=logp.dtype)
            loss = vf_coef * masked_mean((G_t - values).pow(2), m)
        if normalize_advantages:
            mf = m.to(psi_t.dtype)
            n = mf.sum().clamp(min=2.0)
            mean = (psi_t * mf).sum() / n
            std = (((psi_t - mean) ** 2 * mf).sum() / (n - 1)).sqrt()
            psi_t = (psi_t - mean) / (std + 1e-8)
        loss = loss - masked_mean(logp * psi_t, m)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=True)
        opt.step()
        yield steps
