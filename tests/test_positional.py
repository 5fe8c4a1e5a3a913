"""Positional encodings: the paper's formulas, the rotation property, RoPE's relative scores, ALiBi's slopes."""

from __future__ import annotations

import math
import re

import pytest
import torch

from seqlab.nn.attention import attend
from seqlab.nn.masks import causal_mask
from seqlab.nn.positional import (
    POSITIONAL_ENCODINGS,
    ALiBi,
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    PositionalEncoding,
    RoPE,
    RotaryPositionalEncoding,
    SinusoidalPositionalEncoding,
    alibi_slopes,
    frequencies,
    positional_encoding,
    rotate_pairs,
    sinusoidal_rotation,
    sinusoidal_table,
)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# -- sinusoidal ------------------------------------------------------------------------------------
def test_sinusoidal_table_is_the_papers_formula():
    d = 16
    pe = sinusoidal_table(50, d, dtype=torch.float64)
    assert pe.shape == (50, d)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * (d // 2), dtype=torch.float64))
    # the first pair turns by one radian per position, the last almost not at all
    assert pe[1, 0].item() == pytest.approx(math.sin(1.0)) and pe[1, d - 2].item() == pytest.approx(10000 ** (-(d - 2) / d))


def test_frequencies_are_a_geometric_sequence():
    omega = frequencies(8)
    assert torch.allclose(omega, torch.tensor([1.0, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75], dtype=torch.float64))
    with pytest.raises(ValueError, match="even size"):
        frequencies(5)


@pytest.mark.parametrize("d_model", [4, 16, 64])
def test_shift_by_k_is_one_fixed_block_rotation(d_model):
    pe = sinusoidal_table(200, d_model, dtype=torch.float64)
    for k in (1, 3, 17, -5):
        R = sinusoidal_rotation(k, d_model)
        # block-diagonal: nothing outside the 2x2 blocks of (2i, 2i+1)
        blocks = torch.block_diag(*[R[i:i + 2, i:i + 2] for i in range(0, d_model, 2)])
        assert torch.equal(R, blocks)
        assert torch.allclose(R @ R.T, torch.eye(d_model, dtype=torch.float64), atol=1e-12)   # a rotation
        assert torch.linalg.det(R).item() == pytest.approx(1.0)
        # the same R_k for every position: PE(pos + k) = R_k PE(pos)
        positions = range(max(0, -k), 200 - max(k, 0))
        shifted = pe[[p + k for p in positions]]
        predicted = pe[list(positions)] @ R.T
        assert (shifted - predicted).abs().max().item() < 1e-6


def test_rotation_by_zero_is_the_identity_and_rotations_compose():
    assert torch.allclose(sinusoidal_rotation(0, 8), torch.eye(8, dtype=torch.float64))
    assert torch.allclose(sinusoidal_rotation(3, 8) @ sinusoidal_rotation(4, 8), sinusoidal_rotation(7, 8), atol=1e-12)


def test_odd_d_model_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match=r"even d_model .* got d_model=7"):
        SinusoidalPositionalEncoding(7)
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_table(10, 5)
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_rotation(1, 3)


def test_sinusoidal_module_adds_the_table_with_offsets_and_beyond_max_len():
    pe = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.randn(2, 6, 8)
    assert torch.allclose(pe(x), x + sinusoidal_table(6, 8)[None])
    assert torch.allclose(pe(x, offset=3), x + sinusoidal_table(9, 8)[None, 3:])
    # no maximum length in the formula: positions past the precomputed table are computed
    long = torch.zeros(1, 25, 8)
    assert torch.allclose(pe(long)[0], sinusoidal_table(25, 8), atol=1e-6)
    assert torch.allclose(pe(long[:, :4], offset=20)[0], sinusoidal_table(24, 8)[20:], atol=1e-6)
    assert pe(x.double()).dtype == torch.float64
    assert pe.state_dict() == {} and list(pe.parameters()) == []       # fixed, and not saved
    with pytest.raises(ValueError, match=r"\(B, n, 8\).*got \(2, 6, 4\)"):
        pe(torch.randn(2, 6, 4))


