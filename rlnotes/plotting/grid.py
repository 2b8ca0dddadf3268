"""Value heat maps with policy arrows for grid-shaped MDPs (the grid worlds, the 2x3 maze,
FrozenLake, CliffWalking).

States are numbered row by row (``s = row * ncol + col``) and actions follow gymnasium's
FrozenLake: 0 = left, 1 = down, 2 = right, 3 = up (``ACTION_ARROWS`` maps them to arrows).

Defined in: MDPs and dynamic programming, section Two environments.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["ACTION_ARROWS", "cell_labels", "plot_value_grid"]

#: Arrow direction (dx, dy) in image coordinates (y grows downwards) of each action.
ACTION_ARROWS = {0: (-1.0, 0.0), 1: (0.0, 1.0), 2: (1.0, 0.0), 3: (0.0, -1.0)}


def _numpy(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.dtype == object:
        raise ValueError(f"{name} must be a numeric array")
    return x


def cell_labels(desc, show: str = "GTH#") -> dict:
    """Labels of the special cells of a grid description, ``{state: letter}``.

    ``desc`` is a (nrow, ncol) array of single characters or bytes (``env.unwrapped.desc`` of
    FrozenLake or of :class:`rlnotes.envs.gridworld.GridWorldEnv`), or a list of strings.
    Only the letters in ``show`` are labelled (goal, trap, hole and wall by default; add ``S``
    for the start cell).

    Defined in: MDPs and dynamic programming, section Two environments.
    """
    rows = ["".join(c.decode() if isinstance(c, bytes) else str(c) for c in row) for row in desc]
    ncol = len(rows[0])
    return {r * ncol + c: ch for r, row in enumerate(rows) for c, ch in enumerate(row) if ch in show}


def plot_value_grid(V, shape, *, policy=None, ax=None, hide=None, labels=None, annotate=True,
                    fmt: str = "{:.2f}", cmap: str = "RdYlGn", vmin=None, vmax=None,
                    title: str | None = None, colorbar: bool = False, arrows=ACTION_ARROWS,
                    shade_labels: bool = True):
    """Draw state values as a heat map on the grid, with the policy as arrows.

    ==============  ===============  ================================================================
    argument        shape            meaning
    ==============  ===============  ================================================================
    ``V``           (S,)             state values, S = nrow * ncol, row by row
    ``shape``       (nrow, ncol)     the grid
    ``policy``      (S,) or (S, A)   one action per state (one arrow), or probabilities (an arrow
                                     per action, its length proportional to the probability,
                                     full length for the most likely action)
    ``hide``        (S,) bool        cells without arrows (terminal cells, walls)
    ``labels``      dict             ``{state: text}`` written in the cell instead of its value;
                                     with ``shade_labels`` the cells labelled G, T, H or # are grey
                                     and get no arrow
    ``annotate``    bool             write the values in the cells
    ==============  ===============  ================================================================

    Returns the matplotlib ``Axes``.

    Defined in: MDPs and dynamic programming, section Two environments.
    """
    V = _numpy(V, "V").astype(np.float64)
    if len(shape) != 2 or int(shape[0]) * int(shape[1]) != V.size or V.ndim != 1:
        raise ValueError(f"shape must be (nrow, ncol) with nrow * ncol = V.size = {V.size}, got {shape}")
    nrow, ncol = int(shape[0]), int(shape[1])
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * ncol + 1, 0.6 * nrow + 0.6))
    hide = np.zeros(V.size, dtype=bool) if hide is None else _numpy(hide, "hide").astype(bool)
    if hide.shape != V.shape:
        raise ValueError(f"hide must have shape {V.shape}, got {hide.shape}")
    labels = {} if labels is None else labels
    special = np.zeros(V.size, dtype=bool)
    for s, text in labels.items():
        special[s] = shade_labels and str(text) in ("G", "T", "H", "#")
    shown = np.where(special, np.nan, V)
    colormap = plt.get_cmap(cmap).with_extremes(bad="0.85")
    image = ax.imshow(shown.reshape(nrow, ncol), cmap=colormap, vmin=vmin, vmax=vmax)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    small = max(5.0, 9.0 - 0.4 * max(nrow, ncol))
    has_arrows = policy is not None
    text_y = -0.25 if has_arrows else 0.0
    for s in range(V.size):
        r, c = divmod(s, ncol)
        if s in labels:
            ax.text(c, r, str(labels[s]), ha="center", va="center", fontsize=small + 3,
                    fontweight="bold")
        elif annotate:
            value = float(np.round(V[s], 10)) + 0.0  # no "-0.00" from rounding noise
            ax.text(c, r + text_y, fmt.format(value), ha="center", va="center", fontsize=small)
    if has_arrows:
        pi = _numpy(policy, "policy")
        if pi.shape[0] != V.size or pi.ndim not in (1, 2):
            raise ValueError(f"policy must have shape (S,) or (S, A) with S = {V.size}, got {pi.shape}")
        probs = np.eye(len(arrows))[pi.astype(np.int64)] if pi.ndim == 1 else pi.astype(np.float64)
        for s in range(V.size):
            if hide[s] or special[s]:
                continue
            r, c = divmod(s, ncol)
            y0 = r + (0.15 if annotate else 0.0)
            for a, p in enumerate(probs[s]):
                if p <= 0:
                    continue
                dx, dy = arrows[a]
                length = 0.32 * p / probs[s].max()  # the most likely action gets a full arrow
                ax.annotate("", xy=(c + dx * length, y0 + dy * length), xytext=(c, y0),
                            arrowprops=dict(arrowstyle="-|>", lw=1.0, color="black",
                                            shrinkA=0, shrinkB=0, mutation_scale=7))
    ax.set_xticks(np.arange(-0.5, ncol, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, nrow, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=1.0)
    ax.tick_params(which="both", bottom=False, left=False, labelbottom=False, labelleft=False)
    if title:
        ax.set_title(title)
    return ax
