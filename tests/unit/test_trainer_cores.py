"""Each trainer's core (what its chapter prints) is the algorithm alone, readable at the page's
width; the public wrapper only checks, sets up, calls the core and reports."""

import inspect

import numpy as np
import pytest
import torch

from rlnotes import a2c, dpo, dqn, grpo, ppo, reinforce, rlhf_ppo, trpo
from rlnotes.deeprl import Standardize
from rlnotes.deeprl import _onpolicy as op
from rlnotes.deeprl.normalize import Normalized
from rlnotes.deeprl.rollout import collect_rollout
from rlnotes.deeprl.training import torch_threads
from rlnotes.show import show_source


@pytest.fixture(autouse=True)
def one_torch_thread():
    # the wrappers train on one torch thread (their default); the cores driven by hand below must
    # too, or a reduction summed in another order changes the last bits whatever OMP_NUM_THREADS says
    with torch_threads(1):
        yield

CORES = {dqn.train: dqn.dqn, reinforce.train: reinforce.reinforce, a2c.train: a2c.a2c,
         ppo.train: ppo.ppo, trpo.train: trpo.trpo, grpo.train_grpo: grpo.grpo_sample,
         dpo.train_dpo: dpo.dpo, rlhf_ppo.train_ppo: rlhf_ppo.ppo_rlhf}
SHOWN = [*CORES.values(), dqn.reference_update, grpo.grpo_update, ppo._ppo_epochs,
         trpo._policy_step, collect_rollout]


@pytest.mark.parametrize("core", SHOWN, ids=lambda f: f.__qualname__)
def test_cores_fit_the_page(core):
    lines = inspect.getsource(core).splitlines()
    assert len(lines) <= 65, f"{core.__qualname__}: {len(lines)} lines"
    wide = [line for line in lines if len(line) > 90]
    assert not wide, f"{core.__qualname__}: lines over 90 columns: {wide}"


# printed with show_source(checks=False): what the page shows must fit it and be the algorithm
PRINTED_WITHOUT_CHECKS = [grpo.grpo_loss, grpo.clip_fraction]


@pytest.mark.parametrize("fn", PRINTED_WITHOUT_CHECKS, ids=lambda f: f.__qualname__)
def test_functions_printed_without_checks_fit_the_page(fn):
    shown = show_source(fn, checks=False).source
    lines = shown.splitlines()
    assert len(lines) <= 65, f"{fn.__qualname__}: {len(lines)} lines"
    wide = [line for line in lines if len(line) > 90]
    assert not wide, f"{fn.__qualname__}: lines over 90 columns: {wide}"
    code = shown.split('"""')[-1]
    for word in ("require_", "check_", "raise ", "ValueError"):
        assert word not in code, f"{fn.__qualname__} still prints {word}"
    assert "=====" not in shown and "Conventions:" not in shown  # the argument table is omitted


@pytest.mark.parametrize("core", list(CORES.values()) + [grpo.grpo_update],
                         ids=lambda f: f.__qualname__)
def test_cores_hold_no_plumbing(core):
    code = inspect.getsource(core).split('"""')[-1]  # the body, after the docstring
    for word in ("callback", "progress", "Reporter", "require_", "check_", "torch_threads",
                 "choose_device", "raise ValueError"):
        assert word not in code, f"{core.__qualname__} mentions {word}"


@pytest.mark.parametrize("wrapper", list(CORES), ids=lambda f: f.__module__)
def test_wrappers_call_their_core(wrapper):
    core = CORES[wrapper]
    assert f"{core.__name__}(" in inspect.getsource(wrapper)
    assert len(inspect.getsource(core)) < len(inspect.getsource(wrapper))


