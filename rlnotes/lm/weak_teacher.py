"""A weak teacher for the GRPO chapter: demonstrations that are systematically wrong on a class
of prompts, so that imitation learns the mistake and reinforcement learning with the checker's
reward has something to correct.

``CarryDroppingAdditionTask`` is the two-digit addition task whose teacher *drops the carry*
from the units to the tens with probability ``p_drop`` (``47+35=`` gets ``72`` instead of
``82``); on prompts without a units carry it is always right. ``weak_teacher_model`` is the
addition task's converged SFT model fine-tuned on these demonstrations: its greedy answer on
carry prompts is the teacher's mistake, while it still samples the right answer about
``1 - p_drop`` of the time, the condition under which GRPO can learn it.

It lives in a module of its own so that the cache keys of the models of
:mod:`rlnotes.lm.grpo_tasks`, which hash that module's code, stay as they are.

Defined in: GRPO, section Beyond imitation: a weak teacher.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_in_range, require_int
from rlnotes.lm.tasks import AdditionTask, pad_completions

__all__ = ["CarryDroppingAdditionTask", "weak_teacher_model"]


class CarryDroppingAdditionTask(AdditionTask):
    """Two-digit addition whose demonstrations drop the units carry with probability
    ``p_drop``: where the units digits of a and b add up to 10 or more, the teacher's answer is
    a + b - 10 (the carry into the tens forgotten) with probability ``p_drop``, else a + b. On
    every other prompt it is a + b. The reward stays the addition task's exact match: the teacher
    is weak, the checker is not.

    :meth:`carries` tells which prompts are affected (45% of all pairs), :meth:`split_pairs`
    gives the held-out pairs with and without a carry.

    Defined in: GRPO, section Beyond imitation: a weak teacher.
    """

    name = "carry-dropping-addition"

    def __init__(self, p_drop: float = 0.8, n_test: int = 1000, seed: int = 0):
        super().__init__(digits=2, n_test=n_test, seed=seed)
        self.p_drop = require_in_range(p_drop, "p_drop", 0.0, 1.0)

    def config(self) -> dict:
        return dict(super().config(), task=self.name, p_drop=self.p_drop)

    @staticmethod
    def carry_of(pairs) -> np.ndarray:
        """Which operand pairs (an (N, 2) array) carry from the units into the tens (bool (N,))."""
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must be an (N, 2) array of operands, got shape {pairs.shape}")
        return (pairs[:, 0] % 10 + pairs[:, 1] % 10) >= 10

    def carries(self, prompts) -> torch.Tensor:
        """Which prompts (token-id lists) carry from the units into the tens (bool (B,)).

        Defined in: GRPO, section Beyond imitation: a weak teacher.
        """
        return torch.as_tensor(self.carry_of([self.operands(p) for p in prompts]))

    def split_pairs(self, split: str = "test", carry: bool = True) -> np.ndarray:
        """The pairs of ``split`` with (``carry=True``) or without a units carry.

        Defined in: GRPO, section Beyond imitation: a weak teacher.
        """
        pairs = self.pairs(split)
        return pairs[self.carry_of(pairs) == bool(carry)]

    def sft_batch(self, n, generator=None):
        """``n`` training prompts with the weak teacher's answers."""
        pairs = self._draw(n, generator, "train")
        drop = (torch.rand(len(pairs), generator=generator) < self.p_drop).numpy()
        carry = self.carry_of(pairs)
        answers = [self.tokenizer.encode(str(int(a) + int(b) - (10 if c and d else 0)), bos=False, eos=True)
                   for (a, b), c, d in zip(pairs, carry, drop)]
        comp, mask = pad_completions(answers, self.tokenizer.eos_id)
        return self.prompts_of(pairs), comp, mask


class _Subset(AdditionTask):
    """The addition task restricted to some held-out pairs (for evaluation only)."""

    def __init__(self, base: AdditionTask, test_pairs):
        self.__dict__.update(base.__dict__)
        self.test_pairs = np.asarray(test_pairs)


def carry_split_tasks(task: CarryDroppingAdditionTask):
    """Two views of ``task`` for evaluation, ``(carry, no_carry)``: the same task whose held-out
    split holds only the held-out pairs with (without) a units carry, for
    :func:`rlnotes.lm.sft.accuracy` and :func:`rlnotes.lm.evaluation.pass_at_1`.

    Defined in: GRPO, section Beyond imitation: a weak teacher.
    """
    if not isinstance(task, CarryDroppingAdditionTask):
        raise ValueError(f"task must be a CarryDroppingAdditionTask, got {type(task).__name__}")
    return _Subset(task, task.split_pairs("test", True)), _Subset(task, task.split_pairs("test", False))


def weak_teacher_model(p_drop=0.8, steps=200, *, sft_steps=1200, lr=1e-3, seed=0):
    """The starting point of the GRPO chapter's section on learning beyond imitation: the
    addition task's converged SFT model (``sft_steps`` steps) fine-tuned for ``steps`` steps
    (:func:`rlnotes.lm.grpo_tasks.finetune`, Adam at ``lr``) on
    :class:`CarryDroppingAdditionTask`'s demonstrations, so that on carry prompts it samples the
    teacher's mistake about ``p_drop`` of the time (and decodes it greedily when ``p_drop`` >
    1/2). From the lab's cache when it is there (rlnotes.lm.cache), else trained now. Returns
    ``(model, task)``.

    Defined in: GRPO, section Beyond imitation: a weak teacher.
    """
    import sys

    from rlnotes.lm.grpo_tasks import _finetuned, _state, finetune

    steps = require_int(steps, "steps", minimum=1)
    sft_steps = require_int(sft_steps, "sft_steps", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    seed = require_int(seed, "seed", minimum=0)
    task = CarryDroppingAdditionTask(p_drop)
    model, _ = _finetuned("ft-carry-dropping-addition", task, seed, dict(steps=steps, lr=lr),
                          lambda m: {"state": _state(finetune(m, task, steps, lr=lr, seed=seed))},
                          sft_steps, code=(sys.modules[__name__],))
    return model, task


__all__ += ["carry_split_tasks"]
