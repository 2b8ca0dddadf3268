"""The 2x3 maze: the smallest MDP of the book.

::

    S . .
    . T G

Start top-left, trap (reward -10, episode ends) bottom-middle, goal (reward +10, episode ends)
bottom-right; every other move pays 0, and moves off the grid leave the agent in place. The
layout makes the short routes through the trap tempting and the safe route unique (right,
right, down). Registered as ``rlnotes/Maze2x3-v0`` with a time limit of 100 steps (a wrapper,
not part of the MDP).

Defined in: MDPs and dynamic programming, section Two environments.
"""

from __future__ import annotations

from rlnotes.envs.gridworld import GridWorldEnv

__all__ = ["MAZE_2X3", "Maze2x3Env"]

MAZE_2X3 = (
    "S..",
    ".TG",
)


class Maze2x3Env(GridWorldEnv):
    """The 2x3 maze (``rlnotes/Maze2x3-v0``): a :class:`GridWorldEnv` with layout ``MAZE_2X3``,
    goal reward +10, trap reward -10, step reward 0; ``slip`` as in the grid world (default 0).

    Defined in: MDPs and dynamic programming, section Two environments.
    """

    def __init__(self, *, slip: float = 0.0, render_mode: str | None = None):
        super().__init__(MAZE_2X3, goal_reward=10.0, trap_reward=-10.0, step_reward=0.0,
                         slip=slip, render_mode=render_mode)
