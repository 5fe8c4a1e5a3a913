"""Notebook 14 — a GPT-style language model and sampling from it: the GPT's forward from its pieces (watched
writing with charlm-gpt's weights and trained live, :class:`YourGPT`) and top-k filtering of the logits."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, Measured, first_difference, randn64, register, tensor_hint,
                                   tensors_close)
from seqlab.exercises.pieces import reference_layer_norm
from seqlab.models.gpt import GPT, GPTConfig

NEG_INF = float("-inf")


# -- 1. the GPT's forward, from its pieces ------------------------------------------------------------------
def gpt_weights(model: GPT) -> dict[str, Any]:
    """A :class:`GPT`'s weights in the lecture's symbols (the tensors themselves, not copies): ``E`` (V, d) the
    token embedding, which is also the read-out; ``P`` (max_len, d) the learned positions; ``blocks`` the N
    pre-norm blocks (each a TransformerEncoderLayer: its weights, for the block function); ``gamma``, ``beta``
    (d,) the final LayerNorm; ``b`` (V,) the read-out's bias."""
    if model.config.positional != "learned" or not model.config.norm_first or not model.config.tie_weights:
        raise ValueError("gpt_weights reads a GPT with learned positions, pre-norm blocks and a tied read-out")
    return {"E": model.embed.weight, "P": model.positional.weight, "blocks": list(model.blocks),
            "gamma": model.norm.weight, "beta": model.norm.bias, "b": model.head.bias}


def _gpt_forward(ids: Tensor, W: dict[str, Any], block: Callable, layer_norm: Callable) -> Tensor:
    T = ids.shape[1]
    X = W["E"][ids] + W["P"][:T]                                    # (B, T, d): X^(0) = E[x] + P
    mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()   # True = may attend: j <= i
    for layer in W["blocks"]:
        X = block(X, layer, mask)                                   # N pre-norm blocks
    X = layer_norm(X, W["gamma"], W["beta"])                        # the final LayerNorm
    return X @ W["E"].T + W["b"]                                    # (B, T, V): tied read-out, E^T


