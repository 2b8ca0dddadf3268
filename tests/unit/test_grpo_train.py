"""Tests of the GRPO chapter's additions to rlnotes.grpo: RLOO and process-supervision
advantages, the grouped forward pass, the training loop, and the stalling task."""

import numpy as np
import pytest
import torch

from rlnotes.grpo import (group_advantages, group_forward, grpo_step_metrics, process_advantages,
                          rloo_advantages, train_grpo)
from rlnotes.lm import AdditionTask, TinyGPT
from rlnotes.lm.generation import completion_forward, generate
from rlnotes.lm.tasks import pad_completions
from rlnotes.lm.grpo_tasks import ChainAdditionTask, StallingAdditionTask, finetune, stall_model


def tiny(task, seed=0):
    return TinyGPT(task.tokenizer.vocab_size, task.max_len, n_layers=1, n_heads=2, width=16, seed=seed)


# --- RLOO -------------------------------------------------------------------------------------


def test_rloo_is_rescaled_group_mean_advantage():
    g = torch.Generator().manual_seed(0)
    for G in (2, 4, 8):
        r = torch.randn(5 * G, generator=g, dtype=torch.float64)
        torch.testing.assert_close(rloo_advantages(r, G), G / (G - 1) * group_advantages(r, G, scale="none"))
    # by hand: rewards 1, 0, 0, 0 -> 1 - 0 = 1 and 0 - 1/3
    torch.testing.assert_close(rloo_advantages(torch.tensor([1.0, 0, 0, 0]), 4),
                               torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3]))


@pytest.mark.parametrize("args, name", [
    ((torch.ones(6), 4), "group_size"),   # does not divide the batch
    ((torch.ones(6), 1), "group_size"),   # leave-one-out needs G >= 2
    ((torch.ones(0), 2), "rewards"),      # empty
    ((torch.ones(2, 3), 3), "rewards"),   # not 1-D
])
def test_rloo_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        rloo_advantages(*args)


# --- process supervision -----------------------------------------------------------------------


def test_process_advantages_by_hand():
    # one group of 2 completions, 2 steps each; step rewards 1,0 and 1,1: mean 3/4, std 1/2
    r = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    ends = torch.tensor([[1, 3], [0, 2]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    adv = process_advantages(r, ends, mask, 2, eps=0.0)
    n = (r - 0.75) / 0.5  # 0.5, -1.5 / 0.5, 0.5
    want = torch.tensor([[n[0, 0] + n[0, 1]] * 2 + [n[0, 1]] * 2,
                         [n[1, 0] + n[1, 1], n[1, 1], n[1, 1], 0.0]], dtype=torch.float64)
    torch.testing.assert_close(adv, want)


def test_process_advantages_one_step_is_outcome_supervision():
    g = torch.Generator().manual_seed(3)
    r = torch.randint(0, 2, (12,), generator=g).double()
    mask = torch.ones(12, 5, dtype=torch.long)
    adv = process_advantages(r[:, None], torch.full((12, 1), 4), mask, 4)
    torch.testing.assert_close(adv, group_advantages(r, 4)[:, None].expand(12, 5))


@pytest.mark.parametrize("kw, name", [
    (dict(group_size=4), "group_size"),                      # 3 rows
    (dict(step_rewards=torch.zeros(0, 2)), "step_rewards"),
    (dict(step_ends=torch.zeros(3, 2)), "step_ends"),        # float ends
    (dict(mask=torch.ones(2, 4)), "mask"),                   # wrong rows
])
def test_process_advantages_bad_input(kw, name):
    args = dict(step_rewards=torch.rand(3, 2), step_ends=torch.tensor([[0, 1]] * 3),
                mask=torch.ones(3, 4), group_size=3)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        process_advantages(**args)


# --- the grouped forward pass -------------------------------------------------------------------


def test_group_forward_equals_completion_forward_and_gradients():
    task = AdditionTask()
    model = tiny(task)
    g = torch.Generator().manual_seed(0)
    uniq = task.sample_prompts(3, g) + [[task.tokenizer.bos_id, 5, 6, 7]]  # one shorter prompt
    prompts = [p for p in uniq for _ in range(4)]
    comp, logp_gen, mask = generate(model, prompts, 4, eos_id=task.tokenizer.eos_id, generator=g)
    a, ha = completion_forward(model, prompts, comp)
    b, hb = group_forward(model, uniq, comp, 4)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ha, hb, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b * mask, logp_gen, atol=1e-5, rtol=1e-5)
    ga = torch.autograd.grad((a * mask).sum(), list(model.parameters()))
    gb = torch.autograd.grad((b * mask).sum(), list(model.parameters()))
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)
    one, _ = group_forward(model, uniq, comp[:, :1], 4)  # a one-token completion
    torch.testing.assert_close(one, a[:, :1], atol=1e-5, rtol=1e-5)


