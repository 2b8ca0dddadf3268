"""The numerical claims of the chapters "GRPO" and "Dr. GRPO, DAPO and process supervision", as unit tests (the chapter
asserts each of them too)."""

import numpy as np
import torch

import rlnotes.grpo as grpo
from rlnotes.kl import kl_k1, kl_k3


def test_k3_orientation_unbiased_nonnegative_and_inverted_ratio_is_off():
    p_theta = torch.tensor([0.6, 0.3, 0.05, 0.05], dtype=torch.float64)
    p_ref = torch.tensor([0.1, 0.3, 0.3, 0.3], dtype=torch.float64)
    exact = float((p_theta * (p_theta / p_ref).log()).sum())
    a = torch.multinomial(p_theta, 200_000, replacement=True, generator=torch.Generator().manual_seed(0))
    logp, ref_logp = p_theta.log()[a], p_ref.log()[a]
    k1, k3, inv = kl_k1(logp, ref_logp), kl_k3(logp, ref_logp), kl_k3(ref_logp, logp)
    se = lambda k: float(k.std()) / len(k) ** 0.5  # noqa: E731
    assert abs(float(k3.mean()) - exact) < 4 * se(k3) and abs(float(k1.mean()) - exact) < 4 * se(k1)
    assert float(k3.min()) >= 0 > float(k1.min()) and float(k3.std()) < float(k1.std())
    chi2 = float((p_theta ** 2 / p_ref).sum() - 1)
    assert abs(float(inv.mean()) - (chi2 - exact)) < 4 * se(inv) and float(inv.mean()) > 2 * exact


def test_k3_gradient_pulls_towards_reference():
    p_theta = torch.tensor([0.6, 0.3, 0.05, 0.05], dtype=torch.float64)
    p_ref = torch.tensor([0.1, 0.3, 0.3, 0.3], dtype=torch.float64)
    lp = p_theta.log().clone().requires_grad_(True)
    kl_k3(lp, p_ref.log()).sum().backward()
    torch.testing.assert_close(lp.grad, 1 - p_ref / p_theta)
    assert bool(((lp.grad > 0) == (p_theta > p_ref)).all())


def test_two_sequence_aggregation_weights():
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    adv = torch.tensor([1.0, -1.0])
    want = {"grpo": (1 / 4, -1 / 12), "dapo": (1 / 8, -1 / 8), "dr_grpo": (1 / 12, -1 / 12)}
    for loss_type, w in want.items():
        logp = torch.full((2, 6), -1.0, requires_grad=True)
        grpo.grpo_loss(logp, None, None, adv, mask, loss_type=loss_type, max_tokens=6).backward()
        assert np.allclose((-logp.grad[0, 0].item(), -logp.grad[1, 0].item()), w)


def test_std_weight_against_group_accuracy():
    G = 8
    k = torch.arange(1, G)
    groups = (torch.arange(G)[None, :] < k[:, None]).double().reshape(-1)
    adv = grpo.group_advantages(groups, G).view(-1, G)
    weight = (adv[:, 0] / (1 - k / G)).numpy()
    sigma = np.sqrt(G / (G - 1) * (k / G).numpy() * (1 - k / G).numpy())
    assert np.allclose(weight, 1 / (sigma + 1e-4))
    assert weight.argmin() == G // 2 - 1 and abs(weight[0] - weight[-1]) < 1e-9
    assert weight[0] / weight[G // 2 - 1] > 1.5
    push = adv.abs().sum(1).numpy()  # a question's total push is still largest at p = 1/2
    assert push.argmax() == G // 2 - 1
    assert np.allclose(push, 2 * G * (k / G).numpy() * (1 - k / G).numpy() / (sigma + 1e-4))


def test_clip_higher_arithmetic():
    assert np.isclose(0.01 * (1 + 0.2), 0.012) and np.isclose(0.9 * (1 + 0.2), 1.08)
    assert np.isclose(0.01 * (1 + 0.28), 0.0128) and 0.9 * 1.2 > 1


def test_process_example():
    proc = grpo.process_advantages(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[1, 3], [1, 3]]),
                                   torch.ones(2, 4), group_size=2)
    torch.testing.assert_close(proc[0], torch.tensor([-1.0, -1.0, -1.5, -1.5]), atol=1e-3, rtol=0)
    torch.testing.assert_close(proc[1], torch.tensor([1.0, 1.0, 0.5, 0.5]), atol=1e-3, rtol=0)
    assert proc[0, 0] < 0 < proc[1, 0]  # two right first steps, opposite advantages


