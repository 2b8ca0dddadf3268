"""Checks of the exercises of the chapter "Reinforcement learning from human feedback".

The chapter's coding exercises ask for variants of what it displays, so that the answer is not
on the page: ``check_completion_logprobs`` (log-probabilities of a completion from the logits of
one teacher-forced pass over prompt and completion, with the one-position shift and a
temperature), ``check_k3_rewards`` (the per-token reward with the k3 estimate of the KL instead
of k1) and ``check_truncated_token_gae`` (GAE over tokens that bootstraps completions cut by the
length limit). ``check_gather_logprobs``, ``check_kl_penalised_rewards`` and ``check_token_gae``
check what the chapter itself shows; they stay available for courses that assigned them.

Each check calls the reader's function on random inputs with fixed seeds, compares with
rlnotes' own functions (``rlnotes.lm``, ``rlnotes.kl``, ``rlnotes.returns``), and recognises the
usual mistakes (no gather, ``rewards - values`` for GAE; the score on the padded
last column; the sign of the penalty; the off-by-one between logits and tokens).
"""

from __future__ import annotations

import numpy as np
import torch

import rlnotes.kl as kl
import rlnotes.lm.generation as generation
import rlnotes.lm.ppo as lm_ppo
import rlnotes.returns as returns
from rlnotes.exercises.core import check, ExerciseFailed, expect_close, expect_own_work
from rlnotes.exercises.core import as_float_array as _numpy, call_reader as _call

__all__ = ["check_completion_logprobs", "check_k3_rewards", "check_truncated_token_gae",
           "check_gather_logprobs", "check_kl_penalised_rewards", "check_token_gae"]



def _matches(a, b):
    return a.shape == b.shape and np.allclose(a, b, atol=1e-6, rtol=1e-6)


def _padded_batch(seed, B=6, L=7, V=11):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, L + 1, (B,), generator=g)
    lengths[0], lengths[1] = L, 1  # a full row and a one-token row
    mask = (torch.arange(L)[None] < lengths[:, None]).long()
    logp = -torch.rand((B, L), generator=g, dtype=torch.float64) * 3 * mask
    ref_logp = -torch.rand((B, L), generator=g, dtype=torch.float64) * 3 * mask
    return g, mask, logp, ref_logp


@check
def check_gather_logprobs(my_gather_logprobs):
    """``my_gather_logprobs(logits, tokens)`` returns log softmax(logits) at the tokens, (B, L)."""
    expect_own_work(my_gather_logprobs, generation.gather_logprobs, generation.completion_logprobs,
                    generation.completion_forward)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn((4, 5, 9), generator=g, dtype=torch.float64) * 3
        tokens = torch.randint(9, (4, 5), generator=g)
        leaf = logits.clone().requires_grad_(True)
        out = _call(my_gather_logprobs, "my_gather_logprobs", leaf, tokens)
        got = _numpy(out, "my_gather_logprobs's result")
        want = generation.gather_logprobs(logits, tokens).numpy()
        if got.shape == tuple(logits.shape):
            raise ExerciseFailed(f"The result has shape {got.shape}: one value per vocabulary entry.",
                                 "Gather the log-probability of the sampled token at each position: "
                                 ".gather(-1, tokens[..., None]).")
        if _matches(got, np.take_along_axis(logits.numpy(), tokens.numpy()[..., None], -1)[..., 0]):
            raise ExerciseFailed("The result equals the raw logits of the tokens.",
                                 "Normalise first: log_softmax, i.e. subtract logsumexp over the vocabulary.")
        if _matches(got, np.exp(want)):
            raise ExerciseFailed("The result is a probability, not a log-probability.",
                                 "Use log_softmax, not softmax.")
        expect_close(got, want, "my_gather_logprobs's result",
                     hint="log_softmax over the last axis, then gather at the tokens.")
        if not (isinstance(out, torch.Tensor) and out.requires_grad):
            raise ExerciseFailed("The result is not differentiable with respect to the logits.",
                                 "Stay in torch operations (no .numpy(), no .detach()).")


