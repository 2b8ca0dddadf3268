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
    with pytest.raises(ExerciseFailed, match="one value per vocabulary entry"):
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


# ---- the chapter's exercises: variants of what it displays ----------------------------------

from rlnotes.exercises import (check_completion_logprobs, check_k3_rewards,  # noqa: E402
                               check_truncated_token_gae)


def fails(check, solution, match):
    with pytest.raises(ExerciseFailed) as err:
        check.raw(solution)
    assert match in str(err.value), str(err.value)


def good_completion_logprobs(logits, completions, mask, temperature):
    P = logits.shape[1] - completions.shape[1]
    logp = torch.log_softmax(logits[:, P - 1:-1] / temperature, -1)
    return logp.gather(-1, completions[..., None])[..., 0] * mask


def test_completion_logprobs_check(capsys):
    check_completion_logprobs(good_completion_logprobs)
    assert "PASSED check_completion_logprobs" in capsys.readouterr().out

    def no_shift(logits, c, m, T):
        return torch.log_softmax(logits[:, -c.shape[1]:] / T, -1).gather(-1, c[..., None])[..., 0] * m

    def no_temperature(logits, c, m, T):
        return good_completion_logprobs(logits, c, m, 1.0)

    def temperature_after(logits, c, m, T):
        return good_completion_logprobs(logits, c, m, 1.0) / T

    def no_mask(logits, c, m, T):
        return good_completion_logprobs(logits, c, torch.ones_like(m), T)

    def whole_sequence(logits, c, m, T):
        return torch.log_softmax(logits / T, -1)[:, :-1]

    for bad, match in ((no_shift, "its own position"), (no_temperature, "temperature is ignored"),
                       (temperature_after, "divided by the temperature"), (no_mask, "padding"),
                       (whole_sequence, "shape"),
                       (lambda *a: good_completion_logprobs(*a).exp(), "probability"),
                       (lambda *a: good_completion_logprobs(*a).detach(), "differentiable"),
                       (lambda *a: good_completion_logprobs(*a) + 1e-4, "off by")):
        fails(check_completion_logprobs, bad, match)

    def calls_rlnotes(logits, c, m, T):
        P = logits.shape[1] - c.shape[1]
        return lm.gather_logprobs(logits[:, P - 1:-1] / T, c) * m
    fails(check_completion_logprobs, calls_rlnotes, "rlnotes' own")


def good_k3(score, logp, ref_logp, mask, beta):
    m = mask.to(logp.dtype)
    log_rho = (ref_logp - logp) * m
    r = -beta * (torch.expm1(log_rho) - log_rho) * m
    r[torch.arange(len(score)), m.sum(1).long() - 1] += score
    return r


def test_k3_rewards_check(capsys):
    check_k3_rewards(good_k3)
    assert "PASSED check_k3_rewards" in capsys.readouterr().out

    def inverted(score, logp, ref_logp, mask, beta):
        return good_k3(score, ref_logp, logp, mask, beta)

    def k2(score, logp, ref_logp, mask, beta):
        m = mask.to(logp.dtype)
        r = -beta * 0.5 * ((logp - ref_logp) * m) ** 2
        r[torch.arange(len(score)), m.sum(1).long() - 1] += score
        return r

    def last_column(score, logp, ref_logp, mask, beta):
        r = good_k3(torch.zeros_like(score), logp, ref_logp, mask, beta)
        r[:, -1] += score
        return r

    def sign(score, logp, ref_logp, mask, beta):
        return good_k3(score, logp, ref_logp, mask, -beta)

    def penalty_on_padding(score, logp, ref_logp, mask, beta):
        return good_k3(score, logp, ref_logp, torch.ones_like(mask), beta) * 0 + \
            good_k3(score, logp, ref_logp, mask, beta) - beta * (1 - mask) * (logp - ref_logp) ** 2

    for bad, match in ((good_rewards, "k1 rewards"), (inverted, "upside down"), (k2, "k2"),
                       (last_column, "column L - 1"), (sign, "wrong sign"),
                       (penalty_on_padding, "off")):
        fails(check_k3_rewards, bad, match)
    fails(check_k3_rewards, lambda s, lp, rlp, m, b: lm.kl_penalised_rewards(s, lp, rlp, m, 0.0)
          - b * __import__("rlnotes.kl").kl.kl_k3(lp, rlp) * m, "rlnotes' own")


def good_truncated_gae(rewards, values, mask, truncated, last_value, gamma, lam):
    m = mask.to(rewards.dtype)
    B, L = rewards.shape
    adv = torch.zeros_like(rewards)
    nxt_a = torch.zeros(B, dtype=rewards.dtype)
    nxt_v = last_value * truncated.to(rewards.dtype)  # V(s_T): the critic's value if cut, else 0
    for t in reversed(range(L)):
        a = (rewards[:, t] + gamma * nxt_v - values[:, t] + gamma * lam * nxt_a) * m[:, t]
        adv[:, t] = a
        real = m[:, t] > 0
        nxt_a = torch.where(real, a, nxt_a)
        nxt_v = torch.where(real, values[:, t], nxt_v)
    return adv, (adv + values) * m


def test_truncated_token_gae_check(capsys):
    check_truncated_token_gae(good_truncated_gae)
    assert "PASSED check_truncated_token_gae" in capsys.readouterr().out

    def ignores_truncation(r, v, m, tr, lv, gamma, lam):
        return good_truncated_gae(r, v, m, torch.zeros_like(tr), lv, gamma, lam)

    def bootstraps_all(r, v, m, tr, lv, gamma, lam):
        return good_truncated_gae(r, v, m, m.sum(1) == m.shape[1], lv, gamma, lam)

    def chapter_gae_no_gamma(r, v, m, tr, lv, gamma, lam):  # the chapter's token_gae (gamma = 1)
        return good_truncated_gae(r, v, m, tr, lv, 1.0, lam)

    for bad, match in ((ignores_truncation, "ignores the truncation"),
                       (bootstraps_all, "also those that ended with EOS"),
                       (lambda r, v, m, tr, lv, g, l: ((r - v) * m, r), "rewards - values"),
                       (lambda r, v, m, tr, lv, g, l: (good_truncated_gae(r, v, m, tr, lv, g, l)[0], r * m),
                        "ret equals the rewards"),
                       (lambda *a: good_truncated_gae(*a)[0], "pair"),
                       (chapter_gae_no_gamma, "adv")):
        fails(check_truncated_token_gae, bad, match)
    fails(check_truncated_token_gae, lambda r, v, m, tr, lv, g, l: lm.token_gae(r, v, m, l, g),
          "rlnotes' own")
