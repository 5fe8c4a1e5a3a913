"""Notebook 12 — the Transformer block: LayerNorm by hand, the residual sublayer (post- and pre-norm) and the
pre-norm block, each built and then run inside something real (an encoder stack, the trained charlm-gpt)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.exercises._core import Case, Exercise, Measured, randn64, register, tensor_hint, tensors_close
from seqlab.nn.layer_norm import LayerNorm


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, rtol=1e-6, atol=1e-9)


# -- 1. the residual sublayer, post-norm and pre-norm ------------------------------------------------------
def _sublayer_connection(x: Tensor, sublayer: nn.Module, norm: nn.Module, norm_first: bool) -> Tensor:
    if norm_first:
        return x + sublayer(norm(x))          # pre-norm: x + F(LN(x)), the stream itself is never normalised
    return norm(x + sublayer(x))              # post-norm (the paper): LN(x + F(x))


def _diagnose_sublayer(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    x, F, LN, norm_first = args
    with torch.no_grad():
        if norm_first:
            mistakes = [
                (LN(x + F(x)), "that is post-norm, LN(x + F(x)); with norm_first=True it is pre-norm: x + F(LN(x))."),
                (F(LN(x)), "the residual is missing: add x back, x + F(LN(x))."),
                (LN(x) + F(LN(x)), "add the *un*-normalised x: x + F(LN(x)). The residual stream is never "
                                   "normalised in pre-norm; only the sublayer's input is."),
                (LN(x + F(LN(x))), "pre-norm does not normalise the sum: return x + F(LN(x)) as it is."),
            ]
        else:
            mistakes = [
                (x + F(LN(x)), "that is pre-norm, x + F(LN(x)); with norm_first=False it is post-norm: LN(x + F(x))."),
                (LN(F(x)), "the residual is missing: normalise the sum, LN(x + F(x))."),
                (x + LN(F(x)), "normalise the sum, LN(x + F(x)), not only the sublayer's output."),
                (x + F(x), "post-norm normalises the sum: LN(x + F(x))."),
            ]
        for wrong, message in mistakes:
            if _close(got, wrong):
                return message
    return None


def _sublayer_case(seed: int, d: int, norm_first: bool) -> tuple:
    with torch.random.fork_rng(devices=[]):   # seeded, without touching the student's global generator
        torch.manual_seed(seed)
        F = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d)).double()  # an FFN as the sublayer
    LN = LayerNorm(d).double()
    with torch.no_grad():                     # a gamma and beta away from 1 and 0, so that every mistake shows
        LN.weight.copy_(1 + randn64(d, seed=seed + 1) / 2)
        LN.bias.copy_(randn64(d, seed=seed + 2))
    return randn64(2, 3, d, seed=seed + 3) * 3 + 1, F, LN, norm_first


register(Exercise(
    name="sublayer_connection",
    forbidden=("TransformerEncoderLayer", "TransformerDecoderLayer"),
    signature="sublayer_connection(x: Tensor (B, n, d_model), sublayer: module, norm: LayerNorm, "
              "norm_first: bool) -> Tensor (B, n, d_model)",
    reference=_sublayer_connection,
    cases=[Case(_sublayer_case(0, 4, False), "post-norm (norm_first=False), d = 4"),
           Case(_sublayer_case(10, 4, True), "pre-norm (norm_first=True), d = 4"),
           Case(_sublayer_case(20, 8, False), "post-norm, d = 8"),
           Case(_sublayer_case(30, 8, True), "pre-norm, d = 8")],
    hidden=lambda seed: [Case(_sublayer_case(seed, 6, bool(seed % 2)), "d = 6, pre- or post-norm")],
    hint="norm_first=False: norm(x + sublayer(x)); norm_first=True: x + sublayer(norm(x)).",
    diagnose=_diagnose_sublayer,
    same=lambda got, expected: isinstance(got, Tensor) and _close(got.detach(), expected.detach()),
))


# -- 2. build: LayerNorm by hand --------------------------------------------------------------------------------
EPS = 1e-5


def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = EPS) -> Tensor:
    """gamma * (x - mu) / sqrt(sigma^2 + eps) + beta over the last axis, sigma^2 the biased variance (1/d)."""
    mu = x.mean(dim=-1, keepdim=True)                                   # (..., 1): one mean per token
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)                    # biased: divided by d, as torch does
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def _ln_variant(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = EPS, *, unbiased: bool = False,
                use_eps: bool = True, eps_outside: bool = False, axis: int = -1, affine: bool = True,
                shift: bool = True) -> Tensor:
    """The reference with one thing done wrong (the usual mistakes; notebook 12's watch runs them too)."""
    mu = x.mean(dim=axis, keepdim=True)
    var = ((x - mu) ** 2).sum(dim=axis, keepdim=True) / (x.shape[axis] - (1 if unbiased else 0))
    e = eps if use_eps else 0.0
    xhat = (x - mu) / (var.sqrt() + e) if eps_outside else (x - mu) / torch.sqrt(var + e)
    if not affine:
        return xhat
    return gamma * xhat + (beta if shift else 0)


LN_MISTAKES: dict[str, tuple[dict, str]] = {
    "unbiased variance": (dict(unbiased=True), (
        "that divides by d - 1 (the unbiased variance of x.var() and x.std()); LayerNorm uses the biased variance, "
        "((x - mu) ** 2).mean(-1), as torch.nn.LayerNorm does.")),
    "no eps": (dict(use_eps=False), (
        "epsilon is missing: sqrt(var + eps). Without it a token whose features are all equal gives 0/0 = NaN.")),
    "eps outside the root": (dict(eps_outside=True), (
        "add eps inside the square root, sqrt(var + eps), not to the standard deviation (the Annotated "
        "Transformer's form, which does not match torch).")),
    "wrong axis": (dict(axis=-2), (
        "that normalises each feature over the tokens (axis -2, as batch norm does over a batch); LayerNorm "
        "normalises each token over its own features: mean and variance over the last axis, keepdim=True.")),
    "no gain or shift": (dict(affine=False), "gamma and beta are missing: gamma * x_hat + beta."),
    "no shift": (dict(shift=False), "the shift beta is missing: gamma * x_hat + beta."),
}


def _diagnose_ln(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        return ("your result has NaN where LayerNorm gives numbers: a token whose features are all equal has "
                "variance 0, and sqrt(var + eps) keeps the division finite.")
    for change, message in LN_MISTAKES.values():
        if _close(got, _ln_variant(*args, **change)):
            return message
    x, gamma, beta = args[:3]
    if _close(got, _ln_variant(x, beta, gamma, *args[3:])):
        return "gamma and beta are swapped: gamma multiplies, beta is added."
    return None


def _ln_case(seed: int, shape: tuple[int, ...], constant_row: bool = False) -> tuple:
    x = randn64(*shape, seed=seed) * 3 + 2
    if constant_row:
        x[..., 0, :] = 5.0                                               # a token whose features are all equal
    d = shape[-1]
    return x, 1 + randn64(d, seed=seed + 1) / 2, randn64(d, seed=seed + 2)


register(Exercise(
    name="layer_norm",
    hidden=lambda seed: [Case(_ln_case(seed, (2, 3, 7)), "2 x 3 tokens of 7 features")],
    mistakes=tuple(message for _, message in LN_MISTAKES.values()),
    forbidden=("F.layer_norm", "functional.layer_norm", "LayerNorm", "native_layer_norm"),
    signature="layer_norm(x: Tensor (..., d), gamma: (d,), beta: (d,), eps: float = 1e-5) -> Tensor (..., d): "
              "gamma * (x - mu) / sqrt(sigma^2 + eps) + beta, mu and sigma^2 (biased) over each token's d features",
    reference=layer_norm,
    cases=[Case((torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.float64), torch.ones(4, dtype=torch.float64),
                 torch.zeros(4, dtype=torch.float64)), "x = (1, 2, 3, 6), gamma = 1, beta = 0 (section 2's example)"),
           Case(_ln_case(70, (3, 5)), "3 tokens of 5 features, gamma and beta away from 1 and 0"),
           Case(_ln_case(80, (2, 4, 6), constant_row=True),
                "a batch of 2 x 4 tokens of 6 features; the first token of each sequence constant")],
    hint="mu = x.mean(-1, keepdim=True); var = ((x - mu) ** 2).mean(-1, keepdim=True); "
         "gamma * (x - mu) / torch.sqrt(var + eps) + beta.",
    diagnose=_diagnose_ln,
    same=_close,
))


# -- 3. build: the pre-norm block, from the student's attention and LayerNorm ---------------------------------------
def transformer_block(x: Tensor, p: dict[str, Tensor], h: int, mask: Tensor | None, attention: Callable[..., Tensor],
                      norm: Callable[..., Tensor], activation: Callable[[Tensor], Tensor]) -> Tensor:
    """Pre-norm (GPT-2): x + MultiHead(LN_1(x)), then x + FFN(LN_2(x)), FFN(x) = act(x W_1 + b_1) W_2 + b_2.
    ``attention(X, p, h, mask)`` is notebook 10's multi_head_attention, ``norm(x, gamma, beta)`` the layer_norm."""
    x = x + attention(norm(x, p["gamma_1"], p["beta_1"]), p, h, mask)                     # attention sublayer
    hidden = activation(norm(x, p["gamma_2"], p["beta_2"]) @ p["W_1"] + p["b_1"])         # (..., n, d_ff)
    return x + hidden @ p["W_2"] + p["b_2"]                                               # FFN sublayer


def _block_variant(x, p, h, mask, attention, norm, activation, *, kind: str) -> Tensor:
    """The block with one thing done wrong (the usual mistakes; notebook 12's watch runs them too)."""
    ln1 = lambda v: norm(v, p["gamma_1"], p["beta_1"])                 # noqa: E731
    ln2 = lambda v: norm(v, p["gamma_2"], p["beta_2"])                 # noqa: E731
    ffn = lambda v: activation(v @ p["W_1"] + p["b_1"]) @ p["W_2"] + p["b_2"]     # noqa: E731
    att = lambda v: attention(v, p, h, mask)                           # noqa: E731
    if kind == "post-norm":
        x = ln1(x + att(x))
        return ln2(x + ffn(x))
    if kind == "no attention residual":
        x = att(ln1(x))
        return x + ffn(ln2(x))
    if kind == "no FFN residual":
        x = x + att(ln1(x))
        return ffn(ln2(x))
    if kind == "stream normalised":
        x = ln1(x)
        x = x + att(x)
        x = ln2(x)
        return x + ffn(x)
    if kind == "one LayerNorm for both":
        x = x + att(ln1(x))
        return x + ffn(ln1(x))
    if kind == "no activation":
        x = x + att(ln1(x))
        v = ln2(x)
        return x + (v @ p["W_1"] + p["b_1"]) @ p["W_2"] + p["b_2"]
    if kind == "FFN reads the old x":
        y = x + att(ln1(x))
        return y + ffn(ln2(x))
    raise ValueError(kind)


BLOCK_MISTAKES: dict[str, str] = {
    "post-norm": "that is post-norm, LN(x + F(x)); the block here is pre-norm: x + F(LN(x)), for both sublayers.",
    "no attention residual": "the attention sublayer's residual is missing: x = x + attention(LN_1(x), ...).",
    "no FFN residual": "the FFN sublayer's residual is missing: return x + FFN(LN_2(x)).",
    "stream normalised": ("the residual stream is normalised: in pre-norm only the sublayer's *input* is, "
                          "x + F(LN(x)); x itself passes on unnormalised."),
    "one LayerNorm for both": ("both sublayers use LN_1's gamma_1 and beta_1; the FFN has its own LayerNorm, "
                               "gamma_2 and beta_2."),
    "no activation": "the FFN's activation is missing: activation(x W_1 + b_1) W_2 + b_2.",
    "FFN reads the old x": ("the FFN sublayer reads the block's input; it reads the stream *after* the attention "
                            "sublayer: x = x + attention(...); then x + FFN(LN_2(x))."),
}


def _diagnose_block(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    for kind, message in BLOCK_MISTAKES.items():
        if _close(got, _block_variant(*args, kind=kind)):
            return message
    return None


def _block_params(d: int, d_ff: int, seed: int) -> dict[str, Tensor]:
    from seqlab.exercises.nb10_multihead import ATTENTION_KEYS

    shapes = {**{k: (d, d) if k[0] == "W" else (d,) for k in ATTENTION_KEYS},
              "gamma_1": (d,), "beta_1": (d,), "gamma_2": (d,), "beta_2": (d,),
              "W_1": (d, d_ff), "b_1": (d_ff,), "W_2": (d_ff, d), "b_2": (d,)}
    p = {}
    for i, (key, shape) in enumerate(shapes.items()):
        r = randn64(*shape, seed=seed + i)
        p[key] = (1 + r / 2 if key.startswith("gamma") else r / math.sqrt(shape[0]) if len(shape) == 2 else r / 2)
    return p


def _block_case(seed: int, batch: tuple[int, ...], n: int, d: int, h: int, activation: Callable) -> tuple:
    from seqlab.exercises.nb10_multihead import _causal, multi_head_attention

    return (randn64(*batch, n, d, seed=seed) * 2 + 1, _block_params(d, 4 * d, seed + 1), h, _causal(n),
            multi_head_attention, layer_norm, activation)


register(Exercise(
    name="transformer_block",
    mistakes=tuple(BLOCK_MISTAKES.values()),
    forbidden=("TransformerEncoderLayer", "TransformerDecoderLayer", "MultiheadAttention", "LayerNorm"),
    signature="transformer_block(x (..., n, d_model), p: dict (notebook 10's attention weights, gamma_1, beta_1, "
              "gamma_2, beta_2, W_1, b_1, W_2, b_2), h, mask, attention, norm, activation) -> (..., n, d_model): "
              "the pre-norm block x + MultiHead(LN_1(x)), then x + FFN(LN_2(x))",
    reference=transformer_block,
    cases=[Case(_block_case(90, (), 4, 6, 2, torch.relu), "4 tokens, d_model = 6, h = 2, ReLU"),
           Case(_block_case(120, (2,), 5, 8, 4, torch.nn.functional.gelu),
                "2 sequences of 5 tokens, d_model = 8, h = 4, GELU (charlm-gpt's)")],
    hidden=lambda seed: [Case(_block_case(seed, (3,), 3, 4, 2, torch.relu),
                               "3 sequences of 3 tokens, d_model = 4, h = 2")],
    hint="x = x + attention(norm(x, gamma_1, beta_1), p, h, mask); then "
         "x + activation(norm(x, gamma_2, beta_2) @ W_1 + b_1) @ W_2 + b_2.",
    diagnose=_diagnose_block,
    same=_close,
))


# -- 4. predict, then measure: which of section 5's four runs learn the reversal in 200 steps ----------------------
RUNS = ("post-norm", "post-norm, 50 warm-up steps", "pre-norm", "post-norm at 1e-3")
LEARNED_BELOW = 0.5           # nats, the mean loss of the last 25 steps; guessing is ln 10 = 2.30


def _parse_ends(value: Any) -> dict[str, float]:
    if not isinstance(value, dict) or set(value) != set(RUNS):
        raise TypeError(f"expected a dict of the four runs' final losses, keyed {list(RUNS)}")
    ends = {name: float(loss) for name, loss in value.items()}
    if not all(math.isfinite(loss) and loss >= 0 for loss in ends.values()):
        raise ValueError("the final losses should be finite numbers >= 0")
    return ends


def _learned(ends: dict[str, float]) -> set[str]:
    return {name for name in RUNS if ends[name] < LEARNED_BELOW}


def _as_runs(got: Any) -> set[str] | None:
    if isinstance(got, str) or not isinstance(got, (set, frozenset, list, tuple)):
        return None
    return set(got) if all(isinstance(name, str) for name in got) else None


def _diagnose_learned(args: tuple, got: Any, expected: set[str]) -> str | None:
    ends = args[0]
    runs = _as_runs(got)
    if runs is None:
        return f"put a set of run names in my_prediction, e.g. {{'pre-norm'}}; the runs are {list(RUNS)}."
    unknown = sorted(runs - set(RUNS))
    if unknown:
        return f"unknown run names {unknown}: choose among {list(RUNS)}."
    told = "; ".join(f"{name}: {ends[name]:.2f}" for name in RUNS)
    advice = []
    if "post-norm" in runs - expected:
        advice.append("post-norm from step 1 at 5e-3 stays near guessing (ln 10 = 2.30): at initialisation its top "
                      "layers get the largest gradients (the left plot above), and a large rate makes them jump")
    missed = sorted(expected - runs)
    if missed:
        advice.append(f"{', '.join(missed)} learned: a warm-up, pre-norm's unnormalised stream, or a five times "
                      "smaller rate each let training start")
    return (f"measured mean loss of the last 25 steps (below {LEARNED_BELOW} counts as learned) -- {told}. "
            + "; ".join(advice) + ".")


register(Exercise(
    name="predict_learns",
    signature="a set of run names: which of section 5's four runs (post-norm, post-norm with 50 warm-up steps, "
              "pre-norm, all at 5e-3; post-norm at 1e-3) end 200 steps below 0.5 nats, i.e. learn the reversal",
    reference=_learned,
    cases=[Case((), "the four runs of section 5, 200 steps each")],
    hint="think of where the gradients were largest at initialisation, and what a large first step does there.",
    diagnose=_diagnose_learned,
    same=lambda got, expected: _as_runs(got) == expected,
    measured=Measured("ends, the dict of the four runs' mean losses over their last 25 steps",
                      "section 5's cell that trains the four runs", _parse_ends),
))


# -- the usual mistakes as functions, for the watch cells ---------------------------------------------------------
def ln_with_mistake(mistake: str) -> Callable[..., Tensor]:
    """The reference layer_norm with one of LN_MISTAKES made."""
    if mistake not in LN_MISTAKES:
        raise KeyError(f"no catalogued mistake {mistake!r}; known: {sorted(LN_MISTAKES)}")
    change = LN_MISTAKES[mistake][0]

    def wrong(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = EPS) -> Tensor:
        return _ln_variant(x, gamma, beta, eps, **change)

    wrong.__name__ = f"layer_norm ({mistake})"
    return wrong


def block_with_mistake(mistake: str) -> Callable[..., Tensor]:
    """The reference transformer_block with one of BLOCK_MISTAKES made."""
    if mistake not in BLOCK_MISTAKES:
        raise KeyError(f"no catalogued mistake {mistake!r}; known: {sorted(BLOCK_MISTAKES)}")

    def wrong(x, p, h, mask, attention, norm, activation):
        return _block_variant(x, p, h, mask, attention, norm, activation, kind=mistake)

    wrong.__name__ = f"transformer_block ({mistake})"
    return wrong
