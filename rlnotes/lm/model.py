"""A decoder-only transformer small enough to read in one sitting (GPT-2's layout, Radford et al.
2019, after Vaswani et al. 2017), with a key-value cache for fast generation.

Reading order: ``CausalSelfAttention`` (one layer of attention, and where the cache is written),
``Block`` (attention and an MLP, each behind a layer norm and a residual connection), ``TinyGPT``
(token and position embeddings, the blocks, and a linear map to the vocabulary's logits).

Defined in: Reinforcement learning from human feedback, section A language model as a policy.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlnotes._validate import require_int

__all__ = ["TinyGPT", "KVCache"]


class KVCache:
    """Keys and values of every layer for the positions already processed, so that generating
    one more token costs one forward pass of that token only (not of the whole sequence).

    ``k[layer]`` and ``v[layer]`` are (B, n_heads, capacity, head_dim); ``length`` positions are
    filled. Writing is in place: a cache belongs to one generation call.
    """

    def __init__(self, n_layers, batch, n_heads, capacity, head_dim, *, device, dtype):
        shape = (n_layers, batch, n_heads, capacity, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0
        self.capacity = capacity


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees positions <= t (and, with padding,
    only the real tokens among them)."""

    def __init__(self, width: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, width // n_heads
        self.qkv = nn.Linear(width, 3 * width)  # queries, keys and values in one matrix product
        self.proj = nn.Linear(width, width)

    def forward(self, x, allowed, cache: KVCache | None = None, layer: int = 0):
        B, T, W = x.shape
        q, k, v = self.qkv(x).split(W, dim=2)
        # (B, T, W) -> (B, heads, T, head_dim)
        q, k, v = (z.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            # Append this call's keys and values; attend over everything cached so far.
            start = cache.length
            cache.k[layer, :, :, start:start + T] = k
            cache.v[layer, :, :, start:start + T] = v
            k, v = cache.k[layer, :, :, :start + T], cache.v[layer, :, :, :start + T]
        # allowed: (B, 1, T, S) bool, True where query t may attend to key s; or "causal"
        # (no padding, no cache: the plain causal mask); or None (attend to every key)
        if isinstance(allowed, str):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.proj(y.transpose(1, 2).reshape(B, T, W))


class Block(nn.Module):
    """x + attention(layer_norm(x)), then x + MLP(layer_norm(x)) (pre-norm, as in GPT-2)."""

    def __init__(self, width: int, n_heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, n_heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, allowed, cache=None, layer=0):
        x = x + self.attn(self.ln1(x), allowed, cache, layer)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    r"""A decoder-only transformer: ``model(tokens) -> logits``, position t scoring token t + 1.

    .. math::  \pi_\theta(a_t \mid s_t) = \mathrm{softmax}(\text{logits}[t])_{a_t},
               \quad s_t = (x, y_{<t})

    ==============  ==============  ================================================
    argument        type / shape    meaning
    ==============  ==============  ================================================
    vocab_size      int >= 2        number of token ids
    max_len         int >= 1        longest sequence (prompt + completion)
    n_layers        int, 2          transformer blocks
    n_heads         int, 4          attention heads (must divide width)
    width           int, 128        embedding width
    seed            int, 0          initial weights come from torch.Generator(seed)
    ==============  ==============  ================================================

    minGPT's names (``n_layer``, ``n_head``, ``n_embd``) and ``dropout=0`` are accepted too.

    ``forward(tokens, *, positions=None, key_valid=None, cache=None, return_hidden=False)``:

    ==============  ==============  ================================================
    tokens          (B, T) long     token ids
    positions       (B, T) long     position of each token (default 0..T-1); with
                                    left-padded prompts, the count of real tokens before
    key_valid       (B, S) bool     False for padding keys (S = cached + T)
    cache           KVCache         filled in place, see :meth:`new_cache`
    returns         (B, T, V)       logits; with return_hidden, (logits, hidden (B, T, W))
    ==============  ==============  ================================================

    The weights are a deterministic function of the sizes and ``seed``.

    Defined in: Reinforcement learning from human feedback, section A language model as a policy.
    """

    # other common spellings of the sizes (minGPT's, PyTorch's), accepted as keyword arguments
    ALIASES = {"n_layer": "n_layers", "num_layers": "n_layers", "n_head": "n_heads",
               "num_heads": "n_heads", "n_embd": "width", "d_model": "width", "dim": "width"}

    def __init__(self, vocab_size, max_len, *, n_layers=2, n_heads=4, width=128, seed=0, **aliases):
        super().__init__()
        sizes = dict(n_layers=n_layers, n_heads=n_heads, width=width)
        for key, value in aliases.items():
            if key == "dropout":
                if value:
                    raise ValueError(f"dropout must be 0 (TinyGPT has no dropout), got {value!r}")
                continue
            if key not in self.ALIASES:
                raise ValueError(f"{key} is not a size of TinyGPT: use n_layers, n_heads, width, seed")
            sizes[self.ALIASES[key]] = value
        n_layers, n_heads, width = sizes["n_layers"], sizes["n_heads"], sizes["width"]
        vocab_size = require_int(vocab_size, "vocab_size", minimum=2)
        max_len = require_int(max_len, "max_len", minimum=1)
        n_layers = require_int(n_layers, "n_layers", minimum=1)
        n_heads = require_int(n_heads, "n_heads", minimum=1)
        width = require_int(width, "width", minimum=1)
        if width % n_heads:
            raise ValueError(f"n_heads must divide width={width}, got n_heads={n_heads}")
        self.config = dict(vocab_size=vocab_size, max_len=max_len, n_layers=n_layers,
                           n_heads=n_heads, width=width, seed=require_int(seed, "seed", minimum=0))
        self.vocab_size, self.max_len, self.width = vocab_size, max_len, width
        self.tok_emb = nn.Embedding(vocab_size, width)
        self.pos_emb = nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(Block(width, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        self._init_weights(seed)

    @torch.no_grad()
    def _init_weights(self, seed):
        """GPT-2's initialisation: N(0, 0.02) weights, zero biases, and the residual projections
        scaled down by sqrt(2 n_layers) so that the residual stream does not grow with depth."""
        gen = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif "ln" in name:
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * len(self.blocks)) if name.endswith(("proj.weight", "mlp.2.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * std)

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty key-value cache for ``batch`` sequences of up to ``capacity`` tokens."""
        p = self.head.weight
        blk = self.blocks[0].attn
        return KVCache(len(self.blocks), batch, blk.n_heads, capacity, blk.head_dim,
                       device=p.device, dtype=p.dtype)

    def forward(self, tokens, *, positions=None, key_valid=None, cache=None, return_hidden=False):
        B, T = tokens.shape
        start = cache.length if cache is not None else 0
        S = start + T
        if S > self.max_len:
            raise ValueError(f"tokens: sequence of {S} tokens exceeds max_len={self.max_len}")
        if positions is None:
            positions = torch.arange(start, S, device=tokens.device).expand(B, T)
        # Query t (absolute index start + t) may see key s <= start + t that is a real token;
        # it always sees itself, so that a padding query has a finite (unused) output.
        if key_valid is not None and bool(key_valid[:, :S].all()):
            key_valid = None  # no padding: the cheaper masks below are exact
        if key_valid is None and T == 1:
            allowed = None  # one new token sees every earlier one
        elif key_valid is None and start == 0:
            allowed = "causal"
        else:
            q_idx = torch.arange(start, S, device=tokens.device)[:, None]
            k_idx = torch.arange(S, device=tokens.device)[None, :]
            allowed = (k_idx <= q_idx)[None, None]  # (1, 1, T, S)
            if key_valid is not None:
                allowed = (allowed & key_valid[:, None, None, :S]) | (k_idx == q_idx)[None, None]
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        for layer, block in enumerate(self.blocks):
            x = block(x, allowed, cache, layer)
        if cache is not None:
            cache.length = S
        hidden = self.ln_f(x)
        logits = self.head(hidden)
        return (logits, hidden) if return_hidden else logits

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters())
