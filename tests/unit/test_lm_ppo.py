"""Tests of the pieces of PPO for language models: per-token rewards, GAE over tokens, whitening."""

import pytest
import torch

import rlnotes.lm as lm
from rlnotes.kl import kl_k1
from rlnotes.rlhf_ppo import train_ppo


def batch(seed=0, B=5, L=6):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([L, 1, 3, 4, 2][:B])
    mask = (torch.arange(L)[None] < lengths[:, None]).long()
    logp = -torch.rand((B, L), generator=g, dtype=torch.float64) * mask
    ref = -torch.rand((B, L), generator=g, dtype=torch.float64) * mask
    score = torch.randn(B, generator=g, dtype=torch.float64)
    return score, logp, ref, mask, lengths


def test_kl_penalised_rewards():
    score, logp, ref, mask, lengths = batch()
    r = lm.kl_penalised_rewards(score, logp, ref, mask, 0.1)
    # the sum over tokens is the score minus beta times the summed k1 KL estimate
    torch.testing.assert_close(r.sum(1), score - 0.1 * (kl_k1(logp, ref) * mask).sum(1))
    for i, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(r[i, n - 1], score[i] - 0.1 * (logp[i, n - 1] - ref[i, n - 1]))
        assert bool((r[i, n:] == 0).all())


def test_kl_penalised_rewards_rejects_bad_input():
    score, logp, ref, mask, _ = batch()
    with pytest.raises(ValueError, match="score"):
        lm.kl_penalised_rewards(score[:3], logp, ref, mask, 0.1)
    with pytest.raises(ValueError, match="ref_logp"):
        lm.kl_penalised_rewards(score, logp, ref[:, :3], mask, 0.1)
    with pytest.raises(ValueError, match="beta"):
        lm.kl_penalised_rewards(score, logp, ref, mask, -0.1)
    with pytest.raises(ValueError, match="mask"):
        lm.kl_penalised_rewards(score, logp, ref, mask * 2, 0.1)
    with pytest.raises(ValueError, match="mask"):
        lm.kl_penalised_rewards(score, logp, ref, mask * 0, 0.1)


def test_token_gae_lambda_one_is_reward_to_go_minus_value():
    score, logp, ref, mask, lengths = batch(1)
    r = lm.kl_penalised_rewards(score, logp, ref, mask, 0.2)
    V = torch.randn(r.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * mask
    adv, ret = lm.token_gae(r, V, mask, lam=1.0)
    to_go = r.flip(1).cumsum(1).flip(1) * mask
    torch.testing.assert_close(adv, (to_go - V) * mask)
    torch.testing.assert_close(ret, to_go)
    # lam = 0: the one-step TD error, with V(s_T) = 0 after the last token
    adv0, _ = lm.token_gae(r, V, mask, lam=0.0)
    nextV = torch.cat([V[:, 1:], torch.zeros_like(V[:, :1])], 1) * torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], 1)
    torch.testing.assert_close(adv0, (r + nextV - V) * mask)
    # it is not rewards - values (a common mistake)
    assert not torch.allclose(adv, (r - V) * mask)


def test_token_gae_rejects_bad_input():
    score, logp, ref, mask, _ = batch()
    with pytest.raises(ValueError, match="values"):
        lm.token_gae(logp, ref[:2], mask)
    with pytest.raises(ValueError, match="lam"):
        lm.token_gae(logp, ref, mask, lam=1.5)
    with pytest.raises(ValueError, match="gamma"):
        lm.token_gae(logp, ref, mask, gamma=-0.1)
    with pytest.raises(ValueError, match="rewards"):
        lm.token_gae(mask, ref, mask)


def test_whiten():
    score, logp, ref, mask, _ = batch()
    w = lm.whiten(logp * 3 + 1, mask)
    sel = w[mask.bool()]
    assert abs(float(sel.mean())) < 1e-9 and abs(float(sel.pow(2).mean()) - 1) < 1e-6
    assert bool((w[mask == 0] == 0).all())
    w2 = lm.whiten(logp, mask, shift_mean=False)
    # the mean is kept (as in TRL's whiten with shift_mean=False), the spread normalised
    torch.testing.assert_close(w2[mask.bool()].mean(), logp[mask.bool()].mean())


def test_train_ppo_rejects_bad_input():
    task = lm.PreferenceTask()
    sft = lm.TinyGPT(task.tokenizer.vocab_size, task.max_len, width=16)
    for kw, match in ((dict(beta=-1.0), "beta"), (dict(iterations=0), "iterations"),
                      (dict(advantage="td"), "advantage"), (dict(critic_target="values"), "critic_target"),
                      (dict(lam=2.0), "lam"), (dict(minibatches=100, batch_size=8), "minibatches")):
        with pytest.raises(ValueError, match=match):
            train_ppo(sft, task, task.reward, **kw)


