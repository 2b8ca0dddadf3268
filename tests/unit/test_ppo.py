"""Tests of rlnotes.ppo.ppo_clip_loss."""

import math

import pytest
import torch

from rlnotes.ppo import ppo_clip_loss

EPS = 0.2


def grad_of(logp0, old_logp, adv, **kwargs):
    logp = logp0.clone().requires_grad_()
    loss = ppo_clip_loss(logp, old_logp, adv, **kwargs)
    loss.backward()
    return loss, logp.grad


def test_gradient_zero_where_clipped_and_plain_inside():
    # ratio, advantage, is the clipped branch active?
    cases = [
        (1.5, +1.0, True),    # above 1 + eps with A > 0: clipped, no gradient
        (0.5, -1.0, True),    # below 1 - eps with A < 0: clipped, no gradient
        (1.5, -1.0, False),   # above 1 + eps with A < 0: the unclipped term is the min
        (0.5, +1.0, False),   # below 1 - eps with A > 0: the unclipped term is the min
        (1.1, +2.0, False),   # inside the interval
        (0.9, -0.5, False),
        (1.0, 3.0, False),
    ]
    ratio = torch.tensor([c[0] for c in cases], dtype=torch.float64)
    adv = torch.tensor([c[1] for c in cases], dtype=torch.float64)
    clipped = torch.tensor([c[2] for c in cases])
    old_logp = torch.log(torch.full_like(ratio, 0.3))
    logp0 = old_logp + torch.log(ratio)
    loss, g = grad_of(logp0, old_logp, adv, clip_eps=EPS)
    # the plain surrogate -mean(ratio * A): its gradient in logp is -ratio * A / n
    logp = logp0.clone().requires_grad_()
    (-(torch.exp(logp - old_logp) * adv).mean()).backward()
    assert bool((g[clipped] == 0).all())
    torch.testing.assert_close(g[~clipped], logp.grad[~clipped])
    assert bool((g[~clipped] != 0).all())
    # value: clipped elements contribute -(1 +- eps) A
    want = -torch.where(clipped, torch.clamp(ratio, 1 - EPS, 1 + EPS), ratio) * adv
    torch.testing.assert_close(loss, want.mean())


def test_on_policy_loss_is_minus_mean_advantage():
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(5, 7, generator=g, dtype=torch.float64)
    adv = torch.randn(5, 7, generator=g, dtype=torch.float64)
    loss, grad = grad_of(logp, None, adv)
    torch.testing.assert_close(loss, -adv.mean())
    torch.testing.assert_close(grad, -adv / adv.numel())
    torch.testing.assert_close(ppo_clip_loss(logp, logp.clone(), adv), loss)


