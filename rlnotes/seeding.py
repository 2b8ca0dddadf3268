"""Seeding: one call makes a run reproducible (chapter conventions, see CONTRIBUTING.md)."""

from __future__ import annotations

import random

import numpy as np
import torch

from rlnotes._validate import require_int


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's, numpy's and torch's global generators and return a fresh numpy Generator.

    Code in rlnotes takes explicit ``seed`` or ``rng`` arguments; this helper is for notebooks,
    so that a rerun prints the same numbers.

    Example: ``rng = seed_everything(0)``.
    """
    seed = require_int(seed, "seed", minimum=0)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)
