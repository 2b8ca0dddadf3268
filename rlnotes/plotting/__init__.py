"""Figures of the book. Each submodule holds the plots of one kind of result; the names below
are re-exported for convenience."""
