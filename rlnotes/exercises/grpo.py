"""Checks of the exercises of the chapter "GRPO".

Each check calls the reader's function on random inputs with fixed seeds, compares with
rlnotes.grpo's implementation, and recognises the usual mistakes (the population std instead of
Bessel's, a batch-wide mean, no centring; the three loss aggregations confused with each other;
micro-batches normalised by their own token counts).
"""

from __future__ import annotations

import numpy as np
import torch

import rlnotes.grpo as grpo
from rlnotes.exercises.core import check, ExerciseFailed, expect_close, expect_own_work, format_mismatch
from rlnotes.exercises.core import as_float_array as _numpy, call_reader as _call

__all__ = ["check_group_advantages", "check_group_advantages_by_id", "check_grpo_aggregate",
           "check_micro_batch_losses"]



def _matches(a, b):
    return a.shape == b.shape and np.allclose(a, b, atol=1e-6, rtol=1e-6)


@check
def check_group_advantages(my_group_advantages):
    """``my_group_advantages(rewards, G)`` -> (B*G,) GRPO advantages (group std, eps = 1e-4)."""
    expect_own_work(my_group_advantages, grpo.group_advantages, grpo.rloo_advantages)
    for seed, G in ((0, 4), (1, 8), (2, 2)):
        g = torch.Generator().manual_seed(seed)
        rewards = torch.randint(0, 2, (5 * G,), generator=g).double()
        rewards[:G] = 1.0  # an all-correct group: advantage 0
        rewards[G:2 * G] = torch.randn(G, generator=g, dtype=torch.float64)
        got = _numpy(_call(my_group_advantages, "my_group_advantages", rewards.clone(), G), "the advantages")
        want = grpo.group_advantages(rewards, G).numpy()
        grouped = rewards.view(-1, G)
        centred = (grouped - grouped.mean(1, keepdim=True))
        if got.shape == want.shape:
            pop = (centred / (grouped.std(1, unbiased=False, keepdim=True) + 1e-4)).reshape(-1).numpy()
            if _matches(got, pop) and not _matches(pop, want):
                raise ExerciseFailed("The std is the population std (divide by G).",
                                     "GRPO (and torch.std) use Bessel's correction: divide by G - 1.")
            if _matches(got, (rewards - rewards.mean()).numpy()) or \
                    _matches(got, ((rewards - rewards.mean()) / (rewards.std() + 1e-4)).numpy()):
                raise ExerciseFailed("The baseline is the mean over the whole batch.",
                                     "Each completion is compared with its own group: "
                                     "rewards.view(-1, G).mean(1).")
            if _matches(got, centred.reshape(-1).numpy()) and not _matches(centred.reshape(-1).numpy(), want):
                raise ExerciseFailed("The advantages are centred but not divided by the group std.",
                                     "That is Dr. GRPO's advantage; GRPO divides by std + 1e-4.")
            if _matches(got, (grouped / (grouped.std(1, keepdim=True) + 1e-4)).reshape(-1).numpy()):
                raise ExerciseFailed("The group mean is not subtracted.",
                                     "A_i = (r_i - mean of the group) / (std of the group + 1e-4).")
        expect_close(got, want, "the advantages",
                     hint="view(-1, G): subtract each row's mean, divide by its std (n - 1) + 1e-4.")


@check
def check_grpo_aggregate(my_grpo_aggregate):
    """``my_grpo_aggregate(per_token, mask, loss_type, max_tokens)`` -> the scalar loss."""
    expect_own_work(my_grpo_aggregate, grpo.grpo_loss)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        B, T = 6, 7
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        lengths[0] = 1
        mask = (torch.arange(T)[None] < lengths[:, None]).long()
        m = mask.double()
        # padding holds large finite garbage: a numerator that is not masked shows
        per_token = torch.randn((B, T), generator=g, dtype=torch.float64) * m \
            + 1e3 * torch.randn((B, T), generator=g, dtype=torch.float64) * (1 - m)
        max_tokens = T + 1 + seed
        want = {
            "grpo": ((per_token * m).sum(1) / m.sum(1)).mean(),
            "dapo": (per_token * m).sum() / m.sum(),
            "dr_grpo": (per_token * m).sum() / (B * max_tokens),
        }
        for loss_type, w in want.items():
            out = _call(my_grpo_aggregate, "my_grpo_aggregate", per_token.clone(), mask.clone(),
                        loss_type, max_tokens)
            got = _numpy(out, f"the {loss_type!r} loss")
            if got.shape != ():
                raise ExerciseFailed(f"The {loss_type!r} loss has shape {got.shape}: expected a scalar.",
                                     "Reduce over both the batch and the tokens.")
            if loss_type != "dr_grpo" and _matches(got, per_token.mean().numpy()):
                raise ExerciseFailed("The padding was averaged in.", "Divide by the number of real tokens.")
            unmasked = {"grpo": (per_token.sum(1) / m.sum(1)).mean(), "dapo": per_token.sum() / m.sum(),
                        "dr_grpo": per_token.sum() / (B * max_tokens)}[loss_type]
            if _matches(got, unmasked.numpy()):
                raise ExerciseFailed("The padded positions were summed in (the numerator is not masked).",
                                     "Padding may hold anything: multiply per_token by the mask first.")
            for other, v in want.items():
                if other != loss_type and _matches(got, v.numpy()) and not _matches(v.numpy(), w.numpy()):
                    raise ExerciseFailed(f"loss_type={loss_type!r} computed the {other!r} aggregation.",
                                         "grpo: mean of per-sequence token means; dapo: sum over all "
                                         "tokens / their number; dr_grpo: sum / (B * max_tokens).")
            if loss_type == "dr_grpo" and _matches(got, ((per_token * m).sum() / (B * T)).numpy()):
                raise ExerciseFailed("dr_grpo divided by B * T, not B * max_tokens.",
                                     "The constant is the generation budget max_tokens.")
            expect_close(got, w.numpy(), f"the {loss_type!r} loss",
                         hint="Multiply by the mask before summing; count tokens with mask.sum.")


