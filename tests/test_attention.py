"""seqlab.nn.attention: the four scores, masking, and the attending encoder-decoder."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from seqlab.nn.attention import SCORES, Attention
from seqlab.nn.masks import padding_mask
from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("score", SCORES)
def test_weights_are_a_distribution_and_context_their_average(score):
    torch.manual_seed(0)
    attention = Attention(score, 6, 6)
    queries, memory = randn(2, 3, 6, seed=1), randn(2, 5, 6, seed=2)
    context, weights = attention(queries, memory)
    assert weights.shape == (2, 3, 5) and context.shape == (2, 3, 6)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3)) and (weights > 0).all()
    assert torch.allclose(context, torch.einsum("bts,bsd->btd", weights, memory), atol=1e-6)


def test_each_score_is_its_formula():
    torch.manual_seed(0)
    s, h = randn(1, 1, 4, seed=3), randn(1, 3, 4, seed=4)
    dot = torch.stack([s[0, 0] @ h[0, j] for j in range(3)])
    assert torch.allclose(Attention("dot", 4, 4).scores(s, h)[0, 0], dot, atol=1e-6)
    assert torch.allclose(Attention("scaled", 4, 4).scores(s, h)[0, 0], dot / 2, atol=1e-6)
    general = Attention("general", 4, 4)
    with torch.no_grad():
        general.W.weight.copy_(torch.eye(4))                              # W = I: the dot score
    assert torch.allclose(general.scores(s, h)[0, 0], dot, atol=1e-6)
    additive = Attention("additive", 4, 4, attention_size=5)
    by_hand = torch.stack([additive.v.weight[0] @ torch.tanh(additive.W_s.weight @ s[0, 0] + additive.W_h.weight @ h[0, j]
                                                             + additive.W_h.bias) for j in range(3)])
    assert torch.allclose(additive.scores(s, h)[0, 0], by_hand, atol=1e-6)


def test_scaled_matches_torchs_scaled_dot_product_attention():
    q, k = randn(2, 4, 8, seed=5), randn(2, 6, 8, seed=6)
    mask = padding_mask(torch.tensor([6, 3]), 6)
    context, _ = Attention("scaled", 8, 8)(q, k, mask)
    reference = F.scaled_dot_product_attention(q, k, k, attn_mask=mask[:, None, :])
    assert torch.allclose(context, reference, atol=1e-6)


def test_padding_gets_zero_weight_and_changes_nothing():
    attention = Attention("dot", 4, 4)
    q, memory = randn(2, 3, 4, seed=7), randn(2, 5, 4, seed=8)
    mask = padding_mask(torch.tensor([5, 2]), 5)
    context, weights = attention(q, memory, mask)
    assert (weights[1, :, 2:] == 0).all()
    alone, _ = attention(q[1:], memory[1:, :2])
    assert torch.allclose(context[1], alone[0], atol=1e-6)


def test_attention_errors_are_clear():
    with pytest.raises(ValueError, match=r"score must be one of \('dot', 'scaled', 'general', 'additive'\), got 'cosine'"):
        Attention("cosine", 4, 4)
    with pytest.raises(ValueError, match=r"the 'dot' score needs queries and memory of the same size, got 4 and 6"):
        Attention("dot", 4, 6)
    attention = Attention("general", 4, 6)
    with pytest.raises(ValueError, match=r"expects queries of shape \(B, T, 4\), got \(2, 3, 5\)"):
        attention(torch.zeros(2, 3, 5), torch.zeros(2, 7, 6))
    with pytest.raises(ValueError, match=r"expects memory of shape \(2, S, 6\) \(B as in the queries\), got \(3, 7, 6\)"):
        attention(torch.zeros(2, 3, 4), torch.zeros(3, 7, 6))
    with pytest.raises(ValueError, match=r"boolean mask of shape \(2, 7\).*got torch.int64 of shape \(2, 7\)"):
        attention(torch.zeros(2, 3, 4), torch.zeros(2, 7, 6), torch.ones(2, 7, dtype=torch.long))


@pytest.mark.parametrize("score", SCORES)
def test_attending_seq2seq_pads_translates_and_aligns(score):
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(12, 12, hidden_size=16, embed_size=8, attention=score)).eval()
    sources = [torch.randint(3, 12, (n,), generator=torch.Generator().manual_seed(n)) for n in (5, 2, 7)]
    src = torch.zeros(3, 7, dtype=torch.long)
    for b, s in enumerate(sources):
        src[b, :len(s)] = s
    batched = model.greedy(src, torch.tensor([5, 2, 7]), max_len=6)
    for source, output in zip(sources, batched):                      # padding changes no translation
        assert torch.equal(model.greedy(source[None], max_len=6)[0], output)
        weights = model.alignment(source, output)
        assert weights.shape == (len(output) + 1, len(source))
        assert torch.allclose(weights.sum(-1), torch.ones(len(output) + 1), atol=1e-6)
        hyps = model.beam(source, beam_size=2, max_len=6)
        for h in hyps:
            if h.finished:
                assert h.log_prob == pytest.approx(model.log_prob(source, torch.tensor(h.tokens, dtype=torch.long)), abs=1e-4)


def test_a_model_without_attention_says_so():
    model = Seq2Seq(Seq2SeqConfig(12, 12, hidden_size=8, embed_size=4))
    with pytest.raises(ValueError, match=r"this model has no attention"):
        model.alignment(torch.tensor([3, 4]), torch.tensor([4, 3]))
    assert math.isfinite(model.log_prob(torch.tensor([3, 4]), torch.tensor([4, 3])))


@pytest.mark.parametrize("score", SCORES)
def test_an_all_padding_memory_reads_nothing_and_stays_finite(score):
    torch.manual_seed(0)
    attention = Attention(score, 4, 4)
    q, memory = randn(2, 3, 4, seed=9).requires_grad_(), randn(2, 7, 4, seed=10).requires_grad_()
    context, weights = attention(q, memory, padding_mask(torch.tensor([7, 0]), 7))
    assert (weights[1] == 0).all() and (context[1] == 0).all()
    assert torch.allclose(weights[0].sum(-1), torch.ones(3))
    context.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(memory.grad).all()


def test_with_attend_runs_a_one_query_function_inside_the_trained_decoder():
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(12, 12, hidden_size=16, embed_size=8, attention="dot")).eval()
    sources = [torch.randint(3, 12, (n,), generator=torch.Generator().manual_seed(n)) for n in (5, 2, 7)]
    src = torch.zeros(3, 7, dtype=torch.long)
    for b, s in enumerate(sources):
        src[b, :len(s)] = s
    calls = []

    def attend(s, H):                                   # notebook 8's exercise, written out
        calls.append(H.shape[0])
        weights = torch.softmax(H @ s, dim=0)
        return weights, weights @ H

    twin = model.with_attend(attend)
    assert model.decoder.attention.__class__ is Attention and not twin.training     # the model is left alone
    lengths = torch.tensor([5, 2, 7])
    assert all(torch.equal(a, b) for a, b in zip(model.greedy(src, lengths, max_len=6), twin.greedy(src, lengths, max_len=6)))
    assert set(calls) == {5, 2, 7}                      # padding never reaches the function
    output = model.greedy(sources[2][None], max_len=6)[0]
    torch.testing.assert_close(twin.alignment(sources[2], output), model.alignment(sources[2], output))

    def uniform(s, H):                                  # a different attention gives different weights
        weights = torch.full((H.shape[0],), 1.0 / H.shape[0])
        return weights, weights @ H

    flat = model.with_attend(uniform).alignment(sources[2], output)
    assert torch.allclose(flat, torch.full_like(flat, 1 / 7))
    with pytest.raises(ValueError, match=r"weights of shape \(7,\) and a context of shape \(16,\), got \(16,\) and \(7,\)"):
        model.with_attend(lambda s, H: (torch.zeros(16), torch.zeros(7))).alignment(sources[2], output)
    with pytest.raises(ValueError, match="replaces dot-product attention"):
        Seq2Seq(Seq2SeqConfig(12, 12, hidden_size=16, embed_size=8, attention="general")).with_attend(attend)
    with pytest.raises(TypeError, match="needs a function"):
        model.with_attend(42)
