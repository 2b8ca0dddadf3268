"""The GRPO chapter's exercise checks accept correct solutions and catch the typical mistakes."""

import pytest
import torch

from rlnotes.exercises import (ExerciseFailed, check_group_advantages, check_group_advantages_by_id,
                               check_grpo_aggregate, check_micro_batch_losses)
from rlnotes.grpo import group_advantages, grpo_loss


def good_adv(rewards, G):
    r = rewards.view(-1, G)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).reshape(-1)


def population_std(rewards, G):
    r = rewards.view(-1, G)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, unbiased=False, keepdim=True) + 1e-4)).reshape(-1)


def batch_mean(rewards, G):
    return (rewards - rewards.mean()) / (rewards.std() + 1e-4)


def no_std(rewards, G):
    r = rewards.view(-1, G)
    return (r - r.mean(1, keepdim=True)).reshape(-1)


def calls_rlnotes(rewards, G):
    return group_advantages(rewards, G)


def test_group_advantages_check_accepts_correct(capsys):
    check_group_advantages(good_adv)
    assert "passed" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("wrong, words", [(population_std, "population"), (batch_mean, "whole batch"),
                                          (no_std, "not divided"), (calls_rlnotes, "")])
def test_group_advantages_check_catches(wrong, words):
    with pytest.raises(ExerciseFailed) as err:
        check_group_advantages(wrong)
    assert words in err.value.message


def good_agg(per_token, mask, loss_type, max_tokens):
    m = mask.to(per_token.dtype)
    if loss_type == "grpo":
        return ((per_token * m).sum(1) / m.sum(1)).mean()
    if loss_type == "dapo":
        return (per_token * m).sum() / m.sum()
    return (per_token * m).sum() / (per_token.shape[0] * max_tokens)


def swapped(per_token, mask, loss_type, max_tokens):
    return good_agg(per_token, mask, {"grpo": "dapo", "dapo": "grpo"}.get(loss_type, loss_type), max_tokens)


def dr_by_T(per_token, mask, loss_type, max_tokens):
    return good_agg(per_token, mask, loss_type, per_token.shape[1])


def padding_in(per_token, mask, loss_type, max_tokens):
    return per_token.mean() if loss_type == "dapo" else good_agg(per_token, mask, loss_type, max_tokens)


def unmasked_numerator(per_token, mask, loss_type, max_tokens):
    m = mask.to(per_token.dtype)
    if loss_type == "grpo":
        return (per_token.sum(1) / m.sum(1)).mean()
    if loss_type == "dapo":
        return per_token.sum() / m.sum()
    return per_token.sum() / (per_token.shape[0] * max_tokens)


def test_grpo_aggregate_check_accepts_correct(capsys):
    check_grpo_aggregate(good_agg)
    assert "passed" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("wrong, words", [(swapped, "aggregation"), (dr_by_T, "max_tokens"),
                                          (padding_in, "padding"),
                                          (unmasked_numerator, "not masked")])
def test_grpo_aggregate_check_catches(wrong, words):
    with pytest.raises(ExerciseFailed) as err:
        check_grpo_aggregate(wrong)
    assert words in err.value.message


def good_by_id(rewards, ids):
    out = torch.empty_like(rewards)
    for i in torch.unique(ids):
        sel = ids == i
        r = rewards[sel]
        out[sel] = (r - r.mean()) / (r.std() + 1e-4)
    return out


def by_id_population(rewards, ids):
    out = torch.empty_like(rewards)
    for i in torch.unique(ids):
        sel = ids == i
        r = rewards[sel]
        out[sel] = (r - r.mean()) / (r.std(unbiased=False) + 1e-4)
    return out


def by_id_contiguous(rewards, ids):
    G = int((ids == ids[0]).sum())
    return good_adv(rewards, G)


def by_id_batch(rewards, ids):
    return (rewards - rewards.mean()) / (rewards.std() + 1e-4)


def test_group_advantages_by_id_check_accepts_correct(capsys):
    check_group_advantages_by_id(good_by_id)
    assert "passed" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("wrong, words", [(by_id_population, "population"), (by_id_contiguous, "contiguous"),
                                          (by_id_batch, "whole batch")])
def test_group_advantages_by_id_check_catches(wrong, words):
    with pytest.raises(ExerciseFailed) as err:
        check_group_advantages_by_id(wrong)
    assert words in err.value.message


def good_micro(chunks, masks):
    n = sum(m.sum() for m in masks)
    return [torch.where(m.bool(), x, torch.zeros_like(x)).sum() / n for x, m in zip(chunks, masks)]


def micro_own_count(chunks, masks):
    return [(x * m).sum() / m.sum() for x, m in zip(chunks, masks)]


def micro_averaged(chunks, masks):
    return [(x * m).sum() / m.sum() / len(chunks) for x, m in zip(chunks, masks)]


def micro_over_k(chunks, masks):
    return [loss / len(chunks) for loss in good_micro(chunks, masks)]


def micro_unmasked(chunks, masks):
    n = sum(m.sum() for m in masks)
    return [x.sum() / n for x in chunks]


def micro_detached(chunks, masks):
    return [loss.detach() for loss in good_micro(chunks, masks)]


def micro_calls_rlnotes(chunks, masks):
    grpo_loss(torch.zeros(1, 1), None, None, torch.zeros(1), torch.ones(1, 1))
    return good_micro(chunks, masks)


def test_micro_batch_losses_check_accepts_correct(capsys):
    check_micro_batch_losses(good_micro)
    assert "passed" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("wrong, words", [(micro_own_count, "its own token count"),
                                          (micro_averaged, "averaged"), (micro_over_k, "1/n_mb"),
                                          (micro_unmasked, "padded"), (micro_detached, "gradient"),
                                          (micro_calls_rlnotes, "rlnotes' own")])
def test_micro_batch_losses_check_catches(wrong, words):
    with pytest.raises(ExerciseFailed) as err:
        check_micro_batch_losses(wrong)
    assert words in err.value.message
    if wrong in (micro_own_count, micro_averaged, micro_over_k, micro_unmasked):
        assert "off by" in err.value.message  # the error size is printed