def test_group_forward_bad_input():
    task = AdditionTask()
    model = tiny(task)
    p = task.sample_prompts(2, torch.Generator().manual_seed(0))
    comp = torch.zeros(8, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="completions"):
        group_forward(model, p, comp, 3)  # 8 rows, 2 prompts x 3
    with pytest.raises(ValueError, match="prompts"):
        group_forward(model, [], comp, 4)
    with pytest.raises(ValueError, match="group_size"):
        group_forward(model, p, comp, 0)
    with pytest.raises(ValueError, match="completions"):
        group_forward(model, p, torch.zeros(8, 20, dtype=torch.long), 4)  # longer than max_len


# --- metrics -----------------------------------------------------------------------------------


def test_grpo_step_metrics():
    r = torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 1])
    lengths = torch.tensor([3, 5, 7, 3, 3, 3, 4, 4])
    s = grpo_step_metrics(r, r, lengths, 4)
    assert s["zero_var"] == 0.5 and s["accuracy"] == 5 / 8
    assert s["len_correct"] == pytest.approx((3 + 3 + 3 + 4 + 4) / 5)
    assert s["len_wrong"] == pytest.approx(5.0)
    assert np.isnan(grpo_step_metrics(torch.ones(4), torch.ones(4), lengths[:4], 2)["len_wrong"])
    with pytest.raises(ValueError, match="group_size"):
        grpo_step_metrics(r, r, lengths, 3)


# --- the training loop ---------------------------------------------------------------------------


