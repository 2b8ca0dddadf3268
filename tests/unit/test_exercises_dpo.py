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
