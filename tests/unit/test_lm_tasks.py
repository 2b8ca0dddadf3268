"""Tests of rlnotes.lm's tokeniser, tasks, cache, best-of-n KL and over-optimisation fits."""

import math

import numpy as np
import pytest
import torch

import rlnotes.lm as lm
from rlnotes.lm.cache import cache_key, cached
from rlnotes.lm.tasks import pad_completions


def test_tokenizer_round_trip_and_bad_input():
    tok = lm.CharTokenizer("0123456789+=")
    assert tok.vocab_size == 15  # the peers' races: 12 characters, pad, bos, eos
    ids = tok.encode("12+35=")
    assert ids[0] == tok.bos_id and tok.decode(ids) == "12+35="
    assert tok.decode(tok.encode("47", bos=False, eos=True) + [5, 6]) == "47"
    with pytest.raises(ValueError, match="text"):
        tok.encode("12a")
    with pytest.raises(ValueError, match="chars"):
        lm.CharTokenizer("aa")
    with pytest.raises(ValueError, match="chars"):
        lm.CharTokenizer("")
    with pytest.raises(ValueError, match="ids"):
        tok.decode([99])


def test_addition_task_split_and_reward():
    task = lm.AdditionTask()
    assert len(task.train_pairs) == 7100 and len(task.test_pairs) == 1000
    train = {tuple(p) for p in task.train_pairs.tolist()}
    assert not train & {tuple(p) for p in task.test_pairs.tolist()}
    assert task.max_len == 16 and task.prompt_len == 7
    prompts = [task.prompt(12, 35)] * 4
    comp, mask = pad_completions([task.answer(12, 35), task.tokenizer.encode("46", bos=False, eos=True),
                                  task.tokenizer.encode("47", bos=False), task.tokenizer.encode("470", bos=False, eos=True)],
                                 task.tokenizer.eos_id)
    assert task.reward(prompts, comp, mask).tolist() == [1.0, 0.0, 0.0, 0.0]
    x, y, m = task.sft_batch(32, torch.Generator().manual_seed(0))
    assert task.reward(x, y, m).eq(1).all()
    for bad, match in ((dict(digits=0), "digits"), (dict(digits=5), "digits"), (dict(n_test=8100), "n_test")):
        with pytest.raises(ValueError, match=match):
            lm.AdditionTask(**bad)
    with pytest.raises(ValueError, match="completions"):
        task.reward(prompts[:3], comp, mask)
    with pytest.raises(ValueError, match="split"):
        task.pairs("valid")


def test_preference_task_gold_reward():
    task = lm.PreferenceTask(seed=0)
    tok = task.tokenizer
    x, y, m = task.sft_batch(2000, torch.Generator().manual_seed(1))
    counts, bad = task.word_counts(y, m)
    assert counts.max() == 1 and bad.sum() == 0  # the reference never repeats a word
    lengths = m.sum(1) - 1
    assert lengths.min() >= 2 and lengths.max() <= 8
    best = int(task.word_ids[task.sentiment.argmax()])
    rep, rm = pad_completions([[best] * k + [tok.eos_id] for k in (1, 2, 3, 8)], tok.eos_id)
    prompt = [tok.encode("abc>")] * 4
    gold = task.reward(prompt, rep, rm)
    torch.testing.assert_close(gold, torch.tensor([1.0, 1.0, 0.0, -20.0]))  # h(c) = c - c(c-1)/2
    # a prompt word mentioned earns rho once; a non-word token costs 1
    w = tok.stoi["a"]
    s_a = float(task.sentiment[0])
    y2, m2 = pad_completions([[w, tok.eos_id], [w, tok.stoi[">"], tok.eos_id]], tok.eos_id)
    torch.testing.assert_close(task.reward(prompt[:2], y2, m2), torch.tensor([s_a + 0.5, s_a + 0.5 - 1]))
    with pytest.raises(ValueError, match="p_copy"):
        lm.PreferenceTask(p_copy=2.0)
    with pytest.raises(ValueError, match="max_words"):
        lm.PreferenceTask(min_words=5, max_words=3)
    with pytest.raises(ValueError, match="mask"):
        task.reward(prompt[:2], y2, m2[:, :1])


