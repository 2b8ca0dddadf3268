"""Deep Q-networks (DQN) with the usual improvements as options: double DQN, Huber or MSE loss,
hard or Polyak target updates, an epsilon schedule, n-step returns and prioritized replay.

The loop, top to bottom, in :func:`dqn` (the core that :func:`train` calls): act
epsilon-greedily in N vectorised envs (one forward pass for all of them), store the real
transitions in a replay buffer, and every ``train_freq`` vector steps take ``gradient_steps``
gradient steps on the TD loss

    delta = r + gamma (1 - terminated) Q_target(s', a*) - Q(s, a),
    a* = argmax_a' Q(s', a')          (double DQN; plain DQN: argmax_a' Q_target(s', a'))

over uniform minibatches (or prioritized ones, ``prioritized=True``; with ``n_step > 1`` the
transitions are n-step ones and the target bootstraps with gamma^n), moving the target
network toward the online one
(``Q_target <- (1 - tau) Q_target + tau Q`` every ``target_update_interval`` gradient steps;
tau = 1 is a hard copy).

Defined in: Deep Q-networks.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F

from rlnotes._validate import require_choice, require_gamma, require_in_range, require_int
from rlnotes.deeprl.backprop import (backward_into_grads, flatten_parameters, forward_keep,
                                     linear_layers)
from rlnotes.deeprl.buffer import ReplayBuffer
from rlnotes.deeprl.envs import env_spec, make_vec_env, space_info, step_transitions
from rlnotes.deeprl.flat_adam import FlatAdam
from rlnotes.deeprl.nstep import NStepWindow
from rlnotes.deeprl.replay_prioritized import PrioritizedReplayBuffer
from rlnotes.deeprl.networks import Standardize, mlp
from rlnotes.deeprl.training import (check_common, check_flag, check_hidden_sizes,
                                     check_max_grad_norm, check_positive, check_rollout_size,
                                     choose_device, Reporter, torch_threads)

__all__ = ["QPolicy", "QNetworks", "dqn", "train", "epsilon_schedule", "td_targets", "dqn_loss", "dqn_loss_grad",
           "polyak_update", "start_value_estimate", "sample_minibatches", "reference_update"]


class QPolicy:
    """The greedy policy of a Q-network: ``policy(obs) = argmax_a Q(obs, a)``.

    Pure: calling it draws no random numbers and changes nothing (no gradients, eval only).
    ``policy.q_values(obs)`` returns the (N, A) action values as a numpy array. During training
    it wraps the live network, so it always acts with the current weights.

    ==========  ==========  ============================
    argument    shape       dtype
    ==========  ==========  ============================
    ``obs``     (N, d)      float32 numpy array
    returns     (N,)        int64 numpy array of actions
    ==========  ==========  ============================

    Defined in: Deep Q-networks, section DQN on CartPole.
    """

    def __init__(self, q_net: torch.nn.Module):
        self.q_net = q_net
        first = next(q_net.parameters())
        self.device, self.obs_dim = first.device, first.shape[1]

    def _tensor(self, obs) -> torch.Tensor:
        obs = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"obs must have shape (N, {self.obs_dim}), got {tuple(obs.shape)}")
        return obs

    @torch.no_grad()
    def q_values(self, obs) -> np.ndarray:
        return self.q_net(self._tensor(obs)).cpu().numpy()

    @torch.no_grad()
    def __call__(self, obs) -> np.ndarray:
        return self.q_net(self._tensor(obs)).argmax(dim=1).cpu().numpy()


def epsilon_schedule(steps: int, *, start: float = 1.0, end: float = 0.05,
                     decay_steps: int = 10_000, kind: str = "linear") -> float:
    """The exploration rate after ``steps`` environment steps.

    "linear": from ``start`` to ``end`` in a straight line over ``decay_steps``, then ``end``;
    "exponential": ``end + (start - end) * exp(-5 steps / decay_steps)`` (within 1% of the
    way to ``end`` at ``decay_steps``).

    Defined in: Deep Q-networks, section Exploration: epsilon schedules.
    """
    steps = require_int(steps, "steps", minimum=0)
    start = require_in_range(start, "start", 0.0, 1.0)
    end = require_in_range(end, "end", 0.0, 1.0)
    decay_steps = require_int(decay_steps, "decay_steps", minimum=1)
    require_choice(kind, "kind", ("linear", "exponential"))
    if kind == "linear":
        return end + (start - end) * max(0.0, 1.0 - steps / decay_steps)
    return end + (start - end) * math.exp(-5.0 * steps / decay_steps)


def td_targets(rewards, next_q_online, next_q_target, terminated, gamma: float, *,
               double: bool = True) -> torch.Tensor:
    """The bootstrapped targets of a minibatch,
    ``y = r + gamma (1 - terminated) Q_target(s', a*)`` with ``a* = argmax_a Q(s', a)`` for
    double DQN and ``a* = argmax_a Q_target(s', a)`` for plain DQN. Truncated transitions have
    ``terminated = 0``: a time limit is not the end of the task, so they bootstrap.

    =================  ======  ==============================================
    argument           shape   meaning
    =================  ======  ==============================================
    ``rewards``        (B,)    r
    ``next_q_online``  (B, A)  Q(s', .) of the online network (used if double)
    ``next_q_target``  (B, A)  Q_target(s', .)
    ``terminated``     (B,)    1 where s' is terminal, else 0
    =================  ======  ==============================================

    Defined in: Deep Q-networks, section The maximisation bias and double DQN.
    """
    gamma = require_gamma(gamma)
    for x, name in ((rewards, "rewards"), (next_q_online, "next_q_online"),
                    (next_q_target, "next_q_target"), (terminated, "terminated")):
        if not torch.is_tensor(x):
            raise ValueError(f"{name} must be a torch tensor, got {type(x).__name__}")
    if next_q_target.ndim != 2 or next_q_online.shape != next_q_target.shape:
        raise ValueError("next_q_online and next_q_target must both have shape (B, A), got "
                         f"{tuple(next_q_online.shape)} and {tuple(next_q_target.shape)}")
    B = next_q_target.shape[0]
    if rewards.shape != (B,) or terminated.shape != (B,):
        raise ValueError(f"rewards and terminated must have shape ({B},), got "
                         f"{tuple(rewards.shape)} and {tuple(terminated.shape)}")
    if double:
        a_star = next_q_online.argmax(dim=1, keepdim=True)
        next_v = next_q_target.gather(1, a_star).squeeze(1)
    else:
        next_v = next_q_target.max(dim=1).values
    return rewards + gamma * (1.0 - terminated.to(next_v.dtype)) * next_v


def dqn_loss(q_sa: torch.Tensor, targets: torch.Tensor, loss: str = "huber") -> torch.Tensor:
    """The mean TD loss over a minibatch: Huber (``smooth_l1`` with threshold omega = 1: quadratic for
    |y - Q| <= 1, linear beyond, so one large error cannot blow up the gradient) or "mse".
    ``q_sa`` and ``targets`` have shape (B,); ``targets`` carries no gradient.

    Defined in: Deep Q-networks, section The loss: Huber against squared error.
    """
    require_choice(loss, "loss", ("huber", "mse"))
    if not (torch.is_tensor(q_sa) and torch.is_tensor(targets)) or q_sa.shape != targets.shape:
        raise ValueError("q_sa and targets must be tensors of the same shape (B,), got "
                         f"{getattr(q_sa, 'shape', q_sa)!r} and {getattr(targets, 'shape', targets)!r}")
    targets = targets.detach()
    if loss == "huber":
        return F.smooth_l1_loss(q_sa, targets)
    return F.mse_loss(q_sa, targets)


def dqn_loss_grad(q_sa: torch.Tensor, targets: torch.Tensor, loss: str = "huber") -> torch.Tensor:
    """The gradient of :func:`dqn_loss` with respect to ``q_sa``, written out: with the TD error
    ``delta = y - Q(s, a)`` over a minibatch of B, it is ``-2 delta / B`` for "mse" and
    ``-clip(delta, -1, 1) / B`` for "huber" (the Huber loss's slope is the error, capped at 1).
    ``q_sa`` and ``targets`` have shape (B,); the result too. :func:`train` backpropagates it
    by hand (:mod:`rlnotes.deeprl.backprop`).

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    require_choice(loss, "loss", ("huber", "mse"))
    if not (torch.is_tensor(q_sa) and torch.is_tensor(targets)) or q_sa.shape != targets.shape \
            or q_sa.ndim != 1:
        raise ValueError("q_sa and targets must be tensors of the same shape (B,), got "
                         f"{getattr(q_sa, 'shape', q_sa)!r} and {getattr(targets, 'shape', targets)!r}")
    error = q_sa.detach() - targets.detach()  # = -delta
    if loss == "huber":
        return error.clamp(-1.0, 1.0) / len(error)
    return error * (2.0 / len(error))


def _check_reference_update(q_net, q_target, optimizer, batch, max_grad_norm) -> None:
    """The argument checks of :func:`reference_update` (ValueError on bad input)."""
    if not (isinstance(q_net, torch.nn.Module) and isinstance(q_target, torch.nn.Module)):
        raise ValueError("q_net and q_target must be torch.nn.Modules, got "
                         f"{type(q_net).__name__} and {type(q_target).__name__}")
    if not hasattr(optimizer, "step") or not hasattr(optimizer, "zero_grad"):
        raise ValueError(f"optimizer must be a torch optimizer, got {type(optimizer).__name__}")
    if not isinstance(batch, (tuple, list)) or len(batch) != 5:
        raise ValueError("batch must be a tuple (s, a, r, s2, terminated) of five tensors")
    a = batch[1]
    if not torch.is_tensor(a) or a.ndim != 1 or a.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"batch's actions must be a (M,) integer tensor, got {a!r}")
    check_max_grad_norm(max_grad_norm)


def reference_update(q_net: torch.nn.Module, q_target: torch.nn.Module, optimizer,
                     batch, *, gamma: float, double: bool = True, loss: str = "mse",
                     tau: float = 0.01, max_grad_norm: float | None = None) -> float:
    """One DQN update, written with autograd: the reference that :func:`dqn`'s fast
    loop computes with a hand-written backward pass and a flat Adam (the same numbers
    up to rounding).

    ``batch = (s, a, r, s', terminated)`` as ``ReplayBuffer.sample`` returns it:
    (M, d) states, (M,) integer actions, (M,) rewards, (M, d) next states, (M,) terminal
    flags. Targets ``y = r + gamma (1 - d) Q(s', a*; w^-)`` (``td_targets``), loss
    ``mean (y - Q(s, a; w))^2`` or Huber (``dqn_loss``), one step of ``optimizer``
    on ``q_net``'s parameters, then ``w^- <- (1 - upsilon) w^- + upsilon w``
    (``tau`` = upsilon). Returns the loss before the step.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    _check_reference_update(q_net, q_target, optimizer, batch, max_grad_norm)
    s, a, r, s2, terminated = batch
    with torch.no_grad():  # the targets carry no gradient
        y = td_targets(r, q_net(s2), q_target(s2), terminated, gamma, double=double)
    q_sa = q_net(s).gather(1, a.long().unsqueeze(1)).squeeze(1)
    loss_value = dqn_loss(q_sa, y, loss)
    optimizer.zero_grad()
    loss_value.backward()
    if max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(q_net.parameters(), max_grad_norm)
    optimizer.step()
    polyak_update(q_target.parameters(), q_net.parameters(), tau)
    return float(loss_value.detach())


def sample_minibatches(buffer: ReplayBuffer, n: int, generator=None, e_is: float | None = None):
    """``n`` transitions from ``buffer``: ``(idx, weights, (s, a, r, s', terminated))``.
    Uniform when ``e_is`` is None (``idx`` and ``weights`` are None); otherwise drawn by
    priority from a :class:`PrioritizedReplayBuffer`, with ``weights`` the importance weights
    for the exponent ``e_is`` (see its ``sample_prioritized``).

    Defined in: Deep Q-networks, section Rainbow: n-step returns and prioritized replay.
    """
    if not isinstance(buffer, ReplayBuffer):
        raise ValueError(f"buffer must be a ReplayBuffer, got {type(buffer).__name__}")
    if e_is is None:
        return None, None, buffer.sample(n, generator)
    if not isinstance(buffer, PrioritizedReplayBuffer):
        raise ValueError("buffer must be a PrioritizedReplayBuffer when e_is is given, got "
                         f"{type(buffer).__name__}")
    return buffer.sample_prioritized(n, generator, importance_exponent=e_is)


@torch.no_grad()
def polyak_update(target_params, params, tau: float) -> None:
    """Move the target network toward the online one, in place:
    ``w_target <- (1 - tau) w_target + tau w`` for each pair of tensors.
    tau = 1 is a hard copy; a small tau makes w_target an exponential moving average of
    the online weights, with a mean lag of about 1 / tau updates. One fused operation for all
    tensors.

    Defined in: Deep Q-networks, section The target network: a lagged copy.
    """
    tau = require_in_range(tau, "tau", 0.0, 1.0, low_open=True)
    target_params, params = list(target_params), list(params)
    if len(target_params) != len(params) or not params:
        raise ValueError(f"target_params and params must be non-empty lists of the same length, "
                         f"got {len(target_params)} and {len(params)}")
    for t, p in zip(target_params, params):
        if not (torch.is_tensor(t) and torch.is_tensor(p)) or t.shape != p.shape:
            raise ValueError("params must be tensors with the shapes of target_params")
    torch._foreach_lerp_(target_params, params, tau)


def train(env_id: str, total_steps: int, *, seed: int = 0, callback=None,
          num_envs: int = 8,
          hidden_sizes=(64, 64),
          learning_rate: float = 2e-3,
          lr_final_fraction: float = 0.0,
          buffer_size: int = 20_000,
          batch_size: int = 256,
          learning_starts: int = 2_000,
          gamma: float = 0.995,
          train_freq: int = 8,
          gradient_steps: int = 32,
          double: bool = True,
          loss: str = "mse",
          tau: float = 0.01,
          target_update_interval: int = 1,
          epsilon_start: float = 1.0,
          epsilon_end: float = 0.01,
          exploration_steps: int = 8_000,
          epsilon_kind: str = "linear",
          max_grad_norm: float | None = None,
          standardize_obs: bool = True,
          obs_clip: float | None = None,
          n_step: int = 3,
          prioritized: bool = False,
          priority_exponent: float = 0.6,
          importance_exponent: float = 0.4,
          num_threads: int = 1,
          device=None,
          progress: bool = False) -> QPolicy:
    """Train a DQN agent on ``env_id`` for ``total_steps`` environment steps; return its greedy
    policy. Follows the trainer contract of the book (same arguments, same run).

    Hyperparameters (the defaults are the chapter's CartPole-v1 settings):

    - num_envs: environments stepped together; total_steps counts steps summed over them
    - hidden_sizes: widths of the Q-network's hidden layers (ReLU)
    - learning_rate: Adam's step size at the start
    - lr_final_fraction: the step size decays linearly to this fraction of it by total_steps
    - buffer_size: replay capacity in transitions (>= batch_size)
    - batch_size: transitions per gradient step, drawn from the buffer (uniformly, or by
      priority with prioritized)
    - learning_starts: environment steps of pure experience before the first gradient step
    - gamma: discount factor in [0, 1] (0.995: a horizon of about 200 steps, long enough to feel
      the cart drifting off the track, which 0.99's horizon of 100 barely does)
    - train_freq: vector-env steps between training phases (num_envs * train_freq <= 2048)
    - gradient_steps: gradient steps per training phase
    - double: double DQN (the online net picks a*, the target net values it)
    - loss: "huber" or "mse"
    - tau: target update weight, Q_target <- (1 - tau) Q_target + tau Q (1.0 = hard copy)
    - target_update_interval: gradient steps between target updates
    - epsilon_start, epsilon_end, exploration_steps, epsilon_kind: the epsilon schedule
      (see :func:`epsilon_schedule`), in environment steps
    - max_grad_norm: clip the gradient's global norm to this (None: no clipping)
    - standardize_obs: standardise inputs with the mean and std of the observations of the
      steps before the first gradient step (about learning_starts of them, whatever the
      buffer's size; fixed afterwards; see rlnotes.deeprl.Standardize)
    - obs_clip: clip standardised inputs to [-obs_clip, obs_clip] (None: no clipping; a random
      policy's cart position has std ~0.1, so a clip of 10 would hide positions beyond ~1,
      far inside the track's edge at 2.4)
    - n_step: n of the n-step return stored in the buffer (1: one-step DQN; see
      :class:`rlnotes.deeprl.nstep.NStepWindow`); targets bootstrap with gamma^n_step
    - prioritized: prioritized replay (proportional, Schaul et al. 2016; see
      :class:`rlnotes.deeprl.replay_prioritized.PrioritizedReplayBuffer`) instead of uniform
    - priority_exponent: e_pri, P(i) proportional to p_i^e_pri (alpha in the paper)
    - importance_exponent: e_IS at the start (beta in the paper), annealed linearly to 1 by
      total_steps
    - num_threads: torch threads during training (1 is fastest for small networks)
    - device: None = CPU unless RLNOTES_DEVICE is set; "auto" = rlnotes.get_device(); or a name
    - progress: show a progress bar

    ``callback(steps, policy)`` is called after every training phase (at least every 2,048
    steps); returning True stops training. The total is rounded up to a multiple of num_envs.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    spec = env_spec(env_id)
    total_steps, seed, num_threads = check_common(total_steps, seed, callback, num_threads)
    num_envs, train_freq = check_rollout_size(num_envs, train_freq, "train_freq")
    hidden_sizes = check_hidden_sizes(hidden_sizes)
    learning_rate = check_positive(learning_rate, "learning_rate")
    lr_final_fraction = require_in_range(lr_final_fraction, "lr_final_fraction", 0.0, 1.0)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    buffer_size = require_int(buffer_size, "buffer_size", minimum=1)
    if buffer_size < batch_size:
        raise ValueError(f"buffer_size must be >= batch_size={batch_size}, got {buffer_size}")
    learning_starts = require_int(learning_starts, "learning_starts", minimum=0)
    gamma = require_gamma(gamma)
    standardize_obs = check_flag(standardize_obs, "standardize_obs")
    if obs_clip is not None:
        obs_clip = check_positive(obs_clip, "obs_clip")
    gradient_steps = require_int(gradient_steps, "gradient_steps", minimum=1)
    double = check_flag(double, "double")
    require_choice(loss, "loss", ("huber", "mse"))
    tau = require_in_range(tau, "tau", 0.0, 1.0, low_open=True)
    target_update_interval = require_int(target_update_interval, "target_update_interval",
                                         minimum=1)
    epsilon_start = require_in_range(epsilon_start, "epsilon_start", 0.0, 1.0)
    epsilon_end = require_in_range(epsilon_end, "epsilon_end", 0.0, 1.0)
    exploration_steps = require_int(exploration_steps, "exploration_steps", minimum=1)
    require_choice(epsilon_kind, "epsilon_kind", ("linear", "exponential"))
    max_grad_norm = check_max_grad_norm(max_grad_norm)
    n_step = require_int(n_step, "n_step", minimum=1)
    prioritized = check_flag(prioritized, "prioritized")
    priority_exponent = require_in_range(priority_exponent, "priority_exponent", 0.0, 1.0)
    importance_exponent = require_in_range(importance_exponent, "importance_exponent", 0.0, 1.0)
    dev = choose_device(device)

    envs = make_vec_env(env_id, num_envs)
    try:
        obs_info = space_info(envs.single_observation_space)
        act_info = space_info(envs.single_action_space)
        if obs_info["discrete"] or len(obs_info["shape"]) != 1:
            raise ValueError(f"env_id {env_id!r} must have a flat Box observation space, got "
                             f"{envs.single_observation_space}")
    except ValueError:
        envs.close()
        raise
    if not act_info["discrete"]:
        envs.close()
        raise ValueError(f"env_id {env_id!r} must have a Discrete action space for DQN, got "
                         f"{envs.single_action_space}")
    obs_dim, n_actions = obs_info["shape"][0], act_info["n"]
    del spec

    with torch_threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # network initialisation; the global stream is restored after
        q_net = torch.nn.Sequential(Standardize(obs_dim, clip=obs_clip, device=dev),
                                    mlp([obs_dim, *hidden_sizes, n_actions], device=dev))
        nets = QNetworks(q_net, learning_rate)
        buffer = (PrioritizedReplayBuffer(buffer_size, (obs_dim,), device=dev,
                                          priority_exponent=priority_exponent)
                  if prioritized else ReplayBuffer(buffer_size, (obs_dim,), device=dev))
        window = NStepWindow(num_envs, n_step, gamma) if n_step > 1 else None
        generator = torch.Generator(device=dev).manual_seed(seed)
        rng = np.random.default_rng(seed)
        policy = nets.policy

        def epsilon(steps):
            return epsilon_schedule(steps, start=epsilon_start, end=epsilon_end,
                                    decay_steps=exploration_steps, kind=epsilon_kind)

        def lr(steps):  # linear decay to lr_final_fraction of the step size
            frac = min(1.0, steps / total_steps)
            return learning_rate * (1.0 - (1.0 - lr_final_fraction) * frac)

        def e_is(steps):  # importance exponent, annealed linearly to 1
            return importance_exponent + (1.0 - importance_exponent) * min(1.0, steps / total_steps)

        obs, _ = envs.reset(seed=seed)
        reporter = Reporter(total_steps, callback, policy, progress=bool(progress), desc="DQN")
        try:
            for steps in dqn(envs, obs, nets, buffer, total_steps, epsilon=epsilon, lr=lr,
                             gamma=gamma, batch_size=batch_size, window=window,
                             e_is=e_is if prioritized else None,
                             learning_starts=learning_starts, train_freq=train_freq,
                             gradient_steps=gradient_steps, double=double, loss=loss, tau=tau,
                             target_update_interval=target_update_interval,
                             max_grad_norm=max_grad_norm, standardize_obs=standardize_obs,
                             rng=rng, generator=generator):
                if reporter(steps):
                    break
        finally:
            envs.close()
            reporter.close()
    q_net.eval()
    return policy


class QNetworks:
    """The online Q-network ``q_net`` (a :class:`Standardize` layer, then an MLP), its
    target copy ``q_target`` (w^-), and what the hand-written backward pass of :func:`dqn`
    needs: their linear layers, each network's weights as one flat tensor (``params``,
    ``target_params``: the layers hold views of it, so that Adam and the Polyak average
    are one operation each) and a :class:`FlatAdam` on the online weights.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """

    def __init__(self, q_net: torch.nn.Sequential, learning_rate: float):
        self.q_net = q_net
        self.q_target = copy.deepcopy(q_net).requires_grad_(False)
        self.layer_params = list(q_net.parameters())  # per layer; views of params below
        self.params = [flatten_parameters(q_net)]
        self.target_params = [flatten_parameters(self.q_target)]
        self.optimizer = FlatAdam(self.params[0], lr=learning_rate)
        self.layers, self.act = linear_layers(q_net[1])
        self.target_layers, _ = linear_layers(self.q_target[1])
        self.policy = QPolicy(q_net)

    def fit_standardizer(self, obs) -> None:
        """Fix both networks' input standardisation to the mean and std of ``obs``."""
        self.q_net[0].fit(obs)
        self.q_target[0].load_state_dict(self.q_net[0].state_dict())


def dqn(envs, obs, nets: QNetworks, buffer: ReplayBuffer, total_steps: int, *, epsilon,
        lr, gamma, batch_size, learning_starts, train_freq, gradient_steps, double, loss,
        tau, target_update_interval, max_grad_norm, standardize_obs, rng, generator,
        window=None, e_is=None):
    """DQN's loop, the chapter's pseudocode (the core of :func:`train`); yields the env
    steps after each phase. ``epsilon``, ``lr``: schedules; ``window``: n-step
    transitions (:class:`NStepWindow`); ``e_is``: prioritized replay's importance exponent
    (None: uniform). Defined in: Deep Q-networks, section DQN on CartPole."""
    N, n_actions = envs.num_envs, nets.layers[-1].out_features
    autoreset = np.zeros(N, dtype=bool)
    steps, updates, seen = 0, 0, []
    discount = gamma ** (window.n if window else 1)  # gamma^n for n-step targets
    while steps < total_steps:
        # act epsilon-greedily, train_freq vector steps (fewer at the budget's end)
        for _ in range(min(train_freq, -(-(total_steps - steps) // N))):
            explore = rng.random(N) < epsilon(steps)
            a = np.where(explore, rng.integers(n_actions, size=N), nets.policy(obs))
            real = np.flatnonzero(~autoreset)  # the envs whose step is a transition
            obs, batch, autoreset = step_transitions(envs, a, obs, autoreset)
            if updates == 0:  # the data the input standardisation is fitted to
                seen.append(batch["obs"])
            batch = window.push(batch, real) if window else batch  # n-step transitions
            if len(batch["obs"]):  # (s, a, r, s', terminated) of the real transitions
                buffer.add(batch["obs"], batch["actions"], batch["rewards"],
                           batch["next_obs"], batch["terminated"])
            steps += N
        if steps < learning_starts or len(buffer) < batch_size:
            yield steps
            continue
        if updates == 0 and standardize_obs:  # once, from the data before learning
            states = torch.as_tensor(np.concatenate(seen)).float()
            nets.fit_standardizer(states.to(buffer.device))
        nets.optimizer.lr = lr(steps)
        # All the phase's minibatches in one draw, [s; s'] stacked for one forward pass
        idx, weights, (S, A, R, S2, D) = sample_minibatches(
            buffer, batch_size * gradient_steps, generator, e_is(steps) if e_is else None)
        with torch.no_grad():
            S, S2 = nets.q_net[0](S), nets.q_net[0](S2)
            SS2 = torch.cat([S.view(gradient_steps, batch_size, -1),
                             S2.view(gradient_steps, batch_size, -1)], dim=1)
        for k in range(gradient_steps):
            b = slice(k * batch_size, (k + 1) * batch_size)
            a, r, s2, d = A[b].unsqueeze(1), R[b], S2[b], D[b]  # minibatch k
            # Q(s, .) and Q(s', .) in one pass, kept for the hand-written backward pass
            q_both, inputs = forward_keep(nets.layers, nets.act, SS2[k])
            q_s = q_both[:batch_size]
            with torch.no_grad():
                q_next_target, _ = forward_keep(nets.target_layers, nets.act, s2)
                q_next = q_both[batch_size:] if double else q_next_target
                y = td_targets(r, q_next, q_next_target, d, discount, double=double)
                q_sa = q_s.gather(1, a).squeeze(1)
                g = dqn_loss_grad(q_sa, y, loss)  # d loss / d Q(s, a), per transition
                if weights is not None:  # prioritized: importance weights, new priorities
                    g = g * weights[b]
                    buffer.update_priorities(idx[b], y - q_sa)
                grad_q = torch.zeros_like(q_s).scatter_(1, a, g.unsqueeze(1))
            backward_into_grads(nets.layers, nets.act, inputs, grad_q)
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(nets.layer_params, max_grad_norm,
                                               foreach=True)
            nets.optimizer.step()
            updates += 1
            if updates % target_update_interval == 0:  # w^- <- (1 - tau) w^- + tau w
                polyak_update(nets.target_params, nets.params, tau)
        yield steps


def start_value_estimate(policy: QPolicy, env_id: str, gamma: float, *, seed: int = 0,
                         num_episodes: int = 10) -> tuple[float, float]:
    """The maximisation bias at the start of an episode: ``(predicted, actual)``, where
    ``predicted`` is the mean of max_a Q(s_0, a) over ``num_episodes`` start states and
    ``actual`` the mean discounted return sum_t gamma^t r_{t+1} the greedy policy then obtains
    from them (episodes on one env each, seeded ``seed + 10000``). A time-limited episode's
    return is cut at the limit, so ``actual`` is a lower bound of the true value.

    Defined in: Deep Q-networks, section The maximisation bias and double DQN.
    """
    if not isinstance(policy, QPolicy):
        raise ValueError(f"policy must be a QPolicy (as train returns), got {type(policy).__name__}")
    gamma = require_gamma(gamma)
    num_episodes = require_int(num_episodes, "num_episodes", minimum=1)
    seed = require_int(seed, "seed", minimum=0)
    envs = make_vec_env(env_id, num_episodes)
    try:
        obs, _ = envs.reset(seed=seed + 10_000)
        predicted = float(policy.q_values(obs).max(axis=1).mean())
        G = np.zeros(num_episodes)
        discount = np.ones(num_episodes)
        running = np.ones(num_episodes, dtype=bool)
        while running.any():
            obs, r, term, trunc, _ = envs.step(policy(obs))
            G += running * discount * r
            discount *= gamma
            running &= ~(term | trunc)
    finally:
        envs.close()
    return predicted, float(G.mean())