def test_sinusoidal_dot_product_depends_on_distance_only():
    pe = sinusoidal_table(100, 32, dtype=torch.float64)
    gram = pe @ pe.T
    for k in (0, 1, 5, 20):
        diagonal = torch.diagonal(gram, offset=k)
        assert (diagonal - diagonal[0]).abs().max().item() < 1e-9
    assert torch.allclose(torch.diagonal(gram), torch.full((100,), 16.0, dtype=torch.float64))   # |PE|^2 = d/2
    # and is largest at distance 0, decreasing over the first few steps
    assert gram[50, 50] > gram[50, 51] > gram[50, 52] > gram[50, 53]


# -- learned ---------------------------------------------------------------------------------------
def test_learned_table_is_a_trainable_parameter():
    torch.manual_seed(0)
    pe = LearnedPositionalEncoding(12, 4)
    assert [name for name, _ in pe.named_parameters()] == ["weight"] and pe.weight.shape == (12, 4)
    assert pe.weight.std().item() == pytest.approx(0.02, rel=0.5)
    x = torch.randn(3, 5, 4)
    assert torch.equal(pe(x), x + pe.weight[:5][None])
    assert torch.equal(pe(x, offset=7), x + pe.weight[7:12][None])
    pe(x).sum().backward()
    assert pe.weight.grad[:5].abs().sum() > 0 and pe.weight.grad[5:].abs().sum() == 0   # only used rows learn


def test_learned_table_too_short_names_both_numbers():
    pe = LearnedPositionalEncoding(8, 4)
    with pytest.raises(ValueError, match=r"max_len=8 .* 10 tokens .* positions up to 9"):
        pe(torch.zeros(1, 10, 4))
    with pytest.raises(ValueError, match=r"max_len=8 .* offset 6 .* positions up to 8"):
        pe(torch.zeros(1, 3, 4), offset=6)
    with pytest.raises(ValueError, match=r"\(B, n, 4\)"):
        pe(torch.zeros(1, 3, 5))


# -- RoPE ------------------------------------------------------------------------------------------
def test_rope_rotates_interleaved_pairs_by_position_times_theta():
    rope = RotaryPositionalEncoding(4)
    q = torch.tensor([[[[1.0, 0.0, 1.0, 0.0]] * 3]], dtype=torch.float64)     # (1, 1, 3, 4)
    q_rot, _ = rope.rotate(q, q)
    theta = [1.0, 10000 ** -0.5]
    for pos in range(3):
        expected = [math.cos(pos * theta[0]), math.sin(pos * theta[0]), math.cos(pos * theta[1]), math.sin(pos * theta[1])]
        assert torch.allclose(q_rot[0, 0, pos], torch.tensor(expected, dtype=torch.float64))
    assert RoPE is RotaryPositionalEncoding


def test_rope_score_depends_only_on_the_offset():
    rope = RotaryPositionalEncoding(8)
    q, k = randn(8, seed=1), randn(8, seed=2)
    theta = frequencies(8)

    def score(m, n):
        return (rotate_pairs(q[None], torch.tensor([m]), theta) @ rotate_pairs(k[None], torch.tensor([n]), theta).T).item()

    for delta in (-7, 0, 3, 40):
        scores = [score(n + delta, n) for n in (0, 5, 100, 1000) if n + delta >= 0]
        assert max(scores) - min(scores) < 1e-9
    assert abs(score(3, 0) - score(0, 3)) > 1e-3          # but it does tell m - n from n - m
    # the same through the module's hook: q_m . k_n for all m, n is constant along diagonals
    Q = q.expand(1, 1, 12, 8).contiguous()
    K = k.expand(1, 1, 12, 8).contiguous()
    Q_rot, K_rot = rope.rotate(Q, K)
    scores = (Q_rot @ K_rot.transpose(-2, -1))[0, 0]
    for offset in range(-11, 12):
        diagonal = torch.diagonal(scores, offset=offset)
        assert (diagonal - diagonal[0]).abs().max().item() < 1e-9
    assert torch.allclose(Q_rot.norm(dim=-1), Q.norm(dim=-1))                # rotations keep lengths


