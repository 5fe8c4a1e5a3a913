r"""Hidden Markov models: filtering as a recurrence, and smoothing by forward-backward (notebook 6 derives both).

:math:`A_{ij} = P(X_t = j \mid X_{t-1} = i)` ``(S, S)``, :math:`B_{ik} = P(E_t = k \mid X_t = i)` ``(S, K)``,
``prior`` :math:`= P(X_0)` ``(S,)``. Arrays are NumPy float64; ``observations`` is ``(T,)`` or a batch ``(N, T)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["check_hmm", "filter_step", "hmm_filter", "hmm_backward", "hmm_smooth", "sample_hmm"]


def check_hmm(A: ArrayLike, B: ArrayLike, prior: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A``, ``B`` and ``prior`` as float64 arrays, checked: shapes (S, S), (S, K), (S,), rows that sum to 1."""
    A, B, prior = (np.asarray(a, dtype=np.float64) for a in (A, B, prior))
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A (transitions) must be square, (S, S), got shape {A.shape}")
    S = A.shape[0]
    if B.ndim != 2 or B.shape[0] != S:
        raise ValueError(f"B (emissions) must have shape (S, K) = ({S}, K), one row per state, got {B.shape}")
    if prior.shape != (S,):
        raise ValueError(f"prior must have shape ({S},), got {prior.shape}")
    for name, m in (("A", A), ("B", B), ("prior", prior[None])):
        if (m < 0).any() or not np.allclose(m.sum(-1), 1.0, atol=1e-9):
            raise ValueError(f"{name} must hold probabilities with rows summing to 1; row sums are {m.sum(-1)}")
    return A, B, prior


def _check_observations(observations: ArrayLike, K: int) -> np.ndarray:
    obs = np.asarray(observations)
    if obs.ndim not in (1, 2) or obs.shape[-1] == 0 or not np.issubdtype(obs.dtype, np.integer):
        raise ValueError(f"observations must be integers of shape (T,) or (N, T) with T >= 1, "
                         f"got dtype {obs.dtype} and shape {obs.shape}")
    if obs.min() < 0 or obs.max() >= K:
        raise ValueError(f"observations must lie in 0..{K - 1} (the columns of B), got {obs.min()}..{obs.max()}")
    return obs


def filter_step(belief: np.ndarray, A: np.ndarray, B: np.ndarray, evidence: int | np.ndarray) -> np.ndarray:
    """One update ``f_t = normalise(B[:, e_t] * (A.T @ f_{t-1}))``; ``belief`` is ``(S,)`` or ``(N, S)``."""
    predicted = belief @ A                         # (.., S): row form of A^T f
    weighted = predicted * B[:, evidence].T        # (.., S)
    return weighted / weighted.sum(-1, keepdims=True)


def hmm_filter(A: ArrayLike, B: ArrayLike, prior: ArrayLike, observations: ArrayLike) -> np.ndarray:
    """Beliefs ``P(X_t | e_1..e_t)`` for t = 1..T: ``(T, S)``, or ``(N, T, S)`` for a batch."""
    A, B, prior = check_hmm(A, B, prior)
    obs = _check_observations(observations, B.shape[1])
    batched = obs.ndim == 2
    obs = obs if batched else obs[None]
    belief = np.broadcast_to(prior, (obs.shape[0], len(prior)))
    beliefs = []
    for t in range(obs.shape[1]):
        belief = filter_step(belief, A, B, obs[:, t])
        beliefs.append(belief)
    out = np.stack(beliefs, axis=1)                # (N, T, S)
    return out if batched else out[0]


def hmm_backward(A: ArrayLike, B: ArrayLike, observations: ArrayLike) -> np.ndarray:
    """Backward messages ``b_k = P(e_{k+1..T} | X_k)`` scaled to sum to 1, k = 1..T: ``(T, S)`` or ``(N, T, S)``."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    check_hmm(A, B, np.full(A.shape[0], 1.0 / A.shape[0]))
    obs = _check_observations(observations, B.shape[1])
    batched = obs.ndim == 2
    obs = obs if batched else obs[None]
    message = np.full((obs.shape[0], A.shape[0]), 1.0 / A.shape[0])   # b_T = 1, scaled
    messages = [message]
    for t in range(obs.shape[1] - 1, 0, -1):       # b_{t} from b_{t+1} and e_{t+1} (0-based: obs[:, t])
        message = (message * B[:, obs[:, t]].T) @ A.T
        message = message / message.sum(-1, keepdims=True)
        messages.append(message)
    out = np.stack(messages[::-1], axis=1)
    return out if batched else out[0]


def hmm_smooth(A: ArrayLike, B: ArrayLike, prior: ArrayLike, observations: ArrayLike) -> np.ndarray:
    """Smoothed beliefs ``P(X_k | e_1..e_T)`` for k = 1..T (forward-backward): ``(T, S)`` or ``(N, T, S)``."""
    forward = hmm_filter(A, B, prior, observations)
    combined = forward * hmm_backward(A, B, observations)
    return combined / combined.sum(-1, keepdims=True)


def hmm_window(A: ArrayLike, B: ArrayLike, prior: ArrayLike, observations: ArrayLike, before: int,
               after: int = 0) -> np.ndarray:
    """Beliefs ``P(X_t | e_{t-before} .. e_{t+after})``, the window clipped at the ends: ``(T, S)`` or ``(N, T, S)``.

    The window starts from ``prior`` pushed through ``A`` to its first step.
    """
    if before < 0 or after < 0:
        raise ValueError(f"before and after count observations, so they must be >= 0, got {before} and {after}")
    A, B, prior = check_hmm(A, B, prior)
    obs = _check_observations(observations, B.shape[1])
    batched = obs.ndim == 2
    obs = obs if batched else obs[None]
    T = obs.shape[1]
    out = np.empty((obs.shape[0], T, len(prior)))
    for t in range(T):
        lo, hi = max(0, t - before), min(T, t + after + 1)
        start = prior @ np.linalg.matrix_power(A, lo)                 # P(X_lo): what is known before the window
        out[:, t] = hmm_smooth(A, B, start, obs[:, lo:hi])[:, t - lo]
    return out if batched else out[0]


def sample_hmm(A: ArrayLike, B: ArrayLike, prior: ArrayLike, steps: int, n: int = 1, *,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` runs of ``steps`` steps: hidden states and observations, each ``(n, steps)`` int64 (``X_0`` not returned)."""
    A, B, prior = check_hmm(A, B, prior)
    if steps < 1 or n < 1:
        raise ValueError(f"steps and n must be at least 1, got steps={steps}, n={n}")
    rng = np.random.default_rng(seed)
    states = np.empty((n, steps), dtype=np.int64)
    emitted = np.empty((n, steps), dtype=np.int64)
    x = np.array([rng.choice(len(prior), p=prior) for _ in range(n)])
    cum_A, cum_B = A.cumsum(1), B.cumsum(1)
    for t in range(steps):
        x = np.minimum((rng.random(n)[:, None] > cum_A[x]).sum(1), A.shape[0] - 1)
        e = np.minimum((rng.random(n)[:, None] > cum_B[x]).sum(1), B.shape[1] - 1)
        states[:, t], emitted[:, t] = x, e
    return states, emitted