def _by_id_reference(rewards, ids, eps=1e-4):
    """GRPO's advantages with groups given by ids (any order, any group size >= 2), from
    rlnotes.grpo.group_advantages applied to each group."""
    out = torch.empty_like(rewards)
    for i in torch.unique(ids):
        sel = ids == i
        out[sel] = grpo.group_advantages(rewards[sel], int(sel.sum()), eps=eps)
    return out


@check
def check_group_advantages_by_id(my_group_advantages_by_id):
    """``my_group_advantages_by_id(rewards, ids)`` -> (N,) GRPO advantages, completion i's group
    being all completions with the same id (in any order, groups of any size >= 2)."""
    expect_own_work(my_group_advantages_by_id, grpo.group_advantages, grpo.rloo_advantages)
    for seed, sizes in ((0, (4, 4, 4, 4)), (1, (2, 5, 3, 8, 2)), (2, (6, 6, 6))):
        g = torch.Generator().manual_seed(seed)
        labels = torch.randperm(1000, generator=g)[:len(sizes)] + 7  # arbitrary prompt ids
        ids = torch.cat([torch.full((n,), int(lab)) for n, lab in zip(sizes, labels)])
        rewards = torch.randint(0, 2, (len(ids),), generator=g).double()
        rewards[:sizes[0]] = 1.0  # an all-correct group: advantage 0
        perm = torch.randperm(len(ids), generator=g)
        ids, rewards = ids[perm], rewards[perm]
        got = _numpy(_call(my_group_advantages_by_id, "my_group_advantages_by_id", rewards.clone(), ids.clone()),
                     "the advantages")
        want = _by_id_reference(rewards, ids).numpy()
        if got.shape == want.shape and not _matches(got, want):
            G = sizes[0]
            if len(set(sizes)) == 1 and len(ids) % G == 0 and \
                    _matches(got, grpo.group_advantages(rewards, G).numpy()):
                raise ExerciseFailed("The groups were taken as contiguous blocks of the batch.",
                                     "Here a group is every completion with the same id, wherever it "
                                     "sits: select them with ids == i.")
            pop = torch.empty_like(rewards)
            for i in torch.unique(ids):
                sel = ids == i
                r = rewards[sel]
                pop[sel] = (r - r.mean()) / (r.std(unbiased=False) + 1e-4)
            if _matches(got, pop.numpy()):
                raise ExerciseFailed("The std is the population std (divide by the group size).",
                                     "GRPO (and torch.std) use Bessel's correction: divide by n - 1.")
            if _matches(got, ((rewards - rewards.mean()) / (rewards.std() + 1e-4)).numpy()):
                raise ExerciseFailed("The baseline is the mean over the whole batch.",
                                     "Each completion is compared with the completions of its own id.")
        expect_close(got, want, "the advantages",
                     hint="for each id i: sel = ids == i; A[sel] = (r[sel] - mean) / (std + 1e-4).")


def _micro_batches(seed):
    """n_mb micro-batches of equal rows and unequal token counts, padding full of large garbage, the
    per-token losses on policy (ratio 1, no penalty) as functions of a logp that takes gradients."""
    g = torch.Generator().manual_seed(seed)
    n_mb, b, L = (4, 3, 6) if seed % 2 == 0 else (3, 5, 7)
    lengths = torch.randint(1, L + 1, (n_mb * b,), generator=g)
    lengths[:b] = 1  # a micro-batch of one-token completions: its own count differs a lot
    lengths[b:2 * b] = L
    mask = torch.arange(L)[None] < lengths[:, None]
    adv = torch.randn(n_mb * b, generator=g, dtype=torch.float64)
    logp = (-torch.rand((n_mb * b, L), generator=g, dtype=torch.float64)).requires_grad_(True)
    garbage = 1e3 * torch.randn((n_mb * b, L), generator=g, dtype=torch.float64)
    return n_mb, b, mask, adv, logp, garbage


