"""Step labels without people, and rule checkers that can be gamed: the language-model lab's
pieces of the sections on Math-Shepherd's Monte Carlo labels (Wang et al. 2024) and on
DeepSeek-R1's rule-based rewards (DeepSeek-AI 2025).

- :func:`mc_step_labels`: Math-Shepherd's labels of each step of a completion, from rollouts of
  the policy that continue it; :func:`step_label_summary` compares them with the true steps;
- :func:`format_reward`, :func:`loose_reward`: R1's format reward for the chain task's answers,
  and a deliberately loose accuracy checker (the right result anywhere in the completion);
- :func:`final_results`, :func:`hedge_completions`: the result a completion ends with, and
  completions that list several candidate results, the cheapest way
  to be paid by a loose checker without being right more often;
- :func:`with_checker`: a task whose reward is another checker's, to train GRPO against the
  loose checker (``benchmarks/bench_grpo_hacking.py``).

Defined in: Dr. GRPO, DAPO and process supervision, sections Step labels from rollouts and
Rule-based rewards and how they are gamed.
"""

from __future__ import annotations

import re

import torch

from rlnotes._validate import require_in_range, require_int
from rlnotes.lm.generation import decode
from rlnotes.lm.tasks import _check_batch, pad_completions

__all__ = ["mc_step_labels", "step_label_summary", "format_reward", "loose_reward", "final_results",
           "hedge_completions", "with_checker"]


def _kept(completions, mask):
    return [[t for t, keep in zip(c, m) if keep] for c, m in zip(completions.tolist(), mask.tolist())]


def _check_labels(prompts, completions, mask, step_ends, n_rollouts, temperature, generator):
    _check_batch(prompts, completions, mask)
    if not isinstance(step_ends, torch.Tensor) or step_ends.ndim != 2 \
            or step_ends.shape[0] != len(prompts) or step_ends.dtype.is_floating_point:
        got = tuple(step_ends.shape) if isinstance(step_ends, torch.Tensor) else type(step_ends).__name__
        raise ValueError(f"step_ends must be a ({len(prompts)}, S) integer tensor, got {got}")
    require_int(n_rollouts, "n_rollouts", minimum=1)
    require_in_range(temperature, "temperature", 0.0, float("inf"), low_open=True)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    lengths = mask.sum(1, keepdim=True).clamp(min=1)
    if (step_ends < 0).any() or (step_ends >= lengths).any():
        raise ValueError("step_ends must index tokens of each completion (0 <= end < its length)")


def mc_step_labels(model, task, prompts, completions, mask, step_ends, n_rollouts=8, *,
                   temperature=1.0, generator=None):
    r"""Math-Shepherd's Monte Carlo step labels (Wang et al. 2024): for step j of
    completion i, sample n_roll continuations of the prefix that ends with that step (prompt
    and completion up to ``step_ends[i, j]``) from ``model``, and score each finished
    completion with the task's outcome reward r(x, y):

    .. math::  \text{SE}_{i,j} = \frac{1}{n_\text{roll}} \sum_{n=1}^{n_\text{roll}}
               r(x_i, y^{(n)}_{i,j}), \qquad \text{HE}_{i,j} = \max_n r(x_i, y^{(n)}_{i,j})

    the soft label (the share of rollouts that reach the right final answer) and the hard
    label (whether any does). A prefix that already ends (EOS, or the task's token budget) is
    its own completion: its labels are its reward. The labels say whether a step can still
    *lead* to the right answer, which is not the same as whether the step is right.

    ===========  ================  ==================================================
    argument     shape / type      meaning
    ===========  ================  ==================================================
    model        TinyGPT           the policy that completes the prefixes
    task         verifiable task   ``reward``, ``max_new_tokens``, ``tokenizer.eos_id``
    prompts      list of B lists   token ids of the prompts x_i
    completions  (B, L) long       the completions y_i whose steps are labelled
    mask         (B, L)            1 on the tokens of y_i (EOS included)
    step_ends    (B, S) long       index in y_i of the last token of each step
    n_rollouts   int >= 1          n_roll, rollouts per step
    returns      (SE, HE)          two (B, S) float tensors in [0, 1]
    ===========  ================  ==================================================

    Defined in: Dr. GRPO, DAPO and process supervision, section Step labels from rollouts.
    """
    _check_labels(prompts, completions, mask, step_ends, n_rollouts, temperature, generator)
    eos, budget, n_roll = task.tokenizer.eos_id, task.max_new_tokens, int(n_rollouts)
    soft = torch.zeros(step_ends.shape)
    jobs = {}  # tokens left -> [(i, j, prefix)]
    for i, y in enumerate(_kept(completions, mask)):
        for j, end in enumerate(step_ends[i].tolist()):
            prefix = y[: end + 1]
            if prefix[-1:] == [eos] or len(prefix) >= budget:  # finished: its own rollout
                comp, m = pad_completions([prefix], eos)
                soft[i, j] = float(task.reward([prompts[i]], comp, m)[0])
            else:
                jobs.setdefault(budget - len(prefix), []).append((i, j, prefix))
    for left, items in sorted(jobs.items()):  # one batch per number of tokens left
        xs = [list(prompts[i]) + prefix for i, _, prefix in items for _ in range(n_roll)]
        with torch.no_grad():
            cont, _, cmask = decode(model, xs, left, temperature=temperature, eos_id=eos,
                                    generator=generator)
        tails = _kept(cont.cpu(), cmask.cpu())
        full = [prefix + tails[k * n_roll + n] for k, (_, _, prefix) in enumerate(items)
                for n in range(n_roll)]
        comp, m = pad_completions(full, eos)
        x_full = [prompts[i] for i, _, _ in items for _ in range(n_roll)]
        r = task.reward(x_full, comp, m).view(len(items), n_roll).mean(1)  # SE
        for (i, j, _), value in zip(items, r.tolist()):
            soft[i, j] = value
    return soft, (soft > 0).float()  # (SE, HE)


