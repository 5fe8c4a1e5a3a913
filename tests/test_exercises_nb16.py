"""Notebook 16's exercises: the masking recipe, mean pooling, and the MiniLM prediction; each typical mistake gets
the hint that names it, in one line."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.data import IGNORE_INDEX, mask_tokens
from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.exercises.nb16_bert import PAIR_A, PAIR_B, measure_pair_similarities

from exercise_helpers import failure_message, measurement_error

RIGHT_CONTEXT = (0.316, 0.215)          # section 3's measurement: blanks filled with both sides, left side only


def test_the_references_pass():
    assert set(exercises_of("nb16")) == {"mask_tokens", "mean_pool", "predict_more_similar", "predict_right_context",
                                         "bert_attention_mask"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb16").items() if name != "predict_right_context")
    assert check("predict_right_context", lambda: RIGHT_CONTEXT, measured=RIGHT_CONTEXT)   # the solution: measured


def test_the_cases_contain_every_kind_of_chosen_position():
    for case in EXERCISES["mask_tokens"].cases:
        ids, choose, how, randoms, mask_id, p = case.args
        chosen = choose < p
        assert (chosen & (how < 0.8)).any() and (chosen & (how >= 0.8) & (how < 0.9)).any() and (chosen & (how >= 0.9)).any()
        assert not (randoms == ids).any()                       # a random replacement always shows as a change


def test_the_exercise_is_the_library_recipe():
    # mask_tokens draws choose, how and the random tokens in this order from its generator
    ids = torch.randint(0, 9, (5, 40), generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(3)
    choose, how = torch.rand(ids.shape, generator=g), torch.rand(ids.shape, generator=g)
    randoms = torch.arange(9)[torch.randint(9, ids.shape, generator=g)]
    got = EXERCISES["mask_tokens"].reference(ids, choose, how, randoms, 9)
    expected = mask_tokens(ids, 9, 10, torch.Generator().manual_seed(3))
    assert torch.equal(got[0], expected.inputs) and torch.equal(got[1], expected.labels)


def masking(all_mask=False, labels_everywhere=False, labels_corrupted=False, unchosen_label=None, no_unchanged=False,
            flipped=False):
    def f(ids, choose, how, randoms, mask_id, p=0.15):
        chosen = choose > p if flipped else choose < p
        if all_mask:
            inputs = torch.where(chosen, torch.full_like(ids, mask_id), ids)
        else:
            inputs = torch.where(chosen & (how < 0.8), torch.full_like(ids, mask_id), ids)
            random_here = chosen & (how >= 0.8) & ((how < 0.9) | no_unchanged)
            inputs = torch.where(random_here, randoms, inputs)
        if labels_everywhere:
            return inputs, ids.clone()
        fill = IGNORE_INDEX if unchosen_label is None else unchosen_label
        source = inputs if labels_corrupted else ids
        return inputs, torch.where(chosen, source, torch.full_like(ids, fill))
    return f


@pytest.mark.parametrize("wrong, hint", [
    (masking(all_mask=True), "every chosen position became [MASK]"),
    (masking(labels_everywhere=True), "the loss would be on all positions"),
    (masking(labels_corrupted=True), "the labels are the original ids"),
    (masking(unchosen_label=0), "must have the label IGNORE_INDEX (-100)"),
    (masking(no_unchanged=True), "must keep their own token"),
    (masking(flipped=True), "choose_draw < p"),
    (lambda *a: masking()(*a)[0], "return two tensors"),
    (lambda *a: (masking()(*a)[0][..., :-1], masking()(*a)[1]), "inputs: the result should have shape"),
])
def test_masking_hints(wrong, hint):
    assert hint in failure_message("mask_tokens", wrong)


def pool(kind):
    def f(h, mask):
        real = mask.to(h.dtype)[..., None]
        return {"with_padding": lambda: F.normalize(h.mean(1), dim=-1),
                "no_norm": lambda: (h * real).sum(1) / real.sum(1),
                "cls": lambda: F.normalize(h[:, 0], dim=-1),
                "norm_first": lambda: (F.normalize(h, dim=-1) * real).sum(1) / real.sum(1),
                "list": lambda: F.normalize((h * real).sum(1) / real.sum(1), dim=-1).tolist()}[kind]()
    return f


@pytest.mark.parametrize("wrong, hint", [
    (pool("with_padding"), "you averaged the padding in"),
    (pool("no_norm"), "divided by its L2 norm"),
    (pool("cls"), "the [CLS] token's state"),
    (pool("norm_first"), "normalise after averaging"),
    (pool("list"), "return a torch.Tensor"),
])
def test_mean_pool_hints(wrong, hint):
    assert hint in failure_message("mean_pool", wrong)


def test_dividing_by_the_padded_length_is_no_mistake_once_normalised():
    # the count only scales u, and the L2 normalisation removes any scale
    assert check("mean_pool", lambda h, m: F.normalize((h * m.to(h.dtype)[..., None]).sum(1) / h.shape[1], dim=-1))


def test_the_mean_pool_reference_is_what_encode_uses():
    from seqlab.pretrained import SentenceEncoder

    h, mask = EXERCISES["mean_pool"].cases[1].args
    assert torch.equal(EXERCISES["mean_pool"].reference(h, mask), SentenceEncoder.mean_pool(h, mask))


def test_the_prediction_is_judged_against_the_measurement():
    a, b = measure_pair_similarities()
    right = "A" if a > b else "B"
    wrong = "B" if right == "A" else "A"
    assert abs(a - b) > 0.02                                    # far beyond float rounding (measured: 0.04)
    assert check("predict_more_similar", lambda: right)
    assert check("predict_more_similar", lambda: right.lower())
    text = failure_message("predict_more_similar", lambda: wrong)
    assert f"pair A (a negation, same words) {a:.2f}" in text and f"{b:.2f}" in text
    assert "answer with the string 'A' or 'B'" in failure_message("predict_more_similar", lambda: 0.7)
    assert PAIR_A[0] == PAIR_B[0]                               # the two pairs share their first sentence


# -- Exercise 1: predict, then measure the right side's worth ---------------------------------------------------
def test_the_right_context_prediction_is_judged_against_the_measurement():
    def message(prediction):
        return failure_message("predict_right_context", lambda: prediction, measured=RIGHT_CONTEXT)

    assert check("predict_right_context", lambda: (0.30, 0.25), measured=RIGHT_CONTEXT)
    assert "put two shares" in message("both")
    assert "not percentages" in message((32, 21))
    assert "you gave the right side no worth" in message((0.25, 0.3))
    assert "fills about a third" in message((0.6, 0.2))
    assert "little better than character frequencies" in message((0.32, 0.35))
    assert "beats character frequencies" in message((0.3, 0.05))
    assert "measured: both sides 0.32, left side only 0.21" in message((0.9, 0.9))


@pytest.mark.parametrize("measured, error, says", [
    (None, TypeError, "judges your prediction against the notebook's measurement"),
    ({"both": 0.316, "left": 0.215}, TypeError, "expected two numbers"),
    ((31.6, 21.5), ValueError, "expected two shares between 0 and 1"),
])
def test_the_right_context_prediction_without_its_measurement_says_which_cell_to_run(measured, error, says):
    message = measurement_error("predict_right_context", measured, error)
    assert says in message
    assert ("run section 3's cell that fills the held-out blanks, then pass "
            'measured=(fill["MLM, both sides (16 + 15)"]["accuracy"], fill["MLM, left side only (31)"]["accuracy"])'
            in message)


# -- Exercise 5: BERT's attention mask from padding -------------------------------------------------------------
def attention(kind):
    def f(ids, pad_id=0):
        real = ids != pad_id
        n = ids.shape[-1]
        keys, queries = real[:, None, :].expand(-1, n, -1), real[:, :, None].expand(-1, -1, n)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        return {"inverted": lambda: ~keys, "causal": lambda: keys & causal, "rows": lambda: queries,
                "rows_and_keys": lambda: queries & keys, "all": lambda: torch.ones_like(keys),
                "key_mask": lambda: real, "float": lambda: keys.float(),
                "additive": lambda: torch.zeros(keys.shape).masked_fill(~keys, float("-inf")),
                "pad_zero": lambda: (ids != 0)[:, None, :].expand(-1, n, -1)}[kind]()
    return f


@pytest.mark.parametrize("kind, hint", [
    ("inverted", "True must mean 'may attend'"),
    ("causal", "BERT's attention is not causal"),
    ("rows", "instead of the padding keys (columns)"),
    ("rows_and_keys", "padding queries are left with no key at all"),
    ("all", "padding included"),
    ("key_mask", "that is the (B, n) mask of real tokens"),
    ("float", "return booleans"),
    ("additive", "that is the additive form"),
    ("pad_zero", "use pad_id (here 7), not a fixed 0"),
])
def test_attention_mask_hints(kind, hint):
    assert hint in failure_message("bert_attention_mask", attention(kind))


def test_the_attention_mask_is_what_the_encoder_does_with_padding():
    # the reference, handed to the layers, gives what BertEncoder gives with its own (B, n) attention mask
    from seqlab.models.bert import BertConfig, BertEncoder

    torch.manual_seed(0)
    model = BertEncoder(BertConfig(vocab_size=50, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, max_len=8,
                                   dropout=0.0, pooler=False)).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0]])
    allowed = EXERCISES["bert_attention_mask"].reference(ids)
    with torch.no_grad():
        x = model.embed(ids)
        for layer in model.encoder.layers:
            x = layer(x, src_mask=(~allowed).repeat_interleave(2, dim=0))
        expected = model(ids, (ids != 0).long())
    real = ids != 0
    assert torch.allclose(x[real], expected[real], atol=1e-6)


def test_the_watched_mask_slips_are_caught_with_their_diagnosis():
    from seqlab.exercises.nb16_bert import MASK_MISTAKES

    hints = {"queries": "you blocked the padding queries (rows)", "causal": "BERT's attention is not causal"}
    for label, mask in MASK_MISTAKES.items():
        (key,) = [k for k in hints if k in label]
        assert hints[key] in failure_message("bert_attention_mask", mask), label
