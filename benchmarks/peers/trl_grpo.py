"""TRL's side of the GRPO step race: GRPOTrainer on the addition task, from rlnotes' SFT weights.

Runs in the TRL environment (``benchmarks/peers/requirements-trl.txt``, rlnotes installed
without dependencies), started by ``benchmarks/bench_grpo_step.py``:

    TRL/bin/python benchmarks/peers/trl_grpo.py --weights sft.pt --steps 60 --warmup 5

The same work as rlnotes' side: ``rlnotes.lm.AdditionTask``'s prompts (``"12+35="`` after BOS)
and character tokenizer (15 tokens, as a ``PreTrainedTokenizerFast`` built here, nothing
downloaded), a GPT-2 of the lab's size built locally from ``transformers.GPT2Config`` (2 layers,
4 heads, width 128, context 16, exact GELU, untied head, no dropout) holding the very weights of
rlnotes' SFT model (``--weights``: a TinyGPT state dict; the logits are checked to agree),
8 prompts x G = 8 completions of at most 4 tokens a step, exact-match reward (the answer's
digits then EOS), lr 3e-5, beta 0 (TRL's default), one gradient step per batch, fp32, no
gradient checkpointing, one torch thread. Each step's wall and CPU time are taken by a
``TrainerCallback`` from ``on_step_begin`` (before generation) to ``on_step_end`` (after the
optimiser step). Prints one JSON line: the step times and the versions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")

import torch  # noqa: E402


def char_tokenizer(task):
    """rlnotes' CharTokenizer as a transformers tokenizer: same ids, one token per character."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    ct = task.tokenizer
    vocab = {s: i for i, s in enumerate(ct.specials)} | dict(ct.stoi)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                 eos_token="<eos>", padding_side="left")
    assert hf("<bos>12+35=", add_special_tokens=False)["input_ids"] == task.prompt(12, 35)
    return hf


def gpt2_from_tinygpt(state: dict, vocab_size: int, max_len: int):
    """A transformers GPT-2 holding a TinyGPT state dict (2 layers, 4 heads, width 128)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    width = state["tok_emb.weight"].shape[1]
    n_layers = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    config = GPT2Config(vocab_size=vocab_size, n_positions=max_len, n_embd=width,
                        n_layer=n_layers, n_head=4, n_inner=4 * width,
                        activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, layer_norm_epsilon=1e-5, tie_word_embeddings=False,
                        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = GPT2LMHeadModel(config)
    new = {"transformer.wte.weight": state["tok_emb.weight"],
           "transformer.wpe.weight": state["pos_emb.weight"],
           "transformer.ln_f.weight": state["ln_f.weight"],
           "transformer.ln_f.bias": state["ln_f.bias"],
           "lm_head.weight": state["head.weight"]}
    for i in range(n_layers):
        src, dst = f"blocks.{i}.", f"transformer.h.{i}."
        for a, b in (("ln1", "ln_1"), ("ln2", "ln_2")):
            new[dst + b + ".weight"] = state[src + a + ".weight"]
            new[dst + b + ".bias"] = state[src + a + ".bias"]
        # GPT-2's Conv1D stores (in, out): the transpose of nn.Linear's weight
        for a, b in (("attn.qkv", "attn.c_attn"), ("attn.proj", "attn.c_proj"),
                     ("mlp.0", "mlp.c_fc"), ("mlp.2", "mlp.c_proj")):
            new[dst + b + ".weight"] = state[src + a + ".weight"].t().contiguous()
            new[dst + b + ".bias"] = state[src + a + ".bias"]
    missing, unexpected = model.load_state_dict(new, strict=False)
    missing = [k for k in missing if not k.endswith(".attn.bias") and "masked_bias" not in k]
    if missing or unexpected:
        raise RuntimeError(f"weights do not map: missing {missing}, unexpected {unexpected}")
    return model


def check_same_logits(model, state, task) -> float:
    """Largest |logit difference| between the GPT-2 and rlnotes' TinyGPT on 64 prompts."""
    from rlnotes.lm import TinyGPT

    tiny = TinyGPT(task.tokenizer.vocab_size, task.max_len)
    tiny.load_state_dict(state)
    tokens = torch.tensor(task.sample_prompts(64, torch.Generator().manual_seed(0)))
    with torch.no_grad():
        diff = (tiny(tokens) - model(tokens).logits).abs().max().item()
    if diff > 1e-4:
        raise RuntimeError(f"the GPT-2 does not reproduce the SFT model: logits differ by {diff}")
    return diff


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="TinyGPT state dict (torch.save)")
    parser.add_argument("--steps", type=int, default=60, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    import datasets
    import transformers
    import trl
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlnotes.lm import AdditionTask

    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    task = AdditionTask()
    tok = char_tokenizer(task)
    state = torch.load(args.weights, map_location="cpu")
    model = gpt2_from_tinygpt(state, task.tokenizer.vocab_size, task.max_len)
    diff = check_same_logits(model, state, task)

    prompts = ["<bos>" + f"{a}+{b}=" for a, b in task.pairs("train")]
    dataset = datasets.Dataset.from_dict({"prompt": prompts})

    def exact_match(prompts, completions, completion_ids=None, **kwargs):
        """1 for the answer's digits then EOS, else 0 (AdditionTask.reward's rule)."""
        out = []
        for i, (p, c) in enumerate(zip(prompts, completions)):
            a, b = p.replace("<bos>", "").rstrip("=").split("+")
            ids = list(completion_ids[i]) if completion_ids is not None else None
            want = task.answer(int(a), int(b))
            out.append(float(ids[:len(want)] == want) if ids is not None
                       else float(c == str(int(a) + int(b))))
        return out

    n = args.warmup + args.steps
    times: list[tuple[float, float]] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, a, s, c, **kw):
            self.t, self.c = time.perf_counter(), time.process_time()

        def on_step_end(self, a, s, c, **kw):
            times.append((time.perf_counter() - self.t, time.process_time() - self.c))

    with tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(
            output_dir=tmp, per_device_train_batch_size=64, num_generations=8,
            gradient_accumulation_steps=1, max_completion_length=4, learning_rate=3e-5,
            beta=args.beta, max_steps=n, temperature=1.0, logging_steps=10 ** 6,
            save_strategy="no", report_to="none", use_cpu=True, bf16=False, fp16=False,
            gradient_checkpointing=False, seed=args.seed, dataloader_num_workers=0,
            disable_tqdm=True)
        trainer = GRPOTrainer(model=model, reward_funcs=exact_match, args=config,
                              train_dataset=dataset, processing_class=tok,
                              callbacks=[StepTimer()])
        trainer.train()
    timed = times[args.warmup:]
    import accelerate

    print(json.dumps(dict(
        library="trl", steps=args.steps, warmup=args.warmup, beta=args.beta,
        step_s=[t for t, _ in timed], step_cpu_s=[c for _, c in timed],
        threads=torch.get_num_threads(), logits_max_diff=diff,
        versions={"trl": trl.__version__, "transformers": transformers.__version__,
                  "datasets": datasets.__version__, "accelerate": accelerate.__version__,
                  "torch": torch.__version__, "python": sys.version.split()[0]})), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
