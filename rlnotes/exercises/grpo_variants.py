"""Checks of the exercises of the chapter "Dr. GRPO, DAPO and process supervision".

Each check calls the reader's function on random inputs with fixed seeds, compares with
rlnotes.grpo's implementation, and recognises the usual mistakes (the overlong penalty with the
wrong sign, as a hard limit, or with its ramp in the wrong place; DAPO's filter applied to the
shaped reward instead of the accuracy, or not capped at B groups).
"""

from __future__ import annotations

import numpy as np
import torch

import rlnotes.grpo as grpo
from rlnotes.exercises.core import check, ExerciseFailed, expect_close, expect_own_work
from rlnotes.exercises.core import as_float_array as _numpy, call_reader as _call

__all__ = ["check_overlong_advantages", "check_accuracy_filter"]


def _matches(a, b):
    return a.shape == b.shape and np.allclose(a, b, atol=1e-6, rtol=1e-6)


def _overlong_cases():
    """(correct, lengths, G, max_len, cache_len): lengths on both sides of every boundary."""
    for seed, G, max_len, cache_len in ((0, 4, 8, 4), (1, 8, 12, 3), (2, 6, 10, 5)):
        g = torch.Generator().manual_seed(seed)
        n = 5 * G
        correct = torch.randint(0, 2, (n,), generator=g).double()
        correct[:G] = 1.0  # an all-correct group: only the penalty can tell its completions apart
        lengths = torch.randint(1, max_len + 3, (n,), generator=g)
        lengths[:4] = torch.tensor([max_len - cache_len, max_len - cache_len + 1, max_len, max_len + 1])
        yield correct, lengths, G, max_len, cache_len


@check
def check_overlong_advantages(my_overlong_advantages):
    """``my_overlong_advantages(correct, lengths, G, max_len, cache_len)`` -> (B*G,) GRPO
    advantages (group std, eps = 1e-4) of the reward ``correct`` plus DAPO's soft overlong
    penalty of ``lengths``."""
    expect_own_work(my_overlong_advantages, grpo.overlong_penalty, grpo.group_advantages,
                    grpo.rloo_advantages)
    for correct, lengths, G, max_len, cache_len in _overlong_cases():
        got = _numpy(_call(my_overlong_advantages, "my_overlong_advantages", correct.clone(), lengths.clone(),
                           G, max_len, cache_len), "the advantages")
        want = grpo.group_advantages(correct + grpo.overlong_penalty(lengths, max_len, cache_len), G).numpy()
        if got.shape == want.shape and not _matches(got, want):
            adv = lambda r: grpo.group_advantages(r, G).numpy()  # noqa: E731
            pen = grpo.overlong_penalty(lengths, max_len, cache_len)
            if _matches(got, adv(correct)):
                raise ExerciseFailed("The advantages ignore the length: the penalty was not added.",
                                     "DAPO adds the penalty to the reward before the group "
                                     "normalisation: r = correct + penalty(length).")
            if _matches(got, adv(correct - pen)):
                raise ExerciseFailed("The penalty has the wrong sign: long completions are rewarded.",
                                     "The penalty lies in [-1, 0]: 0 up to max_len - cache_len, "
                                     "then down to -1.")
            if _matches(got, adv(correct + grpo.overlong_penalty(lengths, max_len, 0))):
                raise ExerciseFailed("The penalty is the hard limit: no ramp over the last cache_len tokens.",
                                     "Between max_len - cache_len and max_len the penalty falls "
                                     "linearly: ((max_len - cache_len) - length) / cache_len.")
            if _matches(got, adv(correct + grpo.overlong_penalty(lengths, max_len + cache_len, cache_len))):
                raise ExerciseFailed("The ramp starts at max_len instead of ending there.",
                                     "The ramp covers the last cache_len tokens of the budget: "
                                     "from max_len - cache_len to max_len; beyond max_len, -1.")
            c = correct.view(-1, G) + pen.view(-1, G)
            pop = ((c - c.mean(1, keepdim=True)) / (c.std(1, unbiased=False, keepdim=True) + 1e-4)).reshape(-1)
            if _matches(got, pop.numpy()):
                raise ExerciseFailed("The std is the population std (divide by G).",
                                     "GRPO (and torch.std) use Bessel's correction: divide by G - 1.")
        expect_close(got, want, "the advantages",
                     hint="r = correct + penalty; penalty 0 up to max_len - cache_len, a linear ramp "
                          "to -1 at max_len, -1 beyond; then (r - group mean) / (group std + 1e-4).")


def _filter_reference(correct, G, B):
    keep = grpo.dynamic_sampling_mask(correct, G).view(-1, G)[:, 0]
    first = torch.nonzero(keep).flatten()[:B]
    mask = torch.zeros(len(keep), dtype=torch.bool)
    mask[first] = True
    return mask.repeat_interleave(G)


@check
def check_accuracy_filter(my_accuracy_filter):
    """``my_accuracy_filter(correct, rewards, G, B)`` -> (n,) bool mask of the completions to
    train on: the first ``B`` groups (in batch order) whose accuracy lies strictly between 0 and 1,
    whatever the shaped ``rewards`` say."""
    expect_own_work(my_accuracy_filter, grpo.dynamic_sampling_mask)
    for seed, G, n_groups, B in ((0, 4, 12, 5), (1, 8, 10, 3), (2, 2, 9, 20)):
        g = torch.Generator().manual_seed(seed)
        correct = torch.randint(0, 2, (n_groups * G,), generator=g).double()
        correct[:G] = 1.0  # all right ...
        correct[G:2 * G] = 0.0  # ... and all wrong
        lengths = torch.randint(1, 12, (n_groups * G,), generator=g)
        lengths[:2] = torch.tensor([4, 11])  # but the shaped rewards of the first group differ
        rewards = correct + grpo.overlong_penalty(lengths, 10, 4)
        got = _call(my_accuracy_filter, "my_accuracy_filter", correct.clone(), rewards.clone(), G, B)
        got = _numpy(got, "the mask")
        want = _filter_reference(correct, G, B).double().numpy()
        if got.shape == want.shape and not _matches(got, want):
            on_rewards = _filter_reference(rewards, G, B).double().numpy()
            if _matches(got, on_rewards):
                raise ExerciseFailed("The filter looked at the shaped rewards, not the accuracy: a group "
                                     "that is all right (or all wrong) but differs in length was kept.",
                                     "DAPO keeps a group when 0 < (its right answers) < G: test `correct`.")
            all_kept = grpo.dynamic_sampling_mask(correct, G).double().numpy()
            if _matches(got, all_kept) and not _matches(all_kept, want):
                raise ExerciseFailed("Every informative group was kept, not only the first B.",
                                     "The batch trains on B groups: keep the first B informative ones.")
            if _matches(got, 1.0 - want):
                raise ExerciseFailed("The mask is inverted.", "True marks the completions to train on.")
        expect_close(got, want, "the mask",
                     hint="view(-1, G); a group is informative when 0 < its sum of correct < G; keep "
                          "the first B informative groups, every completion of each.")
