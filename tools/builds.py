"""Run one command under several floating-point "builds" of this machine, to check that a claim
holds for more than one realisation of the trained models.

A training run amplifies a last-bit rounding difference into a different model within a few
hundred steps, and the rounding of torch's CPU kernels, MKL and oneDNN depends on the instruction
set they use. A claim asserted on one machine's models may then fail on another CPU (it did: the
GRPO chapter's former +20 points of pass@1, from its 450-step SFT model, held on the machines
that recorded them, not on an AVX-512 machine). Holding the libraries to other code paths gives
other, equally legitimate builds on the same machine, each deterministic; this tool runs a
command under each, with a model cache of its own, and reports which pass. On a CPU without AVX-512 the AVX-512 settings change
nothing, so some builds coincide (the report shows each build's torch capability).

    .venv/bin/python tools/builds.py -- .venv/bin/python -m pytest -q tests/unit/test_grpo_learning.py
    .venv/bin/python tools/builds.py --builds default,avx2 -- .venv/bin/python my_check.py

The default build uses the usual cache (``$RLNOTES_CACHE`` or ``~/.cache/rlnotes``); the others
use ``~/.cache/rlnotes-builds/<name>``, and train their models on first use.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BUILDS = {
    "default": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx2-mkl512": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX512"},
    "avx512-mkl2": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "compatible": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
PROBE = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def build_env(name: str, base: dict | None = None, cache_root: Path | None = None) -> dict:
    """The environment of build ``name``: ``base`` (default: this process's) with the build's
    settings, single-threaded libraries and, except for ``default``, a model cache of its own."""
    if name not in BUILDS:
        raise ValueError(f"build must be one of {', '.join(BUILDS)}, got {name!r}")
    env = dict(os.environ if base is None else base)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.update(BUILDS[name])
    if name != "default":
        root = cache_root if cache_root is not None else Path.home() / ".cache" / "rlnotes-builds"
        env["RLNOTES_CACHE"] = str(root / name)
    return env


def parse_builds(text: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``, each a known build, no repeats."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("builds must name at least one build")
    unknown = [n for n in names if n not in BUILDS]
    if unknown:
        raise ValueError(f"builds must be among {', '.join(BUILDS)}, got {', '.join(unknown)}")
    if len(set(names)) != len(names):
        raise ValueError(f"builds must not repeat a name, got {text!r}")
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--builds", default=",".join(BUILDS), help="comma-separated builds to run")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the command to run after --")
    try:
        names = parse_builds(args.builds)
    except ValueError as err:
        parser.error(str(err))
    rows = []
    for name in names:
        env = build_env(name)
        capability = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                                    text=True).stdout.strip() or "?"
        print(f"== build {name} (torch kernels: {capability}): {' '.join(command)}", flush=True)
        t0 = time.time()
        rc = subprocess.run(command, env=env).returncode
        rows.append((name, capability, rc, time.time() - t0))
    print("\n| build | torch kernels | exit status | seconds |\n| --- | --- | --- | --- |")
    for name, capability, rc, seconds in rows:
        print(f"| {name} | {capability} | {rc} | {seconds:.0f} |")
    return max(rc != 0 for _, _, rc, _ in rows)


if __name__ == "__main__":
    sys.exit(main())
