"""Checks of the exercises of the chapter "TRPO and PPO".

The chapter asks for variants of what it displays: ``check_preconditioned_cg`` (conjugate
gradient with a Jacobi preconditioner, checked against a direct solve and a reference
preconditioned iterate) and ``check_dual_clip_loss`` (dual-clip PPO's loss, checked against a
reference and ``rlnotes.ppo.ppo_clip_loss`` where the two agree). The two checks below them
belonged to earlier exercises (plain CG and the plain clipped surrogate, whose recipes the
chapter shows); they stay exported for courses that assigned them.

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
from rlnotes.exercises.core import ExerciseFailed, check, expect_own_work, reader_array

__all__ = ["check_preconditioned_cg", "check_dual_clip_loss", "check_conjugate_gradient",
           "check_clipped_surrogate"]


def _array(x, what: str, shape) -> np.ndarray:
    return reader_array(x, what, shape, read_hint='Return a torch tensor of numbers.',
                        shape_hint="Return x with b's shape (or a scalar loss).")


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
                "alpha = (g.g) / (p.Up); g_new = g - alpha Up; beta = (g_new.g_new)/(g.g); "
                "p = g_new + beta p, with g the residual. Check which residual each dot "
                "product uses.")
        if len(calls) > 3 * n + 1:
            raise ExerciseFailed(f"matvec was called {len(calls)} times for {3 * n} steps.",
                                 "One product U p per step is all CG needs.")
    # after 2 steps: the same iterate as rlnotes' CG (CG is defined step by step)
    A, b = _system(3, 10)
    got = _array(my_conjugate_gradient(lambda v: A @ v, b.clone(), 2), "the solution", (10,))
    expected = trpo.conjugate_gradient(lambda v: A @ v, b, iters=2, damping=1e-300,
                                       tol=0.0).numpy()
    if not np.allclose(got, expected, atol=1e-8):
        raise ExerciseFailed("After 2 steps your x differs from conjugate gradient's iterate.",
                             "Start from x = 0, r = p = b, and take exactly `iters` steps.")


def _expect_same_gradient(loss, x, reference_loss, logp, failure: ExerciseFailed) -> None:
    """The reader's ``loss`` of ``x`` (a leaf copy of ``logp``) must carry a gradient equal to
    that of ``reference_loss(copy of logp)``; raise ``failure`` when it differs."""
    if not loss.requires_grad:
        raise ExerciseFailed("The loss carries no gradient.",
                             "Compute it from logp with torch operations (no .item(), no numpy).")
    loss.backward()
    ref = logp.clone().requires_grad_()
    reference_loss(ref).backward()
    if x.grad is None or not torch.allclose(x.grad, ref.grad, atol=1e-10):
        raise failure


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
        _expect_same_gradient(
            loss, x, lambda ref: ppo.ppo_clip_loss(ref, old, adv, eps), logp,
            ExerciseFailed("The gradient differs from the clipped surrogate's.",
                           "Where the clip is active the gradient must be 0: compute the "
                           "clipped term with torch.clamp on the ratio."))


# --- preconditioned conjugate gradient ------------------------------------------------------


def _pcg_reference(A: torch.Tensor, b: torch.Tensor, diag: torch.Tensor, iters: int):
    """Jacobi-preconditioned CG on ``A x = b`` from x = 0 (preconditioner diag(diag)),
    ``iters`` steps; ``g`` is the residual b - A x, ``z`` the preconditioned one."""
    x = torch.zeros_like(b)
    g = b.clone()
    z = g / diag
    p = z.clone()
    gz = g @ z
    for _ in range(iters):
        Ap = A @ p
        alpha = gz / (p @ Ap)
        x = x + alpha * p
        g = g - alpha * Ap
        z = g / diag
        gz_new = g @ z
        p = z + (gz_new / gz) * p
        gz = gz_new
    return x


def _badly_scaled_system(seed: int, n: int):
    """An SPD system whose diagonal spans four orders of magnitude: Jacobi helps a lot."""
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(n, n, generator=g, dtype=torch.float64)
    A0 = M @ M.T / n + torch.eye(n, dtype=torch.float64)
    scale = torch.logspace(-2, 2, n, dtype=torch.float64)[torch.randperm(n, generator=g)]
    A = scale[:, None] * A0 * scale[None, :]
    b = torch.randn(n, generator=g, dtype=torch.float64)
    return A, b


@check
def check_preconditioned_cg(my_preconditioned_cg):
    """``my_preconditioned_cg(matvec, b, diag, iters)`` returns x after ``iters`` steps of
    conjugate gradient with the Jacobi preconditioner M = diag(diag), from x = 0, for
    ``matvec(v) = A v`` with A symmetric positive definite."""
    expect_own_work(my_preconditioned_cg, trpo.conjugate_gradient, _pcg_reference)
    for seed, n in ((0, 6), (1, 10), (2, 16)):
        A, b = _badly_scaled_system(seed, n)
        diag = torch.diagonal(A).clone()
        calls = []

        def matvec(v, A=A):
            calls.append(1)
            return A @ v

        iters = 4
        got = _array(my_preconditioned_cg(matvec, b.clone(), diag.clone(), iters),
                     "the solution", (n,))
        expected = _pcg_reference(A, b, diag, iters).numpy()
        if not np.allclose(got, expected, rtol=1e-6, atol=1e-9):
            plain = trpo.conjugate_gradient(lambda v: A @ v, b, iters=iters, damping=1e-300,
                                            tol=0.0).numpy()
            if np.allclose(got, plain, rtol=1e-6, atol=1e-9):
                raise ExerciseFailed(
                    f"After {iters} steps your x is plain conjugate gradient's iterate.",
                    "Use the preconditioned residual z = g / diag: p starts at z, alpha = (g.z) "
                    "/ (p.Up), beta = (g_new.z_new) / (g.z), p = z_new + beta p.")
            raise ExerciseFailed(
                f"After {iters} steps on a {n}x{n} system your x is off preconditioned CG's "
                f"iterate by {np.abs(got - expected).max():.3g}.",
                "z = g / diag; p = z; alpha = (g.z) / (p.Up); x += alpha p; g -= alpha Up; "
                "z_new = g / diag; beta = (g.z)_new / (g.z); p = z_new + beta p.")
        if len(calls) > iters + 1:
            raise ExerciseFailed(f"matvec was called {len(calls)} times for {iters} steps.",
                                 "One product U p per step is all CG needs.")
        full = _array(my_preconditioned_cg(lambda v, A=A: A @ v, b.clone(), diag.clone(),
                                           3 * n), "the solution", (n,))
        direct = torch.linalg.solve(A, b).numpy()
        if not np.allclose(full, direct, rtol=1e-5, atol=1e-8):
            raise ExerciseFailed(
                f"With {3 * n} steps x is off the direct solve by "
                f"{np.abs(full - direct).max():.3g}.",
                "Stop early only when the residual is (numerically) zero.")
    # with diag = 1 it must be plain CG
    A, b = _system(3, 10)
    got = _array(my_preconditioned_cg(lambda v: A @ v, b.clone(),
                                      torch.ones(10, dtype=torch.float64), 2),
                 "the solution", (10,))
    plain = trpo.conjugate_gradient(lambda v: A @ v, b, iters=2, damping=1e-300,
                                    tol=0.0).numpy()
    if not np.allclose(got, plain, atol=1e-8):
        raise ExerciseFailed("With diag = 1 your x differs from plain conjugate gradient's.",
                             "The preconditioner only enters through z = r / diag.")


# --- dual-clip PPO --------------------------------------------------------------------------


def _dual_clip_reference(logp, old_logp, adv, clip_eps, dual_clip):
    ratio = torch.exp(logp - old_logp)
    clipped = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    objective = torch.where(adv < 0, torch.maximum(clipped, dual_clip * adv), clipped)
    return -objective.mean()


def _dual_batch(seed: int, B: int = 300):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, generator=g, dtype=torch.float64) * 2 - 0.1
    logp = old + 1.2 * torch.randn(B, generator=g, dtype=torch.float64)  # ratios up to ~30
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    return logp, old, adv


@check
def check_dual_clip_loss(my_dual_clip_loss):
    """``my_dual_clip_loss(logp, old_logp, adv, clip_eps, dual_clip)`` returns dual-clip PPO's
    loss (a scalar tensor, differentiable with respect to logp): minus the mean over the batch
    of ``max(min(r A, clip(r, 1 - eps, 1 + eps) A), c A)`` where A < 0, and of PPO's clipped
    objective where A >= 0."""
    expect_own_work(my_dual_clip_loss, _dual_clip_reference)
    for seed, eps, c in ((0, 0.2, 3.0), (1, 0.1, 2.0), (2, 0.3, 5.0)):
        logp, old, adv = _dual_batch(seed)
        x = logp.clone().requires_grad_()
        loss = my_dual_clip_loss(x, old.clone(), adv.clone(), eps, c)
        if not torch.is_tensor(loss) or loss.numel() != 1:
            raise ExerciseFailed("The loss is not a scalar tensor.",
                                 "Return minus the mean over the batch, as a torch scalar.")
        got = float(loss.detach())
        expected = float(_dual_clip_reference(logp, old, adv, eps, c))
        if abs(got - expected) > 1e-8:
            ratio = torch.exp(logp - old)
            plain = float(ppo.ppo_clip_loss(logp, old, adv, eps))
            everywhere = float(-torch.maximum(
                torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv),
                c * adv).mean())
            if abs(got - plain) < 1e-8:
                raise ExerciseFailed("That is PPO's plain clipped loss.",
                                     "Where A < 0, also bound the objective below by c * A.")
            if abs(got - everywhere) < 1e-8:
                raise ExerciseFailed("You applied the lower bound c * A to every sample.",
                                     "The dual clip applies only where A < 0 (for A > 0, c * A "
                                     "would raise the objective of every sample).")
            if abs(got + expected) < 1e-8:
                raise ExerciseFailed("The sign is flipped.",
                                     "Return minus the objective: the loss is minimised.")
            raise ExerciseFailed(f"The loss is {got:.6f}, expected {expected:.6f}.",
                                 "objective = min(r A, clip(r) A); where A < 0 take "
                                 "max(objective, c A); loss = -mean(objective).")
        _expect_same_gradient(
            loss, x, lambda ref: _dual_clip_reference(ref, old, adv, eps, c), logp,
            ExerciseFailed("The gradient differs from dual-clip PPO's.",
                           "Where the dual clip is active (A < 0 and r > c) the gradient must "
                           "be 0: build the bound from adv alone, not from r."))
