"""PPO's clipped surrogate loss (Schulman et al. 2017). The masked-tensor checks and the clipped
objective it shares with the GRPO and DPO losses live in :mod:`rlnotes._losses`."""

from __future__ import annotations

from rlnotes._losses import check_like, check_logp, check_mask, clipped_objective, require_finite_where
from rlnotes._validate import require_in_range

__all__ = ["ppo_clip_loss"]


def ppo_clip_loss(logp, old_logp, advantages, clip_eps=0.2, mask=None):
    r"""PPO's clipped surrogate loss (Schulman et al. 2017), to be minimised.

    .. math::

        r_t(\theta) = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\theta_{old}}(a_t \mid s_t)}
                    = \exp(\text{logp}_t - \text{old\_logp}_t), \qquad
        L(\theta) = -\frac{1}{|M|} \sum_{t \in M}
            \min\left(r_t(\theta) A_t,\ \mathrm{clip}(r_t(\theta), 1 - \epsilon, 1 + \epsilon) A_t\right)

    where M is the set of selected elements (all of them when ``mask`` is None). The minimum
    makes the objective a pessimistic bound: once the ratio has moved past ``1 + epsilon`` with
    ``A_t > 0`` (or below ``1 - epsilon`` with ``A_t < 0``) the clipped branch is active and the
    element's gradient is zero; everywhere else the gradient is the plain surrogate's,
    ``-A_t r_t(theta) grad log pi_theta``.

    ===========  =====================  ===================================================
    argument     shape                  meaning
    ===========  =====================  ===================================================
    logp         any (...), float       ``log pi_theta(a_t|s_t)``, differentiable
    old_logp     logp's, or None        ``log pi_theta_old(a_t|s_t)`` of the policy that
                                        collected the data; None means on-policy
                                        (``logp.detach()``, ratio 1)
    advantages   logp's                 ``A_t`` (e.g. from :func:`rlnotes.returns.gae`)
    clip_eps     float in [0, 1)        epsilon
    mask         None or logp's         1/True selects an element, 0/False drops it
    returns      () scalar              the mean over the selected elements
    ===========  =====================  ===================================================

    Gradients flow only through ``logp``: ``old_logp`` and ``advantages`` are treated as
    constants (detached) and cast to logp's dtype. Dropped elements may hold any finite value
    (or inf/NaN): they change neither the loss nor its gradient, which is exactly 0 there.
    A mask that selects nothing raises ``ValueError``.

    Defined in: TRPO and PPO, section The clipped surrogate objective.
    """
    logp = check_logp(logp)
    old_logp = logp.detach() if old_logp is None else check_like(old_logp, "old_logp", logp, "logp")
    adv = check_like(advantages, "advantages", logp, "logp")
    clip_eps = require_in_range(clip_eps, "clip_eps", 0.0, 1.0, high_open=True)
    if mask is not None:
        mask = check_mask(mask, logp)
        if not bool(mask.any()):
            raise ValueError("mask must select at least one element (it is all 0)")
    for x, name in ((logp, "logp"), (old_logp, "old_logp"), (adv, "advantages")):
        require_finite_where(x, name, mask)
    objective = clipped_objective(logp, old_logp, adv, clip_eps, clip_eps, mask)
    if mask is None:
        return -objective.mean()
    return -objective.sum() / mask.sum().to(logp.dtype)