def test_train_grpo_deterministic_and_leaves_model_unchanged():
    task = AdditionTask()
    model = tiny(task)
    before = [p.detach().clone() for p in model.parameters()]
    kw = dict(n_prompts=2, group_size=4, eval_every=2, beta=0.04, epochs=2, eps_high=0.28)
    p1, h1 = train_grpo(model, task, 3, seed=5, **kw)
    p2, h2 = train_grpo(model, task, 3, seed=5, **kw)
    for k in ("reward", "loss", "kl", "entropy", "pass1", "length", "zero_var"):
        assert h1[k] == h2[k], k
    for a, b in zip(p1.parameters(), p2.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(model.parameters(), before):
        assert torch.equal(a, b)  # the reference is untouched
    assert len(h1["reward"]) == 3 and h1["eval_step"] == [0, 2, 3]
    # an untrained model never answers right: every advantage is 0 and pi_theta = pi_ref, so
    # neither the policy term nor the KL term has a gradient, and Adam leaves the weights alone
    assert h1["reward"] == [0.0, 0.0, 0.0]
    for a, b in zip(p1.parameters(), before):
        assert torch.equal(a, b)


def test_train_grpo_variants_run():
    task = StallingAdditionTask()
    model = tiny(task)
    for kw in (dict(loss_type="dr_grpo", scale="none"), dict(loss_type="dapo", dynamic_sampling=True,
                                                              oversample=2, overlong=(6, 0))):
        _, h = train_grpo(model, task, 2, n_prompts=2, group_size=3, eval_every=5, **kw)
        assert len(h["loss"]) == 2 and all(np.isfinite(h["loss"]))


def test_train_grpo_records_extra_metrics_of_the_samples():
    """metrics={name: f} adds one value a step, computed on that step's samples: the stall
    task's stall rate of a model fine-tuned to always stall is 1, and its stall length is the
    batch's mean length."""
    task = StallingAdditionTask(p_stall=1.0, max_stall=3)
    model = finetune(tiny(task), task, 40, batch_size=16, lr=1e-2)
    seen = []

    def rate(prompts, comp, mask):
        seen.append((list(prompts), comp.clone(), mask.clone()))
        return task.stall_rate(prompts, comp, mask)

    _, h = train_grpo(model, task, 3, n_prompts=2, group_size=3, eval_every=5, eval_greedy=False,
                      metrics={"stall_rate": rate, "len_stall": task.stall_length})
    assert len(h["stall_rate"]) == len(h["len_stall"]) == 3
    assert all(len(p) == 6 and c.shape[0] == 6 for p, c, _ in seen)  # every sample of the step
    for k in range(3):  # each value is the metric of that step's samples
        assert h["stall_rate"][k] == pytest.approx(float(task.stall_rate(*seen[k])))
        assert h["len_stall"][k] == pytest.approx(float(task.stall_length(*seen[k])), nan_ok=True)
    assert h["stall_rate"][0] > 0.5
    assert "len_wrong" in h and len(h["len_wrong"]) == 3  # the usual keys are still there


@pytest.mark.parametrize("metrics, name", [
    ([len], "metrics"),                      # not a dict
    ({"x": 3}, "metrics"),                   # not callable
    ({"len_wrong": lambda p, c, m: 0.0}, "metrics"),  # clashes with a history key
    ({"pair": lambda p, c, m: (1.0, 2.0)}, "metrics\\['pair'\\]"),  # not a number
])
def test_train_grpo_bad_metrics(metrics, name):
    task = AdditionTask()
    with pytest.raises(ValueError, match=name):
        train_grpo(tiny(task), task, 1, metrics=metrics)


class _EmptyTask(AdditionTask):
    def pairs(self, split="train"):
        return np.zeros((0, 2), dtype=int)


@pytest.mark.parametrize("kw, name", [
    (dict(steps=0), "steps"),
    (dict(n_prompts=0), "n_prompts"),
    (dict(group_size=1), "group_size"),
    (dict(lr=0.0), "lr"),
    (dict(epochs=0), "epochs"),
    (dict(loss_type="ppo"), "loss_type"),
    (dict(scale="std"), "scale"),
    (dict(overlong=(4, 5)), "cache_len"),
    (dict(temperature=0.0), "temperature"),
    (dict(supervision="steps"), "supervision"),
    (dict(eval_samples=0), "eval_samples"),
    (dict(eval_curve_samples=0), "eval_curve_samples"),
    (dict(eval_curve_samples=1.5), "eval_curve_samples"),
    (dict(supervision="process"), "step_rewards"),  # AdditionTask has no steps to check
])
def test_train_grpo_bad_input(kw, name):
    task = AdditionTask()
    args = dict(steps=1)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        train_grpo(tiny(task), task, **args)


def test_eval_curve_samples_keeps_the_first_and_last_evaluation():
    """The cheaper curve draws from its own generator: the first and last pass@1 equal those of a
    run evaluated only at the start and the end (same policy, same evaluation draws)."""
    task = _EvenFirstTokenTask()  # a reward a random model earns half the time
    kw = dict(n_prompts=2, group_size=2, warmup=0, eval_samples=2, eval_greedy=False, seed=3)
    _, ends = train_grpo(tiny(task), task, 4, eval_every=4, **kw)
    _, curve = train_grpo(tiny(task), task, 4, eval_every=1, eval_curve_samples=1, **kw)
    assert curve["eval_step"] == [0, 1, 2, 3, 4] and ends["eval_step"] == [0, 4]
    assert curve["pass1"][0] == ends["pass1"][0] and curve["pass1"][-1] == ends["pass1"][-1]
    assert curve["reward"] == ends["reward"]  # training itself is untouched
    assert 0.2 < ends["pass1"][0] < 0.8  # the draws matter: equality is not 0 == 0


class _EvenFirstTokenTask(AdditionTask):
    def reward(self, prompts, completions, mask):
        return (completions[:, 0] % 2 == 0).float()


def test_train_grpo_empty_prompt_set():
    task = _EmptyTask()
    with pytest.raises(ValueError, match="prompt"):
        train_grpo(tiny(task), task, 1)


# --- the stalling task ----------------------------------------------------------------------------


def test_stalling_task_demonstrations_and_reward():
    task = StallingAdditionTask(p_stall=0.5, max_stall=6)
    prompts, comp, mask = task.sft_batch(400, torch.Generator().manual_seed(0))
    r = task.reward(prompts, comp, mask)
    eq = task.tokenizer.stoi["="]
    stalled = comp[:, 0] == eq
    assert 0.4 < float(stalled.float().mean()) < 0.6
    assert bool((r[stalled] == 0).all()) and bool((r[~stalled] == 1).all())
    lengths = mask.sum(1)
    assert int(lengths[stalled].max()) <= 7 and int(lengths[~stalled].max()) <= 4
    assert task.max_new_tokens == 8 and task.config()["p_stall"] == 0.5


@pytest.mark.parametrize("kw, name", [(dict(p_stall=1.5), "p_stall"), (dict(max_stall=0), "max_stall"),
                                      (dict(max_stall=12), "max_stall")])
def test_stalling_task_bad_input(kw, name):
    with pytest.raises(ValueError, match=name):
        StallingAdditionTask(**kw)


def test_one_digit_stalling_task():
    """digits=1: the 81 sums of a, b in 1..9 (16 held out), prompts of 5 tokens in the two-digit
    task's 16-token context, the same stalls and reward."""
    task = StallingAdditionTask(p_stall=0.5, max_stall=6, digits=1)
    assert len(task.pairs("train")) == 65 and len(task.pairs("test")) == 16
    assert task.pairs("train").min() >= 1 and task.pairs("train").max() <= 9
    assert task.prompt_len == 5 and task.max_len == 16 and task.max_new_tokens == 8
    assert task.config()["digits"] == 1 and task.config()["n_test"] == 16
    prompts, comp, mask = task.sft_batch(400, torch.Generator().manual_seed(0))
    r = task.reward(prompts, comp, mask)
    stalled = task.stalls(prompts, comp, mask)
    assert 0.4 < float(stalled.float().mean()) < 0.6
    assert bool((r[stalled] == 0).all()) and bool((r[~stalled] == 1).all())
    t = task.tokenizer
    assert task.reward([t.encode("3+4=")], torch.tensor([[t.stoi["7"], t.eos_id]]), torch.ones(1, 2)).item() == 1.0
    assert StallingAdditionTask(max_stall=10, digits=1).max_new_tokens == 12  # 5 + 10 + 1 = 16
    with pytest.raises(ValueError, match="max_stall"):
        StallingAdditionTask(max_stall=11, digits=1)
    with pytest.raises(ValueError, match="n_test"):
        StallingAdditionTask(digits=1, n_test=81)
    assert StallingAdditionTask().config()["n_test"] == 1000  # two digits: the addition task's split


@pytest.mark.parametrize("digits", [0, 3, 1.5, True, "1"])
def test_stalling_task_bad_digits(digits):
    with pytest.raises(ValueError, match="digits"):
        StallingAdditionTask(digits=digits)


def test_stalls_and_stall_length_by_hand():
    task = StallingAdditionTask(p_stall=0.5, max_stall=6)
    t = task.tokenizer
    eq, eos = t.stoi["="], t.eos_id
    prompts = [t.encode("12+35=")] * 4
    rows = [t.encode("47", bos=False, eos=True), [eq, eq, eos], [eq] * 5 + [eos], t.encode("48", bos=False, eos=True)]
    comp, mask = pad_completions(rows, eos)
    assert task.stalls(prompts, comp, mask).tolist() == [False, True, True, False]
    assert task.stall_length(prompts, comp, mask) == (3 + 6) / 2  # EOS included, stalls only
    assert task.stall_rate(prompts, comp, mask) == 0.5
    assert np.isnan(task.stall_length(prompts[:1], comp[:1], mask[:1]))  # no stall: NaN
    assert task.stall_share(prompts, comp, mask) == 2 / 3  # wrong: the two stalls and "48"
    assert task.stall_share(prompts[1:3], comp[1:3], mask[1:3]) == 1.0
    assert np.isnan(task.stall_share(prompts[:1], comp[:1], mask[:1]))  # nothing wrong: NaN
    summary = task.stall_summary(prompts, comp, mask)  # lengths 3, 3, 6, 3; right: "47" only
    assert summary["stall_rate"] == 0.5 and summary["stall_share"] == 2 / 3
    assert summary["right_if_no_stall"] == 0.5 and summary["len_stall"] == 4.5
    assert summary["gap"] == (3 + 6 + 3) / 3 - 3
    lone = task.stall_summary(prompts[:1], comp[:1], mask[:1])  # one right answer: empty subsets
    assert lone["right_if_no_stall"] == 1.0 and np.isnan(lone["gap"]) and np.isnan(lone["len_stall"])
    # a masked-out '=' (padding past EOS) is not a stall
    comp2 = comp.clone()
    comp2[0, -1] = eq
    assert not bool(task.stalls(prompts, comp2, mask)[0])
    # the stall's own length in the demonstrations: k + 1 with k uniform in 1..6, mean 4.5
    p, c, m = task.sft_batch(2000, torch.Generator().manual_seed(0))
    assert abs(task.stall_length(p, c, m) - 4.5) < 0.15


@pytest.mark.parametrize("args, name", [
    (([], torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, 3)), "prompts"),
    (([[1, 2]], torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3)), "completions"),
    (([[1, 2]], torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 4)), "mask"),
])
def test_stalls_bad_input(args, name):
    task = StallingAdditionTask()
    for f in (task.stalls, task.stall_rate, task.stall_length, task.stall_share, task.stall_summary):
        with pytest.raises(ValueError, match=name):
            f(*args)


