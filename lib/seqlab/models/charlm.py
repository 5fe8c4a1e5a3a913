"""A character-level language model: embedding -> recurrent layers -> linear read-out.

    e_t = E[x_t]                                   (B, T, d_emb)
    h_t = RNN / LSTM / GRU (e_t, h_{t-1})          (B, T, H)
    p(x_{t+1} | x_{≤t}) = softmax(W_y h_t + b_y)   (B, T, V)

The recurrent part is seqlab's own from-scratch RNN, LSTM or GRU (``cell=``); pass
``reference=True`` to use torch.nn's twin instead, for comparisons.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from seqlab.decoding import sample_next
from seqlab.modes import evaluating
from seqlab.nn import recurrent_layer


@dataclass
class CharLMConfig:
    vocab_size: int
    cell: str = "lstm"  # one of seqlab.nn.CELLS
    embed_size: int = 64
    hidden_size: int = 256
    num_layers: int = 1
    dropout: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class CharLM(nn.Module):
    """Next-character model. ``forward(x)`` maps ids (B, T) to ``(logits (B, T, V), state)``."""

    def __init__(self, config: CharLMConfig, *, reference: bool = False):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.embed_size)
        self.rnn = recurrent_layer(config.cell, config.embed_size, config.hidden_size, config.num_layers,
                                   config.dropout, reference=reference)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, x: Tensor, state=None) -> tuple[Tensor, object]:
        if x.dim() != 2 or x.dtype != torch.long:
            raise ValueError(f"CharLM expects ids of shape (B, T) and dtype torch.long, "
                             f"got {x.dtype} of shape {tuple(x.shape)}")
        output, state = self.rnn(self.embed(x), state)  # (B, T, H)
        return self.head(output), state  # (B, T, V)

    @torch.no_grad()
    def generate(self, prompt: Tensor, n: int, *, temperature: float = 1.0, top_k: int | None = None,
                 generator: torch.Generator | None = None) -> Tensor:
        """Continue a 1-D prompt of ids by ``n`` sampled ids; returns prompt + continuation (1-D)."""
        if prompt.dim() != 1 or len(prompt) == 0:
            raise ValueError(f"prompt must be a non-empty 1-D tensor of ids, got shape {tuple(prompt.shape)}")
        device = self.head.weight.device
        out = [prompt.to(device)]
        with evaluating(self):                          # no dropout while sampling; the mode comes back after
            logits, state = self(prompt.to(device)[None])  # read the prompt once, keep the state
            for _ in range(n):
                next_id = sample_next(logits[:, -1], temperature=temperature, top_k=top_k, generator=generator)
                out.append(next_id)
                logits, state = self(next_id[None], state)
        return torch.cat(out)
