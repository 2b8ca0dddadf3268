"""Checks of the exercises of the chapter "Direct preference optimisation".

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

__all__ = ["check_dpo_loss", "check_optimal_policy"]



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