def test_rope_with_fewer_queries_is_the_tail_of_the_full_rotation():
    rope = RotaryPositionalEncoding(6)
    q, k = randn(2, 3, 9, 6, seed=3), randn(2, 3, 9, 6, seed=4)
    q_full, k_full = rope.rotate(q, k)
    q_tail, k_again = rope.rotate(q[:, :, -2:], k)                            # 2 new queries, 9 keys (a cache)
    assert torch.allclose(q_tail, q_full[:, :, -2:], atol=1e-12) and torch.allclose(k_again, k_full)
    q_one, _ = rope.rotate(q[:, :, -1:], k)
    assert torch.allclose(q_one, q_full[:, :, -1:], atol=1e-12)


def test_rope_errors():
    with pytest.raises(ValueError, match="head_dim must be even, got head_dim=5"):
        RotaryPositionalEncoding(5)
    rope = RotaryPositionalEncoding(4)
    with pytest.raises(ValueError, match=r"head_dim=4.*\(1, 1, 2, 6\)"):
        rope.rotate(torch.zeros(1, 1, 2, 6), torch.zeros(1, 1, 2, 6))
    with pytest.raises(ValueError, match="n=3 queries and m=2 keys"):
        rope.rotate(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 2, 4))
    assert rope.state_dict() == {}
    x = torch.randn(1, 3, 4)
    assert rope(x) is x                                                       # nothing added to the embeddings


def test_rope_keeps_float32():
    rope = RotaryPositionalEncoding(8)
    q, k = rope.rotate(torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8))
    assert q.dtype == k.dtype == torch.float32


# -- ALiBi -----------------------------------------------------------------------------------------
def test_alibi_slopes_are_the_papers():
    assert alibi_slopes(8).tolist() == [1 / 2 ** h for h in range(1, 9)]
    assert alibi_slopes(4).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256]
    assert alibi_slopes(1).tolist() == [1 / 256]
    # not a power of two: the 4-head slopes, then every other slope of 8 heads
    assert alibi_slopes(6).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
    assert len(alibi_slopes(12)) == 12 and len(set(alibi_slopes(12).tolist())) == 12
    with pytest.raises(ValueError, match="num_heads >= 1"):
        alibi_slopes(0)


def test_alibi_bias_is_minus_slope_times_distance():
    alibi = ALiBi(2)
    bias = alibi.score_bias(4, 4)
    assert bias.shape == (2, 4, 4) and bias.dtype == torch.float32
    slopes = alibi_slopes(2)
    for h in range(2):
        for i in range(4):
            for j in range(4):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j))
    assert (torch.diagonal(bias, dim1=1, dim2=2) == 0).all()
    # queries are the last n of m positions
    assert torch.equal(alibi.score_bias(2, 7), alibi.score_bias(7, 7)[:, -2:])
    assert alibi.score_bias(3, 3, dtype=torch.float64).dtype == torch.float64
    with pytest.raises(ValueError, match="n=5, m=3"):
        alibi.score_bias(5, 3)
    assert alibi.state_dict() == {}