def test_ppo_on_the_gold_reward_is_reproducible_and_improves():
    torch.set_num_threads(1)
    task = lm.PreferenceTask()
    sft, _ = lm.train_sft(task, steps=40, width=16, device="cpu")
    _, h = train_ppo(sft, task, task.reward, iterations=15, gold_fn=task.reward, device="cpu", lr=3e-3)
    assert sum(h["gold"][-3:]) / 3 > h["gold"][0] + 0.5
    assert h["gold"] == h["score"]


def test_whiten_rejects_bad_input():
    _, logp, _, mask, _ = batch()
    with pytest.raises(ValueError, match="x"):
        lm.whiten(mask, mask)
    with pytest.raises(ValueError, match="mask"):
        lm.whiten(logp, mask[:2])
    with pytest.raises(ValueError, match="mask"):
        lm.whiten(logp, mask * 3)


def test_trainers_reject_bad_input():
    task = lm.PreferenceTask()
    for kw, match in ((dict(steps=0), "steps"), (dict(lr=-1.0), "lr"), (dict(batch_size=0), "batch_size"),
                      (dict(warmup=0), "warmup")):
        with pytest.raises(ValueError, match=match):
            lm.train_sft(task, **kw)
    sft = lm.TinyGPT(task.tokenizer.vocab_size, task.max_len, width=16)
    pairs = lm.sample_preference_pairs(sft, task, 4, torch.Generator().manual_seed(0))
    for kw, match in ((dict(epochs=0), "epochs"), (dict(batch_size=0), "batch_size"), (dict(lr="a"), "lr")):
        with pytest.raises(ValueError, match=match):
            lm.train_reward_model(sft, pairs, **kw)
    with pytest.raises(ValueError, match="generator"):
        lm.sample_preference_pairs(sft, task, 4, 0)


def test_adaptive_kl_update():
    from rlnotes.rlhf_ppo import adaptive_kl_update
    assert adaptive_kl_update(0.1, 2.0, 2.0) == pytest.approx(0.1)           # on target: unchanged
    assert adaptive_kl_update(0.1, 2.2, 2.0) == pytest.approx(0.1 * 1.01)    # e = 0.1
    assert adaptive_kl_update(0.1, 100.0, 2.0) == pytest.approx(0.1 * 1.02)  # e clipped at 0.2
    assert adaptive_kl_update(0.1, 0.0, 2.0, k_beta=0.5) == pytest.approx(0.1 * 0.9)  # e = -0.2
    # a sequence of KLs above the target keeps raising beta, below keeps lowering it
    b = 0.05
    for _ in range(10):
        b = adaptive_kl_update(b, 5.0, 1.0)
    assert b == pytest.approx(0.05 * 1.02 ** 10)
    for bad, match in ((dict(beta=0.0), "beta"), (dict(beta=-1.0), "beta"), (dict(kl_target=0.0), "kl_target"),
                       (dict(k_beta=0.0), "k_beta"), (dict(kl="x"), "kl")):
        args = dict(beta=0.1, kl=1.0, kl_target=1.0, k_beta=0.1)
        args.update(bad)
        with pytest.raises(ValueError, match=match):
            adaptive_kl_update(**args)


def _random_reward_model(sft, seed=0):
    rm = lm.RewardModel(sft)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        rm.head.weight.copy_(torch.randn(rm.head.weight.shape, generator=g))
        rm.head.bias.fill_(0.3)
        rm.offset.fill_(0.1)
    return rm