def step_label_summary(soft, hard, step_right, outcome):
    """How Monte Carlo labels of a two-step task compare with the true steps: a dict of floats.

    ``soft``, ``hard``: (B, 2) labels from :func:`mc_step_labels`; ``step_right``: (B, 2) 0/1
    truth of each step (step 2 judged against the completion's own step 1, as the chain task's
    ``step_rewards`` does); ``outcome``: (B,) 0/1 outcome reward of the completions. Keys:
    ``agree`` (share of first steps whose hard label equals the truth), ``false_pos`` (share of
    wrong first steps labelled 1), ``false_neg`` (share of right first steps labelled 0),
    ``soft_right``, ``soft_wrong`` (mean soft label of right and of wrong first steps),
    ``right_after_wrong`` (how many right second steps follow a wrong first one),
    ``right_after_wrong_labelled`` (how many of those have hard label 1),
    ``last_is_outcome`` (1.0 when every second step's hard label is the outcome), and
    ``outcome_if_right``, ``outcome_if_wrong`` (the outcome's mean after a right, a wrong first
    step: how much the final answer depends on the first step). NaN where a share is empty.

    Defined in: Dr. GRPO, DAPO and process supervision, section Step labels from rollouts.
    """
    tensors = dict(soft=soft, hard=hard, step_right=step_right)
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or t.ndim != 2 or t.shape[1] != 2:
            raise ValueError(f"{name} must be a (B, 2) tensor, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if not (soft.shape == hard.shape == step_right.shape):
        raise ValueError("soft, hard and step_right must have one shape (B, 2)")
    if not isinstance(outcome, torch.Tensor) or outcome.shape != soft.shape[:1]:
        raise ValueError(f"outcome must be a ({soft.shape[0]},) tensor")
    right = step_right[:, 0].bool()
    hard1 = hard[:, 0].bool()

    def mean(x):
        return float(x.float().mean()) if x.numel() else float("nan")

    after_wrong = ~right & step_right[:, 1].bool()
    return dict(agree=mean(hard1 == right), false_pos=mean(hard1[~right]),
                false_neg=mean(~hard1[right]), soft_right=mean(soft[right, 0]),
                soft_wrong=mean(soft[~right, 0]), right_after_wrong=float(after_wrong.sum()),
                right_after_wrong_labelled=float(hard[after_wrong, 1].sum()),
                last_is_outcome=float(bool((hard[:, 1] == outcome.to(hard.dtype)).all())),
                outcome_if_right=mean(outcome[right]), outcome_if_wrong=mean(outcome[~right]))


_CHAIN = re.compile(r"[0-9]+=[0-9]+")


def _texts(task, prompts, completions, mask):
    _check_batch(prompts, completions, mask)
    eos = task.tokenizer.eos_id
    out = []
    for y in _kept(completions, mask):
        ended = len(y) > 0 and y[-1] == eos
        out.append((task.tokenizer.decode([t for t in y if t != eos]), ended))
    return out


def format_reward(task, prompts, completions, mask):
    """R1's format reward for the chain task's answers (DeepSeek-AI 2025): 1.0 where the
    completion has the form ``<digits>=<digits>`` then EOS (a worked step, then the result),
    else 0.0, whatever the numbers are. Shape (B,), like ``task.reward``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Rule-based rewards and how they
    are gamed.
    """
    return torch.tensor([1.0 if ended and _CHAIN.fullmatch(text) else 0.0
                         for text, ended in _texts(task, prompts, completions, mask)])


def loose_reward(task, prompts, completions, mask):
    """A deliberately loose accuracy checker: 1.0 where the right result (``task.operands``
    summed) appears as a number *anywhere* in the completion, with or without EOS, else 0.0.
    It accepts every completion that ``task.reward`` accepts, and more. Shape (B,).

    Defined in: Dr. GRPO, DAPO and process supervision, section Rule-based rewards and how they
    are gamed.
    """
    out = []
    for x, (text, _) in zip(prompts, _texts(task, prompts, completions, mask)):
        target = str(sum(task.operands(x)))
        out.append(1.0 if target in re.findall(r"[0-9]+", text) else 0.0)
    return torch.tensor(out)


def final_results(task, completions, mask):
    """The result each completion ends with: the number after its last ``=`` (or its whole text
    when it has none), as an int, or None when that is not a number. A list of B values.

    Defined in: Dr. GRPO, DAPO and process supervision, section Rule-based rewards and how they
    are gamed.
    """
    if not isinstance(completions, torch.Tensor) or completions.ndim != 2:
        raise ValueError("completions must be a (B, L) tensor")
    prompts = [[task.tokenizer.bos_id]] * completions.shape[0]
    out = []
    for text, _ in _texts(task, prompts, completions, mask):
        last = text.rsplit("=", 1)[-1]
        out.append(int(last) if last.isdigit() else None)
    return out


def hedge_completions(task, results, max_tokens=None):
    """Completions that list several candidate results: row i is ``results[i]`` joined by
    ``=`` (``"54=55"``), then EOS, cut to ``max_tokens`` tokens (default the task's budget;
    a cut row has no EOS). ``results`` is a list of B non-empty lists of non-negative ints.
    Returns ``(completions, mask)``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Rule-based rewards and how they
    are gamed.
    """
    if not isinstance(results, (list, tuple)) or len(results) == 0:
        raise ValueError("results must be a non-empty list of lists of candidate results")
    max_tokens = task.max_new_tokens if max_tokens is None else require_int(max_tokens, "max_tokens",
                                                                            minimum=1)
    rows = []
    for row in results:
        if not isinstance(row, (list, tuple)) or len(row) == 0 \
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row):
            raise ValueError(f"results must hold non-empty lists of non-negative ints, got {row!r}")
        ids = task.tokenizer.encode("=".join(str(v) for v in row), bos=False, eos=True)
        rows.append(ids[:max_tokens])
    return pad_completions(rows, task.tokenizer.eos_id)


