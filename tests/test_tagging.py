"""seqlab.tagging (losses, scores, CountTagger) and seqlab.models.readout (SequenceTagger, SequenceClassifier)."""

from __future__ import annotations

import pytest
import torch

from seqlab.data import IGNORE_INDEX, PaddedBatches
from seqlab.data.tagging import TaggedLine
from seqlab.models.readout import SequenceClassifier, SequenceTagger
from seqlab.tagging import CountTagger, classification_loss, evaluate_tagger, predict, scores, tag_line, tagging_loss
from seqlab.train import train


def test_scores_count_only_real_positions():
    target = torch.tensor([[1, 0, 0, IGNORE_INDEX], [1, 1, 0, IGNORE_INDEX]])
    predicted = torch.tensor([[1, 1, 0, 1], [0, 1, 0, 1]])
    s = scores(predicted, target)
    assert s.counted == 6 and s.positives == 3
    assert s.accuracy == pytest.approx(4 / 6)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))


def test_scores_of_the_majority_guess_and_bad_input():
    target = torch.tensor([0, 0, 0, 1])
    s = scores(torch.zeros(4, dtype=torch.long), target)
    assert s.accuracy == 0.75 and s.f1 == 0.0 and s.precision == 0.0
    with pytest.raises(ValueError, match=r"same shape, got \(3,\) and \(4,\)"):
        scores(torch.zeros(3, dtype=torch.long), target)
    with pytest.raises(ValueError, match="no position to count"):
        scores(torch.zeros(2, dtype=torch.long), torch.full((2,), IGNORE_INDEX))


def _toy_lines():
    # tag 1 after every 'b' (id 2); the tagger must look at the current character only
    g = torch.Generator().manual_seed(0)
    lines = []
    for _ in range(64):
        ids = torch.randint(1, 4, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g)
        tags = (ids == 2).long()
        tags[-1] = IGNORE_INDEX
        lines.append(TaggedLine("", ids, tags))
    return lines


@pytest.mark.parametrize("bidirectional", [False, True])
def test_tagger_learns_a_toy_task_and_ignores_padding(bidirectional):
    lines = _toy_lines()
    torch.manual_seed(0)
    model = SequenceTagger(4, 2, cell="gru", embed_size=8, hidden_size=8, bidirectional=bidirectional)
    batches = PaddedBatches(lines, 16, seed=0)
    train(model, batches, tagging_loss, max_steps=150, lr=3e-2, progress=False)
    s = evaluate_tagger(model, PaddedBatches(lines, 64, shuffle=False))
    assert s.accuracy == 1.0 and s.counted == sum(len(l.ids) - 1 for l in lines)
    assert torch.equal(tag_line(model, lines[0].ids)[:-1], lines[0].tags[:-1])


def test_tagging_loss_rejects_mismatched_logits_and_empty_targets():
    model = SequenceTagger(4, 3, hidden_size=4)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="every tag in this batch is IGNORE_INDEX"):
        tagging_loss(model, (ids, torch.full((1, 3), IGNORE_INDEX), torch.tensor([3])))
    with pytest.raises(ValueError, match=r"logits of shape \(B, T, C\) = \(1, 2, C\)"):
        tagging_loss(model, (ids, torch.zeros(1, 2, dtype=torch.long), torch.tensor([3])))
    with pytest.raises(ValueError, match=r"expects a batch \(ids, targets, lengths\), got tuple of length 2"):
        tagging_loss(model, (ids, ids))


def test_tagger_output_at_real_steps_does_not_depend_on_padding():
    torch.manual_seed(0)
    model = SequenceTagger(10, 2, hidden_size=6, num_layers=2, bidirectional=True).eval()
    short = torch.tensor([[3, 4, 5]])
    padded = torch.tensor([[3, 4, 5, 7, 8]])
    with torch.no_grad():
        alone = model(short, torch.tensor([3]))
        in_batch = model(padded, torch.tensor([3]))
    assert torch.allclose(alone, in_batch[:, :3], atol=1e-6)