# -- the hooks together: a cached step equals the tail of the full pass -----------------------------
def reference_attention(positional: PositionalEncoding, x: torch.Tensor, heads: int, *, n_new: int | None = None):
    """A bare multi-head causal attention (no projections) that uses all three hooks."""
    B, m, d = x.shape
    x = positional(x)
    h = x.view(B, m, heads, d // heads).transpose(1, 2)                       # (B, H, m, d_h)
    n = m if n_new is None else n_new
    q, k = positional.rotate(h[:, :, m - n:], h)
    mask = causal_mask(n, m)
    bias = positional.score_bias(n, m, dtype=x.dtype)
    if bias is not None:
        mask = torch.zeros(n, m, dtype=x.dtype).masked_fill(~mask, float("-inf")) + bias
    out, _ = attend(q, k, h, mask)
    return out


@pytest.mark.parametrize("name", POSITIONAL_ENCODINGS)
def test_every_encoding_supports_a_kv_cache(name):
    torch.manual_seed(0)
    positional = positional_encoding(name, d_model=8, num_heads=2, max_len=16)
    x = torch.randn(2, 10, 8)
    full = reference_attention(positional, x, 2)
    # the last 3 queries against all 10 keys: embeddings of the new tokens get offset 7
    step_x = torch.cat([positional(x[:, :7]), positional(x[:, 7:], offset=7)], dim=1)
    cached = reference_attention(_PrecomputedEmbeddings(positional), step_x, 2, n_new=3)
    assert torch.allclose(cached, full[:, :, -3:], atol=1e-6)


class _PrecomputedEmbeddings(PositionalEncoding):
    """The wrapped encoding's rotate and score_bias, with embeddings already encoded."""

    def __init__(self, inner: PositionalEncoding):
        super().__init__()
        self.inner = inner

    def rotate(self, q, k):
        return self.inner.rotate(q, k)

    def score_bias(self, n, m, *, device=None, dtype=torch.float32):
        return self.inner.score_bias(n, m, device=device, dtype=dtype)


@pytest.mark.parametrize("name", [n for n in POSITIONAL_ENCODINGS if n != "none"])
def test_every_encoding_but_none_breaks_permutation_equivariance(name):
    torch.manual_seed(0)
    positional = positional_encoding(name, d_model=8, num_heads=2, max_len=16)
    with torch.no_grad():
        if name == "learned":
            positional.weight.normal_()
    x = torch.randn(1, 6, 8)
    order = torch.tensor([3, 0, 5, 1, 4, 2])

    def attention(x):                                                          # no causal mask here
        B, m, d = x.shape
        h = positional(x).view(B, m, 2, 4).transpose(1, 2)
        q, k = positional.rotate(h, h)
        out, _ = attend(q, k, h, positional.score_bias(m, m))
        return out

    gap = (attention(x)[:, :, order] - attention(x[:, order])).abs().max().item()
    assert gap > 1e-3


def test_without_positions_attention_is_permutation_equivariant():
    none = positional_encoding("none", d_model=8, num_heads=2, max_len=16)
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(0))
    order = torch.tensor([3, 0, 5, 1, 4, 2])

    def attention(x):
        h = none(x).view(1, 6, 2, 4).transpose(1, 2)
        out, _ = attend(*none.rotate(h, h), h, none.score_bias(6, 6))
        return out

    assert (attention(x)[:, :, order] - attention(x[:, order])).abs().max().item() < 1e-6


# -- the factory -----------------------------------------------------------------------------------
def test_factory_builds_each_encoding():
    kinds = {"none": NoPositionalEncoding, "sinusoidal": SinusoidalPositionalEncoding,
             "learned": LearnedPositionalEncoding, "rope": RotaryPositionalEncoding, "alibi": ALiBi}
    assert set(kinds) == set(POSITIONAL_ENCODINGS)
    for name, cls in kinds.items():
        assert type(positional_encoding(name, d_model=12, num_heads=3, max_len=20)) is cls
    assert positional_encoding("rope", d_model=12, num_heads=3, max_len=20).head_dim == 4
    assert positional_encoding("learned", d_model=12, num_heads=3, max_len=20).weight.shape == (20, 12)
    assert positional_encoding("alibi", d_model=12, num_heads=3, max_len=20).slopes.shape == (3,)
    assert positional_encoding("sinusoidal", d_model=12, num_heads=3, max_len=20).d_model == 12


def test_factory_errors():
    with pytest.raises(ValueError, match=r"unknown positional encoding 'absolute'; expected one of \('none'"):
        positional_encoding("absolute", d_model=8, num_heads=2, max_len=4)
    for bad in (None, ["rope"], "RoPE"):                 # any unknown value ends in the same error
        with pytest.raises(ValueError, match=rf"unknown positional encoding {re.escape(repr(bad))}; expected one of "
                                             rf"{re.escape(repr(POSITIONAL_ENCODINGS))}"):
            positional_encoding(bad, d_model=8, num_heads=2, max_len=4)
    with pytest.raises(ValueError, match=r"d_model must be divisible by num_heads \(each head gets d_model / "
                                         r"num_heads features\), got d_model=10, num_heads=4; num_heads could be "
                                         r"one of \[1, 2, 5, 10\]"):
        positional_encoding("rope", d_model=10, num_heads=4, max_len=4)
    with pytest.raises(ValueError, match="head_dim must be even, got head_dim=3"):
        positional_encoding("rope", d_model=6, num_heads=2, max_len=4)
    with pytest.raises(ValueError, match="even d_model"):
        positional_encoding("sinusoidal", d_model=9, num_heads=3, max_len=4)