def test_ppo_core_driven_by_hand_is_the_wrapper_run():
    """The core on the wrapper's set-up gives the wrapper's run, parameter for parameter."""
    seen = []
    policy = ppo.train("CartPole-v1", 1024, seed=3, num_steps=16,
                       callback=lambda s, p: seen.append(s) and False)
    envs, obs_dim, act_info = op.make_train_envs("CartPole-v1", 8)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        net = op.ActorCritic(obs_dim, act_info, (64, 64))
        standardize = Standardize(obs_dim)  # the input layer, fitted by the core
        net.actor = Normalized(standardize, net.actor)
        net.critic = Normalized(standardize, net.critic)
        critic = list(net.critic.parameters())
        actor = [p for p in net.parameters() if all(p is not c for c in critic)]
        opt = torch.optim.Adam([{"params": actor, "scale": 1.0, "lr": 2e-3},
                                {"params": critic, "scale": 10.0, "lr": 2e-2}],
                               lr=2e-3, eps=1e-5, fused=True)
        obs, _ = envs.reset(seed=3)
        steps = [s for s, _ in ppo.ppo(  # the defaults: schedules, critic 10x, raw adv, layer
            envs, obs, net, opt, 1024, num_steps=16, n_epochs=5, minibatch_size=256,
            lr=lambda s: 2e-3 * (1 - s / 1024), gamma=0.99, lam=0.95, clip_eps=0.3,
            vf_coef=1.0, ent_coef=0.0, max_grad_norm=0.5, norm_adv=False, target_kl=None,
            rng=np.random.default_rng(3), generator=torch.Generator().manual_seed(3),
            clip=lambda s: 0.3 * (1 - s / 1024), standardize=standardize)]
    envs.close()
    assert steps == seen == list(range(128, 1025, 128))
    for a, b in zip(policy.net.state_dict().values(), net.state_dict().values()):
        assert torch.equal(a, b)


def test_a2c_core_driven_by_hand_is_the_wrapper_run():
    from rlnotes.deeprl.envs import make_vec_env
    from rlnotes.deeprl.normalize import normalize_inputs
    from rlnotes.deeprl.rollout import ActorCritic, check_obs_space
    policy = a2c.train("CartPole-v1", 640, seed=2)
    envs = make_vec_env("CartPole-v1", 8)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        net = ActorCritic(4, check_obs_space(envs, "CartPole-v1"), (64, 64))
        obs_norm = normalize_inputs(net)
        groups = [{"params": list(net.pi.parameters()), "scale": 1.0},
                  {"params": list(net.v.parameters()), "scale": 3.0}]
        opt = a2c.make_optimizer(groups, "rmsprop", 3e-3, 1e-3)   # optimizer_eps 1e-3
        obs, _ = envs.reset(seed=2)
        steps = list(a2c.a2c(envs, np.asarray(obs, np.float32), net, opt, 640, num_steps=8,
                             lr=3e-3, lr_scale=lambda s: 1.0 - 0.8 * min(1.0, s / 640),
                             gamma=0.99, lam=0.95,
                             vf_coef=0.5, ent_coef=0.01, normalize_advantages=False,
                             max_grad_norm=0.5, generator=torch.Generator().manual_seed(2),
                             obs_norm=obs_norm))
    envs.close()
    assert steps == list(range(64, 641, 64))
    for a, b in zip(policy.net.state_dict().values(), net.state_dict().values()):
        assert torch.equal(a, b)


def test_the_one_collector_serves_both_networks():
    """PPO's and A2C's networks act through the same collector, with the same conventions."""
    from rlnotes.deeprl.envs import make_vec_env
    from rlnotes.deeprl.rollout import ActorCritic
    info = {"discrete": True, "n": 2, "shape": ()}
    for net, gen in ((op.ActorCritic(4, info, (8,)), np.random.default_rng(0)),
                     (ActorCritic(4, info, (8,)), torch.Generator().manual_seed(0))):
        envs = make_vec_env("CartPole-v1", 3)
        obs, _ = envs.reset(seed=0)
        ro, last, autoreset = collect_rollout(envs, net, obs, np.zeros(3, bool), 60, gen)
        envs.close()
        ended = ro.terminated | ro.truncated
        assert ended.any() and ro.valid[0].all()
        np.testing.assert_array_equal(ro.valid[1:], ~ended[:-1])
        np.testing.assert_array_equal(autoreset, ended[-1])
        assert ro.obs.shape == (60, 3, 4) and ro.actions.shape == (60, 3)
        assert np.array_equal(ro.last_obs, last)
        assert (ro.values is None) == isinstance(net, op.ActorCritic)
