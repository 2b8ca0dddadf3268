"""Backpropagation through an MLP, written out by hand.

For a network of the form ``Linear -> act -> Linear -> act -> ... -> Linear`` (what
:func:`rlnotes.deeprl.mlp` builds), with one row per example, ``h_0 = x`` the (B, d_0) batch of
inputs, ``z_l = h_{l-1} W_l^T + b_l``, ``h_l = act(z_l)`` for the hidden layers and ``z_L`` the
output, the chain rule gives, from ``g_L = dL/dz_L`` back to the first layer
(``g_l = dL/dz_l``, a (B, d_l) matrix):

    dL/dW_l = g_l^T h_{l-1},    dL/db_l = sum over the batch of g_l,
    g_{l-1} = (g_l W_l) * act'(h_{l-1})      (for l > 1)

with ``act'(h) = 1[h > 0]`` for ReLU and ``1 - h^2`` for tanh (both written in terms of the
layer's *output*, which the forward pass keeps anyway). Two matrix products per layer.

Why by hand: for the 64x64 networks of the CartPole chapters the arithmetic is tiny and
PyTorch's autograd bookkeeping (recording the graph, then walking it) costs more than the matrix
products themselves. DQN takes tens of thousands of such gradient steps; with this, the flat
parameters of :func:`flatten_parameters` and :class:`rlnotes.deeprl.flat_adam.FlatAdam`, a DQN
run takes about half the CPU time it took with autograd and ``torch.optim.Adam``
(``benchmarks/README.md``). The tests pin the gradients to autograd's.

Defined in: Deep Q-networks, section DQN on CartPole.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["linear_layers", "forward_keep", "backward_into_grads", "flatten_parameters"]


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
        weight, bias = layers[i].weight, layers[i].bias
        if weight.grad is None or bias.grad is None:
            weight.grad, bias.grad = g.t().mm(h), g.sum(0)
        else:  # in place: the gradients may be views of one flat tensor (flatten_parameters)
            torch.mm(g.t(), h, out=weight.grad)
            torch.sum(g, 0, out=bias.grad)
        if i > 0:
            g = g.mm(weight)
            if activation == "relu":
                g = torch.ops.aten.threshold_backward(g, h, 0.0)  # g * 1[h > 0], one operation
            else:
                g = g.mul_(1.0 - h * h)


@torch.no_grad()
def flatten_parameters(module: nn.Module) -> torch.Tensor:
    """Store all of ``module``'s parameters, and their gradients, in one flat tensor each, and
    return the flat parameter tensor (a leaf with ``.grad`` set to the flat gradient).

    Every parameter becomes a view of the returned tensor (values unchanged), and its ``.grad``
    a view of the flat gradient, so that an optimiser or a Polyak average given ``[flat]``
    updates every weight in one operation instead of one per tensor; for a small network
    those per-tensor operations cost more than the arithmetic. Write gradients in place
    (as :func:`backward_into_grads` does when ``.grad`` exists), or the views are lost.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    if not isinstance(module, nn.Module):
        raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    params = list(module.parameters())
    if not params:
        raise ValueError("module must have at least one parameter")
    if len({(p.dtype, p.device) for p in params}) > 1:
        raise ValueError("module's parameters must share one dtype and one device")
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    flat_grad = torch.zeros_like(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat[offset:offset + n].view_as(p)
        p.grad = flat_grad[offset:offset + n].view_as(p)
        offset += n
    flat.requires_grad_(True)
    flat.grad = flat_grad
    return flat
