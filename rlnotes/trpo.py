"""Trust region policy optimisation (Schulman et al. 2015): the natural-gradient step under a KL
constraint, computed without ever forming the Fisher matrix.

The pieces, each a small function: :func:`flat_grad` and :func:`fisher_vector_product` (the
product F v by double backpropagation through the mean KL), :func:`conjugate_gradient` (solves
F x = g with only such products), :func:`natural_step` (the step size from the quadratic model
of the KL), :func:`line_search` (backtracks until the KL constraint holds and the surrogate
improves), and the trainer :func:`train` that puts them together with a critic fitted by Adam.

Defined in: TRPO and PPO, section Trust region policy optimisation.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rlnotes._validate import require_choice, require_in_range, require_int
from rlnotes.deeprl import _onpolicy as op
from rlnotes.deeprl.normalize import standardize_inputs
from rlnotes.deeprl.training import (Reporter, check_common, check_flag, check_hidden_sizes,
                                     check_positive, check_rollout_size, choose_device,
                                     torch_threads)

__all__ = ["flat_grad", "fisher_vector_product", "fisher_matrix", "conjugate_gradient", "natural_step",
           "line_search", "performance_difference", "trpo", "train"]


def flat_grad(y: torch.Tensor, params, *, create_graph: bool = False,
              retain_graph: bool | None = None) -> torch.Tensor:
    """The gradient of the scalar ``y`` with respect to ``params``, concatenated into one (n,)
    vector (zeros for parameters ``y`` does not depend on).

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    params = list(params)
    grads = torch.autograd.grad(y, params, create_graph=create_graph, retain_graph=retain_graph,
                                allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                      for g, p in zip(grads, params)])


def fisher_vector_product(kl_grad: torch.Tensor, params, v: torch.Tensor) -> torch.Tensor:
    r"""``F v`` for the Fisher matrix F, the Hessian of the mean KL at the old policy, by double
    backpropagation: with ``g = grad_theta KL(pi_old || pi_theta)`` built with
    ``create_graph=True`` (:func:`flat_grad`), ``F v = grad_theta (g . v)``. It costs about two
    backward passes and never forms the (n, n) matrix.

    ===========  ======  ==========================================================
    argument     shape   meaning
    ===========  ======  ==========================================================
    kl_grad      (n,)    ``flat_grad(mean_kl, params, create_graph=True)``
    params       list    the policy's parameters (n numbers in all)
    v            (n,)    the vector to multiply
    returns      (n,)    F v
    ===========  ======  ==========================================================

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    if not torch.is_tensor(v) or v.shape != kl_grad.shape:
        raise ValueError(f"v must be a tensor of shape {tuple(kl_grad.shape)}, got "
                         f"{tuple(v.shape) if torch.is_tensor(v) else type(v).__name__}")
    # keep the graph of kl_grad: conjugate gradient multiplies by F many times
    return flat_grad((kl_grad * v.detach()).sum(), params, retain_graph=True)


def fisher_matrix(net, obs: torch.Tensor) -> torch.Tensor:
    r"""The explicit (n, n) Fisher matrix of a categorical policy network over the states
    ``obs`` (B, d), one gradient per (state, action):

        F = (1/B) sum_s sum_a pi(a|s) grad log pi(a|s) grad log pi(a|s)^T.

    Only for checking :func:`fisher_vector_product` on tiny networks: n^2 numbers and B * A
    backward passes. ``net`` is an ``ActorCritic`` with Discrete actions.

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    if not getattr(net, "discrete", False):
        raise ValueError("net must be an ActorCritic with a categorical (Discrete) policy")
    params = list(net.actor.parameters())
    n = sum(p.numel() for p in params)
    F = torch.zeros(n, n, dtype=params[0].dtype, device=params[0].device)
    for s in obs:
        logits = net.actor(s[None]).log_softmax(-1)[0]
        for a in range(logits.shape[0]):
            g = flat_grad(logits[a], params, retain_graph=True)
            F += logits[a].exp().detach() * torch.outer(g, g)
    return F / len(obs)