class _Checked:
    """A task whose ``reward`` is ``checker(task, prompts, completions, mask)``; every other
    attribute is the wrapped task's."""

    def __init__(self, task, checker):
        self.task, self.checker = task, checker

    def reward(self, prompts, completions, mask):
        return self.checker(self.task, prompts, completions, mask)

    def __getattr__(self, name):
        if name in ("task", "checker"):  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.task, name)

    def __repr__(self):
        return f"with_checker({self.task!r}, {getattr(self.checker, '__name__', self.checker)})"


def with_checker(task, checker):
    """``task`` with its reward replaced by ``checker``: the returned task's ``reward(prompts,
    completions, mask)`` is ``checker(task, prompts, completions, mask)`` (for example
    :func:`loose_reward` or :func:`format_reward`), and every other attribute (prompts, splits,
    tokenizer, token budget, ``step_rewards``) is ``task``'s own. ``train_grpo`` then trains
    against that checker, and ``pass_at_1`` measures it; ``task`` itself keeps its strict
    reward, to measure what the policy really gets right.

    Defined in: Dr. GRPO, DAPO and process supervision, section Rule-based rewards and how they
    are gamed.
    """
    if not all(callable(getattr(task, name, None)) for name in ("reward", "sample_prompts")) \
            or not hasattr(task, "max_new_tokens"):
        raise ValueError(f"task must be a verifiable task (reward, sample_prompts, "
                         f"max_new_tokens), got {type(task).__name__}")
    if not callable(checker) or isinstance(checker, type):
        raise ValueError(f"checker must be a function checker(task, prompts, completions, mask) "
                         f"returning a (B,) tensor of rewards, got {checker!r}")
    return _Checked(task, checker)
