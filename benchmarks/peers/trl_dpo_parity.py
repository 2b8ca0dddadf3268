"""Parity of rlnotes.dpo's losses with TRL's own DPO loss code, not a transcription of it.

Run by the peers' TRL environment (``make peers-env``), from the repository root:

    $(TOOLS_CACHE)/peers-trl-1.16.0/bin/python benchmarks/peers/trl_dpo_parity.py

It calls ``DPOTrainer._compute_loss`` of the installed TRL on an object built with
``object.__new__`` that holds only the attributes the method reads, with a stand-in model whose
output ``log_probs`` are random per-token log-probabilities (zero on padding, as TRL's fused
head returns them for labels -100) and with the reference log-probs precomputed. On the same
numbers it evaluates rlnotes' losses (``dpo_loss``, ``ipo_loss`` on per-token averaged
log-probs, ``dpo_loss_variant``) and prints one JSON object: TRL's version and, per loss
("sigmoid", "hinge", "ipo", "robust" at each label smoothing, each beta), the largest absolute
difference. It exits 1 if one exceeds 1e-10 (float64), or if its control fails: with rlnotes'
beta changed by 0.01 %, every loss but the hinge must differ by more than 1e-10. TRL 1.16's "sigmoid" has no label
smoothing; the smoothed sigmoid of ``dpo_loss_variant`` (TRL's earlier "sigmoid") is not
compared here.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's rlnotes

import trl  # noqa: E402
from trl.trainer.dpo_trainer import DPOTrainer  # noqa: E402

from rlnotes import dpo  # noqa: E402

BETAS = (0.1, 0.5, 2.0)
SMOOTHINGS = (0.0, 0.1, 0.3)
TOL = 1e-10


class _Accelerator:
    device = torch.device("cpu")

    @staticmethod
    def gather_for_metrics(x):
        return x

    gather = gather_for_metrics


class _Model:
    """Stands in for the policy: returns the given per-token log-probs (B2, L-1), whatever the input."""

    training = True

    def __init__(self, token_logps):
        self.token_logps = token_logps

    def __call__(self, **kwargs):
        lp = self.token_logps
        return SimpleNamespace(log_probs=lp, entropy=torch.zeros_like(lp), mean_logits=torch.zeros_like(lp),
                               is_top1=torch.zeros_like(lp, dtype=torch.bool))


def trl_loss(loss_type, beta, label_smoothing, token_logps, completion_mask, ref_c, ref_r):
    """TRL's DPOTrainer._compute_loss on a minimal trainer object."""
    t = object.__new__(DPOTrainer)
    model = _Model(token_logps)
    t.model, t.accelerator = model, _Accelerator()
    t.aux_loss_enabled, t.ld_alpha, t.precompute_ref_logps = False, None, True
    t.f_divergence_type, t.loss_types, t.loss_weights = "reverse_kl", [loss_type], [1.0]
    t.beta, t.label_smoothing, t.use_weighting = beta, label_smoothing, False
    t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    t._total_train_tokens, t._tp_size = 0, 1
    inputs = dict(input_ids=torch.zeros_like(completion_mask), attention_mask=torch.ones_like(completion_mask),
                  completion_mask=completion_mask, ref_chosen_logps=ref_c, ref_rejected_logps=ref_r)
    return DPOTrainer._compute_loss(t, model, inputs, return_outputs=False)


def compare(n_pairs=64, length=12, seed=0, perturb=0.0):
    """Per loss and beta, |rlnotes - TRL|. ``perturb``: a relative change of rlnotes' beta."""
    g = torch.Generator().manual_seed(seed)
    # completion masks: a prompt token, then 1..length-1 completion tokens, then padding
    lengths = torch.randint(1, length, (2 * n_pairs,), generator=g)
    pos = torch.arange(length)
    completion_mask = ((pos >= 1) & (pos <= lengths[:, None])).long()
    shift = completion_mask[:, 1:].double()
    token_logps = -3 * torch.rand(2 * n_pairs, length - 1, generator=g, dtype=torch.float64) * shift
    ref_token = -3 * torch.rand(2 * n_pairs, length - 1, generator=g, dtype=torch.float64) * shift
    seq = dpo.sequence_logprob(token_logps, shift)  # rlnotes' summed log-probs
    ref_seq = dpo.sequence_logprob(ref_token, shift)
    n_tok = shift.sum(1)
    pc, pr = seq.chunk(2)
    rc, rr = ref_seq.chunk(2)
    nc, nr = n_tok.chunk(2)
    diffs = {}
    for beta in BETAS:
        b = beta * (1 + perturb)
        ours = {
            "sigmoid": dpo.dpo_loss(pc, pr, rc, rr, b),
            "hinge": dpo.dpo_loss_variant(pc, pr, rc, rr, b, "hinge"),
            # TRL's IPO divides each completion's log-ratio by its token count
            "ipo": dpo.ipo_loss(pc / nc, pr / nr, rc / nc, rr / nr, b),
        }
        for name, value in ours.items():
            theirs = trl_loss(name, beta, 0.0, token_logps, completion_mask, rc, rr)
            diffs[f"{name}, beta {beta}"] = abs(float(value) - float(theirs))
        for p in SMOOTHINGS:
            value = dpo.dpo_loss_variant(pc, pr, rc, rr, b, "robust", label_smoothing=p)
            theirs = trl_loss("robust", beta, p, token_logps, completion_mask, rc, rr)
            diffs[f"robust, label smoothing {p}, beta {beta}"] = abs(float(value) - float(theirs))
    return diffs


def main():
    diffs = compare()
    # the control: rlnotes' beta 0.01 % off must be caught by every loss but the hinge's
    # (whose relu can be flat on a pair)
    control = {k: d for k, d in compare(perturb=1e-4).items() if not k.startswith("hinge")}
    out = dict(trl=trl.__version__, n_pairs=64, dtype="float64", tol=TOL,
               max_abs_diff=max(diffs.values()), diffs=diffs,
               control=dict(perturb=1e-4, min_abs_diff=min(control.values())))
    print(json.dumps(out, indent=1))
    return 0 if out["max_abs_diff"] <= TOL < out["control"]["min_abs_diff"] else 1


if __name__ == "__main__":
    sys.exit(main())
