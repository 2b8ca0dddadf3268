"""A local cache of trained models: a trained model is a deterministic function of its
configuration (task, sizes, steps, seed) and of the code that trains it, so it is stored under a
hash of both and rebuilt whenever either changes. Nothing is ever downloaded.

The cache lives in ``$RLNOTES_CACHE`` when that is set, else in ``~/.cache/rlnotes``; deleting it
is always safe. ``RLNOTES_CACHE=off`` disables it (every call trains).

Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
from pathlib import Path

import torch

__all__ = ["cache_dir", "cache_key", "cached"]


def cache_dir() -> Path | None:
    """The cache folder (created on first write), or None when ``RLNOTES_CACHE=off``.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    env = os.environ.get("RLNOTES_CACHE")
    if env is not None and env.lower() in ("off", "0", "none"):
        return None
    return Path(env) if env else Path.home() / ".cache" / "rlnotes"


def cache_key(config: dict, *code) -> str:
    """sha256 of the JSON of ``config`` and the source of each function or module in ``code``.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for obj in code:
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()[:20]


def cached(name: str, config: dict, build, *code):
    """Return ``build()``'s result (a dict of tensors and plain values), from the cache when an
    entry for (config, code) exists, else computing and storing it.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    folder = cache_dir()
    if folder is None:
        return build()
    path = folder / "lm" / f"{name}-{cache_key(config, *code)}.pt"
    if path.exists():
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except Exception:  # a truncated or foreign file: rebuild it
            path.unlink(missing_ok=True)
    result = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        torch.save(result, tmp)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:
        pass  # a read-only home: the result is still returned
    return result
