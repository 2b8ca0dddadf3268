"""Tests of rlnotes.dpo: sequence log-probabilities, the implicit reward and the DPO loss."""

import math

import pytest
import torch

from rlnotes.dpo import dpo_implicit_reward, dpo_loss, sequence_logprob
from rlnotes.rlhf import bradley_terry_loss


def logps(B=6, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return tuple(-5.0 + torch.randn(B, generator=g, dtype=dtype) for _ in range(4))


# --- sequence_logprob -----------------------------------------------------------------------


def test_sequence_logprob_sums_selected_tokens():
    g = torch.Generator().manual_seed(1)
    token_logp = -torch.rand(4, 9, generator=g, dtype=torch.float64)
    mask = torch.rand(4, 9, generator=g) > 0.3
    mask[3] = False  # a row with no token sums to 0
    got = sequence_logprob(token_logp, mask)
    assert got.shape == (4,)
    for i in range(4):
        torch.testing.assert_close(got[i], token_logp[i][mask[i]].sum())
    torch.testing.assert_close(sequence_logprob(token_logp, mask.double()), got)
    assert float(got[3]) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sequence_logprob_ignores_padding(dtype):
    token_logp = -torch.rand(3, 5, generator=torch.Generator().manual_seed(2)).to(dtype)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0]])
    clean = token_logp.clone().requires_grad_()
    want = sequence_logprob(clean, mask)
    want.sum().backward()
    for garbage in (1e30, -1e30, float("nan"), float("inf")):
        dirty = token_logp.clone()
        dirty[mask == 0] = garbage
        dirty.requires_grad_()
        got = sequence_logprob(dirty, mask)
        got.sum().backward()
        assert got.dtype == dtype
        torch.testing.assert_close(got, want.detach(), rtol=0, atol=0)
        torch.testing.assert_close(dirty.grad, mask.to(dtype))


# --- DPO ------------------------------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.01, 0.1, 1.0, 5.0])
def test_loss_is_log2_when_policy_equals_reference(beta):
    pc, pr, _, _ = logps(seed=3)
    assert float(dpo_loss(pc, pr, pc.clone(), pr.clone(), beta=beta)) == pytest.approx(math.log(2), rel=1e-12)


def test_gradient_raises_chosen_and_lowers_rejected():
    pc, pr, rc, rr = logps(seed=4)
    pc.requires_grad_(), pr.requires_grad_()
    loss = dpo_loss(pc, pr, rc, rr, beta=0.5)
    loss.backward()
    assert bool((pc.grad < 0).all()) and bool((pr.grad > 0).all())  # descent: chosen up, rejected down
    torch.testing.assert_close(pc.grad, -pr.grad)
    # weight sigma(-beta Delta) / B: pairs already ordered correctly count less
    delta = (pc - rc) - (pr - rr)
    torch.testing.assert_close(pc.grad, -0.5 * torch.sigmoid(-0.5 * delta.detach()) / len(pc))


def test_one_sgd_step_on_a_token_model():
    """End to end: logits -> token log-probs -> sequence_logprob -> dpo_loss -> one step."""
    g = torch.Generator().manual_seed(5)
    B, T, V = 4, 6, 11
    logits = torch.randn(2, B, T, V, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(V, (2, B, T), generator=g)
    mask = torch.ones(2, B, T)
    mask[:, :, 4:] = 0
    ref = torch.log_softmax(torch.randn(2, B, T, V, generator=g, dtype=torch.float64), -1)
    ref_seq = [sequence_logprob(ref[k].gather(-1, tokens[k, ..., None])[..., 0], mask[k]) for k in range(2)]

    def seq_logps(logits):
        logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]
        return [sequence_logprob(logp[k], mask[k]) for k in range(2)]

    chosen, rejected = seq_logps(logits)
    loss = dpo_loss(chosen, rejected, ref_seq[0], ref_seq[1], beta=0.1)
    loss.backward()
    with torch.no_grad():
        new_chosen, new_rejected = seq_logps(logits - 1.0 * logits.grad)
    assert bool((new_chosen > chosen).all()) and bool((new_rejected < rejected).all())
    assert dpo_loss(new_chosen, new_rejected, *ref_seq, beta=0.1).item() < loss.item()


