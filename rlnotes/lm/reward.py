"""Preference data labelled through Bradley-Terry noise, and reward models trained on it with
``rlnotes.rlhf.bradley_terry_loss``.

Defined in: Reinforcement learning from human feedback, section Reward models.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlnotes._validate import require_int, require_real
from rlnotes.device import get_device
from rlnotes.lm.generation import generate
from rlnotes.lm.heads import RewardModel
from rlnotes.lm.sft import lr_schedule, single_thread
from rlnotes.progress import progress
from rlnotes.rlhf import bradley_terry_loss

__all__ = ["PreferencePairs", "sample_preference_pairs", "train_reward_model",
           "preference_accuracy"]


@dataclass
class PreferencePairs:
    """N preference pairs: for prompt i, completion ``chosen[i]`` was preferred to
    ``rejected[i]``.

    ==============  ================  ===========================================
    prompts         list of N lists   token ids
    chosen          (N, L) long       preferred completions, right-padded
    chosen_mask     (N, L) 0/1        1 on their tokens
    rejected        (N, L') long      the other completions
    rejected_mask   (N, L') 0/1
    gold_chosen     (N,) or None      hidden gold rewards (known on synthetic tasks)
    gold_rejected   (N,) or None
    ==============  ================  ===========================================

    Mismatched counts raise ``ValueError``. The DPO chapter reads the same object.

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """

    prompts: list
    chosen: torch.Tensor
    chosen_mask: torch.Tensor
    rejected: torch.Tensor
    rejected_mask: torch.Tensor
    gold_chosen: torch.Tensor | None = None
    gold_rejected: torch.Tensor | None = None

    def __post_init__(self):
        if not isinstance(self.prompts, (list, tuple)) or len(self.prompts) == 0:
            raise ValueError("prompts must be a non-empty list of token-id lists")
        N = len(self.prompts)
        for name in ("chosen", "chosen_mask", "rejected", "rejected_mask"):
            x = getattr(self, name)
            if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] != N:
                raise ValueError(f"{name} must be an (N, L) tensor with N = {N} (one row per prompt), "
                                 f"got {tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        if self.chosen_mask.shape != self.chosen.shape:
            raise ValueError(f"chosen_mask must have chosen's shape {tuple(self.chosen.shape)}")
        if self.rejected_mask.shape != self.rejected.shape:
            raise ValueError(f"rejected_mask must have rejected's shape {tuple(self.rejected.shape)}")
        for name in ("gold_chosen", "gold_rejected"):
            x = getattr(self, name)
            if x is not None and (not isinstance(x, torch.Tensor) or x.shape != (N,)):
                raise ValueError(f"{name} must be None or an ({N},) tensor (one per pair)")

    def __len__(self) -> int:
        return len(self.prompts)

    def subset(self, idx):
        """The pairs at ``idx`` (a slice, a list or a 1-d index tensor)."""
        if isinstance(idx, slice):
            idx = list(range(len(self)))[idx]
        idx = torch.as_tensor(idx, dtype=torch.long)
        pick = lambda x: None if x is None else x[idx]  # noqa: E731
        return PreferencePairs([self.prompts[i] for i in idx.tolist()], self.chosen[idx],
                               self.chosen_mask[idx], self.rejected[idx], self.rejected_mask[idx],
                               pick(self.gold_chosen), pick(self.gold_rejected))

    def ceiling(self) -> float:
        r"""The best accuracy any reward model can expect on these pairs' labels: the labels
        were drawn with P(chosen) = sigma(R_c - R_r), so predicting the gold-preferred one is
        right with probability max(p, 1 - p); the ceiling is its mean over the pairs."""
        if self.gold_chosen is None:
            raise ValueError("ceiling needs gold rewards (gold_chosen, gold_rejected)")
        p = torch.sigmoid(self.gold_chosen.double() - self.gold_rejected.double())
        return float(torch.maximum(p, 1 - p).mean())


@torch.no_grad()
def sample_preference_pairs(policy, task, n_pairs, generator, *, temperature=1.0):
    r"""Sample two completions per prompt from ``policy``, and label which is preferred by
    Bradley-Terry noise around the task's gold reward:
    P(y_1 \succ y_2 | x) = sigma(R(x, y_1) - R(x, y_2)).

    Returns :class:`PreferencePairs` with the gold rewards attached. One ``generate`` call
    samples all 2 N completions.

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """
    n_pairs = require_int(n_pairs, "n_pairs", minimum=1)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    prompts = task.sample_prompts(n_pairs, generator)
    comp, _, mask = generate(policy, prompts + prompts, task.max_new_tokens, temperature=temperature,
                             eos_id=task.tokenizer.eos_id, generator=generator)
    comp, mask = comp.cpu(), mask.cpu()
    gold = task.reward(prompts + prompts, comp, mask)
    a, b = slice(0, n_pairs), slice(n_pairs, 2 * n_pairs)
    first = torch.rand(n_pairs, generator=generator) < torch.sigmoid(gold[a] - gold[b])
    pick = lambda x, y: torch.where(first.view(-1, *[1] * (x.ndim - 1)), x, y)  # noqa: E731
    return PreferencePairs(prompts, pick(comp[a], comp[b]), pick(mask[a], mask[b]),
                           pick(comp[b], comp[a]), pick(mask[b], mask[a]),
                           pick(gold[a], gold[b]), pick(gold[b], gold[a]))


def _pair_scores(rm, pairs: PreferencePairs):
    """Scores of chosen and rejected in one forward pass."""
    L = max(pairs.chosen.shape[1], pairs.rejected.shape[1])
    pad = lambda x: torch.nn.functional.pad(x, (0, L - x.shape[1]))  # noqa: E731
    comp = torch.cat([pad(pairs.chosen), pad(pairs.rejected)])
    mask = torch.cat([pad(pairs.chosen_mask), pad(pairs.rejected_mask)])
    r = rm(pairs.prompts + pairs.prompts, comp, mask)
    return r[:len(pairs)], r[len(pairs):]


@torch.no_grad()
def preference_accuracy(rm, pairs: PreferencePairs, *, batch_size=512) -> float:
    """Fraction of pairs in which ``rm`` scores the chosen completion above the rejected one.

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """
    hits = 0
    for i in range(0, len(pairs), batch_size):
        rc, rr = _pair_scores(rm, pairs.subset(slice(i, i + batch_size)))
        hits += int((rc > rr).sum())
    return hits / len(pairs)


def train_reward_model(backbone, pairs: PreferencePairs, *, epochs=4, batch_size=64, lr=3e-3,
                       warmup=10, seed=0, device=None, valid=None):
    r"""Fit a :class:`RewardModel` (a copy of ``backbone`` plus a scalar head) to preference
    pairs by minimising the Bradley-Terry loss ``bradley_terry_loss(r(x, y_w), r(x, y_l))``.

    ==========  ==========================================================================
    backbone    the TinyGPT to start from (the SFT model, as in InstructGPT)
    pairs       :class:`PreferencePairs` to train on
    epochs      passes over the pairs (more overfits: the pairs are few)
    batch_size  pairs per step
    lr          peak learning rate of AdamW (warm-up, then cosine decay)
    seed        the order of the pairs
    valid       optional :class:`PreferencePairs`; its accuracy is logged each epoch
    returns     ``(rm, history)``; history: ``loss`` per step, ``valid_acc`` per epoch
    ==========  ==========================================================================

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """
    if not isinstance(pairs, PreferencePairs):
        raise ValueError(f"pairs must be PreferencePairs, got {type(pairs).__name__}")
    epochs = require_int(epochs, "epochs", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    lr = require_real(lr, "lr")
    device = get_device() if device is None else torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    steps = epochs * -(-len(pairs) // batch_size)
    history = {"loss": [], "valid_acc": []}
    with single_thread(device):
        rm = RewardModel(backbone).to(device)
        opt = torch.optim.AdamW(rm.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
        step = 0
        for _ in progress(range(epochs), desc="reward model"):
            order = torch.randperm(len(pairs), generator=gen)
            for i in range(0, len(pairs), batch_size):
                for g in opt.param_groups:
                    g["lr"] = lr_schedule(step, steps, lr, warmup)
                r_chosen, r_rejected = _pair_scores(rm, pairs.subset(order[i:i + batch_size]))
                loss = bradley_terry_loss(r_chosen, r_rejected)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(rm.parameters(), 1.0)
                opt.step()
                history["loss"].append(loss.item())
                step += 1
            if valid is not None:
                history["valid_acc"].append(preference_accuracy(rm, valid))
    return rm.eval(), history
