"""Heads on the language model's backbone: a value head (the critic of PPO) and a scalar reward
head (a reward model), both linear maps of the final hidden state.

Defined in: Reinforcement learning from human feedback, section Reward models.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from rlnotes.lm.generation import _check_prompts, completion_forward, last_index, left_pad

__all__ = ["PolicyWithValue", "PolicyWithValueModel", "RewardModel"]


def _scalar_head(width: int) -> nn.Linear:
    head = nn.Linear(width, 1)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)  # starts at 0: V = 0 and r = 0 before training
    return head


class PolicyWithValue(nn.Module):
    r"""A policy and its critic on one backbone: ``policy`` is the TinyGPT that ``generate``
    samples from, ``value_head`` maps its hidden state at s_t = (x, y_{<t}) to V(s_t).

    ``forward(prompts, completions) -> (logp, values)``, both (B, L), in one pass. With
    ``detach_value=True`` (what ``train_ppo`` uses by default) the value head reads the
    backbone's features without its error training them.

    Defined in: Reinforcement learning from human feedback, section PPO for language models.
    """

    def __init__(self, policy, *, detach_value=False):
        super().__init__()
        self.policy = copy.deepcopy(policy)
        self.value_head = _scalar_head(policy.width)
        self.detach_value = detach_value

    def forward(self, prompts, completions):
        logp, hidden = completion_forward(self.policy, prompts, completions)
        if self.detach_value:  # the critic's error does not reach the shared backbone
            hidden = hidden.detach()
        return logp, self.value_head(hidden).squeeze(-1)

    def clip_groups(self):
        """The parameters whose gradient norm is clipped together: all of them (one network)."""
        return [list(self.parameters())]


class PolicyWithValueModel(nn.Module):
    r"""A policy and a separate value network initialised from a reward model, as in Stiennon
    et al. (2020) and Ouyang et al. (2022): ``policy`` is a copy of the TinyGPT to tune,
    ``value_model`` a copy of the reward model's backbone and ``value_head`` of its head, whose
    bias absorbs the reward model's ``offset``. Before training, V(s_t) is the reward model's
    score of the partial completion: V(x, y_{<t}) = r_psi(x, y_{<t}) for t >= 1.

    ``forward(prompts, completions) -> (logp, values)``, both (B, L), as
    :class:`PolicyWithValue`; the two networks share no parameter, so the critic's error never
    reaches the policy. ``clip_groups()`` lists them apart: each gets its own gradient clip, and
    Adam's step is per parameter, so one Adam over both is two optimisers.

    Defined in: Reinforcement learning from human feedback, section Four more details.
    """

    def __init__(self, policy, reward_model):
        super().__init__()
        if not isinstance(reward_model, RewardModel):
            raise ValueError(f"reward_model must be a RewardModel, got {type(reward_model).__name__}")
        if reward_model.backbone.vocab_size != policy.vocab_size:
            raise ValueError(f"reward_model must read the policy's vocabulary of {policy.vocab_size} "
                             f"tokens, got {reward_model.backbone.vocab_size}")
        self.policy = copy.deepcopy(policy)
        self.value_model = copy.deepcopy(reward_model.backbone)
        self.value_head = copy.deepcopy(reward_model.head)
        with torch.no_grad():  # r_psi subtracts its offset; V starts as r_psi exactly
            self.value_head.bias.sub_(reward_model.offset.to(self.value_head.bias))
        self.detach_value = True  # nothing is shared: the critic never trains the policy

    def forward(self, prompts, completions):
        logp, _ = completion_forward(self.policy, prompts, completions)
        _, hidden = completion_forward(self.value_model, prompts, completions)
        return logp, self.value_head(hidden).squeeze(-1)

    def clip_groups(self):
        """The parameters whose gradient norms are clipped apart: the policy's, the critic's."""
        return [list(self.policy.parameters()),
                list(self.value_model.parameters()) + list(self.value_head.parameters())]


class RewardModel(nn.Module):
    r"""A scalar reward r_psi(x, y): a TinyGPT backbone (a copy of the SFT model, as in
    Ouyang et al. 2022) read by a linear head at the completion's last token.

    ``forward(prompts, completions, mask) -> (B,)``.

    ==============  ================  ===============================================
    prompts         list of B lists   token ids
    completions     (B, L) long       right-padded completions
    mask            (B, L) 0/1        1 on the completion's tokens
    returns         (B,)              r_psi(x, y) (plus ``offset``, see below)
    ==============  ================  ===============================================

    ``offset`` (a buffer, 0 at first) is subtracted from every score; ``normalise`` sets it to
    the mean score of the completions it is given, so that their mean score is 0 (the chapters
    pass demonstrations, as Stiennon et al. 2020 centre on reference summaries; the SFT
    policy's own mean score is then near 0, not 0).

    Defined in: Reinforcement learning from human feedback, section Reward models.
    """

    def __init__(self, backbone):
        super().__init__()
        self.backbone = copy.deepcopy(backbone)
        self.head = _scalar_head(backbone.width)
        self.register_buffer("offset", torch.zeros(()))

    def forward(self, prompts, completions, mask):
        prompts = _check_prompts(prompts, self.backbone.vocab_size)
        if not isinstance(completions, torch.Tensor) or completions.ndim != 2 \
                or completions.shape[0] != len(prompts):
            raise ValueError(f"completions must be a ({len(prompts)}, L) tensor, one row per prompt")
        if not isinstance(mask, torch.Tensor) or mask.shape != completions.shape:
            raise ValueError(f"mask must have completions' shape {tuple(completions.shape)}")
        device = self.head.weight.device
        completions, mask = completions.to(device).long(), mask.to(device)
        tokens, valid, positions = left_pad(prompts, device)
        B, P = tokens.shape
        L = completions.shape[1]
        full = torch.cat([tokens, completions.clamp(0, self.backbone.vocab_size - 1)], dim=1)
        key_valid = torch.cat([valid, torch.ones((B, L), dtype=torch.bool, device=device)], 1)
        pos = torch.cat([positions, positions[:, -1:] + 1 + torch.arange(L, device=device)], 1)
        _, hidden = self.backbone(full, positions=pos, key_valid=key_valid, return_hidden=True)
        last = hidden[torch.arange(B, device=device), P + last_index(mask)]
        return self.head(last).squeeze(-1) - self.offset

    @torch.no_grad()
    def normalise(self, prompts, completions, mask):
        """Shift the scores so that their mean over these (reference) samples is 0."""
        self.offset.zero_()
        self.offset.fill_(float(self(prompts, completions, mask).mean()))
        return self