def test_trl_default_aggregation_is_dapo():
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(8, 6, generator=g, dtype=torch.float64)
    mask = (torch.arange(6)[None] < torch.tensor([1, 2, 3, 4, 5, 6, 6, 2])[:, None]).double()
    adv = grpo.group_advantages(torch.tensor([1.0, 0, 0, 1, 1, 1, 0, 0]), 4)
    per_token = -adv[:, None] * torch.ones_like(logp)
    trl_default = (per_token * mask).sum() / mask.sum()
    ours = {t: float(grpo.grpo_loss(logp, None, None, adv, mask, loss_type=t)) for t in ("dapo", "grpo")}
    assert np.isclose(float(trl_default), ours["dapo"]) and not np.isclose(ours["dapo"], ours["grpo"])


def test_k3_expected_gradient_is_the_forward_kl_gradient():
    p_theta = torch.tensor([0.6, 0.3, 0.05, 0.05], dtype=torch.float64)
    p_ref = torch.tensor([0.1, 0.3, 0.3, 0.3], dtype=torch.float64)
    exact = float((p_theta * (p_theta / p_ref).log()).sum())
    # the exact expectation, over sampled tokens, of the gradient of k3 through log pi_theta
    z = p_theta.log().clone().requires_grad_(True)
    grad = torch.zeros(4, dtype=torch.float64)
    for a in range(4):
        z.grad = None
        logp = torch.log_softmax(z, 0)[a]
        kl_k3(logp, p_ref.log()[a]).backward()
        grad += p_theta[a] * z.grad
    torch.testing.assert_close(grad, p_theta - p_ref)  # grad of KL(pi_ref || pi_theta)
    assert not torch.allclose(grad, p_theta * ((p_theta / p_ref).log() - exact), atol=1e-2)


def test_group_forward_token_count():
    P, L, G, B = 7, 4, 8, 16  # prompt tokens, answer tokens, group size, prompts
    shared, separate = B * P + B * G * (L - 1), B * G * (P + L - 1)
    assert separate / shared > 2


def test_gspo_range_drops_a_completion_that_ppo_range_keeps():
    old_lp = torch.log(torch.tensor([[0.5, 0.4, 0.25, 0.6]]))
    moved = old_lp + torch.log(torch.tensor([[1.05, 0.98, 1.6, 1.02]]))
    grads = {}
    for name, kw in {"ppo": {}, "gspo": dict(eps_low=3e-4, eps_high=4e-4)}.items():
        lp = moved.clone().requires_grad_(True)
        grpo.grpo_loss(lp, old_lp, None, torch.tensor([1.0]), torch.ones(1, 4), ratio_level="sequence", **kw).backward()
        grads[name] = lp.grad[0]
    assert (grads["ppo"] < 0).all() and torch.allclose(grads["ppo"], grads["ppo"][0].expand(4))
    assert (grads["gspo"] == 0).all()
    assert 1 + 4e-4 < 1.6 ** (1 / 1000) < 1.001  # one such token among 1,000 still leaves GSPO's range


def test_process_by_hand_exercise_numbers():
    step_rewards = torch.tensor([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    adv = grpo.process_advantages(step_rewards, torch.tensor([[1, 3]] * 3), torch.ones(3, 4), 3, eps=0.0)
    a, b = 1 / 3 / (4 / 15) ** 0.5, 2 / 3 / (4 / 15) ** 0.5  # right and wrong steps, normalised
    want = torch.tensor([[a - b, a], [2 * a, a], [a - b, -b]], dtype=torch.float64).repeat_interleave(2, 1)
    torch.testing.assert_close(adv, want)
    outcome = grpo.group_advantages(step_rewards[:, -1] * step_rewards[:, 0], 3, eps=0.0)
    torch.testing.assert_close(outcome[[0, 2]], torch.full((2,), -(1 / 3) ** 0.5, dtype=torch.float64))
