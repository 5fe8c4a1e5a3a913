"""The positional explorer's compute part: arrays in, arrays out.

One :class:`EncodingView` per encoding of :data:`seqlab.nn.positional.ENCODING_CLASSES`, by the hook it
overrides (:data:`HOOK_VIEWS`): ``forward`` as the cosine of two positions' rows, ``rotate`` as one
vector's score against itself at two positions, ``score_bias`` as the bias.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from seqlab.nn.positional import (ENCODING_CLASSES, frequencies, positional_encoding, rotate_pairs,
                                  sinusoidal_rotation, sinusoidal_table)

__all__ = ["HOOK_VIEWS", "EncodingView", "HookView", "ShiftRotation", "as_table", "describe_positional",
           "dimension_wave", "encoding_view", "encoding_views", "random_learned_table", "rope_similarity",
           "shift_rotation", "shown_encodings", "sinusoidal_similarity", "table_similarity"]

UNTRAINED = "untrained (random init)"


def _check_sizes(d_model: int, length: int) -> None:
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even and >= 2 (sin/cos pairs), got d_model={d_model}")
    if length < 1:
        raise ValueError(f"length must be >= 1, got length={length}")


def table_similarity(table) -> np.ndarray:
    r"""``(n, n)`` cosine similarities of the rows of ``table`` ``(n, d)``: :math:`\cos(P_m, P_n)`."""
    if hasattr(table, "detach"):
        table = table.detach().cpu().double().numpy()
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"a position table must be a matrix (positions, d), got shape {table.shape}")
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


@lru_cache(maxsize=32)
def sinusoidal_similarity(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    r"""``(length, length)``: :math:`\cos(PE_m, PE_n)`, a function of :math:`m - n` only."""
    _check_sizes(d_model, length)
    result = table_similarity(sinusoidal_table(length, d_model, base=base, dtype=torch.float64).numpy())
    result.setflags(write=False)                       # cached: shared by every caller
    return result


@lru_cache(maxsize=32)
def rope_similarity(length: int, head_dim: int, base: float = 10000.0, seed: int = 0) -> np.ndarray:
    r"""``(length, length)``: :math:`(R_m u)^\top (R_n u) / |u|^2` for a random ``u`` (``seed``), what RoPE
    alone adds to a score; a function of :math:`m - n` only."""
    _check_sizes(head_dim, length)
    u = torch.randn(head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rotated = rotate_pairs(u.expand(length, head_dim), torch.arange(length), frequencies(head_dim, base))  # (L, d)
    result = (rotated @ rotated.T / (u @ u)).numpy()
    result.setflags(write=False)
    return result


@lru_cache(maxsize=32)
def random_learned_table(length: int, d_model: int, seed: int = 0, std: float = 0.02) -> np.ndarray:
    """``(length, d_model)``: a learned position table at initialisation, N(0, std^2)."""
    _check_sizes(d_model, length)
    table = torch.randn(length, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * std
    result = table.numpy()
    result.setflags(write=False)
    return result


def dimension_wave(d_model: int, dimension: int, length: int, *, samples: int = 400,
                   base: float = 10000.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    r"""Column ``dimension`` of the sinusoidal table as a wave: ``(x, y, values, wavelength)``.

    ``x`` ``(samples,)`` spans positions ``0 .. length - 1``, ``y`` is its continuous sin (even
    dimension) or cos (odd); ``values`` ``(length,)`` are the table's entries; ``wavelength`` is
    :math:`2\pi/\omega_i` positions.
    """
    _check_sizes(d_model, length)
    if not 0 <= dimension < d_model:
        raise ValueError(f"dimension must be in 0..{d_model - 1} for d_model={d_model}, got {dimension}")
    omega = float(frequencies(d_model, base)[dimension // 2])
    wave = np.sin if dimension % 2 == 0 else np.cos
    x = np.linspace(0.0, max(length - 1, 1), samples)
    return x, wave(x * omega), wave(np.arange(length) * omega), 2 * math.pi / omega


@dataclass(frozen=True)
class ShiftRotation:
    """One frequency's part of :math:`PE_{pos+k} = R_k PE_{pos}`, and the error over all dimensions."""

    pair: int                # i: dimensions 2i (sin) and 2i+1 (cos)
    omega: float             # omega_i
    block: np.ndarray        # (2, 2) the block of R_k acting on that pair
    pe_pos: np.ndarray       # (2,) PE(pos)[2i : 2i+2]
    pe_shifted: np.ndarray   # (2,) PE(pos + k)[2i : 2i+2]
    rotated: np.ndarray      # (2,) block @ pe_pos
    max_error: float         # max over all d_model dimensions of |R_k PE(pos) - PE(pos + k)|


