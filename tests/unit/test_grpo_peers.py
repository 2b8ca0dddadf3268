"""rlnotes.grpo computes the same numbers as TRL's GRPOTrainer and verl's core algorithms.

The reference formulas below are written from reading the libraries' source (not imported: the
book does not depend on them):
- TRL: trl/trainer/grpo_trainer.py, GRPOTrainer._compute_loss and _generate_and_score_completions
  (huggingface/trl at commit f2cd5771, July 2026): advantages ``r - mean_g`` divided by
  ``std_g + 1e-4`` (std with Bessel's correction) for scale_rewards "group", by the batch std for
  "batch", not divided for "none"; per-token ``-min(c1 A, clip(c1, 1 - eps, 1 + eps_high) A)``
  with ``c1 = exp(logp - old_logp)``, plus ``beta * (exp(ref - logp) - (ref - logp) - 1)``;
  "grpo": mean over sequences of the masked token mean; "bnpo": masked sum / mask count;
  "dr_grpo": masked sum / (rows * max_completion_length); "dapo": masked sum / the number of
  completion tokens in the (global) batch, which for one batch equals "bnpo".
- verl: verl/trainer/ppo/core_algos.py (volcengine/verl at commit b178a3cd, January 2026):
  compute_grpo_outcome_advantage (epsilon 1e-6, torch.std; norm_adv_by_std_in_grpo=False drops
  the division), agg_loss's "token-mean", "seq-mean-token-mean" and "seq-mean-token-sum-norm"
  (masked sum / loss_scale_factor, which defaults to the response length, with no division by the
  batch size), and kl_penalty "low_var_kl" (k3 with the log-ratio clamped to [-20, 20] and the
  result to [-10, 10]).
"""

import pytest
import torch

from rlnotes.grpo import group_advantages, grpo_loss


def batch(seed=0, B=8, T=7):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 2 - 0.05
    old = logp + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    ref = logp + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None] < lengths[:, None]).double()
    rewards = torch.randint(0, 2, (B,), generator=g).double()
    return logp, old, ref, mask, rewards


def trl_advantages(rewards, G, scale_rewards):
    mean = rewards.view(-1, G).mean(1).repeat_interleave(G)
    std = rewards.view(-1, G).std(1).repeat_interleave(G) if scale_rewards != "batch" else rewards.std().expand_as(rewards)
    adv = rewards - mean
    return adv if scale_rewards == "none" else adv / (std + 1e-4)


def trl_loss(logp, old, ref, adv, mask, eps, eps_high, beta, loss_type, max_completion_length):
    coef_1 = torch.exp(logp - old)
    coef_2 = torch.clamp(coef_1, 1 - eps, 1 + eps_high)
    per_token = -torch.min(coef_1 * adv[:, None], coef_2 * adv[:, None])
    if beta != 0.0:
        per_token = per_token + beta * (torch.exp(ref - logp) - (ref - logp) - 1)
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type in ("bnpo", "dapo"):
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    return (per_token * mask).sum() / (per_token.size(0) * max_completion_length)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_equal_trl(scale):
    _, _, _, _, r = batch(1, B=16)
    torch.testing.assert_close(group_advantages(r, 4, scale=scale), trl_advantages(r, 4, scale))


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
@pytest.mark.parametrize("beta, eps_high", [(0.0, 0.2), (0.04, 0.28)])
def test_loss_equals_trl(loss_type, beta, eps_high):
    logp, old, ref, mask, r = batch(2)
    adv = group_advantages(r, 4)
    ours = grpo_loss(logp, old, ref, adv, mask, eps_low=0.2, eps_high=eps_high, beta=beta,
                     loss_type=loss_type, max_tokens=10)
    theirs = trl_loss(logp, old, ref, adv, mask, 0.2, eps_high, beta, loss_type, 10)
    torch.testing.assert_close(ours, theirs)


def verl_grpo_advantages(rewards, G, norm_adv_by_std_in_grpo=True, epsilon=1e-6):
    g = rewards.view(-1, G)
    adv = g - g.mean(1, keepdim=True)
    if norm_adv_by_std_in_grpo:
        adv = adv / (g.std(1, keepdim=True) + epsilon)
    return adv.reshape(-1)


