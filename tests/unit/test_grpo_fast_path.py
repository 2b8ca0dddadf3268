"""The GRPO step's speed devices give the straightforward computation's numbers: the grouped
sampler (each prompt's prefill once per group), the grouped forward (token-wise layers on
prompt and completion rows at once), the fused Adam, and the update that skips pi_ref at
beta = 0 (benchmarks/bench_grpo_step.py races the step against TRL)."""

import math

import pytest
import torch

import rlnotes.grpo as grpo
from rlnotes.lm import AdditionTask, TinyGPT
from rlnotes.lm.generation import completion_logprobs, decode


def small(task, seed=0):
    return TinyGPT(task.tokenizer.vocab_size, task.max_len, n_layers=2, n_heads=2, width=32, seed=seed)


def test_group_decode_is_decode_of_the_repeated_prompts():
    """Same generator, same completions and masks; log-probs equal to float rounding; and
    prompts of different lengths (left padding) too."""
    task = AdditionTask()
    model = small(task, seed=3).eval()
    uniq = task.sample_prompts(5, torch.Generator().manual_seed(0)) + [task.tokenizer.encode("7+8=")]
    G = 4
    rep = [x for x in uniq for _ in range(G)]
    for temperature in (1.0, 0.7):
        a = decode(model, rep, task.max_new_tokens, temperature=temperature, eos_id=task.tokenizer.eos_id,
                   generator=torch.Generator().manual_seed(1))
        b = grpo.group_decode(model, uniq, G, task.max_new_tokens, temperature=temperature,
                              eos_id=task.tokenizer.eos_id, generator=torch.Generator().manual_seed(1))
        assert torch.equal(a[0], b[0]) and torch.equal(a[2], b[2])
        torch.testing.assert_close(a[1], b[1], rtol=0, atol=1e-6)
    # and the two consume the generator alike: the next uniform is the same
    g1, g2 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    decode(model, rep, 3, generator=g1)
    grpo.group_decode(model, uniq, G, 3, generator=g2)
    assert torch.equal(torch.rand(3, generator=g1), torch.rand(3, generator=g2))


@pytest.mark.parametrize("kw, name", [
    (dict(group_size=0), "group_size"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(temperature=0.0), "temperature"),
    (dict(eos_id=99), "eos_id"),
    (dict(prompts=[]), "prompts"),
    (dict(generator=3), "generator"),
])
def test_group_decode_bad_input(kw, name):
    task = AdditionTask()
    args = dict(prompts=task.sample_prompts(2, torch.Generator().manual_seed(0)), group_size=2,
                max_new_tokens=3, temperature=1.0, eos_id=2, generator=None) | kw
    with pytest.raises(ValueError, match=name):
        grpo.group_decode(small(task), args.pop("prompts"), args.pop("group_size"),
                          args.pop("max_new_tokens"), **args)


def test_fused_adam_is_adam_to_rounding():
    """train_grpo's fused Adam takes torch's Adam's steps, to float rounding."""
    task = AdditionTask()
    m1, m2 = small(task), small(task)
    o1 = torch.optim.Adam(m1.parameters(), lr=1e-3)
    o2 = torch.optim.Adam(m2.parameters(), lr=1e-3, fused=True)
    tokens = torch.tensor(task.sample_prompts(6, torch.Generator().manual_seed(0)))
    for step in range(5):
        for m, o in ((m1, o1), (m2, o2)):
            o.zero_grad(set_to_none=True)
            m(tokens).pow(2).mean().backward()
            o.step()
    for a, b in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def reference_loss(policy, prompts, comp, mask, old_logp, adv, eps=0.2):
    """GRPO's loss written out: one teacher-forced forward per completion, the clipped
    objective per token, the mean over each completion's tokens, then over completions."""
    rows = []
    for i in range(comp.shape[0]):
        m = mask[i:i + 1].bool()
        logp = completion_logprobs(policy, [prompts[i]], comp[i:i + 1], m)[0]
        ratio = torch.exp(logp - old_logp[i])
        obj = torch.minimum(ratio * adv[i], torch.clamp(ratio, 1 - eps, 1 + eps) * adv[i])
        rows.append(-(obj * m[0]).sum() / m[0].sum())
    return torch.stack(rows).mean()


