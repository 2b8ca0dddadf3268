"""The checks of the DQN chapter's exercises: a correct solution passes, typical mistakes fail
with the hint that names them."""

import pytest
import torch

from rlnotes import dqn
from rlnotes.exercises import CHECKS, ExerciseFailed
from rlnotes.exercises.dqn import DQN_HINTS, check_dqn_targets, check_polyak_update


def fails_with(check, solution, hint_part):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution)
    assert hint_part in err.value.hint, err.value.hint


def test_checks_are_registered():
    assert "check_dqn_targets" in CHECKS and "check_polyak_update" in CHECKS


# ---- double DQN targets ---------------------------------------------------------------------
def targets_ok(rewards, next_q_online, next_q_target, terminated, gamma):
    a_star = next_q_online.argmax(dim=1, keepdim=True)
    return rewards + gamma * (1 - terminated) * next_q_target.gather(1, a_star).squeeze(1)


def test_dqn_targets_correct_passes(capsys):
    assert check_dqn_targets(targets_ok) is None
    assert "PASSED check_dqn_targets" in capsys.readouterr().out


def test_dqn_targets_numpy_solution_passes():
    def numpy_ok(rewards, next_q_online, next_q_target, terminated, gamma):
        r, qo, qt, d = (x.numpy() for x in (rewards, next_q_online, next_q_target, terminated))
        return r + gamma * (1 - d) * qt[range(len(r)), qo.argmax(1)]
    check_dqn_targets.raw(numpy_ok)


@pytest.mark.parametrize("index, hint_part", [(0, "terminated"), (1, "plain DQN"),
                                              (2, "swap the roles"), (3, "online network's own"),
                                              (4, "gamma")])
def test_dqn_targets_typical_mistakes(index, hint_part):
    wrong = DQN_HINTS[index][1]

    def solution(rewards, next_q_online, next_q_target, terminated, gamma):
        return wrong(rewards, next_q_online, next_q_target, terminated, gamma)
    fails_with(check_dqn_targets, solution, hint_part)


def test_dqn_targets_other_failures():
    fails_with(check_dqn_targets, lambda r, qo, qt, d, g: r[:3], "one value per transition")
    fails_with(check_dqn_targets, lambda r, qo, qt, d, g: r + 1.0, "argmax_a Q_online")

    def calls_rlnotes(rewards, next_q_online, next_q_target, terminated, gamma):
        return dqn.td_targets(rewards, next_q_online, next_q_target, terminated, gamma)
    with pytest.raises(ExerciseFailed, match="rlnotes' own"):
        check_dqn_targets.raw(calls_rlnotes)


# ---- Polyak averaging ---------------------------------------------------------------------
def polyak_ok(target_params, params, tau):
    with torch.no_grad():
        for t, p in zip(target_params, params):
            t.mul_(1 - tau).add_(tau * p)


def test_polyak_correct_passes(capsys):
    assert check_polyak_update(polyak_ok) is None
    assert "PASSED check_polyak_update" in capsys.readouterr().out


def test_polyak_typical_mistakes():
    @torch.no_grad()
    def swapped(target_params, params, tau):
        for t, p in zip(target_params, params):
            t.copy_(tau * t + (1 - tau) * p)

    @torch.no_grad()
    def hard(target_params, params, tau):
        for t, p in zip(target_params, params):
            t.copy_(p)

    def rebinds(target_params, params, tau):
        for t, p in zip(target_params, params):
            t = (1 - tau) * t + tau * p  # noqa: F841  (changes nothing)

    @torch.no_grad()
    def replaces_list_items(target_params, params, tau):  # the network keeps its old tensors
        for i, (t, p) in enumerate(zip(target_params, params)):
            target_params[i] = (1 - tau) * t + tau * p

    def forgets_no_grad(target_params, params, tau):  # right numbers, but an autograd graph
        for t, p in zip(target_params, params):
            t.mul_(1 - tau).add_(tau * p)

    @torch.no_grad()
    def moves_online(target_params, params, tau):
        for t, p in zip(target_params, params):
            t.mul_(1 - tau).add_(tau * p)
            p.mul_(0.5)

    fails_with(check_polyak_update, swapped, "weight of the online")
    fails_with(check_polyak_update, hard, "hard update")
    fails_with(check_polyak_update, rebinds, "in place")
    fails_with(check_polyak_update, replaces_list_items, "in place")
    fails_with(check_polyak_update, forgets_no_grad, "no_grad")
    fails_with(check_polyak_update, moves_online, "Only the target")
    with pytest.raises(ExerciseFailed, match="rlnotes' own"):
        check_polyak_update.raw(lambda t, p, tau: dqn.polyak_update(t, p, tau))


