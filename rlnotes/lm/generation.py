"""Sampling completions from a language model, and scoring given completions.

``generate`` samples a batch of completions with a key-value cache: one forward pass of the whole
batch per new token. ``completion_logprobs`` recomputes the same per-token log-probabilities with
teacher forcing (one forward pass over prompt + completion), differentiably: it is what every
policy-gradient loss on language models needs. Both left-pad the prompts (with attention masks and
positions that make padding invisible), so a prompt scores the same whatever batch it is in.

Defined in: Reinforcement learning from human feedback, section A language model as a policy.
"""

from __future__ import annotations

import math
import numbers

import torch

from rlnotes._validate import require_int

__all__ = ["generate", "decode", "completion_logprobs", "gather_logprobs", "left_pad",
           "completion_forward", "last_index", "inverse_cdf"]


# --- input checks -----------------------------------------------------------------------------


def _check_prompts(prompts, vocab_size: int) -> list[list[int]]:
    if isinstance(prompts, torch.Tensor):
        if prompts.ndim != 2:
            raise ValueError(f"prompts must be a list of token-id lists or a (B, P) tensor, got shape {tuple(prompts.shape)}")
        prompts = prompts.tolist()
    if not isinstance(prompts, (list, tuple)):
        raise ValueError(f"prompts must be a list of token-id lists, got {type(prompts).__name__}")
    if len(prompts) == 0:
        raise ValueError("prompts must hold at least one prompt, got an empty list")
    out = []
    for i, p in enumerate(prompts):
        if isinstance(p, torch.Tensor):
            p = p.tolist()
        if not isinstance(p, (list, tuple)) or len(p) == 0:
            raise ValueError(f"prompts[{i}] must be a non-empty list of token ids, got {p!r}")
        for tok in p:
            if isinstance(tok, bool) or not isinstance(tok, numbers.Integral):
                raise ValueError(f"prompts[{i}] must hold integer token ids, got {tok!r}")
            if not 0 <= tok < vocab_size:
                raise ValueError(f"prompts[{i}] holds token id {tok}, outside the vocabulary [0, {vocab_size})")
        out.append([int(t) for t in p])
    return out


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    return float(temperature)


def _model_device(model) -> torch.device:
    return next(model.parameters()).device


# --- helpers shared by generation, scoring and the trainers ----------------------------------


def left_pad(prompts, device, pad_id: int = 0):
    """Left-pad token-id lists to a (B, P) tensor.

    Returns ``(tokens, valid, positions)``: ``valid`` is False on padding and ``positions``
    counts the real tokens before each one, so a left-padded prompt gets the positions it
    would have alone.

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    P = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), P), pad_id, dtype=torch.long)
    valid = torch.zeros((len(prompts), P), dtype=torch.bool)
    for i, p in enumerate(prompts):
        tokens[i, P - len(p):] = torch.tensor(p, dtype=torch.long)
        valid[i, P - len(p):] = True
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    return tokens.to(device), valid.to(device), positions.to(device)


def gather_logprobs(logits, tokens):
    r"""Log-probability of the given tokens: ``log_softmax(logits)[..., tokens]``.

    .. math::  \log \pi_\theta(a_t \mid s_t) = \text{logits}_t[a_t] - \log \sum_v e^{\text{logits}_t[v]}

    ======  ===========  ============================================
    logits  (B, L, V)    scores of every token at each position
    tokens  (B, L) long  the tokens that were sampled
    returns (B, L)       the log-probability of each sampled token
    ======  ===========  ============================================

    The whole (B, L, V) log-softmax is not what a policy-gradient loss needs: a common mistake
    is to use it without this gather.

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """
    if logits.ndim != tokens.ndim + 1 or logits.shape[:-1] != tokens.shape:
        raise ValueError(f"tokens must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
                         f"got {tuple(tokens.shape)}")
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1).to(logits.dtype)


def inverse_cdf(probs, u):
    """Sample by inverting the CDF: the first token whose cumulative probability exceeds
    ``u`` times the total, so a token of probability 0 is never returned, whatever ``u``.

    ======  =========  ===========================================================
    probs   (B, V)     non-negative weights of each token (need not sum to 1)
    u       (B, 1)     uniforms in [0, 1)
    return  (B,) long  y with cdf[y - 1] <= u * cdf[V - 1] < cdf[y]
    ======  =========  ===========================================================

    The comparison is ``<=``: with ``<``, u = 0 would return token 0 even when its probability
    is 0. When rounding puts ``u * total`` at or above the last cumulative sum, the last token
    of positive probability is returned.

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    cdf = probs.cumsum(dim=-1)
    tok = (cdf <= u * cdf[:, -1:]).sum(dim=-1)
    V = probs.shape[-1]
    last_positive = V - 1 - (probs > 0).flip(-1).long().argmax(dim=-1)
    return torch.minimum(tok, last_positive)