def conjugate_gradient(matvec, b: torch.Tensor, *, iters: int = 10, damping: float = 0.1,
                       tol: float = 1e-10) -> torch.Tensor:
    r"""Solve ``U x = g`` with ``U = F + varsigma I``, for a symmetric positive semi-definite
    F known only through ``matvec(v) = F v`` (the right-hand side g is the argument ``b``,
    varsigma is ``damping``): at most ``iters`` conjugate-gradient steps from x_0 = 0, with
    the residual g_k = g - U x_k (``g_k`` in the code) and the direction p_k,

        alpha_k = g_k.g_k / p_k.U p_k,  x_{k+1} = x_k + alpha_k p_k,
        g_{k+1} = g_k - alpha_k U p_k,  p_{k+1} = g_{k+1} + (g_{k+1}.g_{k+1} / g_k.g_k) p_k,

    stopping early when ``g_k.g_k < tol``. In exact arithmetic CG solves an n-dimensional
    system in n steps; TRPO runs about 10, which is enough for a good step direction. The
    damping keeps the system well conditioned where the Fisher matrix is nearly singular.

    ===========  ================  ================================================
    argument     shape             meaning
    ===========  ================  ================================================
    matvec       (n,) -> (n,)      v -> F v
    b            (n,)              the right-hand side g (TRPO: the policy gradient)
    iters        int >= 1          the number of CG steps at most
    damping      float > 0         varsigma, added to F's diagonal
    returns      (n,)              x, in b's dtype and device
    ===========  ================  ================================================

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    if not callable(matvec):
        raise ValueError(f"matvec must be callable (v -> F v), got {matvec!r}")
    if not torch.is_tensor(b) or b.ndim != 1 or not torch.is_floating_point(b):
        raise ValueError("b must be a 1-D floating-point tensor, got "
                         f"{tuple(b.shape) if torch.is_tensor(b) else type(b).__name__}")
    iters = require_int(iters, "iters", minimum=1)
    damping = check_positive(damping, "damping")
    tol = require_in_range(tol, "tol", 0.0, float("inf"))
    x = torch.zeros_like(b)
    g_k = b.clone()  # the residual g - U x, with x = 0
    p = b.clone()
    gg = torch.dot(g_k, g_k)
    for _ in range(iters):
        if float(gg) < tol:
            break
        Up = matvec(p) + damping * p
        alpha = gg / torch.dot(p, Up)
        x = x + alpha * p
        g_k = g_k - alpha * Up
        gg_new = torch.dot(g_k, g_k)
        p = g_k + (gg_new / gg) * p
        gg = gg_new
    return x


def natural_step(g: torch.Tensor, matvec, max_kl: float, *, cg_iters: int = 10,
                 damping: float = 0.1) -> tuple[torch.Tensor, float]:
    r"""TRPO's full step: the direction ``x ~ (F + damping I)^{-1} g`` by conjugate gradient,
    scaled so that the damped quadratic model of the KL, ``KL(theta + s) ~ s^T (F + damping I)
    s / 2``, equals ``max_kl``:

        s = sqrt(2 max_kl / (x^T (F + damping I) x)) x.

    Returns ``(s, expected_improvement)`` with ``expected_improvement = g . s``, the surrogate's
    first-order gain along s (the line search compares the actual gain with it).

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    max_kl = check_positive(max_kl, "max_kl")
    x = conjugate_gradient(matvec, g, iters=cg_iters, damping=damping)
    xFx = float(torch.dot(x, matvec(x) + damping * x))
    if not math.isfinite(xFx) or xFx <= 0:
        return torch.zeros_like(g), 0.0
    step = math.sqrt(2.0 * max_kl / xFx) * x
    return step, float(torch.dot(g, step))


