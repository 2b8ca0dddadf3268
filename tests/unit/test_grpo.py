"""Tests of rlnotes.grpo: group advantages, the GRPO / DAPO / Dr. GRPO losses, dynamic sampling
and the overlong penalty."""

import math

import pytest
import torch

from rlnotes.grpo import dynamic_sampling_mask, group_advantages, grpo_loss, overlong_penalty
from rlnotes.kl import kl_k3
from rlnotes.ppo import ppo_clip_loss

LOSS_TYPES = ["grpo", "dapo", "bnpo", "dr_grpo"]


def batch(B=6, T=9, seed=0, dtype=torch.float64, ragged=True):
    """logp, old_logp, ref_logp, advantages, mask of a random batch (padding holds garbage)."""
    g = torch.Generator().manual_seed(seed)
    logp = (-1.0 - torch.rand(B, T, generator=g, dtype=torch.float64)).to(dtype)
    old = (logp + 0.1 * torch.randn(B, T, generator=g, dtype=torch.float64).to(dtype))
    ref = (logp + 0.2 * torch.randn(B, T, generator=g, dtype=torch.float64).to(dtype))
    adv = torch.randn(B, generator=g, dtype=torch.float64).to(dtype)
    lengths = torch.randint(1, T + 1, (B,), generator=g) if ragged else torch.full((B,), T)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    for x in (logp, old, ref):
        x[~mask] = 1e6
    return logp, old, ref, adv, mask


def loss_and_grad(logp, *args, **kwargs):
    logp = logp.clone().requires_grad_()
    loss = grpo_loss(logp, *args, **kwargs)
    loss.backward()
    return loss.detach(), logp.grad


# --- group advantages -----------------------------------------------------------------------


def test_group_advantages_by_hand_bessel():
    # mean 1/4, sample std sqrt((9/16 + 3/16) / 3) = 1/2
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0], dtype=torch.float64)
    adv = group_advantages(r, 4, eps=0.0 + 1e-300)
    torch.testing.assert_close(adv[:4], torch.tensor([1.5, -0.5, -0.5, -0.5], dtype=torch.float64))
    torch.testing.assert_close(adv[4:], torch.zeros(4, dtype=torch.float64))  # all equal: 0
    torch.testing.assert_close(group_advantages(r, 4, eps=1e-4)[:4], torch.tensor([0.75, -0.25, -0.25, -0.25], dtype=torch.float64) / (0.5 + 1e-4))


def test_group_advantages_identities():
    g = torch.Generator().manual_seed(1)
    r = torch.randn(24, generator=g, dtype=torch.float64)
    for scale in ("group", "batch", "none"):
        adv = group_advantages(r, 6, scale=scale).view(4, 6)
        torch.testing.assert_close(adv.sum(1), torch.zeros(4, dtype=torch.float64))  # centred per group
    # "none" (Dr. GRPO): no std factor, just the group mean removed
    shift = torch.arange(4, dtype=torch.float64).repeat_interleave(6) * 10.0
    torch.testing.assert_close(group_advantages(r + shift, 6, scale="none"), group_advantages(r, 6, scale="none"))
    torch.testing.assert_close(group_advantages(3.0 * r, 6, scale="none"), 3.0 * group_advantages(r, 6, scale="none"))
    # "group" divides by each group's std: scale-free (up to eps), unit sample std per group
    torch.testing.assert_close(group_advantages(3.0 * r, 6, eps=0.0), group_advantages(r, 6, eps=0.0))
    torch.testing.assert_close(group_advantages(r, 6, eps=0.0).view(4, 6).std(1), torch.ones(4, dtype=torch.float64))
    # "batch" divides by one number, the std of all rewards
    ratio = group_advantages(r, 6, scale="none") / group_advantages(r, 6, scale="batch", eps=0.5)
    torch.testing.assert_close(ratio, torch.full_like(ratio, float(r.std()) + 0.5))