@check
def check_kl_penalised_rewards(my_kl_penalised_rewards):
    """``my_kl_penalised_rewards(score, logp, ref_logp, mask, beta)`` -> (B, L) rewards."""
    expect_own_work(my_kl_penalised_rewards, lm_ppo.kl_penalised_rewards)
    for seed in range(3):
        g, mask, logp, ref_logp = _padded_batch(seed)
        score = torch.randn(mask.shape[0], generator=g, dtype=torch.float64)
        beta = 0.1 + 0.2 * seed
        # padding holds arbitrary finite values (as it may in practice): the result must ignore them
        junk = torch.randn(logp.shape, generator=g, dtype=torch.float64) * (1 - mask)
        got = _numpy(_call(my_kl_penalised_rewards, "my_kl_penalised_rewards", score.clone(),
                           logp + junk, ref_logp - junk, mask.clone(), beta), "the rewards")
        want = lm_ppo.kl_penalised_rewards(score, logp, ref_logp, mask, beta).numpy()
        pen = (-beta * (logp - ref_logp) * mask).numpy()
        if got.shape == want.shape:
            wrong_last = pen.copy()
            wrong_last[:, -1] += score.numpy()
            if _matches(got, wrong_last):
                raise ExerciseFailed("The score went on column L - 1 for every completion.",
                                     "Completions that stopped early are padded: the last real "
                                     "token is at index mask.sum(1) - 1.")
            if _matches(got, want - 2 * pen):
                raise ExerciseFailed("The KL penalty has the wrong sign.",
                                     "r_t = -beta (logp - ref_logp) + score on the last token.")
            every = pen + score.numpy()[:, None] * mask.numpy()
            if _matches(got, every):
                raise ExerciseFailed("The score was added to every token.",
                                     "The score arrives once, on the completion's last token.")
        expect_close(got, want, "the rewards",
                     hint="Penalty on every real token, score on the last real one, 0 on padding.")


@check
def check_token_gae(my_token_gae):
    """``my_token_gae(rewards, values, mask, lam)`` -> (adv, ret) with gamma = 1."""
    expect_own_work(my_token_gae, lm_ppo.token_gae, returns.gae)
    for seed in range(3):
        g, mask, rewards, _ = _padded_batch(seed + 10)
        # padding holds arbitrary finite values (as a critic's output does): the result must ignore them
        rewards = torch.randn(rewards.shape, generator=g, dtype=torch.float64)
        values = torch.randn(rewards.shape, generator=g, dtype=torch.float64)
        lam = [0.95, 1.0, 0.5][seed]
        out = _call(my_token_gae, "my_token_gae", rewards.clone(), values.clone(), mask.clone(), lam)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ExerciseFailed("my_token_gae must return a pair (adv, ret).",
                                 "return adv, adv + values (masked)")
        adv, ret = (_numpy(x, "adv/ret") for x in out)
        want_adv, want_ret = (x.numpy() for x in lm_ppo.token_gae(rewards, values, mask, lam))
        if adv.shape == want_adv.shape and _matches(adv, ((rewards - values) * mask).numpy()):
            raise ExerciseFailed("adv equals rewards - values: that is not GAE.",
                                 "delta_t = r_t + V(s_{t+1}) - V(s_t), then A_t = delta_t + lam A_{t+1}, "
                                 "backward in t.")
        expect_close(adv, want_adv, "adv",
                     hint="Loop backward; V(s_T) = 0 after each completion's last real token "
                          "(treat positions where mask is 0 as zeros).")
        if _matches(ret, rewards.numpy()) or _matches(ret, (rewards * mask).numpy()):
            raise ExerciseFailed("ret equals the rewards.",
                                 "The critic's target is the return adv + values, not the reward.")
        expect_close(ret, want_ret, "ret", hint="ret = adv + values, 0 on padding.")