def verl_agg(loss_mat, mask, mode, loss_scale_factor=None):
    if mode == "token-mean":
        return (loss_mat * mask).sum() / mask.sum()
    if mode == "seq-mean-token-mean":
        return ((loss_mat * mask).sum(-1) / (mask.sum(-1) + 1e-8)).mean()
    if mode == "seq-mean-token-sum-norm":
        return (loss_mat * mask).sum() / (mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    raise ValueError(mode)


def verl_low_var_kl(logp, ref):
    kl = torch.clamp(ref - logp, -20, 20)
    return torch.clamp(torch.exp(kl) - kl - 1, -10, 10)


def test_advantages_equal_verl():
    _, _, _, _, r = batch(3, B=16)
    torch.testing.assert_close(group_advantages(r, 4, eps=1e-6), verl_grpo_advantages(r, 4))
    torch.testing.assert_close(group_advantages(r, 4, scale="none"), verl_grpo_advantages(r, 4, False))


def verl_vanilla_loss_mat(ratio, adv, eps=0.2, clip_ratio_c=3.0):
    """verl's default per-token policy loss (core_algos.compute_policy_loss_vanilla): PPO's clip,
    then the dual clip, which caps the loss of a token with A < 0 at -clip_ratio_c * A."""
    clipped = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - eps, 1 + eps))
    dual = torch.min(-adv * clip_ratio_c, clipped)
    return torch.where(adv < 0, dual, clipped)


def test_loss_aggregations_equal_verl():
    """One micro-batch, verl's default loss_scale_factor (None); verl's dual clip is inactive here
    (no ratio reaches clip_ratio_c = 3, asserted), and the next test shows where it is not."""
    logp, old, ref, mask, r = batch(4)
    adv = group_advantages(r, 4)
    ratio = torch.exp(logp - old)
    assert float(ratio[mask.bool()].max()) < 3.0
    loss_mat = verl_vanilla_loss_mat(ratio, adv[:, None].expand_as(ratio))
    B, T = logp.shape
    kw = dict(eps_low=0.2)
    torch.testing.assert_close(grpo_loss(logp, old, None, adv, mask, loss_type="dapo", **kw),
                               verl_agg(loss_mat, mask, "token-mean"))
    torch.testing.assert_close(grpo_loss(logp, old, None, adv, mask, loss_type="grpo", **kw),
                               verl_agg(loss_mat, mask, "seq-mean-token-mean"))
    # verl's Dr. GRPO mode does not divide by the batch size: B times rlnotes' (and TRL's) dr_grpo
    torch.testing.assert_close(B * grpo_loss(logp, old, None, adv, mask, loss_type="dr_grpo", **kw),
                               verl_agg(loss_mat, mask, "seq-mean-token-sum-norm"))


def test_verl_dual_clip_differs_from_rlnotes_beyond_clip_ratio_c():
    logp = torch.log(torch.tensor([[4.0, 1.0], [4.0, 1.0]], dtype=torch.float64))  # ratio 4 and 1
    old = torch.zeros_like(logp)
    mask = torch.ones_like(logp)
    adv = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    ratio = torch.exp(logp - old)
    theirs = verl_agg(verl_vanilla_loss_mat(ratio, adv[:, None].expand_as(ratio)), mask, "token-mean")
    ours = grpo_loss(logp, old, None, adv, mask, loss_type="dapo")
    # the A < 0 token at ratio 4: rlnotes' loss is 4 (no dual clip), verl's is capped at 3
    assert float(ours) == pytest.approx((4.0 + 1.0 - 1.2 - 1.0) / 4)
    assert float(theirs) == pytest.approx((3.0 + 1.0 - 1.2 - 1.0) / 4)


def test_k3_equals_verl_low_var_kl_in_range():
    logp, _, ref, mask, r = batch(5)
    adv = torch.zeros(logp.shape[0], dtype=torch.float64)
    beta = 0.1
    ours = grpo_loss(logp, None, ref, adv, mask, beta=beta, loss_type="dapo")
    theirs = beta * verl_agg(verl_low_var_kl(logp, ref), mask, "token-mean")
    torch.testing.assert_close(ours, theirs)
    # verl clamps; rlnotes does not: they differ only for log-ratios beyond the clamps
    big = torch.tensor([[-30.0]], dtype=torch.float64)
    assert float(verl_low_var_kl(torch.zeros_like(big), -big)) == 10.0
