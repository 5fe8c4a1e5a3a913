"""Positional encodings (NoPE, sinusoidal, learned, RoPE, ALiBi) behind one interface; notebook 11.

Each overrides one hook of :class:`PositionalEncoding`: ``forward`` (embeddings), ``rotate`` (queries and
keys) or ``score_bias`` (scores). The model owns it and passes ``**attention_args(n, m)`` to every
self-attention; the ``n`` queries are the last ``n`` of ``m`` key positions.
"""

from __future__ import annotations

import math
import torch
from torch import Tensor, nn

from seqlab.nn.transformer_checks import check_heads


#: The three places an encoding can put position in, in the order a score is computed.
HOOKS = ("forward", "rotate", "score_bias")


class PositionalEncoding(nn.Module):
    """Base class: every hook is the identity; subclasses set ``label`` and ``build`` and override hooks."""

    label = "positional encoding"            # the name figures and tables print

    @classmethod
    def build(cls, d_model: int, num_heads: int, max_len: int) -> PositionalEncoding:
        """The encoding for a model of ``(d_model, num_heads, max_len)``."""
        return cls()

    @classmethod
    def hooks(cls) -> tuple[str, ...]:
        """The hooks of :data:`HOOKS` this class overrides (``()`` for NoPE)."""
        return tuple(hook for hook in HOOKS if getattr(cls, hook) is not getattr(PositionalEncoding, hook))

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Embeddings ``(B, n, d_model)`` at positions ``offset ..``, position added."""
        return x

    def rotate(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """Queries ``(B, H, n, d_head)`` and keys ``(B, H, m, d_head)``, position applied."""
        return q, k

    def score_bias(self, n: int, m: int, *, device: torch.device | None = None,
                   dtype: torch.dtype = torch.float32) -> Tensor | None:
        """A bias ``(H, n, m)`` added to the scores, or None."""
        return None

    def attention_args(self, n: int, m: int, *, device: torch.device | None = None,
                       dtype: torch.dtype = torch.float32) -> dict[str, object]:
        """``rotate`` and ``score_bias`` ``(H, n, m)`` for a self-attention, each only if used (else ``{}``)."""
        args: dict[str, object] = {}
        if "rotate" in self.hooks():
            args["rotate"] = self.rotate
        bias = self.score_bias(n, m, device=device, dtype=dtype)
        if bias is not None:
            args["score_bias"] = bias
        return args


class NoPositionalEncoding(PositionalEncoding):
    """NoPE: no position information at all."""

    label = "NoPE"


# -- sinusoidal ---------------------------------------------------------------------------------------
def frequencies(d: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float64,
                device: torch.device | str | None = None) -> Tensor:
    r"""``(d/2,)``: :math:`\omega_i = \text{base}^{-2i/d}`; ``d`` even, else ValueError."""
    if d < 2 or d % 2:
        raise ValueError(f"the sin/cos pairs need an even size of at least 2, got {d}")
    two_i = torch.arange(0, d, 2, dtype=torch.float64, device=device)
    return (base ** (-two_i / d)).to(dtype)                                   # (d/2,)


def sinusoidal_table(length: int, d_model: int, *, base: float = 10000.0, offset: int = 0,
                     dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> Tensor:
    r"""``(length, d_model)``, rows ``offset ..``: :math:`PE_{(pos,2i)} = \sin pos\,\omega_i`, :math:`PE_{(pos,2i+1)} = \cos pos\,\omega_i`."""
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
    r"""``(d_model, d_model)`` block-diagonal :math:`R_k` with :math:`PE_{pos+k} = R_k\, PE_{pos}` for every ``pos``."""
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
    r"""The paper's fixed encoding: ``x + PE[offset : offset + n]``; ``d_model`` even, else ValueError.

    ``max_len`` rows are precomputed (not in the state_dict), longer ones computed when asked. The paper's
    scaling of the embeddings by :math:`\sqrt{d_{model}}` is the model's business.
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
        """``(n, d_model)`` float32: positions ``offset .. offset + n - 1``."""
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
    """A trained table ``weight`` ``(max_len, d_model)`` (GPT-2's init): ``x + P[offset : offset + n]``.

    Positions past ``max_len - 1`` raise a ValueError.
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
        """``(n, d_model)``: rows ``offset .. offset + n - 1``."""
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
    r"""RoPE: :math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k`, pair ``i`` turned by :math:`pos\,\theta_i`.

    ``head_dim`` even, else ValueError. Pairs are interleaved (RoFormer), not half-split (GPT-NeoX,
    LLaMA): weights from one need permuting for the other.
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
    r"""``(H,)`` float64: :math:`s_h = 2^{-8h/H}`, h = 1..H. When ``H`` is no power of 2 (as the paper's code): the
    slopes of the largest power of two P < H, then every other slope of 2P for the remaining H - P heads."""
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
    r"""ALiBi: head ``h`` adds :math:`-s_h\,|i - j|` to the score of query ``i`` and key ``j``."""

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
# The one registry, in course order: the models' ``positional=``, notebook 11 and the widgets read it.
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
    """One of :data:`POSITIONAL_ENCODINGS` by name, built for a model of ``(d_model, num_heads, max_len)``."""
    check_positional(name)
    check_heads(d_model, num_heads, names=("d_model", "num_heads"))
    return ENCODING_CLASSES[name].build(d_model, num_heads, max_len)
