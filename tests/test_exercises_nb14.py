"""Notebook 14's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest
import torch

from seqlab.decoding import sample_next
from seqlab.exercises import EXERCISES, check, exercises_of

from exercise_helpers import failure_message


def test_the_references_pass_and_the_messages_are_short():
    assert set(exercises_of("nb14_gpt")) == {"gpt_forward", "predict_outside_top_5", "top_k_filter"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb14_gpt").items() if ex.measured is None)
    text = failure_message("top_k_filter", threshold(whole_tensor=True))        # right on one row, wrong on three
    assert "check 2 of 5" in text and "<tensor of shape (3, 8), float64>" in text and len(text.splitlines()) == 3
    assert "tensor([[" not in text


# -- top_k_filter -------------------------------------------------------------------------------------------
NEG_INF = float("-inf")


def exactly_k(logits, k):                   # topk's indices: a tie keeps an arbitrary one of the tied
    index = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
    return torch.full_like(logits, NEG_INF).scatter(-1, index, logits.gather(-1, index))


def threshold(fill=NEG_INF, smallest=False, off_by_one=False, whole_tensor=False, output=None):
    def f(logits, k):
        if k >= logits.shape[-1]:
            return logits.clone()
        if whole_tensor:
            kth = logits.flatten().topk(k).values[-1]
        elif smallest:
            kth = logits.topk(k, dim=-1, largest=False).values[..., -1:]
            return logits.masked_fill(logits > kth, fill)
        else:
            kth = logits.topk(k, dim=-1).values[..., -1:]
        filtered = logits.masked_fill(logits <= kth if off_by_one else logits < kth, fill)
        if output == "probabilities":
            return torch.softmax(filtered, dim=-1)
        if output == "log-probabilities":
            return torch.log_softmax(filtered, dim=-1)
        if output == "scaled":
            return filtered * 2
        return filtered
    return f


def test_top_k_reference_keeps_what_sample_next_can_draw():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(0))
    logits[0, :3] = logits[0].max() + 1                                       # a three-way tie for the largest
    filtered = EXERCISES["top_k_filter"].reference(logits, 5)
    assert torch.isfinite(filtered).sum(-1).tolist() == [5, 5, 5, 5]        # the tie sits at the top: k kept
    assert torch.isfinite(EXERCISES["top_k_filter"].reference(logits, 1)).sum(-1).tolist() == [3, 1, 1, 1]
    draws = torch.stack([sample_next(logits, top_k=5, generator=torch.Generator().manual_seed(s)) for s in range(200)])
    assert torch.isfinite(filtered.gather(1, draws.T)).all()                # every draw is a kept token


@pytest.mark.parametrize("wrong, hint", [
    (exactly_k, "a tie: keep every logit equal to the k-th largest"),
    (threshold(fill=0.0), "you set the cut logits to 0"),
    (threshold(fill=-1e9), "a large negative number still leaves a tiny probability"),
    (threshold(output="probabilities"), "you returned probabilities"),
    (threshold(output="log-probabilities"), "you returned log-probabilities"),
    (threshold(smallest=True), "you kept the k *smallest* logits"),
    (threshold(off_by_one=True), "an off-by-one in the k-th value"),
    (threshold(whole_tensor=True), "keep them in each row (dim=-1)"),
    (threshold(output="scaled"), "the logits you keep must stay as they are"),
    (lambda logits, k: logits, "nothing was cut"),
    (lambda logits, k: logits.masked_fill(logits < logits.topk(k, -1).values[..., -1:], NEG_INF),
     "return the logits unchanged"),                                          # k > V: topk raises
    (lambda logits, k: exactly_k(logits, k).tolist(), "return a torch.Tensor"),
])
def test_top_k_hints(wrong, hint):
    assert hint in failure_message("top_k_filter", wrong)


def test_top_k_unchanged_logits_for_k_at_least_v_is_named():
    def cuts_one_too_many_at_v(logits, k):
        return logits.masked_fill(logits <= logits.min(-1, keepdim=True).values, NEG_INF) if k >= logits.shape[-1] \
            else threshold()(logits, k)
    assert "nothing to cut" in failure_message("top_k_filter", cuts_one_too_many_at_v)


# -- gpt_forward ------------------------------------------------------------------------------------------------
def gpt_forward(positions=True, scale=False, final_norm=True, mask="tril", bias=True, chain=True, readout="tied",
                output="logits"):
    def f(ids, W, block, layer_norm):
        T, d = ids.shape[1], W["E"].shape[1]
        X = W["E"][ids] * (d ** 0.5 if scale else 1) + (W["P"][:T] if positions else 0)
        ones = torch.ones(T, T, dtype=torch.bool)
        m = {"tril": ones.tril(), "none": ones, "triu": ones.triu(), "strict": ones.tril(-1),
             "torch": ~ones.tril()}[mask]
        start = X
        for layer in W["blocks"]:
            X = block(X if chain else start, layer, m)
        if final_norm:
            X = layer_norm(X, W["gamma"], W["beta"])
        if readout == "untied":
            U = torch.randn(W["E"].shape, generator=torch.Generator().manual_seed(0), dtype=X.dtype)
            logits = X @ U.T + W["b"]
        elif readout == "transpose":
            logits = X @ W["E"] + W["b"]
        else:
            logits = X @ W["E"].T + (W["b"] if bias else 0)
        return torch.softmax(logits, -1) if output == "probabilities" else logits
    return f


def test_gpt_forward_reference_passes_and_each_mistake_gets_its_diagnosis():
    assert check("gpt_forward", gpt_forward())
    expected = {
        "the positions are not added": dict(positions=False),
        "multiplied by sqrt(d_model)": dict(scale=True),
        "the final LayerNorm is missing": dict(final_norm=False),
        "no causal mask": dict(mask="none"),
        "the mask is the upper triangle": dict(mask="triu"),
        "the diagonal is cut from the mask": dict(mask="strict"),
        "torch's meaning of a bool mask": dict(mask="torch"),
        "the read-out's bias is missing": dict(bias=False),
        "each block reads the embeddings": dict(chain=False),
        "not through the embedding: tie it": dict(readout="untied"),
        "you returned (log-)probabilities": dict(output="probabilities"),
    }
    for words, mistake in expected.items():
        text = failure_message("gpt_forward", gpt_forward(**mistake))
        assert words in text, (mistake, text)
    assert "should have shape" in failure_message("gpt_forward", gpt_forward(readout="transpose")) or \
        "raised" in failure_message("gpt_forward", gpt_forward(readout="transpose"))


def test_your_gpt_on_charlm_gpts_weights_writes_what_the_library_writes(monkeypatch, tmp_path):
    """The watch of notebook 14: the reference gpt_forward, on charlm-gpt's weights, gives the library's logits
    exactly and so the same sampled text; a mistake gives other text. The pieces are the references, as in a
    kernel where notebooks 10 and 12 were not answered (other tests' check() calls must not leak in)."""
    from seqlab import pretrained
    from seqlab.exercises import _core

    monkeypatch.setenv("SEQLAB_ANSWERS", str(tmp_path))
    for name in ("multi_head_attention", "layer_norm", "transformer_block"):
        monkeypatch.delitem(_core.PASSED, name, raising=False)
    from seqlab.exercises.nb14_gpt import YourGPT
    from seqlab.exercises.pieces import piece

    gpt, _ = pretrained.load_pretrained("charlm-gpt")

    def yours(fn):
        model = YourGPT(gpt.config, fn, piece("block").fn, piece("layer_norm").fn)
        model.load_state_dict(gpt.state_dict())
        return model

    ids = torch.randint(0, gpt.config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(yours(EXERCISES["gpt_forward"].reference)(ids), gpt(ids))
    prompt = ids[:, :5]
    draw = dict(temperature=0.8, generator=None)
    texts = {}
    for name, fn in {"reference": EXERCISES["gpt_forward"].reference, "no mask": gpt_forward(mask="none")}.items():
        texts[name] = yours(fn).generate(prompt, 40, **{**draw, "generator": torch.Generator().manual_seed(0)})
    library = gpt.generate(prompt, 40, temperature=0.8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(texts["reference"], library) and not torch.equal(texts["no mask"], library)
    with pytest.raises(ValueError, match="KV cache"):
        yours(EXERCISES["gpt_forward"].reference)(ids, cache=gpt.new_cache())


# -- predict_outside_top_5 ----------------------------------------------------------------------------------------
def test_the_top_5_prediction_is_judged_against_the_measurement_and_never_given_away():
    from exercise_helpers import measurement_error

    assert "no prediction yet" in repr(check("predict_outside_top_5", lambda: None, measured=0.153))
    assert "15.3" not in repr(check("predict_outside_top_5", lambda: None, measured=0.153))
    assert check("predict_outside_top_5", lambda: 0.19, measured=0.153)
    assert "far from sure" in failure_message("predict_outside_top_5", lambda: 0.02, measured=0.153)
    assert "first few guesses" in failure_message("predict_outside_top_5", lambda: 0.5, measured=0.153)
    assert "not a percentage" in failure_message("predict_outside_top_5", lambda: 15, measured=0.153)
    assert "cut[5][1]" in measurement_error("predict_outside_top_5", None, TypeError)
    assert "between 0 and 1" in measurement_error("predict_outside_top_5", 1.5, ValueError)


# -- the chain of pieces (seqlab.exercises.pieces) ------------------------------------------------------------------
def test_a_piece_is_the_students_checked_answer_else_the_reference(monkeypatch):
    from seqlab.exercises import _core, pieces

    monkeypatch.setitem(pieces.PIECES, "layer_norm",
                        pieces.Piece("top_k_filter", "14", pieces.reference_layer_norm, adapt=lambda f: ("adapted", f)))
    monkeypatch.delitem(_core.PASSED, "top_k_filter", raising=False)
    assert pieces.piece("layer_norm").fn is pieces.reference_layer_norm and not pieces.piece("layer_norm").yours

    def wrong(logits, k):
        return logits
    check("top_k_filter", wrong)                                      # a failed check is not taken
    assert not pieces.piece("layer_norm").yours
    answer = EXERCISES["top_k_filter"].reference
    assert check("top_k_filter", answer)
    used = pieces.piece("layer_norm")
    assert used.yours and used.fn == ("adapted", answer) and used.label == "your top_k_filter (notebook 14, in this kernel)"
    monkeypatch.delitem(_core.PASSED, "top_k_filter")
    with pytest.raises(KeyError, match="no piece named"):
        pieces.piece("attention_from_nowhere")


def test_the_reference_pieces_equal_the_librarys_modules():
    from seqlab.exercises.pieces import reference_block, reference_layer_norm
    from seqlab.models import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=11, max_len=9, d_model=8, num_layers=1, nhead=2)).double()
    X = torch.randn(2, 6, 8, dtype=torch.float64)
    layer = model.blocks[0]
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    with torch.no_grad():
        assert torch.equal(reference_layer_norm(X, layer.norm1.weight, layer.norm1.bias), layer.norm1(X))
        assert torch.allclose(reference_block(X, layer, mask), layer(X, is_causal=True), atol=1e-12)


def test_notebook_10_and_12s_answers_chain_into_the_gpt(monkeypatch, tmp_path):
    """With the answers to notebooks 10 and 12 checked (here: their references), 14's GPT runs them, through
    the adapters of seqlab.exercises.pieces, and still gives the library's logits; with none, the labels say so."""
    from seqlab.exercises import _core, pieces
    from seqlab.exercises.nb14_gpt import YourGPT
    from seqlab.models import GPT, GPTConfig

    monkeypatch.setenv("SEQLAB_ANSWERS", str(tmp_path))             # nothing kept from earlier notebooks
    for name in ("multi_head_attention", "layer_norm", "transformer_block"):
        monkeypatch.delitem(_core.PASSED, name, raising=False)
    assert [pieces.piece(n).yours for n in pieces.PIECES] == [False] * 3
    model = GPT(GPTConfig(vocab_size=11, max_len=9, d_model=8, num_layers=2, nhead=2)).double().eval()
    ids = torch.randint(0, 11, (2, 7), generator=torch.Generator().manual_seed(1))
    for name in ("multi_head_attention", "layer_norm", "transformer_block"):
        monkeypatch.setitem(_core.PASSED, name, EXERCISES[name].reference)
    assert [pieces.piece(n).yours for n in pieces.PIECES] == [True] * 3
    chained = YourGPT(model.config, EXERCISES["gpt_forward"].reference, pieces.piece("block").fn,
                      pieces.piece("layer_norm").fn).double().eval()
    chained.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.allclose(chained(ids), model(ids), atol=1e-10)
