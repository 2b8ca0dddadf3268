"""Medians with intervals, and the provenance of a results file (no dependency beyond numpy).

A run that never reached the threshold within its budget is *censored*: it counts as beyond the
budget (+inf) in the median and in the bootstrap, so a median can read "> budget".
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
import sys

import numpy as np

BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 0


def summarize(values, *, level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> dict:
    """Median, its percentile-bootstrap interval (``level``), min and max of ``values``.

    ``values`` holds numbers or None (censored: beyond the budget, taken as +inf). Returns a
    dict with n, n_reached, median, ci_low, ci_high, min, max (floats; inf where censored; min
    and max over every value, None when no value reached). Deterministic for a given ``seed``.
    """
    values = list(values)
    if not values:
        raise ValueError("values must not be empty")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be an int >= 1, got {resamples!r}")
    for v in values:
        if v is not None and (isinstance(v, bool) or not np.isfinite(float(v))):
            raise ValueError(f"values must be finite numbers or None, got {v!r}")
    x = np.array([np.inf if v is None else float(v) for v in values])
    rng = np.random.default_rng(seed)
    boots = np.median(x[rng.integers(len(x), size=(resamples, len(x)))], axis=1)
    alpha = (1 - level) / 2
    # "lower"/"higher" keep an infinite resampled median as it is (no inf - inf interpolation)
    lo = float(np.quantile(boots, alpha, method="lower"))
    hi = float(np.quantile(boots, 1 - alpha, method="higher"))
    reached = x[np.isfinite(x)]
    return dict(n=len(x), n_reached=int(len(reached)), median=float(np.median(x)),
                ci_low=lo, ci_high=hi, min=float(x.min()), max=float(x.max()), level=level)


def separated(a: dict, b: dict) -> int:
    """-1 if summary ``a``'s interval lies wholly below ``b``'s, +1 if wholly above, else 0.

    The only basis on which the book states that one median is lower than the other."""
    if a["ci_high"] < b["ci_low"]:
        return -1
    if a["ci_low"] > b["ci_high"]:
        return 1
    return 0


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else platform's description."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_PEER_ENV = re.compile(r"\S*/(peers-(?:sb3|trl)-[^/\s]+)/")


def repo_command(script: str, argv, root) -> str:
    """The command line as the repository sees it: paths inside the repository relative to it,
    and the peers' environments (made by ``make peers-env`` under the tools cache, outside the
    repository) named ``$(TOOLS_CACHE)/peers-...``, so that no results file holds a path of
    the machine that ran it."""
    args = [a.replace(str(root) + os.sep, "") for a in argv]
    return " ".join(["python", script] + [_PEER_ENV.sub(r"$(TOOLS_CACHE)/\1/", a) for a in args])


def provenance(command: list[str] | str) -> dict:
    """Where and when: date (UTC), CPU model and count, load average, OS, Python, git commit."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        cpu=cpu_model(), cpu_count=os.cpu_count(),
        loadavg_start=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        os=platform.platform(), python=sys.version.split()[0], commit=commit,
        command=command if isinstance(command, str) else " ".join(command),
    )


def results_record(benchmark: str, prov: dict, **fields) -> dict:
    """A results file of a benchmark that trains rlnotes' models: its script, command and
    provenance (the load average at the end added now), the versions it ran with, then
    ``fields``."""
    import torch

    import rlnotes

    prov["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return dict(benchmark=benchmark, command=prov["command"], provenance=prov,
                versions=dict(python=sys.version.split()[0], torch=torch.__version__,
                              numpy=np.__version__, rlnotes=rlnotes.__version__),
                **fields)
