"""Tests of rlnotes.lm.process: Math-Shepherd's Monte Carlo step labels, R1's format reward, a
loose checker and hedging completions."""

import pytest
import torch

from rlnotes.lm.grpo_tasks import ChainAdditionTask
from rlnotes.lm.model import TinyGPT
from rlnotes.lm.process import format_reward, hedge_completions, loose_reward, mc_step_labels, with_checker
from rlnotes.lm.tasks import AdditionTask, pad_completions


@pytest.fixture(scope="module")
def chain():
    task = ChainAdditionTask()
    model = TinyGPT(task.tokenizer.vocab_size, task.max_len, n_layers=1, n_heads=2, width=16, seed=0).eval()
    return task, model


def _batch(task, texts, prompt=(12, 35, 7), eos=True):
    comp, mask = pad_completions([task.tokenizer.encode(t, bos=False, eos=eos) for t in texts],
                                 task.tokenizer.eos_id)
    return [task.prompt(*prompt)] * len(texts), comp, mask


def test_mc_labels_of_finished_steps_are_the_reward(chain):
    task, model = chain
    x, y, m = _batch(task, ["47=54", "46=53", "47=55", "54=54"])
    _, ends = task.step_rewards(x, y, m)
    soft, hard = mc_step_labels(model, task, x, y, m, ends, 5, generator=torch.Generator().manual_seed(0))
    assert soft.shape == hard.shape == (4, 2)
    assert torch.equal(soft[:, 1], task.reward(x, y, m))  # the last step ends the completion: its reward
    assert torch.equal(hard, (soft > 0).float())
    assert ((soft[:, 0] * 5).round() == soft[:, 0] * 5).all()  # a share of 5 rollouts
    again, _ = mc_step_labels(model, task, x, y, m, ends, 5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(soft, again)  # seeded: the same labels


def test_mc_labels_count_rollouts_that_reach_the_answer(chain):
    task, model = chain
    # a prefix of the whole right answer without its EOS: a rollout is right iff it stops at once
    x, y, m = _batch(task, ["47=54"], eos=False)
    ends = torch.tensor([[4]])
    soft, _ = mc_step_labels(model, task, x, y, m, ends, 400, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(torch.tensor([x[0] + y[0].tolist()]))[0, -1]
    p_eos = float(torch.softmax(logits, -1)[task.tokenizer.eos_id])
    assert abs(float(soft[0, 0]) - p_eos) < 4 * (p_eos * (1 - p_eos) / 400) ** 0.5 + 1e-3


def test_mc_labels_bad_input(chain):
    task, model = chain
    x, y, m = _batch(task, ["47=54", "46=53"])
    _, ends = task.step_rewards(x, y, m)
    for kwargs, match in ((dict(step_ends=ends.float()), "step_ends"), (dict(step_ends=ends[:1]), "step_ends"),
                          (dict(step_ends=ends + 10), "step_ends"), (dict(n_rollouts=0), "n_rollouts"),
                          (dict(generator=0), "generator"), (dict(temperature=0.0), "temperature")):
        args = dict(step_ends=ends, n_rollouts=2) | kwargs
        with pytest.raises(ValueError, match=match):
            mc_step_labels(model, task, x, y, m, args.pop("step_ends"), args.pop("n_rollouts"), **args)
    with pytest.raises(ValueError, match="completions"):
        mc_step_labels(model, task, x[:1], y, m, ends, 2)


def test_format_and_loose_rewards():
    task = ChainAdditionTask()
    texts = ["47=54", "54", "53=54=55", "54=47", "47=55", "470=54"]
    x, y, m = _batch(task, texts)
    assert format_reward(task, x, y, m).tolist() == [1, 0, 0, 1, 1, 1]
    assert loose_reward(task, x, y, m).tolist() == [1, 1, 1, 1, 0, 1]
    assert task.reward(x, y, m).tolist() == [1, 1, 0, 0, 0, 1]  # the outcome reward takes a bare result
    x, y, m = _batch(task, ["47=54", "1547"], eos=False)  # no EOS: loose still pays; not a substring
    assert loose_reward(task, x, y, m).tolist() == [1, 0] and format_reward(task, x, y, m).tolist() == [0, 0]
    assert (loose_reward(task, x, y, m) >= task.reward(x, y, m)).all()
    add = AdditionTask()
    comp, mask = pad_completions([add.tokenizer.encode("46=47", bos=False, eos=True)], add.tokenizer.eos_id)
    assert loose_reward(add, [add.prompt(12, 35)], comp, mask).tolist() == [1.0]
    for f in (format_reward, loose_reward):
        with pytest.raises(ValueError, match="prompts"):
            f(task, [], y, m)
        with pytest.raises(ValueError, match="completions"):
            f(task, x[:1], y, m)
        with pytest.raises(ValueError, match="mask"):
            f(task, x, y, m[:, :1])


def test_hedge_completions():
    task = ChainAdditionTask()
    comp, mask = hedge_completions(task, [[54, 55], [54], [153, 154, 155]])
    tok = task.tokenizer
    assert tok.decode(comp[0]) == "54=55" and mask[0].sum() == 6 and comp[0, 5] == tok.eos_id
    assert tok.decode(comp[1]) == "54" and mask[1].sum() == 3
    assert mask[2].sum() == task.max_new_tokens and tok.eos_id not in comp[2, :8].tolist()  # cut: no EOS
    x = [task.prompt(12, 35, 7)] * 3
    assert loose_reward(task, x, comp, mask).tolist() == [1, 1, 0]
    assert task.reward(x, comp, mask).tolist() == [0, 1, 0]
    for bad, match in (([], "results"), ([[]], "results"), ([[1, -2]], "results"), ([[1.5]], "results")):
        with pytest.raises(ValueError, match=match):
            hedge_completions(task, bad)
    with pytest.raises(ValueError, match="max_tokens"):
        hedge_completions(task, [[1]], max_tokens=0)


def test_step_label_summary():
    from rlnotes.lm.process import step_label_summary
    soft = torch.tensor([[1.0, 1.0], [0.5, 0.0], [0.25, 0.0], [0.0, 0.0]])
    hard = (soft > 0).float()
    truth = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    outcome = torch.tensor([1.0, 0.0, 0.0, 0.0])
    s = step_label_summary(soft, hard, truth, outcome)
    assert s["agree"] == 0.5 and s["false_pos"] == 1.0 and abs(s["false_neg"] - 1 / 3) < 1e-6
    assert abs(s["soft_right"] - 1.25 / 3) < 1e-6 and s["soft_wrong"] == 0.5
    assert s["right_after_wrong"] == 1 and s["right_after_wrong_labelled"] == 0 and s["last_is_outcome"] == 1.0
    assert abs(s["outcome_if_right"] - 1 / 3) < 1e-6 and s["outcome_if_wrong"] == 0.0
    assert step_label_summary(soft, hard, truth, 1 - outcome)["last_is_outcome"] == 0.0
    for args, match in (((soft[:, :1], hard, truth, outcome), "soft"), ((soft, hard[:2], truth, outcome), "one shape"),
                        ((soft, hard, truth, outcome[:2]), "outcome"), ((soft, hard, "x", outcome), "step_right")):
        with pytest.raises(ValueError, match=match):
            step_label_summary(*args)


def test_final_results():
    from rlnotes.lm.process import final_results
    task = ChainAdditionTask()
    _, y, m = _batch(task, ["47=54", "54", "47=", "=="])
    assert final_results(task, y, m) == [54, 54, None, None]
    for bad in ("x", torch.zeros(3)):
        with pytest.raises(ValueError, match="completions"):
            final_results(task, bad, m)
    with pytest.raises(ValueError, match="mask"):
        final_results(task, y, m[:, :1])


def test_with_checker_swaps_only_the_reward():
    task = ChainAdditionTask()
    x, y, m = _batch(task, ["47=54", "54=47", "53=54=55", "47=55"])
    loose = with_checker(task, loose_reward)
    assert loose.reward(x, y, m).tolist() == loose_reward(task, x, y, m).tolist() == [1, 1, 1, 0]
    assert task.reward(x, y, m).tolist() == [1, 0, 0, 0]  # the task keeps its strict reward
    assert loose.max_new_tokens == task.max_new_tokens and loose.tokenizer is task.tokenizer
    assert loose.pairs("test") is task.pairs("test")
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    assert loose.sample_prompts(4, g1) == task.sample_prompts(4, g2)  # the same prompts
    assert torch.equal(loose.step_rewards(x, y, m)[0], task.step_rewards(x, y, m)[0])
    fmt = with_checker(task, format_reward)
    assert fmt.reward(x, y, m).tolist() == [1, 1, 0, 1]


def test_with_checker_trains(chain):
    from rlnotes.grpo import train_grpo

    task, model = chain
    calls = []

    def checker(t, prompts, completions, mask):
        calls.append(len(prompts))
        return loose_reward(t, prompts, completions, mask)

    _, h = train_grpo(model, with_checker(task, checker), 1, n_prompts=2, group_size=2, eval_every=1,
                      eval_greedy=False, seed=0)
    assert calls[:2] == [len(task.pairs("test")), 4]  # the held-out evaluation, then the step's samples
    assert len(h["reward"]) == 1


@pytest.mark.parametrize("task, checker, name", [
    (None, loose_reward, "task"),
    (object(), loose_reward, "task"),
    ("chain", None, "checker"),
    ("chain", "loose", "checker"),
    ("chain", ChainAdditionTask, "checker"),
])
def test_with_checker_bad_input(task, checker, name):
    task = ChainAdditionTask() if task == "chain" else task
    with pytest.raises(ValueError, match=name):
        with_checker(task, checker)
