"""Notebook 11 — positional encodings: build the sinusoidal table, add RoPE to a head, change the base of the
sinusoids, predict an ALiBi head's weight, and predict which encodings work on sequences four times longer than any
seen in training."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, Measured, first_difference, randn64, register, tensor_hint,
                                   tensors_close)
from seqlab.nn.positional import POSITIONAL_ENCODINGS


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 0. build the sinusoidal table ------------------------------------------------------------------------
def _sinusoidal_variant(n: int, d: int, *, exponent=None, first: int = 0, layout: str = "interleaved",
                        swap: bool = False) -> Tensor:
    """``(n, d)``: the sinusoidal table, or one of the usual slips in writing it (the options name the slip)."""
    pos = torch.arange(first, first + n, dtype=torch.float64)[:, None]                 # (n, 1)
    if layout == "per-column":                                                        # each column its own frequency
        j = torch.arange(d, dtype=torch.float64)[None, :]                             # (1, d): the column index
        angle = pos / 10000.0 ** (j / d)
        return torch.where(j.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
    i = torch.arange(d // 2, dtype=torch.float64)[None, :]                            # (1, d/2): the pair index
    omega = exponent(i, d) if exponent is not None else 10000.0 ** (-2 * i / d)
    sin, cos = torch.sin(pos * omega), torch.cos(pos * omega)                         # (n, d/2) each
    even, odd = (cos, sin) if swap else (sin, cos)
    if layout == "halves":                                                            # sines, then cosines
        return torch.cat((even, odd), dim=1)
    return torch.stack((even, odd), dim=-1).reshape(n, d)                             # sin, cos, sin, cos, ...


def _sinusoidal_encoding(n_positions: int, d_model: int) -> Tensor:
    return _sinusoidal_variant(n_positions, d_model)


SINUSOIDAL_MISTAKES = [
    (dict(swap=True), "sine and cosine are swapped: the even columns 2i hold sin(pos omega_i), the odd columns 2i+1 "
                      "cos(pos omega_i); row 0 reads 0, 1, 0, 1, ..."),
    (dict(layout="halves"), "the sines and cosines are not interleaved: you put all the sines first, then all the "
                            "cosines. Column 2i is the sine of pair i and column 2i+1 its cosine (stack them on a last "
                            "axis, then reshape to (n, d_model))."),
    (dict(layout="per-column"), "you gave every column its own frequency, 10000^(-j/d_model) with j the column. i is "
                                "the PAIR index: columns 2i and 2i+1 share omega_i = 10000^(-2i/d_model), so that "
                                "sin^2 + cos^2 = 1 in every pair."),
    (dict(exponent=lambda i, d: 10000.0 ** (-i / d)), "omega_i = 1 / 10000^(2i/d_model) with i the pair index "
                                                      "(0 .. d_model/2 - 1); you left out the 2 (10000^(i/d_model))."),
    (dict(exponent=lambda i, d: 10000.0 ** (-4 * i / d)),
     "the exponent is 2i/d_model with i the PAIR index; you used the column 2i in place of i (10000^(4i/d_model))."),
    (dict(exponent=lambda i, d: 10000.0 ** (2 * i / d)),
     "the positions are divided by 10000^(2i/d_model), not multiplied: omega_i = 10000^(-2i/d_model), slower for "
     "larger i."),
    (dict(exponent=lambda i, d: 1 / (10000.0 ** (2 * i) * d)),
     "operator precedence: pos / 10000 ** (2 * i) / d_model divides by d_model outside the power; the exponent is "
     "the whole 2i/d_model: pos / 10000 ** (2 * i / d_model)."),
    (dict(first=1), "the positions start at 1; they start at 0 (row 0 is sin 0 = 0, cos 0 = 1 in every pair)."),
]


def _diagnose_sinusoidal(args: tuple, got: Any, expected: Tensor) -> str | None:
    n, d = args
    if isinstance(got, Tensor) and got.shape == (d, n) and n != d:
        return f"you returned the table transposed, ({d}, {n}): one row per position, shape (n_positions, d_model)."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    got = got.to(torch.float64)
    if n == d and tensors_close(got, expected.T, atol=1e-5):
        return "you returned the table transposed: row pos is PE_pos, column 2i the sine of pair i."
    for options, message in SINUSOIDAL_MISTAKES:
        if tensors_close(got, _sinusoidal_variant(n, d, **options), atol=1e-5):
            return message
    return first_difference(got, expected, atol=1e-5) + "."


register(Exercise(
    name="sinusoidal_encoding",
    mistakes=tuple(message for _, message in SINUSOIDAL_MISTAKES),
    forbidden=("sinusoidal_table", "SinusoidalPositionalEncoding", "sinusoidal_rotation"),
    signature="sinusoidal_encoding(n_positions: int, d_model: int) -> Tensor (n_positions, d_model): row pos = "
              "PE_pos for pos = 0 .. n_positions - 1, PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), "
              "PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)); d_model even",
    reference=_sinusoidal_encoding,
    cases=[Case((6, 8), "six positions, d_model = 8 (pairs i = 0 .. 3)"),
           Case((50, 16), "50 positions, d_model = 16: far positions and slow pairs"),
           Case((8, 8), "eight positions, d_model = 8: rows are positions, columns dimensions")],
    hidden=lambda seed: [Case((9 + seed % 4, 12), "9 to 12 positions, d_model = 12")],
    hint="pos = arange(n)[:, None]; omega = 10000 ** (-2 * arange(d/2) / d); stack (sin(pos omega), cos(pos omega)) "
         "on a last axis and reshape to (n, d).",
    diagnose=_diagnose_sinusoidal,
    same=lambda got, expected: tensors_close(got, expected, atol=1e-5),
))


# -- 1. add RoPE to a head --------------------------------------------------------------------------
ROPE_BASE = 10000.0


def _rope_angles(n: int, d_k: int, start: int, *, exponent=None, sign: float = 1.0) -> Tensor:
    """``(n, d_k/2)``: the angle pos * theta_l of pair l at positions start .. start + n - 1."""
    pos = torch.arange(start, start + n, dtype=torch.float64)[:, None]               # (n, 1)
    l = torch.arange(d_k // 2, dtype=torch.float64)[None, :]                         # (1, d_k/2): the pair index
    theta = exponent(l, d_k) if exponent is not None else ROPE_BASE ** (-2 * l / d_k)
    return sign * pos * theta                                                        # (n, d_k/2)


def _rotate(t: Tensor, angle: Tensor, layout: str = "interleaved") -> Tensor:
    """Rotate the rows of ``t`` ``(n, d_k)`` pair by pair; ``layout`` names which dimensions form a pair."""
    cos, sin = torch.cos(angle), torch.sin(angle)                                    # (n, d_k/2)
    half = t.shape[1] // 2
    if layout == "interleaved":                                                      # (2l, 2l+1): RoFormer, Meta's LLaMA
        even, odd = t[:, 0::2], t[:, 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    if layout == "halves":                                                           # (l, l + d_k/2): GPT-NeoX, HF
        a, b = t[:, :half], t[:, half:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    out = t.clone()                                                                  # (l, l+1): overlapping pairs
    source = out if layout == "neighbours-in-place" else t
    for l in range(half):
        a, b = source[:, l].clone(), source[:, l + 1].clone()
        out[:, l], out[:, l + 1] = a * cos[:, l] - b * sin[:, l], a * sin[:, l] + b * cos[:, l]
    return out


def _rope_head_variant(x: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, start: int = 0, *, rotate=("q", "k"),
                       layout="interleaved", exponent=None, sign=1.0, scale=True, add_positions=False) -> Tensor:
    n, d_k = x.shape[0], W_Q.shape[1]
    if add_positions:                                                                # sinusoids added to x instead
        from seqlab.nn.positional import sinusoidal_table
        x = x + sinusoidal_table(n, x.shape[1], offset=start, dtype=x.dtype)
    q, k, v = x @ W_Q, x @ W_K, x @ W_V                                              # (n, d_k) each
    angle = _rope_angles(n, d_k, start, exponent=exponent, sign=sign)
    q = _rotate(q, angle, layout) if "q" in rotate else q
    k = _rotate(k, angle, layout) if "k" in rotate else k
    v = _rotate(v, angle, layout) if "v" in rotate else v
    scores = q @ k.T / (math.sqrt(d_k) if scale else 1.0)                            # (n, n)
    return torch.softmax(scores, dim=-1) @ v                                         # (n, d_k)


def _rope_head(x: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, start: int = 0) -> Tensor:
    return _rope_head_variant(x, W_Q, W_K, W_V, start)


ROPE_MISTAKES = [
    (dict(rotate=()), "no rotation at all: this is notebook 9's head. Rotate q and k, row by row, by their positions "
                      "(if you did, your angles are next to 0: check the brackets, 10000 ** (-2 * l / d_k), "
                      "not 10000 ** -2 * l / d_k)."),
    (dict(rotate=("q", "k", "v")),
     "you rotated v too. RoPE rotates only the query and the key, so that their dot product (the score) sees the "
     "offset; the values are averaged as they are."),
    (dict(rotate=("q",)), "you rotated q only: rotate k too (q_i . k_j then depends on j - i only)."),
    (dict(rotate=("k",)), "you rotated k only: rotate q too (q_i . k_j then depends on j - i only)."),
    (dict(sign=-1.0),
     "the angle has the wrong sign: you rotated clockwise. Pair l of the token at position p turns by +p theta_l: "
     "(x_2l cos - x_2l+1 sin, x_2l sin + x_2l+1 cos)."),
    (dict(layout="halves"),
     "you paired dimension l with l + d_k/2 (GPT-NeoX's and Hugging Face's layout, section 6). Here the pairs are "
     "neighbours (2l, 2l+1), as in RoFormer and Meta's LLaMA code: x[:, 0::2] with x[:, 1::2]."),
    (dict(layout="neighbours"),
     "you paired dimension l with l + 1 (pairs overlap: (0,1), (1,2), ...). Pair l is the two dimensions (2l, 2l+1): "
     "l = 0 -> (0, 1), l = 1 -> (2, 3)."),
    (dict(layout="neighbours-in-place"),
     "you paired dimension l with l + 1 (pairs overlap: (0,1), (1,2), ...). Pair l is the two dimensions (2l, 2l+1): "
     "l = 0 -> (0, 1), l = 1 -> (2, 3)."),
    (dict(exponent=lambda l, d: ROPE_BASE ** (2 * l / d)),
     "the base is on the wrong side: theta_l = 10000^(-2l/d_k) (slower pairs for larger l), you used 10000^(+2l/d_k)."),
    (dict(exponent=lambda l, d: 1 / (ROPE_BASE ** (2 * l) * d)),
     "operator precedence: pos / 10000 ** (2 * l) / d_k divides by d_k outside the power; the exponent is "
     "the whole 2l/d_k: 10000 ** (2 * l / d_k)."),
    (dict(exponent=lambda l, d: ROPE_BASE ** (-l / d)),
     "theta_l = 10000^(-2l/d_k) with l the pair index (0 .. d_k/2 - 1); you left out the 2."),
    (dict(exponent=lambda l, d: ROPE_BASE ** (-4 * l / d)),
     "theta_l = 10000^(-2l/d_k) with l the PAIR index; you used the dimension index 2l in its place (10000^(-4l/d_k))."),
    (dict(scale=False), "the rotation is right; divide the scores by sqrt(d_k), as in every head."),
    (dict(add_positions=True, rotate=()),
     "you added sinusoidal positions to x (section 2's recipe). RoPE adds nothing: it rotates q and k inside the head."),
]


def _diagnose_rope_head(args: tuple, got: Any, expected: Tensor) -> str | None:
    x, W_Q, W_K, W_V, start = args
    if isinstance(got, Tensor) and got.shape == (x.shape[0], x.shape[0]) and got.shape != expected.shape:
        return "you returned the attention weights (n, n); return the output z = weights @ v, shape (n, d_k)."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    for options, message in ROPE_MISTAKES:
        if _close(got, _rope_head_variant(x, W_Q, W_K, W_V, start, **options)):
            return message
    return first_difference(got, expected) + "."


def _head_case(n: int, d_model: int, d_k: int, seed: int, start: int, what: str) -> Case:
    x = randn64(n, d_model, seed=seed)
    W_Q, W_K, W_V = (randn64(d_model, d_k, seed=seed + j) for j in (1, 2, 3))
    return Case((x, W_Q, W_K, W_V, start), what)


register(Exercise(
    name="rope_head",
    mistakes=tuple(message for _, message in ROPE_MISTAKES),
    signature="rope_head(x: Tensor (n, d_model), W_Q, W_K, W_V: Tensor (d_model, d_k), start: int = 0) -> Tensor "
              "(n, d_k): one head, softmax(q~ k~^T / sqrt(d_k)) v, with q and k rotated by RoPE at positions "
              "start .. start + n - 1 (pairs (2l, 2l+1), theta_l = 10000^(-2l/d_k))",
    reference=_rope_head,
    cases=[_head_case(5, 6, 4, 0, 0, "five tokens, d_model = 6, d_k = 4, positions 0 .. 4"),
           _head_case(6, 8, 8, 10, 0, "six tokens, d_model = d_k = 8, positions 0 .. 5"),
           _head_case(6, 8, 8, 10, 1000, "the same six tokens at positions 1000 .. 1005: the same output")],
    hidden=lambda seed: [_head_case(7, 6, 6, seed, seed % 97,
                                    "seven tokens, d_model = d_k = 6, positions from a secret start")],
    hint="q, k, v = x @ W_Q, x @ W_K, x @ W_V; angle[p, l] = (start + p) * 10000 ** (-2 * l / d_k); rotate each "
         "pair (2l, 2l+1) of q and of k by its angle; then softmax(q @ k.T / sqrt(d_k)) @ v.",
    diagnose=_diagnose_rope_head,
    same=_close,
))


# -- 2. change the base: predict, then measure the slowest wavelength ----------------------------------
BASE_D_MODEL, NEW_BASE = 64, 100.0
WAVELENGTH_TOLERANCE = 0.03          # 3 % of the measured wavelength


def measure_slowest_wavelength(d_model: int = BASE_D_MODEL, base: float = NEW_BASE, length: int = 6000) -> float:
    """The period, in positions, of the slowest pair's sine column of the sinusoidal table: the mean distance
    between its upward zero crossings (linearly interpolated) over ``length`` positions."""
    from seqlab.nn.positional import sinusoidal_table

    s = sinusoidal_table(length, d_model, base=base, dtype=torch.float64)[:, d_model - 2]   # sin(pos omega_last)
    up = torch.nonzero((s[:-1] < 0) & (s[1:] >= 0)).flatten()                              # sign changes - to +
    crossings = up.to(torch.float64) + s[up] / (s[up] - s[up + 1])                          # interpolated
    if len(crossings) < 2:
        raise ValueError(f"fewer than two periods in {length} positions: measure over a longer table")
    return float((crossings[-1] - crossings[0]) / (len(crossings) - 1))


def _predict_wavelength() -> float:
    return measure_slowest_wavelength()


def _same_wavelength(got: Any, expected: float) -> bool:
    return (isinstance(got, (int, float)) and not isinstance(got, bool)
            and abs(float(got) - expected) <= WAVELENGTH_TOLERANCE * expected)


def _diagnose_wavelength(args: tuple, got: Any, expected: float) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"put your prediction as a number of positions (e.g. 1234.5), not a {type(got).__name__}."
    got, d, b = float(got), BASE_D_MODEL, NEW_BASE
    last = d // 2 - 1
    near = lambda value: value > 0 and abs(got - value) <= 0.03 * value   # noqa: E731
    if near(2 * math.pi * 10000 ** (2 * last / d)):
        return (f"that is the slowest wavelength with base 10000 (section 2). With base {b:g} it is "
                f"2 pi * {b:g}^(2i/d_model) for the last pair i = {last}.")
    if near(2 * math.pi * b):
        return (f"2 pi * {b:g} would be the wavelength of a pair i = d_model/2 = {d // 2}, which does not exist: "
                f"the pairs run i = 0 .. {last}, so the slowest has exponent 2*{last}/{d} (the slip in OSU's "
                f"omega_1 .. omega_d/2, section 2).")
    if near(b ** (2 * last / d)):
        return f"that is 1/omega, in radians per position; a wavelength is 2 pi / omega positions."
    if near(2 * math.pi * b ** (last / d)):
        return f"the exponent is 2i/d_model, not i/d_model: the slowest pair has exponent 2*{last}/{d}."
    if near(2 * math.pi * 10000 ** (2 * last / d) / (10000 / b)):
        return (f"the wavelengths do not shrink in proportion to the base: each is 2 pi * base^(2i/d_model), so "
                f"dividing the base by {10000 / b:g} divides the slowest one by {(10000 / b) ** (2 * last / d):.1f}.")
    return (f"measured {expected:.1f} positions, you predicted {got:.1f}: the slowest pair (i = {last}) has "
            f"omega = {b:g}^(-2*{last}/{d}) and wavelength 2 pi / omega.")


register(Exercise(
    name="predict_slowest_wavelength",
    signature=f"predict_slowest_wavelength() -> float: the wavelength (in positions) of the slowest pair of the "
              f"sinusoidal table with d_model = {BASE_D_MODEL} and base {NEW_BASE:g} instead of 10000 (checked "
              f"against a measurement on the table, within {WAVELENGTH_TOLERANCE:.0%})",
    reference=_predict_wavelength,
    cases=[Case((), f"d_model = {BASE_D_MODEL}, base {NEW_BASE:g}: the period of the last pair's sine column")],
    hint="the last pair is i = d_model/2 - 1; its frequency is base^(-2i/d_model); its wavelength 2 pi / omega.",
    diagnose=_diagnose_wavelength,
    same=_same_wavelength,
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


# -- 4. predict, then measure (section 9): which encodings still work at four times the training length? ----
ENCODING_NAMES = POSITIONAL_ENCODINGS    # the names seqlab.nn.positional builds: one list for the model and the check
WORKS = 0.9                        # "still works": accuracy above 0.9 on sequences of 64 (mean of positions and seeds)


def _accuracies(accuracy_at_64: Any) -> dict[str, float]:
    """Section 9's ``accuracy_at_64``, ``{encoding name: accuracy on sequences of 64 tokens}`` for every encoding."""
    if not isinstance(accuracy_at_64, Mapping):
        raise TypeError(f"expected a dict of accuracies by encoding, got {type(accuracy_at_64).__name__}")
    if set(accuracy_at_64) != set(ENCODING_NAMES):
        raise ValueError(f"expected one accuracy per encoding, {', '.join(ENCODING_NAMES)}; got the keys "
                         f"{', '.join(map(str, accuracy_at_64))}")
    accuracies = {name: float(accuracy_at_64[name]) for name in ENCODING_NAMES}
    if not all(0 <= acc <= 1 for acc in accuracies.values()):
        raise ValueError(f"expected accuracies between 0 and 1, got {accuracies}")
    return accuracies


