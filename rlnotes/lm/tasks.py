"""Tasks with a known gold answer, so that every claim about learning can be checked exactly.

A task has a ``tokenizer``, the model sizes it needs (``max_len``, ``max_new_tokens``) and:

- ``sample_prompts(n, generator, split="train") -> list of n token-id lists``;
- ``sft_batch(n, generator) -> (prompts, completions, mask)``: demonstrations for supervised
  fine-tuning, completions right-padded with EOS, mask 1 up to and including the EOS;
- ``reward(prompts, completions, mask) -> (B,) float``: the gold reward of each completion.

``AdditionTask`` has a verifiable reward (exact match), for the GRPO chapter. ``PreferenceTask``
has a hidden gold reward that readers and reward models only see through noisy pairwise
preferences, for the RLHF and DPO chapters.

Defined in: Reinforcement learning from human feedback, section The tasks.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_int, require_real
from rlnotes.lm.tokenizer import CharTokenizer

__all__ = ["AdditionTask", "PreferenceTask", "pad_completions"]


def pad_completions(seqs, pad_id: int, length: int | None = None):
    """Right-pad token-id lists to a (B, L) long tensor; returns ``(completions, mask)``.

    Defined in: Reinforcement learning from human feedback, section The tasks.
    """
    L = max(len(s) for s in seqs) if length is None else length
    out = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    return out, mask


def _check_n(n) -> int:
    return require_int(n, "n", minimum=1)


def _check_batch(prompts, completions, mask):
    if not isinstance(prompts, (list, tuple)) or len(prompts) == 0:
        raise ValueError("prompts must be a non-empty list of token-id lists")
    if not isinstance(completions, torch.Tensor) or completions.ndim != 2 \
            or completions.shape[0] != len(prompts):
        raise ValueError(f"completions must be a ({len(prompts)}, L) tensor, one row per prompt, got "
                         f"{tuple(completions.shape) if isinstance(completions, torch.Tensor) else type(completions).__name__}")
    if not isinstance(mask, torch.Tensor) or mask.shape != completions.shape:
        raise ValueError(f"mask must be a tensor of completions' shape {tuple(completions.shape)}")


class AdditionTask:
    """Addition of two ``digits``-digit numbers: prompt ``"12+35="``, answer ``"47"`` then EOS.

    Every pair (a, b) with a, b in [10^(digits-1), 10^digits) is a prompt; ``n_test`` of them
    (chosen by ``seed``) are held out and never trained on. The reward is 1 for an exact match
    (the answer's digits, then EOS), else 0. With digits=2 this is the task on which
    ``benchmarks/bench_grpo_step.py`` races TRL: 8,100 pairs, 1,000 held out, 15 tokens.

    ``extra_tokens`` > 0 lets a completion run that many tokens past the longest answer before
    it is cut (still rewarded 0 without its EOS): room for wrong answers to run long, for
    experiments on length bias (the loss aggregation of Dr. GRPO and DAPO).

    Defined in: Reinforcement learning from human feedback, section The tasks.
    """

    name = "addition"

    def __init__(self, digits: int = 2, n_test: int = 1000, seed: int = 0, extra_tokens: int = 0):
        self.digits = require_int(digits, "digits", minimum=1)
        if digits > 4:
            raise ValueError(f"digits must be at most 4 (the context grows with it), got {digits}")
        self.seed = require_int(seed, "seed", minimum=0)
        self.tokenizer = CharTokenizer("0123456789+=")
        lo, hi = 10 ** (digits - 1), 10 ** digits
        a, b = np.meshgrid(np.arange(lo, hi), np.arange(lo, hi), indexing="ij")
        pairs = np.stack([a.ravel(), b.ravel()], axis=1)
        self.n_test = require_int(n_test, "n_test", minimum=1)
        if n_test >= len(pairs):
            raise ValueError(f"n_test must be below the number of pairs {len(pairs)}, got {n_test}")
        order = np.random.default_rng(seed).permutation(len(pairs))
        self.test_pairs = pairs[order[:n_test]]
        self.train_pairs = pairs[order[n_test:]]
        self.prompt_len = 1 + 2 * digits + 2  # BOS a + b =
        self.extra_tokens = require_int(extra_tokens, "extra_tokens", minimum=0)
        # up to digits + 1 answer digits, then EOS (and extra_tokens more if asked)
        self.max_new_tokens = digits + 2 + self.extra_tokens
        self.max_len = max(16, self.prompt_len + self.max_new_tokens - 1)

    def config(self) -> dict:
        return dict(task=self.name, digits=self.digits, n_test=self.n_test, seed=self.seed,
                    extra_tokens=self.extra_tokens)

    def pairs(self, split: str = "train") -> np.ndarray:
        """The (N, 2) operand pairs of ``split`` ("train" or "test")."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return self.train_pairs if split == "train" else self.test_pairs

    def prompt(self, a: int, b: int) -> list[int]:
        return self.tokenizer.encode(f"{a}+{b}=")

    def prompts_of(self, pairs) -> list[list[int]]:
        return [self.prompt(int(a), int(b)) for a, b in pairs]

    def answer(self, a: int, b: int) -> list[int]:
        return self.tokenizer.encode(str(a + b), bos=False, eos=True)

    def _draw(self, n, generator, split):
        pairs = self.pairs(split)
        idx = torch.randint(len(pairs), (_check_n(n),), generator=generator).numpy()
        return pairs[idx]

    def sample_prompts(self, n, generator=None, split: str = "train"):
        """``n`` prompts drawn uniformly (with replacement) from ``split``."""
        return self.prompts_of(self._draw(n, generator, split))

    def sft_batch(self, n, generator=None):
        """``n`` training prompts with their correct answers as completions."""
        pairs = self._draw(n, generator, "train")
        comp, mask = pad_completions([self.answer(int(a), int(b)) for a, b in pairs],
                                     self.tokenizer.eos_id)
        return self.prompts_of(pairs), comp, mask

    def operands(self, prompt) -> tuple[int, int]:
        text = self.tokenizer.decode(prompt)
        a, b = text.rstrip("=").split("+")
        return int(a), int(b)

    def reward(self, prompts, completions, mask):
        """1.0 where the completion is the sum's digits then EOS, else 0.0 (shape (B,))."""
        _check_batch(prompts, completions, mask)
        comp = completions.tolist()
        m = mask.tolist()
        out = []
        for p, c, mk in zip(prompts, comp, m):
            a, b = self.operands(p)
            got = [t for t, keep in zip(c, mk) if keep]
            out.append(1.0 if got == self.answer(a, b) else 0.0)
        return torch.tensor(out, dtype=torch.float32)


class PreferenceTask:
    r"""Short "reviews" over a vocabulary of 16 words, with a hidden gold reward.

    A prompt is BOS, three words and ``>``; a demonstration is 2 to ``max_words`` words then
    EOS, and a policy may write up to ``max_new_tokens`` tokens (a completion cut by the limit
    holds ``max_new_tokens`` words and no EOS). Each word v has a hidden sentiment o_v (evenly
    spaced in [-1, 1], shuffled by ``seed``). This class's own gold reward of a completion with
    n_v copies of word v is

    .. math::  R^\star_{old}(x, y) = \sum_v o_v\, h(n_v) + \zeta\, |\{v \in x : n_v > 0\}| - n_{bad},
               \qquad h(n) = n - \chi \frac{n (n - 1)}{2}

    (chi is ``kappa``, zeta is ``rho`` in the code), with a bonus zeta = 0.5 for each prompt word
    the completion mentions and -1 for each token that is not a word. The demonstrations write
    distinct words, favouring the prompt's (each slot holds a prompt word with probability about
    ``p_copy``); the SFT model that imitates them does repeat words now and then, rarely three
    times (the RLHF chapter measures it).

    This gold reward has a hole: for a word of negative sentiment, o_v h(n_v) > 0 once
    h(n_v) < 0, so many copies of a negative word score high. The chapters therefore never use
    it: they use
    :class:`rlnotes.lm.preference.PreferenceTask` (``rlnotes.lm.PreferenceTask``), a subclass
    whose reward punishes repetition whatever the sign; this class is kept unchanged because the
    code of this module is part of the cache key of the cached SFT models.

    Defined in: Reinforcement learning from human feedback, section The tasks.
    """

    name = "preference"
    words = "abcdefghijklmnop"

    def __init__(self, seed: int = 0, kappa: float = 1.0, rho: float = 0.5, p_copy: float = 0.25,
                 min_words: int = 2, max_words: int = 8):
        self.seed = require_int(seed, "seed", minimum=0)
        self.kappa = require_real(kappa, "kappa")
        self.rho = require_real(rho, "rho")
        self.p_copy = require_real(p_copy, "p_copy")
        if not 0 <= self.p_copy <= 1:
            raise ValueError(f"p_copy must be in [0, 1], got {p_copy}")
        self.min_words = require_int(min_words, "min_words", minimum=1)
        self.max_words = require_int(max_words, "max_words", minimum=min_words)
        self.tokenizer = CharTokenizer(self.words + ">")
        W = len(self.words)
        rng = np.random.default_rng(seed)
        self.sentiment = torch.tensor(rng.permutation(np.linspace(-1.0, 1.0, W)), dtype=torch.float32)
        self.word_ids = torch.tensor([self.tokenizer.stoi[c] for c in self.words])
        self.prompt_len = 5
        self.max_new_tokens = self.max_words + 1
        self.max_len = 16

    def config(self) -> dict:
        return dict(task=self.name, seed=self.seed, kappa=self.kappa, rho=self.rho,
                    p_copy=self.p_copy, min_words=self.min_words, max_words=self.max_words)

    def _prompt_words(self, n, generator):
        return torch.randint(len(self.words), (n, 3), generator=generator)

    def _encode_prompts(self, words):
        base = self.tokenizer.bos_id
        sep = self.tokenizer.stoi[">"]
        ids = self.word_ids[words]
        return [[base] + row + [sep] for row in ids.tolist()]

    def sample_prompts(self, n, generator=None, split: str = "train"):
        """``n`` random prompts (``split`` is accepted for the common interface; prompts are
        fresh draws, 16^3 = 4,096 possible)."""
        return self._encode_prompts(self._prompt_words(_check_n(n), generator))

    def sft_batch(self, n, generator=None):
        """``n`` prompts with completions from the reference behaviour (see the class doc)."""
        n = _check_n(n)
        words = self._prompt_words(n, generator)
        k = torch.randint(self.min_words, self.max_words + 1, (n,), generator=generator)
        # k distinct words (Gumbel top-k), a prompt word weighted w = 1 + 16 p_copy / 3 (so a
        # given slot holds a prompt word with probability ~ p_copy): the reference never repeats
        W = len(self.words)
        weight = torch.ones((n, W)).scatter_(1, words, 1.0 + W * self.p_copy / 3)
        u = torch.rand((n, W), generator=generator).clamp(1e-12, 1 - 1e-12)
        keys = weight.log() - torch.log(-torch.log(u))
        chosen = keys.argsort(dim=1, descending=True)
        seqs = [self.word_ids[chosen[i, :k[i]]].tolist() + [self.tokenizer.eos_id] for i in range(n)]
        comp, mask = pad_completions(seqs, self.tokenizer.eos_id)
        return self._encode_prompts(words), comp, mask

    def word_counts(self, completions, mask):
        """(B, 16) counts of each word among the masked tokens, and (B,) count of non-words
        (EOS excluded)."""
        comp = completions.cpu().long()
        m = mask.cpu().bool()
        idx = comp - int(self.word_ids[0])
        is_word = (idx >= 0) & (idx < len(self.words)) & m
        counts = torch.zeros((comp.shape[0], len(self.words)), dtype=torch.float32)
        counts.scatter_add_(1, idx.clamp(0, len(self.words) - 1), is_word.float())
        bad = (m & ~is_word & (comp != self.tokenizer.eos_id)).sum(1).float()
        return counts, bad

    def reward(self, prompts, completions, mask):
        """The gold reward R(x, y) of the class doc, shape (B,) float32 (on the CPU)."""
        _check_batch(prompts, completions, mask)
        counts, bad = self.word_counts(completions, mask)
        h = counts - self.kappa * counts * (counts - 1) / 2
        in_prompt = torch.zeros_like(counts)
        for i, p in enumerate(prompts):
            for t in p[1:4]:
                in_prompt[i, t - int(self.word_ids[0])] = 1.0
        mentioned = ((counts > 0).float() * in_prompt).sum(1)
        return h @ self.sentiment + self.rho * mentioned - bad
