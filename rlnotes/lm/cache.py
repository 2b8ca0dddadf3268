"""A local cache of trained models: a trained model is a deterministic function of its
configuration (task, sizes, steps, seed) and of the code that trains it, so it is stored under a
hash of both and rebuilt whenever either changes. Nothing is ever downloaded. The code enters
the hash as its syntax tree without docstrings, so editing a docstring or a comment keeps the
cached models; changing what the code does rebuilds them.

The cache lives in ``$RLNOTES_CACHE`` when that is set, else in ``~/.cache/rlnotes``; deleting it
is always safe. ``RLNOTES_CACHE=off`` disables it (every call trains).

Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import tempfile
import textwrap
from pathlib import Path

import torch

__all__ = ["cache_dir", "cache_key", "cached", "code_fingerprint"]


def cache_dir() -> Path | None:
    """The cache folder (created on first write), or None when ``RLNOTES_CACHE=off``.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    env = os.environ.get("RLNOTES_CACHE")
    if env is not None and env.lower() in ("off", "0", "none"):
        return None
    return Path(env) if env else Path.home() / ".cache" / "rlnotes"


def code_fingerprint(obj) -> str:
    """The code of a function, class or module as text that ignores comments, docstrings and
    formatting: ``ast.dump`` of its syntax tree with every docstring removed.

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError) as err:
        raise ValueError(f"code must be functions, classes or modules with source, got {obj!r}") from err
    tree = ast.parse(textwrap.dedent(source))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    return ast.dump(tree)  # no line numbers: moving code does not change it


def cache_key(config: dict, *code) -> str:
    """sha256 of the JSON of ``config`` and the code of each function, class or module in
    ``code`` (:func:`code_fingerprint`: comments and docstrings do not count).

    Defined in: Reinforcement learning from human feedback, section Supervised fine-tuning.
    """
    h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for obj in code:
        h.update(code_fingerprint(obj).encode())
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
