"""Task variants for the GRPO chapter: the addition task with a way to fail at length.

``StallingAdditionTask`` is the addition task of :class:`rlnotes.lm.tasks.AdditionTask` whose
demonstrations sometimes *stall*: instead of an answer, a run of ``=`` signs then EOS, which is
always wrong and has a length of its own. Once a stall has begun, how long it goes on does not
change the reward, and the policy can see that it is stalling: a decision of the kind that the
length bias of per-sequence loss normalisation acts on (Liu et al. 2025). ``stall_model`` is the
SFT model fine-tuned on these demonstrations; with ``digits=1`` (one-digit sums, which the model
learns to get right nearly always) almost every wrong completion is a stall, so the mean length
of wrong completions is the stalls' length.

``SlippingAdditionTask`` (demonstrations off by a digit half of the time) and ``slip_model`` make
the GRPO chapter's starting point; ``ChainAdditionTask``, ``chain_model`` and ``chain_start`` the
process-supervision experiment's.

Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias
(``SlippingAdditionTask``, ``slip_model``: GRPO, section Training that works).
"""

from __future__ import annotations

import numpy as np
import torch

from rlnotes._validate import require_in_range, require_int
from rlnotes.lm.sft import sft_loss, single_thread
from rlnotes.lm.tasks import AdditionTask, _check_batch, pad_completions

__all__ = ["SlippingAdditionTask", "StallingAdditionTask", "ChainAdditionTask", "finetune",
           "slip_model", "stall_model", "chain_model", "chain_start"]


class SlippingAdditionTask(AdditionTask):
    """The addition task whose demonstrations *slip* with probability ``p_slip``: the answer is
    a + b + d, with d drawn uniformly from ``slips`` (by default +-1 and +-10, a digit off),
    instead of a + b (a slip that would make the answer negative is skipped, so with large
    negative slips the realised rate is below ``p_slip``; with ``digits=1`` pass small slips such
    as ``(1, -1)``). The reward stays the addition task's exact match, as a verifier's would:
    the demonstrations are noisy, the checker is not. A model fine-tuned on them to convergence
    puts about ``p_slip`` of its probability on slips, so its pass@1 (sampled) is set by the
    data, about ``1 - p_slip``; while the right answer stays more likely than each slip
    (``1 - p_slip > p_slip / len(slips)``: p_slip < 0.8 with the four default slips) its greedy
    accuracy is near 1: the starting point from which GRPO's sharpening is measured.

    Defined in: GRPO, section Training that works.
    """

    name = "slipping-addition"

    def __init__(self, p_slip: float = 0.5, slips=(1, -1, 10, -10), digits: int = 2,
                 n_test: int = 1000, seed: int = 0):
        super().__init__(digits=digits, n_test=n_test, seed=seed)
        self.p_slip = require_in_range(p_slip, "p_slip", 0.0, 1.0, high_open=True)
        if isinstance(slips, (str, bytes)) or not hasattr(slips, "__iter__"):
            raise ValueError(f"slips must be a sequence of non-zero integers, got {slips!r}")
        slips = tuple(slips)
        if not slips or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d == 0
                            for d in slips):
            raise ValueError(f"slips must be a non-empty sequence of non-zero integers, got {slips!r}")
        if max(abs(int(d)) for d in slips) >= 10 ** digits:
            raise ValueError(f"slips must be smaller than 10**digits = {10 ** digits} in size "
                             f"(so that every slipped answer fits in digits + 1 digits, the "
                             f"task's longest answer), got {slips!r}")
        self.slips = tuple(int(d) for d in slips)

    def config(self) -> dict:
        return dict(super().config(), task=self.name, p_slip=self.p_slip, slips=list(self.slips))

    def sft_batch(self, n, generator=None):
        """``n`` training prompts with their demonstrations: the sum, or with probability
        ``p_slip`` the sum plus a slip (kept correct where the slip would make it negative)."""
        pairs = self._draw(n, generator, "train")
        slip = (torch.rand(len(pairs), generator=generator) < self.p_slip).tolist()
        which = torch.randint(len(self.slips), (len(pairs),), generator=generator).tolist()
        answers = []
        for (a, b), s, k in zip(pairs, slip, which):
            total = int(a) + int(b)
            if s and total + self.slips[k] >= 0:
                total += self.slips[k]
            answers.append(self.tokenizer.encode(str(total), bos=False, eos=True))
        comp, mask = pad_completions(answers, self.tokenizer.eos_id)
        return self.prompts_of(pairs), comp, mask


