"""Checks of the exercises of the chapter "Reinforcement learning from human feedback".

Each check calls the reader's function on random inputs with fixed seeds, compares with
rlnotes.lm's implementation, and recognises the usual mistakes (seed error 11: no gather,
``rewards - values`` for GAE; the score on the padded last column; the sign of the penalty).
"""

from __future__ import annotations

import numpy as np
import torch

import rlnotes.lm.generation as generation
import rlnotes.lm.ppo as lm_ppo
import rlnotes.returns as returns
from rlnotes.exercises.core import check, ExerciseFailed, expect_close, expect_own_work
from rlnotes.exercises.core import as_float_array as _numpy, call_reader as _call

__all__ = ["check_gather_logprobs", "check_kl_penalised_rewards", "check_token_gae"]



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
                                 "Gather the log-probability of the sampled token at each position "
                                 "(seed error 11): .gather(-1, tokens[..., None]).")
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
            raise ExerciseFailed("adv equals rewards - values: that is not GAE (seed error 11).",
                                 "delta_t = r_t + V(s_{t+1}) - V(s_t), then A_t = delta_t + lam A_{t+1}, "
                                 "backward in t.")
        expect_close(adv, want_adv, "adv",
                     hint="Loop backward; V(s_T) = 0 after each completion's last real token "
                          "(treat positions where mask is 0 as zeros).")
        if _matches(ret, rewards.numpy()) or _matches(ret, (rewards * mask).numpy()):
            raise ExerciseFailed("ret equals the rewards.",
                                 "The critic's target is the return adv + values, not the reward.")
        expect_close(ret, want_ret, "ret", hint="ret = adv + values, 0 on padding.")