def last_index(mask):
    """Index of the last 1 in each row of a (B, L) mask (0 for an empty row).

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    L = mask.shape[1]
    idx = torch.arange(L, device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), idx, torch.zeros_like(idx)).amax(dim=1)


def completion_forward(model, prompts, completions, *, temperature=1.0, pad_id: int = 0):
    """One teacher-forced pass over prompt + completion.

    Returns ``(logp, hidden)``: the (B, L) log-probability of each completion token under
    ``logits / temperature``, and the (B, L, W) final hidden state at the position that
    predicts it (the state s_t = (prompt, completion[:t]) of the token-level MDP), for value and
    reward heads. Not masked: callers multiply by the mask.

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    device = completions.device
    tokens, valid, positions = left_pad(prompts, device, pad_id)
    B, P = tokens.shape
    L = completions.shape[1]
    full = torch.cat([tokens, completions], dim=1)
    key_valid = torch.cat([valid, torch.ones((B, L), dtype=torch.bool, device=device)], dim=1)
    pos = torch.cat([positions, positions[:, -1:] + 1 + torch.arange(L, device=device)], dim=1)
    logits, hidden = model(full[:, :-1], positions=pos[:, :-1], key_valid=key_valid[:, :-1],
                           return_hidden=True)
    logits, hidden = logits[:, P - 1:], hidden[:, P - 1:]  # position P-1+t predicts completion[t]
    return gather_logprobs(logits / temperature, completions), hidden


