"""Checks of the exercises of the chapter "Deep Q-networks".

``check_dqn_targets`` compares the reader's double-DQN targets with ``rlnotes.dqn.td_targets``
on random minibatches and recognises the usual mistakes (no done mask, plain DQN's max, the
target network choosing the action, the online network valuing it, no discount).
``check_polyak_update`` compares the reader's target-network update with
``rlnotes.dqn.polyak_update`` and recognises swapped weights and a hard copy.
``check_n_step_dqn_targets`` checks n-step double-DQN targets over a window of rewards.
``check_target_update`` checks a target update of whole networks: parameters averaged, buffers
(the input standardisation) copied.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes import dqn
from rlnotes.exercises.core import ExerciseFailed, check, expect_own_work, reader_array

__all__ = ["check_dqn_targets", "check_n_step_dqn_targets", "check_polyak_update",
           "check_target_update"]


def _numpy(x, what: str, shape) -> np.ndarray:
    return reader_array(x, what, shape, read_hint='Return a tensor (or array) of numbers.',
                        shape_hint='Return one value per transition (or per weight), nothing more.')


def _dqn_batch(seed: int, B: int = 64, A: int = 3):
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(B, generator=g, dtype=torch.float64)
    q_online = torch.randn(B, A, generator=g, dtype=torch.float64) * 3
    q_target = torch.randn(B, A, generator=g, dtype=torch.float64) * 3
    term = (torch.rand(B, generator=g) < 0.3).to(torch.float64)
    gamma = 0.5 + 0.45 * float(torch.rand(1, generator=g))
    return r, q_online, q_target, term, gamma


DQN_HINTS = [
    ("You bootstrapped from terminal next states: multiply the bootstrap term by "
     "1 - terminated (a truncated transition keeps it).",
     lambda r, qo, qt, d, g: r + g * qt.gather(1, qo.argmax(1, keepdim=True)).squeeze(1)),
    ("That is plain DQN's target, max_a Q_target(s', a): in double DQN the online network "
     "chooses a* and the target network values it.",
     lambda r, qo, qt, d, g: r + g * (1 - d) * qt.max(1).values),
    ("The target network chose the action and the online network valued it: swap the roles "
     "(a* = argmax of the online values, valued by the target network).",
     lambda r, qo, qt, d, g: r + g * (1 - d) * qo.gather(1, qt.argmax(1, keepdim=True)).squeeze(1)),
    ("You used the online network's own max: the value of a* must come from the target "
     "network, or the overestimation comes back.",
     lambda r, qo, qt, d, g: r + g * (1 - d) * qo.max(1).values),
    ("The bootstrap term is discounted: multiply it by gamma.",
     lambda r, qo, qt, d, g: r + (1 - d) * qt.gather(1, qo.argmax(1, keepdim=True)).squeeze(1)),
]


@check
def check_dqn_targets(my_dqn_targets):
    """``my_dqn_targets(rewards, next_q_online, next_q_target, terminated, gamma)`` returns the
    (B,) double-DQN targets for torch tensors rewards (B,), next_q_online (B, A),
    next_q_target (B, A), terminated (B,) and a float gamma."""
    expect_own_work(my_dqn_targets, dqn.td_targets)
    for seed in range(3):
        r, qo, qt, d, gamma = _dqn_batch(seed)
        got = _numpy(my_dqn_targets(r.clone(), qo.clone(), qt.clone(), d.clone(), gamma),
                     "my_dqn_targets' result", (r.shape[0],))
        expected = dqn.td_targets(r, qo, qt, d, gamma).numpy()
        if np.allclose(got, expected, atol=1e-6):
            continue
        for hint, wrong in DQN_HINTS:
            if np.allclose(got, wrong(r, qo, qt, d, gamma).numpy(), atol=1e-6):
                raise ExerciseFailed("The targets differ from double DQN's.", hint)
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(
            f"Target {worst} is {got[worst]:.4g}, expected {expected[worst]:.4g}.",
            "y = r + gamma * (1 - terminated) * Q_target(s', argmax_a Q_online(s', a)).")


@check
def check_polyak_update(my_polyak_update):
    """``my_polyak_update(target_params, params, tau)`` moves each tensor of the list
    ``target_params`` toward the matching tensor of ``params``, in place:
    theta_target <- (1 - tau) theta_target + tau theta."""
    expect_own_work(my_polyak_update, dqn.polyak_update)
    g = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (3,), (2, 4)]
    for tau in (0.005, 0.3, 1.0):
        target = [torch.randn(s, generator=g) for s in shapes]
        # online weights require gradients, as a network's parameters do
        online = [torch.randn(s, generator=g).requires_grad_(True) for s in shapes]
        originals = list(target)  # the tensors a network holds: replacing list items is no update
        before = [t.clone() for t in target]
        online_copy = [p.detach().clone() for p in online]
        my_polyak_update(target, online, tau)
        for p, p0 in zip(online, online_copy):
            if not torch.equal(p.detach(), p0):
                raise ExerciseFailed("The online parameters changed.",
                                     "Only the target network moves; leave params as they are.")
        for i, (t, t0, p) in enumerate(zip(originals, before, online)):
            if t.requires_grad:
                raise ExerciseFailed(
                    f"target_params[{i}] now records gradients through the online weights.",
                    "Do the update inside torch.no_grad(), or every update extends an "
                    "autograd graph through all past online weights.")
            got = _numpy(t, f"target_params[{i}]", tuple(t0.shape))
            expected = ((1 - tau) * t0 + tau * p.detach()).numpy()
            if np.allclose(got, expected, atol=1e-6):
                continue
            if np.allclose(got, t0.numpy()):
                raise ExerciseFailed(
                    f"target_params[{i}] did not change (tau = {tau}).",
                    "Update the tensors in place (t.mul_(...).add_(...) or t.copy_(...) "
                    "inside torch.no_grad()); rebinding a loop variable changes nothing.")
            if np.allclose(got, (tau * t0 + (1 - tau) * p.detach()).numpy(), atol=1e-6):
                raise ExerciseFailed(f"target_params[{i}] moved by 1 - tau instead of tau.",
                                     "tau is the weight of the online parameters: "
                                     "(1 - tau) * target + tau * online.")
            if np.allclose(got, p.detach().numpy(), atol=1e-6):
                raise ExerciseFailed(f"target_params[{i}] became a copy of params (tau = {tau}).",
                                     "That is the hard update; Polyak averaging moves only a "
                                     "fraction tau of the way.")
            raise ExerciseFailed(f"target_params[{i}] is off for tau = {tau}.",
                                 "theta_target <- (1 - tau) theta_target + tau theta.")


def _q_pair(seed: int):
    """An online Q-network with fitted input standardisation and a target copy that has drifted
    from it, both as rlnotes.dqn.train builds them (Standardize then mlp)."""
    from rlnotes.deeprl import Standardize, mlp
    g = torch.Generator().manual_seed(seed)
    nets = []
    with torch.random.fork_rng(devices=[]):  # leaves the reader's global random state alone
        for k in range(2):
            torch.manual_seed(seed + k)
            net = torch.nn.Sequential(Standardize(4), mlp([4, 8, 2]))
            net[0].fit(torch.randn(32, 4, generator=g) * (1 + k))
            nets.append(net)
    online, target = nets
    return target.requires_grad_(False), online


@check
def check_target_update(my_target_update):
    """``my_target_update(target_net, online_net, tau)`` updates a target *network* in place:
    every parameter moves a fraction tau toward the online one (Polyak averaging), and every
    buffer (such as the input standardisation's ``mean`` and ``std``) becomes a copy of the
    online network's, since an average of two standardisations is neither."""
    for seed, tau in ((0, 0.01), (1, 0.3), (2, 1.0)):
        target, online = _q_pair(seed)
        t_params = {n: p.detach().clone() for n, p in target.named_parameters()}
        t_buffers = {n: b.clone() for n, b in target.named_buffers()}
        o_state = {n: v.detach().clone() for n, v in online.state_dict().items()}
        my_target_update(target, online, tau)
        for n, v in online.state_dict().items():
            if not torch.equal(v.detach(), o_state[n]):
                raise ExerciseFailed(f"The online network's {n} changed.",
                                     "Only the target network moves; leave online_net as it is.")
        for n, p in target.named_parameters():
            if p.requires_grad or p.grad_fn is not None:
                raise ExerciseFailed(f"The target's {n} now records gradients.",
                                     "Do the update inside torch.no_grad() and in place "
                                     "(p.mul_(...).add_(...) or p.lerp_(...)).")
            got, t0, o = p.detach(), t_params[n], o_state[n]
            expected = (1 - tau) * t0 + tau * o
            if torch.allclose(got, expected, atol=1e-6):
                continue
            if torch.allclose(got, t0) and tau > 0:
                raise ExerciseFailed(f"The target's parameter {n} did not change (tau = {tau}).",
                                     "Update target_net.parameters() in place; rebinding a name "
                                     "changes nothing.")
            if torch.allclose(got, tau * t0 + (1 - tau) * o, atol=1e-6):
                raise ExerciseFailed(f"The target's parameter {n} moved by 1 - tau instead of tau.",
                                     "tau is the weight of the online parameters.")
            if torch.allclose(got, o, atol=1e-6):
                raise ExerciseFailed(f"The target's parameter {n} became a copy (tau = {tau}).",
                                     "Parameters are averaged: (1 - tau) * target + tau * online.")
            raise ExerciseFailed(f"The target's parameter {n} is off for tau = {tau}.",
                                 "theta_target <- (1 - tau) theta_target + tau theta.")
        for n, b in target.named_buffers():
            got, b0, o = b, t_buffers[n], o_state[n]
            if torch.equal(got, o):
                continue
            if torch.equal(got, b0):
                raise ExerciseFailed(f"The target's buffer {n} did not change.",
                                     "Buffers are not parameters: copy them too "
                                     "(target_net.buffers(), b.copy_(...)).")
            if torch.allclose(got, (1 - tau) * b0 + tau * o, atol=1e-6):
                raise ExerciseFailed(f"The target's buffer {n} was averaged.",
                                     "Copy buffers such as the standardisation's mean and std: "
                                     "an average of two standardisations is neither.")
            raise ExerciseFailed(f"The target's buffer {n} is not the online network's.",
                                 "Copy every buffer from online_net.")


def _n_step_reference(rewards, terminated, next_q_online, next_q_target, gamma):
    """n-step double-DQN targets: sum_k gamma^k r_k over the steps before a termination, plus
    gamma^n Q_target(s_n, argmax_a Q_online(s_n, a)) when no step of the window terminated."""
    B, n = rewards.shape
    alive = torch.cumprod(torch.cat([torch.ones(B, 1, dtype=rewards.dtype),
                                     1.0 - terminated[:, :-1]], dim=1), dim=1)  # before step k
    discounts = gamma ** torch.arange(n, dtype=rewards.dtype)
    ret = (alive * discounts * rewards).sum(dim=1)
    a_star = next_q_online.argmax(dim=1, keepdim=True)
    bootstrap = next_q_target.gather(1, a_star).squeeze(1)
    survived = alive[:, -1] * (1.0 - terminated[:, -1])
    return ret + gamma**n * survived * bootstrap


def _n_step_batch(seed: int, n: int, B: int = 64, A: int = 3):
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(B, n, generator=g, dtype=torch.float64)
    term = (torch.rand(B, n, generator=g) < 0.15).to(torch.float64)
    first = torch.cumsum(term, dim=1)
    term = term * (first == 1) * (torch.cumsum(term * (first == 1), dim=1) == 1)  # <= one end
    r = r * torch.cat([torch.ones(B, 1, dtype=r.dtype), 1 - torch.cumsum(term, 1)[:, :-1]], 1)
    q_online = torch.randn(B, A, generator=g, dtype=torch.float64) * 3
    q_target = torch.randn(B, A, generator=g, dtype=torch.float64) * 3
    gamma = 0.5 + 0.45 * float(torch.rand(1, generator=g))
    return r, term, q_online, q_target, gamma


N_STEP_HINTS = [
    ("The bootstrap term must be discounted by gamma ** n, the number of rewards summed.",
     lambda r, d, qo, qt, g: _n_step_reference(r, d, qo, qt, g) + (g - g ** r.shape[1]) * (
         (1 - d).prod(1) * qt.gather(1, qo.argmax(1, keepdim=True)).squeeze(1))),
    ("A window in which the episode terminated must not bootstrap: multiply the bootstrap by "
     "the product of (1 - terminated) over the window.",
     lambda r, d, qo, qt, g: _n_step_reference(r, d, qo, qt, g) + g ** r.shape[1] * (
         1 - (1 - d).prod(1)) * qt.gather(1, qo.argmax(1, keepdim=True)).squeeze(1)),
    ("That bootstraps with plain DQN's max_a Q_target(s_n, a): the online network chooses a*.",
     lambda r, d, qo, qt, g: _n_step_reference(r, d, qo, qt, g) + g ** r.shape[1] * (
         1 - d).prod(1) * (qt.max(1).values - qt.gather(1, qo.argmax(1, keepdim=True)).squeeze(1))),
    ("The rewards are discounted: the k-th reward of the window (from 0) carries gamma ** k.",
     lambda r, d, qo, qt, g: _n_step_reference(r, d, qo, qt, g) + (
         (r * (1 - (g ** torch.arange(r.shape[1], dtype=r.dtype)))).sum(1))),
]


@check
def check_n_step_dqn_targets(my_n_step_targets):
    """``my_n_step_targets(rewards, terminated, next_q_online, next_q_target, gamma)`` returns
    the (B,) n-step double-DQN targets for torch tensors rewards (B, n), terminated (B, n) (1 at
    the step whose next state is terminal; the rewards after it are 0), next_q_online and
    next_q_target (B, A), the values of the state n steps ahead, and a float gamma."""
    expect_own_work(my_n_step_targets, dqn.td_targets)
    for seed, n in ((0, 1), (1, 3), (2, 5)):
        r, d, qo, qt, gamma = _n_step_batch(seed, n)
        got = _numpy(my_n_step_targets(r.clone(), d.clone(), qo.clone(), qt.clone(), gamma),
                     "my_n_step_targets' result", (r.shape[0],))
        expected = _n_step_reference(r, d, qo, qt, gamma).numpy()
        if n == 1:  # with one step it is the one-step target of rlnotes.dqn.td_targets
            assert np.allclose(expected, dqn.td_targets(r[:, 0], qo, qt, d[:, 0], gamma).numpy())
        if np.allclose(got, expected, atol=1e-6):
            continue
        for hint, wrong in N_STEP_HINTS:
            if np.allclose(got, wrong(r, d, qo, qt, gamma).numpy(), atol=1e-6):
                raise ExerciseFailed(f"The {n}-step targets differ.", hint)
        worst = int(np.argmax(np.abs(got - expected)))
        raise ExerciseFailed(
            f"With n = {n}, target {worst} is {got[worst]:.4g}, expected {expected[worst]:.4g}.",
            "y = sum_k gamma^k r_k (up to a termination) + gamma^n Q_target(s_n, a*) if the "
            "window did not terminate, a* = argmax_a Q_online(s_n, a).")
