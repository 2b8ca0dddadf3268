"""The checks of the TRPO and PPO chapter's exercises: a correct solution passes, typical
mistakes fail with the hint that names them."""

import pytest
import torch

from rlnotes import ppo, trpo
from rlnotes.exercises import CHECKS, ExerciseFailed
from rlnotes.exercises.ppo import check_clipped_surrogate, check_conjugate_gradient


def fails_with(check, solution, hint_part):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution)
    assert hint_part in err.value.hint, err.value.hint


def test_registered():
    assert "check_conjugate_gradient" in CHECKS and "check_clipped_surrogate" in CHECKS


def cg_ok(matvec, b, iters):
    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rr = r @ r
    for _ in range(iters):
        if rr < 1e-30:
            break
        Ap = matvec(p)
        alpha = rr / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = r @ r
        p = r + rr_new / rr * p
        rr = rr_new
    return x


def test_cg_correct_passes(capsys):
    check_conjugate_gradient(cg_ok)
    assert "PASSED" in capsys.readouterr().out


def test_cg_mistakes_fail():
    def wrong_beta(matvec, b, iters):  # beta from the old residual only: not conjugate
        x = torch.zeros_like(b)
        r = b.clone()
        p = r.clone()
        for _ in range(iters):
            Ap = matvec(p)
            alpha = (r @ r) / (p @ Ap)
            x = x + alpha * p
            r = r - alpha * Ap
            p = r.clone()  # steepest descent
        return x
    fails_with(check_conjugate_gradient, wrong_beta, "alpha")
    fails_with(check_conjugate_gradient, lambda matvec, b, iters: b, "alpha")
    fails_with(check_conjugate_gradient,
               lambda matvec, b, iters: trpo.conjugate_gradient(matvec, b, iters=iters), "yourself")


def surrogate_ok(logp, old_logp, adv, clip_eps):
    ratio = torch.exp(logp - old_logp)
    return -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv).mean()


def test_surrogate_correct_passes():
    check_clipped_surrogate.raw(surrogate_ok)


@pytest.mark.parametrize("wrong, hint", [
    (lambda lp, o, a, e: -torch.maximum(torch.exp(lp - o) * a,
                                        torch.exp(lp - o).clamp(1 - e, 1 + e) * a).mean(), "max"),
    (lambda lp, o, a, e: -surrogate_ok(lp, o, a, e), "sign"),
    (lambda lp, o, a, e: -(torch.exp(lp - o) * a).mean(), "unclipped"),
    (lambda lp, o, a, e: -(torch.exp(lp - o).clamp(1 - e, 1 + e) * a).mean(), "alone"),
    (lambda lp, o, a, e: surrogate_ok(o, lp, a, e), "inverse"),
    (lambda lp, o, a, e: torch.tensor(float(surrogate_ok(lp, o, a, e))), "torch operations"),
    (lambda lp, o, a, e: ppo.ppo_clip_loss(lp, o, a, e), "yourself"),
])
def test_surrogate_mistakes_fail(wrong, hint):
    fails_with(check_clipped_surrogate, wrong, hint)


# --- the chapter's exercises: preconditioned CG and dual-clip PPO ------------------------------

from rlnotes.exercises.ppo import check_dual_clip_loss, check_preconditioned_cg  # noqa: E402


def pcg_ok(matvec, b, diag, iters):
    x = torch.zeros_like(b)
    r = b.clone()
    z = r / diag
    p = z.clone()
    rz = r @ z
    for _ in range(iters):
        if r @ r < 1e-30:
            break
        Ap = matvec(p)
        alpha = rz / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        z = r / diag
        rz_new = r @ z
        p = z + rz_new / rz * p
        rz = rz_new
    return x


def test_pcg_registered_and_correct_passes(capsys):
    assert "check_preconditioned_cg" in CHECKS and "check_dual_clip_loss" in CHECKS
    check_preconditioned_cg(pcg_ok)
    assert "PASSED" in capsys.readouterr().out


def test_pcg_mistakes_fail():
    fails_with(check_preconditioned_cg, lambda matvec, b, diag, iters: cg_ok(matvec, b, iters),
               "z = g / diag")

    def beta_unpreconditioned(matvec, b, diag, iters):
        x = torch.zeros_like(b)
        r = b.clone()
        z = r / diag
        p = z.clone()
        for _ in range(iters):
            Ap = matvec(p)
            alpha = (r @ z) / (p @ Ap)
            x = x + alpha * p
            r_new = r - alpha * Ap
            z_new = r_new / diag
            p = z_new + (r_new @ r_new) / (r @ r) * p  # beta from plain residuals
            r, z = r_new, z_new
        return x
    fails_with(check_preconditioned_cg, beta_unpreconditioned, "beta")

    def two_products(matvec, b, diag, iters):
        x = pcg_ok(matvec, b, diag, iters)
        matvec(b)
        matvec(b)
        return x
    fails_with(check_preconditioned_cg, two_products, "One product")
    fails_with(check_preconditioned_cg,
               lambda matvec, b, diag, iters: trpo.conjugate_gradient(matvec, b, iters=iters),
               "yourself")


def dual_ok(logp, old_logp, adv, clip_eps, dual_clip):
    ratio = torch.exp(logp - old_logp)
    obj = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    obj = torch.where(adv < 0, torch.maximum(obj, dual_clip * adv), obj)
    return -obj.mean()


def test_dual_clip_correct_passes():
    check_dual_clip_loss.raw(dual_ok)


@pytest.mark.parametrize("wrong, hint", [
    (lambda lp, o, a, e, c: ppo.ppo_clip_loss(lp, o, a, e), "c * A"),
    (lambda lp, o, a, e, c: -torch.maximum(-surrogate_ok(lp, o, a, e) * 0 + torch.minimum(
        torch.exp(lp - o) * a, torch.exp(lp - o).clamp(1 - e, 1 + e) * a), c * a).mean(),
     "only where A < 0"),
    (lambda lp, o, a, e, c: -dual_ok(lp, o, a, e, c), "minimised"),
    (lambda lp, o, a, e, c: torch.tensor(float(dual_ok(lp, o, a, e, c))), "torch operations"),
    # the bound built from the ratio (c * r * A... clipped at c): right value, wrong gradient
    (lambda lp, o, a, e, c: dual_ok(lp, o, a, e, c).detach()
     + 0 * (torch.exp(lp - o) * a).mean() + (torch.exp(lp - o) * a).mean()
     - (torch.exp(lp - o) * a).mean().detach(), "gradient"),
])
def test_dual_clip_mistakes_fail(wrong, hint):
    fails_with(check_dual_clip_loss, wrong, hint)
