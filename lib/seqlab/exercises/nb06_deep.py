"""Notebook 06 — deep and bidirectional RNNs, belief monitoring: four exercises.

1. ``filter_step``: one step of HMM filtering, ``normalise(B[:, e] * (A.T @ belief))``. The
   checker recomputes the step with the usual mistakes (no normalisation, A instead of A^T,
   the evidence applied before the transition, a missing part) and names the one it finds.
2. ``final_states``: read each sequence's forward and backward final states out of a padded
   bidirectional output (what ``h_n`` holds, and what a many-to-one read-out needs); the checker
   recognises a pad step read as the last one, a backward state taken where that pass starts,
   swapped halves and h_n's stacked layout.
3. ``bidirectional``: combine a forward and a backward pass over a padded batch into the
   bidirectional output; the checker recognises a backward pass that reads the padding, outputs
   not flipped back, the directions in the wrong order, and the wrong concatenation axis.
4. ``predict_error_ratio``: predict, then measure -- how many times as many gaps the left-to-right
   tagger gets wrong as the bidirectional one (the run is :mod:`seqlab.experiments.word_boundaries`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, register
from seqlab.experiments.word_boundaries import measure_error_ratio

# --------------------------------------------------------------------------------------------
# Exercise 1: one step of belief monitoring
# --------------------------------------------------------------------------------------------


def _filter_step(belief: np.ndarray, A: np.ndarray, B: np.ndarray, evidence: int) -> np.ndarray:
    """Reference: f_t = B[:, e_t] * (A^T f_{t-1}), normalised to sum to 1."""
    unnormalised = B[:, evidence] * (A.T @ belief)
    return unnormalised / unnormalised.sum()


def _as_vector(got: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(got.detach() if isinstance(got, Tensor) else got, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return arr


def _same_vector(got: Any, expected: np.ndarray) -> bool:
    arr = _as_vector(got)
    return arr is not None and arr.shape == expected.shape and bool(np.allclose(arr, expected, atol=1e-8))


def _normalise(v: np.ndarray) -> np.ndarray:
    return v / v.sum()


_FILTER_MISTAKES: list[tuple[Callable[..., np.ndarray], str]] = [
    (lambda f, A, B, e: B[:, e] * (A.T @ f),
     "the numbers are proportional to the right belief but do not sum to 1: divide by their sum (normalise)."),
    (lambda f, A, B, e: _normalise(B[:, e] * (A @ f)),
     "you used A instead of A^T. A[i, j] = P(X_t = j | X_{t-1} = i), so the predicted belief is "
     "sum_i A[i, j] f[i] = (A^T f)[j] (or f @ A)."),
    (lambda f, A, B, e: B[:, e] * (A @ f),
     "two things: use A^T (A[i, j] = P(X_t = j | X_{t-1} = i)) and normalise the result to sum to 1."),
    (lambda f, A, B, e: _normalise(A.T @ (B[:, e] * f)),
     "the evidence was applied before the transition. First predict (A^T f_{t-1}: where the state moves "
     "overnight), then weigh by B[:, e_t], the likelihood of today's evidence in each state."),
    (lambda f, A, B, e: _normalise(B[:, e] * f),
     "the transition is missing: before weighing by the evidence, move the belief one step with A^T f_{t-1}."),
    (lambda f, A, B, e: _normalise(A.T @ f),
     "the evidence is missing: multiply the predicted belief element-wise by B[:, e_t]."),
    (lambda f, A, B, e: _normalise(B[e, :] * (A.T @ f)) if B.shape[0] == B.shape[1] else np.full(len(f), np.nan),
     "you took a row of B; the likelihoods of observation e in every state are the column B[:, e]."),
    (lambda f, A, B, e: _normalise(B @ (A.T @ f)) if B.shape[0] == B.shape[1] else np.full(len(f), np.nan),
     "multiply element-wise by the column B[:, e_t] (the likelihood of the one observation made), not by all of B."),
]


def _diagnose_filter(args: tuple, got: Any, expected: np.ndarray) -> str | None:
    belief, A, B, evidence = args
    arr = _as_vector(got)
    if arr is None or arr.shape != expected.shape:
        return f"return a vector of {len(expected)} probabilities, one per state (got {type(got).__name__}" + \
            (f" of shape {arr.shape})." if arr is not None else ").")
    for mistake, hint in _FILTER_MISTAKES:
        with np.errstate(all="ignore"):
            candidate = mistake(belief, A, B, evidence)
        if np.all(np.isfinite(candidate)) and np.allclose(arr, candidate, atol=1e-8):
            return hint
    return None


# Umbrella world: state 0 = rain, 1 = no rain; observation 0 = umbrella, 1 = none.
_UMBRELLA_A = np.array([[0.7, 0.3], [0.3, 0.7]])
_UMBRELLA_B = np.array([[0.9, 0.1], [0.2, 0.8]])
_SKEWED_A = np.array([[0.9, 0.1], [0.4, 0.6]])                      # not symmetric: A and A^T differ
_THREE_A = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
_THREE_B = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.3, 0.6]])

def _secret_filter_case(seed: int) -> list[Case]:
    """Four hidden states, two observations: a belief and rows of A and B drawn from an instructor's secret seed."""
    rng = np.random.default_rng(seed)

    def stochastic(n: int, k: int) -> np.ndarray:          # n rows of k probabilities, each row summing to 1
        m = rng.uniform(0.1, 1.0, (n, k))
        return m / m.sum(axis=1, keepdims=True)
    return [Case((stochastic(1, 4)[0], stochastic(4, 4), stochastic(4, 2), seed % 2), "four states, two observations")]