def test_mask_selects_elements():
    g = torch.Generator().manual_seed(1)
    logp, old = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
    adv = torch.randn(4, 6, generator=g)
    mask = torch.rand(4, 6, generator=g) > 0.4
    want = ppo_clip_loss(logp[mask], old[mask], adv[mask])
    torch.testing.assert_close(ppo_clip_loss(logp, old, adv, mask=mask), want)
    torch.testing.assert_close(ppo_clip_loss(logp, old, adv, mask=mask.float()), want)
    torch.testing.assert_close(ppo_clip_loss(logp, old, adv, mask=mask.long()), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_garbage_changes_nothing(dtype):
    g = torch.Generator().manual_seed(2)
    logp = (0.3 * torch.randn(3, 8, generator=g)).to(dtype) - 1.0
    old = logp + (0.1 * torch.randn(3, 8, generator=g)).to(dtype)
    adv = torch.randn(3, 8, generator=g).to(dtype)
    mask = torch.ones(3, 8, dtype=torch.bool)
    mask[0, 5:], mask[2, 2:] = False, False
    loss, grad = grad_of(logp, old, adv, mask=mask)
    for garbage in (1e30, -1e30, float("inf"), float("nan")):
        lg, og, ag = logp.clone(), old.clone(), adv.clone()
        lg[~mask], og[~mask], ag[~mask] = garbage, -abs(garbage) if garbage == garbage else garbage, garbage
        loss_g, grad_g = grad_of(lg, og, ag, mask=mask)
        assert loss_g.dtype == dtype
        torch.testing.assert_close(loss_g, loss, rtol=0, atol=0)
        torch.testing.assert_close(grad_g, grad, rtol=0, atol=0)
        assert bool((grad_g[~mask] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_preserved(dtype):
    logp = torch.zeros(4, dtype=dtype)
    assert ppo_clip_loss(logp, logp, torch.ones(4, dtype=dtype)).dtype == dtype
    # old_logp and advantages of another dtype are cast to logp's
    assert ppo_clip_loss(logp, torch.zeros(4, dtype=torch.float64), torch.ones(4)).dtype == dtype


def test_gradients_only_through_logp():
    logp = torch.zeros(3, requires_grad=True)
    old = torch.full((3,), -0.1, requires_grad=True)
    adv = torch.ones(3, requires_grad=True)
    ppo_clip_loss(logp, old, adv).backward()
    assert logp.grad is not None and old.grad is None and adv.grad is None


def test_gradcheck():
    g = torch.Generator().manual_seed(3)
    old = torch.randn(20, generator=g, dtype=torch.float64)
    # ratios spread over all four regions, kept away from the kinks at 1 +- eps
    log_ratio = torch.tensor([math.log(x) for x in (0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 1.6)] * 3, dtype=torch.float64)[:20]
    logp = (old + log_ratio).requires_grad_()
    adv = torch.randn(20, generator=g, dtype=torch.float64)
    mask = torch.rand(20, generator=g) > 0.2
    assert torch.autograd.gradcheck(lambda lp: ppo_clip_loss(lp, old, adv, mask=mask), (logp,))
    assert torch.autograd.gradcheck(lambda lp: ppo_clip_loss(lp, old, adv, clip_eps=0.15), (logp,))


# --- bad input ------------------------------------------------------------------------------

Z = torch.zeros(2, 3)


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((Z, torch.zeros(3, 2), Z), {}, "old_logp"),
        ((Z, Z, torch.zeros(2)), {}, "advantages"),
        ((Z, Z, Z), dict(clip_eps=-0.1), "clip_eps"),
        ((Z, Z, Z), dict(clip_eps=1.5), "clip_eps"),
        ((Z, Z, Z), dict(clip_eps="0.2"), "clip_eps"),
        ((Z, Z, Z), dict(mask=torch.full((2, 3), 2.0)), "mask"),
        ((Z, Z, Z), dict(mask=torch.zeros(2, 3)), "mask"),
        ((Z, Z, Z), dict(mask=torch.ones(3)), "mask"),
        ((torch.zeros(2, 3, dtype=torch.long), Z, Z), {}, "logp"),
        (([0.0, 0.0], Z, Z), {}, "logp"),
        ((torch.zeros(0), torch.zeros(0), torch.zeros(0)), {}, "logp"),
        ((torch.full((2, 3), float("nan")), Z, Z), {}, "logp"),
    ],
)
def test_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        ppo_clip_loss(*args, **kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    g = torch.Generator().manual_seed(4)
    logp, old, adv = (torch.randn(5, 7, generator=g) for _ in range(3))
    mask = torch.rand(5, 7, generator=g) > 0.3
    loss = ppo_clip_loss(logp, old, adv, mask=mask)
    loss_c = ppo_clip_loss(logp.cuda(), old.cuda(), adv.cuda(), mask=mask.cuda())
    assert loss_c.device.type == "cuda"
    torch.testing.assert_close(loss_c.cpu(), loss)
    with pytest.raises(ValueError, match="old_logp"):
        ppo_clip_loss(logp.cuda(), old, adv.cuda())