# ---- the chapter's exercises: variants of what it displays ----------------------------------


def _diagnose(got, want, what, wrong, hint):
    """Pass when got matches want; else raise with the hint of the first typical mistake that
    got matches, and the size of the error at the worst entry."""
    if _matches(got, want):
        return
    for message, (value, why) in wrong.items():
        if value is not None and _matches(got, value):
            raise ExerciseFailed(message, why)
    expect_close(got, want, what, hint=hint)


@check
def check_completion_logprobs(my_completion_logprobs):
    """``my_completion_logprobs(logits, completions, mask, temperature)`` -> (B, L): the
    log-probability of each completion token from the (B, P + L, V) logits of one pass over
    left-padded prompts (P columns) followed by the completions, 0 where mask is 0."""
    expect_own_work(my_completion_logprobs, generation.gather_logprobs,
                    generation.completion_logprobs, generation.completion_forward)
    for seed, (B, P, L, V, T) in enumerate([(5, 4, 6, 9, 0.7), (3, 1, 4, 7, 1.0), (6, 3, 1, 5, 2.0)]):
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn((B, P + L, V), generator=g, dtype=torch.float64) * 3
        lengths = torch.randint(1, L + 1, (B,), generator=g)
        lengths[0] = L
        mask = (torch.arange(L)[None] < lengths[:, None]).long()
        completions = torch.randint(V, (B, L), generator=g)  # padding holds arbitrary ids
        leaf = logits.clone().requires_grad_(True)
        out = _call(my_completion_logprobs, "my_completion_logprobs", leaf, completions.clone(),
                    mask.clone(), T)
        got = _numpy(out, "my_completion_logprobs's result")
        m = mask.double()
        want = (generation.gather_logprobs(logits[:, P - 1:-1] / T, completions) * m).numpy()
        if got.shape != want.shape:
            raise ExerciseFailed(f"The result has shape {got.shape}, expected {want.shape}: one "
                                 "log-probability per completion token.",
                                 "The logits at position P - 1 + t predict completion token t: "
                                 "take logits[:, P - 1:-1] with P = logits.shape[1] - L.")
        wrong = {
            "Each token is scored by the logits at its own position, which have already seen it.":
                ((generation.gather_logprobs(logits[:, P:] / T, completions) * m).numpy(),
                 "Position P - 1 + t predicts completion token t (the logits are shifted by one)."),
            "The temperature is ignored.":
                (None if T == 1.0 else (generation.gather_logprobs(logits[:, P - 1:-1], completions) * m).numpy(),
                 "The tokens were sampled from softmax(logits / temperature): divide the logits first."),
            "The log-softmax is divided by the temperature, instead of the logits.":
                (None if T == 1.0 else (generation.gather_logprobs(logits[:, P - 1:-1], completions) * m / T).numpy(),
                 "log_softmax(logits / T) is not log_softmax(logits) / T: divide before normalising."),
            "The padding is not zero.":
                ((generation.gather_logprobs(logits[:, P - 1:-1] / T, completions)).numpy(),
                 "Multiply by the mask: positions after a completion's end are padding."),
            "The result is a probability, not a log-probability.":
                (np.where(m.numpy() > 0, np.exp(want), got), "Use log_softmax, not softmax."),
        }
        _diagnose(got, want, "my_completion_logprobs's result", wrong,
                  "log_softmax(logits[:, P - 1:-1] / temperature), gathered at the completion "
                  "tokens, times the mask.")
        if not (isinstance(out, torch.Tensor) and out.requires_grad):
            raise ExerciseFailed("The result is not differentiable with respect to the logits.",
                                 "Stay in torch operations (no .numpy(), no .detach()).")