class StallingAdditionTask(AdditionTask):
    """Addition of two ``digits``-digit numbers (2 or 1) whose demonstrations stall with
    probability ``p_stall``: ``k`` copies of ``=`` (k uniform in 1..``max_stall``) then EOS,
    instead of the answer (or, with ``after=True``, after the answer's digits). The reward is the
    addition task's exact match, so a stall is always wrong; completions may run to
    ``max_new_tokens = max_stall + 2`` tokens.

    With ``digits=1`` the prompts are the 81 sums ``a+b=`` of a, b in 1..9 (``n_test`` of them held
    out, 16 by default; 1,000 of the 8,100 with two digits); the context stays the two-digit
    task's 16 tokens, so a model of the two-digit task can be fine-tuned to it.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
    """

    name = "stalling-addition"

    def __init__(self, p_stall: float = 0.3, max_stall: int = 6, n_test: int | None = None, seed: int = 0,
                 after: bool = False, digits: int = 2):
        if digits not in (1, 2) or isinstance(digits, bool):
            raise ValueError(f"digits must be 1 or 2, got {digits!r}")
        if n_test is None:
            n_test = 1000 if digits == 2 else 16
        super().__init__(digits=digits, n_test=n_test, seed=seed)
        self.after = bool(after)
        self.p_stall = require_in_range(p_stall, "p_stall", 0.0, 1.0)
        self.max_stall = require_int(max_stall, "max_stall", minimum=1)
        if self.prompt_len + self.max_stall + 1 > self.max_len:
            raise ValueError(f"max_stall must be at most {self.max_len - self.prompt_len - 1} "
                             f"(the context is {self.max_len} tokens), got {max_stall}")
        self.max_new_tokens = self.max_stall + 2 + (self.digits + 1 if self.after else 0)
        if self.prompt_len + self.max_new_tokens - 1 > self.max_len:
            raise ValueError(f"max_stall must be at most {self.max_len - self.prompt_len - self.digits - 2} "
                             f"with after=True (the context is {self.max_len} tokens), got {max_stall}")

    def config(self) -> dict:
        return dict(super().config(), task=self.name, p_stall=self.p_stall, max_stall=self.max_stall,
                    after=self.after)

    def stalls(self, prompts, completions, mask):
        """Which completions stall: those holding an ``=`` (bool, shape (B,)). A completion
        that begins a stall is wrong whatever follows, so how long it goes on does not change
        its reward.

        Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
        """
        _check_batch(prompts, completions, mask)
        return ((completions == self.tokenizer.stoi["="]) & mask.bool()).any(1)

    def stall_rate(self, prompts, completions, mask):
        """Fraction of the batch's completions that stall (a float).

        Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
        """
        return float(self.stalls(prompts, completions, mask).double().mean())

    def stall_length(self, prompts, completions, mask):
        """Mean length (tokens, EOS included) of the stalling completions of a batch (NaN when
        none stalls): the length GRPO's per-sequence normalisation acts on (a float).

        Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
        """
        s = self.stalls(prompts, completions, mask)
        if not bool(s.any()):
            return float("nan")
        return float(mask.bool()[s].sum(1).double().mean())

    def stall_share(self, prompts, completions, mask):
        """Share of the batch's *wrong* completions that stall (a float; NaN when none is wrong):
        near 1, the mean length of wrong completions is the stalls' length; well below, it mixes
        in the short wrong answers of a model that does not stall.

        Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
        """
        wrong = self.reward(prompts, completions, mask) == 0
        if not bool(wrong.any()):
            return float("nan")
        return float(self.stalls(prompts, completions, mask)[wrong].double().mean())

    def stall_summary(self, prompts, completions, mask):
        """The statistics of a batch that the length-bias experiment starts from (a dict of
        floats, NaN where a subset is empty): ``stall_rate``, ``stall_share`` (of the wrong
        completions), ``right_if_no_stall`` (accuracy of the completions that do not stall),
        ``gap`` (mean length of wrong minus right completions, EOS included) and ``len_stall``.

        Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
        """
        stalls = self.stalls(prompts, completions, mask)
        right = self.reward(prompts, completions, mask) > 0
        length = mask.bool().sum(1).double()

        def mean(x):
            return float(x.double().mean()) if x.numel() else float("nan")

        return dict(stall_rate=mean(stalls), stall_share=mean(stalls[~right]),
                    right_if_no_stall=mean(right[~stalls]), gap=mean(length[~right]) - mean(length[right]),
                    len_stall=mean(length[stalls]))

    @torch.no_grad()
    def stop_probability(self, model, max_k=None, n_prompts=200):
        """The probability that ``model`` stops (emits EOS) right after a stall of n_= ``=``
        signs, for n_= = 1..``max_k`` (default: the longest stall that fits, ``max_stall + 1``), at
        temperature 1, averaged over the first ``n_prompts`` held-out prompts (all of them when there
        are fewer): the stop probability p of the chapter's derivation. Returns a (max_k,) numpy array.

        Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
        """
        if not callable(model) or not hasattr(model, "parameters"):
            raise ValueError(f"model must be a language model of the lab (a TinyGPT), got {type(model).__name__}")
        longest = self.max_new_tokens - 1
        max_k = longest if max_k is None else require_int(max_k, "max_k", minimum=1)
        if max_k > longest:
            raise ValueError(f"max_k must be at most {longest} (a stall and its EOS must fit the "
                             f"{self.max_new_tokens}-token budget), got {max_k}")
        n_prompts = require_int(n_prompts, "n_prompts", minimum=1)
        prompts = self.prompts_of(self.pairs("test")[:n_prompts])
        device = next(model.parameters()).device
        eq, eos = self.tokenizer.stoi["="], self.tokenizer.eos_id
        seqs = torch.tensor([p + [eq] * max_k for p in prompts], device=device)
        logits = model(seqs)[:, self.prompt_len: self.prompt_len + max_k]  # after 1..max_k "="
        return logits.float().softmax(-1)[..., eos].mean(0).cpu().numpy()

    def sft_batch(self, n, generator=None):
        """``n`` training prompts; each completion is the answer or, with probability p_stall,
        a stall."""
        prompts, _, _ = super().sft_batch(n, generator)
        stall = torch.rand(len(prompts), generator=generator) < self.p_stall
        k = torch.randint(1, self.max_stall + 1, (len(prompts),), generator=generator)
        eq, eos = self.tokenizer.stoi["="], self.tokenizer.eos_id
        seqs = []
        for p, s, kk in zip(prompts, stall.tolist(), k.tolist()):
            a, b = self.operands(p)
            if not s:
                seqs.append(self.answer(a, b))
            elif self.after:  # the answer, then the stall: wrong, and longer
                seqs.append(self.answer(a, b)[:-1] + [eq] * kk + [eos])
            else:
                seqs.append([eq] * kk + [eos])
        comp, mask = pad_completions(seqs, eos)
        return prompts, comp, mask