def test_group_advantages_dtypes():
    r = torch.tensor([1, 0, 1, 1])
    assert group_advantages(r, 2).dtype == torch.get_default_dtype()
    assert group_advantages(r.float(), 2).dtype == torch.float32
    assert group_advantages(r.double(), 2).dtype == torch.float64
    assert group_advantages(torch.tensor([True, False]), 2).dtype == torch.get_default_dtype()
    torch.testing.assert_close(group_advantages(torch.tensor([3.0]), 1, scale="none"), torch.zeros(1))


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((torch.ones(8), 3), {}, "group_size"),
        ((torch.ones(8), 0), {}, "group_size"),
        ((torch.ones(8), 1), {}, "group_size"),  # std of one reward with scale="group"
        ((torch.ones(8), 2.0), {}, "group_size"),
        ((torch.ones(8), 4), dict(scale="global"), "scale"),
        ((torch.ones(8), 4), dict(eps=-1.0), "eps"),
        ((torch.ones(2, 4), 4), {}, "rewards"),
        ((torch.ones(0), 4), {}, "rewards"),
        ((torch.tensor([1.0, float("nan")]), 2), {}, "rewards"),
        (([1.0, 0.0], 2), {}, "rewards"),
        ((torch.ones(1), 1), dict(scale="batch"), "rewards"),
    ],
)
def test_group_advantages_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        group_advantages(*args, **kwargs)


# --- dynamic sampling and the overlong penalty ----------------------------------------------


def test_dynamic_sampling_mask():
    r = torch.tensor([1, 1, 1, 0, 1, 0, 0, 0, 0.5, 0.5, 0.5, 0.5])
    want = torch.tensor([False] * 4 + [True] * 4 + [False] * 4)
    want[0:4] = True  # group 0 is [1, 1, 1, 0]: mixed
    want[4:8] = True  # group 1 is [1, 0, 0, 0]
    torch.testing.assert_close(dynamic_sampling_mask(r, 4), want)
    assert dynamic_sampling_mask(r, 4).dtype == torch.bool
    assert not bool(dynamic_sampling_mask(r, 1).any())
    # the kept groups are exactly those with a non-zero advantage somewhere
    keep = dynamic_sampling_mask(r, 4)
    torch.testing.assert_close(keep, (group_advantages(r, 4).view(3, 4) != 0).any(1).repeat_interleave(4))
    assert dynamic_sampling_mask(torch.tensor([1, 1, 2, 2]), 2).tolist() == [False, False, False, False]


@pytest.mark.parametrize(
    "args, name",
    [
        ((torch.ones(6), 4), "group_size"),
        ((torch.ones(6), -2), "group_size"),
        ((torch.ones(2, 3), 3), "rewards"),
        ((torch.ones(0), 1), "rewards"),
        ((torch.tensor([1.0, float("nan")]), 2), "rewards"),
    ],
)
def test_dynamic_sampling_mask_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        dynamic_sampling_mask(*args)


def test_overlong_penalty_values():
    lengths = torch.tensor([0, 10, 16, 17, 18, 19, 20, 21, 1000])
    want = torch.tensor([0, 0, 0, -0.25, -0.5, -0.75, -1, -1, -1], dtype=torch.get_default_dtype())
    torch.testing.assert_close(overlong_penalty(lengths, 20, 4), want)
    # continuous at both ends of the ramp, non-increasing, within [-1, 0]
    x = torch.linspace(0, 30, 3001, dtype=torch.float64)
    p = overlong_penalty(x, 20, 4)
    assert p.dtype == torch.float64
    assert bool((p[1:] <= p[:-1]).all()) and float(p.min()) == -1.0 and float(p.max()) == 0.0
    assert float(overlong_penalty(torch.tensor([16.0 + 1e-9], dtype=torch.float64), 20, 4)) == pytest.approx(0, abs=1e-8)
    # cache_len == max_len: the ramp starts at 0
    torch.testing.assert_close(overlong_penalty(torch.tensor([0.0, 5.0, 10.0]), 10, 10), torch.tensor([0.0, -0.5, -1.0]))


