"""Sutton and Barto's A/B grid world (Examples 3.5 and 3.8): a continuing task.

::

    . A . B .
    . . . . .
    . . . b .
    . . . . .
    . a . . .

A 5x5 grid. Every action from A (row 0, column 1) moves to A' = a (row 4, column 1) and pays
+10; every action from B (row 0, column 3) moves to B' = b (row 2, column 3) and pays +5. A move
off the grid leaves the agent in place and pays -1; every other move pays 0. No state is
terminal: the task never ends, so only ``gamma < 1`` gives finite values (the book uses 0.9).
Actions are FrozenLake's: 0 left, 1 down, 2 right, 3 up; states are numbered row by row.

Defined in: MDPs and dynamic programming, section Four-argument dynamics and the A/B grid world.
"""

from __future__ import annotations

import numpy as np

from rlnotes.envs.tabular_env import TabularEnv

__all__ = ["ABGridEnv", "A_STATE", "B_STATE"]

A_STATE, A_PRIME, B_STATE, B_PRIME = 1, 21, 3, 13
_MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}


class ABGridEnv(TabularEnv):
    """The A/B grid world of Sutton and Barto's Example 3.5 (``rlnotes/ABGrid-v0``).

    ==================  ========================================================
    argument            meaning
    ==================  ========================================================
    ``a_reward``        reward of any action in A (default +10)
    ``b_reward``        reward of any action in B (default +5)
    ``wall_reward``     reward of a move off the grid (default -1)
    ``render_mode``     None or "ansi"
    ==================  ========================================================

    Episodes start uniformly in any of the 25 cells and never terminate (wrap it in a time limit
    to sample from it). Attributes: ``P`` (toy-text table), ``shape`` = (5, 5).

    Defined in: MDPs and dynamic programming, section Four-argument dynamics and the A/B grid world.
    """

    def __init__(self, *, a_reward: float = 10.0, b_reward: float = 5.0,
                 wall_reward: float = -1.0, render_mode: str | None = None):
        for name, value in (("a_reward", a_reward), ("b_reward", b_reward),
                            ("wall_reward", wall_reward)):
            if not isinstance(value, (int, float, np.floating, np.integer)) or not np.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        self.shape = (5, 5)
        P = {}
        for s in range(25):
            P[s] = {}
            for a in range(4):
                if s == A_STATE:
                    P[s][a] = [(1.0, A_PRIME, float(a_reward), False)]
                elif s == B_STATE:
                    P[s][a] = [(1.0, B_PRIME, float(b_reward), False)]
                else:
                    row, col = divmod(s, 5)
                    dr, dc = _MOVES[a]
                    r2, c2 = row + dr, col + dc
                    if 0 <= r2 < 5 and 0 <= c2 < 5:
                        P[s][a] = [(1.0, 5 * r2 + c2, 0.0, False)]
                    else:
                        P[s][a] = [(1.0, s, float(wall_reward), False)]
        super().__init__(P, np.full(25, 1 / 25), render_mode=render_mode)

    def _render_text(self) -> str:
        cells = np.full(25, ".")
        cells[[A_STATE, B_STATE, A_PRIME, B_PRIME]] = ["A", "B", "a", "b"]
        cells[self.s] = "x"
        return "\n".join(" ".join(cells[5 * r:5 * r + 5]) for r in range(5)) + "\n"
