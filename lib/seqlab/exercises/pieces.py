"""The student's own pieces, chained: a later build exercise runs the student's earlier answers.

:func:`piece` gives the function that a build-and-watch cell runs for one piece of a model: the student's
answer to that piece's exercise if :func:`~seqlab.exercises.check` passed one in this kernel (``PASSED``) or
its notebook kept one (:func:`~seqlab.exercises.yours`: notebooks 10 and 12 keep them), else the library's reference, with a label that says whose code it is. :data:`PIECES` names, per piece, the
exercise whose answer may stand in for it and an adapter from that answer's signature to the piece's; an
entry whose ``exercise`` is None always runs the reference. The references are composed of pieces too
(the block calls ``piece("multi_head_attention")`` and ``piece("layer_norm")``), so one checked answer
anywhere in the chain is used everywhere below it. Used by notebook 14 (``gpt_forward`` runs on these).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from types import SimpleNamespace

from seqlab.exercises._core import EXERCISES, PASSED, Plugged, yours
from seqlab.watch import attention_params, block_params


# -- the references, in the pieces' own signatures ----------------------------------------------------------
def reference_layer_norm(X: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """LN(X) = gamma * (X - mu) / sqrt(sigma^2 + eps) + beta over the last dimension; the arithmetic of
    :class:`seqlab.nn.LayerNorm`, step for step."""
    mu = X.mean(dim=-1, keepdim=True)                                  # (..., 1)
    sigma2 = (X - mu).pow(2).mean(dim=-1, keepdim=True)                # biased, 1/d
    return (X - mu) * (sigma2 + eps).rsqrt() * gamma + beta


def reference_multi_head_attention(X: Tensor, attention: Any, mask: Tensor) -> Tensor:
    """MultiHead(X, X, X) with seqlab's :class:`~seqlab.nn.MultiheadAttention` ``attention`` (batch-first);
    ``mask`` (T, T) bool, True = may attend (torch's meaning is the opposite, hence ``~mask``)."""
    return attention(X, X, X, attn_mask=~mask, need_weights=False)[0]


def reference_block(X: Tensor, layer: Any, mask: Tensor) -> Tensor:
    """One pre-norm block on ``layer``'s weights (a seqlab TransformerEncoderLayer, norm_first=True):
    X + MultiHead(LN_1(X)), then X + FFN(LN_2(X)); its attention and LayerNorm are the chain's pieces."""
    layer_norm, attend = piece("layer_norm").fn, piece("multi_head_attention").fn
    X = X + attend(layer_norm(X, layer.norm1.weight, layer.norm1.bias), layer.self_attn, mask)
    H = layer_norm(X, layer.norm2.weight, layer.norm2.bias)
    return X + layer.linear2(layer.activation(layer.linear1(H)))


@dataclass(frozen=True)
class Piece:
    """One piece: the exercise whose checked answer stands in for it (None: none yet), the notebook that asks for
    it, the reference (the piece's own signature) and ``adapt(answer) -> function`` in that signature."""

    exercise: str | None
    notebook: str
    reference: Callable[..., Any]
    adapt: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None


def _answer(exercise: str) -> tuple[Callable[..., Any] | None, str]:
    """The student's checked answer to ``exercise``: passed in this kernel, else kept from the notebook that asks
    for it (:func:`~seqlab.exercises.yours`); None and why not, otherwise."""
    if exercise in PASSED:
        return PASSED[exercise], "in this kernel"
    kept = yours(exercise)
    return (kept.fn, "kept from its notebook") if kept.yours else (None, kept.label)


def _attention_params(attention: Any) -> dict[str, Tensor]:
    return attention_params(SimpleNamespace(self_attn=attention))


def _adapt_attention(answer: Callable[..., Any]) -> Callable[..., Any]:
    """Notebook 10's ``multi_head_attention(X, p, h, mask)`` as the piece ``(X, attention_module, mask)``."""
    return lambda X, attention, mask: answer(X, _attention_params(attention), attention.num_heads, mask)


def _adapt_block(answer: Callable[..., Any]) -> Callable[..., Any]:
    """Notebook 12's ``transformer_block(x, p, h, mask, attention, norm, activation)`` as the piece
    ``(X, layer, mask)``, handed the chain's attention (notebook 10's signature) and LayerNorm."""
    def block(X: Tensor, layer: Any, mask: Tensor) -> Tensor:
        attention, _ = _answer("multi_head_attention")
        attention = attention or EXERCISES["multi_head_attention"].reference
        return answer(X, block_params(layer), layer.self_attn.num_heads, mask, attention, piece("layer_norm").fn,
                      layer.activation)
    return block


#: The chain, in course order: the exercise whose answer stands in for each piece, and its adapter.
PIECES: dict[str, Piece] = {
    "multi_head_attention": Piece("multi_head_attention", "10", reference_multi_head_attention, _adapt_attention),
    "layer_norm": Piece("layer_norm", "12", reference_layer_norm),                # (X, gamma, beta) -> LN(X)
    "block": Piece("transformer_block", "12", reference_block, _adapt_block),     # (X, layer, mask) -> X'
}


def piece(name: str) -> Plugged:
    """The student's checked answer for piece ``name`` (adapted to the piece's signature), else the reference."""
    if name not in PIECES:
        raise KeyError(f"no piece named {name!r}; known: {sorted(PIECES)}")
    p = PIECES[name]
    if p.exercise is not None and p.exercise not in EXERCISES:
        raise KeyError(f"piece {name!r} names exercise {p.exercise!r}, which is not registered")
    answer, why = _answer(p.exercise) if p.exercise is not None else (None, "none yet")
    if answer is None:
        return Plugged(p.reference, why if why.startswith("the reference") else f"the reference {name} ({why})",
                       False, False)
    fn = p.adapt(answer) if p.adapt else answer
    return Plugged(fn, f"your {p.exercise} (notebook {p.notebook}, {why})", True, True)


def who_wrote(main: Plugged) -> list[str]:
    """One line per piece that ran under ``main`` (the exercise just watched): whose code it was."""
    lines = [f"the GPT's forward: {main.label}"]
    lines += [f"  {name} (notebook {PIECES[name].notebook}): {piece(name).label}" for name in reversed(PIECES)]
    return lines
