"""Vocabularies: characters or words to integer ids and back; special tokens come first."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"

# Words, numbers, and each punctuation mark on its own ("don't" stays one word).
_WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|\d+|[^\sA-Za-z\d]")


def word_tokenize(text: str) -> list[str]:
    """Split text into words, numbers and single punctuation marks."""
    return _WORD_RE.findall(text)


class Vocab:
    """An ordered set of tokens with ``encode`` (tokens -> ids) and ``decode`` (ids -> text).

    An unknown token maps to ``<unk>`` if the vocabulary has it, else raises KeyError.
    """

    def __init__(self, tokens: Sequence[str], *, level: str = "char", specials: Sequence[str] = ()):
        if level not in ("char", "word"):
            raise ValueError(f"level must be 'char' or 'word', got {level!r}")
        itos = list(specials) + [t for t in tokens if t not in set(specials)]
        if len(set(itos)) != len(itos):
            raise ValueError("tokens must be unique")
        self.level = level
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {token: index for index, token in enumerate(itos)}

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def chars(cls, text: str, specials: Sequence[str] = ()) -> Vocab:
        """Every distinct character of ``text``, sorted (so the ids do not depend on text order)."""
        return cls(sorted(set(text)), level="char", specials=specials)

    @classmethod
    def words(cls, text: str | Iterable[str], *, min_freq: int = 1, max_size: int | None = None,
              specials: Sequence[str] = (PAD, UNK)) -> Vocab:
        """Words seen at least ``min_freq`` times, most frequent first."""
        tokens = word_tokenize(text) if isinstance(text, str) else list(text)
        counts = Counter(tokens)
        kept = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            kept = kept[: max(0, max_size - len(specials))]
        return cls(kept, level="word", specials=specials)

    # -- use ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __repr__(self) -> str:
        preview = "".join(self.itos[:20]) if self.level == "char" else " ".join(self.itos[:8])
        return f"Vocab(level={self.level!r}, size={len(self)}, first={preview!r})"

    def tokenize(self, text: str) -> list[str]:
        return list(text) if self.level == "char" else word_tokenize(text)

    def encode(self, text: str | Sequence[str]) -> torch.Tensor:
        """Token ids of ``text`` (a string or a token list), 1-D long."""
        tokens = self.tokenize(text) if isinstance(text, str) else list(text)
        unk = self.stoi.get(UNK)
        try:
            ids = [self.stoi[t] for t in tokens] if unk is None else [self.stoi.get(t, unk) for t in tokens]
        except KeyError as err:
            raise KeyError(f"token {err.args[0]!r} is not in this vocabulary of {len(self)} tokens "
                           f"and it has no {UNK!r} entry") from None
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids: Iterable[int] | torch.Tensor, *, skip_specials: bool = False) -> str:
        """Text of a 1-D sequence of ids."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode expects a 1-D sequence of ids, got a tensor of shape {tuple(ids.shape)}")
            ids = ids.tolist()
        tokens = []
        for i in ids:
            if not 0 <= i < len(self):
                raise IndexError(f"id {i} is outside this vocabulary (valid ids: 0..{len(self) - 1})")
            token = self.itos[i]
            if not (skip_specials and token.startswith("<") and token.endswith(">") and len(token) > 1):
                tokens.append(token)
        return ("" if self.level == "char" else " ").join(tokens)

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"level": self.level, "itos": self.itos}), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(data["itos"], level=data["level"])
