r"""Positional encodings: none (NoPE), sinusoidal, learned absolute, RoPE and ALiBi, behind one interface.

Self-attention alone is blind to order; each encoding puts position back in through one of the three hooks
of :class:`PositionalEncoding`: ``forward(x)`` adds to the embeddings (sinusoidal, learned), ``rotate(q, k)``
turns each head's queries and keys (RoPE), ``score_bias(n, m)`` is added to the scores (ALiBi). Unused hooks
are the identity (or ``None``), so model code is the same for all five. One module owns the encoding (the
model, or the outermost Transformer twin built with ``positional=``) and hands every self-attention
``**positional.attention_args(n, m)`` on each call; attention layers hold none. The ``n`` queries are the
*last* ``n`` of ``m`` key positions (``m > n`` with a cache), as in :func:`seqlab.nn.masks.causal_mask`.
Each class's docstring gives its formula; taught in notebook 11.
"""

from __future__ import annotations

import math
import torch
from torch import Tensor, nn

from seqlab.nn.transformer_checks import check_heads


#: The three places an encoding can put position in, in the order a score is computed.
HOOKS = ("forward", "rotate", "score_bias")


class PositionalEncoding(nn.Module):
    """Base class: every hook is the identity. Subclasses override the hooks they use, name themselves
    (``label``) and say how a model of ``(d_model, num_heads, max_len)`` builds them (``build``)."""

    label = "positional encoding"            # the name figures and tables print

    @classmethod
    def build(cls, d_model: int, num_heads: int, max_len: int) -> PositionalEncoding:
        """The encoding for a model of width ``d_model`` with ``num_heads`` heads and ``max_len`` positions."""
        return cls()

    @classmethod
    def hooks(cls) -> tuple[str, ...]:
        """The hooks of :data:`HOOKS` this class overrides (``()`` for NoPE): where position enters."""
        return tuple(hook for hook in HOOKS if getattr(cls, hook) is not getattr(PositionalEncoding, hook))

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Token embeddings ``(B, n, d_model)`` of positions ``offset .. offset + n - 1``, with positions added."""
        return x

    def rotate(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head queries ``(B, H, n, d_head)`` and keys ``(B, H, m, d_head)``, with positions applied."""
        return q, k

    def score_bias(self, n: int, m: int, *, device: torch.device | None = None,
                   dtype: torch.dtype = torch.float32) -> Tensor | None:
        """An additive bias ``(H, n, m)`` for the scores of ``n`` queries against ``m`` keys, or None."""
        return None

    def attention_args(self, n: int, m: int, *, device: torch.device | None = None,
                       dtype: torch.dtype = torch.float32) -> dict[str, object]:
        """The call arguments a self-attention over ``n`` queries (the last ``n`` of ``m`` positions) needs:
        ``rotate`` (this encoding's :meth:`rotate`) and ``score_bias`` ``(H, n, m)`` in ``dtype`` on ``device``,
        each only where this encoding uses it (``{}`` for an encoding added to the embeddings)."""
        args: dict[str, object] = {}
        if "rotate" in self.hooks():
            args["rotate"] = self.rotate
        bias = self.score_bias(n, m, device=device, dtype=dtype)
        if bias is not None:
            args["score_bias"] = bias
        return args


class NoPositionalEncoding(PositionalEncoding):
    """NoPE: no position information at all (every hook is the identity)."""

    label = "NoPE"


# -- sinusoidal ---------------------------------------------------------------------------------------
def frequencies(d: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float64,
                device: torch.device | str | None = None) -> Tensor:
    r"""The ``d // 2`` angular frequencies :math:`\omega_i = \text{base}^{-2i/d}`, ``i = 0 .. d/2 - 1``.

    Pair ``i`` of a sinusoidal encoding (or of a RoPE head of size ``d``) turns once every
    :math:`2\pi / \omega_i` positions: from :math:`2\pi` (pair 0) to almost :math:`2\pi \cdot \text{base}`.
    """
    if d < 2 or d % 2:
        raise ValueError(f"the sin/cos pairs need an even size of at least 2, got {d}")
    two_i = torch.arange(0, d, 2, dtype=torch.float64, device=device)
    return (base ** (-two_i / d)).to(dtype)                                   # (d/2,)