register(Exercise(
    name="filter_step",
    mistakes=tuple(hint for _, hint in _FILTER_MISTAKES),
    signature="filter_step(belief: np.ndarray (S,), A: (S, S), B: (S, K), evidence: int) -> np.ndarray (S,), "
              "the new belief P(X_t | e_1..e_t)",
    reference=_filter_step,
    cases=[
        Case((np.array([0.5, 0.5]), _UMBRELLA_A, _UMBRELLA_B, 0), "umbrella world, day 1: an umbrella is seen"),
        Case((np.array([0.818181818, 0.181818182]), _UMBRELLA_A, _UMBRELLA_B, 0), "umbrella world, day 2"),
        Case((np.array([0.8, 0.2]), _SKEWED_A, _UMBRELLA_B, 1), "a transition matrix that is not symmetric"),
        Case((np.array([0.2, 0.5, 0.3]), _THREE_A, _THREE_B, 2), "three states, three observations"),
        Case((np.array([0.6, 0.3, 0.1]), _THREE_A, np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]), 1),
             "three states, two observations"),
    ],
    hidden=_secret_filter_case,
    hint="predict with the transition (A.T @ belief), weigh by the column B[:, evidence], then normalise.",
    diagnose=_diagnose_filter,
    same=_same_vector,
))

# --------------------------------------------------------------------------------------------
# Exercise 2: the final states of a padded bidirectional batch, read from its output
# --------------------------------------------------------------------------------------------


def _final_states(output: Tensor, lengths: Tensor) -> Tensor:
    """Reference: for each sequence b, [forward state at its last real step ; backward state at step 0]."""
    H = output.shape[-1] // 2
    batch = torch.arange(output.shape[0])
    forward_last = output[batch, lengths - 1, :H]                  # (B, H): the forward pass ends at t = n_b - 1
    backward_last = output[:, 0, H:]                               # (B, H): the backward pass ends at t = 0
    return torch.cat([forward_last, backward_last], dim=-1)        # (B, 2H) = cat(h_n[-2], h_n[-1])


