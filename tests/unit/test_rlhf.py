"""Tests of rlnotes.rlhf: the Bradley-Terry reward-model loss."""

import math

import pytest
import torch

from rlnotes.rlhf import bradley_terry_loss, bradley_terry_prob


def rewards(n=16, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g, dtype=dtype), torch.randn(n, generator=g, dtype=dtype)


def test_matches_logistic_likelihood():
    rc, rr = rewards()
    # P(chosen preferred) = e^{r_c} / (e^{r_c} + e^{r_r}); the loss is its mean negative log
    p = torch.exp(rc) / (torch.exp(rc) + torch.exp(rr))
    torch.testing.assert_close(bradley_terry_prob(rc, rr), p)
    torch.testing.assert_close(bradley_terry_loss(rc, rr), -torch.log(p).mean())
    assert float(bradley_terry_loss(torch.zeros(3), torch.zeros(3))) == pytest.approx(math.log(2))


def test_symmetric_under_swap_with_label_flipped():
    rc, rr = rewards(seed=1)
    # swapping the responses and flipping the label gives the same likelihood
    torch.testing.assert_close(bradley_terry_prob(rc, rr) + bradley_terry_prob(rr, rc), torch.ones_like(rc))
    for i in range(len(rc)):
        a, b = rc[i : i + 1], rr[i : i + 1]
        torch.testing.assert_close(bradley_terry_loss(a, b), -torch.log(1 - bradley_terry_prob(b, a))[0])
    # both orders of a pair together: the loss of a 2-pair batch is unchanged by the swap
    both = bradley_terry_loss(torch.cat([rc, rr]), torch.cat([rr, rc]))
    torch.testing.assert_close(both, bradley_terry_loss(torch.cat([rr, rc]), torch.cat([rc, rr])))


def test_shift_invariance_and_margin():
    rc, rr = rewards(seed=2)
    torch.testing.assert_close(bradley_terry_loss(rc + 5.0, rr + 5.0), bradley_terry_loss(rc, rr))
    m = torch.rand(len(rc), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    torch.testing.assert_close(bradley_terry_loss(rc, rr, margin=m), bradley_terry_loss(rc - m, rr))
    torch.testing.assert_close(bradley_terry_loss(rc, rr, margin=0.5), bradley_terry_loss(rc - 0.5, rr))
    torch.testing.assert_close(bradley_terry_loss(rc, rr, margin=0), bradley_terry_loss(rc, rr))


def test_gradient_pushes_rewards_apart_and_is_stable():
    rc, rr = rewards(seed=4)
    rc.requires_grad_(), rr.requires_grad_()
    bradley_terry_loss(rc, rr).backward()
    # d/dr_c = -sigma(r_r - r_c) / B < 0 and d/dr_r = -d/dr_c
    want = -torch.sigmoid(rr - rc).detach() / len(rc)
    torch.testing.assert_close(rc.grad, want)
    torch.testing.assert_close(rr.grad, -want)
    # huge reward gaps: finite loss and gradient (logsigmoid, not log(sigmoid))
    big = torch.tensor([1e4, -1e4], requires_grad=True)
    loss = bradley_terry_loss(big, torch.zeros(2))
    loss.backward()
    assert math.isfinite(loss.item()) and loss.item() == pytest.approx(1e4 / 2)
    assert bool(torch.isfinite(big.grad).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtypes(dtype):
    rc, rr = rewards(dtype=dtype)
    assert bradley_terry_loss(rc, rr).dtype == dtype
    assert bradley_terry_loss(rc, rr, margin=torch.ones_like(rc)).dtype == dtype


def test_gradcheck():
    rc, rr = rewards(8, seed=5)
    m = torch.rand(8, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda a, b: bradley_terry_loss(a, b, margin=m), (rc.requires_grad_(), rr.requires_grad_())
    )


# --- bad input ------------------------------------------------------------------------------

Z = torch.zeros(3)


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((Z, torch.zeros(4)), {}, "r_rejected"),
        ((torch.zeros(3, dtype=torch.long), Z), {}, "r_chosen"),
        ((torch.zeros(0), torch.zeros(0)), {}, "r_chosen"),
        ((Z, torch.tensor([0.0, float("nan"), 0.0])), {}, "r_rejected"),
        (([0.0, 1.0, 2.0], Z), {}, "r_chosen"),
        ((Z, Z), dict(margin=torch.zeros(2)), "margin"),
        ((Z, Z), dict(margin=float("inf")), "margin"),
        ((Z, Z), dict(margin=True), "margin"),
        ((Z, Z), dict(margin="1"), "margin"),
    ],
)
def test_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        bradley_terry_loss(*args, **kwargs)


def test_prob_bad_input():
    with pytest.raises(ValueError, match="r_rejected"):
        bradley_terry_prob(Z, torch.zeros(2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    rc, rr = rewards(dtype=torch.float32)
    loss_c = bradley_terry_loss(rc.cuda(), rr.cuda(), margin=0.1)
    assert loss_c.device.type == "cuda"
    torch.testing.assert_close(loss_c.cpu(), bradley_terry_loss(rc, rr, margin=0.1))
    with pytest.raises(ValueError, match="r_rejected"):
        bradley_terry_loss(rc.cuda(), rr)
