"""The fixed-window neural language model (Bengio et al., 2003), :class:`WindowLM`. Notebook 2.

CharLM's interface; the state is the last ``k - 1`` ids, padded with id ``vocab_size`` (its own embedding row).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn


@dataclass
class WindowLMConfig:
    vocab_size: int
    context: int = 4          # k: how many previous symbols the model sees
    embed_size: int = 16      # d_emb per symbol
    hidden_size: int = 256    # H

    def to_dict(self) -> dict:
        return asdict(self)


class WindowLM(nn.Module):
    """Next-symbol model from a window of the last ``config.context`` symbols."""

    def __init__(self, config: WindowLMConfig):
        super().__init__()
        for field in ("vocab_size", "context", "embed_size", "hidden_size"):
            value = getattr(config, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"WindowLMConfig.{field} must be a positive int, got {value!r}")
        self.config = config
        self.pad_id = config.vocab_size                              # "before the text": its own vector
        self.embed = nn.Embedding(config.vocab_size + 1, config.embed_size)
        self.hidden = nn.Linear(config.context * config.embed_size, config.hidden_size)   # W_z, b_z
        self.head = nn.Linear(config.hidden_size, config.vocab_size)                      # W_y, b_y

    def initial_state(self, batch_size: int, device: torch.device | None = None) -> Tensor:
        """Padding ids ``(B, k - 1)``: nothing has been read yet."""
        return torch.full((batch_size, self.config.context - 1), self.pad_id, dtype=torch.long, device=device)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Logits ``(B, T, V)`` for ``x`` ``(B, T)``, and the new state ``(B, k - 1)``."""
        k = self.config.context
        if not isinstance(x, Tensor) or x.dim() != 2 or x.dtype != torch.long:
            got = f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"WindowLM expects ids of shape (B, T) and dtype torch.long, got {got}")
        if state is None:
            state = self.initial_state(x.shape[0], x.device)
        if state.shape != (x.shape[0], k - 1) or state.dtype != torch.long:
            raise ValueError(f"WindowLM's state should be the last k - 1 = {k - 1} ids of each sequence, "
                             f"shape ({x.shape[0]}, {k - 1}) and dtype torch.long, "
                             f"got {state.dtype} of shape {tuple(state.shape)}")
        if x.numel() and (x.min() < 0 or x.max() >= self.config.vocab_size):
            raise ValueError(f"ids must lie in [0, {self.config.vocab_size}), got values from "
                             f"{int(x.min())} to {int(x.max())}")
        padded = torch.cat([state, x], dim=1)                        # (B, k - 1 + T)
        windows = padded.unfold(1, k, 1)                             # (B, T, k): window t ends with x_t
        z = self.embed(windows).flatten(2)                           # (B, T, k * d_emb): the concatenation
        a = torch.tanh(self.hidden(z))                               # (B, T, H)
        return self.head(a), padded[:, padded.shape[1] - (k - 1):]   # (B, T, V), (B, k - 1)
