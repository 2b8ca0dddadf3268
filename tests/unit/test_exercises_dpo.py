"""The checks of the DPO chapter's exercises: a correct solution passes, typical mistakes fail with
the hint that names them."""

import pytest
import torch
import torch.nn.functional as F

import rlnotes.dpo
import rlnotes.dpo_exact
from rlnotes.exercises import CHECKS, ExerciseFailed, check_dpo_loss, check_optimal_policy


def fails(check, solution, match):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution)
    assert match in str(err.value), str(err.value)


def test_checks_are_registered():
    assert "check_dpo_loss" in CHECKS and "check_optimal_policy" in CHECKS


# ---- the DPO loss --------------------------------------------------------------------------

def dpo_ok(pc, pr, rc, rr, beta):
    return -F.logsigmoid(beta * ((pc - rc) - (pr - rr))).mean()


def test_dpo_loss_correct_passes(capsys):
    assert check_dpo_loss(dpo_ok) is None
    assert "PASSED check_dpo_loss" in capsys.readouterr().out


@pytest.mark.parametrize("wrong,match", [
    (lambda pc, pr, rc, rr, beta: -F.logsigmoid(beta * (pc - pr)).mean(), "reference log-probs are missing"),
    (lambda pc, pr, rc, rr, beta: -F.logsigmoid(-beta * ((pc - rc) - (pr - rr))).mean(), "wrong sign"),
    (lambda pc, pr, rc, rr, beta: -F.logsigmoid(beta * ((pc - rc) - (pr - rr))).sum(), "sum over pairs"),
    (lambda pc, pr, rc, rr, beta: -F.logsigmoid(((pc - rc) - (pr - rr)) / beta).mean(), "beta divides"),
    (lambda pc, pr, rc, rr, beta: -torch.sigmoid(beta * ((pc - rc) - (pr - rr))).mean(), "not log sigma"),
    (lambda pc, pr, rc, rr, beta: -F.logsigmoid(beta * ((pc - rc) - (pr - rr))), "one number"),
    (lambda pc, pr, rc, rr, beta: -torch.log(torch.sigmoid(beta * ((pc - rc) - (pr - rr)))).mean(), "underflows"),
    (lambda pc, pr, rc, rr, beta: float(-F.logsigmoid(beta * ((pc - rc) - (pr - rr))).mean()), "differentiable"),
    (lambda pc, pr, rc, rr, beta: rlnotes.dpo.dpo_loss(pc, pr, rc, rr, beta), "rlnotes"),
])
def test_dpo_loss_mistakes_fail(wrong, match):
    fails(check_dpo_loss, wrong, match)


def test_dpo_loss_stub_raises_not_implemented():
    def stub(pc, pr, rc, rr, beta):
        raise NotImplementedError
    with pytest.raises(NotImplementedError):
        check_dpo_loss.raw(stub)


# ---- the closed-form optimum ---------------------------------------------------------------

def star_ok(ref_probs, r, beta):
    return torch.softmax(torch.log(ref_probs) + r / beta, dim=-1)


def test_optimal_policy_correct_passes(capsys):
    assert check_optimal_policy(star_ok) is None
    assert "PASSED check_optimal_policy" in capsys.readouterr().out


def naive(ref_probs, r, beta):
    w = ref_probs * torch.exp(r / beta)
    return w / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("wrong,match", [
    (lambda p, r, beta: p * torch.exp(r / beta), "do not sum to 1"),
    (lambda p, r, beta: torch.softmax(torch.log(p) + r * beta, -1), "beta multiplies"),
    (lambda p, r, beta: torch.softmax(r / beta, -1), "pi_ref is missing"),
    (lambda p, r, beta: p * torch.exp(r / beta) / (p * torch.exp(r / beta)).sum(), "whole table"),
    (naive, "overflows"),
    (lambda p, r, beta: rlnotes.dpo_exact.kl_optimal_policy(p, r, beta), "rlnotes"),
])
def test_optimal_policy_mistakes_fail(wrong, match):
    fails(check_optimal_policy, wrong, match)


# ---- the chapter's exercises: variants of what it displays ----------------------------------

from rlnotes.exercises import check_cdpo_loss, check_entropy_regularised_optimum  # noqa: E402


def cdpo_ok(pc, pr, rc, rr, beta, eps):
    z = beta * ((pc - rc) - (pr - rr))
    return (-(1 - eps) * F.logsigmoid(z) - eps * F.logsigmoid(-z)).mean()


def test_cdpo_loss_correct_passes(capsys):
    assert check_cdpo_loss(cdpo_ok) is None
    assert "PASSED check_cdpo_loss" in capsys.readouterr().out
    assert "check_cdpo_loss" in CHECKS


