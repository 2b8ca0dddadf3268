"""Figures with a knob (rlnotes.plotting.interactive and rlnotes.plotting.knobs): the numbers
embedded in each figure equal rlnotes' own for two settings of its knob, the figure displays as
HTML + PNG in the book and as Vega-Lite + PNG in a notebook, and bad input is refused."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlnotes.envs  # noqa: F401  (registers the package's environments)
from rlnotes import pg_exact, tabular
from rlnotes.approx import baird_expected_td, baird_features
from rlnotes.dpo_exact import CompletionSpace, kl_optimal_policy, kl_per_prompt
from rlnotes.envs.gridworld import GridWorldEnv
from rlnotes.grpo import group_advantages, grpo_loss
from rlnotes.mdp import (TabularMDP, policy_evaluation, random_mdp, uniform_policy,
                         value_iteration)
from rlnotes.plotting import knobs
from rlnotes.plotting.interactive import (BOOK_ENV_VAR, VEGALITE_MIME, Panel, knob_figure)
from rlnotes.plotting.learning import moving_average
from rlnotes.ppo import ppo_clip_loss

TOL = 1e-12


def embedded(fig, panel: int, key, series: str):
    """(x, y) of one series at one knob setting, read back from the figure's specification as
    it is written into the page (JSON), filtered as the slider filters it."""
    spec = json.loads(json.dumps(fig.spec))
    key = key if isinstance(key, tuple) else (key,)
    knob_values = [k["values"] for k in spec["usermeta"]["rlnotes"]["knobs"]]
    idx = [vals.index(v) for vals, v in zip(knob_values, key)]
    rows = [r for r in spec["datasets"][f"panel{panel}"]
            if r["series"] == series and all(r[f"k{j}"] == i for j, i in enumerate(idx))]
    assert rows, f"no rows for {series!r} at {key}"
    return [r["x"] for r in rows], np.array([r["y"] for r in rows])


def close(a, b, tol=TOL):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


# --- each chapter's figure against rlnotes ---------------------------------------------------
def test_gamma_figure_holds_value_iteration():
    rows, cols = np.divmod(np.arange(64), 8)
    d = rows + (7 - cols)
    fig = knobs.gamma_figure(GridWorldEnv(), [0.5, 0.9], distance=d)
    for g in (0.5, 0.9):
        mdp = TabularMDP.from_gymnasium(GridWorldEnv(), gamma=g)
        V, _ = value_iteration(mdp)
        V_rand = policy_evaluation(mdp, uniform_policy(mdp))
        live = ~mdp.absorbing
        order = np.argsort(d[live], kind="stable")
        x, y = embedded(fig, 0, g, "V*(s): optimal, value iteration")
        assert close(x, d[live][order]) and close(y, V[live][order])
        _, y = embedded(fig, 0, g, "V(s): uniform random policy")
        assert close(y, V_rand[live][order])
    a = embedded(fig, 0, 0.5, "V*(s): optimal, value iteration")[1]
    b = embedded(fig, 0, 0.9, "V*(s): optimal, value iteration")[1]
    assert not close(a, b, 1e-3)        # the knob changes the curve


def test_cliff_figure_holds_td_control_batch():
    env = gym.make("CliffWalking-v1")
    fig = knobs.cliff_epsilon_figure(env, [0.05, 0.2], num_runs=2, num_episodes=15, smooth=5,
                                     default=0.05)
    for eps in (0.05, 0.2):
        for name, method in (("SARSA", "sarsa"), ("Q-learning", "q_learning")):
            _, R = tabular.td_control_batch(env, method, num_runs=2, num_episodes=15, alpha=0.5,
                                            epsilon=eps, gamma=1.0, seed=0)
            x, y = embedded(fig, 0, eps, name)
            assert close(y, moving_average(R.mean(0), 5)) and close(x, np.arange(5, 16))


def test_baird_figure_holds_expected_td():
    fig = knobs.baird_step_size_figure([0.01, 0.1], num_sweeps=50)
    X = baird_features()
    for a in (0.01, 0.1):
        off = np.sqrt(((baird_expected_td(50, alpha=a) @ X.T) ** 2).mean(1))
        x, y = embedded(fig, 0, a, "off-policy (uniform over states)")
        assert close(y, off[np.array(x, dtype=int)])
    assert embedded(fig, 0, 0.1, "off-policy (uniform over states)")[1][-1] > \
        embedded(fig, 0, 0.01, "off-policy (uniform over states)")[1][-1]


def test_baird_figure_diverges_off_policy_at_every_step_size():
    fig = knobs.baird_step_size_figure([0.001, 0.003, 0.01, 0.03, 0.1], num_sweeps=2000)
    for a in (0.001, 0.003, 0.01, 0.03, 0.1):      # the chapter's grid: what its prose says
        _, off = embedded(fig, 0, a, "off-policy (uniform over states)")
        _, on = embedded(fig, 0, a, "on-policy distribution (|v(6)|)")
        assert off[-1] > 5 * off[0] and np.all(np.diff(off[len(off) // 2:]) > 0)
        assert on[-1] < on[0] and np.all(np.diff(on) <= 0)


def test_psi_variance_figure_holds_estimator_stats():
    fig = knobs.psi_variance_figure([0.5, 0.9], num_episodes=60, default=0.5)
    theta = np.random.default_rng(0).normal(size=(5, 3))
    mu0 = np.r_[np.full(4, 0.25), 0.0]
    for g in (0.5, 0.9):
        mdp = random_mdp(5, 3, gamma=g, seed=1, terminal_prob=0.15)
        truth = pg_exact.exact_gradient(mdp, theta, mu0)
        want = [pg_exact.estimator_stats(pg_exact.reinforce_estimates(mdp, theta, mu0, psi, 60,
                                                                      seed=0), truth)["variance"]
                for psi in pg_exact.PSI_CHOICES]
        x, y = embedded(fig, 0, g, "variance of one estimate")
        assert x == list(pg_exact.PSI_CHOICES) and close(y, want)


def test_gae_critic_figure_holds_gae_bias_variance():
    mdp = random_mdp(5, 3, gamma=0.9, seed=1, terminal_prob=0.15)
    pi = pg_exact.softmax_policy(np.random.default_rng(0).normal(size=(5, 3)))
    lams = [0.0, 0.5, 1.0]
    fig = knobs.gae_critic_figure(mdp, pi, lams, [0.0, 2.0], num_samples=20)
    V = policy_evaluation(mdp, pi)
    z = np.random.default_rng(1).normal(size=5) * ~mdp.absorbing
    for c in (0.0, 2.0):
        out = pg_exact.gae_bias_variance(mdp, pi, V + c * z, lams, 20, seed=0)
        assert close(embedded(fig, 0, c, "policy-gradient bias")[1], out["bias_pg"])
        assert close(embedded(fig, 1, c, "variance of Â_0")[1], out["variance"])


def test_ppo_clip_figure_holds_ppo_clip_loss():
    ratios = np.array([0.5, 0.85, 1.2, 1.5])
    fig = knobs.ppo_clip_figure([0.1, 0.3], ratios=ratios, default=0.1)
    for eps in (0.1, 0.3):
        for A in (1.0, -1.0):
            o, g = [], []
            for rho in ratios:
                logp = torch.tensor([np.log(rho)], dtype=torch.float64, requires_grad=True)
                loss = ppo_clip_loss(logp, torch.zeros(1, dtype=torch.float64),
                                     torch.tensor([A], dtype=torch.float64), clip_eps=eps)
                loss.backward()
                o.append(-loss.item())
                g.append(-logp.grad.item())
            assert close(embedded(fig, 0, eps, f"A = {A:+.0f}")[1], o)
            assert close(embedded(fig, 1, eps, f"A = {A:+.0f}")[1], g)
    # A = +1, rho = 1.2: clipped (zero gradient) with eps_clip = 0.1, not with 0.3
    assert embedded(fig, 1, 0.1, "A = +1")[1][2] == 0.0
    assert embedded(fig, 1, 0.3, "A = +1")[1][2] != 0.0


def test_overoptimisation_figure_holds_kl_optimal_policy():
    betas = [2.0, 0.1]
    fig = knobs.overoptimisation_figure([0.0, 1.0], betas=betas, n_prompts=3, n_completions=7)
    g = torch.Generator().manual_seed(0)
    ref_logp = torch.log_softmax(torch.randn((3, 7), generator=g, dtype=torch.float64), -1)
    gold = torch.randn((3, 7), generator=g, dtype=torch.float64)
    z = torch.randn((3, 7), generator=g, dtype=torch.float64)
    u = torch.rand((3, 7), generator=g, dtype=torch.float64)
    noise = 0.5 * z + 4.0 * ((u < 0.04) & (gold < 0))
    for c in (0.0, 1.0):
        proxy = gold + c * noise
        pis = [kl_optimal_policy(ref_logp.exp(), proxy, b) for b in betas]
        kl = [kl_per_prompt(p.log(), ref_logp).mean().item() for p in pis]
        x, y = embedded(fig, 0, c, "gold reward R⋆ (what we want)")
        assert close(x, kl) and close(y, [(p * gold).sum(-1).mean().item() for p in pis])
        _, y = embedded(fig, 0, c, "proxy reward r_ψ (what is optimised)")
        assert close(y, [(p * proxy).sum(-1).mean().item() for p in pis])


def test_overoptimisation_figure_shows_the_gold_reward_fall():
    fig = knobs.overoptimisation_figure([0.0, 1.5])
    _, gold = embedded(fig, 0, 1.5, "gold reward R⋆ (what we want)")
    _, proxy = embedded(fig, 0, 1.5, "proxy reward r_ψ (what is optimised)")
    assert gold.max() > gold[-1] + 0.3 and proxy[-1] == proxy.max()
    _, gold0 = embedded(fig, 0, 0.0, "gold reward R⋆ (what we want)")
    assert np.all(np.diff(gold0) > -1e-9)      # a right reward model: no fall


def test_dpo_beta_figure_holds_kl_optimal_policy():
    space = CompletionSpace(vocab_size=3, max_words=2)
    g = torch.Generator().manual_seed(0)
    ref_logp = space.seq_logp(space.random_logits(2, g, scale=0.5))
    r = torch.randn(ref_logp.shape, generator=g, dtype=torch.float64)
    fig = knobs.dpo_beta_figure(ref_logp, r, [0.1, 1.0])
    order = torch.argsort(r[0])
    for beta in (0.1, 1.0):
        star = kl_optimal_policy(ref_logp.exp(), r, beta)
        assert close(embedded(fig, 0, beta, "π* (DPO's target)")[1], star[0][order].numpy())
        assert close(embedded(fig, 0, beta, "π_ref")[1], ref_logp[0].exp()[order].numpy())


def test_group_advantage_figure_holds_group_advantages():
    fig = knobs.group_advantage_figure([4, 16], default=4)
    for G in (4, 16):
        for k in (1, G // 2):
            rewards = torch.tensor([1.0] * k + [0.0] * (G - k), dtype=torch.float64)
            for scale, tag in (("group", "÷ std"), ("none", "no std")):
                adv = group_advantages(rewards, G, scale=scale)
                x, y = embedded(fig, 0, G, f"correct, {tag}")
                assert abs(y[x.index(k / G)] - adv[0].item()) < TOL
                x, y = embedded(fig, 0, G, f"incorrect, {tag}")
                assert abs(y[x.index(k / G)] - adv[-1].item()) < TOL


def test_aggregation_figure_holds_grpo_loss_gradients():
    fig = knobs.aggregation_figure([8, 24], other_length=16, max_tokens=32, default=8)
    adv = group_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64), 2)
    for n in (8, 24):
        mask = torch.zeros(2, 32, dtype=torch.float64)
        mask[0, :n], mask[1, :16] = 1, 1
        for j, lt in enumerate(["grpo", "dapo", "dr_grpo"]):
            logp = torch.zeros(2, 32, dtype=torch.float64, requires_grad=True)
            grpo_loss(logp, None, None, adv, mask, loss_type=lt, max_tokens=32).backward()
            push = -logp.grad * mask
            x, y = embedded(fig, 0, n, "correct (the knob's length)")
            assert x[j] == lt and abs(y[j] - push[0, 0].item()) < TOL
            _, y = embedded(fig, 1, n, "incorrect (16 tokens)")
            assert abs(y[j] - push[1].sum().item()) < TOL
    # GRPO: equal total push for both completions whatever the length
    _, tot = embedded(fig, 1, 24, "correct (the knob's length)")
    _, tot_i = embedded(fig, 1, 24, "incorrect (16 tokens)")
    assert abs(tot[0] + tot_i[0]) < 1e-12


# --- display ------------------------------------------------------------------------------------
def _small():
    curves = {v: {"line": ([0, 1, 2], [v, 2 * v, 3 * v])} for v in (1, 2)}
    return knob_figure(Panel(curves, x_label="x", y_label="y"), {"k": [1, 2]}, fig_id="t-small",
                       default=2, title="a test")


def test_book_bundle_is_html_and_png(monkeypatch):
    monkeypatch.setenv(BOOK_ENV_VAR, "1")
    bundle = _small()._repr_mimebundle_()
    assert bundle["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    html = bundle["text/html"]
    assert 'id="rlnotes-fig-t-small"' in html and "vegaEmbed" in html and VEGALITE_MIME not in bundle
    assert not re.search(r"<script[^>]+src=", html)         # no script fetched by the figure
    spec = json.loads(re.search(r"spec = (\{.*\});\n", html).group(1).replace("<\\/", "</"))
    assert spec["params"][0]["value"] == 1                  # the default, as an index
    assert [r["y"] for r in spec["datasets"]["panel0"] if r["k0"] == 1] == [2.0, 4.0, 6.0]


def test_notebook_bundle_is_vegalite_and_png(monkeypatch):
    monkeypatch.delenv(BOOK_ENV_VAR, raising=False)
    bundle = _small()._repr_mimebundle_()
    assert set(bundle) == {VEGALITE_MIME, "image/png", "text/plain"}
    assert bundle[VEGALITE_MIME]["$schema"].endswith("/v5.json")
    # JupyterLab 4 and VS Code draw it with their own Vega-Lite 5: it must compile there
    import vl_convert as vlc

    assert "<svg" in vlc.vegalite_to_svg(bundle[VEGALITE_MIME], vl_version="5.8")


def test_notebook_bundle_without_vl_convert(monkeypatch):
    import sys

    monkeypatch.delenv(BOOK_ENV_VAR, raising=False)
    monkeypatch.setitem(sys.modules, "vl_convert", None)    # import fails
    bundle = _small()._repr_mimebundle_()
    assert set(bundle) == {VEGALITE_MIME, "text/plain"}


# --- bad input ----------------------------------------------------------------------------------
def test_panel_rejects_bad_input():
    good = {1: {"s": ([0, 1], [0.0, 1.0])}}
    with pytest.raises(ValueError, match="mark"):
        Panel(good, x_label="x", y_label="y", mark="pie")
    with pytest.raises(ValueError, match="equal"):
        Panel({1: {"s": ([0, 1, 2], [0.0, 1.0])}}, x_label="x", y_label="y")
    with pytest.raises(ValueError, match="finite"):
        Panel({1: {"s": ([0, 1], [0.0, np.nan])}}, x_label="x", y_label="y")
    with pytest.raises(ValueError, match="x_label"):
        Panel(good, x_label="", y_label="y")
    with pytest.raises(ValueError, match="curves"):
        Panel({}, x_label="x", y_label="y")


def test_knob_figure_rejects_bad_input():
    p = lambda: Panel({v: {"s": ([0, 1], [0.0, v])} for v in (1, 2)}, x_label="x", y_label="y")
    with pytest.raises(ValueError, match="knobs"):
        knob_figure(p(), {"k": [1]}, fig_id="a")
    with pytest.raises(ValueError, match="knobs"):
        knob_figure(p(), {"a": [1, 2], "b": [1, 2], "c": [1, 2]}, fig_id="a")
    with pytest.raises(ValueError, match="fig_id"):
        knob_figure(p(), {"k": [1, 2]}, fig_id="a b")
    with pytest.raises(ValueError, match="default"):
        knob_figure(p(), {"k": [1, 2]}, fig_id="a", default=3)
    with pytest.raises(ValueError, match="one key per point"):
        knob_figure(p(), {"k": [1, 2, 3]}, fig_id="a")
    with pytest.raises(ValueError, match="panels"):
        knob_figure([], {"k": [1, 2]}, fig_id="a")


def test_builders_reject_bad_input():
    with pytest.raises(ValueError, match="gammas"):
        knobs.gamma_figure(GridWorldEnv(), [0.5, 1.5], distance=np.zeros(64))
    with pytest.raises(ValueError, match="distance"):
        knobs.gamma_figure(GridWorldEnv(), [0.5, 0.9], distance=np.zeros(3))
    with pytest.raises(ValueError, match="clip_values"):
        knobs.ppo_clip_figure([0.2, 0.2])
    with pytest.raises(ValueError, match="group_sizes"):
        knobs.group_advantage_figure([1, 4])
    with pytest.raises(ValueError, match="lengths"):
        knobs.aggregation_figure([8, 8])
    with pytest.raises(ValueError, match="max_tokens"):
        knobs.aggregation_figure([8, 80], max_tokens=64)
    with pytest.raises(ValueError, match="alphas"):
        knobs.baird_step_size_figure([0.01, -0.1])
    with pytest.raises(ValueError, match="rm_errors"):
        knobs.overoptimisation_figure([0.5])
    with pytest.raises(ValueError, match="prompt"):
        knobs.dpo_beta_figure(torch.zeros(1, 3).log_softmax(-1), torch.zeros(1, 3),
                              [0.1, 1.0], prompt=2)