def test_beta_scales_the_implicit_reward():
    pc, pr, rc, rr = logps(seed=6)
    for beta in (0.05, 0.3, 2.0):
        torch.testing.assert_close(dpo_implicit_reward(pc, rc, beta=beta), beta * dpo_implicit_reward(pc, rc, beta=1.0))
        # DPO is Bradley-Terry on the implicit rewards ...
        torch.testing.assert_close(
            dpo_loss(pc, pr, rc, rr, beta=beta),
            bradley_terry_loss(dpo_implicit_reward(pc, rc, beta), dpo_implicit_reward(pr, rr, beta)),
        )
        # ... so beta can be moved into the log-ratios
        torch.testing.assert_close(
            dpo_loss(pc, pr, rc, rr, beta=beta), dpo_loss(beta * pc, beta * pr, beta * rc, beta * rr, beta=1.0)
        )
    # a larger beta makes the same preference margin count more: a lower loss when Delta > 0
    pc2 = rc + 1.0
    assert float(dpo_loss(pc2, rr, rc, rr, beta=1.0)) < float(dpo_loss(pc2, rr, rc, rr, beta=0.1)) < math.log(2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtypes(dtype):
    pc, pr, rc, rr = logps(dtype=dtype)
    assert dpo_loss(pc, pr, rc, rr).dtype == dtype
    assert dpo_loss(pc, pr, rc.double(), rr.float()).dtype == dtype


def test_gradients_only_through_policy():
    pc, pr, rc, rr = (x.requires_grad_() for x in logps(seed=7))
    dpo_loss(pc, pr, rc, rr).backward()
    assert pc.grad is not None and pr.grad is not None and rc.grad is None and rr.grad is None


def test_gradcheck():
    pc, pr, rc, rr = logps(5, seed=8)
    assert torch.autograd.gradcheck(
        lambda a, b: dpo_loss(a, b, rc, rr, beta=0.7), (pc.requires_grad_(), pr.requires_grad_())
    )
    tok = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    assert torch.autograd.gradcheck(lambda t: sequence_logprob(t, mask), (tok,))


# --- bad input ------------------------------------------------------------------------------

S = torch.zeros(3)


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((S, S, S, S), dict(beta=0.0), "beta"),
        ((S, S, S, S), dict(beta=-1.0), "beta"),
        ((S, S, S, S), dict(beta=float("nan")), "beta"),
        ((S, torch.zeros(4), S, S), {}, "policy_rejected_logps"),
        ((torch.zeros(3, 2), S, S, S), {}, "policy_chosen_logps"),
        ((S, S, torch.tensor([0.0, float("inf"), 0.0]), S), {}, "ref_chosen_logps"),
        ((S, S, S, torch.zeros(3, dtype=torch.long)), {}, "ref_rejected_logps"),
        ((torch.zeros(0), torch.zeros(0), torch.zeros(0), torch.zeros(0)), {}, "policy_chosen_logps"),
    ],
)
def test_dpo_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        dpo_loss(*args, **kwargs)


M = torch.ones(2, 3)