def _z(pc, pr, rc, rr, beta):
    return beta * ((pc - rc) - (pr - rr))


@pytest.mark.parametrize("wrong,match", [
    (lambda pc, pr, rc, rr, beta, eps: -F.logsigmoid(_z(pc, pr, rc, rr, beta)).mean(), "eps is ignored"),
    (lambda pc, pr, rc, rr, beta, eps: cdpo_ok(pc, pr, rc, rr, beta, 1 - eps), "weights are swapped"),
    (lambda pc, pr, rc, rr, beta, eps: ((-(1 - eps) * F.logsigmoid(_z(pc, pr, rc, rr, beta))
                                         + eps * F.logsigmoid(-_z(pc, pr, rc, rr, beta))) / (1 - 2 * eps)).mean(),
     "Chowdhury"),
    (lambda pc, pr, rc, rr, beta, eps: cdpo_ok(pc, pr, 0 * rc, 0 * rr, beta, eps), "reference log-probs"),
    (lambda pc, pr, rc, rr, beta, eps: cdpo_ok(pc, pr, rc, rr, beta, eps) * len(pc), "sum over pairs"),
    (lambda pc, pr, rc, rr, beta, eps: cdpo_ok(pc, pr, rc, rr, 1 / beta, eps), "beta divides"),
    (lambda pc, pr, rc, rr, beta, eps: (-(1 - eps) * torch.log(torch.sigmoid(_z(pc, pr, rc, rr, beta)))
                                        - eps * torch.log(torch.sigmoid(-_z(pc, pr, rc, rr, beta)))).mean(),
     "underflows"),
    (lambda pc, pr, rc, rr, beta, eps: float(cdpo_ok(pc, pr, rc, rr, beta, eps)), "differentiable"),
    (lambda pc, pr, rc, rr, beta, eps: -(1 - eps) * F.logsigmoid(_z(pc, pr, rc, rr, beta)), "one number"),
    (lambda pc, pr, rc, rr, beta, eps: cdpo_ok(pc, pr, rc, rr, beta, eps) + 1e-3, "off by"),
    (lambda pc, pr, rc, rr, beta, eps: (1 - eps) * rlnotes.dpo.dpo_loss(pc, pr, rc, rr, beta)
     + eps * rlnotes.dpo.dpo_loss(pr, pc, rr, rc, beta), "rlnotes' own"),
])
def test_cdpo_loss_mistakes_fail(wrong, match):
    fails(check_cdpo_loss, wrong, match)


def ent_ok(ref_probs, r, beta, alpha):
    return torch.softmax((r + beta * torch.log(ref_probs)) / (beta + alpha), dim=-1)


def test_entropy_regularised_optimum_correct_passes(capsys):
    assert check_entropy_regularised_optimum(ent_ok) is None
    assert "PASSED check_entropy_regularised_optimum" in capsys.readouterr().out


def ent_naive(ref_probs, r, beta, alpha):
    w = ref_probs ** (beta / (beta + alpha)) * torch.exp(r / (beta + alpha))
    return w / w.sum(-1, keepdim=True)


def ent_nan(ref_probs, r, beta, alpha):  # beta * log 0 = -inf, then 0 * -inf somewhere = nan
    logp = torch.log(ref_probs)
    return torch.softmax((r + beta * logp) / (beta + alpha) + 0 * logp, -1)


@pytest.mark.parametrize("wrong,match", [
    (lambda p, r, beta, alpha: torch.softmax(torch.log(p) + r / beta, -1), "alpha is ignored"),
    (lambda p, r, beta, alpha: torch.softmax(torch.log(p) + r / (beta + alpha), -1), "power beta / (beta + alpha)"),
    (lambda p, r, beta, alpha: torch.softmax(r / beta + beta * torch.log(p) / (beta + alpha), -1), "divided by beta"),
    (lambda p, r, beta, alpha: torch.softmax((r + beta * torch.log(p)) / (beta - alpha), -1), "wrong sign"),
    (lambda p, r, beta, alpha: torch.exp((r + beta * torch.log(p)) / (beta + alpha)), "do not sum to 1"),
    (lambda p, r, beta, alpha: torch.softmax(((r + beta * torch.log(p)) / (beta + alpha)).flatten(), 0).view(p.shape),
     "whole table"),
    (ent_nan, "NaN"),
    (ent_naive, "overflows"),
    (lambda p, r, beta, alpha: rlnotes.dpo_exact.kl_optimal_policy(
        p ** (beta / (beta + alpha)) / (p ** (beta / (beta + alpha))).sum(-1, keepdim=True), r, beta + alpha), "rlnotes"),
])
def test_entropy_regularised_optimum_mistakes_fail(wrong, match):
    fails(check_entropy_regularised_optimum, wrong, match)