def sinusoidal_table(length: int, d_model: int, *, base: float = 10000.0, offset: int = 0,
                     dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> Tensor:
    r"""``(length, d_model)``: row ``pos`` is :math:`PE_{pos}` for ``pos = offset .. offset + length - 1``.

    :math:`PE_{(pos, 2i)} = \sin(pos\,\omega_i)` and :math:`PE_{(pos, 2i+1)} = \cos(pos\,\omega_i)`:
    even columns hold sines, odd columns cosines, as in the paper. Computed in float64 (the angles
    of far positions keep their digits), returned in ``dtype``.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model (one sin and one cos per "
                         f"frequency), got d_model={d_model}")
    omega = frequencies(d_model, base, device=device)                         # (d/2,)
    pos = torch.arange(offset, offset + length, dtype=torch.float64, device=device)
    angle = pos[:, None] * omega[None, :]                                     # (length, d/2)
    pe = torch.stack((torch.sin(angle), torch.cos(angle)), dim=-1)            # (length, d/2, 2)
    return pe.reshape(length, d_model).to(dtype)                              # sin, cos, sin, cos, ...


def sinusoidal_rotation(k: int | float, d_model: int, *, base: float = 10000.0,
                        dtype: torch.dtype = torch.float64) -> Tensor:
    r"""The ``(d_model, d_model)`` matrix :math:`R_k` with :math:`PE_{pos+k} = R_k\, PE_{pos}` for every ``pos``.

    Block-diagonal, one 2x2 rotation per frequency (the angle-addition formulas):

    .. math::

        \begin{bmatrix} \sin \omega_i (pos + k) \\ \cos \omega_i (pos + k) \end{bmatrix} =
        \begin{bmatrix} \cos \omega_i k & \sin \omega_i k \\ -\sin \omega_i k & \cos \omega_i k \end{bmatrix}
        \begin{bmatrix} \sin \omega_i pos \\ \cos \omega_i pos \end{bmatrix}

    It depends on the offset ``k`` only, never on ``pos``: a fixed linear map that attention can learn.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model, got d_model={d_model}")
    angle = k * frequencies(d_model, base)                                    # (d/2,)
    c, s = torch.cos(angle), torch.sin(angle)
    R = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    R[even, even], R[even, even + 1] = c, s
    R[even + 1, even], R[even + 1, even + 1] = -s, c
    return R.to(dtype)


def _check_embeddings(name: str, x: Tensor, d_model: int) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name} expects embeddings of shape (B, n, {d_model}) (batch first), "
                         f"got {tuple(x.shape)}")


class SinusoidalPositionalEncoding(PositionalEncoding):
    r"""The paper's fixed encoding, added to the token embeddings: ``x + PE[offset : offset + n]``.

    ``d_model`` must be **even** (each frequency is one sine and one cosine); an odd size raises a
    ValueError instead of silently dropping or padding a column. The table for the first
    ``max_len`` positions is precomputed (a non-persistent buffer, so it is not in the state_dict);
    longer sequences are computed on the fly, since the formula has no maximum length.

    The paper multiplies the token embeddings by :math:`\sqrt{d_{model}}` before adding the encoding
    and applies dropout to the sum; both are the model's business, not this module's.
    """

    label = "sinusoidal"

    @classmethod
    def build(cls, d_model: int, num_heads: int, max_len: int) -> SinusoidalPositionalEncoding:
        return cls(d_model, max_len)

    def __init__(self, d_model: int, max_len: int = 1024, *, base: float = 10000.0):
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal positional encoding needs an even d_model (one sin and one cos per "
                             f"frequency), got d_model={d_model}")
        self.d_model, self.max_len, self.base = d_model, max_len, base
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, base=base), persistent=False)  # (max_len, d)

    def table(self, n: int, offset: int = 0) -> Tensor:
        """``(n, d_model)``: the encodings of positions ``offset .. offset + n - 1`` (float32, on the buffer's device)."""
        if offset + n <= self.max_len:
            return self.pe[offset:offset + n]
        return sinusoidal_table(n, self.d_model, base=self.base, offset=offset, device=self.pe.device)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_embeddings("SinusoidalPositionalEncoding", x, self.d_model)
        return x + self.table(x.shape[1], offset).to(x.dtype)[None]             # (B, n, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"


