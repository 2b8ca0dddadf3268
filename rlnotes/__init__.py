"""rlnotes: the companion package of the rlnotes textbook of reinforcement learning.

Each module holds one concept of the book and names, in its docstrings, the chapter section
that defines it. Submodules are imported on demand (``import rlnotes.mdp``), so that importing
the package stays cheap.
"""

__version__ = "0.1.0"

from rlnotes.device import get_device
from rlnotes.seeding import seed_everything

__all__ = ["__version__", "get_device", "seed_everything"]
