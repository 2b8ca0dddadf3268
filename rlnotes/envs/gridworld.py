"""Grid worlds: the 8x8 grid world with a reward cell and a trap cell, and the 4x4 grid world of
Sutton and Barto's Example 4.1.

Cells are given by a layout of strings, one per row:

==========  ====================================================================================
character   cell
==========  ====================================================================================
``S``       a start cell (``reset`` picks one uniformly; without any ``S``, any ``.`` cell)
``.``       an empty cell
``G``       a goal: entering it pays ``goal_reward`` and ends the episode
``T``       a trap: entering it pays ``trap_reward`` and ends the episode
``#``       a wall: moves into it (or off the grid) leave the agent where it is
==========  ====================================================================================

State ``s = row * ncol + col`` (walls included, so values reshape to the grid). Actions follow
gymnasium's FrozenLake: 0 = left, 1 = down, 2 = right, 3 = up. Every other move pays
``step_reward``. With ``slip > 0`` a move goes in the intended direction with probability
``1 - slip`` and to each perpendicular direction with probability ``slip / 2``.
Goal, trap and wall states are absorbing in the table ``P`` (as FrozenLake's holes are).

Defined in: MDPs and dynamic programming, section Two environments.
"""

from __future__ import annotations

import numpy as np

from rlnotes.envs.tabular_env import TabularEnv

__all__ = ["ACTION_NAMES", "DOWN", "GRID_8X8", "GridWorldEnv", "LEFT", "RIGHT", "SUTTON_BARTO_4X4",
           "UP", "sutton_barto_4x4"]

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
ACTION_NAMES = ("left", "down", "right", "up")
_MOVES = {LEFT: (0, -1), DOWN: (1, 0), RIGHT: (0, 1), UP: (-1, 0)}
_PERPENDICULAR = {LEFT: (DOWN, UP), RIGHT: (DOWN, UP), DOWN: (LEFT, RIGHT), UP: (LEFT, RIGHT)}

#: The 8x8 grid world: reward cell in the top-right corner, trap at row 3, column 3, start in the
#: bottom-left corner.
GRID_8X8 = (
    ".......G",
    "........",
    "........",
    "...T....",
    "........",
    "........",
    "........",
    "S.......",
)

#: Sutton and Barto's Example 4.1: terminal corners, no start cell (reset picks any other cell).
SUTTON_BARTO_4X4 = (
    "G...",
    "....",
    "....",
    "...G",
)