@check
def check_micro_batch_losses(my_micro_batch_losses):
    """``my_micro_batch_losses(per_token_chunks, mask_chunks)`` -> n_mb scalar losses, one per
    micro-batch, whose sum (the gradients accumulated over n_mb backward passes) equals the
    token-level loss (``grpo_loss(loss_type="dapo")``) of the whole batch, value and gradient."""
    expect_own_work(my_micro_batch_losses, grpo.grpo_loss)
    for seed in range(3):
        n_mb, b, mask, adv, logp, garbage = _micro_batches(seed)
        m = mask.double()
        # the per-token loss grpo_loss aggregates, on policy: -A * ratio, ratio = 1 with gradient
        per_token = -adv[:, None] * torch.exp(logp - logp.detach())
        per_token = torch.where(mask, per_token, garbage)  # padding may hold anything
        chunks = list(per_token.split(b))
        masks = [x.clone() for x in mask.split(b)]
        out = _call(my_micro_batch_losses, "my_micro_batch_losses", chunks, masks)
        try:
            losses = list(out)
        except TypeError:
            raise ExerciseFailed(f"my_micro_batch_losses returned a {type(out).__name__}: expected "
                                 f"a list of {n_mb} scalar losses.", "One loss per micro-batch.") from None
        if len(losses) != n_mb:
            raise ExerciseFailed(f"{len(losses)} losses for {n_mb} micro-batches.", "One loss per micro-batch.")
        for j, loss in enumerate(losses):
            if not isinstance(loss, torch.Tensor) or loss.shape != () or not loss.requires_grad:
                raise ExerciseFailed(f"Loss {j} is not a scalar tensor that carries the gradient.",
                                     "Build each loss from its chunk with torch operations.")
        got = sum(float(x.detach()) for x in losses)
        want = float(grpo.grpo_loss(logp.detach(), None, None, adv, mask, loss_type="dapo"))
        pm = (per_token.detach() * m).split(b)
        ms = m.split(b)
        own = sum(float(x.sum() / c.sum()) for x, c in zip(pm, ms))
        unmasked = float(per_token.detach().sum() / m.sum())
        if np.isclose(got, own) and not np.isclose(own, want):
            raise ExerciseFailed("Each micro-batch was divided by its own token count: "
                                 f"{format_mismatch(got, want)}.",
                                 "Every token of the whole batch weighs the same: divide each "
                                 "micro-batch's sum by the token count of all n_mb micro-batches.")
        if np.isclose(got, own / n_mb) and not np.isclose(own / n_mb, want):
            raise ExerciseFailed("The micro-batch means were averaged (each divided by its own token "
                                 f"count, then by n_mb): {format_mismatch(got, want)}.",
                                 "That weighs a token of a short micro-batch more than one of a long "
                                 "micro-batch; divide by the token count of the whole batch.")
        if np.isclose(got, want / n_mb) and not np.isclose(want / n_mb, want):
            raise ExerciseFailed(f"The losses sum to 1/n_mb of the batch's loss: {format_mismatch(got, want)}.",
                                 "Gradients accumulate as a sum: do not divide by n_mb as well.")
        if not np.isfinite(got):
            raise ExerciseFailed("The summed losses are NaN or infinite.",
                                 "Check for a division by zero, and select the real tokens with the mask.")
        if abs(got - unmasked) < 1e-3 * abs(unmasked) or abs(got) > 100:
            raise ExerciseFailed(f"The padded positions were summed in: {format_mismatch(got, want)}.",
                                 "Padding may hold anything: select the real tokens with the mask "
                                 "(torch.where or multiply) before summing.")
        if not np.isclose(got, want, atol=1e-9, rtol=1e-9):
            raise ExerciseFailed(f"The summed losses are off: {format_mismatch(got, want, atol=1e-9, rtol=1e-9)}.",
                                 "sum over micro-batches of (masked sum of the chunk) / (real tokens "
                                 "of all chunks).")
        # the gradient the K backward passes accumulate, against grpo_loss's on the whole batch
        logp.grad = None
        sum(losses).backward()
        got_grad = logp.grad.detach().clone()
        ref = logp.detach().clone().requires_grad_(True)
        grpo.grpo_loss(ref, None, None, adv, mask, loss_type="dapo").backward()
        expect_close(got_grad, ref.grad, "the accumulated gradient of logp", atol=1e-9, rtol=1e-7,
                     hint="The gradient must match grpo_loss(loss_type='dapo') on the whole batch: "
                          "use torch operations only, on the chunks you were given.")
