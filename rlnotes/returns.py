"""Discounted returns and generalised advantage estimation (GAE).

Time is the first axis everywhere: a trajectory is an array of shape (T,), a batch of N parallel
environments one of shape (T, N). numpy arrays in give numpy arrays out, torch tensors in give
torch tensors out (same dtype and device, differentiable with respect to ``values``).

Both quantities are backward recursions of one shape,

    y_t = x_t + c_t * y_{t+1},    y_T = 0,

with ``x_t = r_{t+1}, c_t = gamma (1 - d_t)`` for the return and ``x_t = delta_t,
c_t = gamma lam (1 - d_t)`` for the advantage. As in the book's notation, ``rewards[t]`` holds
``r_{t+1}``, the reward that follows the action taken at step t, and ``dones[t]`` holds ``d_t``.
The recursion is solved once, by :func:`reverse_scan`, for both array libraries, vectorised over
the environments (no Python loop over N).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from rlnotes._validate import (
    as_array,
    is_tensor,
    require_binary,
    require_finite,
    require_gamma,
    require_in_range,
    require_ndim,
    require_same_shape,
)

__all__ = ["discounted_returns", "gae", "reverse_scan"]


# --- one recursion for numpy and torch --------------------------------------------------------


class _Numpy:
    @staticmethod
    def zeros(shape, like):
        return np.zeros(shape, dtype=like.dtype)

    @staticmethod
    def cat(xs):
        return np.concatenate(xs, axis=0)

    @staticmethod
    def swap01(x):
        return np.swapaxes(x, 0, 1)


class _Torch:
    @staticmethod
    def zeros(shape, like):
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    @staticmethod
    def cat(xs):
        return torch.cat(xs, dim=0)

    @staticmethod
    def swap01(x):
        return x.transpose(0, 1)


def _ops(x):
    return _Torch if is_tensor(x) else _Numpy


def _sequential_scan(x, c):
    """``y[t] = x[t] + c[t] * y[t+1]`` with ``y[T] = 0``: one Python step per time step,
    each step vectorised over every trailing axis."""
    xp = _ops(x)
    y = xp.zeros(x.shape, x)
    y_next = xp.zeros(x.shape[1:], x)
    for t in range(x.shape[0] - 1, -1, -1):
        y_next = x[t] + c[t] * y_next
        y[t] = y_next
    return y


def reverse_scan(x, c):
    r"""Solve the backward linear recursion along axis 0 (time):

    .. math::  y_t = x_t + c_t\, y_{t+1}, \qquad y_T = 0 .

    ========  ==============  ======================================================
    argument  shape           meaning
    ========  ==============  ======================================================
    x         (T, ...)        the inputs (a reward, or a TD error delta_t); float
    c         x's shape       the factors (``gamma (1 - d_t)``, or ``gamma lam (1 - d_t)``)
    returns   x's shape       y, of x's kind (numpy or torch), dtype and device
    ========  ==============  ======================================================

    Both numpy arrays or both torch tensors (c is cast to x's dtype); lists become float64
    arrays. Every trailing axis (the N environments) is processed at once.

    The recursion is sequential in t, but T Python steps are slow when each step is small. The
    time axis is therefore cut into K chunks of L ~ sqrt(T) steps: (1) the recursion runs inside
    every chunk at once (L steps over arrays of K chunks), as if nothing came after the chunk;
    (2) the values at the chunk starts are chained from the last chunk to the first (K steps);
    (3) each chunk adds the value carried in from the next chunk times the product of the
    ``c`` that lie between, ``y_t = y^local_t + (prod_{j=t}^{end} c_j) y_{start of next chunk}``.
    That is about 2 sqrt(T) Python steps instead of T, with no division (so zeros in ``c``, the
    episode ends, are exact). Used by :func:`discounted_returns` and :func:`gae`.

    Defined in: Actor-critic and generalised advantage estimation,
    section Generalised advantage estimation.
    """
    x, c = as_array(x, "x"), as_array(c, "c")
    if is_tensor(x) != is_tensor(c):
        raise ValueError(f"c must be of x's kind ({type(x).__name__}), got {type(c).__name__}")
    for v, name in ((x, "x"), (c, "c")):
        floating = torch.is_floating_point(v) if is_tensor(v) else np.issubdtype(v.dtype, np.floating)
        if not floating:
            raise ValueError(f"{name} must be floating-point, got dtype {v.dtype}")
        require_ndim(v, name, tuple(range(1, 9)))
        require_finite(v, name)
    require_same_shape(c, "c", x, "x")
    if is_tensor(x) and c.device != x.device:
        raise ValueError(f"c must be on x's device {x.device}, got {c.device}")
    return _reverse_scan(x, c.to(x.dtype) if is_tensor(x) else c.astype(x.dtype, copy=False))


def _reverse_scan(x, c):
    """:func:`reverse_scan` without input checks."""
    xp = _ops(x)
    T = x.shape[0]
    if T <= 1:
        return _sequential_scan(x, c)
    L = math.isqrt(T - 1) + 1  # ceil(sqrt(T))
    K = -(-T // L)
    pad = K * L - T
    rest = tuple(x.shape[1:])
    if pad:  # padding after the end: x = 0 and c = 0 add nothing to y
        x = xp.cat([x, xp.zeros((pad,) + rest, x)])
        c = xp.cat([c, xp.zeros((pad,) + rest, c)])
    xb = xp.swap01(x.reshape((K, L) + rest))  # (L, K, ...): step within chunk first
    cb = xp.swap01(c.reshape((K, L) + rest))
    # (1) every chunk on its own, vectorised over chunks, and prod_c[i] = c[i] * ... * c[L-1]
    y_local, prod_c = xp.zeros(xb.shape, x), xp.zeros(cb.shape, c)
    y_next, p_next = xp.zeros(xb.shape[1:], x), xp.zeros(cb.shape[1:], c) + 1
    for i in range(L - 1, -1, -1):
        y_next = xb[i] + cb[i] * y_next
        p_next = cb[i] * p_next
        y_local[i], prod_c[i] = y_next, p_next
    y_start = _sequential_scan(y_local[0], prod_c[0])  # (2) y at the start of each chunk
    carry = xp.cat([y_start[1:], xp.zeros((1,) + rest, y_start)])  # y after chunk k
    y = y_local + prod_c * carry[None]  # (3)
    return xp.swap01(y).reshape((K * L,) + rest)[:T]


# --- input handling -------------------------------------------------------------------------


def _float_rewards(rewards):
    """rewards as a float numpy array or float torch tensor of shape (T,) or (T, N)."""
    rewards = as_array(rewards, "rewards")
    if is_tensor(rewards):
        if not torch.is_floating_point(rewards):
            if rewards.dtype.is_complex:
                raise ValueError(f"rewards must be real, got dtype {rewards.dtype}")
            rewards = rewards.to(torch.get_default_dtype())
    else:
        if not np.issubdtype(rewards.dtype, np.floating):
            if not (np.issubdtype(rewards.dtype, np.integer) or rewards.dtype == np.bool_):
                raise ValueError(f"rewards must hold real numbers, got dtype {rewards.dtype}")
            rewards = rewards.astype(np.float64)
    require_ndim(rewards, "rewards", (1, 2))
    require_finite(rewards, "rewards")
    return rewards


def _like(x, name: str, ref, ref_name: str = "rewards"):
    """``x`` (same array kind as ``ref``, or a Python number or list) in ``ref``'s dtype/device."""
    if isinstance(x, (numbers.Number, list, tuple)) and not isinstance(x, bool):
        x = np.asarray(x, dtype=np.float64)
        if is_tensor(ref):
            return torch.as_tensor(x, dtype=ref.dtype, device=ref.device)
        return x.astype(ref.dtype)
    if is_tensor(ref):
        if not is_tensor(x):
            raise ValueError(f"{name} must be a torch.Tensor like {ref_name}, got {type(x).__name__}")
        if x.device != ref.device:
            raise ValueError(f"{name} must be on {ref_name}'s device {ref.device}, got {x.device}")
        if x.dtype.is_complex:
            raise ValueError(f"{name} must be real, got dtype {x.dtype}")
        return x.to(ref.dtype)
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a numpy array like {ref_name}, got {type(x).__name__}")
    real = np.issubdtype(x.dtype, np.number) and not np.issubdtype(x.dtype, np.complexfloating)
    if not (real or x.dtype == np.bool_):
        raise ValueError(f"{name} must hold real numbers, got dtype {x.dtype}")
    return x.astype(ref.dtype, copy=False)


def _continue_flags(dones, rewards):
    """``1 - dones`` in the rewards' dtype, after checking shape and 0/1 values."""
    if dones is None:
        return _ops(rewards).zeros(rewards.shape, rewards) + 1
    if isinstance(dones, (list, tuple)):
        dones = np.asarray(dones)
    if not isinstance(dones, (np.ndarray, torch.Tensor)):
        raise ValueError(
            f"dones must be a numpy array or torch tensor of 0/1 or bool, got {type(dones).__name__}"
        )
    require_same_shape(dones, "dones", rewards, "rewards")
    require_binary(dones, "dones")
    dones = _like(dones, "dones", rewards)
    return 1 - dones


def discounted_returns(rewards, gamma, dones=None):
    r"""Discounted return of every time step, cut at episode ends.

    .. math::

        G_t = r_{t+1} + \gamma (1 - d_t) G_{t+1}, \qquad G_T = 0,

    so ``G_t = sum_k gamma^k r_{t+k+1}`` up to the end of the episode that contains t, and nothing
    after the last step of the array (no bootstrap; use :func:`gae` for a bootstrapped target).

    ==========  =========================  ==================================================
    argument    shape                      meaning
    ==========  =========================  ==================================================
    rewards     (T,) or (T, N)             ``rewards[t] = r_{t+1}``, the reward of the action
                                           at step t; numpy array or torch tensor (a list
                                           becomes a float64 numpy array)
    gamma       float in [0, 1]            discount factor
    dones       None or rewards' shape     ``d_t = 1`` (or True) when the transition at t
                                           ended the episode; None means no episode ends
    returns     rewards' shape             ``G_t``, same kind, dtype and device as rewards
    ==========  =========================  ==================================================

    Integer or bool rewards are promoted to float64 (numpy) or torch's default dtype (torch).
    ``dones`` may be bool or hold 0/1 in any numeric dtype. The N environments are processed
    together (no loop over N), see :func:`reverse_scan`.

    Defined in: Actor-critic and generalised advantage estimation,
    section Generalised advantage estimation.
    """
    rewards = _float_rewards(rewards)
    gamma = require_gamma(gamma)
    not_done = _continue_flags(dones, rewards)
    return _reverse_scan(rewards, gamma * not_done)


def gae(rewards, values, dones, last_value, gamma, lam):
    r"""Generalised advantage estimation (Schulman et al. 2016), batched over environments.

    .. math::

        \delta_t = r_{t+1} + \gamma (1 - d_t) V(s_{t+1}) - V(s_t), \qquad
        A_t = \delta_t + \gamma \lambda (1 - d_t) A_{t+1}, \quad A_T = 0,

    with ``V(s_T) = last_value``, and the critic's regression target ``returns = A_t + V(s_t)``
    (the lambda-return). ``lam = 0`` gives the one-step TD error ``A_t = delta_t``; ``lam = 1``
    gives the discounted return bootstrapped with ``last_value`` minus ``V(s_t)``. For
    ``lam < 1`` the estimate is biased unless V is exact: lambda trades bias for variance.

    ==========  =========================  ==================================================
    argument    shape                      meaning
    ==========  =========================  ==================================================
    rewards     (T,) or (T, N)             ``rewards[t] = r_{t+1}``; numpy array or tensor
    values      rewards' shape             ``values[t] = V(s_t)``, same kind as rewards
    dones       None or rewards' shape     ``d_t = 1`` (or True) when the transition at t
                                           ended the episode: no bootstrap from t+1 and no
                                           advantage flows back across the boundary
    last_value  () or (N,); or a number    ``V(s_T)``, the value of the state after the last
                                           step (ignored where ``d_{T-1} = 1``); a scalar is
                                           shared by all N environments
    gamma       float in [0, 1]            discount factor
    lam         float in [0, 1]            the GAE parameter lambda
    returns     (advantages, returns)      both of rewards' shape, kind, dtype and device
    ==========  =========================  ==================================================

    ``values[t+1]`` after a done is the first state of a new episode and is never used for t.
    A time-limit truncation is not a termination: at the end of the array leave its flag at 0
    and pass the value of the state it stopped in as ``last_value``; inside the array (vector
    environments reset automatically) set the flag to 1 and add ``gamma V(s_trunc)`` to that
    step's reward.
    values and last_value are cast to rewards' dtype (integer rewards are promoted as in
    :func:`discounted_returns`). With torch inputs the result is differentiable with respect to
    ``values`` and ``last_value``.

    Defined in: Actor-critic and generalised advantage estimation,
    section Generalised advantage estimation.
    """
    rewards = _float_rewards(rewards)
    values = _like(values, "values", rewards)
    require_same_shape(values, "values", rewards, "rewards")
    require_finite(values, "values")
    last_value = _like(last_value, "last_value", rewards)
    want = ((), tuple(rewards.shape[1:]))
    if tuple(last_value.shape) not in want:
        raise ValueError(
            f"last_value must have shape () or {tuple(rewards.shape[1:])} (one value per "
            f"environment), got {tuple(last_value.shape)}"
        )
    require_finite(last_value, "last_value")
    gamma = require_gamma(gamma)
    lam = require_in_range(lam, "lam", 0.0, 1.0)
    not_done = _continue_flags(dones, rewards)

    xp = _ops(rewards)
    last = last_value + xp.zeros(rewards.shape[1:], rewards)  # () -> (N,) when N environments
    next_values = xp.cat([values[1:], last[None]])  # V(s_{t+1})
    delta = rewards + gamma * not_done * next_values - values
    adv = _reverse_scan(delta, (gamma * lam) * not_done)
    return adv, adv + values
