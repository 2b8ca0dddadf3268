"""GSPO's sequence-level ratio (``grpo_loss(ratio_level="sequence")``) and RLOO's leave-one-out
advantage (``rloo_advantages``) compute what TRL computes.

The reference formulas are transcribed from TRL's source (not imported: the book does not depend
on TRL):
- GSPO: trl/trainer/grpo_trainer.py, ``GRPOTrainer._compute_loss`` (huggingface/trl at commit
  d2b69d76): with ``importance_sampling_level == "sequence"``,
  ``log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)``, unsqueezed
  to every token; ``coef_1 = exp(log_importance_weights)``, ``coef_2 = clamp(coef_1, 1 - epsilon_low,
  1 + epsilon_high)``, per-token loss ``-min(coef_1 A, coef_2 A)`` (+ beta k3), then the usual
  ``loss_type`` aggregation.
- RLOO: trl/trainer/rloo_trainer.py, ``RLOOTrainer._generate_and_score_completions`` (commit
  00313f21): ``baselines = (grouped_sum - grouped_rewards) / (num_generations - 1)``,
  ``advantages = rewards - baselines`` (``normalize_advantages=False``, the default).
"""

import pytest
import torch

from rlnotes.grpo import group_advantages, grpo_loss, rloo_advantages
from test_grpo_peers import batch  # the same random batch as the parity tests against TRL




def trl_gspo_loss(logp, old, ref, adv, mask, eps, eps_high, beta, loss_type, max_completion_length):
    log_ratio = logp - old
    log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    coef_1 = torch.exp(log_importance_weights.unsqueeze(-1))
    coef_2 = torch.clamp(coef_1, 1 - eps, 1 + eps_high)
    per_token = -torch.min(coef_1 * adv[:, None], coef_2 * adv[:, None])
    if beta != 0.0:
        per_token = per_token + beta * (torch.exp(ref - logp) - (ref - logp) - 1)
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type in ("bnpo", "dapo"):
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    return (per_token * mask).sum() / (per_token.size(0) * max_completion_length)


def trl_rloo_advantages(rewards, num_generations):
    grouped_rewards = rewards.view(-1, num_generations)
    grouped_sum = grouped_rewards.sum(dim=1, keepdim=True)
    baselines = ((grouped_sum - grouped_rewards) / (num_generations - 1)).view(-1)
    return rewards - baselines


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
@pytest.mark.parametrize("beta, eps_high", [(0.0, 0.2), (0.04, 0.28)])
def test_gspo_loss_and_gradient_equal_trl(loss_type, beta, eps_high):
    logp, old, ref, mask, r = batch(3)
    adv = group_advantages(r, 4)
    ours_logp = logp.clone().requires_grad_(True)
    theirs_logp = logp.clone().requires_grad_(True)
    ours = grpo_loss(ours_logp, old, ref, adv, mask, eps_low=0.2, eps_high=eps_high, beta=beta,
                     loss_type=loss_type, max_tokens=10, ratio_level="sequence")
    theirs = trl_gspo_loss(theirs_logp, old, ref, adv, mask, 0.2, eps_high, beta, loss_type, 10)
    torch.testing.assert_close(ours, theirs)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(ours_logp.grad * mask, theirs_logp.grad * mask)


def test_gspo_differs_from_the_token_ratio_off_policy_and_equals_it_on_policy():
    logp, old, ref, mask, r = batch(4)
    adv = group_advantages(r, 4)
    tok = grpo_loss(logp, old, None, adv, mask, ratio_level="token")
    seq = grpo_loss(logp, old, None, adv, mask, ratio_level="sequence")
    assert not torch.isclose(tok, seq)
    on_tok = grpo_loss(logp, None, None, adv, mask, ratio_level="token")
    on_seq = grpo_loss(logp, None, None, adv, mask, ratio_level="sequence")
    torch.testing.assert_close(on_tok, on_seq)


def test_gspo_ignores_padding_garbage():
    logp, old, ref, mask, r = batch(5)
    adv = group_advantages(r, 4)
    pad = mask == 0
    dirty = logp.masked_fill(pad, float("nan"))
    dirty_old = old.masked_fill(pad, float("inf"))
    torch.testing.assert_close(grpo_loss(dirty, dirty_old, None, adv, mask, ratio_level="sequence"),
                               grpo_loss(logp, old, None, adv, mask, ratio_level="sequence"))


@pytest.mark.parametrize("kwargs, words", [
    (dict(ratio_level="seq"), "ratio_level"),
    (dict(ratio_level=None), "ratio_level"),
    (dict(ratio_level="sequence", per_token_adv=True), "advantages"),
])
def test_gspo_bad_input(kwargs, words):
    logp, old, ref, mask, r = batch(6)
    adv = group_advantages(r, 4)
    if kwargs.pop("per_token_adv", False):
        adv = adv[:, None].expand_as(logp).clone()
    with pytest.raises(ValueError, match=words):
        grpo_loss(logp, old, None, adv, mask, **kwargs)


@pytest.mark.parametrize("G", [2, 4, 8])
def test_rloo_advantages_equal_trl(G):
    _, _, _, _, r = batch(7, B=16)
    r = r + torch.linspace(0, 1, 16, dtype=torch.float64)  # not only 0/1 rewards
    torch.testing.assert_close(rloo_advantages(r, G), trl_rloo_advantages(r, G))