def _predict_extrapolation(measured: dict[str, float]) -> set[str]:
    return {name for name, acc in measured.items() if acc > WORKS}


def _as_names(got: Any) -> set[str] | None:
    if isinstance(got, str) or not isinstance(got, (set, frozenset, list, tuple)):
        return None
    if not all(isinstance(name, str) for name in got):
        return None
    return {name.lower() for name in got}


def _same_extrapolation(got: Any, expected: set[str]) -> bool:
    return _as_names(got) == expected


_WHY = {
    ("rope", True): "RoPE is relative, yet at length 64 a query meets offsets up to 63, four times the largest offset "
                    "seen in training (15): rotations the model never saw",
    ("sinusoidal", True): "the Transformer paper hoped sinusoids would extrapolate (Vaswani et al. 2017, section 3.5), "
                          "but the model never learned what the vectors of positions 16-63 mean",
    ("learned", True): "the learned rows 16-63 never received a gradient: they are still random",
    ("none", True): "NoPE's position signal is the causal count 1/(i+1), whose values crowd together as i grows",
    ("alibi", False): "ALiBi's only positional signal, a penalty on the offset, is the same at every position, and it "
                      "keeps far keys quiet",
}


def _diagnose_extrapolation(args: tuple, got: Any, expected: set[str]) -> str | None:
    names = _as_names(got)
    if names is None:
        return ("put a set of names in my_extrapolation, e.g. {'sinusoidal', 'rope'} (an empty set() if you expect none); "
                f"the names: {', '.join(ENCODING_NAMES)}.")
    unknown = sorted(names - set(ENCODING_NAMES))
    if unknown:
        return f"unknown name(s) {unknown}: the encodings are {', '.join(ENCODING_NAMES)}."
    (measured,) = args
    wrong = [name for name in ENCODING_NAMES if (name in names) != (name in expected)]
    notes = []
    for name in wrong:
        predicted_works = name in names
        why = _WHY.get((name, predicted_works))
        verdict = "stays above" if not predicted_works else "falls below"
        notes.append(f"{name} {verdict} {WORKS:g} (measured {measured[name]:.2f})" + (f": {why}" if why else ""))
    return "; ".join(notes) + "."


register(Exercise(
    name="predict_extrapolation",
    signature=f"predict_extrapolation() -> set of names: the encodings ({', '.join(ENCODING_NAMES)}) whose accuracy "
              f"on sequences of 64 tokens stays above {WORKS:g} after training on 16 (checked against section 9's "
              f"measurement)",
    reference=_predict_extrapolation,
    cases=[Case((), "previous-token task, trained at length 16, tested at 64: the encodings above 0.9")],
    hint="think about what each encoding gives a position the model never saw in training.",
    diagnose=_diagnose_extrapolation,
    same=_same_extrapolation,
    measured=Measured("accuracy_at_64, each encoding's accuracy on sequences of 64 tokens (mean of the two seeds)",
                      "section 9's training cell", _accuracies),
))