def shift_rotation(d_model: int, pos: int, k: int, pair: int, *, base: float = 10000.0) -> ShiftRotation:
    """:math:`R_k`'s 2x2 block for frequency ``pair`` and how well :math:`R_k PE_{pos}` gives
    :math:`PE_{pos+k}`, in float64."""
    _check_sizes(d_model, 1)
    if not 0 <= pair < d_model // 2:
        raise ValueError(f"pair must be in 0..{d_model // 2 - 1} for d_model={d_model}, got {pair}")
    if pos < 0 or pos + k < 0:
        raise ValueError(f"positions must be >= 0, got pos={pos} and pos + k={pos + k}")
    R = sinusoidal_rotation(k, d_model, base=base).numpy()                            # (d, d)
    table = sinusoidal_table(max(pos, pos + k) + 1, d_model, base=base, dtype=torch.float64).numpy()
    pe_pos, pe_shifted = table[pos], table[pos + k]
    rotated_all = R @ pe_pos
    s = slice(2 * pair, 2 * pair + 2)
    return ShiftRotation(pair, float(frequencies(d_model, base)[pair]), R[s, s].copy(), pe_pos[s].copy(),
                         pe_shifted[s].copy(), rotated_all[s].copy(), float(np.abs(rotated_all - pe_shifted).max()))


def as_table(table) -> np.ndarray:
    """A position table ``(positions, d)`` as float64 numpy."""
    if hasattr(table, "detach"):
        table = table.detach().cpu().double().numpy()
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"a position table must be a matrix (max_len, d), got shape {table.shape}")
    return table


# -- one view per registered encoding, by the hook it overrides ----------------------------------------
@dataclass(frozen=True)
class HookView:
    """How the explorer draws an encoding that uses one hook."""

    what: str          # the quantity, in words, for the alt text
    formula: str       # the quantity, for the panel's title
    signed: bool       # True: drawn on its own symmetric scale (a bias); False: a similarity in [-1, 1]
    fmt: str           # how the alt text prints one value


HOOK_VIEWS: dict[str, HookView] = {
    "forward": HookView("cosine similarity", "cos(PE_m, PE_n)", False, ".2f"),
    "rotate": HookView("cosine similarity", "(R_m u)·(R_n u) / |u|²", False, ".2f"),
    "score_bias": HookView("score bias", "bias b(m, n)", True, ".3f"),
}


def shown_encodings() -> tuple[str, ...]:
    """The registry's names that put position in (all but NoPE), in course order."""
    return tuple(name for name, cls in ENCODING_CLASSES.items() if cls.hooks())


@dataclass(frozen=True)
class EncodingView:
    """One encoding through one hook: ``values[m, n]`` ``(length, length)`` relates positions m and n."""

    name: str            # the registry's name, e.g. "rope"
    label: str           # how figures print it, e.g. "RoPE"
    hook: str            # "forward", "rotate" or "score_bias"
    values: np.ndarray   # (length, length), read-only
    limit: float         # colour scale -limit .. limit
    title: str           # the panel's title