def _case_block(X: Tensor, layer: Any, mask: Tensor) -> Tensor:
    """The block the checker hands over: seqlab's pre-norm layer, with the mask in torch's meaning."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != (X.shape[1], X.shape[1]):
        got = f"{mask.dtype} tensor of shape {tuple(mask.shape)}" if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"block(X, layer, mask) takes a (T, T) = {(X.shape[1],) * 2} bool mask, True = may attend; "
                         f"got a {got}")
    return layer(X, src_mask=~mask)


def _gpt_case(seed: int, B: int, T: int, V: int = 11, max_len: int = 9, d: int = 8, N: int = 2) -> tuple:
    with torch.random.fork_rng(devices=[]):   # seeded, without touching the student's global generator
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=V, max_len=max_len, d_model=d, num_layers=N, nhead=2)).double()
        with torch.no_grad():                 # every weight away from GPT-2's small start, so every slip shows
            for name, p in model.named_parameters():
                p.copy_((1 + torch.rand_like(p)) if name.endswith("norm.weight") else torch.randn_like(p) * 0.5)
        ids = torch.randint(0, V, (B, T))
    W = {k: (v.detach() if isinstance(v, Tensor) else v) for k, v in gpt_weights(model).items()}
    return ids, W, _case_block, reference_layer_norm


def _diagnose_gpt(args: tuple, got: Any, expected: Tensor) -> str | None:
    ids, W, block, layer_norm = args
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if torch.isnan(got).any():
        return ("NaN in the logits: some position may attend to nothing. The mask is True where a query may read "
                "a key, j <= i, the diagonal included: torch.ones(T, T, dtype=torch.bool).tril().")
    T, d = ids.shape[1], W["E"].shape[1]
    lower = torch.ones(T, T, dtype=torch.bool).tril()

    def variant(X0: Tensor | None = None, mask: Tensor = lower, final_norm: bool = True, bias: bool = True,
                chain: bool = True) -> Tensor:
        X = W["E"][ids] + W["P"][:T] if X0 is None else X0
        start = X
        for layer in W["blocks"]:
            X = block(X if chain else start, layer, mask)
        if final_norm:
            X = layer_norm(X, W["gamma"], W["beta"])
        return X @ W["E"].T + (W["b"] if bias else 0)

    mistakes = [
        (lambda: variant(X0=W["E"][ids]), "the positions are not added: X = E[ids] + P[:T] (without P the blocks "
                                          "cannot tell one order of the tokens from another)."),
        (lambda: variant(X0=W["E"][ids] * math.sqrt(d) + W["P"][:T]),
         "the embedding is multiplied by sqrt(d_model), notebook 13's habit; this GPT adds E[ids] + P[:T] as they are."),
        (lambda: variant(final_norm=False), "the final LayerNorm is missing: in pre-norm the stream itself is never "
                                            "normalised, so LN(X; gamma, beta) comes after the last block."),
        (lambda: variant(mask=torch.ones(T, T, dtype=torch.bool)),
         "no causal mask: every position reads the whole window, the future included; pass the lower triangle, "
         "torch.ones(T, T, dtype=torch.bool).tril() (True = may attend)."),
        (lambda: variant(mask=lower.T), "the mask is the upper triangle: position i reads the positions after it; "
                                        "use the lower one, .tril() (True where j <= i)."),
        (lambda: variant(mask=lower.tril(-1)), "the diagonal is cut from the mask: position i reads itself too "
                                               "(j <= i), and the first position has nothing else to read; .tril()."),
        (lambda: variant(mask=~lower), "that is torch's meaning of a bool mask (True = may not attend); block takes "
                                       "True = may attend: the lower triangle, .tril()."),
        (lambda: variant(bias=False), "the read-out's bias is missing: logits = LN(X) E^T + b."),
        (lambda: variant(chain=False), "each block reads the embeddings: feed each block the previous block's "
                                       "output, X = block(X, layer, mask)."),
        (lambda: variant(X0=W["E"][ids] + W["P"][:T].flip(0)), "the positions run backwards: position t adds P[t], "
                                                              "the first T rows of P in order, P[:T]."),
    ]
    with torch.no_grad():
        for wrong, message in mistakes:
            try:
                if tensors_close(got, wrong(), rtol=1e-6, atol=1e-9):
                    return message
            except (RuntimeError, ValueError, IndexError):
                continue
        if torch.allclose(got.exp().sum(-1), torch.ones((), dtype=got.dtype), atol=1e-6) or \
                torch.allclose(got.sum(-1), torch.ones((), dtype=got.dtype), atol=1e-6):
            return "you returned (log-)probabilities; return the logits, LN(X) E^T + b, before any softmax."
        # the read-out: is it affine in the final stream, but through another matrix than E (untied)?
        X = W["E"][ids] + W["P"][:T]
        for layer in W["blocks"]:
            X = block(X, layer, lower)
        H = layer_norm(X, W["gamma"], W["beta"]).reshape(-1, d)     # (B T, d)
        H1 = torch.cat([H, torch.ones(len(H), 1, dtype=H.dtype)], dim=1)
        if len(H1) > H1.shape[1]:
            solution = torch.linalg.lstsq(H1, got.reshape(len(H), -1).to(H.dtype)).solution    # (d + 1, V)
            fitted = H1 @ solution
            if torch.allclose(fitted, got.reshape(len(H), -1).to(H.dtype), atol=1e-6) and \
                    not torch.allclose(solution[:d].T, W["E"], atol=1e-4):
                return ("the read-out is a linear map of the final stream, but not through the embedding: tie it, "
                        "logits = LN(X) E^T + b with the same E that embedded the tokens (a new Linear layer is "
                        "untied, and untrained).")
    return first_difference(got, expected) + "."


register(Exercise(
    name="gpt_forward",
    hidden=lambda seed: [Case(_gpt_case(seed, B=2, T=5), "2 windows of 5 tokens")],
    forbidden=("GPT", "ListingGPT", "gpt_listing", "YourGPT"),
    signature="gpt_forward(ids: (B, T) long, W: dict of E (V, d), P (max_len, d), blocks (N layers), gamma, beta (d,), "
              "b (V,), block: (X, layer, mask (T, T) bool, True = may attend) -> X, layer_norm: (X, gamma, beta) -> "
              "LN(X)) -> logits (B, T, V)",
    reference=_gpt_forward,
    cases=[Case(_gpt_case(0, B=2, T=7), "2 windows of 7 tokens, 2 blocks, V = 11, d = 8, a context of 9"),
           Case(_gpt_case(1, B=1, T=9), "one window as long as the context, 9 tokens"),
           Case(_gpt_case(2, B=3, T=1), "3 windows of a single token",
                hint="a window of one token: X = E[ids] + P[:1], the mask is 1 x 1 (True).")],
    hint="X = W['E'][ids] + W['P'][:T]; mask = torch.ones(T, T, dtype=torch.bool).tril(); X = block(X, layer, mask) "
         "for each layer in W['blocks']; return layer_norm(X, W['gamma'], W['beta']) @ W['E'].T + W['b'].",
    diagnose=_diagnose_gpt,
    same=lambda got, expected: isinstance(got, Tensor) and tensors_close(got.detach(), expected, rtol=1e-6, atol=1e-9),
))


class YourGPT(GPT):
    """A :class:`GPT` whose forward is ``gpt_forward(ids, gpt_weights(self), block, layer_norm)``: a written
    ``gpt_forward`` (the student's) on the model's own parameters, so that ``load_state_dict``, ``train`` and
    ``generate`` (without the KV cache, which ``gpt_forward`` does not take) work as on the library's GPT."""

    def __init__(self, config: GPTConfig, gpt_forward: Callable, block: Callable, layer_norm: Callable):
        super().__init__(config)
        self.gpt_forward, self.block, self.layer_norm = gpt_forward, block, layer_norm

    def forward(self, ids: Tensor, *, cache: Any = None, need_weights: bool = False) -> Tensor:
        if cache is not None or need_weights:
            raise ValueError("YourGPT runs gpt_forward, which takes neither a KV cache nor returns attention weights")
        self._check(ids, None)
        return self.gpt_forward(ids, gpt_weights(self), self.block, self.layer_norm)

    def generate(self, prompt: Tensor, n: int, **kwargs: Any) -> Tensor:
        return super().generate(prompt, n, **{**kwargs, "use_cache": False})


# -- 2. predict, then measure: how often the real next character lies outside the top 5 --------------------
TOP_5_TOLERANCE = 0.05    # five percentage points


def _share(value: Any) -> float:
    """A measured share (0..1) as a float, for :attr:`Measured.parse`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected one number, the share, got {type(value).__name__}")
    if not 0 <= value <= 1:                                   # also refuses NaN
        raise ValueError(f"expected a share between 0 and 1, got {value}")
    return float(value)


def _predict_outside_top_5(measured: float) -> float:
    return measured                                           # the right prediction is the measurement itself


def _diagnose_outside_top_5(args: tuple, got: Any, expected: float) -> str | None:
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return "put one share in my_prediction, a number between 0 and 1 (0.5 for 50%)."
    if got > 1:
        return f"give a share between 0 and 1 (0.25 for 25%), not a percentage: you wrote {got}."
    told = f"measured {expected:.1%}, you predicted {got:.1%}"
    if got < expected:
        return (f"{told}: the model is far from sure of each next character (its validation loss, 1.54 nats, is the "
                f"entropy of about {math.exp(1.54):.1f} equally likely characters), so the real one often lies "
                f"outside a short list.")
    return (f"{told}: most characters are easy once a word has begun, and there the real one is nearly always "
            f"among the model's first few guesses.")


register(Exercise(
    name="predict_outside_top_5",
    signature="a share between 0 and 1: your prediction of how often the character that really comes next lies "
              "outside charlm-gpt's 5 likeliest (checked against the notebook's measurement, +-0.05)",
    reference=_predict_outside_top_5,
    cases=[Case((), "charlm-gpt on 40,960 characters of validation text: the real next character outside its top 5")],
    hint="think of the model's loss, 1.54 nats: the spread of about 4.7 equally likely characters, on average.",
    diagnose=_diagnose_outside_top_5,
    same=lambda got, expected: (not isinstance(got, bool) and isinstance(got, (int, float))
                                and abs(got - expected) <= TOP_5_TOLERANCE),
    measured=Measured("cut[5][1], the share of characters outside the top 5", "section 3's cell that prints the "
                      "top-k table", _share),
))


# -- 3. top-k filtering of the next-token logits -----------------------------------------------------------
def _top_k_filter(logits: Tensor, k: int) -> Tensor:
    if k >= logits.shape[-1]:
        return logits.clone()                                        # nothing to cut
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]           # (..., 1) the k-th largest of each row
    return logits.masked_fill(logits < kth_largest, NEG_INF)        # ties with the k-th are kept


def _same_filtered(got: Any, expected: Tensor) -> bool:
    return (isinstance(got, Tensor) and got.shape == expected.shape and got.is_floating_point()
            and bool(torch.equal(got.to(expected.dtype), expected)))


def _diagnose_top_k(args: tuple, got: Any, expected: Tensor) -> str | None:
    logits, k = args
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if not got.is_floating_point():
        return f"return logits (floating point, with -inf where cut), not a {got.dtype} tensor."
    V = logits.shape[-1]
    if k >= V:
        return f"k = {k} is at least the vocabulary size V = {V}: there is nothing to cut, return the logits unchanged."
    finite = torch.isfinite(got)
    if bool(finite.all()) and torch.allclose(got.sum(-1), torch.ones((), dtype=got.dtype), atol=1e-6):
        return ("you returned probabilities; return the *logits*, with -inf where a token is cut "
                "(the softmax that follows turns -inf into a probability of exactly 0).")
    if torch.allclose(got.exp().sum(-1), torch.ones((), dtype=got.dtype), atol=1e-6):
        return ("you returned log-probabilities (a log_softmax); return the filtered logits themselves, "
                "the kept ones unchanged and the others -inf.")
    cut = ~torch.isfinite(expected)
    if bool(finite.all()):
        if torch.equal(got, logits.to(got.dtype)):
            return f"nothing was cut: set every logit below the k-th largest of its row (k = {k}) to -inf."
        if bool((got[cut] == 0).all()):
            return ("you set the cut logits to 0, but 0 is an ordinary logit (exp(0) = 1 before normalising): "
                    "set them to -inf, float('-inf').")
        if bool((got[cut] <= -1e3).all()):
            return ("a large negative number still leaves a tiny probability; set the cut logits to -inf exactly, "
                    "so that they get probability 0.")
        return "the logits to cut must become -inf (float('-inf')): all but the k largest of each row."
    kept_got, kept_expected = finite.sum(-1), torch.isfinite(expected).sum(-1)
    kth = logits.topk(k, dim=-1).values[..., -1:]
    if bool((kept_got < kept_expected).any()) and bool(((logits == kth).sum(-1) > 1).any()):
        return ("a tie: keep every logit equal to the k-th largest (compare with the k-th value: logits < kth "
                "-> -inf), so a tie may keep more than k; which of the tied ones topk's indices pick is arbitrary.")
    kth_smallest = logits.topk(k, dim=-1, largest=False).values[..., -1:]
    if torch.equal(finite, logits <= kth_smallest):
        return "you kept the k *smallest* logits; keep the k largest (topk gives the largest by default)."
    if logits.dim() > 1 and torch.equal(finite, logits >= logits.flatten().topk(k).values[-1]):
        return ("you kept the k largest of the whole tensor; keep them in each row (dim=-1): every context "
                "has its own next-token distribution.")
    if int((kept_got - kept_expected).abs().max()) == 1:
        kept = int(kept_got.max())
        return (f"you kept {kept} logit{'s' * (kept != 1)} in a row instead of k = {k}: an off-by-one in the "
                f"k-th value (topk(k).values[..., -1] is the k-th largest).")
    if not torch.equal(got[finite], logits[finite]):
        return "the logits you keep must stay as they are: change only the cut ones to -inf."
    return first_difference(got.nan_to_num(neginf=-1e30), expected.nan_to_num(neginf=-1e30)) + "."


register(Exercise(
    name="top_k_filter",
    signature="top_k_filter(logits: Tensor (..., V), k: int) -> Tensor (..., V): the logits, with all but the k "
              "largest of each row set to -inf",
    reference=_top_k_filter,
    cases=[Case((torch.tensor([2.0, -1.0, 0.5, 3.0, 0.0]), 2), "V = 5, keep the 2 largest"),
           Case((randn64(3, 8, seed=0) * 2, 3), "a batch of 3 rows, V = 8, k = 3: each row on its own"),
           Case((torch.tensor([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0]]), 1),
                "ties: two logits equal the largest in row 0, all four in row 1"),
           Case((torch.tensor([0.3, -0.2, 1.5]), 3), "k = V: nothing to cut"),
           Case((torch.tensor([0.3, -0.2, 1.5]), 10), "k = 10 > V = 3: nothing to cut either",
                hint="k larger than the vocabulary leaves nothing to cut: return the logits unchanged "
                     "(nanoGPT clamps k to V the same way).")],
    hidden=lambda seed: [Case((randn64(2, 9, seed=seed) * 2, 4), "2 rows, V = 9, k = 4")],
    hint="kth = logits.topk(k, dim=-1).values[..., -1:]; return logits.masked_fill(logits < kth, float('-inf')) "
         "(and the logits unchanged when k >= V).",
    diagnose=_diagnose_top_k,
    same=_same_filtered,
))
