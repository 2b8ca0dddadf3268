"""The book's figures with a knob, one per chapter: each function computes the curves for a grid
of the knob's values with rlnotes and returns a :class:`~rlnotes.plotting.interactive.KnobFigure`.
The browser only switches between the embedded curves.

Each function's docstring names the chapter section it belongs to.
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_int
from rlnotes.plotting.interactive import Panel, knob_figure

__all__ = ["gamma_figure", "cliff_epsilon_figure", "baird_step_size_figure",
           "psi_variance_figure", "gae_critic_figure", "ppo_clip_figure",
           "overoptimisation_figure", "dpo_beta_figure", "group_advantage_figure",
           "aggregation_figure"]


def _grid(values, name: str, low=None, high=None):
    vals = [float(v) for v in values]
    if len(vals) < 2 or len(set(vals)) != len(vals):
        raise ValueError(f"{name} must hold at least 2 distinct values, got {values!r}")
    for v in vals:
        if not np.isfinite(v) or (low is not None and v < low) or (high is not None and v > high):
            raise ValueError(f"{name} must hold values in [{low}, {high}], got {v!r}")
    return vals


# --- Markov decision processes and dynamic programming -----------------------------------------
def gamma_figure(env, gammas, distance, *, default=0.9):
    """V* (value iteration) and the value of the uniform random policy of every state of a
    toy-text ``env`` against ``distance`` (S,), the number of moves from each state to the goal,
    for each discount in ``gammas``.

    Defined in: Markov decision processes and dynamic programming, section The effect of gamma.
    """
    from rlnotes.mdp import TabularMDP, policy_evaluation, uniform_policy, value_iteration

    gammas = _grid(gammas, "gammas", 0.0, 0.999)
    distance = np.asarray(distance)
    curves = {}
    for g in gammas:
        mdp = TabularMDP.from_gymnasium(env, gamma=g)
        if distance.shape != (mdp.num_states,):
            raise ValueError(f"distance must have shape ({mdp.num_states},), got {distance.shape}")
        V, _ = value_iteration(mdp)
        V_rand = policy_evaluation(mdp, uniform_policy(mdp))
        live = ~mdp.absorbing
        order = np.argsort(distance[live], kind="stable")
        x = distance[live][order]
        curves[g] = {"V*(s): optimal, value iteration": (x, V[live][order]),
                     "V(s): uniform random policy": (x, V_rand[live][order])}
    panel = Panel(curves, x_label="moves from the state to the goal, d(s)",
                  y_label="state value", mark="point", title="Values of every state")
    return knob_figure(panel, {"γ": gammas}, default=default, fig_id="mdp-gamma",
                       title="The discount factor sets the horizon")


# --- Learning without a model: Monte Carlo and TD ------------------------------------------------
def cliff_epsilon_figure(env, epsilons, *, alpha=0.5, num_runs=30, num_episodes=200, smooth=10,
                         seed=0, default=0.1):
    """Online return (mean over ``num_runs`` runs, moving average over ``smooth`` episodes) of
    SARSA and Q-learning on the cliff for each exploration rate in ``epsilons``
    (:func:`rlnotes.tabular.td_control_batch`).

    Defined in: Learning without a model: Monte Carlo and TD, section Cliff walking.
    """
    from rlnotes import tabular
    from rlnotes.plotting.learning import moving_average

    epsilons = _grid(epsilons, "epsilons", 0.0, 1.0)
    smooth = require_int(smooth, "smooth", minimum=1)
    curves = {}
    for eps in epsilons:
        curves[eps] = {}
        for name, method in (("SARSA", "sarsa"), ("Q-learning", "q_learning")):
            _, R = tabular.td_control_batch(env, method, num_runs=num_runs,
                                            num_episodes=num_episodes, alpha=alpha, epsilon=eps,
                                            gamma=1.0, seed=seed)
            y = moving_average(R.mean(axis=0), smooth)
            curves[eps][name] = (np.arange(smooth, num_episodes + 1), y)
    panel = Panel(curves, x_label="episode",
                  y_label=f"sum of rewards during episode ({num_runs} runs, {smooth}-ep. avg.)",
                  y_domain=[-150, 0], title=f"Cliff walking, α = {alpha}")
    return knob_figure(panel, {"ε": epsilons}, default=default, fig_id="td-cliff-epsilon",
                       title="Exploration rate: SARSA against Q-learning, online")


# --- Deep Q-networks -----------------------------------------------------------------------------
def baird_step_size_figure(alphas, *, num_sweeps=2000, default=0.01):
    """Value error (RMS over the seven states) of expected semi-gradient TD(0) on Baird's
    counterexample, off-policy and with the on-policy distribution (|v(6)|), for each step size
    in ``alphas`` (:func:`rlnotes.approx.baird_expected_td`).

    Defined in: Deep Q-networks, section The deadly triad.
    """
    from rlnotes.approx import baird_expected_td, baird_features

    alphas = _grid(alphas, "alphas", 1e-6, 1.0)
    num_sweeps = require_int(num_sweeps, "num_sweeps", minimum=1)
    X = baird_features()
    k = np.arange(0, num_sweeps + 1, max(1, num_sweeps // 100))
    curves = {}
    for a in alphas:
        off = np.sqrt(((baird_expected_td(num_sweeps, alpha=a) @ X.T) ** 2).mean(axis=1))
        on = np.abs(baird_expected_td(num_sweeps, alpha=a, distribution="on-policy") @ X.T)[:, 6]
        curves[a] = {"off-policy (uniform over states)": (k, off[k]),
                     "on-policy distribution (|v(6)|)": (k, np.maximum(on[k], 1e-12))}
    panel = Panel(curves, x_label="expected sweeps", y_label="value error (log scale)",
                  log_y=True, title="Expected semi-gradient TD(0), γ = 0.99")
    ys = [v for c in panel.curves.values() for _, y in c.values() for v in y]
    panel.y_domain = [max(min(ys), 1e-6), max(ys) * 2]
    return knob_figure(panel, {"α": alphas}, default=default, fig_id="dqn-baird-alpha",
                       title="Baird's counterexample: the step size does not save it")


# --- Policy gradients -----------------------------------------------------------------------------
def psi_variance_figure(gammas, *, num_episodes=1000, seed=0, default=0.9):
    """Variance (trace of the covariance of one estimate) of each REINFORCE estimator Psi_t on the
    chapter's 5-state random MDP (seed 1, terminal probability 0.15, softmax policy from
    N(0, 1) logits of seed 0) for each discount in ``gammas``
    (:func:`rlnotes.pg_exact.reinforce_estimates`, :func:`rlnotes.pg_exact.estimator_stats`).

    Defined in: Policy gradients, section The Psi_t family.
    """
    from rlnotes import pg_exact
    from rlnotes.mdp import random_mdp

    gammas = _grid(gammas, "gammas", 0.0, 0.999)
    theta = np.random.default_rng(0).normal(size=(5, 3))
    mu0 = np.r_[np.full(4, 0.25), 0.0]
    curves, notes = {}, {}
    for g in gammas:
        mdp = random_mdp(5, 3, gamma=g, seed=1, terminal_prob=0.15)
        truth = pg_exact.exact_gradient(mdp, theta, mu0)
        var = [pg_exact.estimator_stats(
                   pg_exact.reinforce_estimates(mdp, theta, mu0, psi, num_episodes, seed=seed),
                   truth)["variance"] for psi in pg_exact.PSI_CHOICES]
        curves[g] = {"variance of one estimate": (list(pg_exact.PSI_CHOICES), var)}
        notes[g] = f"total / advantage = {var[0] / var[pg_exact.PSI_CHOICES.index('advantage')]:.1f}"
    panel = Panel(curves, x_label="Ψ_t (weight of each score)", x_type="nominal",
                  y_label="variance (trace, log scale)", log_y=True,
                  title=f"REINFORCE on a 5-state MDP, {num_episodes} episodes")
    return knob_figure(panel, {"γ": gammas}, default=default, fig_id="pg-psi-variance",
                       notes=notes, title="A baseline and a critic cut the variance")


# --- Actor-critic ------------------------------------------------------------------------------
def gae_critic_figure(mdp, policy, lams, critic_errors, *, num_samples=300, seed=0, default=None):
    """GAE's policy-gradient bias and variance against lambda (:func:`rlnotes.pg_exact.
    gae_bias_variance`), with the critic V = V^pi + sigma z, z a fixed N(0, 1) offset per
    non-terminal state (seed 1), for each critic error sigma in ``critic_errors``.

    Defined in: Actor-critic and generalised advantage estimation, section Bias and variance of
    GAE, measured.
    """
    from rlnotes import pg_exact
    from rlnotes.mdp import policy_evaluation

    critic_errors = _grid(critic_errors, "critic_errors", 0.0, 100.0)
    lams = np.asarray(_grid(lams, "lams", 0.0, 1.0))
    V_exact = policy_evaluation(mdp, policy)
    z = np.random.default_rng(1).normal(size=mdp.num_states) * ~mdp.absorbing
    bias, var = {}, {}
    for c in critic_errors:
        out = pg_exact.gae_bias_variance(mdp, policy, V_exact + c * z, lams, num_samples,
                                         seed=seed)
        bias[c] = {"policy-gradient bias": (lams, out["bias_pg"])}
        var[c] = {"variance of Â_0": (lams, out["variance"])}
    panels = [Panel(bias, x_label="λ", y_label="bias (RMS over s, a)", title="Bias"),
              Panel(var, x_label="λ", y_label="variance (mean over s, a)", title="Variance")]
    return knob_figure(panels, {"critic error σ (std per state)": critic_errors},
                       default=critic_errors[0] if default is None else default,
                       fig_id="ac-gae-critic", width=300,
                       title="GAE: λ trades the critic's bias for variance")


# --- TRPO and PPO ----------------------------------------------------------------------------------
def ppo_clip_figure(clip_values, *, ratios=None, default=0.2):
    """PPO's per-sample clipped objective (minus :func:`rlnotes.ppo.ppo_clip_loss` of one
    sample) and its gradient with respect to log rho (by autograd), against the ratio rho, for
    A = +1 and A = -1, for each epsilon_clip in ``clip_values``.

    Defined in: TRPO and PPO, section The clipped surrogate objective.
    """
    from rlnotes.ppo import ppo_clip_loss

    clip_values = _grid(clip_values, "clip_values", 1e-3, 0.99)
    ratios = np.linspace(0.3, 1.7, 71) if ratios is None else np.asarray(ratios, float)
    obj, grad = {}, {}
    for eps in clip_values:
        obj[eps], grad[eps] = {}, {}
        for A in (1.0, -1.0):
            o, g = [], []
            for rho in ratios:
                logp = torch.tensor([np.log(rho)], dtype=torch.float64, requires_grad=True)
                loss = ppo_clip_loss(logp, torch.zeros(1, dtype=torch.float64),
                                     torch.tensor([A], dtype=torch.float64), clip_eps=eps)
                loss.backward()
                o.append(-float(loss.detach()))
                g.append(-float(logp.grad))
            obj[eps][f"A = {A:+.0f}"] = (ratios, o)
            grad[eps][f"A = {A:+.0f}"] = (ratios, g)
    panels = [Panel(obj, x_label="ratio ρ", y_label="per-sample objective", title="Objective",
                    rule_y=0.0),
              Panel(grad, x_label="ratio ρ", y_label="gradient w.r.t. log ρ",
                    title="Gradient (0: clipped)", rule_y=0.0)]
    return knob_figure(panels, {"ε_clip": clip_values}, default=default, fig_id="ppo-clip",
                       width=300, title="PPO's clip: where the gradient stops")


# --- RLHF ------------------------------------------------------------------------------------------
def overoptimisation_figure(rm_errors, *, betas=None, n_prompts=20, n_completions=200, seed=0,
                            default=None):
    """Reward over-optimisation, exactly: on a bandit with ``n_prompts`` prompts and
    ``n_completions`` completions each, a random pi_ref, a gold reward R* ~ N(0, 1) and a reward
    model r_psi = R* + c e whose error e is small noise, 0.5 N(0, 1), except on the reward hacks:
    4% of the completions with R* < 0, which it overrates by 4 (e = 0.5 N(0, 1) + 4). For each
    beta in ``betas``, the KL-regularised optimum pi_beta of r_psi
    (:func:`rlnotes.dpo_exact.kl_optimal_policy`): gold and proxy reward against
    KL(pi_beta || pi_ref) (:func:`rlnotes.dpo_exact.kl_per_prompt`), for each error scale c in
    ``rm_errors``.

    Defined in: Reinforcement learning from human feedback, section Reward over-optimisation.
    """
    from rlnotes.dpo_exact import kl_optimal_policy, kl_per_prompt

    rm_errors = _grid(rm_errors, "rm_errors", 0.0, 100.0)
    betas = np.geomspace(10.0, 0.02, 40) if betas is None else np.asarray(betas, float)
    g = torch.Generator().manual_seed(seed)
    shape = (require_int(n_prompts, "n_prompts", minimum=1),
             require_int(n_completions, "n_completions", minimum=2))
    ref_logp = torch.log_softmax(torch.randn(shape, generator=g, dtype=torch.float64), -1)
    gold = torch.randn(shape, generator=g, dtype=torch.float64)
    z = torch.randn(shape, generator=g, dtype=torch.float64)
    u = torch.rand(shape, generator=g, dtype=torch.float64)
    noise = 0.5 * z + 4.0 * ((u < 0.04) & (gold < 0))
    curves = {}
    for c in rm_errors:
        proxy = gold + c * noise
        kl, rg, rp = [], [], []
        for beta in betas:
            pi = kl_optimal_policy(ref_logp.exp(), proxy, float(beta))
            kl.append(float(kl_per_prompt(pi.clamp_min(1e-300).log(), ref_logp).mean()))
            rg.append(float((pi * gold).sum(-1).mean()))
            rp.append(float((pi * proxy).sum(-1).mean()))
        curves[c] = {"proxy reward r_ψ (what is optimised)": (kl, rp),
                     "gold reward R⋆ (what we want)": (kl, rg)}
    panel = Panel(curves, x_label="KL(π_β ‖ π_ref) in nats (β falls to the right)",
                  y_label="expected reward", title="The KL-regularised optimum as β falls")
    return knob_figure(panel, {"reward-model error scale σ": rm_errors},
                       default=rm_errors[len(rm_errors) // 2] if default is None else default,
                       fig_id="rlhf-overoptimisation",
                       title="Over-optimisation: a wrong reward model, optimised exactly")


# --- DPO -----------------------------------------------------------------------------------------
def dpo_beta_figure(ref_logp, r, betas, *, prompt=0, default=None):
    """pi_ref and the KL-regularised optimum pi* (:func:`rlnotes.dpo_exact.kl_optimal_policy`)
    over the completions of one prompt, sorted by reward, for each beta in ``betas``.
    ``ref_logp`` and ``r``: (X, Y) tensors.

    Defined in: Direct preference optimisation, section Verified exactly.
    """
    from rlnotes.dpo_exact import kl_optimal_policy, kl_per_prompt

    betas = _grid(betas, "betas", 1e-6, 1e6)
    prompt = require_int(prompt, "prompt", minimum=0)
    if prompt >= ref_logp.shape[0]:
        raise ValueError(f"prompt must be < {ref_logp.shape[0]}, got {prompt}")
    order = torch.argsort(r[prompt]).tolist()
    names = [f"{r[prompt, i].item():+.2f}" for i in order]
    curves, notes = {}, {}
    for beta in betas:
        star = kl_optimal_policy(ref_logp.exp(), r, beta)
        curves[beta] = {"π_ref": (names, ref_logp[prompt].exp()[order].tolist()),
                        "π* (DPO's target)": (names, star[prompt][order].tolist())}
        notes[beta] = (f"KL(π* ‖ π_ref) = "
                       f"{float(kl_per_prompt(star.clamp_min(1e-300).log(), ref_logp)[prompt]):.2f} nats")
    panel = Panel(curves, x_label="completion y, by its reward r(x, y)", x_type="nominal",
                  y_label="probability", mark="bar", y_domain=[0.0, 1.0],
                  title="One prompt's completions")
    return knob_figure(panel, {"β": betas}, default=betas[len(betas) // 2] if default is None
                       else default, fig_id="dpo-beta", notes=notes, width=480,
                       title="β: how far π* may move from π_ref")


# --- GRPO ------------------------------------------------------------------------------------------
def group_advantage_figure(group_sizes, *, default=8):
    """The advantage :func:`rlnotes.grpo.group_advantages` gives a correct and an incorrect
    completion of a group of size G with k correct, against the group's success rate k / G,
    with the std (``scale="group"``) and without (``"none"``, Dr. GRPO), for each G.

    Defined in: GRPO, section From PPO to GRPO.
    """
    from rlnotes.grpo import group_advantages

    sizes = [require_int(G, "group_sizes", minimum=2) for G in group_sizes]
    if len(sizes) < 2 or len(set(sizes)) != len(sizes):
        raise ValueError(f"group_sizes must hold at least 2 distinct sizes >= 2, got {group_sizes!r}")
    curves = {}
    for G in sizes:
        series = {}
        for scale, tag in (("group", "÷ std"), ("none", "no std")):
            xs_c, ys_c, xs_i, ys_i = [], [], [], []
            for k in range(1, G):
                rewards = torch.tensor([1.0] * k + [0.0] * (G - k), dtype=torch.float64)
                adv = group_advantages(rewards, G, scale=scale)
                xs_c.append(k / G); ys_c.append(float(adv[0]))
                xs_i.append(k / G); ys_i.append(float(adv[-1]))
            series[f"correct, {tag}"] = (xs_c, ys_c)
            series[f"incorrect, {tag}"] = (xs_i, ys_i)
        curves[G] = series
    panel = Panel(curves, x_label="the group's success rate k / G", y_label="advantage",
                  title="Advantages within one group (k = 0 or G: all zero)", rule_y=0.0)
    return knob_figure(panel, {"group size G": sizes}, default=default, fig_id="grpo-group-size",
                       title="Group size and success rate set the advantages")


# --- Dr. GRPO, DAPO ---------------------------------------------------------------------------------
def aggregation_figure(lengths, *, other_length=32, max_tokens=64, default=16):
    """Per-token and per-completion push (minus the gradient of :func:`rlnotes.grpo.grpo_loss`
    with respect to each token's log-prob, on-policy) under each aggregation, for a group of a
    correct completion of the knob's length and an incorrect one of ``other_length`` tokens.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length
    bias.
    """
    from rlnotes.grpo import group_advantages, grpo_loss

    lengths = [require_int(n, "lengths", minimum=1) for n in lengths]
    other_length = require_int(other_length, "other_length", minimum=1)
    max_tokens = require_int(max_tokens, "max_tokens", minimum=max(lengths + [other_length]))
    if len(lengths) < 2 or len(set(lengths)) != len(lengths):
        raise ValueError(f"lengths must hold at least 2 distinct lengths, got {lengths!r}")
    adv = group_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64), 2)
    types = ["grpo", "dapo", "dr_grpo"]
    per_token, total = {}, {}
    for n in lengths:
        mask = torch.zeros(2, max_tokens, dtype=torch.float64)
        mask[0, :n], mask[1, :other_length] = 1, 1
        tok = {"correct (the knob's length)": [], f"incorrect ({other_length} tokens)": []}
        tot = {k: [] for k in tok}
        for lt in types:
            logp = torch.zeros(2, max_tokens, dtype=torch.float64, requires_grad=True)
            grpo_loss(logp, None, None, adv, mask, loss_type=lt, max_tokens=max_tokens).backward()
            push = -logp.grad * mask
            for row, key in enumerate(tok):
                tok[key].append(float(push[row, 0]))
                tot[key].append(float(push[row].sum()))
        per_token[n] = {k: (types, v) for k, v in tok.items()}
        total[n] = {k: (types, v) for k, v in tot.items()}
    panels = [Panel(per_token, x_label="loss_type", x_type="nominal", mark="bar",
                    y_label="push on each token's log-prob", title="Per token"),
              Panel(total, x_label="loss_type", x_type="nominal", mark="bar",
                    y_label="push summed over the completion", title="Per completion")]
    return knob_figure(panels, {"length of the correct completion": lengths}, default=default,
                       fig_id="grpo-aggregation", width=280,
                       title="Aggregation: how length changes each token's weight")
