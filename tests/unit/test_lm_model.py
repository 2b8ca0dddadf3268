"""Tests of rlnotes.lm's model and generation: generate and completion_logprobs agree, the KV
cache changes nothing but speed, sampling is reproducible, and bad input is rejected."""

import pytest
import torch

from rlnotes.lm import TinyGPT, completion_logprobs, decode, gather_logprobs, generate

V, MAXLEN = 15, 16
EOS = 2


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyGPT(V, MAXLEN, n_layers=2, n_heads=4, width=32, seed=3)


PROMPTS = [[1, 3, 4, 5], [1, 5], [1, 6, 7, 8, 9, 3, 4], [1]]


def test_sizes_of_the_peers_model():
    m = TinyGPT(15, 16)  # the peers' GRPO race: 2 layers, 4 heads, width 128, context 16: 0.40 M parameters
    assert 0.39e6 < m.num_parameters() < 0.41e6
    logits = m(torch.zeros((3, 16), dtype=torch.long))
    assert logits.shape == (3, 16, 15)


def test_weights_are_a_function_of_the_seed():
    a, b, c = TinyGPT(V, 8, width=16, seed=1), TinyGPT(V, 8, width=16, seed=1), TinyGPT(V, 8, width=16, seed=2)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_causal_position_t_ignores_later_tokens(model):
    x = torch.tensor([[1, 3, 4, 5, 6]])
    y = x.clone()
    y[0, 3:] = 9
    torch.testing.assert_close(model(x)[:, :3], model(y)[:, :3])


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_generate_logp_equals_completion_logprobs(model, temperature):
    g = torch.Generator().manual_seed(0)
    comp, logp, mask = generate(model, PROMPTS * 4, 8, temperature=temperature, eos_id=EOS, generator=g)
    assert comp.shape == logp.shape == mask.shape and comp.shape[0] == 16
    again = completion_logprobs(model, PROMPTS * 4, comp, mask, temperature=temperature)
    torch.testing.assert_close(again, logp, atol=1e-5, rtol=1e-5)
    assert bool((logp[mask == 0] == 0).all()) and bool((again[mask == 0] == 0).all())
    assert bool((logp[mask == 1] < 0).all())


def test_mask_stops_after_first_eos_and_pads_with_eos(model):
    g = torch.Generator().manual_seed(1)
    comp, logp, mask = generate(model, PROMPTS * 8, 10, eos_id=EOS, generator=g, temperature=3.0)
    for row, m in zip(comp.tolist(), mask.tolist()):
        n = sum(m)
        assert m == [1] * n + [0] * (len(m) - n)
        if EOS in row[:n]:
            assert row.index(EOS) == n - 1
            assert all(t == EOS for t in row[n:])
        else:
            assert n == len(m)


def test_no_eos_gives_full_length(model):
    comp, logp, mask = generate(model, PROMPTS, 5, generator=torch.Generator().manual_seed(0))
    assert comp.shape == (4, 5) and bool((mask == 1).all())


def test_kv_cache_equals_recomputation(model):
    for greedy in (False, True):
        out = []
        for use_cache in (True, False):
            g = torch.Generator().manual_seed(5)
            out.append(decode(model, PROMPTS * 3, 9, temperature=0.8, eos_id=EOS, generator=g,
                              greedy=greedy, use_cache=use_cache))
        assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][2], out[1][2])
        torch.testing.assert_close(out[0][1], out[1][1], atol=1e-5, rtol=1e-5)


def test_a_prompt_scores_the_same_in_any_batch(model):
    # left padding is invisible: prompt 1 alone and beside a longer prompt gives the same logp
    comp = torch.tensor([[3, 4, 2], [5, 2, 2]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    both = completion_logprobs(model, [PROMPTS[2], PROMPTS[1]], comp, mask)
    alone = completion_logprobs(model, [PROMPTS[1]], comp[1:], mask[1:])
    torch.testing.assert_close(both[1:], alone, atol=1e-5, rtol=1e-5)


def test_sampling_is_reproducible_and_seed_dependent(model):
    a = generate(model, PROMPTS, 6, eos_id=EOS, generator=torch.Generator().manual_seed(7))
    b = generate(model, PROMPTS, 6, eos_id=EOS, generator=torch.Generator().manual_seed(7))
    c = generate(model, PROMPTS * 4, 6, eos_id=EOS, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(c[0][:4], a[0]) or not torch.equal(c[0][4:8], a[0])


def test_sampling_frequencies_follow_the_model(model):
    # the empirical first-token distribution matches softmax(logits / T)
    T = 1.5
    prompts = [[1, 3, 4]] * 4000
    comp, _, _ = generate(model, prompts, 1, temperature=T, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(comp[:, 0], minlength=V).double() / len(prompts)
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([[1, 3, 4]]))[0, -1].double() / T, -1)
    assert float((freq - probs).abs().max()) < 0.03


def test_inverse_cdf_never_picks_a_token_of_probability_zero():
    from rlnotes.lm.generation import inverse_cdf
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75, 0.0],
                          [0.5, 0.0, 0.5, 0.0, 0.0],
                          [0.0, 0.0, 0.0, 1.0, 0.0]])
    # u = 0 exactly: the first token of positive probability, not token 0
    assert inverse_cdf(probs, torch.zeros(3, 1)).tolist() == [1, 0, 3]
    # u just below 1, and u * total rounded up to the total: the last token of positive probability
    u = torch.full((3, 1), 1 - 2 ** -24)
    assert inverse_cdf(probs, u).tolist() == [3, 2, 3]
    assert inverse_cdf(probs * (1 + 2 ** -23), torch.ones(3, 1)).tolist() == [3, 2, 3]
    # the boundaries: cdf[y - 1] <= u < cdf[y]
    assert inverse_cdf(probs[:1].expand(4, 5), torch.tensor([[0.1], [0.25], [0.3], [0.999]])).tolist() == [1, 3, 3, 3]
    # a large batch of uniforms follows the probabilities and never lands on a zero
    g = torch.Generator().manual_seed(0)
    u = torch.rand((20000, 1), generator=g)
    tok = inverse_cdf(probs[:1].expand(20000, 5), u)
    assert set(tok.tolist()) == {1, 3} and abs(float((tok == 1).double().mean()) - 0.25) < 0.01


