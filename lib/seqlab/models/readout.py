r"""Read-outs on a recurrent encoder: per step (:class:`SequenceTagger`) or per sequence
(:class:`SequenceClassifier`). Notebook 6.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from seqlab.checks import check_ids
from seqlab.nn import recurrent_layer
from seqlab.nn.masks import padding_mask

READOUTS = ("last", "mean", "max")


class _Encoded(nn.Module):
    def __init__(self, vocab_size: int, num_outputs: int, *, cell: str, embed_size: int, hidden_size: int,
                 num_layers: int, bidirectional: bool, dropout: float, padding_idx: int | None):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=padding_idx)
        self.rnn = recurrent_layer(cell, embed_size, hidden_size, num_layers, dropout, bidirectional=bidirectional)
        self.head = nn.Linear(hidden_size * (2 if bidirectional else 1), num_outputs)

    def encode(self, ids: Tensor, lengths: Tensor | None) -> tuple[Tensor, Tensor]:
        """Top-layer outputs ``(B, T, D*H)`` and the final hidden states ``h_n`` ``(L*D, B, H)``."""
        output, state = self.rnn(self.embed(ids), lengths=lengths)
        h_n = state[0] if isinstance(state, tuple) else state      # LSTM: (h_n, c_n)
        return output, h_n


class SequenceTagger(_Encoded):
    """Embedding -> recurrent layers -> linear: ids ``(B, T)`` -> logits ``(B, T, num_tags)``."""

    def __init__(self, vocab_size: int, num_tags: int = 2, *, cell: str = "gru", embed_size: int = 32,
                 hidden_size: int = 64, num_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0,
                 padding_idx: int | None = 0):
        super().__init__(vocab_size, num_tags, cell=cell, embed_size=embed_size, hidden_size=hidden_size,
                         num_layers=num_layers, bidirectional=bidirectional, dropout=dropout,
                         padding_idx=padding_idx)

    def forward(self, ids: Tensor, lengths: Tensor | Sequence[int] | None = None) -> Tensor:
        lengths = check_ids("SequenceTagger", ids, lengths)
        output, _ = self.encode(ids, lengths)                      # (B, T, D*H)
        return self.head(output)                                   # (B, T, num_tags)


class SequenceClassifier(_Encoded):
    """ids ``(B, T)`` -> logits ``(B, num_classes)`` from the top layer's final states (``readout="last"``)
    or their ``"mean"`` / ``"max"`` over real steps."""

    def __init__(self, vocab_size: int, num_classes: int, *, readout: str = "last", cell: str = "gru",
                 embed_size: int = 32, hidden_size: int = 64, num_layers: int = 1, bidirectional: bool = False,
                 dropout: float = 0.0, padding_idx: int | None = 0):
        if readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
        super().__init__(vocab_size, num_classes, cell=cell, embed_size=embed_size, hidden_size=hidden_size,
                         num_layers=num_layers, bidirectional=bidirectional, dropout=dropout,
                         padding_idx=padding_idx)
        self.readout = readout

    def summary(self, ids: Tensor, lengths: Tensor | Sequence[int] | None = None) -> Tensor:
        """The fixed-size vector the linear layer reads, ``(B, D*H)``."""
        lengths = check_ids("SequenceClassifier", ids, lengths)
        output, h_n = self.encode(ids, lengths)                    # (B, T, D*H), (L*D, B, H)
        if self.readout == "last":
            directions = 2 if self.rnn.bidirectional else 1
            return torch.cat(list(h_n[-directions:]), dim=-1)      # top layer: [h_fwd; h_bwd]
        if lengths is None:
            mask = torch.ones(output.shape[:2], dtype=torch.bool, device=output.device)
        else:
            mask = padding_mask(lengths, output.shape[1], device=output.device)   # (B, T): True at real steps
        mask = mask.unsqueeze(-1)                                  # (B, T, 1)
        if self.readout == "mean":
            return (output * mask).sum(1) / mask.sum(1)
        return output.masked_fill(~mask, float("-inf")).amax(1)

    def forward(self, ids: Tensor, lengths: Tensor | Sequence[int] | None = None) -> Tensor:
        return self.head(self.summary(ids, lengths))              # (B, num_classes)
