"""rlnotes.dpo's losses against TRL's own DPOTrainer._compute_loss (benchmarks/peers/trl_dpo_parity.py),
run by the peers' TRL environment when it exists (``make peers-env``)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "peers" / "trl_dpo_parity.py"
TOOLS_CACHE = Path(os.environ.get("TOOLS_CACHE", Path.home() / ".cache" / "rlnotes"))
TRL_PYTHON = TOOLS_CACHE / "peers-trl-1.16.0" / "bin" / "python"


def test_dpo_losses_match_trl_own_code():
    if not TRL_PYTHON.exists():
        pytest.skip(f"TRL 1.16's peers environment is not installed ({TRL_PYTHON}; make peers-env)")
    proc = subprocess.run([str(TRL_PYTHON), str(SCRIPT)], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300)
    out = json.loads(proc.stdout)
    assert out["trl"] == "1.16.0"
    assert {k.split(",")[0] for k in out["diffs"]} == {"sigmoid", "hinge", "ipo", "robust"}
    assert len(out["diffs"]) == 18  # 3 betas x (sigmoid, hinge, ipo, robust at 3 label smoothings)
    assert out["max_abs_diff"] < 1e-10, out
    assert out["control"]["min_abs_diff"] > 1e-10, out  # a 0.01 % change of beta is caught
    assert proc.returncode == 0, proc.stderr
