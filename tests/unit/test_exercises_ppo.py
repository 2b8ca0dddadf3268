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
