"""Input checks shared by every module.

Every public function of rlnotes validates its inputs with these helpers, so that bad input
raises a ``ValueError`` naming the argument and what was expected, never a silent wrong answer.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def as_array(x, name: str):
    """Return ``x`` as a numpy array or torch tensor (lists become numpy arrays)."""
    if isinstance(x, (np.ndarray, torch.Tensor)):
        return x
    if isinstance(x, (list, tuple, numbers.Number)):
        return np.asarray(x, dtype=np.float64)
    raise ValueError(f"{name} must be a numpy array or torch tensor, got {type(x).__name__}")


def require_tensor(x, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def require_float_tensor(x, name: str) -> torch.Tensor:
    require_tensor(x, name)
    if not torch.is_floating_point(x):
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    return x


def require_finite(x, name: str):
    finite = torch.isfinite(x).all() if is_tensor(x) else np.isfinite(x).all()
    if not bool(finite):
        raise ValueError(f"{name} must contain only finite values")
    return x


def require_ndim(x, name: str, ndims) -> None:
    ndims = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if x.ndim not in ndims:
        want = " or ".join(str(n) for n in ndims)
        raise ValueError(f"{name} must have {want} dimension(s), got shape {tuple(x.shape)}")


def require_same_shape(x, name: str, ref, ref_name: str) -> None:
    if tuple(x.shape) != tuple(ref.shape):
        raise ValueError(
            f"{name} must have the same shape as {ref_name} {tuple(ref.shape)}, "
            f"got {tuple(x.shape)}"
        )


def require_real(value, name: str) -> float:
    """A real Python number (bools and NaN rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def require_in_range(value, name: str, low: float, high: float, *, low_open=False, high_open=False):
    """A real number in [low, high]; ``low_open``/``high_open`` exclude an end."""
    value = require_real(value, name)
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        lo, hi = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {value}")
    return value


def require_int(value, name: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def require_gamma(gamma) -> float:
    return require_in_range(gamma, "gamma", 0.0, 1.0)


def require_binary(x, name: str) -> None:
    """A bool array/tensor, or a numeric one whose entries are all 0 or 1 (masks, done flags)."""
    if is_tensor(x):
        if x.dtype == torch.bool:
            return
        ok = bool(((x == 0) | (x == 1)).all())
    else:
        x = np.asarray(x)
        if x.dtype == np.bool_:
            return
        if not np.issubdtype(x.dtype, np.number):
            raise ValueError(f"{name} must be bool or hold only 0 and 1, got dtype {x.dtype}")
        ok = bool(((x == 0) | (x == 1)).all())
    if not ok:
        raise ValueError(f"{name} must be bool or hold only 0 and 1")


def require_choice(value, name: str, choices) -> str:
    """One of a fixed set of strings (an unknown option names the ones accepted)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value
