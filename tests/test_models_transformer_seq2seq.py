"""TransformerSeq2Seq: shapes, masks (padding, causality), decoding, errors, and a tiny overfit."""

from __future__ import annotations

import pytest
import torch

from seqlab.data.batching import pad_sequences
from seqlab.data.pairs import PairBatches, pair_vocabs
from seqlab.models.seq2seq import seq2seq_loss, translate
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq, TransformerSeq2SeqConfig
from seqlab.nn.transformer import Transformer
from seqlab.train import train

V = 13   # <pad> <bos> <eos> and ten digits


def model(seed: int = 0, **overrides) -> TransformerSeq2Seq:
    torch.manual_seed(seed)
    config = TransformerSeq2SeqConfig(V, V, d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                                      dim_feedforward=32, **overrides)
    return TransformerSeq2Seq(config).eval()


def ids(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, V, shape, generator=torch.Generator().manual_seed(seed))


def test_shapes_and_per_head_attention_weights():
    m = model()
    src, tgt_in = ids(3, 7), ids(3, 5, seed=1)
    lengths = torch.tensor([7, 4, 2])
    assert m(src, lengths, tgt_in).shape == (3, 5, V)
    logits, weights = m(src, lengths, tgt_in, return_attention=True)
    assert torch.equal(logits, m(src, lengths, tgt_in))
    assert weights["encoder"].shape == (2, 3, 2, 8, 8)               # 7 source positions + the <eos> marker
    assert weights["decoder_self"].shape == (2, 3, 2, 5, 5)
    assert weights["cross"].shape == (2, 3, 2, 5, 8)
    for w in weights.values():                                       # every row is a distribution
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)
    assert (weights["cross"][:, 1, :, :, 5:] == 0).all()              # padding is never read (4 digits + <eos>)
    assert (weights["encoder"][:, 2, :, :, 3:] == 0).all()
    assert (weights["cross"][:, 1, :, :, 4] > 0).all()                # the end marker is
    assert (weights["decoder_self"].triu(1) == 0).all()               # nor the future
    unmarked = model(mark_source_end=False)
    _, weights = unmarked(src, lengths, tgt_in, return_attention=True)
    assert weights["cross"].shape == (2, 3, 2, 5, 7) and (weights["cross"][:, 1, :, :, 4:] == 0).all()


def test_the_source_end_is_marked_with_eos_after_each_real_token():
    m = model()
    src, lengths = m.append_end(torch.tensor([[5, 6, 7], [8, 9, 0]]), torch.tensor([3, 2]))
    assert src.tolist() == [[5, 6, 7, 2], [8, 9, 2, 0]] and lengths.tolist() == [4, 3]
    assert m.append_end(torch.tensor([[5, 6]]), None)[0].tolist() == [[5, 6, 2]]


def test_built_from_seqlabs_own_transformer_not_torchs():
    m = model()
    assert isinstance(m.transformer, Transformer)
    banned = (torch.nn.Transformer, torch.nn.MultiheadAttention, torch.nn.LayerNorm,
              torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer)
    assert not [type(x).__name__ for x in m.modules() if isinstance(x, banned)]


def test_padding_does_not_change_the_real_outputs():
    m = model()
    src, tgt_in = ids(1, 5), ids(1, 6, seed=1)
    alone = m(src, [5], tgt_in)
    padded = torch.cat([src, ids(1, 4, seed=2)], dim=1)               # junk ids in the padded tail
    assert torch.allclose(m(padded, [5], tgt_in), alone, atol=1e-6)
    # in a batch with a longer source, the short one still gives the same logits
    batch = torch.cat([padded, ids(1, 9, seed=3)])
    both = m(batch, [5, 9], torch.cat([tgt_in, ids(1, 6, seed=4)]))
    assert torch.allclose(both[:1], alone, atol=1e-6)


def test_the_decoder_is_causal():
    m = model()
    src, tgt_in = ids(2, 6), ids(2, 8, seed=1)
    changed = tgt_in.clone()
    changed[:, 5:] = ids(2, 3, seed=5)
    before, after = m(src, None, tgt_in), m(src, None, changed)
    assert torch.equal(before[:, :5], after[:, :5])
    assert (before[:, 5:] - after[:, 5:]).abs().max() > 1e-3


def test_embeddings_scaled_sinusoidal_positions_and_tied_output():
    m = model()
    x = torch.tensor([[3, 3]])
    embedded = m.embed(x, m.src_embed)
    assert torch.allclose(embedded[0, 0], m.src_embed.weight[3] * 4.0 + torch.tensor([0.0, 1.0] * 8))   # sqrt(16) = 4; PE(0)
    assert not torch.allclose(embedded[0, 0], embedded[0, 1])       # the same token at two positions differs
    assert m.head.weight is m.tgt_embed.weight and m.src_embed is not m.tgt_embed
    untied = model(tie_output=False)
    body = sum(p.numel() for p in untied.transformer.parameters())
    assert sum(p.numel() for p in untied.parameters()) == body + 3 * V * 16 + V
    assert sum(p.numel() for p in m.parameters()) == body + 2 * V * 16 + V
    shared = model(share_embeddings=True)
    assert shared.src_embed is shared.tgt_embed is shared.head.weight or shared.head.weight is shared.src_embed.weight
    assert sum(p.numel() for p in shared.parameters()) == body + V * 16 + V