def test_finetune_copies_and_learns_to_stall():
    task = StallingAdditionTask(p_stall=1.0, max_stall=2)
    model = tiny(task)
    tuned = finetune(model, task, 60, batch_size=16, lr=1e-2)
    assert tuned is not model
    p = task.sample_prompts(8, torch.Generator().manual_seed(1))
    comp, _, _ = generate(tuned, p, 1, generator=torch.Generator().manual_seed(0))
    assert float((comp[:, 0] == task.tokenizer.stoi["="]).float().mean()) > 0.5
    for bad, name in ((dict(steps=0), "steps"), (dict(lr=-1.0), "lr"), (dict(batch_size=0), "batch_size")):
        with pytest.raises(ValueError, match=name):
            finetune(model, task, **{"steps": 1, **bad})


def test_stall_model_is_the_cached_fine_tuned_sft_model():
    """stall_model = finetune(SFT model, StallingAdditionTask(p_stall, max_stall), steps), and a
    second call (from the cache) returns the same weights."""
    torch.set_num_threads(1)
    from rlnotes.lm import sft_model

    model, task = stall_model(p_stall=0.5, max_stall=3, steps=3)
    assert isinstance(task, StallingAdditionTask) and (task.p_stall, task.max_stall) == (0.5, 3)
    sft, _ = sft_model(AdditionTask(), seed=0, steps=450)
    ref = finetune(sft, task, 3, lr=1e-3)
    again, _ = stall_model(p_stall=0.5, max_stall=3, steps=3)
    for a, b, c in zip(model.state_dict().values(), ref.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert not model.training


@pytest.mark.parametrize("kw, name", [(dict(steps=0), "steps"), (dict(lr=0.0), "lr"), (dict(seed=-1), "seed"),
                                      (dict(p_stall=2.0), "p_stall"), (dict(max_stall=0), "max_stall"),
                                      (dict(digits=3), "digits"), (dict(digits=1, max_stall=11), "max_stall")])
def test_stall_model_bad_input(kw, name):
    with pytest.raises(ValueError, match=name):
        stall_model(**kw)


def test_stalling_after_the_answer():
    task = StallingAdditionTask(p_stall=1.0, max_stall=4, after=True)
    prompts, comp, mask = task.sft_batch(50, torch.Generator().manual_seed(0))
    assert bool((task.reward(prompts, comp, mask) == 0).all())  # a stall after the answer is wrong
    eq = task.tokenizer.stoi["="]
    for p, c, m in zip(prompts, comp.tolist(), mask.tolist()):
        a, b = task.operands(p)
        answer = task.answer(a, b)[:-1]
        got = [t for t, k in zip(c, m) if k]
        assert got[:len(answer)] == answer and got[len(answer)] == eq and got[-1] == task.tokenizer.eos_id
    assert task.max_new_tokens == 9 and task.config()["after"] is True
    with pytest.raises(ValueError, match="max_stall"):
        StallingAdditionTask(max_stall=6, after=True)


# --- the chain task and process supervision ---------------------------------------------------


def test_chain_task_demonstrations_rewards_and_steps():
    task = ChainAdditionTask()
    assert len(task.pairs("test")) == 1000 and len(task.pairs("train")) == 90 * 90 * 9 - 1000
    assert not set(map(tuple, task.pairs("test"))) & set(map(tuple, task.pairs("train")[:20000]))
    prompts, comp, mask = task.sft_batch(16, torch.Generator().manual_seed(0))
    assert task.tokenizer.decode(prompts[0]).count("+") == 2 and task.max_len == 16
    assert task.reward(prompts, comp, mask).tolist() == [1.0] * 16
    r, ends = task.step_rewards(prompts, comp, mask)
    assert r.tolist() == [[1.0, 1.0]] * 16
    assert (ends[:, 1] == mask.sum(1) - 1).all() and (ends[:, 0] < ends[:, 1]).all()
    eq = task.tokenizer.stoi["="]
    assert all(comp[i, ends[i, 0]] == eq for i in range(16))
    p = [task.prompt(12, 35, 7)] * 4
    enc = lambda s: task.tokenizer.encode(s, bos=False, eos=True)  # noqa: E731
    texts = [enc("47=54"), enc("48=55"), enc("48=54"), task.tokenizer.encode("47", bos=False)]
    from rlnotes.lm.tasks import pad_completions
    c, m = pad_completions(texts, task.tokenizer.eos_id)
    assert task.reward(p, c, m).tolist() == [1.0, 0.0, 1.0, 0.0]  # outcome: the final result only
    r, ends = task.step_rewards(p, c, m)
    # a slip in step 1 (48) with a step 2 right for it (48 + 7 = 55): [0, 1]; no "=": [0, 0]
    assert r.tolist() == [[1, 1], [0, 1], [0, 0], [0, 0]]
    assert ends.tolist() == [[2, 5], [2, 5], [2, 5], [1, 1]]


def test_chain_task_bad_input():
    for kw, name in ((dict(n_test=0), "n_test"), (dict(n_test=90 * 90 * 9), "n_test"), (dict(seed=-1), "seed")):
        with pytest.raises(ValueError, match=name):
            ChainAdditionTask(**kw)
    task = ChainAdditionTask()
    with pytest.raises(ValueError, match="prompts"):
        task.step_rewards([], torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, 3))
    with pytest.raises(ValueError, match="completions"):
        task.step_rewards([task.prompt(10, 10, 1)], torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="mask"):
        task.step_rewards([task.prompt(10, 10, 1)], torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 4))