def test_overlong_penalty_hard_limit_cache_len_zero():
    lengths = torch.tensor([0, 5, 10, 11, 50])
    want = torch.tensor([0.0, 0.0, 0.0, -1.0, -1.0], dtype=torch.get_default_dtype())
    torch.testing.assert_close(overlong_penalty(lengths, 10, 0), want)
    x = torch.tensor([10.0, 10.0 + 1e-9], dtype=torch.float64)
    torch.testing.assert_close(overlong_penalty(x, 10, 0), torch.tensor([0.0, -1.0], dtype=torch.float64))
    # on whole lengths, a one-token ramp is the hard limit one token earlier
    torch.testing.assert_close(overlong_penalty(lengths, 10, 1), overlong_penalty(lengths, 9, 0))


@pytest.mark.parametrize(
    "args, name",
    [
        ((torch.tensor([1, 2]), 10, 11), "cache_len"),
        ((torch.tensor([1, 2]), 10, -1), "cache_len"),
        ((torch.tensor([1, 2]), 10, 2.5), "cache_len"),
        ((torch.tensor([1, 2]), 0, 1), "max_len"),
        ((torch.tensor([1, 2]), 10.5, 2), "max_len"),
        ((torch.tensor([-1, 2]), 10, 2), "lengths"),
        ((torch.tensor([True]), 10, 2), "lengths"),
        (([1, 2], 10, 2), "lengths"),
    ],
)
def test_overlong_penalty_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        overlong_penalty(*args)


# --- the loss -------------------------------------------------------------------------------


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_all_equal_group_leaves_only_the_kl_term(loss_type):
    logp, old, ref, _, mask = batch(B=4, seed=2)
    rewards = torch.tensor([0.3, 0.3, 0.3, 0.3], dtype=torch.float64)
    adv = group_advantages(rewards, 4)
    torch.testing.assert_close(adv, torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)
    beta = 0.04
    loss = grpo_loss(logp, old, ref, adv, mask, beta=beta, loss_type=loss_type)
    kl = torch.where(mask, kl_k3(torch.where(mask, logp, 0.0), torch.where(mask, ref, 0.0)), 0.0)
    n_tokens = mask.sum(1).double()
    want = {
        "grpo": (kl.sum(1) / n_tokens).mean(),
        "dapo": kl.sum() / n_tokens.sum(),
        "bnpo": kl.sum() / n_tokens.sum(),
        "dr_grpo": kl.sum() / (4 * mask.shape[1]),
    }[loss_type]
    torch.testing.assert_close(loss, beta * want)
    assert float(grpo_loss(logp, old, ref, adv, mask, beta=0.0, loss_type=loss_type)) == pytest.approx(0, abs=1e-10)


def test_grpo_and_dapo_agree_on_equal_lengths():
    for seed in range(3):
        logp, old, ref, adv, mask = batch(seed=seed, ragged=False)
        kw = dict(beta=0.1, eps_high=0.28)
        torch.testing.assert_close(
            grpo_loss(logp, old, ref, adv, mask, loss_type="grpo", **kw),
            grpo_loss(logp, old, ref, adv, mask, loss_type="dapo", **kw),
        )
        # equal lengths shorter than T (padding): still equal
        mask2 = mask.clone()
        mask2[:, 5:] = False
        torch.testing.assert_close(
            grpo_loss(logp, old, ref, adv, mask2, loss_type="grpo", **kw),
            grpo_loss(logp, old, ref, adv, mask2, loss_type="bnpo", **kw),
        )