def _diagnose_final_states(args: tuple, got: Any, expected: Tensor) -> str | None:
    output, lengths = args
    B, T, F = output.shape
    H = F // 2
    if not isinstance(got, Tensor):
        return f"return a tensor of shape (B, 2H) = {tuple(expected.shape)}, not a {type(got).__name__}."
    if got.shape == (2, B, H):
        return ("that is h_n's layout, one row per direction; the read-out wants them side by side: "
                "torch.cat([forward, backward], dim=-1), shape (B, 2H).")
    if got.shape != expected.shape:
        return f"the result should have shape (B, 2H) = {tuple(expected.shape)}; got {tuple(got.shape)}."
    batch = torch.arange(B)
    last_real = output[batch, lengths - 1]                         # (B, 2H)
    fwd_ok = torch.allclose(got[:, :H].float(), expected[:, :H])
    bwd_ok = torch.allclose(got[:, H:].float(), expected[:, H:])
    if torch.allclose(got.float(), torch.cat([expected[:, H:], expected[:, :H]], dim=-1)):
        return "the halves are swapped: the forward direction's features come first, output[..., :H]."
    if torch.allclose(got[:, :H].float(), output[:, -1, :H]) and not fwd_ok:
        also = "" if bwd_ok else "; and the backward pass ends at t = 0, output[:, 0, H:]"
        return (f"output[:, -1] is a pad step for every sequence shorter than T = {T} (lengths {lengths.tolist()}): "
                f"take the forward state at each sequence's own last step, lengths[b] - 1{also}.")
    if fwd_ok and torch.allclose(got[:, H:].float(), last_real[:, H:]):
        return ("the backward half is its state at the last real step, where the backward pass *starts* (it has read "
                "one element); it ends, having read the whole sequence, at t = 0: output[:, 0, H:].")
    if fwd_ok and torch.allclose(got[:, H:].float(), output[:, -1, H:]):
        return "the backward pass ends at t = 0, not at the last (padded) step: take output[:, 0, H:]."
    if bwd_ok and not fwd_ok:
        return "the backward half is right; the forward state sits at t = lengths[b] - 1 of sequence b."
    if fwd_ok and not bwd_ok:
        return "the forward half is right; the backward state that has read everything sits at t = 0."
    return None


def _padded_output(lengths: list[int], hidden: int, seed: int) -> tuple[Tensor, Tensor]:
    """A padded bidirectional output (B, T, 2H): random numbers at real steps, zeros at pad steps."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    output = torch.randn(len(lengths), T, 2 * hidden, generator=g)
    for b, n in enumerate(lengths):
        output[b, n:] = 0.0                                          # what pad_packed_sequence leaves there
    return output, torch.tensor(lengths)


register(Exercise(
    name="final_states",
    signature="final_states(output: Tensor (B, T, 2H), lengths: Tensor (B,)) -> Tensor (B, 2H): each sequence's "
              "[forward final state ; backward final state], read from a padded bidirectional output",
    reference=_final_states,
    cases=[
        Case(_padded_output([5, 3, 1], 2, 0), "a padded batch of lengths 5, 3, 1 (H = 2)"),
        Case(_padded_output([2, 6], 3, 1), "the first sequence is the short one (H = 3)"),
        Case(_padded_output([4, 4, 4], 1, 2), "no padding at all (H = 1)"),
    ],
    hidden=lambda seed: [Case(_padded_output([3, 6, 2, 4], 2, seed), "a padded batch of lengths 3, 6, 2, 4 (H = 2)")],
    hint="forward: output[b, lengths[b] - 1, :H] (its last real step); backward: output[b, 0, H:] (it ran "
         "right to left); concatenate them along the features.",
    diagnose=_diagnose_final_states,
    same=lambda got, expected: isinstance(got, Tensor) and got.shape == expected.shape
    and bool(torch.allclose(got.detach().float(), expected)),
))

# --------------------------------------------------------------------------------------------
# Exercise 3: a bidirectional layer from two one-directional passes
# --------------------------------------------------------------------------------------------


def _reverse_within(xs: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence b of xs (T, B, F) within its first lengths[b] steps; padding stays put."""
    out = xs.clone()
    for b, n in enumerate(lengths.tolist()):
        out[:n, b] = xs[:n, b].flip(0)
    return out


