"""Backpropagation by hand (rlnotes.deeprl.backprop) against autograd, and DQN's loss gradient."""
import pytest
import torch

from rlnotes import dqn
from rlnotes.deeprl import mlp
from rlnotes.deeprl.backprop import backward_into_grads, forward_keep, linear_layers


def _autograd_grads(net, x, grad_out):
    net.zero_grad(set_to_none=True)
    (net(x) * grad_out).sum().backward()
    return [p.grad.clone() for p in net.parameters()]


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("sizes", [[4, 64, 64, 2], [3, 5], [6, 7, 8, 9, 3]])
def test_hand_backprop_equals_autograd(activation, sizes):
    torch.manual_seed(0)
    net = mlp(sizes, activation=activation, dtype=torch.float64)
    x = torch.randn(33, sizes[0], dtype=torch.float64)
    grad_out = torch.randn(33, sizes[-1], dtype=torch.float64)
    want = _autograd_grads(net, x, grad_out)
    layers, act = linear_layers(net)
    assert act == activation or len(sizes) == 2  # one layer: no activation to find
    out, inputs = forward_keep(layers, act, x)
    torch.testing.assert_close(out, net(x).detach())
    net.zero_grad(set_to_none=True)
    backward_into_grads(layers, act, inputs, grad_out)
    for got, w in zip([p.grad for p in net.parameters()], want):
        torch.testing.assert_close(got, w)


def test_extra_forward_rows_are_ignored():
    """DQN runs the online net over [s; s'] and backpropagates through the s rows only."""
    torch.manual_seed(1)
    net = mlp([4, 16, 2], dtype=torch.float64)
    s, s2 = torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    grad_out = torch.randn(8, 2, dtype=torch.float64)
    want = _autograd_grads(net, s, grad_out)
    layers, act = linear_layers(net)
    _, inputs = forward_keep(layers, act, torch.cat([s, s2]))
    backward_into_grads(layers, act, inputs, grad_out)
    for got, w in zip([p.grad for p in net.parameters()], want):
        torch.testing.assert_close(got, w)


def test_forward_keep_records_no_graph():
    net = mlp([4, 8, 2])
    out, inputs = forward_keep(*linear_layers(net), torch.randn(3, 4))
    assert not out.requires_grad and len(inputs) == 2


@pytest.mark.parametrize("bad", [torch.nn.Linear(2, 2), torch.nn.Sequential(),
                                 torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(2, 2)),
                                 torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sigmoid(),
                                                     torch.nn.Linear(2, 2)),
                                 torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()),
                                 torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(),
                                                     torch.nn.Linear(2, 2), torch.nn.Tanh(),
                                                     torch.nn.Linear(2, 2))])
def test_linear_layers_rejects_other_networks(bad):
    with pytest.raises(ValueError, match="net must"):
        linear_layers(bad)


def test_bad_inputs_are_rejected():
    layers, act = linear_layers(mlp([4, 8, 2]))
    with pytest.raises(ValueError, match="x must"):
        forward_keep(layers, act, torch.randn(3, 5))
    with pytest.raises(ValueError, match="x must"):
        forward_keep(layers, act, [[0.0] * 4])
    with pytest.raises(ValueError, match="activation"):
        forward_keep(layers, "gelu", torch.randn(3, 4))
    _, inputs = forward_keep(layers, act, torch.randn(3, 4))
    with pytest.raises(ValueError, match="grad_out"):
        backward_into_grads(layers, act, inputs, torch.randn(3, 3))
    with pytest.raises(ValueError, match="grad_out"):
        backward_into_grads(layers, act, inputs, torch.randn(4, 2))
    with pytest.raises(ValueError, match="inputs"):
        backward_into_grads(layers, act, inputs[:1], torch.randn(3, 2))
    with pytest.raises(ValueError, match="activation"):
        backward_into_grads(layers, "gelu", inputs, torch.randn(3, 2))


@pytest.mark.parametrize("loss", ["mse", "huber"])
def test_dqn_loss_grad_equals_autograd(loss):
    torch.manual_seed(2)
    q_sa = (3 * torch.randn(50, dtype=torch.float64)).requires_grad_()
    y = 3 * torch.randn(50, dtype=torch.float64)  # errors on both sides of Huber's kink at 1
    dqn.dqn_loss(q_sa, y, loss).backward()
    torch.testing.assert_close(dqn.dqn_loss_grad(q_sa, y, loss), q_sa.grad)


def test_dqn_loss_grad_rejects_bad_input():
    q = torch.zeros(4)
    with pytest.raises(ValueError, match="loss"):
        dqn.dqn_loss_grad(q, q, "l1")
    with pytest.raises(ValueError, match="q_sa and targets"):
        dqn.dqn_loss_grad(q, torch.zeros(5), "mse")
    with pytest.raises(ValueError, match="q_sa and targets"):
        dqn.dqn_loss_grad([0.0] * 4, q, "mse")
    with pytest.raises(ValueError, match="q_sa and targets"):
        dqn.dqn_loss_grad(torch.zeros(4, 2), torch.zeros(4, 2), "mse")