def test_length_bias_direction_on_ragged_masks():
    """A short right answer (2 tokens, A = +1) and a long wrong one (8 tokens, A = -1), on-policy."""
    T = 10
    logp = torch.full((2, T), -1.0, dtype=torch.float64)
    mask = torch.zeros(2, T, dtype=torch.bool)
    mask[0, :2], mask[1, :8] = True, True
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    l_grpo, g_grpo = loss_and_grad(logp, None, None, adv, mask, loss_type="grpo")
    l_dapo, g_dapo = loss_and_grad(logp, None, None, adv, mask, loss_type="dapo")
    l_dr, g_dr = loss_and_grad(logp, None, None, adv, mask, loss_type="dr_grpo")
    # per-sequence means: the two answers cancel, whatever their lengths
    assert float(l_grpo) == pytest.approx(0.0, abs=1e-15)
    # token level: the 8 tokens of the wrong answer outweigh the 2 of the right one
    assert float(l_dapo) == pytest.approx((-2 + 8) / 10)
    assert float(l_dapo) > float(l_grpo)
    # GRPO gives each token of the long wrong answer a 4x smaller push down than ...
    assert float(g_grpo[1, 0]) == pytest.approx(1 / (2 * 8)) and float(g_grpo[0, 0]) == pytest.approx(-1 / (2 * 2))
    # ... while DAPO and Dr. GRPO weigh every token alike, whatever its sequence's length
    torch.testing.assert_close(g_dapo[mask].abs(), torch.full((10,), 1 / 10, dtype=torch.float64))
    torch.testing.assert_close(g_dr[mask].abs(), torch.full((10,), 1 / (2 * T), dtype=torch.float64))
    assert bool((g_grpo[~mask] == 0).all() and (g_dapo[~mask] == 0).all())


def test_dr_grpo_has_no_length_and_no_std_factor():
    g = torch.Generator().manual_seed(3)
    rewards = torch.rand(8, generator=g, dtype=torch.float64)
    adv = group_advantages(rewards, 4, scale="none")
    # no std factor: rewards - group mean, which scales with the rewards
    torch.testing.assert_close(adv, rewards - rewards.view(2, 4).mean(1).repeat_interleave(4))
    torch.testing.assert_close(group_advantages(5 * rewards, 4, scale="none"), 5 * adv)
    # no 1/|o_i|: on-policy, each selected token's gradient is -A_i / (B * max_tokens)
    logp, _, _, _, mask = batch(B=8, T=7, seed=4)
    for max_tokens, denom in ((None, 8 * 7), (32, 8 * 32)):
        loss, grad = loss_and_grad(logp, None, None, adv, mask, loss_type="dr_grpo", max_tokens=max_tokens)
        want = torch.where(mask, -adv[:, None].expand(8, 7) / denom, 0.0)
        torch.testing.assert_close(grad, want)
        torch.testing.assert_close(loss, -(adv * mask.sum(1)).sum() / denom)


