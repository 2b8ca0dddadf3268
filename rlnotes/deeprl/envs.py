"""Vectorised training environments from a gymnasium id, and the transitions they produce.

gymnasium 1.x vector envs reset an episode *on the step after* it ends (autoreset mode
``NEXT_STEP``): the step that follows ``terminated or truncated`` ignores the action, returns
the first observation of a new episode with reward 0, and is not a transition of the task.
:func:`step_transitions` drops those steps, so that a replay buffer or a rollout never learns
from them. It also keeps ``terminated`` (the task ended: no value after it) apart from
``truncated`` (a time limit cut the episode: the state still has a value, and targets bootstrap
from it).

Defined in: Deep Q-networks, section Experience replay.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode

from rlnotes._validate import require_int

__all__ = ["env_spec", "make_vec_env", "step_transitions", "space_info"]


def env_spec(env_id: str):
    """The registered ``EnvSpec`` of ``env_id``; ``ValueError`` naming ``env_id`` if unknown."""
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env_id must be a registered gymnasium id (a string), got {env_id!r}")
    try:
        return gym.spec(env_id)
    except gym.error.Error as err:
        raise ValueError(f"env_id {env_id!r} is not a registered gymnasium environment "
                         f"({err})") from None


class LeanCartPoleVectorEnv(CartPoleVectorEnv):
    """gymnasium's vectorised CartPole (all N copies in one numpy step, autoreset mode
    ``NEXT_STEP``) with the same dynamics, random stream and outputs, minus the per-step
    Python that a trainer does not need: no check that the action batch lies in the action
    space (a quarter of the step's time at N = 8; the trainers only send valid actions) and no
    draw of zero start states when no copy resets. Its trajectories are gymnasium's, bit for
    bit (``tests/unit/test_envs.py``).

    Defined in: Deep Q-networks, section Experience replay.
    """

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = np.where(np.asarray(action) > 0, self.force_mag, -self.force_mag)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        # Euler, as CartPole-v1
        self.state = np.stack((x + self.tau * x_dot, x_dot + self.tau * xacc,
                               theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc))
        x, theta = self.state[0], self.state[2]
        terminated = ((x < -self.x_threshold) | (x > self.x_threshold)
                      | (theta < -self.theta_threshold_radians)
                      | (theta > self.theta_threshold_radians))
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps
        reward = np.ones(self.num_envs, dtype=np.float32)
        done = self.prev_done
        if done.any():  # NEXT_STEP autoreset: this step only resets those copies
            self.state[:, done] = self.np_random.uniform(low=self.low, high=self.high,
                                                         size=(4, int(done.sum())))
            self.steps[done] = 0
            reward[done] = 0.0
            terminated[done] = False
            truncated[done] = False
        self.prev_done = terminated | truncated
        return self.state.T.astype(np.float32), reward, terminated, truncated, {}


def make_vec_env(env_id: str, num_envs: int, seed: int | None = None) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` stepped together, in autoreset mode ``NEXT_STEP``.

    Uses the environment's own vector implementation when it registers one (CartPole-v1 does:
    one numpy array step for all copies, about 2x faster than a loop at 8 envs and 100x at
    1,024; for CartPole-v1, its lean form :class:`LeanCartPoleVectorEnv`), else
    ``SyncVectorEnv``. With ``seed`` the env is reset once with it (copy i gets
    seed + i in ``SyncVectorEnv``); call ``reset()`` without a seed afterwards to continue the
    same random stream.

    Defined in: Deep Q-networks, section Experience replay.
    """
    spec = env_spec(env_id)
    num_envs = require_int(num_envs, "num_envs", minimum=1)
    if seed is not None:
        seed = require_int(seed, "seed", minimum=0)
    if env_id == "CartPole-v1" and not spec.kwargs:
        envs = LeanCartPoleVectorEnv(num_envs=num_envs,
                                     max_episode_steps=spec.max_episode_steps)
    elif spec.vector_entry_point is not None:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    else:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                            vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP})
    mode = envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if mode != AutoresetMode.NEXT_STEP:  # what step_transitions assumes
        envs.close()
        raise ValueError(f"env_id {env_id!r}: its vector env resets in mode {mode}, "
                         "expected NEXT_STEP")
    if seed is not None:
        envs.reset(seed=seed)
    return envs


def space_info(space) -> dict:
    """What a network needs to know of a single (not batched) space: for ``Discrete(n)``,
    ``{"discrete": True, "n": n, "shape": ()}``; for a ``Box``, ``{"discrete": False,
    "shape": shape, "low": low, "high": high}``. Other spaces raise ``ValueError``."""
    if isinstance(space, gym.spaces.Discrete):
        return {"discrete": True, "n": int(space.n), "shape": ()}
    if isinstance(space, gym.spaces.Box):
        return {"discrete": False, "shape": tuple(space.shape), "low": space.low,
                "high": space.high}
    raise ValueError(f"space must be a Discrete or Box space, got {space!r}")


def step_transitions(envs, actions, obs, autoreset):
    """Step the vector env and return the real transitions of this step.

    ==============  ==========  =====================================================
    argument        shape       meaning
    ==============  ==========  =====================================================
    ``actions``     (N, ...)    one action per env
    ``obs``         (N, d)      the observations the actions were chosen in
    ``autoreset``   (N,) bool   True where the previous step ended an episode, so that
                                this step only resets that env (all False after reset)
    ==============  ==========  =====================================================

    Returns ``(next_obs, batch, autoreset)``: ``next_obs`` (N, d) to act on next; ``batch`` a
    dict of the K <= N real transitions, with keys ``obs``, ``actions``, ``rewards``,
    ``next_obs``, ``terminated``, ``truncated`` (the autoreset steps left out); and the new
    ``autoreset`` mask (``terminated | truncated``) to pass to the next call.
    A truncated transition keeps ``terminated = False``: its target bootstraps from s'.

    Defined in: Deep Q-networks, section Experience replay.
    """
    autoreset = np.asarray(autoreset, dtype=bool)
    if autoreset.shape != (envs.num_envs,):
        raise ValueError(f"autoreset must have shape ({envs.num_envs},), got {autoreset.shape}")
    if len(obs) != envs.num_envs or len(actions) != envs.num_envs:
        raise ValueError(f"obs and actions must have {envs.num_envs} rows (one per env), got "
                         f"{len(obs)} and {len(actions)}")
    next_obs, rewards, terminated, truncated, _ = envs.step(actions)
    keep = ~autoreset
    batch = {"obs": obs[keep], "actions": actions[keep], "rewards": rewards[keep],
             "next_obs": next_obs[keep], "terminated": terminated[keep],
             "truncated": truncated[keep]}
    return next_obs, batch, np.logical_or(terminated, truncated)