def test_train_grpo_process_supervision_runs_and_differs_from_outcome():
    class Graded(ChainAdditionTask):  # step rewards that vary, even for an untrained model
        def step_rewards(self, prompts, completions, mask):
            r, ends = super().step_rewards(prompts, completions, mask)
            g = torch.Generator().manual_seed(len(prompts) + int(completions.sum()))
            return torch.randint(0, 2, r.shape, generator=g).float(), ends

    task = Graded()
    model = TinyGPT(task.tokenizer.vocab_size, task.max_len, n_layers=1, n_heads=2, width=16, seed=0)
    kw = dict(n_prompts=4, group_size=4, eval_every=10, beta=0.0, lr=1e-3)
    po, ho = train_grpo(model, task, 3, supervision="outcome", **kw)
    pp, hp = train_grpo(model, task, 3, supervision="process", **kw)
    assert ho["reward"][0] == hp["reward"][0]  # same first samples
    assert all(np.isfinite(hp["loss"])) and hp["loss"] != ho["loss"]
    assert any(not torch.equal(a, b) for a, b in zip(pp.parameters(), model.parameters()))


def test_grpo_loss_per_token_advantages_equal_broadcast_ones():
    from rlnotes.grpo import grpo_loss
    g = torch.Generator().manual_seed(3)
    logp = -torch.rand(4, 5, generator=g, dtype=torch.float64)
    old = logp + 0.1 * torch.randn(4, 5, generator=g, dtype=torch.float64)
    mask = (torch.arange(5)[None] < torch.tensor([[2], [5], [3], [1]])).long()
    adv = torch.randn(4, generator=g, dtype=torch.float64)
    for loss_type in ("grpo", "dapo", "dr_grpo"):
        a = grpo_loss(logp, old, None, adv, mask, loss_type=loss_type)
        per_tok = adv[:, None].expand(4, 5).clone()
        per_tok[mask == 0] = float("nan")  # padding may hold anything
        b = grpo_loss(logp, old, None, per_tok, mask, loss_type=loss_type)
        torch.testing.assert_close(a, b)


