"""Adam on one flat parameter tensor, without the optimiser class around it.

``torch.optim.Adam(fused=True)`` does the arithmetic of a step in one fused kernel, but around
it the ``Optimizer`` class does bookkeeping on every call (hooks, state look-ups per tensor), and
creating the first optimiser of a process imports PyTorch's compiler, about a second on this
machine. For DQN, tens of thousands of steps on a network of a few thousand weights, both show
in the timings. :class:`FlatAdam` keeps the moment estimates itself and calls the same fused
kernel through ``torch.optim.adam.adam``, PyTorch's functional Adam, so its updates are the same
numbers as ``torch.optim.Adam(fused=True)``'s (a unit test checks bit for bit).

Defined in: Deep Q-networks, section DQN on CartPole.
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam

from rlnotes._validate import require_in_range

__all__ = ["FlatAdam"]


class FlatAdam:
    """Adam (Kingma and Ba, 2015) for one flat tensor ``param`` whose ``.grad`` holds the
    gradient (see :func:`rlnotes.deeprl.backprop.flatten_parameters`):

        m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
        param <- param - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    ``lr`` is an attribute, so a schedule sets ``optimizer.lr`` between steps.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """

    def __init__(self, param: torch.Tensor, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        if not torch.is_tensor(param) or param.ndim != 1 or not param.is_floating_point():
            raise ValueError(f"param must be a flat (1-D) floating-point tensor, got "
                             f"{getattr(param, 'shape', type(param).__name__)}")
        self.lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ValueError(f"betas must be a pair (b1, b2), got {betas!r}")
        self.beta1 = require_in_range(betas[0], "betas[0]", 0.0, 1.0, high_open=True)
        self.beta2 = require_in_range(betas[1], "betas[1]", 0.0, 1.0, high_open=True)
        self.eps = require_in_range(eps, "eps", 0.0, float("inf"))
        self.param = param
        self.exp_avg = torch.zeros_like(param)
        self.exp_avg_sq = torch.zeros_like(param)
        self.steps = torch.zeros((), dtype=torch.float32, device=param.device)

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step with the gradient in ``param.grad``."""
        if self.param.grad is None:
            raise ValueError("param.grad is None: compute the gradient before the step")
        adam([self.param], [self.param.grad], [self.exp_avg], [self.exp_avg_sq], [], [self.steps],
             fused=True, amsgrad=False, beta1=self.beta1, beta2=self.beta2, lr=self.lr,
             weight_decay=0.0, eps=self.eps, maximize=False)