# ---- target update of whole networks (parameters averaged, buffers copied) -----------------
def target_update_ok(target_net, online_net, tau):
    with torch.no_grad():
        for t, p in zip(target_net.parameters(), online_net.parameters()):
            t.lerp_(p, tau)
        for t, b in zip(target_net.buffers(), online_net.buffers()):
            t.copy_(b)


def test_target_update_correct_passes(capsys):
    from rlnotes.exercises.dqn import check_target_update
    assert check_target_update(target_update_ok) is None
    assert "PASSED check_target_update" in capsys.readouterr().out


def test_target_update_typical_mistakes():
    from rlnotes.exercises.dqn import check_target_update

    def parameters_only(target_net, online_net, tau):  # rlnotes.dqn.polyak_update on parameters
        dqn.polyak_update(list(target_net.parameters()), list(online_net.parameters()), tau)

    @torch.no_grad()
    def averages_buffers(target_net, online_net, tau):
        for t, p in zip(target_net.state_dict().values(), online_net.state_dict().values()):
            t.lerp_(p, tau)

    def forgets_no_grad(target_net, online_net, tau):
        for t, p in zip(target_net.parameters(), online_net.parameters()):
            t.requires_grad_(True)
            t.data = ((1 - tau) * t + tau * p)
        for t, b in zip(target_net.buffers(), online_net.buffers()):
            t.copy_(b)

    @torch.no_grad()
    def hard_copy(target_net, online_net, tau):
        target_net.load_state_dict(online_net.state_dict())

    fails_with(check_target_update, parameters_only, "copy them too")
    fails_with(check_target_update, averages_buffers, "an average of two")
    fails_with(check_target_update, forgets_no_grad, "no_grad")
    fails_with(check_target_update, hard_copy, "Parameters are averaged")


# ---- n-step double-DQN targets ------------------------------------------------------------
def n_step_ok(rewards, terminated, next_q_online, next_q_target, gamma):
    B, n = rewards.shape
    y, alive = torch.zeros(B, dtype=rewards.dtype), torch.ones(B, dtype=rewards.dtype)
    for k in range(n):
        y = y + alive * gamma**k * rewards[:, k]
        alive = alive * (1 - terminated[:, k])
    a_star = next_q_online.argmax(1, keepdim=True)
    return y + alive * gamma**n * next_q_target.gather(1, a_star).squeeze(1)


def test_n_step_targets_correct_passes(capsys):
    from rlnotes.exercises.dqn import check_n_step_dqn_targets
    assert check_n_step_dqn_targets(n_step_ok) is None
    assert "PASSED check_n_step_dqn_targets" in capsys.readouterr().out


def test_n_step_targets_typical_mistakes():
    from rlnotes.exercises.dqn import check_n_step_dqn_targets

    def boot(qo, qt):
        return qt.gather(1, qo.argmax(1, keepdim=True)).squeeze(1)

    def one_gamma(r, d, qo, qt, g):  # bootstrap discounted by gamma, not gamma ** n
        y = n_step_ok(r, d, qo, qt, g)
        return y + (g - g ** r.shape[1]) * (1 - d).prod(1) * boot(qo, qt)

    def no_mask(r, d, qo, qt, g):
        y = n_step_ok(r, d, qo, qt, g)
        return y + g ** r.shape[1] * (1 - (1 - d).prod(1)) * boot(qo, qt)

    def plain(r, d, qo, qt, g):
        y = n_step_ok(r, d, qo, qt, g)
        return y + g ** r.shape[1] * (1 - d).prod(1) * (qt.max(1).values - boot(qo, qt))

    def undiscounted(r, d, qo, qt, g):
        y = n_step_ok(r, d, qo, qt, g)
        return y + (r * (1 - g ** torch.arange(r.shape[1], dtype=r.dtype))).sum(1)

    fails_with(check_n_step_dqn_targets, one_gamma, "gamma ** n")
    fails_with(check_n_step_dqn_targets, no_mask, "must not bootstrap")
    fails_with(check_n_step_dqn_targets, plain, "online network chooses")
    fails_with(check_n_step_dqn_targets, undiscounted, "carries gamma ** k")
    with pytest.raises(ExerciseFailed, match="rlnotes' own"):
        check_n_step_dqn_targets.raw(lambda r, d, qo, qt, g: dqn.td_targets(r[:, 0], qo, qt, d[:, 0], g))
