r"""The preference task of the RLHF and DPO chapters, with a gold reward that punishes repetition
whatever a word's sentiment.

``rlnotes.lm.PreferenceTask`` is this class. It keeps everything of
:class:`rlnotes.lm.tasks.PreferenceTask` (prompts, demonstrations, vocabulary, sentiments: the
SFT models and preference pairs are the same) and replaces its gold reward. The old one,
:math:`\sum_v o_v\,(n_v - \chi n_v(n_v-1)/2)`, rewarded many copies of a *negative* word
(o_v h(n_v) > 0 once h(n_v) < 0: eight copies of the worst word scored +20). Here each copy of a
word after the first costs :math:`\chi |o_v|` per earlier copy, whatever the sign of o_v:

.. math::  R^\star(x, y) = \sum_v \Big(o_v n_v - \chi |o_v| \frac{n_v (n_v - 1)}{2}\Big)
               + \zeta\, |\{v \in x : n_v > 0\}| - n_{bad}.

For a positive word this is the old reward (a second copy adds nothing, a third subtracts); for
a negative word every further copy costs more (chi is ``kappa``, zeta is ``rho`` in the code).
The class lives in its own module so that the
code of :mod:`rlnotes.lm.tasks`, part of the cache key of every cached SFT model (the GRPO
chapters' addition models included), is unchanged.

Defined in: Reinforcement learning from human feedback, section The tasks.
"""

from __future__ import annotations

import torch

from rlnotes.lm import tasks as _tasks

__all__ = ["PreferenceTask"]


class PreferenceTask(_tasks.PreferenceTask):
    r"""Short "reviews" over a vocabulary of 16 words with a hidden gold reward (see the module
    doc for the formula): the constructor, prompts, demonstrations and ``word_counts`` are those of
    :class:`rlnotes.lm.tasks.PreferenceTask`; ``reward`` punishes repetition whatever the sign of
    a word's sentiment, and ``gold_optimum`` gives the best completion of each prompt exactly.

    Defined in: Reinforcement learning from human feedback, section The tasks.
    """

    def _word_values(self, prompts):
        """(B, 16, max_new_tokens + 1) gold value of c = 0 .. max_new_tokens copies of each word,
        prompt bonus included (the reward is a sum of these over the words, minus the non-words)."""
        c = torch.arange(self.max_new_tokens + 1, dtype=torch.float32)
        s = self.sentiment[:, None]
        value = s * c - self.kappa * s.abs() * (c * (c - 1) / 2)          # (16, C)
        idx = torch.tensor([list(p[1:4]) for p in prompts]) - int(self.word_ids[0])
        in_prompt = torch.zeros((len(prompts), len(self.words))).scatter_(1, idx, 1.0)
        return value[None] + self.rho * in_prompt[:, :, None] * (c > 0).float()

    def reward(self, prompts, completions, mask):
        """The gold reward R(x, y) of the module doc, shape (B,) float32 (on the CPU).

        Defined in: Reinforcement learning from human feedback, section The tasks.
        """
        _tasks._check_batch(prompts, completions, mask)
        counts, bad = self.word_counts(completions, mask)
        s = self.sentiment
        in_prompt = torch.zeros_like(counts)
        for i, p in enumerate(prompts):
            for t in p[1:4]:
                in_prompt[i, t - int(self.word_ids[0])] = 1.0
        mentioned = ((counts > 0).float() * in_prompt).sum(1)
        pairs = counts * (counts - 1) / 2
        return counts @ s - self.kappa * (pairs @ s.abs()) + self.rho * mentioned - bad

    def gold_optimum(self, prompts):
        """The largest gold reward of any completion a policy can write for each prompt, and the
        word counts that reach it: ``(best (B,), counts (B, 16))``. A policy writes at most
        ``max_new_tokens`` tokens: up to ``max_words`` words then EOS, or ``max_new_tokens``
        words cut by the length limit (the gold reward scores those too), so the optimum is over
        completions of up to ``max_new_tokens`` words. Exact: the reward is a sum over words of a
        value of each word's count, so a knapsack over the words (dynamic programming on the
        number of words used) finds the maximum; ties keep the fewest words.

        Defined in: Reinforcement learning from human feedback, section The tasks.
        """
        if not isinstance(prompts, (list, tuple)) or len(prompts) == 0:
            raise ValueError("prompts must be a non-empty list of token-id lists")
        if any(len(p) != self.prompt_len for p in prompts):
            raise ValueError(f"prompts must each hold {self.prompt_len} tokens (BOS, three words, '>')")
        lo, hi = int(self.word_ids[0]), int(self.word_ids[-1])
        if any(not lo <= t <= hi for p in prompts for t in p[1:4]):
            raise ValueError("prompts must hold three words of the task's vocabulary")
        vals = self._word_values(prompts)                                  # (B, W, C)
        B, W, C = vals.shape
        K = self.max_new_tokens                                           # words a policy can write
        neg = torch.full((B, K + 1), -float("inf"))
        best = neg.clone()
        best[:, 0] = 0.0                                                   # best[b, k]: k words used
        choice = torch.zeros((W, B, K + 1), dtype=torch.long)
        for v in range(W):
            new, arg = neg.clone(), torch.zeros((B, K + 1), dtype=torch.long)
            for c in range(C):                                             # c copies of word v
                cand = torch.cat([neg[:, :c], best[:, :K + 1 - c] + vals[:, v, c:c + 1]], dim=1)
                better = cand > new + 1e-6                                 # ties: fewer copies
                new = torch.where(better, cand, new)
                arg = torch.where(better, torch.full_like(arg, c), arg)
            best, choice[v] = new, arg
        k = best.argmax(1)
        top = best.gather(1, k[:, None]).squeeze(1)
        counts = torch.zeros((B, W))
        for v in reversed(range(W)):                                       # walk the choices back
            c = choice[v].gather(1, k[:, None]).squeeze(1)
            counts[:, v] = c.float()
            k = k - c
        return top, counts
