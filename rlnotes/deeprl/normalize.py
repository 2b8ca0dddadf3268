"""Observation normalisation for the on-policy trainers: a running mean and variance of the
observations (merged batch by batch with Chan et al.'s parallel update) applied in front of the
actor and the critic, so that the returned greedy policy normalises the raw observations it is
given. Used by :func:`rlnotes.ppo.train` and :func:`rlnotes.a2c.train` with ``norm_obs=True``."""

from __future__ import annotations

import torch
from torch import nn

from rlnotes.deeprl.networks import Standardize

__all__ = ["RunningNormalizer", "Normalized", "normalize_inputs", "standardize_inputs"]


class RunningNormalizer(nn.Module):
    r"""``(x - mean) / sqrt(var + tol)``, clipped to ``[-clip, clip]``, with the running mean and
    variance of every observation passed to :meth:`update` (float64 buffers). Before the first
    update it is the identity (mean 0, variance 1, no clipping applied to inputs within
    ``clip``). The statistics change only in :meth:`update`, which the trainer calls once per
    rollout, after the update's epochs: within one update the policy is a fixed function.

    ===========  =================  ==============================================
    argument     type               meaning
    ===========  =================  ==============================================
    dim          int >= 1           the observation's size d
    clip         float > 0          bound on the normalised values (10, as SB3 and
                                    CleanRL)
    tol          float > 0          added to the variance (a numerical stabiliser)
    ===========  =================  ==============================================

    Defined in: TRPO and PPO, section Implementation details that decide PPO's results.
    """

    def __init__(self, dim: int, *, clip: float = 10.0, tol: float = 1e-8, device=None):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        for value, name in ((clip, "clip"), (tol, "tol")):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                    or value == float("inf"):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        self.clip, self.tol = float(clip), float(tol)
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64, device=device))

    @torch.no_grad()
    def update(self, x) -> None:
        """Merge the mean and (population) variance of the rows of ``x`` ((n, d), n >= 1) into
        the running statistics: the exact mean and variance of every row seen so far."""
        x = torch.as_tensor(x, device=self.mean.device)
        if x.ndim != 2 or x.shape[1] != self.mean.numel() or x.shape[0] < 1:
            raise ValueError(f"x must have shape (n >= 1, {self.mean.numel()}), got {tuple(x.shape)}")
        x = x.to(torch.float64)
        if not torch.isfinite(x).all():
            raise ValueError("x must be finite")
        n = float(x.shape[0])
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        if float(self.count) == 0.0:
            self.mean.copy_(batch_mean)
            self.var.copy_(batch_var)
            self.count.fill_(n)
            return
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean.add_(delta * n / total)
        self.var.copy_((self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total)
                       / total)
        self.count.copy_(total)

    def _std(self) -> torch.Tensor:
        """``sqrt(var + tol)``, recomputed only when ``var`` changed (an update, a loaded
        state, a move to another device): acting calls the layer at every step."""
        key = (self.var.data_ptr(), self.var._version, self.var.device)
        if getattr(self, "_std_key", None) != key:
            self._std_cache, self._std_key = torch.sqrt(self.var + self.tol), key
        return self._std_cache

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = (x.to(torch.float64) - self.mean) / self._std()
        return z.clamp(-self.clip, self.clip).to(x.dtype)


class Normalized(nn.Module):
    """``body(normalizer(x))``, for a running normaliser (PPO's ``norm_obs``) or a fixed
    ``Standardize`` layer (TRPO's ``standardize_obs``); indexing reaches the body's layers
    (``module[0]`` is the MLP's first layer), so code that inspects the MLP keeps working.

    Defined in: TRPO and PPO, section Implementation details that decide PPO's results.
    """

    def __init__(self, normalizer: RunningNormalizer, body: nn.Module):
        super().__init__()
        self.normalizer, self.body = normalizer, body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.normalizer(x))

    def __getitem__(self, i):
        return self.body[i]


def _networks(net) -> tuple[str, str]:
    """The attribute names of ``net``'s policy and value networks (``actor``/``critic`` of an
    :class:`rlnotes.deeprl._onpolicy.ActorCritic`, ``pi``/``v`` of an
    :class:`rlnotes.deeprl.rollout.ActorCritic`)."""
    names = next((pair for pair in (("actor", "critic"), ("pi", "v"))
                  if all(hasattr(net, name) for name in pair)), None)
    if names is None:
        raise ValueError(f"net must have an actor and a critic (or pi and v), got "
                         f"{type(net).__name__}")
    return names


def _put_in_front(net, names, layer: nn.Module) -> None:
    """Wrap both networks of ``net`` (in place) as ``Normalized(layer, network)``."""
    for name in names:
        setattr(net, name, Normalized(layer, getattr(net, name)))


def normalize_inputs(net, *, clip: float = 10.0) -> RunningNormalizer:
    """Put one shared :class:`RunningNormalizer` in front of the policy network and the value
    network of ``net`` (``net.actor`` and ``net.critic`` of an
    :class:`rlnotes.deeprl._onpolicy.ActorCritic`, or ``net.pi`` and ``net.v`` of an
    :class:`rlnotes.deeprl.rollout.ActorCritic`), modified in place, and return it. The
    parameters and their order are unchanged (the normaliser holds buffers only).

    Defined in: TRPO and PPO, section Implementation details that decide PPO's results.
    """
    names = _networks(net)
    first = getattr(net, names[0])[0]
    norm = RunningNormalizer(first.in_features, clip=clip, device=first.weight.device)
    _put_in_front(net, names, norm)
    return norm


def standardize_inputs(net) -> Standardize:
    """Put one shared fixed :class:`rlnotes.deeprl.Standardize` layer (the identity until its
    ``fit``) in front of the policy network and the value network of ``net`` (as
    :func:`normalize_inputs`), modified in place, and return it: TRPO's and PPO's
    ``standardize_obs``, which fit it once, to the first rollout.

    Defined in: TRPO and PPO, section Trust region policy optimisation.
    """
    names = _networks(net)
    first = getattr(net, names[0])[0]
    layer = Standardize(first.in_features, device=first.weight.device,
                        dtype=first.weight.dtype)
    _put_in_front(net, names, layer)
    return layer
