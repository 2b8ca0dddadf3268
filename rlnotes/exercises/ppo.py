"""Checks of the exercises of the chapter "TRPO and PPO".

``check_conjugate_gradient`` runs the reader's conjugate gradient on random symmetric positive
definite systems and compares it with a direct solve (and ``rlnotes.trpo.conjugate_gradient``
after few steps). ``check_clipped_surrogate`` compares the reader's clipped surrogate loss with
``rlnotes.ppo.ppo_clip_loss``, values and gradients, and recognises the usual mistakes (max for
min, a sign, clipping the advantage, no clip at all).
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes import ppo, trpo
from rlnotes.exercises.core import ExerciseFailed, check, expect_own_work

__all__ = ["check_conjugate_gradient", "check_clipped_surrogate"]


def _array(x, what: str, shape) -> np.ndarray:
    if torch.is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ExerciseFailed(f"{what} could not be read as an array ({err}).",
                             "Return a torch tensor of numbers.") from None
    if x.shape != shape:
        raise ExerciseFailed(f"{what} has shape {x.shape}, expected {shape}.",
                             "Return x with b's shape (or a scalar loss).")
    return x


def _system(seed: int, n: int):
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(n, n, generator=g, dtype=torch.float64)
    A = M @ M.T + 0.5 * torch.eye(n, dtype=torch.float64)
    b = torch.randn(n, generator=g, dtype=torch.float64)
    return A, b


@check
def check_conjugate_gradient(my_conjugate_gradient):
    """``my_conjugate_gradient(matvec, b, iters)`` returns x after ``iters`` CG steps from
    x = 0 for ``matvec(v) = A v`` with A symmetric positive definite (no damping)."""
    expect_own_work(my_conjugate_gradient, trpo.conjugate_gradient)
    calls = []
    for seed, n in ((0, 5), (1, 8), (2, 12)):
        A, b = _system(seed, n)
        calls.clear()

        def matvec(v, A=A):
            calls.append(1)
            return A @ v

        got = _array(my_conjugate_gradient(matvec, b.clone(), 3 * n), "the solution", (n,))
        direct = torch.linalg.solve(A, b).numpy()
        if not np.allclose(got, direct, atol=1e-6):
            if np.allclose(got, b.numpy(), atol=1e-8):
                raise ExerciseFailed("The solution equals b.", "Update x by alpha * p each step.")
            raise ExerciseFailed(
                f"With {3 * n} steps on a {n}x{n} system, x is off the direct solve by "
                f"{np.abs(got - direct).max():.3g}.",
                "alpha = (r.r) / (p.Ap); r_new = r - alpha Ap; beta = (r_new.r_new)/(r.r); "
                "p = r_new + beta p. Check which residual each dot product uses.")
        if len(calls) > 3 * n + 1:
            raise ExerciseFailed(f"matvec was called {len(calls)} times for {3 * n} steps.",
                                 "One product A p per step is all CG needs.")
    # after 2 steps: the same iterate as rlnotes' CG (CG is defined step by step)
    A, b = _system(3, 10)
    got = _array(my_conjugate_gradient(lambda v: A @ v, b.clone(), 2), "the solution", (10,))
    expected = trpo.conjugate_gradient(lambda v: A @ v, b, iters=2, damping=1e-300,
                                       tol=0.0).numpy()
    if not np.allclose(got, expected, atol=1e-8):
        raise ExerciseFailed("After 2 steps your x differs from conjugate gradient's iterate.",
                             "Start from x = 0, r = p = b, and take exactly `iters` steps.")


def _ppo_batch(seed: int, B: int = 200):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, generator=g, dtype=torch.float64) * 2 - 0.1
    logp = old + 0.4 * torch.randn(B, generator=g, dtype=torch.float64)
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    return logp, old, adv


def _wrong_losses(logp, old, adv, eps):
    ratio = torch.exp(logp - old)
    clipped = ratio.clamp(1 - eps, 1 + eps)
    return [
        ("You took the max of the two terms: the minimum makes the objective pessimistic.",
         -torch.maximum(ratio * adv, clipped * adv).mean()),
        ("The sign is flipped: the loss is minus the clipped objective (it is minimised).",
         torch.minimum(ratio * adv, clipped * adv).mean()),
        ("That is the unclipped surrogate: clip the ratio to [1 - eps, 1 + eps] in a second "
         "term and take the minimum.", -(ratio * adv).mean()),
        ("You clipped the advantage instead of the ratio.",
         -torch.minimum(ratio * adv, ratio * adv.clamp(1 - eps, 1 + eps)).mean()),
        ("You used the clipped term alone: without the minimum with the unclipped term the "
         "bound is not pessimistic.", -(clipped * adv).mean()),
        ("The ratio is pi / pi_old = exp(logp - old_logp), not its inverse.",
         -torch.minimum(adv / ratio, (1 / ratio).clamp(1 - eps, 1 + eps) * adv).mean()),
    ]


@check
def check_clipped_surrogate(my_clipped_surrogate):
    """``my_clipped_surrogate(logp, old_logp, adv, clip_eps)`` returns PPO's clipped surrogate
    loss (a scalar tensor, differentiable with respect to logp)."""
    expect_own_work(my_clipped_surrogate, ppo.ppo_clip_loss)
    for seed, eps in ((0, 0.2), (1, 0.1), (2, 0.3)):
        logp, old, adv = _ppo_batch(seed)
        x = logp.clone().requires_grad_()
        loss = my_clipped_surrogate(x, old.clone(), adv.clone(), eps)
        if not torch.is_tensor(loss) or loss.numel() != 1:
            raise ExerciseFailed("The loss is not a scalar tensor.",
                                 "Return the mean over the batch, as a torch scalar.")
        got = float(loss.detach())
        expected = float(ppo.ppo_clip_loss(logp, old, adv, eps))
        if abs(got - expected) > 1e-8:
            for hint, wrong in _wrong_losses(logp, old, adv, eps):
                if abs(got - float(wrong)) < 1e-8:
                    raise ExerciseFailed("The loss differs from PPO's clipped surrogate.", hint)
            raise ExerciseFailed(f"The loss is {got:.6f}, expected {expected:.6f}.",
                                 "loss = -mean(min(ratio A, clip(ratio, 1-eps, 1+eps) A)).")
        if not loss.requires_grad:
            raise ExerciseFailed("The loss carries no gradient.",
                                 "Compute it from logp with torch operations (no .item(), "
                                 "no numpy).")
        loss.backward()
        ref = logp.clone().requires_grad_()
        ppo.ppo_clip_loss(ref, old, adv, eps).backward()
        if x.grad is None or not torch.allclose(x.grad, ref.grad, atol=1e-10):
            raise ExerciseFailed("The gradient differs from the clipped surrogate's.",
                                 "Where the clip is active the gradient must be 0: compute the "
                                 "clipped term with torch.clamp on the ratio.")
