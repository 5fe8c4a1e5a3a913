"""Notebook 14's exercises: the masking recipe, mean pooling, and the MiniLM prediction; each typical mistake gets
the hint that names it, in one line."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.data import IGNORE_INDEX, mask_tokens
from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.exercises.nb14_bert import PAIR_A, PAIR_B, measure_pair_similarities

from exercise_helpers import failure_message


def test_the_references_pass():
    assert set(exercises_of("nb14")) == {"mask_tokens", "mean_pool", "predict_more_similar"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb14").items())


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
