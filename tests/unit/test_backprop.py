"""Backpropagation by hand (rlnotes.deeprl.backprop) against autograd, and DQN's loss gradient."""
import pytest
import torch

from rlnotes import dqn
from rlnotes.deeprl import mlp
from rlnotes.deeprl.backprop import backward_into_grads, flatten_parameters, forward_keep, linear_layers
from rlnotes.deeprl.flat_adam import FlatAdam


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


def test_flatten_parameters_keeps_values_and_makes_views():
    torch.manual_seed(3)
    net = mlp([4, 8, 2])
    before = [p.detach().clone() for p in net.parameters()]
    flat = flatten_parameters(net)
    assert flat.shape == (sum(p.numel() for p in before),) and flat.grad.shape == flat.shape
    for p, b in zip(net.parameters(), before):
        assert torch.equal(p, b)
    with torch.no_grad():
        flat.add_(1.0)  # one operation moves every weight
    for p, b in zip(net.parameters(), before):
        assert torch.equal(p, b + 1.0)
    layers, act = linear_layers(net)
    x = torch.randn(5, 4)
    _, inputs = forward_keep(layers, act, x)
    backward_into_grads(layers, act, inputs, torch.ones(5, 2))  # written into the flat gradient
    assert torch.equal(flat.grad, torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    assert flat.grad.abs().sum() > 0


def test_flatten_parameters_rejects_bad_input():
    with pytest.raises(ValueError, match="module"):
        flatten_parameters([torch.zeros(2)])
    with pytest.raises(ValueError, match="at least one parameter"):
        flatten_parameters(torch.nn.ReLU())
    mixed = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).double())
    with pytest.raises(ValueError, match="dtype"):
        flatten_parameters(mixed)


def test_flat_adam_is_torch_adam_bit_for_bit():
    torch.manual_seed(4)
    a, b = mlp([4, 16, 2]), mlp([4, 16, 2])
    b.load_state_dict(a.state_dict())
    reference = torch.optim.Adam(a.parameters(), lr=3e-3, fused=True)
    flat = flatten_parameters(b)
    ours = FlatAdam(flat, lr=3e-3)
    for step in range(20):
        x = torch.randn(32, 4)
        reference.zero_grad()
        (a(x) ** 2).mean().backward()
        with torch.no_grad():
            for p, q in zip(b.parameters(), a.parameters()):
                p.grad.copy_(q.grad)
        lr = 3e-3 * (1 - step / 20)  # a schedule, set between steps
        for group in reference.param_groups:
            group["lr"] = lr
        ours.lr = lr
        reference.step()
        ours.step()
    for p, q in zip(b.parameters(), a.parameters()):
        assert torch.equal(p, q)


def test_flat_adam_rejects_bad_input():
    flat = torch.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="param"):
        FlatAdam(torch.zeros(2, 2), lr=1e-3)
    with pytest.raises(ValueError, match="lr"):
        FlatAdam(flat, lr=0.0)
    with pytest.raises(ValueError, match="betas"):
        FlatAdam(flat, lr=1e-3, betas=(0.9,))
    with pytest.raises(ValueError, match=r"betas\[1\]"):
        FlatAdam(flat, lr=1e-3, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="eps"):
        FlatAdam(flat, lr=1e-3, eps=-1.0)
    with pytest.raises(ValueError, match="grad"):
        FlatAdam(flat, lr=1e-3).step()