def test_asymmetric_clipping_lets_low_probability_tokens_grow():
    # tokens already pushed up by a factor 1.25 with a positive advantage
    old = torch.log(torch.tensor([[0.01, 0.5]], dtype=torch.float64))
    logp = old + math.log(1.25)
    adv = torch.tensor([1.0], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    _, g_sym = loss_and_grad(logp, old, None, adv, mask, eps_low=0.2)
    _, g_high = loss_and_grad(logp, old, None, adv, mask, eps_low=0.2, eps_high=0.28)
    assert bool((g_sym == 0).all())  # symmetric: clipped at 1.2, no more growth
    assert bool((g_high < 0).all())  # clip-higher: still pushed up (descent raises logp)
    # the most a token can grow is p_old * eps_high: 0.01 -> 0.0128 instead of 0.012
    for ratio, eps_high, moving in ((1.27, 0.28, True), (1.29, 0.28, False), (1.19, None, True), (1.21, None, False)):
        _, gr = loss_and_grad(old + math.log(ratio), old, None, adv, mask, eps_high=eps_high)
        assert bool((gr != 0).all()) == moving, (ratio, eps_high)
    # the lower side is eps_low's alone: a negative advantage stops at 1 - eps_low either way
    neg = -adv
    for eps_high in (None, 0.28, 0.5):
        _, g_in = loss_and_grad(old + math.log(0.81), old, None, neg, mask, eps_high=eps_high)
        _, g_out = loss_and_grad(old + math.log(0.79), old, None, neg, mask, eps_high=eps_high)
        assert bool((g_in != 0).all()) and bool((g_out == 0).all())
    # eps_high=None means eps_high = eps_low
    lp, o, r, a, m = batch(seed=5)
    torch.testing.assert_close(
        grpo_loss(lp, o, r, a, m, eps_low=0.1), grpo_loss(lp, o, r, a, m, eps_low=0.1, eps_high=0.1)
    )


def test_dapo_without_kl_is_ppo_clip_over_tokens():
    logp, old, ref, adv, mask = batch(seed=6)
    adv_tokens = adv[:, None].expand_as(logp)
    torch.testing.assert_close(
        grpo_loss(logp, old, None, adv, mask, eps_low=0.2, loss_type="dapo"),
        ppo_clip_loss(logp, old, adv_tokens, clip_eps=0.2, mask=mask),
    )


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_garbage_changes_nothing(loss_type, dtype):
    logp, old, ref, adv, mask = batch(seed=7, dtype=dtype)
    kw = dict(beta=0.05, eps_high=0.28, loss_type=loss_type)
    loss, grad = loss_and_grad(logp, old, ref, adv, mask, **kw)
    assert loss.dtype == dtype
    for garbage in (1e30, -1e30, 3e38 if dtype == torch.float32 else 1e300, float("inf"), float("nan")):
        lg, og, rg = logp.clone(), old.clone(), ref.clone()
        lg[~mask], og[~mask], rg[~mask] = garbage, -garbage, garbage
        loss_g, grad_g = loss_and_grad(lg, og, rg, adv, mask, **kw)
        torch.testing.assert_close(loss_g, loss, rtol=0, atol=0)
        torch.testing.assert_close(grad_g, grad, rtol=0, atol=0)
        assert bool((grad_g[~mask] == 0).all())


def test_on_policy_and_reference_defaults():
    logp, old, ref, adv, mask = batch(seed=8)
    for lt in LOSS_TYPES:
        torch.testing.assert_close(
            grpo_loss(logp, None, ref, adv, mask, beta=0.1, loss_type=lt),
            grpo_loss(logp, logp.clone(), ref, adv, mask, beta=0.1, loss_type=lt),
        )
        # beta = 0: the reference is not needed (and not read)
        torch.testing.assert_close(
            grpo_loss(logp, old, None, adv, mask, loss_type=lt), grpo_loss(logp, old, ref, adv, mask, loss_type=lt)
        )
    # mask as 0/1 floats or bools alike
    torch.testing.assert_close(grpo_loss(logp, old, ref, adv, mask.double()), grpo_loss(logp, old, ref, adv, mask))


def test_gradients_only_through_logp():
    logp, old, ref, adv, mask = (x.clone().requires_grad_() if x.is_floating_point() else x for x in batch(seed=9))
    grpo_loss(logp, old, ref, adv, mask, beta=0.1).backward()
    assert logp.grad is not None and old.grad is None and ref.grad is None and adv.grad is None


def test_empty_rows():
    logp, old, ref, adv, mask = batch(seed=10)
    mask[2] = False
    with pytest.raises(ValueError, match="mask"):
        grpo_loss(logp, old, ref, adv, mask, loss_type="grpo")
    # token-level aggregations accept it: the empty row adds nothing
    keep = torch.arange(len(adv)) != 2
    torch.testing.assert_close(
        grpo_loss(logp, old, ref, adv, mask, loss_type="dapo", beta=0.1),
        grpo_loss(logp[keep], old[keep], ref[keep], adv[keep], mask[keep], loss_type="dapo", beta=0.1),
    )
    assert float(grpo_loss(logp, old, ref, adv, torch.zeros_like(mask), loss_type="dr_grpo")) == 0.0
    with pytest.raises(ValueError, match="mask"):
        grpo_loss(logp, old, ref, adv, torch.zeros_like(mask), loss_type="dapo")


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_gradcheck(loss_type):
    g = torch.Generator().manual_seed(11)
    B, T = 4, 5
    old = -1.0 - torch.rand(B, T, generator=g, dtype=torch.float64)
    # log-ratios away from the clip kinks at log(0.8) and log(1.28)
    log_ratio = torch.tensor([-0.5, -0.1, 0.0, 0.1, 0.4], dtype=torch.float64).repeat(B, 1)
    logp = (old + log_ratio).requires_grad_()
    ref = old + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64)
    adv = torch.tensor([1.0, -0.5, 2.0, -1.5], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 0]])
    assert torch.autograd.gradcheck(
        lambda lp: grpo_loss(lp, old, ref, adv, mask, beta=0.1, eps_high=0.28, loss_type=loss_type), (logp,)
    )


