"""Notebook 13's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import EXERCISES, check, exercises_of

from exercise_helpers import failure_message


def test_the_references_pass():
    assert set(exercises_of("nb13_transformer_model")) == {"predict_encoder_layer_parameters", "cross_attention_sublayer",
                                                             "decoder_block"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb13_transformer_model").items())


def count(attention=4, biases=True, ffn_matrices=2, norms=2, betas=True, cross=False):
    def f(d, d_ff):
        n = attention * d * d + (attention * d if biases else 0)
        n += ffn_matrices * d * d_ff + ((d_ff + d) if ffn_matrices == 2 else d_ff) * biases
        n += norms * d * (2 if betas else 1)
        if cross:
            n += 4 * d * d + 4 * d + 2 * d
        return n
    return f


def test_the_right_formula_passes_and_matches_the_papers_layer():
    assert check("predict_encoder_layer_parameters", count())
    assert EXERCISES["predict_encoder_layer_parameters"].reference(512, 2048) == 3_152_384
    # the layer inside torch.nn.Transformer() has the same count
    torch_layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, device="meta")
    assert sum(p.numel() for p in torch_layer.parameters()) == 3_152_384
    assert EXERCISES["predict_encoder_layer_parameters"].reference(64, 256, 4) == EXERCISES["predict_encoder_layer_parameters"].reference(64, 256)


@pytest.mark.parametrize("wrong, hint", [
    (count(norms=0), "you left out the two LayerNorms"),
    (count(betas=False), "gamma and beta (you counted one of them)"),
    (count(attention=3), "(you counted three)"),
    (count(biases=False), "the biases are missing"),
    (count(ffn_matrices=1), "the FFN has two matrices"),
    (count(cross=True), "cross-attention"),
    (lambda d, d_ff: float(count()(d, d_ff)), "return a whole number"),
    (lambda d, d_ff: 12 * d * d, "off by"),
])
def test_parameter_count_hints_name_the_missing_piece_and_both_numbers(wrong, hint):
    text = failure_message("predict_encoder_layer_parameters", wrong)
    assert hint in text
    if "whole number" not in hint:
        assert "measured 3,152,384" in text                          # the first case is the paper's layer


def test_ffn_bias_hint():
    def no_ffn_biases(d, d_ff):
        return 4 * d * d + 4 * d + 2 * d * d_ff + 4 * d
    assert "the FFN has biases too" in failure_message("predict_encoder_layer_parameters", no_ffn_biases)


def test_the_cross_attention_sublayer_reference_is_the_decoder_layers_second_sublayer():
    """The reference is what TransformerDecoderLayer computes between its self-attention and its FFN."""
    from seqlab.nn.transformer import TransformerDecoderLayer
    for norm_first in (False, True):
        torch.manual_seed(0)
        layer = TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first).double()
        y, memory = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64)
        padding = torch.tensor([[False] * 5, [False] * 2 + [True] * 3])
        got = EXERCISES["cross_attention_sublayer"].reference(y, memory, padding, layer.multihead_attn, layer.norm2,
                                                              norm_first)
        expected, _ = layer.cross_attention_sublayer(y, memory, memory_key_padding_mask=padding)
        assert torch.allclose(got, expected, atol=1e-12)


def att(attention, q, kv, mask):
    return attention(q, kv, kv, key_padding_mask=mask, need_weights=False)[0]


CROSS_MISTAKES = {
    "always post-norm": lambda y, M, p, a, LN, first: LN(y + att(a, y, M, p)),
    "always pre-norm": lambda y, M, p, a, LN, first: y + att(a, LN(y), M, p),
    "self-attention": lambda y, M, p, a, LN, first: (y + att(a, LN(y), LN(y), None)) if first
    else LN(y + att(a, y, y, None)),
    "no padding mask": lambda y, M, p, a, LN, first: (y + att(a, LN(y), M, None)) if first
    else LN(y + att(a, y, M, None)),
    "inverted mask": lambda y, M, p, a, LN, first: (y + att(a, LN(y), M, ~p)) if first else LN(y + att(a, y, M, ~p)),
    "queries from memory": lambda y, M, p, a, LN, first: att(a, M, y, None),
    "the tuple": lambda y, M, p, a, LN, first: a(y, M, M, key_padding_mask=p),
    "no residual": lambda y, M, p, a, LN, first: att(a, LN(y), M, p) if first else LN(att(a, y, M, p)),
    "memory normalised": lambda y, M, p, a, LN, first: (y + att(a, LN(y), LN(M), p)) if first
    else LN(y + att(a, y, M, p)),
    "pre-norm sum normalised": lambda y, M, p, a, LN, first: LN(y + att(a, LN(y), M, p)) if first
    else LN(y + att(a, y, M, p)),
    "normalised residual": lambda y, M, p, a, LN, first: (LN(y) + att(a, LN(y), M, p)) if first
    else LN(y + att(a, y, M, p)),
    "post-norm without the norm": lambda y, M, p, a, LN, first: (y + att(a, LN(y), M, p)) if first
    else y + att(a, y, M, p),
    "only the output normalised": lambda y, M, p, a, LN, first: (y + att(a, LN(y), M, p)) if first
    else y + LN(att(a, y, M, p)),
}


@pytest.mark.parametrize("mistake, hint", [
    ("always post-norm", "that is post-norm; with norm_first=True"),
    ("always pre-norm", "that is pre-norm; with norm_first=False"),
    ("self-attention", "that is self-attention on y"),
    ("no padding mask", "the padded source positions are read"),
    ("inverted mask", "the mask is inverted"),
    ("queries from memory", "one row per source position (5)"),
    ("the tuple", "you returned a tuple"),
    ("no residual", "the residual is missing"),
    ("memory normalised", "the memory is not normalised again"),
    ("pre-norm sum normalised", "pre-norm does not normalise the sum"),
    ("normalised residual", "add the *un*-normalised y"),
    ("post-norm without the norm", "post-norm normalises the sum"),
    ("only the output normalised", "not only the attention's output"),
])
def test_cross_attention_sublayer_hints(mistake, hint):
    text = failure_message("cross_attention_sublayer", CROSS_MISTAKES[mistake])
    assert hint in text
    assert "tensor([[" not in text.split("Hint: ")[1]           # (a returned tuple's repr is cut by _core, not ours)


def test_the_missing_mask_hint_says_how_much_weight_went_to_padding():
    text = failure_message("cross_attention_sublayer", CROSS_MISTAKES["no padding mask"])
    share = float(text.split("puts up to ")[1].split(" of its weight")[0])
    assert 0.05 < share < 1                                   # a visible share of the weight, not a rounding error


def test_an_unwritten_prediction_gets_no_hint_and_no_count():
    def unwritten(d_model, d_ff):
        raise NotImplementedError
    said = repr(check("predict_encoder_layer_parameters", unwritten))
    assert "no prediction yet" in said and "3,152,384" not in said and "3152384" not in said


# -- decoder_block ------------------------------------------------------------------------------------------------
from seqlab.exercises.nb13_transformer_model import DECODER_SLIPS, decoder_block_slip, decoding_with  # noqa: E402


@pytest.mark.parametrize("slip", sorted(DECODER_SLIPS))
def test_each_decoder_slip_gets_its_diagnosis(slip):
    assert DECODER_SLIPS[slip] in failure_message("decoder_block", decoder_block_slip(slip))


def test_decoder_block_other_mistakes():
    ref = EXERCISES["decoder_block"].reference

    def as_tuple(y, memory, padding, layer):
        return ref(y, memory, padding, layer), None
    assert "you returned a tuple" in failure_message("decoder_block", as_tuple)

    def no_ffn_residual(y, memory, padding, layer):
        T = y.shape[1]
        h = layer.norm1(y)
        y = y + layer.self_attn(h, h, h, attn_mask=torch.ones(T, T, dtype=torch.bool).triu(1), need_weights=False)[0]
        h = layer.norm2(y)
        y = y + layer.multihead_attn(h, memory, memory, key_padding_mask=padding, need_weights=False)[0]
        return layer.linear2(layer.activation(layer.linear1(layer.norm3(y))))
    assert "the FFN sublayer's residual is missing" in failure_message("decoder_block", no_ffn_residual)


def test_the_library_layer_is_the_reference_and_the_reverser_runs_on_a_plugged_block():
    """The reference equals seqlab's pre-norm TransformerDecoderLayer; plugged into the trained reverser it decodes
    exactly as the model does, and a slip changes what it writes."""
    from seqlab.data import make_reversals
    from seqlab.data.pairs import pair_vocabs
    from seqlab.pretrained import load_reverser

    y, memory, padding, layer = EXERCISES["decoder_block"].cases[0].args
    with torch.no_grad():
        library = layer(y, memory, tgt_is_causal=True, memory_key_padding_mask=padding)
        assert torch.allclose(EXERCISES["decoder_block"].reference(y, memory, padding, layer), library, atol=1e-12)
    model, _ = load_reverser("reverser-transformer")
    vocab, _ = pair_vocabs(make_reversals(50_000, min_len=2, max_len=24, seed=0))
    src = torch.stack([vocab.encode(s) for s in ("0123456789", "9876501234")])
    own = model.greedy(src, max_len=12)
    model.decode = decoding_with(model, EXERCISES["decoder_block"].reference)
    plugged = model.greedy(src, max_len=12)
    model.decode = decoding_with(model, decoder_block_slip("keys and values from the decoder"))
    slipped = model.greedy(src, max_len=12)
    del model.decode
    assert all(torch.equal(a, b) for a, b in zip(own, plugged))
    assert not all(torch.equal(a, b) for a, b in zip(own, slipped))