def test_chain_model_bad_input():
    from rlnotes.lm.grpo_tasks import chain_model
    for kw, name in ((dict(steps=0), "steps"), (dict(lr=0.0), "lr"), (dict(seed=-1), "seed")):
        with pytest.raises(ValueError, match=name):
            chain_model(**kw)


def test_pass_at_1_samples_and_bad_input():
    from rlnotes.grpo import pass_at_1
    task = AdditionTask(n_test=20)
    model = tiny(task)
    assert pass_at_1(model, task, generator=torch.Generator().manual_seed(0)) == 0.0  # untrained
    one = pass_at_1(model, task, generator=torch.Generator().manual_seed(0), samples=3)
    assert one == 0.0
    for kw, name in ((dict(samples=0), "samples"), (dict(samples=1.5), "samples"),
                     (dict(batch_size=0), "batch_size")):
        with pytest.raises(ValueError, match=name):
            pass_at_1(model, task, **kw)
    with pytest.raises(ValueError, match="split"):
        pass_at_1(model, _EmptyTask(), "train")


def test_pass_at_1_of_a_perfect_policy_is_one():
    from rlnotes.grpo import pass_at_1

    class Oracle(AdditionTask):  # every completion is right
        def reward(self, prompts, completions, mask):
            return torch.ones(len(prompts))

    task = Oracle(n_test=10)
    assert pass_at_1(tiny(task), task, samples=2) == 1.0