class GridWorldEnv(TabularEnv):
    """A grid world with goal, trap and wall cells (see the module docstring for the layout).

    =================  =========================================================================
    argument           meaning
    =================  =========================================================================
    ``layout``         sequence of equal-length strings over ``S . G T #`` (default: 8x8 grid)
    ``goal_reward``    reward for entering a ``G`` cell (default +1)
    ``trap_reward``    reward for entering a ``T`` cell (default -1)
    ``step_reward``    reward for every other move, bumps into walls included (default 0)
    ``slip``           probability in [0, 1) that a move goes sideways (default 0)
    ``render_mode``    None or "ansi"
    =================  =========================================================================

    Attributes: ``P`` (gymnasium toy-text table), ``desc`` ((nrow, ncol) array of bytes, as in
    FrozenLake), ``nrow``, ``ncol``, ``shape``, ``terminal`` ((S,) bool mask of G, T and # cells).

    Defined in: MDPs and dynamic programming, section Two environments.
    """

    def __init__(self, layout=GRID_8X8, *, goal_reward: float = 1.0, trap_reward: float = -1.0,
                 step_reward: float = 0.0, slip: float = 0.0, render_mode: str | None = None):
        if isinstance(layout, str) or len(layout) == 0:
            raise ValueError("layout must be a non-empty sequence of strings, one per row")
        rows = [str(row) for row in layout]
        ncol = len(rows[0])
        if ncol == 0 or any(len(row) != ncol for row in rows):
            raise ValueError("layout rows must be non-empty strings of equal length")
        bad = set("".join(rows)) - set("S.GT#")
        if bad:
            raise ValueError(f"layout may only use the characters 'S.GT#', got {sorted(bad)}")
        for name, value in (("goal_reward", goal_reward), ("trap_reward", trap_reward),
                            ("step_reward", step_reward)):
            if not np.isfinite(float(value)):
                raise ValueError(f"{name} must be finite, got {value}")
        slip = float(slip)
        if not 0.0 <= slip < 1.0:
            raise ValueError(f"slip must be in [0, 1), got {slip}")
        self.nrow, self.ncol = len(rows), ncol
        self.shape = (self.nrow, self.ncol)
        self.desc = np.array([list(row) for row in rows], dtype="c")
        self.goal_reward, self.trap_reward = float(goal_reward), float(trap_reward)
        self.step_reward, self.slip = float(step_reward), slip
        cells = "".join(rows)
        self.terminal = np.array([c in "GT#" for c in cells])
        starts = np.array([c == "S" for c in cells])
        if not starts.any():
            starts = np.array([c == "." for c in cells])
        if not starts.any():
            raise ValueError("layout must have an 'S' or '.' cell to start from")
        P = {s: {a: self._outcomes(s, a, cells) for a in range(4)} for s in range(len(cells))}
        super().__init__(P, starts / starts.sum(), render_mode=render_mode)

    def _move(self, s: int, direction: int, cells: str) -> int:
        row, col = divmod(s, self.ncol)
        dr, dc = _MOVES[direction]
        r2, c2 = row + dr, col + dc
        if not (0 <= r2 < self.nrow and 0 <= c2 < self.ncol) or cells[r2 * self.ncol + c2] == "#":
            return s
        return r2 * self.ncol + c2

    def _outcomes(self, s: int, a: int, cells: str):
        if self.terminal[s]:
            return [(1.0, s, 0.0, True)]
        side1, side2 = _PERPENDICULAR[a]
        moves = [(1.0 - self.slip, a)]
        if self.slip > 0:
            moves += [(self.slip / 2, side1), (self.slip / 2, side2)]
        merged: dict[int, float] = {}
        for prob, direction in moves:
            s2 = self._move(s, direction, cells)
            merged[s2] = merged.get(s2, 0.0) + prob
        outcomes = []
        for s2, prob in merged.items():
            kind = cells[s2]
            if kind == "G":
                outcomes.append((prob, s2, self.goal_reward, True))
            elif kind == "T":
                outcomes.append((prob, s2, self.trap_reward, True))
            else:
                outcomes.append((prob, s2, self.step_reward, False))
        return outcomes

    def _render_text(self) -> str:
        lines = []
        for r in range(self.nrow):
            row = []
            for c in range(self.ncol):
                s = r * self.ncol + c
                ch = self.desc[r, c].decode()
                row.append("@" if s == self.s else ch)
            lines.append(" ".join(row))
        if self.lastaction is not None:
            lines.append(f"({ACTION_NAMES[self.lastaction]})")
        return "\n".join(lines) + "\n"


def sutton_barto_4x4(render_mode: str | None = None) -> GridWorldEnv:
    """Sutton and Barto's Example 4.1: a 4x4 grid whose top-left and bottom-right cells are
    terminal; every move pays -1, the move into a terminal cell included; ``reset`` starts in any
    of the 14 other cells. With gamma = 1 the equiprobable random policy has the values
    0 -14 -20 -22 / -14 -18 -20 -20 / -20 -20 -18 -14 / -22 -20 -14 0.

    Defined in: MDPs and dynamic programming, section Sutton and Barto's 4x4 grid world.
    """
    return GridWorldEnv(SUTTON_BARTO_4X4, goal_reward=-1.0, step_reward=-1.0, render_mode=render_mode)
