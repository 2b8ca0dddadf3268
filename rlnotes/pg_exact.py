"""Policy gradients where the truth is known: small tabular MDPs with a softmax policy, and a
Gaussian policy on a quadratic one-step problem.

On a finite MDP, J(theta) = p0^T V^pi and V^pi solves a linear system, so the exact gradient
is available twice over: by automatic differentiation through that solve, and by the
policy-gradient theorem with the exact Q^pi and the discounted state visitation nu^pi. Sampled
estimators (REINFORCE with each Psi_t, GAE) are then measured against it: their bias (mean minus
truth, in standard errors) and their variance.

Conventions: ``theta`` (S, A) are the logits of a softmax policy pi(a|s) = softmax(theta[s])_a;
``p0`` (S,) is the start distribution; the discounted objective is
J = E[sum_t gamma^t r_{t+1}]. Sampled episodes run until they enter the MDP's absorbing
(terminal) set, at most ``max_steps`` steps.

Defined in: Policy gradients.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_in_range, require_int, require_real
from rlnotes.mdp import TabularMDP
from rlnotes.returns import discounted_returns, gae

__all__ = ["softmax_policy", "check_policy", "discounted_visitation", "exact_objective",
           "exact_gradient", "policy_gradient_theorem", "sample_episodes",
           "reinforce_estimates", "PSI_CHOICES", "estimator_stats", "gae_bias_variance",
           "gaussian_log_prob", "gaussian_score_estimates", "quadratic_gaussian_gradient",
           "gaussian_pathwise_estimates", "short_corridor_value", "short_corridor_gradient"]

PSI_CHOICES = ("total", "reward_to_go", "baseline", "q", "advantage", "td")


def _mdp(mdp) -> TabularMDP:
    if not isinstance(mdp, TabularMDP):
        raise ValueError(f"mdp must be a rlnotes.mdp.TabularMDP, got {type(mdp).__name__}")
    return mdp


def _theta(mdp: TabularMDP, theta) -> np.ndarray:
    if torch.is_tensor(theta):
        theta = theta.detach().cpu().numpy()
    theta = np.asarray(theta, dtype=np.float64)
    if theta.shape != (mdp.num_states, mdp.num_actions):
        raise ValueError(f"theta must have shape (S, A) = {(mdp.num_states, mdp.num_actions)}, "
                         f"got {theta.shape}")
    if not np.isfinite(theta).all():
        raise ValueError("theta must contain only finite values")
    return theta


def _p0(mdp: TabularMDP, p0) -> np.ndarray:
    p0 = np.asarray(p0.detach().cpu() if torch.is_tensor(p0) else p0, dtype=np.float64)
    if p0.shape != (mdp.num_states,):
        raise ValueError(f"p0 must have shape (S,) = ({mdp.num_states},), got {p0.shape}")
    if not np.isfinite(p0).all() or p0.min() < 0 or abs(p0.sum() - 1) > 1e-8:
        raise ValueError("p0 must be a probability vector (entries >= 0 summing to 1)")
    return p0


def softmax_policy(theta):
    """pi(a|s) = exp(theta[s, a]) / sum_b exp(theta[s, b]): an (S, A) probability matrix of the
    kind (numpy or torch) and dtype of ``theta`` (S, A).

    Defined in: Policy gradients, section Exact gradients on a small MDP.
    """
    if torch.is_tensor(theta):
        if theta.ndim != 2:
            raise ValueError(f"theta must have shape (S, A), got {tuple(theta.shape)}")
        return torch.softmax(theta, dim=1)
    theta = np.asarray(theta, dtype=np.float64)
    if theta.ndim != 2 or not np.isfinite(theta).all():
        raise ValueError(f"theta must be a finite (S, A) array, got shape {theta.shape}")
    z = np.exp(theta - theta.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def check_policy(mdp: TabularMDP, policy) -> np.ndarray:
    """``policy`` as an (S, A) float64 probability matrix; ``ValueError`` naming ``policy``
    if it has the wrong shape, a negative entry, or a row that does not sum to 1 (1e-8)."""
    mdp = _mdp(mdp)
    if torch.is_tensor(policy):
        policy = policy.detach().cpu().numpy()
    pi = np.asarray(policy, dtype=np.float64)
    if pi.shape != (mdp.num_states, mdp.num_actions):
        raise ValueError(f"policy must be an (S, A) = {(mdp.num_states, mdp.num_actions)} "
                         f"probability matrix, got shape {pi.shape}")
    if not np.isfinite(pi).all() or pi.min() < 0:
        raise ValueError("policy must hold probabilities >= 0")
    sums = pi.sum(axis=1)
    if np.abs(sums - 1).max() > 1e-8:
        s = int(np.argmax(np.abs(sums - 1)))
        raise ValueError(f"policy must be a probability matrix: row {s} sums to {sums[s]:.12g}")
    return pi


def discounted_visitation(mdp: TabularMDP, policy, p0) -> np.ndarray:
    """nu^pi(s) = sum_t gamma^t Pr(s_t = s), i.e. nu^T = p0^T (I - gamma P_pi)^(-1), shape (S,).
    Not normalised: it sums to 1 / (1 - gamma) when gamma < 1.

    Defined in: Policy gradients, section The policy-gradient theorem.
    """
    mdp = _mdp(mdp)
    pi = check_policy(mdp, policy)
    p0 = _p0(mdp, p0)
    P_pi = np.einsum("sa,sat->st", pi, mdp._P)
    return np.linalg.solve((np.eye(mdp.num_states) - mdp.gamma * P_pi).T, p0)


def exact_objective(mdp: TabularMDP, theta: torch.Tensor, p0) -> torch.Tensor:
    """J(theta) = p0^T V^pi with V^pi = (I - gamma P_pi)^(-1) r_pi, as a differentiable
    float64 torch scalar of the (S, A) logits ``theta`` (a tensor with requires_grad).

    Defined in: Policy gradients, section Exact gradients on a small MDP.
    """
    mdp = _mdp(mdp)
    if not torch.is_tensor(theta):
        raise ValueError(f"theta must be a torch tensor, got {type(theta).__name__}")
    _theta(mdp, theta)
    p0 = torch.as_tensor(_p0(mdp, p0))
    P = torch.as_tensor(mdp._P)
    R = torch.as_tensor(mdp._R)
    pi = torch.softmax(theta.to(torch.float64), dim=1)
    P_pi = torch.einsum("sa,sat->st", pi, P)
    r_pi = (pi * R).sum(1)
    V = torch.linalg.solve(torch.eye(mdp.num_states, dtype=torch.float64)
                           - mdp.gamma * P_pi, r_pi)
    return p0 @ V


def exact_gradient(mdp: TabularMDP, theta, p0) -> np.ndarray:
    """grad_theta J(theta), (S, A), by autograd through :func:`exact_objective`.

    Defined in: Policy gradients, section Exact gradients on a small MDP.
    """
    mdp = _mdp(mdp)
    theta = torch.tensor(_theta(mdp, theta), requires_grad=True)
    J = exact_objective(mdp, theta, p0)
    (grad,) = torch.autograd.grad(J, theta)
    return grad.numpy()


def _exact_values(mdp: TabularMDP, pi: np.ndarray):
    P_pi = np.einsum("sa,sat->st", pi, mdp._P)
    r_pi = (pi * mdp._R).sum(1)
    V = np.linalg.solve(np.eye(mdp.num_states) - mdp.gamma * P_pi, r_pi)
    Q = mdp._R + mdp.gamma * mdp._P @ V
    return V, Q


def policy_gradient_theorem(mdp: TabularMDP, policy, p0) -> np.ndarray:
    """The gradient with respect to softmax logits by the policy-gradient theorem,

        dJ/dtheta[s, a] = nu^pi(s) pi(a|s) (Q^pi(s, a) - V^pi(s)),

    with exact V^pi, Q^pi and :func:`discounted_visitation`. ``policy`` is the (S, A)
    probability matrix softmax(theta); anything else raises ``ValueError`` naming ``policy``.

    Defined in: Policy gradients, section The policy-gradient theorem.
    """
    mdp = _mdp(mdp)
    pi = check_policy(mdp, policy)
    d = discounted_visitation(mdp, pi, p0)
    V, Q = _exact_values(mdp, pi)
    return d[:, None] * pi * (Q - V[:, None])


def sample_episodes(mdp: TabularMDP, policy, p0, num_episodes: int, *, seed: int = 0,
                    max_steps: int = 1000, start=None):
    """Play ``num_episodes`` episodes of ``policy`` at once (numpy, no loop over episodes).

    Returns a dict of (T, M) arrays ``states``, ``actions``, ``rewards`` (R[s_t, a_t], the
    expected reward), ``next_states`` and ``alive`` (bool: s_t is not terminal), T the longest
    episode (at most ``max_steps``). ``start=(s, a)`` fixes s_0 = s and a_0 = a instead.

    Defined in: Policy gradients, section Exact gradients on a small MDP.
    """
    mdp = _mdp(mdp)
    pi = check_policy(mdp, policy)
    p0 = _p0(mdp, p0)
    M = require_int(num_episodes, "num_episodes", minimum=1)
    max_steps = require_int(max_steps, "max_steps", minimum=1)
    rng = np.random.default_rng(require_int(seed, "seed", minimum=0))
    cum_pi = pi.cumsum(1)
    cum_P = mdp._P.cumsum(2)
    terminal = mdp.absorbing
    if start is None:
        s = np.minimum(np.searchsorted(p0.cumsum(), rng.random(M), side="right"),
                       mdp.num_states - 1)
    else:
        s = np.full(M, int(start[0]))
    out = {k: [] for k in ("states", "actions", "rewards", "next_states", "alive")}
    for t in range(max_steps):
        alive = ~terminal[s]
        if not alive.any():
            break
        u = rng.random(M)
        a = np.minimum((cum_pi[s] < u[:, None]).sum(1), mdp.num_actions - 1)
        if t == 0 and start is not None:
            a = np.full(M, int(start[1]))
        u2 = rng.random(M)
        s2 = np.minimum((cum_P[s, a] < u2[:, None]).sum(1), mdp.num_states - 1)
        for k, v in (("states", s), ("actions", a), ("rewards", mdp._R[s, a] * alive),
                     ("next_states", s2), ("alive", alive)):
            out[k].append(v)
        s = s2
    return {k: np.stack(v) for k, v in out.items()}


def reinforce_estimates(mdp: TabularMDP, theta, p0, psi: str, num_episodes: int, *,
                        seed: int = 0, max_steps: int = 1000) -> np.ndarray:
    """One REINFORCE estimate of grad_theta J per sampled episode: (M, S, A),

        g = sum_t w_t grad_theta log pi(a_t|s_t),
        grad_theta[s, b] log pi(a|s) = 1[s' = s] (1[b = a] - pi(b|s)),

    with the weight w_t of each ``psi`` (G_t the discounted reward-to-go, exact V and Q):

        total:        w_t = G_0                      reward_to_go: w_t = gamma^t G_t
        baseline:     w_t = gamma^t (G_t - V(s_t))   q:            w_t = gamma^t Q(s_t, a_t)
        advantage:    w_t = gamma^t A(s_t, a_t)      td:  w_t = gamma^t (r + gamma V(s') - V(s))

    Every choice is unbiased for :func:`exact_gradient`; they differ in variance.

    Defined in: Policy gradients, section The Psi_t family.
    """
    mdp = _mdp(mdp)
    if psi not in PSI_CHOICES:
        raise ValueError(f"psi must be one of {', '.join(map(repr, PSI_CHOICES))}, got {psi!r}")
    pi = softmax_policy(_theta(mdp, theta))
    ep = sample_episodes(mdp, pi, p0, num_episodes, seed=seed, max_steps=max_steps)
    s, a, r, s2, alive = (ep[k] for k in ("states", "actions", "rewards", "next_states",
                                            "alive"))
    T, M = s.shape
    gamma = mdp.gamma
    disc = gamma ** np.arange(T)[:, None]
    V, Q = _exact_values(mdp, pi)
    G = discounted_returns(r, gamma)  # reward-to-go G_t (rewards are 0 after the end)
    w = {"total": np.broadcast_to(G[0], (T, M)),
         "reward_to_go": disc * G,
         "baseline": disc * (G - V[s]),
         "q": disc * Q[s, a],
         "advantage": disc * (Q[s, a] - V[s]),
         "td": disc * (r + gamma * V[s2] - V[s])}[psi] * alive
    est = np.zeros((M, mdp.num_states, mdp.num_actions))
    rows = np.arange(M)
    eye = np.eye(mdp.num_actions)
    for t in range(T):
        est[rows, s[t]] += w[t][:, None] * (eye[a[t]] - pi[s[t]])
    return est


def estimator_stats(estimates: np.ndarray, truth: np.ndarray) -> dict:
    """Bias and variance of per-sample gradient estimates (M, ...) against ``truth`` (...):
    ``max_z`` the largest |mean - truth| / standard error over coordinates, ``rel_error``
    ||mean - truth|| / ||truth||, ``variance`` the total variance (trace of the covariance of
    one estimate).

    Defined in: Policy gradients, section The Psi_t family.
    """
    x = np.asarray(estimates, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if x.ndim < 1 or x.shape[1:] != truth.shape or len(x) < 2:
        raise ValueError(f"estimates must have shape (M >= 2, *truth.shape), got {x.shape} "
                         f"with truth {truth.shape}")
    mean = x.mean(0)
    se = x.std(0, ddof=1) / np.sqrt(len(x))
    z = np.where(se > 0, np.abs(mean - truth) / np.where(se > 0, se, 1.0),
                 np.where(np.abs(mean - truth) > 1e-12, np.inf, 0.0))
    return {"max_z": float(z.max()),
            "rel_error": float(np.linalg.norm(mean - truth) / np.linalg.norm(truth)),
            "variance": float(x.var(0, ddof=1).sum())}


def gae_bias_variance(mdp: TabularMDP, policy, V, lams, num_samples: int, *, seed: int = 0,
                      max_steps: int = 1000) -> dict:
    """Bias and variance of GAE(lambda) at t = 0 as an estimate of the exact A^pi(s, a).

    For every non-terminal (s, a), ``num_samples`` episodes start with s_0 = s, a_0 = a and then
    follow ``policy``; :func:`rlnotes.returns.gae` with the state values ``V`` (S,) (exact or
    not) gives A_hat_0 for each lambda of ``lams``. Two biases are reported. The raw bias
    E[A_hat(s, a)] - A^pi(s, a) includes any offset c(s) shared by all actions of a state; such
    an offset is a baseline and does not bias the policy gradient, since
    sum_a pi(a|s) grad log pi(a|s) c(s) = 0. The policy-gradient bias removes it: the error
    e(s, a) = E[A_hat(s, a)] - A^pi(s, a) minus its mean sum_b pi(b|s) e(s, b). Returns arrays
    over lambda:

    ==============  =========================================================================
    key             meaning
    ==============  =========================================================================
    ``lam``         the lambdas
    ``bias``        root mean square over (s, a) of the raw bias
    ``bias_pg``     root mean square over (s, a) of the policy-gradient bias
    ``max_z_pg``    largest |policy-gradient bias| / its standard error over (s, a)
    ``variance``    mean over (s, a) of Var[A_hat]
    ==============  =========================================================================

    Defined in: Actor-critic and generalised advantage estimation,
    section Bias and variance of GAE, measured.
    """
    mdp = _mdp(mdp)
    pi = check_policy(mdp, policy)
    V = np.asarray(V, dtype=np.float64)
    if V.shape != (mdp.num_states,) or not np.isfinite(V).all():
        raise ValueError(f"V must be a finite (S,) = ({mdp.num_states},) array, got {V.shape}")
    lams = np.atleast_1d(np.asarray(lams, dtype=np.float64))
    if lams.ndim != 1 or len(lams) == 0:
        raise ValueError(f"lams must be a non-empty list of lambdas, got shape {lams.shape}")
    for lam in lams:
        require_in_range(float(lam), "lams", 0.0, 1.0)
    M = require_int(num_samples, "num_samples", minimum=2)
    V_true, Q = _exact_values(mdp, pi)
    A_true = Q - V_true[:, None]
    S, A, L = mdp.num_states, mdp.num_actions, len(lams)
    live = ~mdp.absorbing
    mean = np.zeros((L, S, A))
    var = np.zeros((L, S, A))
    p0 = np.full(S, 1.0 / S)
    k = 0
    for s0 in np.flatnonzero(live):
        for a0 in range(A):
            ep = sample_episodes(mdp, pi, p0, M, seed=seed + k, max_steps=max_steps,
                                 start=(s0, a0))
            k += 1
            s, r, s2, alive = ep["states"], ep["rewards"], ep["next_states"], ep["alive"]
            # d_t = 1 on the transition into the terminal set (and after it: nothing flows back)
            dones = ((alive & mdp.absorbing[s2]) | ~alive).astype(np.float64)
            values = np.where(alive, V[s], 0.0)
            last = np.where(mdp.absorbing[s2[-1]], 0.0, V[s2[-1]])
            for j, lam in enumerate(lams):
                adv, _ = gae(r, values, dones, last, mdp.gamma, float(lam))
                mean[j, s0, a0] = adv[0].mean()
                var[j, s0, a0] = adv[0].var(ddof=1)
    err = mean - A_true
    err_pg = err - (pi * err).sum(-1, keepdims=True)
    # standard error of err_pg(s, a) = (1 - pi_a) m_a - sum_{b != a} pi_b m_b, samples independent
    w2 = pi[None] ** 2 * var / M
    se_pg = np.sqrt(((1 - pi[None]) ** 2 - pi[None] ** 2) * var / M
                    + w2.sum(-1, keepdims=True))
    z = np.abs(err_pg) / np.maximum(se_pg, 1e-300)
    n = live.sum() * A
    rms = lambda x: np.sqrt((x[:, live] ** 2).sum((1, 2)) / n)
    return {"lam": lams, "bias": rms(err), "bias_pg": rms(err_pg),
            "max_z_pg": z[:, live].max((1, 2)), "variance": var[:, live].sum((1, 2)) / n}


def gaussian_log_prob(a, mu, std):
    """log N(a; mu, diag(std^2)) = -sum_i [(a_i - mu_i)^2 / (2 std_i^2) + log std_i
    + log(2 pi) / 2], over the last axis. ``a`` (..., k), ``mu`` (..., k) or (k,), ``std``
    scalar or (k,), every entry > 0 (``ValueError`` naming ``std`` otherwise). numpy or torch.

    Defined in: Policy gradients, section Continuous actions: Gaussian policies.
    """
    xp_std = std.detach().cpu().numpy() if torch.is_tensor(std) else np.asarray(std, float)
    if not np.isfinite(xp_std).all() or (xp_std <= 0).any():
        raise ValueError(f"std must be > 0 (a standard deviation), got {std!r}")
    if torch.is_tensor(a) or torch.is_tensor(mu) or torch.is_tensor(std):
        a, mu, std = (torch.as_tensor(x, dtype=torch.float64) if not torch.is_tensor(x) else x
                      for x in (a, mu, std))
        z = (a - mu) / std
        return (-0.5 * z ** 2 - torch.log(std) - 0.5 * np.log(2 * np.pi)
                + torch.zeros_like(z)).sum(-1)
    a, mu, std = (np.asarray(x, dtype=np.float64) for x in (a, mu, std))
    z = (a - mu) / std
    return (-0.5 * z ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi) + np.zeros_like(z)).sum(-1)


def gaussian_score_estimates(mu, std, reward_fn, num_samples: int, *, seed: int = 0,
                             baseline: float = 0.0) -> np.ndarray:
    """Score-function estimates of the gradient of E[r(a)], a ~ N(mu, diag(std^2)), with
    respect to (mu, std): one row per sample, shape (M, 2k),

        g = (r(a) - c) [ (a - mu) / std^2 ,  ((a - mu)^2 - std^2) / std^3 ],

    the two halves being grad_mu log N(a) and grad_std log N(a). ``reward_fn`` maps (M, k)
    actions to (M,) rewards; ``baseline`` c is a constant (it does not depend on a).

    Defined in: Policy gradients, section Continuous actions: Gaussian policies.
    """
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    std = np.broadcast_to(np.asarray(std, dtype=np.float64), mu.shape)
    if not np.isfinite(std).all() or (std <= 0).any():
        raise ValueError(f"std must be > 0 (a standard deviation), got {std!r}")
    if mu.ndim != 1 or not np.isfinite(mu).all():
        raise ValueError(f"mu must be a finite (k,) vector, got shape {mu.shape}")
    if not callable(reward_fn):
        raise ValueError(f"reward_fn must be callable, got {reward_fn!r}")
    num_samples = require_int(num_samples, "num_samples", minimum=1)
    baseline = require_real(baseline, "baseline")
    M = num_samples
    rng = np.random.default_rng(require_int(seed, "seed", minimum=0))
    a = mu + std * rng.standard_normal((M, mu.size))
    r = np.asarray(reward_fn(a), dtype=np.float64)
    if r.shape != (M,):
        raise ValueError(f"reward_fn must return shape ({M},), got {r.shape}")
    score_mu = (a - mu) / std ** 2
    score_std = ((a - mu) ** 2 - std ** 2) / std ** 3
    return (r - baseline)[:, None] * np.concatenate([score_mu, score_std], axis=1)


def quadratic_gaussian_gradient(mu, std, target) -> np.ndarray:
    """The exact gradient for r(a) = -||a - target||^2, a ~ N(mu, diag(std^2)):
    J = -||mu - target||^2 - sum_i std_i^2, so grad_mu J = -2 (mu - target) and
    grad_std J = -2 std. Returns the (2k,) vector [grad_mu, grad_std].

    Defined in: Policy gradients, section Continuous actions: Gaussian policies.
    """
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    std = np.broadcast_to(np.asarray(std, dtype=np.float64), mu.shape)
    if (std <= 0).any():
        raise ValueError(f"std must be > 0 (a standard deviation), got {std!r}")
    target = np.broadcast_to(np.asarray(target, dtype=np.float64), mu.shape)
    return np.concatenate([-2 * (mu - target), -2 * std])


def gaussian_pathwise_estimates(mu, std, reward_grad_fn, num_samples: int, *,
                                seed: int = 0) -> np.ndarray:
    """Pathwise (reparameterisation) estimates of the gradient of E[r(a)], a ~ N(mu,
    diag(std^2)), with respect to (mu, std): write a = mu + std * z with z ~ N(0, I), so that
    d a / d mu = 1 and d a / d std = z, and differentiate r through a. One row per sample,
    shape (M, 2k),

        g = [ grad r(a) ,  grad r(a) * z ].

    ``reward_grad_fn`` maps (M, k) actions to the (M, k) gradients grad_a r(a): the estimator
    needs the reward's derivative, which the score function does not. With the same ``seed``,
    the samples a are those of :func:`gaussian_score_estimates` (common random numbers).

    Defined in: Policy gradients, section The pathwise (reparameterisation) gradient.
    """
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    if mu.ndim != 1 or not np.isfinite(mu).all():
        raise ValueError(f"mu must be a finite (k,) vector, got shape {mu.shape}")
    std = np.broadcast_to(np.asarray(std, dtype=np.float64), mu.shape)
    if not np.isfinite(std).all() or (std <= 0).any():
        raise ValueError(f"std must be > 0 (a standard deviation), got {std!r}")
    if not callable(reward_grad_fn):
        raise ValueError(f"reward_grad_fn must be callable, got {reward_grad_fn!r}")
    num_samples = require_int(num_samples, "num_samples", minimum=1)
    M = num_samples
    rng = np.random.default_rng(require_int(seed, "seed", minimum=0))
    z = rng.standard_normal((M, mu.size))
    g = np.asarray(reward_grad_fn(mu + std * z), dtype=np.float64)
    if g.shape != (M, mu.size):
        raise ValueError(f"reward_grad_fn must return shape ({M}, {mu.size}), got {g.shape}")
    return np.concatenate([g, g * z], axis=1)


# Sutton and Barto's short corridor (Example 13.1): states 0, 1, 2 and the goal 3; reward -1
# per step; "right" moves right in states 0 and 2 and left in state 1 (the actions are
# reversed there); "left" in state 0 stays put. The states look the same to the agent, so a
# policy is one probability p of "right", shared by all three.
_CORRIDOR_NEXT = np.array([[0, 1], [2, 0], [1, 3]])  # next state for (state, left/right)


def _corridor_solve(p_right, gamma):
    p = require_in_range(p_right, "p_right", 0.0, 1.0)
    gamma = require_in_range(gamma, "gamma", 0.0, 1.0)
    P = np.zeros((3, 2, 4))
    P[np.arange(3)[:, None], np.arange(2)[None, :], _CORRIDOR_NEXT] = 1.0
    P = P[:, :, :3]                                   # the goal's value is 0: drop it
    P_pi = (1 - p) * P[:, 0] + p * P[:, 1]
    system = np.eye(3) - gamma * P_pi
    if gamma == 1.0 and p in (0.0, 1.0):
        return p, gamma, None, None, None               # the episode never ends
    V = np.linalg.solve(system, -np.ones(3))
    Q = -1.0 + gamma * P @ V                           # (3, 2)
    visits = np.linalg.solve(system.T, np.eye(3)[0])   # sum_t gamma^t Pr(s_t = s), s_0 = 0
    return p, gamma, V, Q, visits


def short_corridor_value(p_right, gamma: float = 1.0) -> float:
    """The exact value J(p) = V(s_0) of Sutton and Barto's short corridor (Example 13.1)
    under the policy that goes right with probability ``p_right`` in every state (the three
    states look alike), by solving V = r_pi + gamma P_pi V. With gamma = 1 the two
    deterministic policies (p = 0, p = 1) never reach the goal: their value is -inf.
    ``ValueError`` naming ``p_right`` or ``gamma`` outside [0, 1].

    Defined in: Policy gradients, section Why stochastic policies: the short corridor.
    """
    _, _, V, _, _ = _corridor_solve(p_right, gamma)
    return -np.inf if V is None else float(V[0])


def short_corridor_gradient(p_right, gamma: float = 1.0) -> float:
    """dJ/dp of :func:`short_corridor_value` by the policy-gradient theorem with one parameter
    shared by the three look-alike states:

        dJ/dp = sum_s nu(s) sum_a (d pi(a|s) / dp) Q(s, a) = sum_s nu(s) (Q(s, right) - Q(s, left)),

    nu(s) = sum_t gamma^t Pr(s_t = s) (the expected number of visits when gamma = 1).
    ``ValueError`` naming ``p_right`` or ``gamma`` outside [0, 1], or for a deterministic
    ``p_right`` (0 or 1) with gamma = 1 (its value is -inf).

    Defined in: Policy gradients, section Why stochastic policies: the short corridor.
    """
    p, gamma, V, Q, visits = _corridor_solve(p_right, gamma)
    if V is None:
        raise ValueError(f"p_right must be in (0, 1) when gamma = 1 (a deterministic policy "
                         f"never reaches the goal), got {p_right!r}")
    return float(visits @ (Q[:, 1] - Q[:, 0]))
