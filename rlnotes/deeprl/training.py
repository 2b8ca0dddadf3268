"""What every deep-RL trainer of the book does the same way besides learning: checking the
arguments they all take, running torch on a fixed number of threads, choosing the device, and
reporting progress (the progress bar and the ``callback(steps, policy)`` of the trainer
contract).

DQN, REINFORCE, A2C, TRPO and PPO import these instead of keeping a copy each, so that the
trainers reject bad input with the same messages and treat ``device`` and ``num_threads`` alike.

Defined in: Deep Q-networks, section DQN on CartPole.
"""

from __future__ import annotations

import contextlib
import os

import torch

from rlnotes._validate import require_int, require_real

__all__ = ["CALLBACK_INTERVAL", "torch_threads", "choose_device", "check_common", "check_hidden_sizes",
           "check_positive", "check_max_grad_norm", "check_flag", "check_rollout_size",
           "Reporter"]

# The callback interval of the trainer contract: a trainer reports at least this often.
CALLBACK_INTERVAL = 2048


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` torch threads (1 is fastest for the book's small networks), then
    restore the number there was before. ``n`` must be an int >= 1."""
    n = require_int(n, "num_threads", minimum=1)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def choose_device(device) -> torch.device:
    """The device a trainer runs on, from its ``device`` argument.

    ============  =============================================================
    ``device``    result
    ============  =============================================================
    None          the CPU, unless the environment variable ``RLNOTES_DEVICE`` is
                  set (then :func:`rlnotes.get_device`, which reads it)
    ``"auto"``    :func:`rlnotes.get_device`: CUDA, else MPS, else the CPU
    a name        ``"cpu"``, ``"cuda"``, ``"mps"`` (or a ``torch.device``)
    ============  =============================================================

    The CPU is the default because a 64-unit MLP on minibatches of a few hundred rows is
    dominated by per-operation latency, which is lower on a CPU than a GPU kernel launch plus
    the transfers. ``ValueError`` for a name :func:`rlnotes.get_device` does not know.
    """
    from rlnotes.device import get_device
    if device is None:
        return get_device() if os.environ.get("RLNOTES_DEVICE") else torch.device("cpu")
    if device == "auto":
        return get_device()
    return get_device(str(device))


def check_common(total_steps, seed, callback, num_threads) -> tuple[int, int, int]:
    """Check the arguments every trainer takes: ``total_steps`` (int >= 1), ``seed`` (int >=
    0), ``callback`` (callable or None) and ``num_threads`` (int >= 1). Returns
    ``(total_steps, seed, num_threads)`` as ints; ``ValueError`` naming the first bad one."""
    total_steps = require_int(total_steps, "total_steps", minimum=1)
    seed = require_int(seed, "seed", minimum=0)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None, got {callback!r}")
    num_threads = require_int(num_threads, "num_threads", minimum=1)
    return total_steps, seed, num_threads


def check_hidden_sizes(hidden_sizes) -> list[int]:
    """``hidden_sizes`` as a list of ints >= 1 (a sequence of layer widths; may be empty)."""
    if isinstance(hidden_sizes, (str, bytes)) or not hasattr(hidden_sizes, "__iter__"):
        raise ValueError(f"hidden_sizes must be a sequence of layer widths, got {hidden_sizes!r}")
    return [require_int(h, "hidden_sizes", minimum=1) for h in hidden_sizes]


def check_positive(value, name: str) -> float:
    """``value`` as a float > 0 (a learning rate, a KL radius...); ``ValueError`` naming
    ``name`` otherwise."""
    value = require_real(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_max_grad_norm(max_grad_norm) -> float | None:
    """``max_grad_norm`` as a float > 0, or None (no gradient clipping)."""
    if max_grad_norm is None:
        return None
    max_grad_norm = require_real(max_grad_norm, "max_grad_norm")
    if max_grad_norm <= 0:
        raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm}")
    return max_grad_norm


def check_flag(value, name: str) -> bool:
    """``value`` if it is a bool; ``ValueError`` naming ``name`` otherwise (1, "yes", None...
    are refused rather than read as truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_rollout_size(num_envs, num_steps, name: str = "num_steps") -> tuple[int, int]:
    """``(num_envs, num_steps)`` as ints >= 1 whose product is at most the callback interval
    (2,048 steps), so that a trainer that reports once per rollout reports often enough.
    ``name`` is what the per-env step count is called in the trainer (``num_steps``,
    ``train_freq``)."""
    num_envs = require_int(num_envs, "num_envs", minimum=1)
    num_steps = require_int(num_steps, name, minimum=1)
    if num_envs * num_steps > CALLBACK_INTERVAL:
        raise ValueError(f"num_envs * {name} must be <= {CALLBACK_INTERVAL} (the callback "
                         f"interval), got {num_envs} * {num_steps}")
    return num_envs, num_steps


class Reporter:
    """The progress bar and the callback of one training run.

    ``reporter(steps)`` moves the bar to ``min(steps, total_steps)`` and calls
    ``callback(steps, policy)``; it returns True when the callback asks to stop (the trainer
    then breaks out of its loop). ``reporter.update(steps)`` moves the bar only. Use it as a
    context manager, so that the bar is closed however the loop ends.

    ===============  ==================================================================
    argument         meaning
    ===============  ==================================================================
    ``total_steps``  the run's budget in environment steps (int >= 1)
    ``callback``     None or ``callback(steps, policy)``; a true return stops training
    ``policy``       what the callback receives (the trainer's live policy)
    ``progress``     show a bar (``rlnotes.progress.progress``; silenced by
                     ``RLNOTES_PROGRESS=0``)
    ``desc``         the bar's label, e.g. "PPO"
    ===============  ==================================================================
    """

    def __init__(self, total_steps: int, callback, policy, *, progress: bool = False,
                 desc: str = ""):
        self.total_steps = require_int(total_steps, "total_steps", minimum=1)
        if callback is not None and not callable(callback):
            raise ValueError(f"callback must be callable or None, got {callback!r}")
        self.callback = callback
        self.policy = policy
        self.bar = None
        if check_flag(progress, "progress"):
            from rlnotes.progress import progress as _progress
            self.bar = _progress(total=self.total_steps, desc=str(desc))

    def update(self, steps: int) -> None:
        """Move the bar to ``min(steps, total_steps)``."""
        if self.bar is not None:
            self.bar.update(min(steps, self.total_steps) - self.bar.n)

    def __call__(self, steps: int) -> bool:
        """Move the bar, call the callback; True when it asks to stop."""
        self.update(steps)
        return self.callback is not None and bool(self.callback(steps, self.policy))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