def test_generate_with_u_zero_never_samples_a_token_of_probability_zero(model, monkeypatch):
    # At temperature 1e-3 the softmax underflows: most tokens have probability exactly 0, token 0
    # among them. With every uniform u = 0 (torch.rand patched), inverse-CDF sampling must return
    # the first token of positive probability (with "<" instead of "<=" it returned token 0, of
    # log-probability -inf), and generate must still agree with completion_logprobs.
    prompts = [[1, 3, 4], [1, 5], [1, 6, 7, 8]]
    with torch.no_grad():
        first = torch.softmax(model(torch.tensor([[1, 3, 4]]))[0, -1] / 1e-3, -1)
    assert float(first[0]) == 0.0  # the case is really constructed
    real_rand = torch.rand
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.zeros_like(real_rand(*a, **k)))
    comp, logp, mask = generate(model, prompts, 5, temperature=1e-3,
                                generator=torch.Generator().manual_seed(0))
    monkeypatch.undo()
    assert int(comp[0, 0]) == int((first > 0).long().argmax())
    assert bool(torch.isfinite(logp).all())
    again = completion_logprobs(model, prompts, comp, mask, temperature=1e-3)
    assert torch.allclose(again, logp, atol=1e-3, rtol=1e-5)


def test_completion_logprobs_is_differentiable(model):
    comp = torch.tensor([[3, 4, 2]])
    lp = completion_logprobs(model, [[1, 5]], comp, torch.ones_like(comp))
    lp.sum().backward()
    assert model.head.weight.grad is not None and float(model.head.weight.grad.abs().sum()) > 0
    model.zero_grad()


def test_gather_logprobs():
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    tok = torch.tensor([[0, 4, 2], [1, 1, 3]])
    want = torch.log_softmax(logits, -1)[torch.arange(2)[:, None], torch.arange(3)[None], tok]
    torch.testing.assert_close(gather_logprobs(logits, tok), want)
    with pytest.raises(ValueError, match="tokens"):
        gather_logprobs(logits, tok[:, :2])


@pytest.mark.parametrize("kwargs, match", [
    (dict(prompts=[]), "prompts"),
    (dict(prompts=[[1, 2], []]), r"prompts\[1\]"),
    (dict(prompts=[[1, 99]]), "vocabulary"),
    (dict(prompts=[[1, -1]]), "vocabulary"),
    (dict(prompts=[[1, 2.5]]), "integer"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=-3), "max_new_tokens"),
    (dict(max_new_tokens=40), "max_new_tokens"),
    (dict(temperature=0.0), "temperature"),
    (dict(temperature=-1.0), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(eos_id=V), "eos_id"),
    (dict(generator=3), "generator"),
])
def test_generate_rejects_bad_input(model, kwargs, match):
    args = dict(prompts=[[1, 3]], max_new_tokens=4)
    args.update(kwargs)
    prompts, n = args.pop("prompts"), args.pop("max_new_tokens")
    with pytest.raises(ValueError, match=match):
        generate(model, prompts, n, **args)


def test_completion_logprobs_rejects_bad_input(model):
    comp = torch.tensor([[3, 4, 2]])
    mask = torch.ones_like(comp)
    with pytest.raises(ValueError, match="completions"):
        completion_logprobs(model, [[1], [1]], comp, mask)  # 2 prompts, 1 completion
    with pytest.raises(ValueError, match="completions"):
        completion_logprobs(model, [[1]], comp.float(), mask)
    with pytest.raises(ValueError, match="completions"):
        completion_logprobs(model, [[1]], torch.tensor([[3, 40, 2]]), mask)
    with pytest.raises(ValueError, match="mask"):
        completion_logprobs(model, [[1]], comp, mask[:, :2])
    with pytest.raises(ValueError, match="mask"):
        completion_logprobs(model, [[1]], comp, mask * 2)
    with pytest.raises(ValueError, match="temperature"):
        completion_logprobs(model, [[1]], comp, mask, temperature=0)
    with pytest.raises(ValueError, match="prompts"):
        completion_logprobs(model, [], comp, mask)


def test_tinygpt_rejects_bad_sizes():
    with pytest.raises(ValueError, match="n_heads"):
        TinyGPT(10, 8, n_heads=3, width=16)
    with pytest.raises(ValueError, match="vocab_size"):
        TinyGPT(1, 8)
    with pytest.raises(ValueError, match="max_len"):
        TinyGPT(10, 0)
    with pytest.raises(ValueError, match="max_len"):
        TinyGPT(10, 4, width=16)(torch.zeros((1, 5), dtype=torch.long))


def test_size_aliases():
    a = TinyGPT(V, 8, n_layer=1, n_head=2, n_embd=16, dropout=0.0)
    b = TinyGPT(V, 8, n_layers=1, n_heads=2, width=16)
    assert a.config == b.config
    with pytest.raises(ValueError, match="dropout"):
        TinyGPT(V, 8, dropout=0.1)
    with pytest.raises(ValueError, match="hidden"):
        TinyGPT(V, 8, hidden=3)