@pytest.mark.parametrize("readout", ["last", "mean", "max"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_classifier_summary_ignores_padding(readout, bidirectional):
    torch.manual_seed(0)
    model = SequenceClassifier(10, 3, readout=readout, hidden_size=5, bidirectional=bidirectional,
                               cell="lstm").eval()
    with torch.no_grad():
        alone = model(torch.tensor([[1, 2, 3]]), torch.tensor([3]))
        padded = model(torch.tensor([[1, 2, 3, 9, 9, 9], [4, 5, 6, 7, 8, 9]]), torch.tensor([3, 6]))
    assert padded.shape == (2, 3)
    assert torch.allclose(alone[0], padded[0], atol=1e-6)


def test_classifier_last_readout_is_the_top_layers_final_states():
    torch.manual_seed(0)
    model = SequenceClassifier(10, 2, readout="last", hidden_size=4, num_layers=2, bidirectional=True).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        output, _ = model.rnn(model.embed(ids))
        summary = model.summary(ids)
    assert torch.allclose(summary[0, :4], output[0, -1, :4]) and torch.allclose(summary[0, 4:], output[0, 0, 4:])


def test_classifier_learns_and_rejects_bad_arguments():
    torch.manual_seed(0)
    examples = [(torch.tensor([1 + (i % 2)] + [3] * (i % 5)), i % 2) for i in range(40)]   # label = first id
    model = SequenceClassifier(4, 2, readout="last", bidirectional=True, hidden_size=8, embed_size=8)
    train(model, PaddedBatches(examples, 8, seed=0), classification_loss, max_steps=100, lr=3e-2, progress=False)
    predicted, target = predict(model, PaddedBatches(examples, 40, shuffle=False))
    assert torch.equal(predicted, target)
    with pytest.raises(ValueError, match="readout must be one of"):
        SequenceClassifier(4, 2, readout="first")
    with pytest.raises(ValueError, match="cell must be one of"):
        SequenceTagger(4, 2, cell="transformer")
    with pytest.raises(ValueError, match=r"ids of shape \(B, T\) and dtype torch.long, got torch.float32"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"lengths of shape \(2,\), one per sequence, got \(3,\)"):
        model(torch.ones(2, 3, dtype=torch.long), torch.tensor([1, 2, 3]))


def test_count_tagger_uses_the_window_it_is_given():
    # a space follows 'a' exactly when the next character is 'b': only right context tells
    def line(text):
        ids = torch.tensor([" ab".index(c) for c in text])        # a -> 1, b -> 2
        tags = torch.tensor([int(c == "a" and n == "b") for c, n in zip(text, text[1:])] + [IGNORE_INDEX])
        return TaggedLine(text, ids, tags)
    lines = [line(t) for t in ["aab", "aba", "abab", "aaab", "bbaa"]]
    left = CountTagger(left=1, right=0).fit(lines).evaluate(lines)
    right = CountTagger(left=0, right=1).fit(lines).evaluate(lines)
    assert right.accuracy == 1.0 and left.accuracy < 1.0
    tagger = CountTagger(0, 1).fit(lines)
    assert tagger.n_windows == 4 and tagger.predict(torch.tensor([1, 2])).tolist() == [1, 0]


def test_count_tagger_errors():
    with pytest.raises(ValueError, match="left and right must be >= 0"):
        CountTagger(-1, 0)
    with pytest.raises(RuntimeError, match="call fit"):
        CountTagger().predict(torch.tensor([1]))
    tagger = CountTagger().fit([TaggedLine("", torch.tensor([1, 2]), torch.tensor([1, IGNORE_INDEX]))])
    with pytest.raises(ValueError, match=r"ids must lie in 0..2"):
        tagger.predict(torch.tensor([5]))


def test_marked_spaces_points_at_wrong_and_missing_spaces():
    from seqlab.tagging import marked_spaces

    # "to be" read as "tob e": the space after "o" is missing, the one after "b" is wrong
    text, marks = marked_spaces("tobe", [0, 1, 0, 0], [0, 1, 0, -100])
    assert (text, marks.rstrip()) == ("to be", "")
    text, marks = marked_spaces("tobe", [0, 0, 1, 0], [0, 1, 0, -100])
    assert text == "tob e" and marks.rstrip() == " ^ ^"