def _bidirectional(xs: Tensor, lengths: Tensor, forward_rnn: Callable[[Tensor], Tensor],
                   backward_rnn: Callable[[Tensor], Tensor]) -> Tensor:
    """Reference: [forward pass ; backward pass read from each sequence's own last element]."""
    out_f = forward_rnn(xs)                                        # (T, B, H)
    out_b = _reverse_within(backward_rnn(_reverse_within(xs, lengths)), lengths)
    out = torch.cat([out_f, out_b], dim=-1)                        # (T, B, 2H)
    return out * _valid(lengths, xs.shape[0]).unsqueeze(-1)        # padded steps: zero, as torch gives


def _valid(lengths: Tensor, steps: int) -> Tensor:
    return torch.arange(steps)[:, None] < lengths[None, :]         # (T, B)


def _same_on_real_steps(got: Any, expected: Tensor) -> bool:
    """Equal at the real steps; padded steps (all-zero rows of the reference) are not compared."""
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return False
    keep = expected.abs().sum(-1) > 0                              # (T, B): the toy RNNs' real outputs are never 0
    return bool(torch.allclose(got.detach().float()[keep], expected[keep], atol=1e-5))


def _diagnose_bidirectional(args: tuple, got: Any, expected: Tensor) -> str | None:
    xs, lengths, fwd, bwd = args
    T, B, _ = expected.shape
    H = expected.shape[-1] // 2
    if not isinstance(got, Tensor):
        return f"return a tensor of shape (T, B, 2H) = {tuple(expected.shape)}, not a {type(got).__name__}."
    if got.shape == (T, B, H):
        return "return both directions side by side: torch.cat([forward, backward], dim=-1) has 2H features."
    if got.shape != expected.shape:
        if got.dim() == 3 and got.shape[0] == 2 * T or got.shape[1] == 2 * B:
            return "concatenate along the feature dimension (dim=-1), not along time or batch."
        return f"the output should have shape (T, B, 2H) = {tuple(expected.shape)}; got {tuple(got.shape)}."
    out_f = fwd(xs)
    keep = _valid(lengths, T)

    def matches(candidate: Tensor) -> bool:
        return bool(torch.allclose(got.float()[keep], candidate[keep], atol=1e-5))

    whole_flip = torch.cat([out_f, bwd(xs.flip(0)).flip(0)], dim=-1)
    if matches(whole_flip):
        return ("the backward direction read the padding: flipping the whole padded tensor makes a short "
                "sequence's reverse pass start on pad steps. Reverse each sequence within its own length "
                "(xs[:n, b].flip(0) with n = lengths[b]) and flip the outputs back the same way.")
    not_back = torch.cat([out_f, bwd(_reverse_within(xs, lengths))], dim=-1)
    if matches(not_back):
        return ("the backward outputs are still in reading order (last element first); reverse them again, "
                "within each length, so that position t holds the backward state at x_t.")
    if matches(torch.cat([out_f, _reverse_within(bwd(xs), lengths)], dim=-1)) or \
            matches(torch.cat([out_f, bwd(xs)], dim=-1)):
        return "the backward RNN must read the input reversed (within each length), not in the forward order."
    if matches(torch.cat([expected[..., H:], expected[..., :H]], dim=-1)):
        return "the directions are in the wrong order: forward first, then backward (torch's layout)."
    if matches(torch.cat([out_f, out_f], dim=-1)):
        return "use backward_rnn for the second half; you ran forward_rnn twice."
    if torch.allclose(got.float()[..., :H][keep], expected[..., :H][keep], atol=1e-5):
        return "the forward half is right; the backward half is not (reverse within each length, run, reverse back)."
    return None


