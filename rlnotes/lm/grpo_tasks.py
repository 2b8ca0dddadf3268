"""Task variants for the GRPO chapter: the addition task with a way to fail at length.

``StallingAdditionTask`` is the addition task of :class:`rlnotes.lm.tasks.AdditionTask` whose
demonstrations sometimes *stall*: instead of an answer, a run of ``=`` signs then EOS, which is
always wrong and has a length of its own. A policy fine-tuned on them can be wrong in two ways, a
wrong number (as short as a right one) or a stall (longer), which is what the length bias of
per-sequence loss normalisation acts on (Liu et al. 2025).

Defined in: GRPO, Dr. GRPO and DAPO, section Loss aggregation and the length bias.
"""

from __future__ import annotations

import torch

from rlnotes._validate import require_in_range, require_int
from rlnotes.lm.sft import sft_loss, single_thread
from rlnotes.lm.tasks import AdditionTask, pad_completions

__all__ = ["StallingAdditionTask", "finetune"]


class StallingAdditionTask(AdditionTask):
    """Two-digit addition whose demonstrations stall with probability ``p_stall``: ``k`` copies
    of ``=`` (k uniform in 1..``max_stall``) then EOS, instead of the answer (or, with
    ``after=True``, after the answer's digits). The reward is the
    addition task's exact match, so a stall is always wrong; completions may run to
    ``max_new_tokens = max_stall + 2`` tokens.

    Defined in: GRPO, Dr. GRPO and DAPO, section Loss aggregation and the length bias.
    """

    name = "stalling-addition"

    def __init__(self, p_stall: float = 0.3, max_stall: int = 6, n_test: int = 1000, seed: int = 0,
                 after: bool = False):
        super().__init__(digits=2, n_test=n_test, seed=seed)
        self.after = bool(after)
        self.p_stall = require_in_range(p_stall, "p_stall", 0.0, 1.0)
        self.max_stall = require_int(max_stall, "max_stall", minimum=1)
        if self.prompt_len + self.max_stall + 1 > self.max_len:
            raise ValueError(f"max_stall must be at most {self.max_len - self.prompt_len - 1} "
                             f"(the context is {self.max_len} tokens), got {max_stall}")
        self.max_new_tokens = self.max_stall + 2 + (self.digits + 1 if self.after else 0)
        if self.prompt_len + self.max_new_tokens - 1 > self.max_len:
            raise ValueError(f"max_stall must be at most {self.max_len - self.prompt_len - self.digits - 2} "
                             f"with after=True (the context is {self.max_len} tokens), got {max_stall}")

    def config(self) -> dict:
        return dict(super().config(), task=self.name, p_stall=self.p_stall, max_stall=self.max_stall,
                    after=self.after)

    def sft_batch(self, n, generator=None):
        """``n`` training prompts; each completion is the answer or, with probability p_stall,
        a stall."""
        prompts, _, _ = super().sft_batch(n, generator)
        stall = torch.rand(len(prompts), generator=generator) < self.p_stall
        k = torch.randint(1, self.max_stall + 1, (len(prompts),), generator=generator)
        eq, eos = self.tokenizer.stoi["="], self.tokenizer.eos_id
        seqs = []
        for p, s, kk in zip(prompts, stall.tolist(), k.tolist()):
            a, b = self.operands(p)
            if not s:
                seqs.append(self.answer(a, b))
            elif self.after:  # the answer, then the stall: wrong, and longer
                seqs.append(self.answer(a, b)[:-1] + [eq] * kk + [eos])
            else:
                seqs.append([eq] * kk + [eos])
        comp, mask = pad_completions(seqs, eos)
        return prompts, comp, mask


def finetune(model, task, steps, *, batch_size=64, lr=1e-3, seed=0):
    """A copy of ``model`` after ``steps`` steps of supervised fine-tuning (Adam, constant lr) on
    ``task.sft_batch``: how the chapter turns the addition SFT model into one that stalls.

    Defined in: GRPO, Dr. GRPO and DAPO, section Loss aggregation and the length bias.
    """
    import copy

    steps = require_int(steps, "steps", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    gen = torch.Generator().manual_seed(require_int(seed, "seed", minimum=0))
    model = copy.deepcopy(model).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with single_thread(next(model.parameters()).device):
        for _ in range(steps):
            prompts, comp, mask = task.sft_batch(batch_size, gen)
            loss = sft_loss(model, prompts, comp, mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.eval()
