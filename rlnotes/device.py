"""Device choice: the same code runs on a CPU and uses a GPU when one is there."""

from __future__ import annotations

import os

import torch


def get_device(prefer: str | None = None) -> torch.device:
    """Return the device the book's torch code should use.

    Order: the argument ``prefer`` ("cpu", "cuda", "mps"), else the environment variable
    ``RLNOTES_DEVICE``, else CUDA when available, else Apple's MPS when available, else the CPU.
    Asking for a device that is not available raises ``ValueError``.
    """
    choice = prefer if prefer is not None else os.environ.get("RLNOTES_DEVICE")
    if choice is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if not isinstance(choice, str) or choice.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ValueError(f"prefer must be 'cpu', 'cuda' or 'mps' (or RLNOTES_DEVICE), got {choice!r}")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"prefer={choice!r} but CUDA is not available on this machine")
    if choice == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("prefer='mps' but MPS is not available on this machine")
    return torch.device(choice)
