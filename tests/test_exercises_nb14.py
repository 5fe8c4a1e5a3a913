"""Notebook 14's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest
import torch

from seqlab.decoding import sample_next
from seqlab.exercises import EXERCISES, check, exercises_of

from exercise_helpers import failure_message


def test_the_references_pass_and_the_messages_are_short():
    assert set(exercises_of("nb14_gpt")) == {"top_k_filter"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb14_gpt").items())
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