def finetune(model, task, steps, *, batch_size=64, lr=1e-3, seed=0, callback=None):
    """A copy of ``model`` after ``steps`` steps of supervised fine-tuning (Adam, constant lr) on
    ``task.sft_batch``: how the chapter turns the addition SFT model into one that stalls.
    ``callback(step, model)``, if given, runs after each step (``step`` from 1); it may stop the
    run early by returning True. With a constant learning rate the first k steps of a longer run
    are exactly a k-step run, so a callback can take snapshots of every shorter fine-tuning.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
    """
    import copy

    steps = require_int(steps, "steps", minimum=1)
    batch_size = require_int(batch_size, "batch_size", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    gen = torch.Generator().manual_seed(require_int(seed, "seed", minimum=0))
    model = copy.deepcopy(model).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None, got {callback!r}")
    with single_thread(next(model.parameters()).device):
        for step in range(1, steps + 1):
            prompts, comp, mask = task.sft_batch(batch_size, gen)
            loss = sft_loss(model, prompts, comp, mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if callback is not None and callback(step, model):
                break
    return model.eval()


def _state(model):
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _finetuned(name, task, seed, settings, train, sft_steps=450, code=()):
    """A fine-tuning of the addition task's ``sft_steps``-step SFT model (seed ``seed``) on
    ``task``, from the lab's cache when it is there, else made now: ``train(model)`` gets a CPU
    copy of the SFT model and returns a dict holding its fine-tuned ``"state"`` (and any plain
    values to keep beside it); ``settings`` (a dict) joins the cache key, and so does the code of
    this module and of the modules in ``code``. Returns ``(model, entry)``, the model on the SFT
    model's device."""
    import copy
    import hashlib
    import sys

    from rlnotes.lm.cache import cached
    from rlnotes.lm.model import TinyGPT
    from rlnotes.lm.sft import sft_model

    base_task = AdditionTask()
    sft, _ = sft_model(base_task, seed=seed, steps=sft_steps)
    sizes = dict(n_layers=len(sft.blocks), n_heads=sft.blocks[0].attn.n_heads, width=sft.width)
    config = dict(task=task.config(), base=base_task.config(), sizes=sizes, seed=seed,
                  sft=hashlib.sha256(b"".join(v.cpu().numpy().tobytes()
                                              for v in sft.state_dict().values())).hexdigest()[:16],
                  torch=torch.__version__.split("+")[0], **settings)
    entry = cached(name, config, lambda: train(copy.deepcopy(sft).cpu()), sys.modules[__name__],
                   *code)
    model = TinyGPT(task.tokenizer.vocab_size, task.max_len, seed=seed, **sizes)
    model.load_state_dict(entry["state"])
    return model.to(next(sft.parameters()).device).eval(), entry


def _finetuned_for(name, task, steps, lr, seed, sft_steps=450):
    """The SFT model fine-tuned for ``steps`` steps on ``task`` (:func:`finetune`), cached."""
    return _finetuned(name, task, seed, dict(steps=steps, lr=lr),
                      lambda model: {"state": _state(finetune(model, task, steps, lr=lr, seed=seed))},
                      sft_steps)[0]


def slip_model(p_slip=0.5, steps=200, *, sft_steps=1200, lr=1e-3, seed=0):
    """The GRPO chapter's starting point: the addition task's SFT model trained to convergence
    (``sft_steps`` steps; 1,200 get greedy and sampled accuracy to 0.99 or more) and then
    fine-tuned for ``steps`` steps (:func:`finetune`) on :class:`SlippingAdditionTask`'s noisy
    demonstrations, so that about ``p_slip`` of its samples slip while its greedy answer stays
    right. From the lab's cache when it is there (rlnotes.lm.cache), else trained now (about 40
    steps a second on one CPU core). Returns ``(model, task)``, ``task`` the slipping task (its
    prompts, held-out split and reward are the addition task's).

    Defined in: GRPO, section Training that works.
    """
    steps = require_int(steps, "steps", minimum=1)
    sft_steps = require_int(sft_steps, "sft_steps", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    seed = require_int(seed, "seed", minimum=0)
    task = SlippingAdditionTask(p_slip)
    return _finetuned_for("ft-slipping-addition", task, steps, lr, seed, sft_steps), task


def stall_model(p_stall=0.5, max_stall=6, steps=100, *, digits=2, lr=1e-3, seed=0):
    """The starting point of the length-bias experiment: the addition task's 450-step SFT model
    fine-tuned for ``steps`` steps on ``StallingAdditionTask(p_stall, max_stall, digits=digits)``'s
    demonstrations (:func:`finetune`), so that it sometimes stalls; from the lab's cache when it
    is there (rlnotes.lm.cache), else trained now (about 40 steps a second on one CPU core).
    Returns ``(model, task)``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Loss aggregation and the length bias.
    """
    steps = require_int(steps, "steps", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    seed = require_int(seed, "seed", minimum=0)
    task = StallingAdditionTask(p_stall=p_stall, max_stall=max_stall, digits=digits)
    return _finetuned_for("ft-stalling-addition", task, steps, lr, seed), task


class ChainAdditionTask(AdditionTask):
    """Two additions in a row, with the intermediate result written out: prompt ``"12+35+7="``,
    answer ``"47=54"`` then EOS. The first step (``47=``) can be checked on its own, which is
    what process supervision needs (Shao et al. 2024, section 4.1.3).

    Every triple (a, b, c) of two-digit a, b and one-digit c (1..9) is a prompt (72,900), so that
    prompt and answer fit the addition task's context of 16 tokens and its SFT model can be
    fine-tuned to the task (:func:`finetune`); ``n_test`` of them (chosen by ``seed``) are held
    out. :meth:`reward` is the outcome reward: 1 when the final
    result (after the last ``=``) is a + b + c, then EOS, whatever the intermediate step says.
    :meth:`step_rewards` scores each step on its own: step 1 is right when the completion starts
    with the digits of a + b then ``=``; step 2 when what follows is that intermediate result
    plus c, then EOS.

    Defined in: Dr. GRPO, DAPO and process supervision, section Outcome and process supervision.
    """

    name = "chain-addition"
    n_steps = 2

    def __init__(self, n_test: int = 1000, seed: int = 0):
        self.digits = 2
        self.seed = require_int(seed, "seed", minimum=0)
        self.tokenizer = AdditionTask(digits=2).tokenizer
        r = np.arange(10, 100)
        a, b, c = np.meshgrid(r, r, np.arange(1, 10), indexing="ij")
        triples = np.stack([a.ravel(), b.ravel(), c.ravel()], axis=1)
        self.n_test = require_int(n_test, "n_test", minimum=1)
        if n_test >= len(triples):
            raise ValueError(f"n_test must be below the number of triples {len(triples)}, got {n_test}")
        order = np.random.default_rng(seed).permutation(len(triples))
        self.test_pairs = triples[order[:n_test]]
        self.train_pairs = triples[order[n_test:]]
        self.prompt_len = 1 + 2 + 1 + 2 + 1 + 1 + 1  # BOS a + b + c =, c one digit
        self.extra_tokens = 0
        self.max_new_tokens = 3 + 1 + 3 + 1  # a + b (up to 3 digits), "=", the result, EOS
        self.max_len = self.prompt_len + self.max_new_tokens - 1

    def config(self) -> dict:
        import hashlib
        import inspect

        code = hashlib.sha256(inspect.getsource(ChainAdditionTask).encode()).hexdigest()[:12]
        return dict(task=self.name, n_test=self.n_test, seed=self.seed, code=code)

    def prompt(self, a: int, b: int, c: int) -> list[int]:
        return self.tokenizer.encode(f"{a}+{b}+{c}=")

    def prompts_of(self, triples) -> list[list[int]]:
        return [self.prompt(int(a), int(b), int(c)) for a, b, c in triples]

    def answer(self, a: int, b: int, c: int) -> list[int]:
        return self.tokenizer.encode(f"{a + b}={a + b + c}", bos=False, eos=True)

    def sft_batch(self, n, generator=None):
        """``n`` training prompts with their worked answers as completions."""
        triples = self._draw(n, generator, "train")
        comp, mask = pad_completions([self.answer(*map(int, t)) for t in triples], self.tokenizer.eos_id)
        return self.prompts_of(triples), comp, mask

    def operands(self, prompt) -> tuple[int, int, int]:
        a, b, c = self.tokenizer.decode(prompt).rstrip("=").split("+")
        return int(a), int(b), int(c)

    def _texts(self, prompts, completions, mask):
        _check_batch(prompts, completions, mask)
        eos = self.tokenizer.eos_id
        out = []
        for p, c, mk in zip(prompts, completions.tolist(), mask.tolist()):
            got = [t for t, keep in zip(c, mk) if keep]
            ended = len(got) > 0 and got[-1] == eos
            out.append((self.operands(p), self.tokenizer.decode([t for t in got if t != eos]), ended, len(got)))
        return out

    def reward(self, prompts, completions, mask):
        """Outcome reward: 1.0 where the text after the last ``=`` is a + b + c and EOS ends the
        completion, else 0.0 (shape (B,))."""
        out = []
        for (a, b, c), text, ended, _ in self._texts(prompts, completions, mask):
            out.append(1.0 if ended and text.rsplit("=", 1)[-1] == str(a + b + c) else 0.0)
        return torch.tensor(out, dtype=torch.float32)

    def step_rewards(self, prompts, completions, mask):
        """Process rewards: ``(rewards, ends)``, both (B, 2). Each step is checked on its own, as
        a process reward model would: step 1 is right when the text up to the first ``=`` is
        a + b; step 2 when the text after the last ``=`` is the completion's *own* intermediate
        result plus c, then EOS (so a slip in step 1 does not make a correct step 2 wrong).
        ``ends`` holds the index of the last token of each step (step 1 ends at the first
        ``=``, or at the last token when there is none; step 2 at the last token)."""
        eq = self.tokenizer.stoi["="]
        texts = self._texts(prompts, completions, mask)
        rewards = torch.zeros(len(texts), 2)
        ends = torch.zeros(len(texts), 2, dtype=torch.long)
        comp = completions.tolist()
        for i, ((a, b, c), text, ended, n) in enumerate(texts):
            first = text.split("=", 1)
            rewards[i, 0] = float(len(first) == 2 and first[0] == str(a + b))
            second = text.rsplit("=", 1)[-1]  # step 2, checked against the completion's own step 1
            rewards[i, 1] = float(ended and len(first) == 2 and first[0].isdigit()
                                  and second == str(int(first[0]) + c))
            last = max(n - 1, 0)
            ends[i, 0] = comp[i][:n].index(eq) if eq in comp[i][:n] else last
            ends[i, 1] = last
        return rewards, ends


def chain_model(steps=400, *, lr=1e-3, seed=0):
    """A candidate starting point of the process-supervision experiment (:func:`chain_start`
    picks among them by quality): the addition task's 450-step SFT model fine-tuned for
    ``steps`` steps on :class:`ChainAdditionTask`'s worked answers (:func:`finetune`), from the
    lab's cache when it is there (rlnotes.lm.cache), else trained now. Returns ``(model, task)``.

    Defined in: Dr. GRPO, DAPO and process supervision, section Outcome and process supervision.
    """
    steps = require_int(steps, "steps", minimum=1)
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    seed = require_int(seed, "seed", minimum=0)
    task = ChainAdditionTask()
    return _finetuned_for("ft-chain-addition", task, steps, lr, seed), task


def chain_start(band=(0.15, 0.35), candidates=tuple(range(400, 1601, 100)), *, lr=1e-3,
                seed=0):
    """The process-supervision experiment's starting point chosen by its quality rather than by
    its step count: the first of ``chain_model(steps)`` for ``steps`` in ``candidates`` (in
    increasing order) whose held-out pass@1 (:func:`rlnotes.lm.evaluation.pass_at_1`, two samples a prompt,
    generator seed 0) lies inside the open interval ``band``. How far a number of fine-tuning
    steps gets depends on the machine's floating-point rounding (an AVX-512 CPU trains another
    model than an AVX2 one from the same seed), so a fixed count would start the experiment from
    a model right on a quarter of the prompts on one machine and on a twelfth on another.

    The candidates are snapshots of one fine-tuning run (:func:`finetune` with a callback; with its
    constant learning rate the snapshot at k steps is exactly ``chain_model(k)``), so a fresh
    machine pays only the steps up to the model chosen, about 40 a second on one core; the
    result is cached (rlnotes.lm.cache). The band is checked on the held-out split, where the
    experiment is then evaluated: it only places the start, and the experiment compares two
    trainings from that same start. Returns ``(model, task, steps, pass1)``; raises
    ``RuntimeError`` when no candidate falls inside the band.

    Defined in: Dr. GRPO, DAPO and process supervision, section Outcome and process supervision.
    """
    import rlnotes.lm.evaluation
    import rlnotes.lm.generation
    from rlnotes.lm.evaluation import pass_at_1

    try:
        low, high = (float(b) for b in band)
    except (TypeError, ValueError):
        raise ValueError(f"band must be a pair of numbers (low, high), got {band!r}") from None
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"band must satisfy 0 <= low < high <= 1, got {band!r}")
    if isinstance(candidates, (str, bytes)) or not hasattr(candidates, "__iter__"):
        raise ValueError(f"candidates must be a sequence of step counts, got {candidates!r}")
    candidates = sorted({require_int(c, "candidates", minimum=1) for c in candidates})
    if not candidates:
        raise ValueError("candidates must hold at least one step count, got an empty sequence")
    lr = require_in_range(lr, "lr", 0.0, float("inf"), low_open=True)
    seed = require_int(seed, "seed", minimum=0)
    task = ChainAdditionTask()

    def train(model):
        tried, found = [], {}

        def check(step, model):
            if step not in candidates:
                return False
            pass1 = pass_at_1(model.eval(), task, samples=2, generator=torch.Generator().manual_seed(0))
            model.train()
            tried.append(f"{step} steps: {pass1:.3f}")
            if low < pass1 < high:
                found.update(state=_state(model), steps=step, pass1=pass1)
            return bool(found)

        finetune(model, task, candidates[-1], lr=lr, seed=seed, callback=check)
        if not found:
            raise RuntimeError(f"no fine-tuning length brings the chain model's pass@1 inside "
                               f"{band}: " + "; ".join(tried))
        return found

    model, entry = _finetuned("chain-start", task, seed,
                              dict(band=[low, high], candidates=candidates, lr=lr), train,
                              code=(rlnotes.lm.evaluation, rlnotes.lm.generation))  # how the band is measured
    return model, task, entry["steps"], entry["pass1"]
