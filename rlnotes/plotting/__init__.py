"""Figures of the book. Each submodule holds the plots of one kind of result; the names below
are re-exported for convenience."""

from rlnotes.plotting.learning import (  # noqa: F401
    moving_average, plot_band, plot_curves, plot_grid_paths, plot_value_estimates)
from rlnotes.plotting.grid import ACTION_ARROWS, cell_labels, plot_value_grid  # noqa: F401
