"""A2C's optimiser epsilon (``rlnotes.a2c.train(optimizer_eps=...)`` and
:func:`rlnotes.a2c.make_optimizer`): where it enters RMSProp's step, its default, and its
checks."""

import pytest
import torch

from rlnotes import a2c


def _rmsprop_step(eps, g, lr=1e-3):
    """The first RMSProp step of one parameter with gradient ``g``."""
    w = torch.nn.Parameter(torch.zeros(1))
    opt = a2c.make_optimizer([w], "rmsprop", lr, eps)
    w.grad = torch.tensor([g])
    opt.step()
    return -float(w.detach())


def test_rmsprop_eps_sits_outside_the_root_and_shrinks_the_steps_of_small_gradients():
    alpha, lr = 0.99, 1e-3
    for g in (1e-6, 1e-4, 1e-2, 1.0):
        for eps in (1e-5, 1e-3):
            # one step from a zero mean square: v = (1 - alpha) g^2, step = lr g / (sqrt(v) + eps)
            expected = lr * g / ((1 - alpha) ** 0.5 * g + eps)
            assert _rmsprop_step(eps, g, lr) == pytest.approx(expected, rel=1e-5)
    # a gradient far above eps gets a step that does not depend on its size; far below eps, a
    # step proportional to it, lr * g / eps
    assert _rmsprop_step(1e-3, 10.0) == pytest.approx(_rmsprop_step(1e-3, 100.0), rel=2e-3)
    assert _rmsprop_step(1e-3, 1e-7) == pytest.approx(1e-3 * 1e-7 / 1e-3, rel=1e-3)
    # the first step (mean square still (1 - alpha) g^2) of a gradient of 1e-4: about fifty
    # times smaller with eps 1e-3 than with 1e-5 (settled, ten times: the chapter's figure)
    assert _rmsprop_step(1e-5, 1e-4) > 40 * _rmsprop_step(1e-3, 1e-4)


def test_the_default_epsilon_reaches_the_optimiser_and_changes_the_run():
    import inspect
    assert inspect.signature(a2c.train).parameters["optimizer_eps"].default == 1e-3
    kwargs = dict(seed=0, num_envs=2, num_steps=8, hidden_sizes=(8,))
    a = a2c.train("CartPole-v1", 64, **kwargs)
    b = a2c.train("CartPole-v1", 64, optimizer_eps=1e-3, **kwargs)
    c = a2c.train("CartPole-v1", 64, optimizer_eps=1e-5, **kwargs)
    pa, pb, pc = ([p.detach() for p in x.net.parameters()] for x in (a, b, c))
    assert all(torch.equal(x, y) for x, y in zip(pa, pb))          # the default is 1e-3
    assert not all(torch.equal(x, y) for x, y in zip(pa, pc))      # and it matters


@pytest.mark.parametrize("value", [0.0, -1e-3, float("nan"), float("inf"), "1e-3", True, None])
def test_a2c_rejects_a_bad_optimizer_eps(value):
    with pytest.raises(ValueError, match="optimizer_eps"):
        a2c.train("CartPole-v1", 64, optimizer_eps=value)


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), "small"])
def test_make_optimizer_rejects_a_bad_eps(value):
    w = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match="eps"):
        a2c.make_optimizer([w], "rmsprop", 1e-3, value)


def test_make_optimizer_rejects_an_unknown_optimizer():
    w = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match="optimizer"):
        a2c.make_optimizer([w], "sgd", 1e-3)


@pytest.mark.parametrize("value", [0.0, -1e-3, float("nan"), "0.1"])
def test_make_optimizer_rejects_a_bad_learning_rate(value):
    w = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match="learning_rate"):
        a2c.make_optimizer([w], "adam", value)
