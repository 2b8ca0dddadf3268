"""Checks of the exercises of the chapter "Direct preference optimisation".

The chapter's coding exercises ask for variants of what it displays, so that the answer is not
on the page: ``check_cdpo_loss`` (the conservative, label-smoothed DPO loss) and
``check_entropy_regularised_optimum`` (the closed-form optimum when an entropy bonus joins the
KL penalty). ``check_dpo_loss`` and ``check_optimal_policy`` check what the chapter itself shows;
they stay available for courses that assigned them.

Each check calls the reader's function on random inputs with fixed seeds, compares with rlnotes'
implementation, and recognises the usual mistakes (the reference log-probs left out, the sign of
the margin, beta multiplying instead of dividing, a missing normalisation).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

import rlnotes.dpo as dpo
import rlnotes.dpo_exact as dpo_exact
from rlnotes.exercises.core import check, ExerciseFailed, expect_close, expect_own_work
from rlnotes.exercises.core import as_float_array as _numpy, call_reader as _call

__all__ = ["check_cdpo_loss", "check_entropy_regularised_optimum", "check_dpo_loss",
           "check_optimal_policy"]



def _near(a, b):
    return a.shape == np.shape(b) and np.allclose(a, b, atol=1e-6, rtol=1e-6)


@check
def check_dpo_loss(my_dpo_loss):
    """``my_dpo_loss(pc, pr, rc, rr, beta)``: mean of -log sigma(beta * Delta) over the pairs."""
    expect_own_work(my_dpo_loss, dpo.dpo_loss, dpo.ipo_loss)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        B = [8, 1, 33][seed]
        pc, pr, rc, rr = (-10 + 3 * torch.randn(B, generator=g, dtype=torch.float64) for _ in range(4))
        beta = [0.1, 0.5, 2.0][seed]
        leaf = pc.clone().requires_grad_(True)
        out = _call(my_dpo_loss, "my_dpo_loss", leaf, pr.clone(), rc.clone(), rr.clone(), beta)
        got = _numpy(out, "my_dpo_loss's result")
        want = float(dpo.dpo_loss(pc, pr, rc, rr, beta))
        if got.shape != ():
            raise ExerciseFailed(f"The loss has shape {got.shape}: it must be one number.",
                                 "Average the per-pair losses over the batch (.mean()).")
        delta = (pc - rc) - (pr - rr)
        wrong = {
            "no_ref": -F.logsigmoid(beta * (pc - pr)).mean(),
            "sign": -F.logsigmoid(-beta * delta).mean(),
            "sum": -F.logsigmoid(beta * delta).sum(),
            "beta_div": -F.logsigmoid(delta / beta).mean(),
            "no_log": -torch.sigmoid(beta * delta).mean(),
        }
        if B > 1 and _near(got, float(wrong["sum"])):
            raise ExerciseFailed("The loss is the sum over pairs.", "Take the mean over the batch.")
        if _near(got, float(wrong["no_ref"])) and not _near(got, want):
            raise ExerciseFailed("The reference log-probs are missing.",
                                 "Delta = (log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)).")
        if _near(got, float(wrong["sign"])) and not _near(got, want):
            raise ExerciseFailed("The margin has the wrong sign.",
                                 "The chosen completion's log-ratio comes first: the loss falls as it rises.")
        if _near(got, float(wrong["beta_div"])) and not _near(got, want):
            raise ExerciseFailed("beta divides the margin.", "The implicit reward is beta times the log-ratio.")
        if _near(got, float(wrong["no_log"])) and not _near(got, want):
            raise ExerciseFailed("The loss uses sigma, not log sigma.",
                                 "It is the negative log-likelihood of the preferences: -log sigma(beta Delta).")
        expect_close(got, want, "my_dpo_loss's result",
                     hint="mean over pairs of -logsigmoid(beta * ((pc - rc) - (pr - rr))).")
        if not (isinstance(out, torch.Tensor) and out.requires_grad):
            raise ExerciseFailed("The loss is not differentiable with respect to the policy's log-probs.",
                                 "Stay in torch operations (no .item(), no .detach(), no numpy).")
    # numerically stable for large margins (log(sigmoid(x)) underflows to -inf)
    big = torch.tensor([-1.0], dtype=torch.float64)
    got = _numpy(_call(my_dpo_loss, "my_dpo_loss", big.clone(), big + 2000, big.clone(), big.clone(), 1.0),
                 "my_dpo_loss's result")
    if not np.isfinite(got).all() or not math.isclose(float(got), 2000.0, rel_tol=1e-6):
        raise ExerciseFailed(f"With a margin of -2000 the loss is {float(got)}, expected 2000.",
                             "torch.log(torch.sigmoid(x)) underflows; use F.logsigmoid.")


@check
def check_optimal_policy(my_optimal_policy):
    """``my_optimal_policy(ref_probs, r, beta)`` -> (X, Y) pi*(y|x) = pi_ref e^{r/beta} / Z(x)."""
    expect_own_work(my_optimal_policy, dpo_exact.kl_optimal_policy, dpo_exact.length_averaged_optimum)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        X, Y = [(2, 5), (1, 13), (4, 3)][seed]
        ref_probs = torch.softmax(torch.randn((X, Y), generator=g, dtype=torch.float64), -1)
        r = torch.randn((X, Y), generator=g, dtype=torch.float64)
        beta = [0.5, 0.1, 2.0][seed]
        got = _numpy(_call(my_optimal_policy, "my_optimal_policy", ref_probs.clone(), r.clone(), beta),
                     "my_optimal_policy's result")
        want = dpo_exact.kl_optimal_policy(ref_probs, r, beta).numpy()
        if got.shape != want.shape:
            raise ExerciseFailed(f"The result has shape {got.shape}, expected {want.shape}.",
                                 "One probability per prompt and completion.")
        if _near(got, want):
            continue
        unnorm = (ref_probs * torch.exp(r / beta)).numpy()
        if _near(got, unnorm):
            raise ExerciseFailed("The rows do not sum to 1.", "Divide by Z(x), the sum over completions of each row.")
        if _near(got, dpo_exact.kl_optimal_policy(ref_probs, r, 1 / beta).numpy()):
            raise ExerciseFailed("beta multiplies the reward.", "The exponent is r / beta: a small beta trusts r more.")
        if _near(got, torch.softmax(r / beta, -1).numpy()):
            raise ExerciseFailed("pi_ref is missing.", "pi* tilts the reference: pi_ref(y|x) exp(r / beta).")
        if X > 1 and _near(got, unnorm / unnorm.sum()):
            raise ExerciseFailed("The normalisation runs over the whole table.",
                                 "Z(x) is per prompt: normalise each row.")
        expect_close(got, want, "my_optimal_policy's result",
                     hint="Per row: pi_ref * exp(r / beta), divided by its sum.")
    # large rewards: exp(r / beta) overflows unless computed in log space
    ref_probs = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    r = torch.tensor([[1000.0, 999.0]], dtype=torch.float64)
    got = _numpy(_call(my_optimal_policy, "my_optimal_policy", ref_probs, r, 0.5), "my_optimal_policy's result")
    expect_close(got, dpo_exact.kl_optimal_policy(ref_probs, r, 0.5).numpy(), "pi* for rewards near 1000",
                 hint="exp(2000) overflows: work with log pi_ref + r / beta and a softmax (log-sum-exp).")


# ---- the chapter's exercises: variants of what it displays ----------------------------------


@check
def check_cdpo_loss(my_cdpo_loss):
    """``my_cdpo_loss(pc, pr, rc, rr, beta, eps)``: the mean over pairs of
    -(1 - eps) log sigma(beta Delta) - eps log sigma(-beta Delta) (labels flipped with
    probability eps)."""
    expect_own_work(my_cdpo_loss, dpo.dpo_loss, dpo.ipo_loss)
    for seed in range(4):
        g = torch.Generator().manual_seed(seed + 100)
        B = [8, 1, 33, 5][seed]
        pc, pr, rc, rr = (-10 + 3 * torch.randn(B, generator=g, dtype=torch.float64) for _ in range(4))
        beta, eps = [(0.1, 0.1), (0.5, 0.25), (2.0, 0.05), (1.0, 0.0)][seed]
        leaf = pc.clone().requires_grad_(True)
        out = _call(my_cdpo_loss, "my_cdpo_loss", leaf, pr.clone(), rc.clone(), rr.clone(), beta, eps)
        got = _numpy(out, "my_cdpo_loss's result")
        if got.shape != ():
            raise ExerciseFailed(f"The loss has shape {got.shape}: it must be one number.",
                                 "Average the per-pair losses over the batch (.mean()).")
        # the package's DPO loss, on the pairs as labelled and on the pairs with labels flipped
        want = float((1 - eps) * dpo.dpo_loss(pc, pr, rc, rr, beta) + eps * dpo.dpo_loss(pr, pc, rr, rc, beta))
        z = beta * ((pc - rc) - (pr - rr))
        lw, ll = -F.logsigmoid(z), -F.logsigmoid(-z)
        wrong = {
            "This is the plain DPO loss: eps is ignored.":
                (None if eps == 0 else float(lw.mean()),
                 "With probability eps the label is flipped: add eps times the loss of the flipped pair."),
            "The weights are swapped: eps multiplies the loss of the pair as labelled.":
                (float((eps * lw + (1 - eps) * ll).mean()),
                 "(1 - eps) on -log sigma(beta Delta), eps on -log sigma(-beta Delta)."),
            "This is Chowdhury et al.'s unbiased (robust) DPO loss, not the label-smoothed one.":
                (None if eps == 0 else float((((1 - eps) * lw - eps * ll) / (1 - 2 * eps)).mean()),
                 "Conservative DPO adds the flipped pair's loss with weight eps: no minus sign, "
                 "no division by 1 - 2 eps."),
            "The reference log-probs are missing.":
                (float(((1 - eps) * -F.logsigmoid(beta * (pc - pr)) - eps * F.logsigmoid(-beta * (pc - pr))).mean()),
                 "Delta = (pc - rc) - (pr - rr)."),
            "The loss is the sum over pairs.":
                (None if B == 1 else float(((1 - eps) * lw + eps * ll).sum()), "Take the mean over the batch."),
            "beta divides the margin.":
                (float(((1 - eps) * -F.logsigmoid(z / beta ** 2) + eps * -F.logsigmoid(-z / beta ** 2)).mean()),
                 "The implicit reward is beta times the log-ratio."),
        }
        if not _near(got, want):
            for message, (value, hint) in wrong.items():
                if value is not None and _near(got, value):
                    raise ExerciseFailed(message, hint)
        expect_close(got, want, "my_cdpo_loss's result",
                     hint="mean over pairs of (1 - eps) * -logsigmoid(z) + eps * -logsigmoid(-z), "
                          "z = beta * ((pc - rc) - (pr - rr)).")
        if not (isinstance(out, torch.Tensor) and out.requires_grad):
            raise ExerciseFailed("The loss is not differentiable with respect to the policy's log-probs.",
                                 "Stay in torch operations (no .item(), no .detach(), no numpy).")
    # numerically stable for large margins of either sign (log(sigmoid(x)) underflows to -inf)
    big = torch.tensor([-1.0, -1.0], dtype=torch.float64)
    pr = torch.tensor([1999.0, -2001.0], dtype=torch.float64)
    got = _numpy(_call(my_cdpo_loss, "my_cdpo_loss", big.clone(), pr, big.clone(), big.clone(), 1.0, 0.1),
                 "my_cdpo_loss's result")
    want = float(0.9 * dpo.dpo_loss(big, pr, big, big, 1.0) + 0.1 * dpo.dpo_loss(pr, big, big, big, 1.0))
    if not np.isfinite(got).all():
        raise ExerciseFailed(f"With margins of -2000 and +2000 the loss is {float(got)}, expected {want:.1f}.",
                             "torch.log(torch.sigmoid(x)) underflows; use F.logsigmoid.")
    expect_close(got, want, "the loss with margins of -2000 and +2000",
                 hint="torch.log(torch.sigmoid(x)) underflows; use F.logsigmoid.")


@check
def check_entropy_regularised_optimum(my_entropy_regularised_optimum):
    """``my_entropy_regularised_optimum(ref_probs, r, beta, alpha)`` -> (X, Y): the maximiser of
    E_pi[r] - beta KL(pi || pi_ref) + alpha H(pi) for each prompt (row)."""
    expect_own_work(my_entropy_regularised_optimum, dpo_exact.kl_optimal_policy,
                    dpo_exact.length_averaged_optimum)
    for seed in range(4):
        g = torch.Generator().manual_seed(seed + 100)
        X, Y = [(2, 5), (1, 13), (4, 3), (3, 6)][seed]
        beta, alpha = [(0.5, 0.2), (0.1, 0.3), (2.0, 0.5), (1.0, 0.0)][seed]
        ref_probs = torch.softmax(torch.randn((X, Y), generator=g, dtype=torch.float64), -1)
        if seed == 0:  # a completion the reference never writes
            ref_probs[0, 1] = 0.0
            ref_probs[0] /= ref_probs[0].sum()
        r = torch.randn((X, Y), generator=g, dtype=torch.float64)
        got = _numpy(_call(my_entropy_regularised_optimum, "my_entropy_regularised_optimum",
                           ref_probs.clone(), r.clone(), beta, alpha), "the result")
        tilted_ref = ref_probs ** (beta / (beta + alpha))
        tilted_ref = tilted_ref / tilted_ref.sum(-1, keepdim=True)
        want = dpo_exact.kl_optimal_policy(tilted_ref, r, beta + alpha).numpy()
        if got.shape != want.shape:
            raise ExerciseFailed(f"The result has shape {got.shape}, expected {want.shape}.",
                                 "One probability per prompt and completion.")
        if _near(got, want):
            continue
        if not np.isfinite(got).all():
            raise ExerciseFailed("The result holds NaN or infinite values.",
                                 "A completion with pi_ref = 0 has log pi_ref = -inf: keep it at "
                                 "probability 0 (softmax handles -inf), and avoid 0 * inf.")
        star = dpo_exact.kl_optimal_policy(ref_probs, r, beta).numpy()
        wrong = {
            "This is pi*, the optimum without the entropy bonus: alpha is ignored.":
                (None if alpha == 0 else star,
                 "Collect the log pi terms: E[r + beta log pi_ref] - (beta + alpha) E[log pi]."),
            "The entropy bonus enters with the wrong sign (beta - alpha).":
                (None if alpha == 0 or alpha >= beta else
                 dpo_exact.kl_optimal_policy((ref_probs ** (beta / (beta - alpha))) /
                                             (ref_probs ** (beta / (beta - alpha))).sum(-1, keepdim=True),
                                             r, beta - alpha).numpy(),
                 "H(pi) = -E[log pi]: the bonus adds alpha to the coefficient of -E[log pi]."),
            "pi_ref is not raised to the power beta / (beta + alpha).":
                (None if alpha == 0 else dpo_exact.kl_optimal_policy(ref_probs, r, beta + alpha).numpy(),
                 "log pi = (r + beta log pi_ref) / (beta + alpha) + const: the reference is "
                 "flattened too."),
            "The reward is divided by beta, not beta + alpha.":
                (None if alpha == 0 else dpo_exact.kl_optimal_policy(tilted_ref, r * (beta + alpha) / beta,
                                                                     beta + alpha).numpy(),
                 "Both r and beta log pi_ref are divided by beta + alpha."),
            "The rows do not sum to 1.":
                (None, "Divide by Z(x), the sum over completions of each row."),
            "The normalisation runs over the whole table.":
                (None if X == 1 else want * (want.shape[0] ** -1), "Z(x) is per prompt: normalise each row."),
        }
        if not np.allclose(got.sum(-1), 1, atol=1e-6):
            if X > 1 and np.isclose(got.sum(), 1, atol=1e-6):
                raise ExerciseFailed("The normalisation runs over the whole table.",
                                     "Z(x) is per prompt: normalise each row.")
            raise ExerciseFailed("The rows do not sum to 1.", "Divide by Z(x), the sum over completions of each row.")
        for message, (value, hint) in wrong.items():
            if value is not None and _near(got, value):
                raise ExerciseFailed(message, hint)
        expect_close(got, want, "the optimum",
                     hint="Per row: softmax((r + beta log pi_ref) / (beta + alpha)).")
    # large rewards: exp(r / (beta + alpha)) overflows unless computed in log space
    ref_probs = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    r = torch.tensor([[1000.0, 999.0]], dtype=torch.float64)
    got = _numpy(_call(my_entropy_regularised_optimum, "my_entropy_regularised_optimum",
                       ref_probs, r, 0.3, 0.2), "the result")
    expect_close(got, dpo_exact.kl_optimal_policy(ref_probs, r, 0.5).numpy(), "the optimum for rewards near 1000",
                 hint="exp(2000) overflows: work in log space and use a softmax (log-sum-exp).")
