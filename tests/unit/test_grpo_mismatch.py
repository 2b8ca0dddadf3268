"""The GRPO chapter's sections on the training-inference mismatch (tis_weights) and on
DeepSeekMath's unified view (gradient_coefficients), and the record helper of its section
Beyond imitation (rlnotes.lm.grpo_record)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from rlnotes import grpo  # noqa: E402
from rlnotes.lm.grpo_record import beyond_record_summary, plot_beyond_record  # noqa: E402


def _logps(seed=0, rows=4, L=5):
    g = torch.Generator().manual_seed(seed)
    return -torch.rand(rows, L, generator=g, dtype=torch.float64) * 2


# --- tis_weights ---------------------------------------------------------------------------

def test_tis_weights_are_the_capped_ratio_and_zero_on_padding():
    trainer = _logps(0)
    sampler = trainer - torch.linspace(-1.5, 1.5, 20, dtype=torch.float64).view(4, 5)
    mask = torch.ones(4, 5, dtype=torch.long)
    mask[0, 3:] = 0
    w = grpo.tis_weights(trainer, sampler, mask, cap=2.0)
    expected = torch.clamp(torch.exp(trainer - sampler), max=2.0) * mask
    assert torch.allclose(w, expected)
    assert (w[0, 3:] == 0).all() and float(w.max()) == 2.0 and float(w[mask.bool()].min()) < 1
    assert not w.requires_grad


def test_tis_weights_equal_samplers_give_one_and_padding_may_hold_anything():
    trainer = _logps(1).requires_grad_(True)
    sampler = trainer.detach().clone()
    mask = torch.ones_like(sampler, dtype=torch.bool)
    mask[:, -1] = False
    sampler[:, -1] = float("nan")
    w = grpo.tis_weights(trainer, sampler, mask)
    assert torch.equal(w[mask], torch.ones(int(mask.sum()), dtype=w.dtype))
    assert not w.requires_grad and torch.isfinite(w).all()


def test_tis_weights_correct_an_expectation_under_the_sampler():
    """Untruncated, E_sampler[rho f] = E_trainer[f]; a cap below the largest ratio biases it."""
    p_s = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    p_t = torch.tensor([0.5, 0.2, 0.3], dtype=torch.float64)
    f = torch.tensor([1.0, -2.0, 5.0], dtype=torch.float64)
    logs = lambda p: p.log().view(1, 3)  # noqa: E731
    w_inf = grpo.tis_weights(logs(p_t), logs(p_s), torch.ones(1, 3), cap=1e9).view(-1)
    assert torch.isclose((p_s * w_inf * f).sum(), (p_t * f).sum())
    w_2 = grpo.tis_weights(logs(p_t), logs(p_s), torch.ones(1, 3), cap=2.0).view(-1)
    assert float(w_2[2]) == 2.0 and float((p_s * w_2).sum()) < 1  # truncation loses mass


@pytest.mark.parametrize("bad, match", [
    (dict(trainer_logp=torch.zeros(4, 5, dtype=torch.long)), "trainer_logp"),
    (dict(trainer_logp=torch.zeros(20)), "trainer_logp"),
    (dict(sampler_logp=torch.zeros(4, 4)), "sampler_logp"),
    (dict(mask=torch.full((4, 5), 2)), "mask"),
    (dict(cap=0.5), "cap"),
    (dict(cap="2"), "cap"),
    (dict(sampler_logp=torch.full((4, 5), float("inf"))), "sampler_logp"),
])
def test_tis_weights_reject_bad_input(bad, match):
    args = dict(trainer_logp=torch.zeros(4, 5), sampler_logp=torch.zeros(4, 5),
                mask=torch.ones(4, 5), cap=2.0)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        grpo.tis_weights(**args)


# --- gradient_coefficients -----------------------------------------------------------------

R = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # a mixed group, then a solved one
MASK = torch.tensor([[1, 1, 1, 0]] * 4 + [[1, 1, 0, 0]] * 4)


def test_gradient_coefficients_of_sft_and_rft():
    assert torch.equal(grpo.gradient_coefficients("sft", R, 4, MASK), MASK.float())
    rft = grpo.gradient_coefficients("rft", R, 4, MASK)
    assert torch.equal(rft, R[:, None] * MASK)
    assert torch.equal(grpo.gradient_coefficients("online_rft", R, 4, MASK), rft)


def test_gradient_coefficients_of_grpo_sum_to_zero_per_group_and_vanish_on_solved_groups():
    gc = grpo.gradient_coefficients("grpo", R, 4, MASK)
    per_completion = gc.sum(1) / MASK.sum(1)
    assert torch.allclose(per_completion.view(2, 4).sum(1), torch.zeros(2), atol=1e-6)
    assert torch.equal(per_completion[:4] > 0, R[:4] == 1)
    assert (gc[4:] == 0).all()  # the solved group: nothing to learn
    assert torch.equal(gc[MASK == 0], torch.zeros(int((MASK == 0).sum())))


def test_gradient_coefficients_of_grpo_are_minus_the_gradient_of_grpo_loss():
    logp = _logps(2, rows=8, L=4)
    ref = _logps(3, rows=8, L=4)
    R64, M = R.double(), MASK.bool()
    gc = grpo.gradient_coefficients("grpo", R64, 4, MASK, logp=logp, ref_logp=ref, beta=0.3)
    lp = logp.clone().requires_grad_(True)
    grpo.grpo_loss(lp, None, ref, grpo.group_advantages(R64, 4), M, beta=0.3).backward()
    assert torch.allclose(-lp.grad * 8 * M.sum(1, keepdim=True), gc * M)
    kl_part = gc - grpo.gradient_coefficients("grpo", R64, 4, MASK)
    assert torch.allclose(kl_part, 0.3 * (torch.exp(ref - logp) - 1) * M)


@pytest.mark.parametrize("bad, match", [
    (dict(method="ppo"), "method"),
    (dict(rewards=torch.ones(8, dtype=torch.long)), "rewards"),
    (dict(group_size=3), "group_size"),
    (dict(mask=torch.ones(7, 4)), "mask"),
    (dict(method="rft", rewards=torch.full((8,), 0.5)), "rewards"),
    (dict(beta=0.1), "logp"),
    (dict(beta=-1.0), "beta"),
])
def test_gradient_coefficients_reject_bad_input(bad, match):
    args = dict(method="grpo", rewards=R, group_size=4, mask=MASK)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        grpo.gradient_coefficients(**args)


# --- the record of the runs beyond imitation -----------------------------------------------

def _record():
    def run(curve):
        return dict(greedy_carry=curve[-1], greedy_no_carry=0.99, greedy=[0.6, 0.9 + curve[-1] / 100],
                    curve_steps=[0, 10, 20, 30], curve_greedy_carry=curve)
    start = dict(greedy_carry=0.05, greedy_no_carry=1.0, greedy=0.6)
    return {"builds": {
        "a": {"weak": {"start": start, "runs": {"0": run([0.05, 0.5, 0.8, 0.9]),
                                               "1": run([0.05, 0.3, 0.9, 0.95])}}},
        "b": {"weak": {"start": start, "runs": {"0": run([0.05, 0.2, 0.3, 0.85])}}}}}


def test_beyond_record_summary_reads_every_run():
    s = beyond_record_summary(_record(), warmup=10, early=20)
    assert len(s["runs"]) == 3 and len(s["starts"]) == 2 and s["steps"] == [0, 10, 20, 30]
    assert np.allclose(s["gain"], [0.85, 0.9, 0.8])
    assert np.allclose(s["at_warmup"], [0.5, 0.3, 0.2]) and np.allclose(s["at_early"], [0.8, 0.9, 0.3])
    assert np.allclose(s["share_early"], [0.75 / 0.85, 0.85 / 0.9, 0.25 / 0.8])
    assert s["table"]["carry"] == (0.05, 0.05, 0.85, 0.95)
    assert np.all(s["overall"] > 0)


@pytest.mark.parametrize("record, kw, match", [
    ({}, {}, "record"),
    ({"builds": {"a": {"slip": {}}}}, {}, "record"),
    (None, dict(warmup=15), "warmup"),
    (None, dict(early=5), "early"),
    (None, dict(warmup=-1), "warmup"),
])
def test_beyond_record_summary_rejects_bad_input(record, kw, match):
    with pytest.raises(ValueError, match=match):
        beyond_record_summary(_record() if record is None else record, **kw)


def test_plot_beyond_record_draws_both_panels():
    s = beyond_record_summary(_record())
    fig = plot_beyond_record(s, {0: 0.05, 10: 0.6, 20: 0.85}, steps_trained=30)
    left, right = fig.axes
    assert left.get_xlabel() and left.get_ylabel() and right.get_ylabel()
    assert len(left.lines) == 2 and len(right.lines) == 4  # median and the live run; 2 x 2 markers
    for bad, match in ((dict(summary={}), "summary"), (dict(live_curve=[1]), "live_curve"),
                       (dict(steps_trained=0), "steps_trained")):
        args = dict(summary=s, live_curve=None, steps_trained=30)
        args.update(bad)
        with pytest.raises(ValueError, match=match):
            plot_beyond_record(**args)


def test_plot_passk_panels_draws_each_panel_with_its_band():
    from rlnotes.lm.grpo_record import plot_passk_panels
    ks = np.arange(1, 17)
    up = 1 - 0.5 ** ks
    fig = plot_passk_panels(ks, [("a", {"start, temperature 1": up, "after GRPO, temperature 1": up}),
                                 ("b", {"start, temperature 1": up})],
                            recorded=[np.stack([up, up * 0.9]), np.stack([up])])
    assert len(fig.axes) == 2
    assert [len(ax.lines) for ax in fig.axes] == [2, 1] and all(ax.collections for ax in fig.axes)
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_ylabel() == "pass@k"
    for bad, match in ((dict(ks=[0, 1]), "ks"), (dict(panels=[]), "panels"),
                       (dict(panels=[("a", {"x": up[:3]})]), "panels"),
                       (dict(recorded=[up, up]), "recorded"), (dict(recorded=[up[None, :4]]), "recorded")):
        args = dict(ks=ks, panels=[("a", {"x": up})], recorded=None)
        args.update(bad)
        with pytest.raises(ValueError, match=match):
            plot_passk_panels(**args)