def test_preference_gold_punishes_repetition_whatever_the_sign():
    from rlnotes.lm.tasks import PreferenceTask as OldTask
    task, old = lm.PreferenceTask(seed=0), OldTask(seed=0)
    tok = task.tokenizer
    # without a repeated word, the two gold rewards agree (same demonstrations, same pairs)
    x, y, m = task.sft_batch(500, torch.Generator().manual_seed(3))
    torch.testing.assert_close(task.reward(x, y, m), old.reward(x, y, m))
    prompt = tok.encode("abc>")
    for v in range(16):
        w, s = int(task.word_ids[v]), float(task.sentiment[v])
        rep, rm = pad_completions([[w] * k + [tok.eos_id] for k in range(1, 9)], tok.eos_id)
        g = task.reward([prompt] * 8, rep, rm)
        assert (g[1:] <= g[:-1] + 1e-6).all()  # a further copy never gains
        if s < 0:
            assert (g[1:] < g[:-1] - 1e-6).all()  # and always costs for a negative word
    worst = int(task.word_ids[task.sentiment.argmin()])
    rep, rm = pad_completions([[worst] * 8 + [tok.eos_id]], tok.eos_id)
    assert float(old.reward([prompt], rep, rm)) == pytest.approx(20.0)  # the old hole
    assert float(task.reward([prompt], rep, rm)) == pytest.approx(-36.0)  # 8 s - 28 |s|, s = -1


def test_preference_gold_optimum_is_exact():
    task = lm.PreferenceTask(seed=0)
    tok = task.tokenizer
    P = task.sample_prompts(300, torch.Generator().manual_seed(0))
    top, counts = task.gold_optimum(P)
    n_words = counts.sum(1)
    assert counts.max() == 1 and ((n_words == 8) | (n_words == 9)).all()  # distinct words
    assert (n_words == 9).any() and (n_words == 8).any()  # a ninth word helps for some prompts only
    # the optimum is reachable: 8 words then EOS, or 9 words cut by the limit (no EOS)
    seqs = [sum(([int(task.word_ids[v])] * int(c[v]) for v in range(16)), []) for c in counts]
    seqs = [s + [tok.eos_id] if len(s) < task.max_new_tokens else s for s in seqs]
    assert max(len(s) for s in seqs) == task.max_new_tokens
    comp, mask = pad_completions(seqs, tok.eos_id)
    torch.testing.assert_close(task.reward(P, comp, mask), top)
    # the closed form: the nine largest of max(o_v + rho [v in x], 0) (a second copy of a positive
    # word adds 0, so a ninth slot is worth max(ninth value, 0))
    value = task.sentiment[None] + task.rho * torch.zeros(len(P), 16).scatter_(
        1, torch.tensor([p[1:4] for p in P]) - int(task.word_ids[0]), 1.0)
    torch.testing.assert_close(value.clamp(min=0).topk(task.max_new_tokens, dim=1).values.sum(1), top)
    # no random completion of up to max_new_tokens words beats it
    g = torch.Generator().manual_seed(1)
    for k in (8, 9, 9, 9):
        rnd = torch.randint(int(task.word_ids[0]), int(task.word_ids[-1]) + 1, (len(P), k), generator=g)
        assert (task.reward(P, rnd, torch.ones_like(rnd)) <= top + 1e-5).all()
    for bad in ([], [[1, 4, 5]], [[1, 4, 5, tok.stoi[">"], 2]]):
        with pytest.raises(ValueError, match="prompts"):
            task.gold_optimum(bad)


def test_bon_kl_formula_and_exact():
    assert lm.bon_kl(1) == 0.0
    for n in (2, 4, 16, 64):
        assert lm.bon_kl(n) == pytest.approx(math.log(n) - (n - 1) / n)
    probs = torch.distributions.Dirichlet(torch.ones(5000, dtype=torch.float64)).sample()
    for n in (2, 4, 16, 64):
        exact = lm.bon_kl_exact(probs, n)
        assert exact <= lm.bon_kl(n) + 1e-12 and abs(exact - lm.bon_kl(n)) < 0.01
    # few outcomes: strictly below (an upper bound with ties)
    assert lm.bon_kl_exact([0.5, 0.5], 4) < lm.bon_kl(4) - 0.1
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="n"):
            lm.bon_kl(bad)
    with pytest.raises(ValueError, match="probs"):
        lm.bon_kl_exact([0.5, 0.6], 2)