@check
def check_k3_rewards(my_k3_rewards):
    """``my_k3_rewards(score, logp, ref_logp, mask, beta)`` -> (B, L): the per-token reward
    -beta k3_t, plus the score on each completion's last real token, 0 on padding."""
    expect_own_work(my_k3_rewards, lm_ppo.kl_penalised_rewards, kl.kl_k3, kl.kl_k2, kl.kl_k1)
    for seed in range(3):
        g, mask, logp, ref_logp = _padded_batch(seed + 20)
        score = torch.randn(mask.shape[0], generator=g, dtype=torch.float64)
        beta = [0.1, 0.5, 2.0][seed]
        junk = torch.randn(logp.shape, generator=g, dtype=torch.float64) * (1 - mask)
        got = _numpy(_call(my_k3_rewards, "my_k3_rewards", score.clone(), logp + junk,
                           ref_logp - junk, mask.clone(), beta), "the rewards")
        m = mask.double()
        bonus = lm_ppo.kl_penalised_rewards(score, logp, ref_logp, mask, 0.0)  # the score alone
        k3 = kl.kl_k3(logp, ref_logp) * m
        want = (bonus - beta * k3).numpy()
        if got.shape != want.shape:
            raise ExerciseFailed(f"The rewards have shape {got.shape}, expected {want.shape}.",
                                 "One reward per token: (B, L).")
        last_col = (-beta * k3).numpy()
        last_col[:, -1] += score.numpy()
        inverted = kl.kl_k3(ref_logp, logp) * m  # rho = pi_theta / pi_ref
        wrong = {
            "These are the k1 rewards the chapter shows, not k3.":
                (lm_ppo.kl_penalised_rewards(score, logp, ref_logp, mask, beta).numpy(),
                 "k3 = rho - 1 - log rho with rho = pi_ref / pi_theta = exp(ref_logp - logp)."),
            "These are the k2 rewards, not k3.":
                ((bonus - beta * kl.kl_k2(logp, ref_logp) * m).numpy(),
                 "k2 = (log rho)^2 / 2; k3 = rho - 1 - log rho."),
            "The ratio in k3 is upside down.":
                ((bonus - beta * inverted).numpy(),
                 "rho = pi_ref / pi_theta = exp(ref_logp - logp): then E[rho] = 1 under pi_theta."),
            "The penalty has the wrong sign.":
                ((bonus + beta * k3).numpy(), "k3 >= 0 is a cost: the reward is -beta k3 (+ the score)."),
            "The score went on column L - 1 for every completion.":
                (last_col, "Completions that stopped early are padded: the last real token is at "
                           "index mask.sum(1) - 1."),
        }
        _diagnose(got, want, "the rewards", wrong,
                  "-beta (rho - 1 - log rho) on every real token, the score added on the last one, "
                  "0 on padding.")