def completion_logprobs(model, prompts, completions, mask, *, temperature=1.0):
    r"""Per-token log-probabilities of given completions, by teacher forcing.

    .. math::  \text{logp}[i, t] = \log \pi_\theta(y_{i,t} \mid x_i, y_{i,<t})
               \text{ under softmax(logits / temperature)}, \quad 0 \text{ where mask is 0}

    ============  ================  =====================================================
    argument      shape             meaning
    ============  ================  =====================================================
    model         TinyGPT           the policy
    prompts       list of B lists   token ids, lengths may differ
    completions   (B, L) long       right-padded completions (as ``generate`` returns)
    mask          (B, L) 0/1, bool  1 on the completion's tokens (up to and including EOS)
    temperature   float > 0         the temperature the tokens were sampled at
    returns       (B, L)            log-probs, equal to generate's ``logp`` where mask is 1
    ============  ================  =====================================================

    Differentiable with respect to the model's parameters.

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    V = model.vocab_size
    prompts = _check_prompts(prompts, V)
    if not isinstance(completions, torch.Tensor) or completions.dtype not in (torch.long, torch.int, torch.int32):
        raise ValueError(f"completions must be a (B, L) integer tensor, got {type(completions).__name__}"
                         + (f" of dtype {completions.dtype}" if isinstance(completions, torch.Tensor) else ""))
    if completions.ndim != 2 or completions.shape[0] != len(prompts) or completions.shape[1] == 0:
        raise ValueError(f"completions must have shape ({len(prompts)}, L) with L >= 1 (one row per "
                         f"prompt), got {tuple(completions.shape)}")
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != tuple(completions.shape):
        raise ValueError(f"mask must be a tensor of completions' shape {tuple(completions.shape)}, got "
                         f"{tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__}")
    if mask.dtype != torch.bool and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("mask must hold only 0 and 1")
    temperature = _check_temperature(temperature)
    mask = mask.bool()
    completions = completions.long().to(_model_device(model))
    if bool(((completions < 0) | (completions >= V))[mask.to(completions.device)].any()):
        raise ValueError(f"completions hold token ids outside the vocabulary [0, {V}) where mask is 1")
    completions = completions.clamp(0, V - 1)  # padding may hold anything
    if max(len(p) for p in prompts) + completions.shape[1] > model.max_len + 1:
        raise ValueError(f"completions: prompt + completion exceed the model's max_len={model.max_len}")
    logp, _ = completion_forward(model, prompts, completions, temperature=temperature)
    return logp * mask.to(logp.device, logp.dtype)


def _check_decode_args(model, prompts, max_new_tokens, temperature, eos_id, generator):
    """The argument checks of ``decode`` and ``rlnotes.grpo.group_decode``: returns the prompts,
    ``max_new_tokens``, the temperature and ``eos_id``, checked; raises ``ValueError`` naming the
    argument otherwise."""
    V = model.vocab_size
    prompts = _check_prompts(prompts, V)
    max_new_tokens = require_int(max_new_tokens, "max_new_tokens", minimum=1)
    temperature = _check_temperature(temperature)
    if eos_id is not None:
        eos_id = require_int(eos_id, "eos_id", minimum=0)
        if eos_id >= V:
            raise ValueError(f"eos_id must be a token id in [0, {V}), got {eos_id}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    return prompts, max_new_tokens, temperature, eos_id


@torch.no_grad()
def decode(model, prompts, max_new_tokens, *, temperature=1.0, eos_id=None, generator=None,
           greedy=False, use_cache=True):
    """``generate`` with two switches: ``greedy=True`` takes the most probable token (logp is
    then its log-probability under logits / temperature), ``use_cache=False`` recomputes the
    whole sequence at every step (the slow way, for tests and benchmarks).

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    prompts, max_new_tokens, temperature, eos_id = _check_decode_args(
        model, prompts, max_new_tokens, temperature, eos_id, generator)
    device = _model_device(model)
    tokens, valid, positions = left_pad(prompts, device)
    B, P = tokens.shape
    if P + max_new_tokens - 1 > model.max_len:
        raise ValueError(f"max_new_tokens: the longest prompt ({P}) plus {max_new_tokens} new tokens "
                         f"exceeds the model's max_len={model.max_len} (+1 for the last token)")
    key_valid = torch.cat([valid, torch.ones((B, max_new_tokens), dtype=torch.bool, device=device)], 1)
    out = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    logp = torch.zeros((B, max_new_tokens), dtype=torch.float32, device=device)
    mask = torch.zeros((B, max_new_tokens), dtype=torch.bool, device=device)
    alive = torch.ones(B, dtype=torch.bool, device=device)

    cache = model.new_cache(B, P + max_new_tokens) if use_cache else None
    logits = model(tokens, positions=positions, key_valid=valid, cache=cache)[:, -1]
    pos = positions[:, -1]
    L = max_new_tokens
    for t in range(max_new_tokens):
        logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
        if greedy:
            tok = logp_all.argmax(dim=-1)
        else:  # inverse-CDF sampling: the uniforms come from the (CPU or CUDA) generator
            u = torch.rand((B, 1), generator=generator,
                           device=generator.device if generator is not None else "cpu").to(device)
            tok = inverse_cdf(logp_all.exp(), u)
        lp = logp_all.gather(-1, tok[:, None]).squeeze(-1)
        out[:, t] = torch.where(alive, tok, torch.full_like(tok, eos_id if eos_id is not None else 0))
        logp[:, t] = torch.where(alive, lp, torch.zeros_like(lp))
        mask[:, t] = alive
        if eos_id is not None:
            alive = alive & (tok != eos_id)
            if not bool(alive.any()):
                L = t + 1
                break
        if t == max_new_tokens - 1:
            break
        pos = pos + 1
        if use_cache:
            logits = model(out[:, t:t + 1], positions=pos[:, None], key_valid=key_valid,
                           cache=cache)[:, -1]
        else:
            n = t + 1
            full = torch.cat([tokens, out[:, :n]], dim=1)
            full_pos = torch.cat([positions, positions[:, -1:] + 1 + torch.arange(n, device=device)], 1)
            logits = model(full, positions=full_pos, key_valid=key_valid[:, :P + n])[:, -1]
    return out[:, :L], logp[:, :L], mask[:, :L].long()


def generate(model, prompts, max_new_tokens, *, temperature=1.0, eos_id=None, generator=None):
    r"""Sample a batch of completions: one forward pass of the whole batch per new token.

    .. math::  y_t \sim \mathrm{softmax}(\text{logits}(x, y_{<t}) / \text{temperature}), \qquad
               \text{logp}_t = \log \mathrm{softmax}(\text{logits}(x, y_{<t}) / \text{temperature})_{y_t}

    ==============  ================  =================================================
    argument        shape / type      meaning
    ==============  ================  =================================================
    model           TinyGPT           the policy (any module with TinyGPT's forward)
    prompts         list of B lists   token ids; lengths may differ (left-padded inside)
    max_new_tokens  int >= 1          most tokens to sample per prompt
    temperature     float > 0         the logits are divided by it
    eos_id          int or None       sampling stops for a row after this token
    generator       torch.Generator   source of the uniforms (reproducible sampling)
    returns         completions       (B, L) long, right-padded (L <= max_new_tokens;
                                      L is shorter when every row ended early)
                    logp              (B, L) float, 0 where mask is 0
                    mask              (B, L) long, 1 up to and including the first EOS
    ==============  ================  =================================================

    Positions after a row's EOS hold ``eos_id``. Keys and values of earlier positions are kept
    in a cache (:class:`rlnotes.lm.model.KVCache`), so step t costs O(t), not O(t^2).

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """
    return decode(model, prompts, max_new_tokens, temperature=temperature, eos_id=eos_id,
                  generator=generator)