def test_value_model_starts_as_the_reward_model_on_every_prefix():
    torch.set_num_threads(1)
    task = lm.PreferenceTask()
    sft = lm.TinyGPT(task.tokenizer.vocab_size, task.max_len, width=16)
    rm = _random_reward_model(sft)
    agent = lm.PolicyWithValueModel(sft, rm)
    g = torch.Generator().manual_seed(1)
    x = task.sample_prompts(12, g)
    y, logp, mask = lm.generate(sft, x, task.max_new_tokens, eos_id=task.tokenizer.eos_id, generator=g)
    with torch.no_grad():
        agent_logp, values = agent(x, y)
        torch.testing.assert_close(agent_logp * mask, logp * mask)  # the policy is the SFT model's copy
        checked = 0
        for t in range(1, y.shape[1]):  # V(x, y_<t) = r_psi(x, y_<t) wherever token t exists
            rows = mask[:, t].bool()
            if rows.any():
                prefix_score = rm([p for p, k in zip(x, rows.tolist()) if k], y[rows, :t], mask[rows, :t])
                torch.testing.assert_close(values[rows, t], prefix_score)
                checked += int(rows.sum())
    assert checked > 12
    # no parameter is shared with the policy or with the reward model
    ids = {id(p) for p in agent.policy.parameters()} | {id(p) for p in rm.parameters()}
    assert not ids & {id(p) for p in agent.value_model.parameters()}
    assert [len(g) for g in agent.clip_groups()] == [len(list(agent.policy.parameters())),
                                                      len(list(agent.parameters())) - len(list(agent.policy.parameters()))]


def test_train_ppo_with_a_value_model_trains_it_and_keeps_the_default_unchanged():
    torch.set_num_threads(1)
    task = lm.PreferenceTask()
    sft, _ = lm.train_sft(task, steps=20, width=16, device="cpu")
    rm = _random_reward_model(sft)
    before = [p.detach().clone() for p in rm.parameters()]
    kw = dict(iterations=3, gold_fn=task.reward, device="cpu", lr=3e-3, seed=1)
    agent, h = train_ppo(sft, task, task.reward, critic=rm, **kw)
    assert isinstance(agent, lm.PolicyWithValueModel)
    assert all(torch.equal(a, b) for a, b in zip(before, rm.parameters()))  # a copy is trained
    moved = [not torch.equal(a, b) for a, b in zip(agent.value_model.parameters(), rm.backbone.parameters())]
    assert sum(moved) > len(moved) // 2 and not torch.equal(agent.value_head.weight, rm.head.weight)
    assert any(not torch.equal(a, b) for a, b in zip(agent.policy.parameters(), sft.parameters()))
    assert len(h["explained_variance"]) == 3 and all(v <= 1 for v in h["explained_variance"])
    # the default critic is the head, and naming it changes nothing
    a1, h1 = train_ppo(sft, task, task.reward, **kw)
    a2, h2 = train_ppo(sft, task, task.reward, critic="head", **kw)
    assert isinstance(a1, lm.PolicyWithValue) and h1 == h2
    assert all(torch.equal(p, q) for p, q in zip(a1.parameters(), a2.parameters()))
    assert h1["explained_variance"][0] == pytest.approx(0.0, abs=1e-9)  # V = 0 at first: no better than a constant
    assert [len(g) for g in a1.clip_groups()] == [len(list(a1.parameters()))]  # one clip over everything, as before


def test_train_ppo_rejects_bad_critics():
    task = lm.PreferenceTask()
    sft = lm.TinyGPT(task.tokenizer.vocab_size, task.max_len, width=16)
    other = lm.RewardModel(lm.TinyGPT(task.tokenizer.vocab_size + 3, task.max_len, width=16))
    for kw, match in ((dict(critic="reward_model"), "critic"), (dict(critic=None), "critic"),
                      (dict(critic=torch.nn.Linear(16, 1)), "critic"), (dict(critic=other), "critic"),
                      (dict(critic=lm.RewardModel(sft), detach_value=False), "detach_value")):
        with pytest.raises(ValueError, match=match):
            train_ppo(sft, task, task.reward, **kw)
    with pytest.raises(ValueError, match="reward_model"):
        lm.PolicyWithValueModel(sft, sft)


def test_explained_variance():
    from rlnotes.rlhf_ppo import explained_variance
    g = torch.Generator().manual_seed(0)
    targets = torch.randn(4, 6, generator=g)
    mask = (torch.arange(6)[None] < torch.tensor([[6], [2], [5], [3]])).float()
    assert explained_variance(targets, targets, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(targets, 3.0), targets, mask) == pytest.approx(0.0, abs=1e-9)
    noisy = targets + 0.5 * torch.randn(4, 6, generator=g)
    sel = mask.bool()
    expected = 1 - float((targets - noisy)[sel].var(unbiased=False) / targets[sel].var(unbiased=False))
    # padding is ignored: garbage there changes nothing
    assert explained_variance(noisy + 100 * (1 - mask), targets, mask) == pytest.approx(expected)
    for args, match in (((targets[:2], targets, mask), "values"), ((targets, targets[:, :3], mask), "targets"),
                        ((targets, targets, mask * 0), "mask"), ((targets, targets, mask[0]), "mask")):
        with pytest.raises(ValueError, match=match):
            explained_variance(*args)
