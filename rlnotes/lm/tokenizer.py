"""A character-level tokeniser: one token per character, plus padding, beginning and end tokens.

Defined in: Reinforcement learning from human feedback, section The tasks.
"""

from __future__ import annotations

__all__ = ["CharTokenizer"]


class CharTokenizer:
    """Token ids: 0 = PAD, 1 = BOS, 2 = EOS, then one id per character of ``chars``, in order.

    ``encode("12+35=")`` gives ``[BOS, ...]`` (the BOS is added unless ``bos=False``);
    ``decode(ids)`` stops at the first EOS and drops PAD and BOS.

    Defined in: Reinforcement learning from human feedback, section The tasks.
    """

    pad_id, bos_id, eos_id = 0, 1, 2
    specials = ("<pad>", "<bos>", "<eos>")

    def __init__(self, chars: str):
        if not isinstance(chars, str) or not chars:
            raise ValueError(f"chars must be a non-empty string, got {chars!r}")
        if len(set(chars)) != len(chars):
            raise ValueError(f"chars must not repeat a character, got {chars!r}")
        self.chars = chars
        self.stoi = {c: i + len(self.specials) for i, c in enumerate(chars)}
        self.itos = {i: c for c, i in self.stoi.items()}

    @property
    def vocab_size(self) -> int:
        return len(self.specials) + len(self.chars)

    def encode(self, text: str, *, bos: bool = True, eos: bool = False) -> list[int]:
        """Token ids of ``text`` (with BOS first and EOS last when asked)."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        bad = sorted(set(text) - set(self.stoi))
        if bad:
            raise ValueError(f"text holds characters outside the vocabulary: {bad}")
        ids = [self.stoi[c] for c in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids) -> str:
        """Text of ``ids`` up to the first EOS (PAD and BOS dropped)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            if i not in self.itos:
                raise ValueError(f"ids holds {i}, outside the vocabulary [0, {self.vocab_size})")
            out.append(self.itos[i])
        return "".join(out)

    def __repr__(self) -> str:
        return f"CharTokenizer({self.chars!r}, vocab_size={self.vocab_size})"
