"""A character-level language model: ``p(x_{t+1} | x_{≤t}) = softmax(W_y RNN(E[x])_t + b_y)``.

``reference=True`` uses torch.nn's recurrent layer instead of seqlab's, for comparisons.
"""

from __future__ import annotations

from collections.abc import Callable
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


CellFunction = Callable[..., "Tensor | tuple[Tensor, ...]"]


@torch.no_grad()
def continue_with_cell(model: CharLM, cell: CellFunction, prompt: Tensor, n: int, *, temperature: float = 0.0,
                       generator: torch.Generator | None = None) -> Tensor:
    """Prompt + ``n`` ids ``(len(prompt) + n,)``, with ``cell`` computing every recurrent step of ``model``.

    ``cell(x (1, I), *state (1, H) each, W_ih, W_hh, b_ih, b_hh)`` in torch's layout (notebooks 4-5's cells)
    returns ``h_t`` or a tuple starting with ``h_t``. ``temperature`` 0 is greedy.
    """
    if not isinstance(model, CharLM):
        raise TypeError(f"model should be a CharLM, got {type(model).__name__}")
    if not callable(cell):
        raise TypeError(f"cell should be a function cell(x, *state, W_ih, W_hh, b_ih, b_hh), got {type(cell).__name__}")
    if not isinstance(prompt, Tensor) or prompt.dim() != 1 or len(prompt) == 0 or prompt.dtype != torch.long:
        got = f"{prompt.dtype} tensor of shape {tuple(prompt.shape)}" if isinstance(prompt, Tensor) else type(prompt).__name__
        raise ValueError(f"prompt should be a non-empty 1-D tensor of ids (torch.long), got {got}")
    rnn = model.rnn
    if getattr(rnn, "bidirectional", False) or getattr(rnn, "proj_size", 0):
        raise ValueError("continue_with_cell runs a one-directional recurrent layer without projection")
    state_names = getattr(rnn, "state_names", ("h", "c") if isinstance(rnn, nn.LSTM) else ("h",))
    H = rnn.hidden_size
    layers = []
    for k in range(rnn.num_layers):
        W_ih, W_hh = getattr(rnn, f"weight_ih_l{k}"), getattr(rnn, f"weight_hh_l{k}")
        rows = W_ih.shape[0]                                          # G*H: the gates stacked in torch's order
        b_ih = getattr(rnn, f"bias_ih_l{k}", None)
        b_hh = getattr(rnn, f"bias_hh_l{k}", None)
        layers.append((W_ih, W_hh, W_ih.new_zeros(rows) if b_ih is None else b_ih,
                       W_ih.new_zeros(rows) if b_hh is None else b_hh))
    device = model.head.weight.device
    zeros = model.head.weight.new_zeros(1, H)                           # the model's device and dtype
    states = [tuple(zeros for _ in state_names) for _ in layers]

    def read(token: Tensor) -> Tensor:                                # one id -> logits (1, V)
        x = model.embed(token.view(1, 1))[:, 0]                       # (1, E)
        for k, weights in enumerate(layers):
            new = cell(x, *states[k], *weights)
            new = tuple(new) if isinstance(new, (tuple, list)) else (new,)
            if len(new) != len(state_names) or any(not isinstance(s, Tensor) or s.shape != (1, H) for s in new):
                shapes = [tuple(s.shape) if isinstance(s, Tensor) else type(s).__name__ for s in new]
                raise ValueError(f"cell should return {' and '.join(state_names)}, each of shape (1, {H}) "
                                 f"(B, H) for this model, got {shapes}")
            states[k] = new
            x = new[0]                                                # h_t feeds the next layer and the head
        return model.head(x)

    with evaluating(model):
        for token in prompt.to(device)[:-1]:
            read(token)
        out, token = [prompt.to(device)], prompt.to(device)[-1]
        for _ in range(n):
            token = sample_next(read(token), temperature=temperature, generator=generator)[0]
            out.append(token.view(1))
    return torch.cat(out)