def test_over_optimisation_fits_recover_parameters():
    d = np.linspace(0.1, 4, 30)
    f = lm.fit_bon_form(d, d * (1.5 - 0.3 * d))
    assert f["alpha"] == pytest.approx(1.5) and f["beta"] == pytest.approx(0.3) and f["r2"] == pytest.approx(1)
    g = lm.fit_rl_form(np.r_[0.0, d], np.r_[0.0, d * (2.0 - 0.7 * np.log(d))])
    assert g["alpha"] == pytest.approx(2.0) and g["beta"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="d and gain"):
        lm.fit_bon_form([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="d and gain"):
        lm.fit_rl_form([1.0], [1.0])
    with pytest.raises(ValueError, match="d must"):
        lm.fit_rl_form([-1.0, 1.0], [0.0, 1.0])


def test_cache_key_and_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("RLNOTES_CACHE", str(tmp_path))
    calls = []

    def build():
        calls.append(1)
        return {"x": torch.arange(3)}

    a = cached("t", {"k": 1}, build, test_cache_key_and_round_trip)
    b = cached("t", {"k": 1}, build, test_cache_key_and_round_trip)
    assert len(calls) == 1 and torch.equal(a["x"], b["x"])
    cached("t", {"k": 2}, build, test_cache_key_and_round_trip)
    assert len(calls) == 2
    assert cache_key({"k": 1}, build) != cache_key({"k": 1}, test_cache_key_and_round_trip)
    monkeypatch.setenv("RLNOTES_CACHE", "off")
    cached("t", {"k": 1}, build)
    assert len(calls) == 3


def test_sft_model_is_cached_and_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("RLNOTES_CACHE", str(tmp_path))
    task = lm.PreferenceTask()
    m1, h1 = lm.sft_model(task, steps=3, width=16, device="cpu")
    files = list((tmp_path / "lm").glob("sft-preference-*.pt"))
    assert len(files) == 1
    m2, h2 = lm.sft_model(task, steps=3, width=16, device="cpu")  # from the cache
    monkeypatch.setenv("RLNOTES_CACHE", "off")
    m3, h3 = lm.sft_model(task, steps=3, width=16, device="cpu")  # trained again: same weights
    for k, v in m1.state_dict().items():
        assert torch.equal(v, m2.state_dict()[k]) and torch.equal(v, m3.state_dict()[k])
    assert h1 == h2 == h3


def _module_from(tmp_path, monkeypatch, name, text):
    import importlib.util
    import sys
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # inspect finds a class's source through it
    spec.loader.exec_module(module)
    return module


def test_cache_key_ignores_docstrings_and_comments_not_code(tmp_path, monkeypatch):
    from rlnotes.lm.cache import code_fingerprint
    base = ('"""Module doc."""\n\ndef f(x):\n    """Doc of f."""\n    return x + 1  # add one\n\n\n'
            'class C:\n    """Doc of C."""\n    def g(self):\n        """Doc of g."""\n        return 2\n')
    docs = ('"""Another module docstring,\nover two lines."""\n\n# a comment\ndef f(x):\n'
            '    """Rewritten doc of f."""\n    # why: a new comment\n    return x + 1\n\n\n'
            'class C:\n    """New doc of C."""\n    def g(self):\n        return 2  # two\n')
    code = base.replace("x + 1", "x + 2")
    a, b, c = (_module_from(tmp_path, monkeypatch, n, t) for n, t in (("m_a", base), ("m_b", docs), ("m_c", code)))
    cfg = {"steps": 10}
    assert cache_key(cfg, a) == cache_key(cfg, b)          # docstrings and comments: same key
    assert cache_key(cfg, a.f, a.C) == cache_key(cfg, b.f, b.C)
    assert cache_key(cfg, a) != cache_key(cfg, c)          # a change of code: a new key
    assert cache_key(cfg, a.f) != cache_key(cfg, c.f)
    assert cache_key(cfg, a) != cache_key({"steps": 11}, a)  # and of the configuration
    # a string that is not a docstring is code
    d = _module_from(tmp_path, monkeypatch, "m_d", base.replace("return 2", "s = 'x'\n        return 2"))
    assert code_fingerprint(d.C) != code_fingerprint(a.C)
    with pytest.raises(ValueError, match="code must be"):
        cache_key(cfg, 3)
    with pytest.raises(ValueError, match="code must be"):
        code_fingerprint(len)  # a builtin has no source


def test_sft_cache_key_survives_docstring_edits():
    # the key of the SFT models depends on the code of these modules, not on their docstrings
    import rlnotes.lm.generation as generation
    from rlnotes.lm.cache import code_fingerprint
    assert "Sampling completions from a language model" not in code_fingerprint(generation)
    assert "def decode" not in code_fingerprint(generation) and "decode" in code_fingerprint(generation)
