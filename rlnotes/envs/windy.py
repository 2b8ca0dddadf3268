"""Sutton and Barto's windy grid world (Example 6.5).

A 7x10 grid; start S at row 3, column 0; goal G at row 3, column 7. A crosswind blows upward
through the middle columns: the strength of column c, ``WIND[c]``, is added to the upward move
of every step taken *from* column c (the agent cannot leave the grid; the wind pushes it against
the top edge). Every step pays -1 until the goal is reached, which ends the episode. Actions are
FrozenLake's: 0 left, 1 down, 2 right, 3 up; states are numbered row by row (s = 10 row + col).

There is no time limit: a policy that never reaches the goal (for instance "always right", which
the wind pins against the top edge) plays one episode forever.

Defined in: Learning without a model: Monte Carlo and TD, section The windy grid world.
"""

from __future__ import annotations

import numpy as np

from rlnotes.envs.tabular_env import TabularEnv

__all__ = ["WIND", "WindyGridEnv", "WINDY_START", "WINDY_GOAL"]

WIND = (0, 0, 0, 1, 1, 1, 2, 2, 1, 0)
WINDY_START, WINDY_GOAL = 30, 37
_MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}


class WindyGridEnv(TabularEnv):
    """The windy grid world of Sutton and Barto's Example 6.5 (``rlnotes/WindyGridWorld-v0``).

    ===============  ==========================================================
    argument         meaning
    ===============  ==========================================================
    ``wind``         sequence of 10 non-negative ints, the upward push of each
                     column (default ``WIND`` = 0 0 0 1 1 1 2 2 1 0)
    ``render_mode``  None or "ansi"
    ===============  ==========================================================

    Attributes: ``P`` (toy-text table), ``shape`` = (7, 10), ``wind``.

    Defined in: Learning without a model: Monte Carlo and TD, section The windy grid world.
    """

    def __init__(self, wind=WIND, *, render_mode: str | None = None):
        wind = tuple(wind) if not isinstance(wind, str) else None
        if wind is None or len(wind) != 10 or not all(
                isinstance(w, (int, np.integer)) and 0 <= w <= 6 for w in wind):
            raise ValueError(f"wind must be a sequence of 10 ints in [0, 6], got {wind!r}")
        self.shape, self.wind = (7, 10), wind
        P = {}
        for s in range(70):
            P[s] = {}
            row, col = divmod(s, 10)
            for a in range(4):
                if s == WINDY_GOAL:
                    P[s][a] = [(1.0, s, 0.0, True)]
                    continue
                dr, dc = _MOVES[a]
                r2 = min(max(row + dr - wind[col], 0), 6)
                c2 = min(max(col + dc, 0), 9)
                s2 = 10 * r2 + c2
                P[s][a] = [(1.0, s2, -1.0, s2 == WINDY_GOAL)]
        start = np.zeros(70)
        start[WINDY_START] = 1.0
        super().__init__(P, start, render_mode=render_mode)

    def _render_text(self) -> str:
        cells = np.full(70, ".")
        cells[WINDY_START], cells[WINDY_GOAL] = "S", "G"
        cells[self.s] = "x"
        rows = [" ".join(cells[10 * r:10 * r + 10]) for r in range(7)]
        return "\n".join(rows) + "\n" + " ".join(str(w) for w in self.wind) + "\n"
