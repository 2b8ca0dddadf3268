"""The Dr. GRPO / DAPO chapter's exercise checks accept correct solutions and catch the typical
mistakes."""

import pytest
import torch

from rlnotes.exercises import ExerciseFailed, check_accuracy_filter, check_overlong_advantages
from rlnotes.grpo import dynamic_sampling_mask, group_advantages, overlong_penalty


def _penalty(lengths, max_len, cache_len, *, sign=1.0, hard=False, shift=0):
    L = lengths.double()
    start = max_len - cache_len + shift
    if cache_len == 0 or hard:
        p = torch.zeros_like(L)
    else:
        p = torch.clamp((start - L) / cache_len, max=0.0)
    p = torch.where(L > max_len + shift, torch.full_like(p, -1.0), p)
    return sign * p


def _adv(r, G, unbiased=True):
    r = r.view(-1, G)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, unbiased=unbiased, keepdim=True) + 1e-4)).reshape(-1)


def good_overlong(correct, lengths, G, max_len, cache_len):
    return _adv(correct + _penalty(lengths, max_len, cache_len), G)


def no_penalty(correct, lengths, G, max_len, cache_len):
    return _adv(correct, G)


def wrong_sign(correct, lengths, G, max_len, cache_len):
    return _adv(correct + _penalty(lengths, max_len, cache_len, sign=-1.0), G)


def hard_limit(correct, lengths, G, max_len, cache_len):
    return _adv(correct + _penalty(lengths, max_len, cache_len, hard=True), G)


def ramp_after_budget(correct, lengths, G, max_len, cache_len):
    return _adv(correct + _penalty(lengths, max_len, cache_len, shift=cache_len), G)


def population_std(correct, lengths, G, max_len, cache_len):
    return _adv(correct + _penalty(lengths, max_len, cache_len), G, unbiased=False)


def calls_rlnotes(correct, lengths, G, max_len, cache_len):
    return group_advantages(correct + overlong_penalty(lengths, max_len, cache_len), G)


def test_overlong_check_accepts_correct(capsys):
    check_overlong_advantages(good_overlong)
    assert "passed" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("wrong, words", [(no_penalty, "not added"), (wrong_sign, "wrong sign"),
                                          (hard_limit, "hard limit"), (ramp_after_budget, "starts at max_len"),
                                          (population_std, "population"), (calls_rlnotes, "")])
def test_overlong_check_catches(wrong, words):
    with pytest.raises(ExerciseFailed) as err:
        check_overlong_advantages(wrong)
    assert words in err.value.message


def good_filter(correct, rewards, G, B):
    c = correct.view(-1, G).sum(1)
    keep = (c > 0) & (c < G)
    out = torch.zeros_like(keep)
    out[torch.nonzero(keep).flatten()[:B]] = True
    return out.repeat_interleave(G)


def on_rewards(correct, rewards, G, B):
    r = rewards.view(-1, G)
    keep = r.amax(1) != r.amin(1)
    out = torch.zeros_like(keep)
    out[torch.nonzero(keep).flatten()[:B]] = True
    return out.repeat_interleave(G)


def uncapped(correct, rewards, G, B):
    c = correct.view(-1, G).sum(1)
    return ((c > 0) & (c < G)).repeat_interleave(G)


def inverted(correct, rewards, G, B):
    return ~good_filter(correct, rewards, G, B)


def calls_mask(correct, rewards, G, B):
    keep = dynamic_sampling_mask(correct, G).view(-1, G)[:, 0]
    out = torch.zeros_like(keep)
    out[torch.nonzero(keep).flatten()[:B]] = True
    return out.repeat_interleave(G)


def test_accuracy_filter_check_accepts_correct(capsys):
    check_accuracy_filter(good_filter)
    assert "passed" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("wrong, words", [(on_rewards, "shaped rewards"), (uncapped, "first B"),
                                          (inverted, "inverted"), (calls_mask, "")])
def test_accuracy_filter_check_catches(wrong, words):
    with pytest.raises(ExerciseFailed) as err:
        check_accuracy_filter(wrong)
    assert words in err.value.message
