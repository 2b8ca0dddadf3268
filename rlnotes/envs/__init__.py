"""Gymnasium environments of the book, registered on import under the ``rlnotes/`` namespace.

    import gymnasium as gym
    import rlnotes.envs  # registers the ids below
    env = gym.make("rlnotes/GridWorld-v0")
"""

from __future__ import annotations

import gymnasium as gym

_ENVS = {
    # id: (entry point, max_episode_steps)
    "rlnotes/Maze2x3-v0": ("rlnotes.envs.maze:Maze2x3Env", 100),
    "rlnotes/GridWorld-v0": ("rlnotes.envs.gridworld:GridWorldEnv", 200),
    "rlnotes/RandomWalk-v0": ("rlnotes.envs.random_walk:RandomWalkEnv", None),
    "rlnotes/PointMass-v0": ("rlnotes.envs.point_mass:PointMassEnv", 100),
    "rlnotes/ABGrid-v0": ("rlnotes.envs.ab_grid:ABGridEnv", None),
    "rlnotes/WindyGridWorld-v0": ("rlnotes.envs.windy:WindyGridEnv", None),
}


def register_envs() -> None:
    """Register the book's environments with gymnasium (idempotent)."""
    for env_id, (entry_point, max_steps) in _ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=max_steps)


register_envs()
