"""Tests of the RLHF chapter's exercise checks: a correct solution passes, typical mistakes fail
with the matching hint, and calling rlnotes' own implementation is refused."""

import pytest
import torch

import rlnotes.lm as lm
from rlnotes.exercises import (ExerciseFailed, check_gather_logprobs, check_kl_penalised_rewards,
                               check_token_gae)


def good_gather(logits, tokens):
    return torch.log_softmax(logits, -1).gather(-1, tokens[..., None])[..., 0]


def test_gather_checks(capsys):
    check_gather_logprobs(good_gather)
    with pytest.raises(ExerciseFailed, match="seed error 11"):
        check_gather_logprobs(lambda logits, tokens: torch.log_softmax(logits, -1))
    with pytest.raises(ExerciseFailed, match="raw logits"):
        check_gather_logprobs(lambda logits, tokens: logits.gather(-1, tokens[..., None])[..., 0])
    with pytest.raises(ExerciseFailed, match="probability"):
        check_gather_logprobs(lambda logits, tokens: torch.softmax(logits, -1).gather(-1, tokens[..., None])[..., 0])
    with pytest.raises(ExerciseFailed, match="differentiable"):
        check_gather_logprobs(lambda logits, tokens: good_gather(logits, tokens).detach())
    with pytest.raises(ExerciseFailed):
        check_gather_logprobs(lambda logits, tokens: lm.gather_logprobs(logits, tokens))


def good_rewards(score, logp, ref_logp, mask, beta):
    m = mask.to(logp.dtype)
    r = -beta * (logp - ref_logp) * m
    r[torch.arange(len(score)), m.sum(1).long() - 1] += score
    return r


def test_kl_rewards_checks(capsys):
    check_kl_penalised_rewards(good_rewards)

    def last_column(score, logp, ref_logp, mask, beta):
        r = -beta * (logp - ref_logp) * mask
        r[:, -1] += score
        return r

    def wrong_sign(score, logp, ref_logp, mask, beta):
        return good_rewards(score, -logp, -ref_logp, mask, beta)

    def every_token(score, logp, ref_logp, mask, beta):
        return (-beta * (logp - ref_logp) + score[:, None]) * mask

    for bad, match in ((last_column, "column"), (wrong_sign, "sign"), (every_token, "every token")):
        with pytest.raises(ExerciseFailed, match=match):
            check_kl_penalised_rewards(bad)
    with pytest.raises(ExerciseFailed):
        check_kl_penalised_rewards(lambda *a: lm.kl_penalised_rewards(*a))


def good_gae(rewards, values, mask, lam):
    m = mask.to(rewards.dtype)
    B, L = rewards.shape
    adv = torch.zeros_like(rewards)
    nxt_a = torch.zeros(B, dtype=rewards.dtype)
    nxt_v = torch.zeros(B, dtype=rewards.dtype)
    for t in reversed(range(L)):
        a = (rewards[:, t] + nxt_v - values[:, t] + lam * nxt_a) * m[:, t]
        adv[:, t] = a
        nxt_a, nxt_v = a, values[:, t] * m[:, t]
    return adv, (adv + values) * m


def test_token_gae_checks(capsys):
    check_token_gae(good_gae)
    with pytest.raises(ExerciseFailed, match="not GAE"):
        check_token_gae(lambda r, v, m, lam: ((r - v) * m, r))
    with pytest.raises(ExerciseFailed, match="critic's target"):
        check_token_gae(lambda r, v, m, lam: (good_gae(r, v, m, lam)[0], r))
    with pytest.raises(ExerciseFailed, match="adv"):  # forgot lambda
        check_token_gae(lambda r, v, m, lam: good_gae(r, v, m, 1.0))
    with pytest.raises(ExerciseFailed, match="pair"):
        check_token_gae(lambda r, v, m, lam: good_gae(r, v, m, lam)[0])
    with pytest.raises(ExerciseFailed):
        check_token_gae(lambda r, v, m, lam: lm.token_gae(r, v, m, lam))


def test_checks_reject_answers_that_read_the_padding(capsys):
    # padding may hold any finite value: an answer must give 0 there and ignore it
    with pytest.raises(ExerciseFailed):
        check_kl_penalised_rewards(lambda s, lp, rlp, m, beta: good_rewards(s, lp, rlp, m, beta)
                                   - beta * (lp - rlp) * (1 - m))  # the penalty also on padding
    with pytest.raises(ExerciseFailed, match="ret"):
        check_token_gae(lambda r, v, m, lam: (good_gae(r, v, m, lam)[0], good_gae(r, v, m, lam)[0] + v))
    with pytest.raises(ExerciseFailed, match="adv"):
        check_token_gae(lambda r, v, m, lam: good_gae(r, v, torch.ones_like(m), lam))  # mask ignored