@pytest.mark.parametrize(
    "args, name",
    [
        ((torch.zeros(3), torch.ones(3)), "token_logp"),
        ((torch.zeros(2, 3), torch.ones(2, 4)), "mask"),
        ((torch.zeros(2, 3), torch.full((2, 3), 0.5)), "mask"),
        ((torch.full((2, 3), float("nan")), M), "token_logp"),
        ((torch.zeros(2, 3, dtype=torch.long), M), "token_logp"),
        ((torch.zeros(2, 3), [[1, 1, 1], [1, 1, 1]]), "mask"),
    ],
)
def test_sequence_logprob_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        sequence_logprob(*args)


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((S, torch.zeros(2)), {}, "ref_logps"),
        ((S, S), dict(beta=0), "beta"),
        ((torch.zeros(3, dtype=torch.int32), S), {}, "policy_logps"),
    ],
)
def test_implicit_reward_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        dpo_implicit_reward(*args, **kwargs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    args = logps(seed=9, dtype=torch.float32)
    loss_c = dpo_loss(*(x.cuda() for x in args), beta=0.2)
    assert loss_c.device.type == "cuda"
    torch.testing.assert_close(loss_c.cpu(), dpo_loss(*args, beta=0.2))
    tok, mask = -torch.rand(2, 3), torch.tensor([[1, 1, 0], [1, 0, 0]])
    torch.testing.assert_close(sequence_logprob(tok.cuda(), mask.cuda()).cpu(), sequence_logprob(tok, mask))
    with pytest.raises(ValueError, match="ref_chosen_logps"):
        dpo_loss(args[0].cuda(), args[1].cuda(), args[2], args[3].cuda())


# TRL's formulas, transcribed from trl/trainer/dpo_trainer.py (TRL 1.16.0, DPOTrainer's loss:
# the "hinge" and "robust" branches; the "sigmoid" branch with label smoothing as in TRL's
# earlier releases), with `logits` (TRL's name in earlier releases; `delta_score` in 1.16) =
# Delta, the log-ratio margin.
def _trl_hinge(logits, beta):
    return torch.relu(1 - beta * logits)


def _trl_robust(logits, beta, label_smoothing):
    clean_loss_term = -(1 - label_smoothing) * torch.nn.functional.logsigmoid(beta * logits)
    flipped_loss_term = -label_smoothing * torch.nn.functional.logsigmoid(-beta * logits)
    return (clean_loss_term - flipped_loss_term) / (1 - 2 * label_smoothing)


def _trl_sigmoid(logits, beta, label_smoothing):
    return (-torch.nn.functional.logsigmoid(beta * logits) * (1 - label_smoothing)
            - torch.nn.functional.logsigmoid(-beta * logits) * label_smoothing)


@pytest.mark.parametrize("beta", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.3])
def test_dpo_loss_variants_match_trl(beta, p):
    from rlnotes.dpo import dpo_loss_variant
    g = torch.Generator().manual_seed(0)
    pc, pr, rc, rr = (-10 + 5 * torch.randn(64, generator=g, dtype=torch.float64) for _ in range(4))
    logits = (pc - rc) - (pr - rr)
    for loss_type, trl in (("hinge", _trl_hinge(logits, beta)), ("robust", _trl_robust(logits, beta, p)),
                           ("sigmoid", _trl_sigmoid(logits, beta, p))):
        ours = dpo_loss_variant(pc, pr, rc, rr, beta, loss_type=loss_type, label_smoothing=p)
        torch.testing.assert_close(ours, trl.mean())
    # sigmoid without smoothing is DPO; robust without smoothing too
    torch.testing.assert_close(dpo_loss_variant(pc, pr, rc, rr, beta, "sigmoid"), dpo_loss(pc, pr, rc, rr, beta))
    torch.testing.assert_close(dpo_loss_variant(pc, pr, rc, rr, beta, "robust"), dpo_loss(pc, pr, rc, rr, beta))


def test_dpo_loss_variant_bad_input():
    from rlnotes.dpo import dpo_loss_variant
    x = torch.zeros(3)
    for kwargs, name in ((dict(loss_type="ipo"), "loss_type"), (dict(label_smoothing=0.5), "label_smoothing"),
                         (dict(label_smoothing=-0.1), "label_smoothing"), (dict(beta=0.0), "beta")):
        with pytest.raises(ValueError, match=name):
            dpo_loss_variant(x, x, x, x, **kwargs)
    with pytest.raises(ValueError, match="policy_rejected_logps"):
        dpo_loss_variant(x, torch.zeros(4), x, x)