# -- inside seqlab's MultiheadAttention ---------------------------------------------------------------
@pytest.mark.parametrize("name", POSITIONAL_ENCODINGS)
def test_multihead_attention_takes_every_encoding_and_keeps_torchs_state_dict(name):
    from seqlab.nn.multihead import MultiheadAttention

    torch.manual_seed(0)
    positional = positional_encoding(name, d_model=16, num_heads=4, max_len=32)
    plain = MultiheadAttention(16, 4, batch_first=True)
    attention = MultiheadAttention(16, 4, batch_first=True)
    assert attention.state_dict().keys() == torch.nn.MultiheadAttention(16, 4, batch_first=True).state_dict().keys()
    attention.load_state_dict(plain.state_dict())
    x = positional(torch.randn(2, 7, 16))
    out, weights = attention(x, x, x, is_causal=True, attn_mask=~causal_mask(7), average_attn_weights=False,
                             **positional.attention_args(7, 7))               # the owner hands in its hooks
    assert out.shape == (2, 7, 16) and weights.shape == (2, 4, 7, 7)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 7)) and (weights.triu(1) == 0).all()
    # the hooks are what changes the result: the same weights without them give the plain layer's output
    same, _ = plain(x, x, x, attn_mask=~causal_mask(7))
    if name in ("none", "sinusoidal", "learned"):                     # nothing inside attention
        assert torch.allclose(out, same, atol=1e-6)
    else:
        assert (out - same).abs().max() > 1e-4


def test_multihead_attention_with_rope_scores_depend_on_offsets_only():
    from seqlab.nn.multihead import MultiheadAttention

    torch.manual_seed(0)
    attention = MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 1, 8).expand(1, 10, 8)                         # the same token at every position
    _, weights = attention(x, x, x, average_attn_weights=False, rotate=RotaryPositionalEncoding(4).rotate)
    # log w_ij - log w_ii = s_ij - s_ii (the row's normaliser cancels), which must depend on j - i only
    log_w = torch.log(weights[0])                                      # (H, n, n)
    relative = log_w - torch.diagonal(log_w, dim1=-2, dim2=-1)[..., None]
    for offset in range(-9, 10):
        diagonal = torch.diagonal(relative, offset=offset, dim1=-2, dim2=-1)      # (H, n - |offset|)
        assert (diagonal - diagonal[..., :1]).abs().max() < 1e-4
    assert relative.abs().max() > 1e-3                                 # and the offset does matter


def test_each_class_says_where_position_enters_and_builds_itself_for_a_model():
    from seqlab.nn.positional import ENCODING_CLASSES, HOOKS

    hooks = {name: cls.hooks() for name, cls in ENCODING_CLASSES.items()}
    assert hooks == {"none": (), "sinusoidal": ("forward",), "learned": ("forward",), "rope": ("rotate",),
                     "alibi": ("score_bias",)}
    assert HOOKS == ("forward", "rotate", "score_bias")
    assert [cls.label for cls in ENCODING_CLASSES.values()] == ["NoPE", "sinusoidal", "learned", "RoPE", "ALiBi"]
    assert POSITIONAL_ENCODINGS == tuple(ENCODING_CLASSES)
    for name, cls in ENCODING_CLASSES.items():                  # the factory is the class's own build
        built = cls.build(12, 3, 20)
        assert type(built) is cls and type(positional_encoding(name, d_model=12, num_heads=3, max_len=20)) is cls
    # attention_args hands in exactly the hooks the class overrides
    assert set(positional_encoding("rope", d_model=8, num_heads=2, max_len=4).attention_args(3, 3)) == {"rotate"}
    assert set(positional_encoding("alibi", d_model=8, num_heads=2, max_len=4).attention_args(3, 3)) == {"score_bias"}
    assert positional_encoding("learned", d_model=8, num_heads=2, max_len=4).attention_args(3, 3) == {}
