"""Figures of learning from experience: value estimates, learning curves, paths on a grid.

Defined in: Learning without a model: Monte Carlo and TD.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from rlnotes._validate import require_int

__all__ = ["moving_average", "plot_band", "plot_curves", "plot_grid_paths", "plot_value_estimates"]


def moving_average(x, window: int) -> np.ndarray:
    """The mean of each run of ``window`` consecutive entries of ``x`` (shape (T,)): an array of
    length ``T - window + 1``; ``window=1`` returns ``x`` unchanged.

    Defined in: Learning without a model: Monte Carlo and TD, section Cliff walking.
    """
    x = np.asarray(x, dtype=np.float64)
    window = require_int(window, "window", minimum=1)
    if x.ndim != 1 or x.size < window:
        raise ValueError(f"x must be 1-D with at least window={window} entries, got shape {x.shape}")
    c = np.cumsum(np.r_[0.0, x])
    return (c[window:] - c[:-window]) / window


def plot_value_estimates(estimates: dict, v_true, state_names, *, ax=None,
                         title: str | None = None):
    """Value estimates (one line per entry of ``estimates``: label -> (S,) values) against the
    true values, over named states (the book's Example 6.2, left).

    Defined in: Learning without a model: Monte Carlo and TD, section The random walk.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8))
    x = np.arange(len(state_names))
    for label, V in estimates.items():
        ax.plot(x, np.asarray(V), marker="o", ms=4, label=label)
    ax.plot(x, np.asarray(v_true), "k--", lw=1.5, label="true values")
    ax.set_xticks(x, list(state_names))
    ax.set_xlabel("state")
    ax.set_ylabel("estimated value")
    ax.set_ylim(0, 1)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, frameon=False)
    return ax


def plot_curves(curves: dict, *, ax=None, xlabel: str = "episode", ylabel: str = "",
                title: str | None = None, smooth: int = 1, styles: dict | None = None,
                ylim=None, x0: int = 0):
    """Line plot of learning curves: ``curves`` maps a label to a (T,) array (entry t plotted at
    ``x0 + t``), optionally smoothed with a :func:`moving_average` of ``smooth`` points.
    ``styles`` maps a label to matplotlib keyword arguments.

    Defined in: Learning without a model: Monte Carlo and TD, section TD(0) against Monte Carlo.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    styles = styles or {}
    for label, y in curves.items():
        y = moving_average(y, smooth)
        x = x0 + (smooth - 1) + np.arange(y.size)
        ax.plot(x, y, label=label, **styles.get(label, {}))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, frameon=False)
    return ax


def plot_grid_paths(shape, paths: dict, *, blocked=(), start=None, goal=None, ax=None,
                    title: str | None = None, colors: dict | None = None):
    """Draw paths on a grid world whose state ``s`` is the cell ``divmod(s, ncols)``.

    ``paths`` maps a label to a list of states; ``blocked`` lists states drawn as hazards (the
    cliff); ``start`` and ``goal`` are states marked S and G. Paths are offset slightly so that
    overlapping ones stay visible.

    Defined in: Learning without a model: Monte Carlo and TD, section Cliff walking.
    """
    nrows, ncols = shape
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * ncols + 1, 0.55 * nrows + 0.8))
    ax.set_xlim(-0.5, ncols - 0.5)
    ax.set_ylim(nrows - 0.5, -0.5)
    ax.set_aspect("equal")
    for r in range(nrows + 1):
        ax.axhline(r - 0.5, color="0.8", lw=0.8)
    for c in range(ncols + 1):
        ax.axvline(c - 0.5, color="0.8", lw=0.8)
    for s in blocked:
        r, c = divmod(int(s), ncols)
        ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, color="0.35"))
    if blocked:
        cells = [divmod(int(s), ncols) for s in blocked]
        rmid = np.mean([rc[0] for rc in cells])
        cmid = np.mean([rc[1] for rc in cells])
        ax.text(cmid, rmid, "the cliff", color="white", ha="center", va="center", fontsize=9)
    for s, name in ((start, "S"), (goal, "G")):
        if s is not None:
            r, c = divmod(int(s), ncols)
            ax.text(c, r, name, ha="center", va="center", fontsize=12, weight="bold")
    colors = colors or {}
    offsets = np.linspace(-0.15, 0.15, max(len(paths), 1)) if len(paths) > 1 else [0.0]
    for (label, states), off in zip(paths.items(), offsets):
        rc = np.array([divmod(int(s), ncols) for s in states], dtype=float)
        ax.plot(rc[:, 1] + off, rc[:, 0] + off, marker="o", ms=3, lw=2, label=label,
                color=colors.get(label))
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    if paths:
        ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.02),
                  ncol=len(paths))
    return ax


def plot_band(x, curves: dict, *, ax=None, xlabel: str = "environment steps",
              ylabel: str = "mean evaluation return", title: str | None = None,
              band: str = "minmax", styles: dict | None = None, hline=None):
    """Learning curves over several seeds: for each label, the median over seeds as a line and a
    shaded band (``band="minmax"``: from the worst to the best seed; ``"iqr"``: the middle
    half). ``curves`` maps a label to an (n_seeds, T) array whose column t was measured at
    ``x[t]``; ``hline`` draws a dashed reference level (a success threshold).

    ============  ===============  ===============================================
    argument      shape            meaning
    ============  ===============  ===============================================
    ``x``         (T,)             where the columns were measured (e.g. steps)
    ``curves``    label -> (K, T)  one row per seed
    ============  ===============  ===============================================

    Returns the matplotlib ``Axes``.

    Defined in: Deep Q-networks, section DQN on CartPole.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if not isinstance(curves, dict) or not curves:
        raise ValueError("curves must be a non-empty dict label -> (n_seeds, T) array")
    if band not in ("minmax", "iqr"):
        raise ValueError(f"band must be 'minmax' or 'iqr', got {band!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    styles = styles or {}
    for label, Y in curves.items():
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim == 1:
            Y = Y[None]
        if Y.ndim != 2 or Y.shape[1] != x.size:
            raise ValueError(f"curves[{label!r}] must have shape (n_seeds, {x.size}), got "
                             f"{Y.shape}")
        lo, hi = ((Y.min(0), Y.max(0)) if band == "minmax"
                  else (np.percentile(Y, 25, axis=0), np.percentile(Y, 75, axis=0)))
        line, = ax.plot(x, np.median(Y, axis=0), label=f"{label} (median of {Y.shape[0]})",
                        **styles.get(label, {}))
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    if hline is not None:
        ax.axhline(hline, color="k", ls="--", lw=1, label=f"{hline:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, frameon=False)
    return ax
