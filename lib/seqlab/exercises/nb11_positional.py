"""Notebook 11 — positional encodings: the sinusoidal table, RoPE for one pair, and a prediction about ALiBi."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, first_difference, randn64, register, tensor_hint, tensors_close


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 1. the sinusoidal table ------------------------------------------------------------------------
def _sinusoidal_table(length: int, d_model: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float64)[:, None]                  # (length, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)[None, :]         # (1, d/2)
    angle = pos / 10000 ** (two_i / d_model)                                  # (length, d/2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def _table_variant(length: int, d_model: int, *, swap=False, halves=False, exponent=None, start=0) -> Tensor:
    pos = torch.arange(start, start + length, dtype=torch.float64)[:, None]
    j = torch.arange(d_model, dtype=torch.float64)[None, :]                   # every column's own index
    two_i = (j // 2) * 2 if exponent is None else exponent(j)
    angle = pos / 10000 ** (two_i / d_model)                                  # (length, d)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:
        half = angle[:, 0::2]
        return torch.cat([first(half), second(half)], dim=1)
    return torch.where(j % 2 == 0, first(angle), second(angle))


def _diagnose_table(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    length, d_model = args
    if _close(got, _table_variant(length, d_model, swap=True)):
        return "sine and cosine are swapped: even columns 2i hold sin, odd columns 2i+1 hold cos."
    if _close(got, _table_variant(length, d_model, halves=True)):
        return ("you put all the sines first and all the cosines after; the paper interleaves them: "
                "column 2i is sin, column 2i+1 its cos, with the same frequency.")
    if _close(got, _table_variant(length, d_model, exponent=lambda j: j)):
        return ("columns 2i and 2i+1 share ONE frequency, 1/10000^(2i/d_model); you gave each column j its own "
                "(10000^(j/d_model)), so the cosine columns are off.")
    if _close(got, _table_variant(length, d_model, exponent=lambda j: 2 * j)):
        return "the exponent is 2i/d_model where i is the pair (column // 2), not 2j with j the column itself."
    if _close(got, _table_variant(length, d_model, start=1)):
        return "positions start at 0: row 0 is PE(0) = (0, 1, 0, 1, ...)."
    return first_difference(got, expected) + "."


register(Exercise(
    name="sinusoidal_table",
    signature="sinusoidal_table(length: int, d_model: int) -> Tensor (length, d_model), "
              "PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...)",
    reference=_sinusoidal_table,
    cases=[Case((4, 4), "four positions, d_model = 4"),
           Case((10, 8), "ten positions, d_model = 8"),
           Case((50, 32), "fifty positions, d_model = 32"),
           Case((1, 2), "one position, one pair")],
    hint="angle = pos / 10000 ** (2i / d_model) for pos in 0..length-1 and i in 0..d_model/2-1; "
         "sin(angle) into the even columns, cos(angle) into the odd ones.",
    diagnose=_diagnose_table,
    same=_close,
))


# -- 2. RoPE for one pair: a 2-D rotation --------------------------------------------------------------
def _rotate_pair(x: Tensor, pos: int, theta: float) -> Tensor:
    angle = pos * theta
    c, s = math.cos(angle), math.sin(angle)
    return torch.stack((x[0] * c - x[1] * s, x[0] * s + x[1] * c))


def _diagnose_rotation(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    x, pos, theta = args
    if _close(got, _rotate_pair(x, -pos, theta)):
        return ("you rotated clockwise (by -pos·theta): the first output is x0 cos - x1 sin, "
                "the second x0 sin + x1 cos.")
    if pos != 1 and _close(got, _rotate_pair(x, 1, theta)):
        return "the angle is pos · theta: a token at position pos turns pos times as far as one at position 1."
    if _close(got, _rotate_pair(x, 1, pos * theta)[[1, 0]]):
        return "the two components are swapped: return (x0', x1') in that order."
    if _close(got, _rotate_pair(x, pos, math.degrees(theta))):
        return "torch.cos and torch.sin take radians; theta is already in radians."
    if isinstance(got, Tensor) and got.numel() == 2 and abs(got.norm().item() - x.norm().item()) > 1e-6:
        return (f"a rotation keeps the length: |x| = {x.norm().item():.4g}, your result has length "
                f"{got.norm().item():.4g}. Use cos and sin of the same angle.")
    return first_difference(got, expected) + "."


register(Exercise(
    name="rotate_pair",
    signature="rotate_pair(x: Tensor (2,), pos: int, theta: float) -> Tensor (2,), "
              "x rotated counter-clockwise by the angle pos * theta",
    reference=_rotate_pair,
    cases=[Case((torch.tensor([1.0, 0.0], dtype=torch.float64), 1, math.pi / 2), "(1, 0) by 90 degrees"),
           Case((torch.tensor([1.0, 0.0], dtype=torch.float64), 3, 0.5), "(1, 0) at position 3, theta = 0.5"),
           Case((randn64(2, seed=0), 7, 0.1), "a random pair at position 7, theta = 0.1"),
           Case((randn64(2, seed=1), 0, 1.0), "position 0: no rotation")],
    hint="with a = pos * theta: (x0 cos a - x1 sin a, x0 sin a + x1 cos a).",
    diagnose=_diagnose_rotation,
    same=_close,
))


# -- 3. predict, then measure: how much does an ALiBi head attend to the token itself? --------------
ALIBI_HEADS, ALIBI_LENGTH = 8, 8


def measure_alibi_self_weight() -> float:
    """Measured with seqlab's ALiBi and attend: 8 heads, 8 tokens, causal, every content score equal (0).

    Returns the weight that head 1 (slope 1/2) gives the last token's query to the last token itself.
    """
    from seqlab.nn.attention import attend
    from seqlab.nn.masks import causal_mask, merge_masks
    from seqlab.nn.positional import ALiBi

    n = ALIBI_LENGTH
    q = k = torch.zeros(1, ALIBI_HEADS, n, 4, dtype=torch.float64)            # equal scores: q . k = 0
    mask = merge_masks(causal_mask(n), ALiBi(ALIBI_HEADS).score_bias(n, n, dtype=torch.float64))   # (H, n, n)
    _, weights = attend(q, k, k, mask)                                          # (1, H, n, n)
    return float(weights[0, 0, -1, -1])


def _predict_self_weight() -> float:
    return measure_alibi_self_weight()


def _same_prediction(got: Any, expected: float) -> bool:
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(float(got) - expected) <= 0.05


def _diagnose_prediction(args: tuple, got: Any, expected: float) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"return your prediction as a number (a weight between 0 and 1), not a {type(got).__name__}."
    got = float(got)
    if not 0.0 <= got <= 1.0:
        return f"a softmax weight lies between 0 and 1; you predicted {got:.4g}."
    if abs(got - 1 / ALIBI_LENGTH) < 0.03:
        return (f"1/{ALIBI_LENGTH} is what equal scores give without ALiBi. The bias -s|i-j| lowers the scores of "
                f"keys further back, so the token itself (distance 0) gets more: with slope 1/2 the weights fall "
                f"like e^(-d/2) with the distance d, and the self weight is 1 / sum over d = 0..7 of e^(-d/2).")
    if got > expected:
        return (f"measured {expected:.3f}: a penalty of 1/2 per step is gentle -- the key one step back still gets "
                f"e^(-1/2) = {math.exp(-0.5):.2f} times the token's own weight.")
    return (f"measured {expected:.3f}: head 1 has the steepest slope (1/2 per step), so it is the most local head; "
            f"the weights fall like e^(-d/2) with the distance d.")


register(Exercise(
    name="predict_alibi_self_weight",
    signature="predict_alibi_self_weight() -> float: the weight head 1 of ALiBi(8) (slope 1/2) gives the last of "
              "8 tokens to itself when all content scores are equal, causal (checked against a measurement, +-0.05)",
    reference=_predict_self_weight,
    cases=[Case((), "ALiBi, 8 heads, 8 tokens, causal, equal scores: head 1's weight on the token itself")],
    hint="weights proportional to e^(-d/2) for d = 0..7 steps back; the token itself is d = 0.",
    diagnose=_diagnose_prediction,
    same=_same_prediction,
))