@pytest.mark.parametrize("beta, epochs", [(0.0, 1), (0.04, 1), (0.0, 3), (0.04, 2)])
def test_grpo_update_is_the_straightforward_computation(beta, epochs):
    """The sampled batch of the fast path gives the loss and gradient of the reference (to
    ~1e-6); at beta = 0 pi_ref is never run and the KL is NaN; beta > 0 runs it and mu > 1
    keeps the sampler's log-probs as pi_theta_old."""
    torch.manual_seed(0)
    task = AdditionTask()
    model = small(task, seed=1)
    policy = small(task, seed=1)
    with torch.no_grad():  # a policy that differs from pi_ref, so the ratio and KL move
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    gen = torch.Generator().manual_seed(4)
    G = 4
    samples, batch = grpo.grpo_sample(policy, task, 3, G, gen, temperature=1.0, overlong=None,
                                      dynamic_sampling=False, oversample=1, supervision="outcome",
                                      scale="none")
    batch["adv"] = torch.linspace(-1, 1, batch["comp"].shape[0])  # every row carries a gradient
    prompts = [x for x in batch["prompts"] for _ in range(G)]
    old = batch["old_logp"]
    # the sampler's log-probs are pi_theta_old's (the teacher-forced ones, to float rounding)
    torch.testing.assert_close(old * batch["mask"], completion_logprobs(policy, prompts, batch["comp"], batch["mask"]),
                               rtol=0, atol=1e-5)

    calls = []

    class Ref(torch.nn.Module):  # pi_ref that records its calls
        def __init__(self):
            super().__init__()
            self.m = model

        def __getattr__(self, name):
            if name == "m":
                return super().__getattr__(name)
            calls.append(name)
            return getattr(self.m, name)

    ref = Ref()
    expect = [p.detach().clone() for p in policy.parameters()]
    ref_policy = small(task)
    ref_policy.load_state_dict(policy.state_dict())
    opt = torch.optim.Adam(policy.parameters(), lr=1e-4, fused=True)
    opt_ref = torch.optim.Adam(ref_policy.parameters(), lr=1e-4)
    loss, kl, hidden = grpo.grpo_update(policy, ref, opt, batch, G, epochs=epochs, eps_low=0.2,
                                        eps_high=None, beta=beta, loss_type="grpo", temperature=1.0,
                                        grad_clip=None, max_tokens=task.max_new_tokens)
    assert bool(calls) == (beta > 0)
    assert math.isnan(kl) == (beta == 0)
    with torch.no_grad():
        ref_lp = completion_logprobs(model, prompts, batch["comp"], batch["mask"])
    for epoch in range(epochs):
        want = reference_loss(ref_policy, prompts, batch["comp"], batch["mask"], old, batch["adv"])
        if beta > 0:
            m = batch["mask"].bool()
            lp = completion_logprobs(ref_policy, prompts, batch["comp"], m)
            ell = torch.where(m, lp - ref_lp, 0.0)
            k3 = torch.exp(-ell) - 1 + ell
            want = want + beta * ((k3 * m).sum(1) / m.sum(1)).mean()
        opt_ref.zero_grad()
        want.backward()
        if epoch == 0:  # the first step's gradient, against the fast path's on a fresh copy
            grads = [p.grad.clone() for p in ref_policy.parameters()]
            fresh = small(task)
            fresh.load_state_dict(dict(zip(dict(policy.named_parameters()), expect)))
            logp, _ = grpo.group_forward(fresh, batch["prompts"], batch["comp"], G)
            ref_arg = ref_lp if beta > 0 else None
            got = grpo.grpo_loss(logp, old, ref_arg, batch["adv"], batch["mask"], beta=beta)
            got.backward()
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
            for p, g in zip(fresh.parameters(), grads):
                torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)
        opt_ref.step()
    torch.testing.assert_close(loss, want, rtol=0, atol=1e-5)
    # Adam moves every weight by about lr whatever its gradient's size, so a weight whose
    # gradient is at rounding level may move either way: the weights agree to lr / 10
    for a, b in zip(policy.parameters(), ref_policy.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
