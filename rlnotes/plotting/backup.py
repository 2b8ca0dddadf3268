"""Backup diagrams (Sutton and Barto's notation): open circles are states, filled dots actions;
a backup passes values up the tree from the leaves to the root. An arc across the branches
marks a maximum instead of an expectation.

Defined in: MDPs and dynamic programming, section The Bellman equations.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Arc, Circle

__all__ = ["plot_backup_diagrams"]

_STATE_R, _ACTION_R = 0.09, 0.045


def _node(ax, x, y, kind):
    if kind == "s":
        ax.add_patch(Circle((x, y), _STATE_R, facecolor="white", edgecolor="black", lw=1.4, zorder=3))
    else:
        ax.add_patch(Circle((x, y), _ACTION_R, facecolor="black", edgecolor="black", zorder=3))


def _tree(ax, levels, maxes, spread=0.55):
    """Draw a tree whose node kinds per level are ``levels`` (e.g. "sas"); two children per node.
    ``maxes``: the levels (indices of parent level) whose branching is a max (drawn as an arc)."""
    positions = [[(0.0, 0.0)]]
    for depth in range(1, len(levels)):
        width = spread / (2 ** (depth - 1))
        y = -0.5 * depth
        row = []
        for x, _ in positions[-1]:
            for dx in (-width / 2, width / 2):
                row.append((x + dx, y))
        positions.append(row)
    for depth in range(1, len(levels)):
        for i, (x, y) in enumerate(positions[depth]):
            px, py = positions[depth - 1][i // 2]
            ax.plot([px, x], [py, y], color="black", lw=1.0, zorder=1)
        if depth - 1 in maxes:
            for px, py in positions[depth - 1]:
                ax.add_patch(Arc((px, py), 0.36, 0.36, theta1=225, theta2=315,
                                 lw=1.2, color="C3", zorder=2))
    for depth, kind in enumerate(levels):
        for x, y in positions[depth]:
            _node(ax, x, y, kind)


def plot_backup_diagrams(axes=None):
    """The four backup diagrams of the Bellman equations: V^pi, V*, Q^pi and Q* (maxima in red).

    Returns the matplotlib figure.

    Defined in: MDPs and dynamic programming, section The Bellman equations.
    """
    if axes is None:
        fig, axes = plt.subplots(1, 4, figsize=(11, 3.0))
    else:
        fig = axes[0].figure
    specs = [("sas", set(), "$V^\\pi$: average over $a$ and $s'$"),
             ("sas", {0}, "$V^*$: max over $a$, average over $s'$"),
             ("asa", set(), "$Q^\\pi$: average over $s'$ and $a'$"),
             ("asa", {1}, "$Q^*$: average over $s'$, max over $a'$")]
    for ax, (levels, maxes, title) in zip(axes, specs):
        _tree(ax, levels, maxes)
        ax.set_xlim(-0.65, 0.65)
        ax.set_ylim(-1.2, 0.2)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