def test_train_grpo_without_greedy_evaluation():
    task = AdditionTask(n_test=20)
    _, h = train_grpo(tiny(task), task, 2, n_prompts=2, group_size=2, eval_every=1, eval_greedy=False)
    assert len(h["greedy"]) == 3 and all(np.isnan(h["greedy"])) and len(h["pass1"]) == 3


@pytest.mark.parametrize("digits, n_prompts, n_used", [(2, 5, 5), (1, 5, 5), (1, 200, 16)])
def test_stop_probability_is_the_models_eos_probability_after_k_equals_signs(digits, n_prompts, n_used):
    task = StallingAdditionTask(p_stall=1.0, max_stall=3, digits=digits)
    model = tiny(task).eval()
    p = task.stop_probability(model, n_prompts=n_prompts)
    assert p.shape == (task.max_new_tokens - 1,)
    eq, eos = task.tokenizer.stoi["="], task.tokenizer.eos_id
    prompts = task.prompts_of(task.pairs("test")[:n_used])  # all 16 held-out one-digit sums at most
    for k in (1, 3):
        want = np.mean([torch.softmax(model(torch.tensor([pr + [eq] * k]))[0, -1], -1)[eos].item()
                        for pr in prompts])
        assert abs(p[k - 1] - want) < 1e-5
    assert np.allclose(task.stop_probability(model, max_k=2, n_prompts=n_prompts), p[:2])


@pytest.mark.parametrize("kw, name", [(dict(max_k=0), "max_k"), (dict(max_k=99), "max_k"),
                                      (dict(n_prompts=0), "n_prompts"), (dict(model=len), "model")])
def test_stop_probability_bad_input(kw, name):
    task = StallingAdditionTask(p_stall=1.0, max_stall=3)
    kw = {"model": tiny(task), **kw}
    with pytest.raises(ValueError, match=name):
        task.stop_probability(**kw)