# --- bad input ------------------------------------------------------------------------------


def good():
    logp, old, ref, adv, mask = batch(B=3, T=4, seed=12)
    return dict(logp=logp, old_logp=old, ref_logp=ref, advantages=adv, mask=mask)


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(loss_type="ppo"), "loss_type"),
        (dict(mask=torch.ones(3, 5)), "mask"),
        (dict(mask=torch.full((3, 4), 2.0)), "mask"),
        (dict(advantages=torch.zeros(3, 5)), "advantages"),
        (dict(advantages=torch.zeros(4, 4)), "advantages"),
        (dict(advantages=torch.zeros(4)), "advantages"),
        (dict(logp=torch.zeros(12)), "logp"),
        (dict(old_logp=torch.zeros(3, 5)), "old_logp"),
        (dict(eps_low=-0.1), "eps_low"),
        (dict(eps_low=1.0), "eps_low"),
        (dict(eps_high=-0.2), "eps_high"),
        (dict(beta=-0.1), "beta"),
        (dict(beta=0.1, ref_logp=None), "ref_logp"),
        (dict(beta=0.1, ref_logp=torch.zeros(3, 3)), "ref_logp"),
        (dict(loss_type="dr_grpo", max_tokens=0), "max_tokens"),
        (dict(loss_type="dr_grpo", max_tokens=2.5), "max_tokens"),
        (dict(advantages=torch.tensor([0.0, float("nan"), 0.0])), "advantages"),
    ],
)
def test_grpo_loss_bad_input(change, name):
    kwargs = {**good(), **change}
    with pytest.raises(ValueError, match=name):
        grpo_loss(**kwargs)


def test_grpo_loss_nonfinite_where_selected():
    kwargs = good()
    kwargs["logp"] = kwargs["logp"].clone()
    kwargs["logp"][0, 0] = float("nan")  # a selected token
    with pytest.raises(ValueError, match="logp"):
        grpo_loss(**kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_cuda_matches_cpu(loss_type):
    logp, old, ref, adv, mask = batch(seed=13, dtype=torch.float32)
    kw = dict(beta=0.05, eps_high=0.28, loss_type=loss_type)
    loss, grad = loss_and_grad(logp, old, ref, adv, mask, **kw)
    loss_c, grad_c = loss_and_grad(logp.cuda(), old.cuda(), ref.cuda(), adv.cuda(), mask.cuda(), **kw)
    assert loss_c.device.type == "cuda" and grad_c.device.type == "cuda"
    torch.testing.assert_close(loss_c.cpu(), loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad_c.cpu(), grad, rtol=1e-5, atol=1e-7)
    r = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0], device="cuda")
    assert group_advantages(r, 3).device.type == "cuda"
    assert dynamic_sampling_mask(r, 3).device.type == "cuda"
    assert overlong_penalty(torch.tensor([3, 9], device="cuda"), 8, 2).device.type == "cuda"
    with pytest.raises(ValueError, match="mask"):
        grpo_loss(logp.cuda(), old.cuda(), ref.cuda(), adv.cuda(), mask, **kw)
