"""Tests of rlnotes.dpo_exact: the enumerable completion space, pi* in closed form, the
infinite-data DPO fit reaching it, KL to pi* falling with data, the length-averaged optimum, IPO's
bias, and bad inputs (the DPO chapter's section Verified exactly)."""

import math

import numpy as np
import pytest
import torch

from rlnotes.dpo_exact import (CompletionSpace, data_sweep, expected_pair_counts, fit_tabular,
                               implicit_reward_error, kl_optimal_policy, kl_per_prompt,
                               length_averaged_optimum, sample_pair_counts)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup():
    """The chapter's setting: 3 words, up to 2 words (13 completions), 2 prompts, beta 0.5."""
    space = CompletionSpace(3, 2)
    g = torch.Generator().manual_seed(0)
    ref_logits = space.random_logits(2, g, scale=0.5)
    ref_logp = space.seq_logp(ref_logits)
    r = torch.randn(ref_logp.shape, generator=g, dtype=torch.float64)
    beta = 0.5
    star = kl_optimal_policy(ref_logp.exp(), r, beta).log()
    return space, ref_logits, ref_logp, r, beta, star


def test_space_enumerates_every_completion_once():
    space = CompletionSpace(3, 2)
    assert len(space) == 1 + 3 + 9 and space.n_states == 1 + 3
    assert len(set(space.completions)) == len(space)
    assert space.lengths.tolist() == [len(c) + 1 for c in space.completions]


@pytest.mark.parametrize("V,K", [(2, 1), (3, 2), (2, 3)])
def test_tabular_policy_is_a_distribution(V, K):
    space = CompletionSpace(V, K)
    logits = space.random_logits(3, torch.Generator().manual_seed(1), scale=2.0)
    torch.testing.assert_close(space.seq_logp(logits).exp().sum(-1), torch.ones(3, dtype=torch.float64))


def test_seq_logp_is_product_of_token_probabilities():
    space = CompletionSpace(2, 2)
    logits = space.random_logits(1, torch.Generator().manual_seed(2))
    p = torch.softmax(logits[0], -1)  # states: (), (0,), (1,)
    state = {(): 0, (0,): 1, (1,): 2}
    for j, c in enumerate(space.completions):
        want = 1.0
        for t, w in enumerate(c):
            want *= float(p[state[c[:t]], w])
        if len(c) < 2:
            want *= float(p[state[c], 2])  # EOS
        assert math.isclose(float(space.seq_logp(logits)[0, j].exp()), want, rel_tol=1e-12)


def test_optimal_policy_closed_form_maximises_objective(setup):
    _, _, ref_logp, r, beta, star = setup
    p_ref = ref_logp.exp()

    def objective(logp):  # E_pi[r] - beta KL(pi || pi_ref), per prompt
        return (logp.exp() * r).sum(-1) - beta * kl_per_prompt(logp, ref_logp)

    best = objective(star)
    # the optimum's value is beta log Z(x)
    torch.testing.assert_close(best, beta * torch.logsumexp(ref_logp + r / beta, -1))
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        other = torch.log_softmax(star + 0.3 * torch.randn(star.shape, generator=g, dtype=torch.float64), -1)
        assert bool((objective(other) < best).all())
    # beta -> infinity keeps pi_ref; small beta concentrates on the best completion
    torch.testing.assert_close(kl_optimal_policy(p_ref, r, 1e6), p_ref, atol=1e-5, rtol=0)
    greedy = kl_optimal_policy(p_ref, r, 1e-3)
    assert bool((greedy.argmax(-1) == r.argmax(-1)).all()) and float(greedy.max(-1).values.min()) > 0.99


def test_infinite_data_dpo_reaches_pi_star_and_recovers_r(setup):
    space, ref_logits, ref_logp, r, beta, star = setup
    lp = fit_tabular(space, ref_logits, expected_pair_counts(ref_logp, r), beta, steps=300)
    assert float(kl_per_prompt(lp, star).max()) < 1e-6
    assert implicit_reward_error(lp, ref_logp, r, beta) < 1e-3
    assert float(kl_per_prompt(star, ref_logp).mean()) > 0.3  # pi* is far from pi_ref


def test_kl_to_pi_star_falls_as_data_grows(setup):
    """The chapter's table: the median over 3 seeds of KL(pi_theta || pi*) and of the
    implicit-reward error fall with every step in the number of pairs; IPO over-fits less with
    300 pairs but misses pi* with infinite data."""
    space, ref_logits, ref_logp, r, beta, star = setup
    sizes = [300, 1000, 3000, 10000, 30000, 100000, None]
    sweep = data_sweep(space, ref_logits, r, beta, sizes)
    kl_med, err_med = np.median(sweep["kl"], 1), np.median(sweep["reward_error"], 1)
    assert all(kl_med[i] > kl_med[i + 1] for i in range(len(sizes) - 1))
    assert all(err_med[i] > err_med[i + 1] for i in range(len(sizes) - 1))
    assert kl_med[-1] < 1e-6 and err_med[-1] < 1e-3 and kl_med[-2] < 0.01
    ipo = np.median(data_sweep(space, ref_logits, r, beta, [300, None], loss_type="ipo")["kl"], 1)
    assert ipo[0] < kl_med[0] and ipo[1] > 0.1


def test_averaged_optimum_is_longer_than_pi_star_here(setup):
    space, _, ref_logp, r, beta, star = setup
    avg = length_averaged_optimum(ref_logp, r, beta, space.lengths)
    mean_len = lambda logp: float((logp.exp() * space.lengths).sum(-1).mean())  # noqa: E731
    assert mean_len(avg) > mean_len(star) > mean_len(ref_logp)