@check
def check_truncated_token_gae(my_token_gae):
    """``my_token_gae(rewards, values, mask, truncated, last_value, gamma, lam)`` -> (adv, ret):
    GAE over the tokens of right-padded completions, bootstrapping from ``last_value`` the
    completions the length limit cut (``truncated``), with V = 0 after the EOS of the others."""
    expect_own_work(my_token_gae, lm_ppo.token_gae, returns.gae)
    for seed, (gamma, lam) in enumerate([(1.0, 0.95), (0.9, 1.0), (0.95, 0.5), (1.0, 0.0)]):
        g, mask, _, _ = _padded_batch(seed + 30, B=7, L=6)
        B, L = mask.shape
        mask[2] = 1  # rows 0 and 2 are full: 0 reached the length limit, 2 ended with EOS there
        # rows that reached the length limit without an EOS: full rows, about half of the others
        full = mask.sum(1) == L
        truncated = full & (torch.rand(B, generator=g) < 0.5)
        truncated[0], truncated[2] = True, False
        rewards = torch.randn((B, L), generator=g, dtype=torch.float64)  # padding: arbitrary
        values = torch.randn((B, L), generator=g, dtype=torch.float64)
        last_value = torch.randn(B, generator=g, dtype=torch.float64) * 2
        out = _call(my_token_gae, "my_token_gae", rewards.clone(), values.clone(), mask.clone(),
                    truncated.clone(), last_value.clone(), gamma, lam)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ExerciseFailed("my_token_gae must return a pair (adv, ret).",
                                 "return adv, (adv + values) * mask")
        adv, ret = (_numpy(x, "adv/ret") for x in out)
        want_adv, want_ret = _truncated_gae(rewards, values, mask, truncated, last_value, gamma, lam)
        if adv.shape != want_adv.shape:
            raise ExerciseFailed(f"adv has shape {adv.shape}, expected {want_adv.shape}.", "(B, L).")
        m = mask.double()
        no_trunc = _truncated_gae(rewards, values, mask, torch.zeros_like(truncated), last_value, gamma, lam)[0]
        wrong = {
            "adv ignores the truncation: it sets V(s_T) = 0 after a completion the length limit cut.":
                (no_trunc if bool(truncated.any()) else None,
                 "A truncated completion did not end: bootstrap with gamma * last_value after its "
                 "last token."),
            "adv equals rewards - values: that is not GAE.":
                (((rewards - values) * m).numpy(),
                 "delta_t = r_t + gamma V(s_{t+1}) - V(s_t), then A_t = delta_t + gamma lam A_{t+1}."),
            "adv bootstraps every completion from last_value, also those that ended with EOS.":
                (_truncated_gae(rewards, values, mask, full, last_value, gamma, lam)[0]
                 if bool((full & ~truncated).any()) else None,
                 "A completion that ended with EOS is terminal: V after it is 0."),
            "adv leaves gamma out of the recursion (A_t = delta_t + lam A_{t+1}).":
                (None if gamma == 1.0 else _truncated_gae(rewards, values, mask, truncated, last_value,
                                                           gamma, lam, recursion_gamma=1.0)[0],
                 "A_t = delta_t + gamma * lam * A_{t+1}."),
        }
        _diagnose(adv, want_adv, "adv", wrong,
                  "Loop backward over t; after the last real token the next value is last_value "
                  "for truncated rows and 0 otherwise; 0 on padding.")
        if _matches(ret, (rewards * m).numpy()):
            raise ExerciseFailed("ret equals the rewards.",
                                 "The critic's target is the return adv + values, not the reward.")
        expect_close(ret, want_ret, "ret", hint="ret = adv + values, 0 on padding.")


def _truncated_gae(rewards, values, mask, truncated, last_value, gamma, lam, recursion_gamma=None):
    """The expected answer, from rlnotes.returns.gae: the last real token of a row ends the
    episode unless the row was truncated, whose V(s_T) is last_value. With ``recursion_gamma``,
    a typical mistake instead: A_t = delta_t + recursion_gamma * lam * A_{t+1}."""
    m = mask.double()
    B, L = mask.shape
    boot = last_value * truncated.double()
    if recursion_gamma is None:
        dones = torch.zeros_like(m)
        dones[torch.arange(B), generation.last_index(mask)] = (~truncated).double()
        adv, ret = returns.gae((rewards * m).T, (values * m).T, dones.T, boot, gamma, lam)
        return (adv.T * m).numpy(), (ret.T * m).numpy()
    r, v, mm = (rewards * m).numpy(), (values * m).numpy(), m.numpy()
    adv = np.zeros((B, L))
    nxt_a, nxt_v = np.zeros(B), boot.numpy()
    for t in reversed(range(L)):
        a = (r[:, t] + gamma * nxt_v - v[:, t] + recursion_gamma * lam * nxt_a) * mm[:, t]
        adv[:, t] = a
        # after a real token the next state is its successor; on padding, keep carrying
        nxt_a = np.where(mm[:, t] > 0, a, nxt_a)
        nxt_v = np.where(mm[:, t] > 0, v[:, t], nxt_v)
    return adv, None