@pytest.mark.parametrize("right, factor", [(5, 1.93), (7, 2.83)])
def test_std_scales_every_advantage_of_a_group_by_one_over_its_std(right, factor):
    """Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias: with 5
    (7) of 8 right, the std multiplies every advantage by about 1.9 (2.8) against Dr. GRPO's."""
    rewards = torch.tensor([1.0] * right + [0.0] * (8 - right))
    scaled = group_advantages(rewards, 8) / group_advantages(rewards, 8, scale="none")
    assert torch.allclose(scaled, torch.full((8,), factor), atol=0.01)


def test_slipping_task_slips_at_its_rate_by_its_slips_and_keeps_the_exact_reward():
    from rlnotes.lm.grpo_tasks import SlippingAdditionTask
    task = SlippingAdditionTask(p_slip=0.3)
    prompts, comp, mask = task.sft_batch(4000, torch.Generator().manual_seed(0))
    off = []
    for p, c, m in zip(prompts, comp.tolist(), mask.tolist()):
        a, b = task.operands(p)
        text = task.tokenizer.decode([t for t, k in zip(c, m) if k and t != task.tokenizer.eos_id])
        off.append(int(text) - (a + b))
    off = np.array(off)
    assert abs((off != 0).mean() - 0.3) < 0.03
    assert set(off[off != 0].tolist()) == {1, -1, 10, -10}
    assert (task.reward(prompts, comp, mask).numpy() == (off == 0)).all()  # the checker is exact
    assert task.config()["p_slip"] == 0.3 and task.config()["task"] == "slipping-addition"
    clean = SlippingAdditionTask(p_slip=0.0)
    p0, c0, m0 = clean.sft_batch(200, torch.Generator().manual_seed(1))
    assert clean.reward(p0, c0, m0).sum() == 200
    assert (task.pairs("test") == AdditionTask().pairs("test")).all()


def test_slipping_task_bad_input():
    from rlnotes.lm.grpo_tasks import SlippingAdditionTask
    for kw, name in ((dict(p_slip=1.0), "p_slip"), (dict(p_slip=-0.1), "p_slip"),
                     (dict(p_slip="half"), "p_slip"), (dict(slips=()), "slips"),
                     (dict(slips=(1, 0)), "slips"), (dict(slips=(1.5,)), "slips"),
                     (dict(slips=(100,)), "slips"), (dict(slips=3), "slips")):
        with pytest.raises(ValueError, match=name):
            SlippingAdditionTask(**kw)


def test_slip_model_bad_input():
    from rlnotes.lm.grpo_tasks import slip_model
    for kw, name in ((dict(steps=0), "steps"), (dict(sft_steps=0), "sft_steps"),
                     (dict(lr=0.0), "lr"), (dict(seed=-1), "seed"), (dict(p_slip=1.5), "p_slip")):
        with pytest.raises(ValueError, match=name):
            slip_model(**kw)


def test_chain_start_bad_input():
    from rlnotes.lm.grpo_tasks import chain_start
    for kw, name in ((dict(band=(0.4, 0.2)), "band"), (dict(band=0.3), "band"),
                     (dict(band=(0.1, 1.5)), "band"), (dict(candidates=()), "candidates"),
                     (dict(candidates=(0,)), "candidates"), (dict(candidates="400"), "candidates")):
        with pytest.raises(ValueError, match=name):
            chain_start(**kw)


def test_finetune_callback_snapshots_equal_shorter_runs_and_can_stop():
    task = AdditionTask(n_test=20)
    model = tiny(task)
    snaps = {}

    def keep(step, m):
        if step in (2, 3):
            snaps[step] = {k: v.clone() for k, v in m.state_dict().items()}
        return step == 3

    stopped = finetune(model, task, 10, batch_size=8, seed=0, callback=keep)
    three = finetune(model, task, 3, batch_size=8, seed=0)
    two = finetune(model, task, 2, batch_size=8, seed=0)
    for k, v in three.state_dict().items():
        assert torch.equal(v, snaps[3][k]) and torch.equal(v, stopped.state_dict()[k])
    assert all(torch.equal(v, snaps[2][k]) for k, v in two.state_dict().items())
    with pytest.raises(ValueError, match="callback"):
        finetune(model, task, 2, callback=3)
