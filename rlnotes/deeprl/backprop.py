"""Backpropagation through an MLP, written out by hand.

For a network of the form ``Linear -> act -> Linear -> act -> ... -> Linear`` (what
:func:`rlnotes.deeprl.mlp` builds), with layer inputs ``h_0 = x`` and ``h_l = act(W_l h_{l-1} + b_l)``,
the chain rule gives, from the gradient ``g = dL/d(output)`` of a (B, out) batch back to the first
layer:

    dL/dW_l = g_l^T h_{l-1},    dL/db_l = sum over the batch of g_l,
    g_{l-1} = (g_l W_l) * act'(h_{l-1})

with ``act'(h) = 1[h > 0]`` for ReLU and ``1 - h^2`` for tanh (both written in terms of the
layer's *output*, which the forward pass keeps anyway). Two matrix products per layer.

Why by hand: for the 64x64 networks of the CartPole chapters the arithmetic is tiny and
PyTorch's autograd bookkeeping (recording the graph, then walking it) costs more than the matrix
products themselves. DQN takes tens of thousands of such gradient steps, and doing them this way
makes each about 1.5x faster (``benchmarks/README.md``). The tests pin the result to autograd's.

Defined in: Deep Q-networks, section DQN on CartPole.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["linear_layers", "forward_keep", "backward_into_grads"]


def linear_layers(net: nn.Sequential) -> tuple[list[nn.Linear], str]:
    """The Linear layers of ``net`` and its hidden activation ("relu" or "tanh"), after checking
    that ``net`` alternates Linear and one kind of activation and ends with a Linear layer.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    if not isinstance(net, nn.Sequential) or len(net) == 0:
        raise ValueError(f"net must be a non-empty nn.Sequential (as rlnotes.deeprl.mlp builds), "
                         f"got {type(net).__name__}")
    modules = list(net)
    linears, acts = modules[0::2], modules[1::2]
    kinds = {type(m) for m in acts}
    if (len(modules) % 2 != 1 or not all(isinstance(m, nn.Linear) for m in linears)
            or not kinds <= {nn.ReLU, nn.Tanh} or len(kinds) > 1):
        raise ValueError("net must alternate Linear layers and one kind of activation (ReLU or "
                         f"Tanh), starting and ending with Linear, got {net}")
    return linears, ("tanh" if nn.Tanh in kinds else "relu")


@torch.no_grad()
def forward_keep(layers: list[nn.Linear], activation: str, x: torch.Tensor):
    """The network's output for ``x`` and the input of every layer, ``[h_0 = x, h_1, ...]``,
    which :func:`backward_into_grads` needs. No autograd graph is recorded.

    ==========  ===========  ==========================================
    argument    shape        meaning
    ==========  ===========  ==========================================
    ``x``       (B, d_in)    a batch of inputs
    returns     (B, d_out),  output, and the L layer inputs (B, d_l)
                list
    ==========  ===========  ==========================================

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    if not torch.is_tensor(x) or x.ndim != 2 or x.shape[1] != layers[0].in_features:
        raise ValueError(f"x must be a tensor of shape (B, {layers[0].in_features}), got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if activation not in ("relu", "tanh"):
        raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
    inputs = [x]
    for i, layer in enumerate(layers):
        x = torch.addmm(layer.bias, x, layer.weight.t())
        if i < len(layers) - 1:
            x = x.relu_() if activation == "relu" else x.tanh_()
            inputs.append(x)
    return x, inputs


@torch.no_grad()
def backward_into_grads(layers: list[nn.Linear], activation: str, inputs: list[torch.Tensor],
                        grad_out: torch.Tensor) -> None:
    """Set ``.grad`` of every layer's weight and bias to dL/dW and dL/db, given ``inputs`` from
    :func:`forward_keep` and ``grad_out = dL/d(output)`` of shape (B, d_out). Rows of
    ``inputs`` beyond B are ignored (a forward pass over more rows than the loss uses is fine).
    Same result as ``loss.backward()`` on a freshly zeroed network.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    if activation not in ("relu", "tanh"):
        raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
    if not isinstance(inputs, list) or len(inputs) != len(layers):
        raise ValueError(f"inputs must be the list of {len(layers)} layer inputs forward_keep "
                         f"returns, got {type(inputs).__name__} of length {len(inputs)}")
    if (not torch.is_tensor(grad_out) or grad_out.ndim != 2
            or grad_out.shape[1] != layers[-1].out_features or grad_out.shape[0] > len(inputs[0])):
        raise ValueError(f"grad_out must be a tensor of shape (B, {layers[-1].out_features}) with "
                         f"B <= {len(inputs[0])}, got {getattr(grad_out, 'shape', type(grad_out).__name__)}")
    g = grad_out
    B = g.shape[0]
    for i in range(len(layers) - 1, -1, -1):
        h = inputs[i][:B]
        layers[i].weight.grad = g.t().mm(h)
        layers[i].bias.grad = g.sum(0)
        if i > 0:
            g = g.mm(layers[i].weight)
            g = g.mul_(h > 0) if activation == "relu" else g.mul_(1.0 - h * h)