def test_data_sweep_rejects_bad_input(setup):
    space, ref_logits, ref_logp, r, beta, _ = setup
    with pytest.raises(ValueError, match="sizes"):
        data_sweep(space, ref_logits, r, beta, [])
    with pytest.raises(ValueError, match="beta"):
        data_sweep(space, ref_logits, r, 0.0, [10])
    with pytest.raises(ValueError, match="space"):
        data_sweep(None, ref_logits, r, beta, [10])
    with pytest.raises(ValueError, match="r must"):
        data_sweep(space, ref_logits, r[:1], beta, [10])


def test_length_averaged_dpo_goes_to_the_tilted_optimum(setup):
    space, ref_logits, ref_logp, r, beta, star = setup
    avg = length_averaged_optimum(ref_logp, r, beta, space.lengths)
    torch.testing.assert_close(avg.exp().sum(-1), torch.ones(2, dtype=torch.float64))
    lp = fit_tabular(space, ref_logits, expected_pair_counts(ref_logp, r), beta, average=True, steps=1000)
    assert float(kl_per_prompt(lp, avg).mean()) < 1e-3
    assert float(kl_per_prompt(lp, star).mean()) > 0.1
    # with one length for every completion averaging only rescales beta
    same = length_averaged_optimum(ref_logp, r, beta, torch.full_like(space.lengths, 2.0))
    torch.testing.assert_close(same, kl_optimal_policy(ref_logp.exp(), r, beta / 2).log())


def test_ipo_on_infinite_data_is_not_pi_star(setup):
    space, ref_logits, ref_logp, r, beta, star = setup
    lp = fit_tabular(space, ref_logits, expected_pair_counts(ref_logp, r), beta, loss_type="ipo", steps=300)
    assert float(kl_per_prompt(lp, star).mean()) > 0.1


def test_ipo_on_infinite_data_reaches_the_win_probability_optimum(setup):
    """Azar et al.: IPO's optimum is pi_ref exp(p(y > mu) / tau) / Z, mu the sampling policy."""
    space, ref_logits, ref_logp, r, beta, _ = setup
    p = ref_logp.exp()
    win = (torch.sigmoid(r[:, :, None] - r[:, None, :]) * p[:, None, :]).sum(-1)
    ipo_opt = kl_optimal_policy(p, win, beta).log()
    lp = fit_tabular(space, ref_logits, expected_pair_counts(ref_logp, r), beta, loss_type="ipo", steps=300)
    assert float(kl_per_prompt(lp, ipo_opt).mean()) < 1e-6


def test_sample_counts_match_expectation(setup):
    _, _, ref_logp, r, _, _ = setup
    c = sample_pair_counts(ref_logp, r, 200_000, torch.Generator().manual_seed(0))
    e = expected_pair_counts(ref_logp, r, 200_000)
    assert float(c.sum()) == 200_000
    assert float((c - e).abs().sum() / 200_000) < 0.03


def test_bad_inputs(setup):
    space, ref_logits, ref_logp, r, beta, _ = setup
    p = ref_logp.exp()
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="beta"):
            kl_optimal_policy(p, r, bad)
        with pytest.raises(ValueError, match="beta"):
            fit_tabular(space, ref_logits, expected_pair_counts(ref_logp, r), bad, steps=1)
        with pytest.raises(ValueError, match="beta"):
            length_averaged_optimum(ref_logp, r, bad, space.lengths)
    with pytest.raises(ValueError, match="r must"):
        kl_optimal_policy(p, r[:, :-1], beta)
    with pytest.raises(ValueError, match="ref_probs"):
        kl_optimal_policy(p * 2, r, beta)
    with pytest.raises(ValueError, match="ref_probs"):
        kl_optimal_policy(torch.zeros((0, 3), dtype=torch.float64), torch.zeros((0, 3), dtype=torch.float64), beta)
    with pytest.raises(ValueError, match="counts"):
        fit_tabular(space, ref_logits, torch.zeros((2, 13, 13), dtype=torch.float64), beta)  # empty set
    with pytest.raises(ValueError, match="counts"):
        fit_tabular(space, ref_logits, torch.ones((3, 13, 13), dtype=torch.float64), beta)
    with pytest.raises(ValueError, match="loss_type"):
        fit_tabular(space, ref_logits, torch.ones((2, 13, 13), dtype=torch.float64), beta, loss_type="kto")
    with pytest.raises(ValueError, match="n_pairs"):
        sample_pair_counts(ref_logp, r, 0, torch.Generator())
    with pytest.raises(ValueError, match="r must"):
        sample_pair_counts(ref_logp, r[:1], 10, torch.Generator())
    with pytest.raises(ValueError, match="n_pairs"):
        expected_pair_counts(ref_logp, r, 0.0)
    with pytest.raises(ValueError, match="q_logp"):
        kl_per_prompt(ref_logp, ref_logp[:1])
    with pytest.raises(ValueError, match="lengths"):
        length_averaged_optimum(ref_logp, r, beta, torch.zeros(13, dtype=torch.float64))
    with pytest.raises(ValueError, match="policy_logp"):
        implicit_reward_error(ref_logp[:1], ref_logp, r, beta)
    with pytest.raises(ValueError, match="logits"):
        space.seq_logp(torch.zeros((2, 5, 4), dtype=torch.float64))
    with pytest.raises(ValueError, match="max_words"):
        CompletionSpace(10, 5)
    with pytest.raises(ValueError, match="vocab_size"):
        CompletionSpace(0, 2)