def test_greedy_is_the_step_by_step_argmax():
    m = model(seed=1)
    src, lengths = ids(4, 9, seed=2), torch.tensor([9, 6, 3, 1])
    outputs = m.greedy(src, lengths, max_len=7)
    for b, out in enumerate(outputs):
        tgt_in = torch.cat([torch.tensor([1]), out])[None]
        argmax = m(src[b:b + 1, :int(lengths[b])], None, tgt_in)[0].argmax(-1)
        if len(out) < 7:                                              # it stopped by writing <eos>
            assert argmax.tolist() == out.tolist() + [2]
        else:                                                         # cut at max_len
            assert argmax[:-1].tolist() == out.tolist()
    # a beam of one is greedy, and its log-probability is the model's own
    hyp = m.beam(src[1, :6], beam_size=1, max_len=7)[0]
    assert list(hyp.tokens) == outputs[1].tolist()
    if hyp.finished:
        assert hyp.log_prob == pytest.approx(m.log_prob(src[1, :6], outputs[1]), abs=1e-4)


def test_beam_log_probs_agree_with_teacher_forcing():
    m = model(seed=2)
    for hyp in m.beam(ids(6, seed=3), beam_size=3, max_len=6):
        if hyp.finished:
            assert hyp.log_prob == pytest.approx(m.log_prob(ids(6, seed=3), torch.tensor(hyp.tokens, dtype=torch.long)),
                                                 abs=1e-4)


def test_attention_and_alignment_of_one_translation():
    m = model()
    src, out = ids(6), ids(3, seed=1)
    weights = m.attention(src, out)
    assert weights["cross"].shape == (2, 2, 4, 7) and weights["encoder"].shape == (2, 2, 7, 7)
    assert torch.allclose(m.alignment(src, out), weights["cross"][-1].mean(0))
    assert torch.allclose(m.alignment(src, out, layer=0).sum(-1), torch.ones(4), atol=1e-5)


def test_tiny_overfit_reverses_its_training_strings():
    pairs = [("3141", "1413"), ("27182", "28172"), ("99", "99"), ("123456", "654321"), ("5050", "0505"),
             ("8", "8"), ("707", "707"), ("4321", "1234")]
    vocab, _ = pair_vocabs(pairs)
    encoded = [(vocab.encode(s), vocab.encode(t)) for s, t in pairs]
    torch.manual_seed(0)
    m = TransformerSeq2Seq(TransformerSeq2SeqConfig(len(vocab), len(vocab), d_model=32, nhead=2, dim_feedforward=64,
                                                    num_encoder_layers=1, num_decoder_layers=1,
                                                    norm_first=True))
    history = train(m, PairBatches(encoded, 8, seed=0), seq2seq_loss, max_steps=120, lr=5e-3, seed=0, progress=False)
    assert history.train_loss[-1] < 0.05 < history.train_loss[0]
    m.eval()
    assert [vocab.decode(o) for o in translate(m, [s for s, _ in encoded], max_len=8)] == [t for _, t in pairs]


def test_translate_and_the_loss_take_the_notebooks_batches():
    m = model()
    pairs = [(ids(n, seed=n), ids(n, seed=n + 10)) for n in (2, 5, 3)]
    batch = next(iter(PairBatches(pairs, 3, shuffle=False)))
    loss = seq2seq_loss(m, batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    src, lengths = pad_sequences([s for s, _ in pairs], 0)
    assert [o.tolist() for o in translate(m, [s for s, _ in pairs], max_len=4)] == \
           [o.tolist() for o in m.greedy(src, lengths, max_len=4)]


@pytest.mark.parametrize("call, message", [
    (lambda m: m(ids(2, 4).float(), None, ids(2, 3)), "dtype torch.long"),
    (lambda m: m(ids(4), None, ids(2, 3)), "shape (B, T)"),
    (lambda m: m(ids(2, 4), [4, 4, 4], ids(2, 3)), "lengths of shape (2,)"),
    (lambda m: m(ids(2, 4), [4, 0], ids(2, 3)), "between 1 and the padded length 4"),
    (lambda m: m(ids(2, 4), [4, 5], ids(2, 3)), "got [4, 5]"),
    (lambda m: m(torch.full((2, 4), V), None, ids(2, 3)), f"src holds id {V}, outside the vocabulary of {V}"),
    (lambda m: m(ids(2, 4), None, torch.full((2, 3), -1)), "tgt_in holds id -1"),
    (lambda m: m(ids(2, 4), None, ids(3, 3)), "same number of sequences, got 2 and 3"),
    (lambda m: m.beam(ids(2, 4)), "expected ids of shape (S,), got (2, 4)"),
    (lambda m: m.greedy(ids(2, 4), max_len=0), "max_len must be at least 1"),
])
def test_bad_input_gets_a_clear_error(call, message):
    with pytest.raises(ValueError) as err:
        call(model())
    assert message in str(err.value)


def test_bad_configurations_are_refused():
    with pytest.raises(ValueError, match=r"d_model must be divisible by nhead .*got d_model=18, nhead=4;"):
        TransformerSeq2Seq(TransformerSeq2SeqConfig(V, V, d_model=18, nhead=4))
    with pytest.raises(ValueError, match=r"d_model must be divisible by nhead .*got d_model=16, nhead=0;"):
        TransformerSeq2Seq(TransformerSeq2SeqConfig(V, V, d_model=16, nhead=0))
    with pytest.raises(ValueError, match="src_vocab_size=13 and tgt_vocab_size=14"):
        TransformerSeq2Seq(TransformerSeq2SeqConfig(V, V + 1, share_embeddings=True))
    with pytest.raises(ValueError, match="even d_model"):
        TransformerSeq2Seq(TransformerSeq2SeqConfig(V, V, d_model=15, nhead=3))
