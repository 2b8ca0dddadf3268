"""Supervised fine-tuning (SFT): maximise the log-likelihood of demonstrations, on the
completion tokens only, and the cached SFT models the chapters on RL for language models start
from.

Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
"""

from __future__ import annotations

import contextlib
import copy
import math

import torch

import rlnotes.lm.generation as _generation
import rlnotes.lm.model as _model
import rlnotes.lm.tasks as _tasks
import rlnotes.lm.tokenizer as _tokenizer
from rlnotes._validate import require_int, require_real
from rlnotes.device import get_device
from rlnotes.lm.cache import cached
from rlnotes.lm.generation import completion_forward, decode
from rlnotes.lm.model import TinyGPT
from rlnotes.progress import progress

__all__ = ["sft_loss", "train_sft", "sft_model", "lr_schedule", "single_thread", "accuracy",
           "freeze"]


@contextlib.contextmanager
def single_thread(device):
    """One torch thread on the CPU while the block runs: faster for models this small.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def freeze(model):
    """A frozen copy of ``model`` (no gradients, eval mode): the reference policy pi_ref.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    ref = copy.deepcopy(model)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref.eval()


def lr_schedule(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up for ``warmup`` steps, then a cosine decay to lr / 10.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def sft_loss(model, prompts, completions, mask):
    r"""Negative log-likelihood of the completion tokens (the prompt is context, not target).

    .. math::  L(\theta) = -\frac{1}{\sum_{i,t} m_{i,t}} \sum_{i,t} m_{i,t}
               \log \pi_\theta(y_{i,t} \mid x_i, y_{i,<t})

    ============  ================  ==========================================
    prompts       list of B lists   token ids
    completions   (B, L) long       demonstrations, right-padded
    mask          (B, L) 0/1        1 on the tokens to learn (up to the EOS)
    returns       () scalar         the mean over masked tokens
    ============  ================  ==========================================

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    device = next(model.parameters()).device
    completions, mask = completions.to(device), mask.to(device).float()
    logp, _ = completion_forward(model, prompts, completions)
    return -(logp * mask).sum() / mask.sum().clamp(min=1)


def train_sft(task, *, steps=600, batch_size=64, lr=3e-3, warmup=50, weight_decay=0.01,
              n_layers=2, n_heads=4, width=128, seed=0, device=None, callback=None):
    """Train a TinyGPT from scratch on ``task.sft_batch`` demonstrations; returns
    ``(model, history)`` with ``history["loss"]`` the loss of each step.

    ==============  =====================================================================
    steps           optimiser steps (AdamW, betas (0.9, 0.95), gradient norm clipped at 1)
    batch_size      demonstrations per step
    lr              peak learning rate (linear warm-up, cosine decay to lr / 10)
    warmup          warm-up steps
    weight_decay    AdamW's decoupled weight decay on the matrices
    n_layers, ...   TinyGPT's sizes; the context is ``task.max_len``
    seed            initial weights and the order of the data
    device          torch device (default ``rlnotes.get_device()``)
    callback        ``callback(step, model)`` after each step
    ==============  =====================================================================

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    steps = require_int(steps, "steps", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    lr = require_real(lr, "lr")
    if lr <= 0:
        raise ValueError(f"lr must be positive, got {lr}")
    warmup = require_int(warmup, "warmup", minimum=1)
    device = get_device() if device is None else torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    with single_thread(device):
        model = TinyGPT(task.tokenizer.vocab_size, task.max_len, n_layers=n_layers,
                        n_heads=n_heads, width=width, seed=seed).to(device)
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        rest = [p for n, p in model.named_parameters() if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                 {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
        history = {"loss": []}
        for step in progress(range(steps), desc="SFT"):
            for g in opt.param_groups:
                g["lr"] = lr_schedule(step, steps, lr, warmup)
            prompts, comp, mask = task.sft_batch(batch_size, gen)
            loss = sft_loss(model, prompts, comp, mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            history["loss"].append(loss.item())
            if callback is not None:
                callback(step, model)
    return model, history


# Defaults of the cached SFT models, per task: the addition model is left clearly imperfect,
# so that RL has room to improve it.
SFT_DEFAULTS = {
    "addition": dict(steps=600, batch_size=64, lr=3e-3, warmup=50, n_layers=2, n_heads=4, width=128),
    "preference": dict(steps=150, batch_size=64, lr=3e-3, warmup=30, n_layers=2, n_heads=4, width=64),
}


def sft_model(task, *, seed=0, device=None, **train_kwargs):
    """The SFT model of ``task``, from the local cache (rlnotes.lm.cache) or trained now.

    ``train_kwargs`` override the task's defaults (``SFT_DEFAULTS``: steps, batch_size, lr,
    warmup, n_layers, n_heads, width). Returns ``(model, history)`` exactly as
    ``train_sft(task, ...)`` would. The cache key is a
    hash of the task's configuration, the sizes, the training settings, the seed, the device
    type and the code of the modules involved (their syntax trees without docstrings, see
    ``rlnotes.lm.cache.code_fingerprint``), so a change to any of them retrains, while an edit
    of a comment or a docstring does not.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    device = get_device() if device is None else torch.device(device)
    kwargs = dict(SFT_DEFAULTS.get(task.name, {}))
    kwargs.update(train_kwargs)
    sizes = {k: kwargs.pop(k, d) for k, d in (("n_layers", 2), ("n_heads", 4), ("width", 128))}
    config = dict(task=task.config(), sizes=sizes, train=kwargs, seed=seed,
                  device=device.type, torch=torch.__version__.split("+")[0])

    def build():
        model, history = train_sft(task, seed=seed, device=device, **sizes, **kwargs)
        return {"state": {k: v.cpu() for k, v in model.state_dict().items()}, "history": history}

    entry = cached(f"sft-{task.name}", config, build, _model, _generation, _tasks, _tokenizer,
                   train_sft, sft_loss, lr_schedule)
    model = TinyGPT(task.tokenizer.vocab_size, task.max_len, seed=seed, **sizes)
    model.load_state_dict(entry["state"])
    return model.to(device), entry["history"]


@torch.no_grad()
def accuracy(model, task, split="test", *, batch_size=1000):
    """Greedy exact-match accuracy of ``model`` on every pair of ``split`` of a verifiable task
    (``task.pairs``, ``task.reward``).

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    pairs = task.pairs(split)
    hits = 0.0
    for i in range(0, len(pairs), batch_size):
        prompts = task.prompts_of(pairs[i:i + batch_size])
        comp, _, mask = decode(model, prompts, task.max_new_tokens, eos_id=task.tokenizer.eos_id,
                               greedy=True)
        hits += float(task.reward(prompts, comp.cpu(), mask.cpu()).sum())
    return hits / len(pairs)