@lru_cache(maxsize=64)
def _built(name: str, length: int, d_model: int, seed: int):
    """The encoding of a one-head model of width ``d_model``, float64, initialised under ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return positional_encoding(name, d_model=d_model, num_heads=1, max_len=length).double()


def _hook_values(encoding, hook: str, length: int, d_model: int, seed: int) -> np.ndarray:
    if hook == "forward":
        table = encoding(torch.zeros(1, length, d_model, dtype=torch.float64))[0]           # (L, d): what is added
        return table_similarity(table)
    if hook == "rotate":
        u = torch.randn(d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        q, k = encoding.rotate(u.expand(1, 1, length, d_model), u.expand(1, 1, length, d_model))  # (1, 1, L, d)
        return ((q[0] @ k[0].transpose(-1, -2)).sum(0) / (u @ u)).numpy()                   # heads summed
    bias = encoding.score_bias(length, length, dtype=torch.float64)                          # (H, L, L)
    return bias.mean(0).numpy()


@lru_cache(maxsize=64)
def _cached_view(name: str, hook: str, length: int, d_model: int, seed: int) -> tuple[np.ndarray, float]:
    values = _hook_values(_built(name, length, d_model, seed), hook, length, d_model, seed)
    values.setflags(write=False)                        # cached: shared by every caller
    limit = float(np.abs(values).max()) or 1.0 if HOOK_VIEWS[hook].signed else 1.0
    return values, limit


def encoding_view(name: str, length: int, d_model: int, *, table=None, table_label: str | None = None,
                  seed: int = 0) -> list[EncodingView]:
    """Encoding ``name`` seen through each hook it overrides (none for NoPE). ``table``: a trained table
    ``(max_len, d)``, labelled ``table_label``, shown instead of the ``forward`` hook's initial one."""
    _check_sizes(d_model, length)
    cls = ENCODING_CLASSES[name]
    views = []
    for hook in cls.hooks():
        view = HOOK_VIEWS[hook]
        if hook == "forward" and table is not None:
            rows = as_table(table)[:length]
            values, limit = table_similarity(rows), 1.0
            shown = f"first {len(rows)} of {len(as_table(table))}" if len(as_table(table)) > length else f"all {len(rows)}"
            title = f"{cls.label}, {table_label or 'trained'}\n({shown} rows, d = {rows.shape[1]})"
        else:
            values, limit = _cached_view(name, hook, length, d_model, seed)
            has_weights = any(True for _ in _built(name, length, d_model, seed).parameters())
            title = f"{cls.label}, {UNTRAINED}" if has_weights else f"{cls.label}: {view.formula}"
            if view.signed:
                title += ", 1 head"
        views.append(EncodingView(name, cls.label, hook, values, limit, title))
    return views


def encoding_views(length: int, d_model: int, *, tables: Mapping[str, object] | None = None,
                   table_labels: Mapping[str, str] | None = None, seed: int = 0) -> list[EncodingView]:
    """Every registered encoding's views, in course order: the explorer's bottom row."""
    tables, table_labels = tables or {}, table_labels or {}
    return [view for name in shown_encodings()
            for view in encoding_view(name, length, d_model, table=tables.get(name), table_label=table_labels.get(name),
                                      seed=seed)]


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def describe_positional(d_model: int, length: int, dimension: int, pos: int, k: int, *, learned=None,
                        learned_label: str | None = None, views: list[EncodingView] | None = None,
                        base: float = 10000.0) -> str:
    """The explorer's picture of a state in words (its alt text). ``views``: the bottom row, by
    default :func:`encoding_views` with ``learned`` (labelled ``learned_label``) or none."""
    _, _, _, wavelength = dimension_wave(d_model, dimension, length, base=base)
    if views is None:
        views = encoding_views(length, d_model, tables=None if learned is None else {"learned": learned},
                               table_labels={"learned": learned_label or "trained"})
    near = sorted({p for p in (pos + 1, pos + k) if p < length})

    def label(view: EncodingView) -> str:
        if view.title.startswith(f"{view.label}, "):                   # a table: say whose, as its title does
            return f"{view.label}, {view.title[len(view.label) + 2:].splitlines()[0]},"
        return view.label if not HOOK_VIEWS[view.hook].signed else f"{view.label} bias"

    falls = "; ".join(f"{label(view)} " + " and ".join(
        f"{view.values[pos, p]:{HOOK_VIEWS[view.hook].fmt}}" if p < len(view.values) else "(no row)" for p in near)
        for view in views)
    similar = [v.label for v in views if not HOOK_VIEWS[v.hook].signed]
    biased = [v.label for v in views if HOOK_VIEWS[v.hook].signed]
    panels = []
    if similar:
        panels.append(f"cosine similarity between positions for {_join(similar)} encodings")
    if biased:
        panels.append(f"the score bias of {_join(biased)}")
    rot = shift_rotation(d_model, pos, k, dimension // 2, base=base)
    error = "1e-12" if rot.max_error < 1e-12 else f"{rot.max_error:.1e}"
    wavelength = float(f"{wavelength:.3g}")                       # 3 significant digits, no exponent
    return (f"Sinusoidal position table ({length} positions by d_model = {d_model}) as a heatmap, dimension "
            f"{dimension} a {'sin' if dimension % 2 == 0 else 'cos'} wave of wavelength {wavelength:,g} positions; "
            f"{' and '.join(panels)}, row {pos} marked; and "
            f"R_{k}'s 2×2 block. " + (f"Similarity of position {pos} to {' and '.join(map(str, near))}: {falls}. "
                                    if near else "")
            + f"R_{k} PE({pos}) equals PE({pos + k}) to within {error} in all {d_model} dimensions.")