def _toy_rnn(a: float, w: float, b: float) -> Callable[[Tensor], Tensor]:
    """A small fixed recurrence h_t = tanh(a h_{t-1} + w x_t + b), applied along dim 0 of (T, B, F)."""
    def run(xs: Tensor) -> Tensor:
        h = torch.zeros_like(xs[0])
        out = []
        for x_t in xs:
            h = torch.tanh(a * h + w * x_t + b)
            out.append(h)
        return torch.stack(out)
    run.__name__ = f"toy_rnn(a={a}, w={w}, b={b})"
    return run


_FWD, _BWD = _toy_rnn(0.5, 1.0, 0.1), _toy_rnn(-0.7, 0.8, 0.3)


def _batch(lengths: list[int], features: int, seed: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    xs = torch.randn(T, len(lengths), features, generator=g)
    for b, n in enumerate(lengths):
        xs[n:, b] = 0.0                                             # zero padding, as pad_sequence makes
    return xs, torch.tensor(lengths)


register(Exercise(
    name="bidirectional",
    signature="bidirectional(xs: Tensor (T, B, F), lengths: Tensor (B,), forward_rnn, backward_rnn) -> "
              "Tensor (T, B, 2F): [forward ; backward] at every real step (padded steps are not checked)",
    reference=_bidirectional,
    cases=[
        Case((*_batch([4, 4], 2, 0), _FWD, _BWD), "two sequences of the same length"),
        Case((*_batch([5, 3, 1], 2, 1), _FWD, _BWD), "a padded batch of lengths 5, 3, 1"),
        Case((*_batch([2, 6], 3, 2), _FWD, _BWD), "a padded batch where the first sequence is short"),
    ],
    hint="out_f = forward_rnn(xs); reverse each sequence within its length, run backward_rnn, reverse its "
         "outputs back the same way; torch.cat([out_f, out_b], dim=-1).",
    diagnose=_diagnose_bidirectional,
    same=lambda got, expected: _same_on_real_steps(got, expected),
))


# --------------------------------------------------------------------------------------------
# Exercise 3: predict, then measure -- how much does right-hand context cut the tagger's errors?
# --------------------------------------------------------------------------------------------

RATIO_TOLERANCE = 1.5          # a prediction within a factor 1.5 of the measured ratio counts as right


def _error_ratio() -> float:
    return measure_error_ratio()["ratio"]


def _ratio_close(got: Any, expected: float) -> bool:
    return (isinstance(got, (int, float)) and not isinstance(got, bool) and got > 0
            and expected / RATIO_TOLERANCE <= got <= expected * RATIO_TOLERANCE)


def _diagnose_ratio(args: tuple, got: Any, expected: float) -> str | None:
    if isinstance(got, bool) or not isinstance(got, (int, float)) or not got > 0:
        return f"answer with a positive number, the factor (e.g. 1.5 for 'uni-1 makes 1.5 times as many errors'); got {got!r}."
    measured = measure_error_ratio()
    said = (f"measured: uni-1 tags {measured['uni-1']:.1%} of the test gaps wrong, bi-1 {measured['bi-1']:.1%}: "
            f"a factor {expected:.1f}; you predicted {got:g}")
    if got < expected:
        return (f"{said}. Right-hand context is worth more than that: at a gap, whether the word ends depends on the "
                "next letters (the|king, there, then), and the counts of section 3.1 already showed two letters on "
                "the right beat two on the left by far.")
    return (f"{said}. Less than that: bi-1 still errs, often with a cut that leaves a real word on one side "
            "(the rein, d inner), and 200 steps are a small budget.")


register(Exercise(
    name="predict_error_ratio",
    signature="predict_error_ratio() -> float: how many times as many test gaps the left-to-right tagger uni-1 "
              "tags wrong as the bidirectional bi-1 (checked against a measurement, within a factor 1.5)",
    reference=_error_ratio,
    cases=[Case((), "uni-1 and bi-1 of section 3.2, on the held-out test lines")],
    hint="compare the count baselines of section 3.1: two letters on the left against two on the right.",
    diagnose=_diagnose_ratio,
    same=_ratio_close,
))
