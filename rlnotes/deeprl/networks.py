"""Multilayer perceptrons with the usual deep-RL initialisation.

Defined in: Deep Q-networks, section From a table to a network.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rlnotes._validate import require_choice, require_int, require_real

__all__ = ["mlp", "Standardize"]

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(sizes, *, activation: str = "relu", out_gain: float = 1.0, device=None,
        dtype=torch.float32) -> nn.Sequential:
    """A fully connected network ``sizes[0] -> sizes[1] -> ... -> sizes[-1]``.

    Hidden layers are followed by ``activation`` ("relu" or "tanh"); the output layer is linear.
    Weights are orthogonal matrices scaled by sqrt(2) in hidden layers (the gain that keeps a
    ReLU layer's output variance), by ``out_gain`` in the output layer (0.01 for a policy head,
    so that the first policy is close to uniform; 1 for a value head); biases are 0.

    ==============  ===========  ==================================================
    argument        type         meaning
    ==============  ===========  ==================================================
    ``sizes``       list of int  input size, hidden sizes, output size (>= 2 entries)
    ``activation``  str          "relu" or "tanh"
    ``out_gain``    float > 0    scale of the output layer's orthogonal init
    ==============  ===========  ==================================================

    Example: ``mlp([4, 64, 64, 2])`` maps a (B, 4) batch of observations to (B, 2) outputs.

    Defined in: Deep Q-networks, section From a table to a network.
    """
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) < 2:
        raise ValueError(f"sizes must be a list of at least 2 layer sizes, got {sizes!r}")
    sizes = [require_int(n, "sizes", minimum=1) for n in sizes]
    require_choice(activation, "activation", tuple(_ACTIVATIONS))
    out_gain = require_real(out_gain, "out_gain")
    if out_gain <= 0:
        raise ValueError(f"out_gain must be > 0, got {out_gain}")
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(n_in, n_out, device=device, dtype=dtype)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, gain=out_gain if last else math.sqrt(2.0))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class Standardize(nn.Module):
    """A fixed input standardisation, ``(obs - mean) / std``, as the first layer of a network.

    Starts as the identity; :meth:`fit` sets ``mean`` and ``std`` from a batch of observations
    (a trainer calls it once, on the random-policy data collected before learning starts), and
    they stay fixed afterwards, so the network's input never drifts. Standardising matters
    because an input whose natural scale is small (CartPole's cart position and pole angle, a
    few tenths) barely moves the first layer at the start of training, and the agent is slow to
    notice it. With ``clip`` the result is clipped to [-clip, clip]; that bounds the inputs of
    states far outside the early data, but also makes all of them look the same: a random
    policy's cart position has a std of about 0.08, so even a clip of 10 hides where the cart is
    beyond about 0.8 from the centre, far inside the track's edge at 2.4 (DQN's default is no
    clip).

    Defined in: Deep Q-networks, section From a table to a network.
    """

    def __init__(self, dim: int, *, clip: float | None = None, device=None,
                 dtype=torch.float32):
        super().__init__()
        dim = require_int(dim, "dim", minimum=1)
        if clip is not None:
            clip = require_real(clip, "clip")
            if clip <= 0:
                raise ValueError(f"clip must be > 0 or None, got {clip}")
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim, device=device, dtype=dtype))
        self.register_buffer("std", torch.ones(dim, device=device, dtype=dtype))

    @torch.no_grad()
    def fit(self, obs: torch.Tensor, min_std: float = 1e-2) -> "Standardize":
        """Set mean and std (floored at ``min_std``) from ``obs`` of shape (B, dim), B >= 2."""
        if not torch.is_tensor(obs) or obs.ndim != 2 or obs.shape[1] != self.mean.shape[0] \
                or obs.shape[0] < 2:
            raise ValueError(f"obs must be a tensor of shape (B >= 2, {self.mean.shape[0]}), got "
                             f"{getattr(obs, 'shape', obs)!r}")
        self.mean.copy_(obs.mean(dim=0))
        self.std.copy_(obs.std(dim=0).clamp_min(min_std))
        return self

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        z = (obs - self.mean) / self.std
        return z if self.clip is None else z.clamp(-self.clip, self.clip)