def line_search(objective, kl, theta0: torch.Tensor, full_step: torch.Tensor,
                expected_improvement: float, max_kl: float, *, shrink: float = 0.5,
                max_backtracks: int = 10, accept_ratio: float = 0.0):
    r"""Backtracking line search along ``full_step``: try ``theta0 + shrink^k full_step`` for
    k = 0, 1, ... and accept the first candidate whose mean KL from the old policy is at most
    ``max_kl`` and whose surrogate improves on the old one by more than ``accept_ratio`` times
    the expected (linear) improvement. The quadratic model behind ``full_step`` is only a model:
    this check is what makes TRPO's update respect the trust region.

    ========================  ===============  ========================================
    argument                  type             meaning
    ========================  ===============  ========================================
    objective                 (n,) -> float    the surrogate L(theta) (to be maximised)
    kl                        (n,) -> float    the mean KL(pi_old || pi_theta)
    theta0, full_step         (n,) tensors     the old parameters; the proposed step
    expected_improvement      float            g . full_step
    max_kl                    float > 0        kappa, the trust region's radius
    shrink                    float in (0, 1)  step factor per backtrack
    max_backtracks            int >= 1         candidates tried
    returns                   (theta, k)       the accepted parameters and the number of
                                               backtracks; (theta0, -1) if none passed
    ========================  ===============  ========================================

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    max_kl = check_positive(max_kl, "max_kl")
    shrink = require_in_range(shrink, "shrink", 0.0, 1.0, low_open=True, high_open=True)
    max_backtracks = require_int(max_backtracks, "max_backtracks", minimum=1)
    accept_ratio = require_in_range(accept_ratio, "accept_ratio", 0.0, 1.0)
    if theta0.shape != full_step.shape:
        raise ValueError(f"full_step must have theta0's shape {tuple(theta0.shape)}, got "
                         f"{tuple(full_step.shape)}")
    f0 = objective(theta0)
    for k in range(max_backtracks):
        frac = shrink ** k
        theta = theta0 + frac * full_step
        improvement = objective(theta) - f0
        if kl(theta) <= max_kl and improvement > accept_ratio * frac * expected_improvement \
                and improvement > 0:
            return theta, k
    return theta0, -1


# --- the trainer ------------------------------------------------------------------------------


def performance_difference(mdp, policy, new_policy, p0) -> dict:
    r"""Both sides of the performance-difference lemma, the surrogate and TRPO's lower bound,
    computed exactly on a tabular MDP (discount ``gamma < 1``).

    With :math:`\nu^{\pi}(s) = \sum_t \gamma^t \Pr(s_t = s \mid \pi)` the (unnormalised)
    discounted visitation from the start distribution :math:`p_0` (``p0``) and
    :math:`A^\pi = Q^\pi - V^\pi`:

    .. math::

        J(\pi') - J(\pi) = \sum_s \nu^{\pi'}(s) \sum_a \pi'(a|s) A^\pi(s, a) \quad
        \text{(the lemma)}, \qquad
        L_\pi(\pi') = \sum_s \nu^{\pi}(s) \sum_a \pi'(a|s) A^\pi(s, a),

        J(\pi') - J(\pi) \ge L_\pi(\pi') - C_\text{TRPO} \max_s \mathrm{KL}(\pi(\cdot|s) \,\|\,
        \pi'(\cdot|s)), \qquad C_\text{TRPO} = \frac{4 A_{\max} \gamma}{(1 - \gamma)^2}, \quad
        A_{\max} = \max_{s, a} |A^\pi(s, a)|

    (Schulman et al. 2015, Theorem 1). ``policy`` and ``new_policy`` are (S, A) probability
    matrices, ``p0`` an (S,) probability vector. Returns a dict of floats: ``gain``
    (:math:`J(\pi') - J(\pi)`, from two exact policy evaluations), ``lemma`` (the right-hand
    side of the lemma), ``surrogate`` (:math:`L_\pi(\pi')`), ``max_kl``, ``C`` (:math:`C_\text{TRPO}`) and ``bound``
    (:math:`L - C_\text{TRPO} \max \mathrm{KL}`). Normalising :math:`\nu` to a distribution multiplies the
    sums by :math:`1 - \gamma`, which is where the lemma's usual factor :math:`1/(1-\gamma)`
    comes from.

    Defined in: TRPO and PPO, section The surrogate objective and the trust region.
    """
    from rlnotes.mdp import TabularMDP, policy_evaluation, q_values
    from rlnotes.pg_exact import check_policy, discounted_visitation
    if not isinstance(mdp, TabularMDP):
        raise ValueError(f"mdp must be a rlnotes.mdp.TabularMDP, got {type(mdp).__name__}")
    if not mdp.gamma < 1:
        raise ValueError(f"mdp.gamma must be < 1 for the discounted lemma, got {mdp.gamma}")
    pis = []
    for p, name in ((policy, "policy"), (new_policy, "new_policy")):
        try:
            pis.append(check_policy(mdp, p))
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
    pi, pi_new = pis
    V = np.asarray(policy_evaluation(mdp, pi), dtype=np.float64)
    V_new = np.asarray(policy_evaluation(mdp, pi_new), dtype=np.float64)
    A = np.asarray(q_values(mdp, V), dtype=np.float64) - V[:, None]
    d_new = discounted_visitation(mdp, pi_new, p0)  # checks p0
    d_old = discounted_visitation(mdp, pi, p0)
    p0 = np.asarray(p0, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(pi > 0, pi * (np.log(pi) - np.log(pi_new)), 0.0)
    max_kl = float(terms.sum(axis=1).max())
    gamma = float(mdp.gamma)
    C = 4.0 * float(np.abs(A).max()) * gamma / (1.0 - gamma) ** 2
    surrogate = float(d_old @ (pi_new * A).sum(axis=1))
    return {"gain": float(p0 @ (V_new - V)), "lemma": float(d_new @ (pi_new * A).sum(axis=1)),
            "surrogate": surrogate, "max_kl": max_kl, "C": C, "bound": surrogate - C * max_kl}


def _set_flat(params, theta: torch.Tensor) -> None:
    torch.nn.utils.vector_to_parameters(theta, params)


def train(env_id: str, total_steps: int, *, seed: int = 0, callback=None,
          num_envs: int = 16,
          num_steps: int = 64,
          max_kl: float = 0.08,
          anneal_kl: bool = True,
          cg_iters: int = 10,
          cg_damping: float = 0.1,
          shrink: float = 0.8,
          max_backtracks: int = 10,
          gamma: float = 0.99,
          lam: float = 0.95,
          critic_lr: float = 3e-3,
          critic_epochs: int = 10,
          critic_minibatch: int = 256,
          norm_adv: bool = True,
          standardize_obs: bool = True,
          hidden_sizes=(64, 64),
          activation: str = "tanh",
          log_std_init: float = 0.0,
          num_threads: int = 1,
          device=None,
          progress: bool = False):
    """Train a TRPO agent (Schulman et al. 2015) on ``env_id`` for ``total_steps`` environment
    steps; return its greedy policy (``policy(obs)``: (N, obs_dim) observations to (N,) int64
    actions for a Discrete action space, (N, k) float32 actions for a k-dimensional Box).
    Follows the trainer contract of the book.

    Each update: play ``num_steps`` steps in each of ``num_envs`` envs, compute GAE advantages,
    take one natural-gradient step of the policy on the surrogate
    ``L(theta) = mean(ratio * A)`` within the trust region ``mean KL <= kappa`` (conjugate
    gradient on Fisher-vector products, then a backtracking line search), then fit the critic
    to the lambda-returns with Adam.

    Hyperparameters (the defaults are the chapter's CartPole-v1 settings):

    - num_envs: environments stepped together; total_steps counts steps summed over them
    - num_steps: steps per env per rollout (num_envs * num_steps <= 2048)
    - max_kl: kappa, the radius of the trust region in mean KL (its start, with anneal_kl)
    - anneal_kl: decay the radius linearly from max_kl to 0 over total_steps
    - cg_iters: conjugate-gradient steps
    - cg_damping: damping added to the Fisher matrix's diagonal (> 0)
    - shrink: the line search's step factor per backtrack, in (0, 1)
    - max_backtracks: candidates the line search tries
    - gamma: discount factor in [0, 1]
    - lam: the GAE parameter lambda in [0, 1]
    - critic_lr: Adam's step size for the critic
    - critic_epochs: shuffles of each rollout fitting the critic
    - critic_minibatch: transitions per critic gradient step; each shuffle gives
      B // critic_minibatch steps (the ragged remainder is skipped)
    - norm_adv: normalise each rollout's advantages to mean 0, std 1
    - standardize_obs: standardise the observations, for the actor and the critic, with the
      mean and standard deviation of the first rollout, fixed afterwards (DQN's
      ``rlnotes.deeprl.Standardize``)
    - hidden_sizes, activation: the actor's and the critic's hidden layers
    - log_std_init: the Gaussian policy's initial log standard deviation (Box actions)
    - num_threads: torch threads during training (1 is fastest for small networks)
    - device: None = CPU unless RLNOTES_DEVICE is set; "auto" = rlnotes.get_device(); or a name
    - progress: show a progress bar

    ``callback(steps, policy)`` is called after every update; returning True stops training.
    ``policy.diagnostics`` lists, per update, the radius kappa, the KL reached, the backtracks
    taken, the surrogate's improvement and the explained variance.

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    total_steps, seed, num_threads = check_common(total_steps, seed, callback, num_threads)
    num_envs, num_steps = check_rollout_size(num_envs, num_steps)
    max_kl = check_positive(max_kl, "max_kl")
    check_flag(anneal_kl, "anneal_kl")
    cg_iters = require_int(cg_iters, "cg_iters", minimum=1)
    cg_damping = check_positive(cg_damping, "cg_damping")
    shrink = require_in_range(shrink, "shrink", 0.0, 1.0, low_open=True, high_open=True)
    max_backtracks = require_int(max_backtracks, "max_backtracks", minimum=1)
    gamma = require_in_range(gamma, "gamma", 0.0, 1.0)
    lam = require_in_range(lam, "lam", 0.0, 1.0)
    critic_lr = check_positive(critic_lr, "critic_lr")
    critic_epochs = require_int(critic_epochs, "critic_epochs", minimum=1)
    critic_minibatch = require_int(critic_minibatch, "critic_minibatch", minimum=1)
    check_flag(norm_adv, "norm_adv")
    check_flag(standardize_obs, "standardize_obs")
    hidden_sizes = check_hidden_sizes(hidden_sizes)
    require_choice(activation, "activation", ("tanh", "relu"))
    log_std_init = require_in_range(log_std_init, "log_std_init", -20.0, 20.0)
    dev = choose_device(device)

    envs, obs_dim, act_info = op.make_train_envs(env_id, num_envs)
    with torch_threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = op.ActorCritic(obs_dim, act_info, hidden_sizes, activation=activation,
                             log_std_init=log_std_init, device=dev)
        standardize = standardize_inputs(net) if standardize_obs else None  # fitted later
        critic_opt = torch.optim.Adam(net.critic.parameters(), lr=critic_lr, eps=1e-5,
                                      fused=True)
        generator = torch.Generator(device=dev).manual_seed(seed)
        rng = np.random.default_rng(seed)
        policy = op.GreedyPolicy(net)

        def kappa(steps):  # anneal_kl: linear decay to 0 over total_steps
            return max_kl * (1.0 - steps / total_steps)

        obs, _ = envs.reset(seed=seed)
        reporter = Reporter(total_steps, callback, policy, progress=progress, desc="TRPO")
        try:
            for steps, stats in trpo(envs, obs, net, critic_opt, total_steps,
                                     num_steps=num_steps, max_kl=max_kl, cg_iters=cg_iters,
                                     cg_damping=cg_damping, shrink=shrink,
                                     max_backtracks=max_backtracks, gamma=gamma, lam=lam,
                                     critic_epochs=critic_epochs,
                                     critic_minibatch=critic_minibatch, norm_adv=norm_adv,
                                     rng=rng, generator=generator,
                                     kl_schedule=kappa if anneal_kl else None,
                                     standardize=standardize):
                policy.diagnostics.append(stats)
                if reporter(steps):
                    break
        finally:
            envs.close()
            reporter.close()
    net.eval()
    return policy


def trpo(envs, obs, net, critic_opt, total_steps, *, num_steps, max_kl, cg_iters,
         cg_damping, shrink, max_backtracks, gamma, lam, critic_epochs, critic_minibatch,
         norm_adv, rng, generator, kl_schedule=None, standardize=None):
    """TRPO's loop, the chapter's pseudocode (the core of :func:`train`): collect a
    rollout, compute its GAE advantages, take one natural-gradient step of the policy
    within the trust region (:func:`_policy_step`), then fit the critic to the
    lambda-returns (:func:`_fit_critic`). ``kl_schedule(steps)``: the radius's schedule
    (None: ``max_kl`` throughout); ``standardize``: the input layer
    :class:`~rlnotes.deeprl.Standardize` of the actor and the critic, fitted to the first
    rollout's observations before its log-probabilities and values are computed (the
    rollout itself was collected by the unfitted network: with the policy head's small
    initial weights both are close to uniform) (None: none). Yields
    ``(steps, stats)`` after each update.

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    N, device = envs.num_envs, next(net.parameters()).device
    actor_params = list(net.actor.parameters()) + ([] if net.discrete else [net.log_std])
    autoreset = np.zeros(N, dtype=bool)
    steps = 0
    while steps < total_steps:
        T = min(num_steps, -(-(total_steps - steps) // N))  # the last may be shorter
        kappa = max_kl if kl_schedule is None else kl_schedule(steps)
        rollout, obs, autoreset = op.collect_rollout(envs, net, obs, autoreset, T, rng)
        steps += T * N
        # the input layer is fitted once, to the first rollout's valid observations
        if standardize is not None and steps == T * N and rollout.valid.sum() > 1:
            standardize.fit(torch.as_tensor(rollout.obs[rollout.valid], device=device))
        # the valid transitions: obs, actions, old logp, adv, returns, values
        batch = op.rollout_advantages(net, rollout, gamma, lam)
        stats = {"steps": steps, "kappa": kappa}
        if len(batch["adv"]) > 1:
            stats.update(_policy_step(net, actor_params, batch, max_kl=kappa,
                                      cg_iters=cg_iters, cg_damping=cg_damping,
                                      shrink=shrink, max_backtracks=max_backtracks,
                                      norm_adv=norm_adv))
            _fit_critic(net, critic_opt, batch, generator, critic_epochs,
                        critic_minibatch)
            stats["explained_variance"] = op.explained_variance(batch["values"],
                                                                batch["returns"])
        yield steps, stats


def _policy_step(net, actor_params, batch, *, max_kl, cg_iters, cg_damping, shrink,
                 max_backtracks, norm_adv):
    """One TRPO policy update on a rollout's batch (the dict of
    :func:`rlnotes.deeprl._onpolicy.rollout_advantages`): the surrogate ``mean(ratio *
    A)`` and the mean exact KL to the old policy as closures, the gradient g, the KL's
    gradient with its graph kept (built once, reused by every Fisher-vector product), the
    natural step from conjugate gradient, and the backtracking line search. Returns the
    update's diagnostics (``kl``, ``backtracks``, ``improvement``).

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    obs, actions, old_logp, old_params = batch["obs"], batch["actions"], batch["logp"], \
        batch["params"]
    adv = batch["adv"]
    if norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    old_log_std = None if net.discrete else net.log_std.detach().clone()
    theta0 = torch.nn.utils.parameters_to_vector(actor_params).detach()

    def surrogate():
        logp, _ = net.log_prob(obs, actions)
        return (torch.exp(logp - old_logp) * adv).mean()

    def mean_kl():
        return net.kl_from(old_params, net.dist_params(obs), old_log_std).mean()

    g = flat_grad(surrogate(), actor_params)
    kl_grad = flat_grad(mean_kl(), actor_params, create_graph=True)
    step, expected = natural_step(
        g, lambda v: fisher_vector_product(kl_grad, actor_params, v), max_kl,
        cg_iters=cg_iters, damping=cg_damping)

    def evaluate_at(theta, fn):
        _set_flat(actor_params, theta)
        with torch.no_grad():
            return float(fn())

    theta, backtracks = line_search(lambda th: evaluate_at(th, surrogate),
                                    lambda th: evaluate_at(th, mean_kl), theta0, step,
                                    expected, max_kl, shrink=shrink,
                                    max_backtracks=max_backtracks)
    _set_flat(actor_params, theta)
    with torch.no_grad():
        kl = float(mean_kl())
        improvement = float(surrogate()) - float((adv).mean())
    return {"kl": kl, "backtracks": backtracks, "improvement": improvement,
            "expected_improvement": expected}


def _fit_critic(net, optimizer, batch, generator, epochs, minibatch):
    """Fit the critic to the batch's lambda-returns: ``epochs`` passes, each a shuffle cut into
    ``B // minibatch`` minibatches of ``minibatch`` transitions (a ragged remainder of the
    shuffle is skipped; a batch smaller than ``minibatch`` is one minibatch)."""
    obs, returns = batch["obs"], batch["returns"]
    B = len(returns)
    mb = min(minibatch, B)
    for _ in range(epochs):
        perm = torch.randperm(B, generator=generator, device=obs.device)
        for start in range(0, B - mb + 1, mb):
            idx = perm[start:start + mb]
            loss = 0.5 * (net.value(obs[idx]) - returns[idx]).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