# -- learned absolute ---------------------------------------------------------------------------------
class LearnedPositionalEncoding(PositionalEncoding):
    r"""A trained table of ``max_len`` position vectors added to the token embeddings: ``x + P[offset : offset + n]``.

    ``weight`` ``(max_len, d_model)`` is a parameter, initialised from :math:`\mathcal N(0, \text{std}^2)`
    (``std = 0.02`` as in GPT-2). There is nothing to look up beyond the table: a sequence reaching
    past position ``max_len - 1`` raises a ValueError naming both numbers. Rows for positions never
    seen in training keep their initial random values, which is why this encoding does not
    extrapolate to longer sequences (notebook 11 measures it).
    """

    label = "learned"

    @classmethod
    def build(cls, d_model: int, num_heads: int, max_len: int) -> LearnedPositionalEncoding:
        return cls(max_len, d_model)

    def __init__(self, max_len: int, d_model: int, *, std: float = 0.02,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        super().__init__()
        self.max_len, self.d_model, self.std = max_len, d_model, std
        self.weight = nn.Parameter(torch.empty(max_len, d_model, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=self.std)

    def table(self, n: int, offset: int = 0) -> Tensor:
        """``(n, d_model)``: the rows of positions ``offset .. offset + n - 1``."""
        if offset < 0 or offset + n > self.max_len:
            raise ValueError(f"the learned position table holds max_len={self.max_len} positions (0 .. "
                             f"{self.max_len - 1}), but a sequence of {n} tokens at offset {offset} needs "
                             f"positions up to {offset + n - 1}")
        return self.weight[offset:offset + n]

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_embeddings("LearnedPositionalEncoding", x, self.d_model)
        return x + self.table(x.shape[1], offset).to(x.dtype)[None]             # (B, n, d_model)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


# -- RoPE ---------------------------------------------------------------------------------------------
def rotate_pairs(x: Tensor, positions: Tensor, theta: Tensor) -> Tensor:
    r"""Rotate each pair :math:`(x_{2i}, x_{2i+1})` of ``x`` ``(..., L, d)`` by the angle :math:`pos\,\theta_i`.

    ``positions`` ``(L,)`` (one per row), ``theta`` ``(d/2,)``:

    .. math::

        \begin{bmatrix} x'_{2i} \\ x'_{2i+1} \end{bmatrix} =
        \begin{bmatrix} \cos pos\,\theta_i & -\sin pos\,\theta_i \\ \sin pos\,\theta_i & \cos pos\,\theta_i \end{bmatrix}
        \begin{bmatrix} x_{2i} \\ x_{2i+1} \end{bmatrix}

    Pairs are *interleaved*, neighbouring dimensions (RoFormer's convention).
    """
    angle = positions.to(torch.float64)[:, None] * theta.to(torch.float64)[None, :]     # (L, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]                                          # (..., L, d/2) each
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)  # (..., L, d/2, 2)
    return rotated.flatten(-2)                                                          # (..., L, d)


class RotaryPositionalEncoding(PositionalEncoding):
    r"""RoPE: rotate every head's queries and keys by an angle proportional to their position.

    For a head of size ``head_dim`` (even; an odd size raises a ValueError), pair ``i`` of the
    query at position ``m`` turns by :math:`m\theta_i` and pair ``i`` of the key at position ``n``
    by :math:`n\theta_i`, with :math:`\theta_i = \text{base}^{-2i/d_{head}}`. A rotation preserves
    lengths, and :math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k`: the score depends on the two
    positions only through their difference. Nothing is added to the embeddings (``forward`` is
    the identity).

    **Pairing convention**: interleaved pairs :math:`(x_0, x_1), (x_2, x_3), \dots`, as in the RoFormer
    paper (and as the sinusoidal table lays out its sin/cos pairs). GPT-NeoX and LLaMA's reference
    code pair dimension ``i`` with ``i + d/2`` ("half-split"); the two differ by a fixed permutation
    of the dimensions, which a model absorbs into :math:`W_Q` and :math:`W_K`, but weights trained
    with one convention must be permuted before use with the other.

    Queries are the last ``n`` of ``m`` positions: keys get positions ``0 .. m-1`` and queries
    ``m-n .. m-1``, so rotating a cached generation step equals the tail of a full rotation.
    """

    label = "RoPE"

    @classmethod
    def build(cls, d_model: int, num_heads: int, max_len: int) -> RotaryPositionalEncoding:
        return cls(d_model // num_heads)

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim < 2 or head_dim % 2:
            raise ValueError(f"RoPE rotates pairs of dimensions, so head_dim must be even, got head_dim={head_dim}")
        self.head_dim, self.base = head_dim, base
        self.register_buffer("theta", frequencies(head_dim, base, dtype=torch.float64), persistent=False)  # (d/2,)

    def rotate(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        if q.shape[-1] != self.head_dim or k.shape[-1] != self.head_dim:
            raise ValueError(f"RoPE was built for heads of size head_dim={self.head_dim}, got queries "
                             f"{tuple(q.shape)} and keys {tuple(k.shape)} (expected (B, H, n, {self.head_dim}) "
                             f"and (B, H, m, {self.head_dim}))")
        n, m = q.shape[-2], k.shape[-2]
        if n > m:
            raise ValueError(f"the queries must be the last n of the m key positions (n <= m), got "
                             f"n={n} queries and m={m} keys")
        positions = torch.arange(m, device=k.device)
        return rotate_pairs(q, positions[m - n:], self.theta), rotate_pairs(k, positions, self.theta)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}, pairs=interleaved"


RoPE = RotaryPositionalEncoding


# -- ALiBi --------------------------------------------------------------------------------------------
def alibi_slopes(num_heads: int) -> Tensor:
    r"""ALiBi's head slopes :math:`s_1 > \dots > s_H` (float64): a geometric sequence.

    For ``H`` a power of two, :math:`s_h = 2^{-8h/H}` (8 heads: 1/2, 1/4, ..., 1/256). Otherwise,
    as in the paper's code: the slopes of the largest power of two ``P < H``, then every other
    slope of ``2P`` heads for the remaining ``H - P``.
    """
    if num_heads < 1:
        raise ValueError(f"ALiBi needs num_heads >= 1, got {num_heads}")

    def power_of_two(h: int) -> list[float]:
        return [2.0 ** (-8.0 * k / h) for k in range(1, h + 1)]

    if num_heads & (num_heads - 1) == 0:
        slopes = power_of_two(num_heads)
    else:
        p = 2 ** int(math.floor(math.log2(num_heads)))
        slopes = power_of_two(p) + power_of_two(2 * p)[0::2][:num_heads - p]
    return torch.tensor(slopes, dtype=torch.float64)


class ALiBi(PositionalEncoding):
    r"""Attention with Linear Biases: head ``h`` adds :math:`-s_h\,|i - j|` to the score of query ``i`` and key ``j``.

    Nothing is added to the embeddings and nothing is rotated; the further a key, the lower its
    score, with a penalty per step :math:`s_h` that differs between heads (:func:`alibi_slopes`),
    so some heads look far and others near. The bias is symmetric, :math:`-s_h|i-j|`, so it also
    serves an encoder; under a causal mask it equals the paper's :math:`-s_h (i - j)` on every entry
    the mask allows. Query ``i`` of ``n`` sits at position ``i + m - n`` of the ``m`` keys.
    """

    label = "ALiBi"

    @classmethod
    def build(cls, d_model: int, num_heads: int, max_len: int) -> ALiBi:
        return cls(num_heads)

    def __init__(self, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.register_buffer("slopes", alibi_slopes(num_heads).float(), persistent=False)   # (H,)

    def score_bias(self, n: int, m: int, *, device: torch.device | None = None,
                   dtype: torch.dtype = torch.float32) -> Tensor:
        if n < 1 or m < n:
            raise ValueError(f"ALiBi needs 1 <= n <= m (n queries, the last n of m keys), got n={n}, m={m}")
        i = torch.arange(m - n, m, device=device)[:, None]                    # query positions (n, 1)
        j = torch.arange(m, device=device)[None, :]                           # key positions (1, m)
        distance = (i - j).abs().to(dtype)                                    # (n, m)
        bias = -self.slopes.to(device=device, dtype=dtype)[:, None, None] * distance   # (H, n, m)
        return bias + 0.0                                                     # -0.0 on the diagonal -> 0.0

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}"


# -- by name ------------------------------------------------------------------------------------------
# The one registry: name -> class, in the order the course introduces them. A class builds itself for a
# model (``build``), names itself (``label``) and says where position enters (``hooks``); the models'
# ``positional=``, the check, notebook 11's exercise names, the explorer and the diagram all read it.
ENCODING_CLASSES: dict[str, type[PositionalEncoding]] = {
    "none": NoPositionalEncoding,
    "sinusoidal": SinusoidalPositionalEncoding,
    "learned": LearnedPositionalEncoding,
    "rope": RotaryPositionalEncoding,
    "alibi": ALiBi,
}

#: The names :func:`positional_encoding` knows, in the order the course introduces them.
POSITIONAL_ENCODINGS = tuple(ENCODING_CLASSES)


def check_positional(name: object) -> None:
    """A ValueError listing the known names unless ``name`` is one of :data:`POSITIONAL_ENCODINGS`."""
    if not isinstance(name, str) or name not in ENCODING_CLASSES:
        raise ValueError(f"unknown positional encoding {name!r}; expected one of {tuple(ENCODING_CLASSES)}")


def positional_encoding(name: str, *, d_model: int, num_heads: int, max_len: int) -> PositionalEncoding:
    """One of :data:`POSITIONAL_ENCODINGS` by name, sized for a model of width ``d_model`` with ``num_heads`` heads.

    ``"rope"`` rotates heads of size ``d_model // num_heads``; ``"learned"`` holds ``max_len``
    positions (longer sequences raise); ``"sinusoidal"`` precomputes ``max_len`` (and computes more
    when asked); ``"alibi"`` has one slope per head; ``"none"`` is NoPE.
    """
    check_positional(name)
    check_heads(d_model, num_heads, names=("d_model", "num_heads"))
    return ENCODING_CLASSES[name].build(d_model, num_heads, max_len)
