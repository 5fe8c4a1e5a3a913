"""seqlab.data.tagging: the word-boundary and question tasks cut from Shakespeare, batched by
seqlab.data.batching.PaddedBatches."""

from __future__ import annotations

import pytest
import torch

from seqlab.data import IGNORE_INDEX, PaddedBatches, Vocab
from seqlab.data.tagging import (
    LabelledLine, TaggedLine, question_data, remove_spaces, restore_spaces, sentences, tag_lines, word_boundary_data,
)


def test_remove_spaces_tags_each_gap_and_ignores_the_line_end():
    chars, tags = remove_spaces("  To be,  or not ")
    assert chars == "Tobe,ornot"
    assert tags == [0, 1, 0, 0, 1, 0, 1, 0, 0, IGNORE_INDEX]
    assert remove_spaces("word") == ("word", [0, 0, 0, IGNORE_INDEX])


def test_restore_spaces_inverts_remove_spaces():
    for line in ["To be, or not to be, that is the question:", "O Romeo, Romeo! wherefore art thou Romeo?"]:
        chars, tags = remove_spaces(line)
        assert restore_spaces(chars, tags) == line
        assert restore_spaces(chars, torch.tensor(tags)) == line


def test_remove_and_restore_reject_bad_input():
    with pytest.raises(ValueError, match="at least one non-space"):
        remove_spaces("   ")
    with pytest.raises(TypeError, match="expects a str, got list"):
        remove_spaces(["a", "b"])
    with pytest.raises(ValueError, match="one tag per character: 3 characters, 2 tags"):
        restore_spaces("abc", [0, 1])


def test_tag_lines_keeps_lines_by_word_count_and_length():
    vocab = Vocab.chars("abcdefghijklmnopqrstuvwxyz,", specials=("<pad>",))
    text = "a b c\nab cd\nabc def ghi jkl\n\n  x  y  z  "
    lines = tag_lines(text, vocab, min_words=3, max_chars=9)
    assert [l.line for l in lines] == ["a b c", "x y z"]          # 2 words; 12 characters: dropped
    first = lines[0]
    assert vocab.decode(first.ids) == "abc" and first.tags.tolist() == [1, 1, IGNORE_INDEX]
    assert all(l.ids.dtype == torch.long and l.ids.shape == l.tags.shape for l in lines)


def test_word_boundary_data_on_shakespeare():
    data = word_boundary_data()
    assert data.vocab.itos[0] == "<pad>" and " " not in data.vocab and "\n" not in data.vocab
    assert len(data.train) > 90_000 and len(data.val) > 4_000 and len(data.test) > 4_000
    for example in data.train[:200] + data.test[:200]:
        chars, tags = remove_spaces(example.line)
        assert data.chars(example) == chars and example.tags.tolist() == tags
        assert len(example.line.split()) >= 3 and len(chars) <= 80
    # contiguous splits: the first test line comes after the last training line in the corpus
    tags = torch.cat([e.tags for e in data.test])
    share = (tags == 1).sum().item() / (tags != IGNORE_INDEX).sum().item()
    assert 0.15 < share < 0.25


def test_sentences_drop_speaker_names_and_stage_directions():
    text = "HAMLET.\nTo be, or not to be? That is\nthe question.\n[Exit.]\nOPHELIA.\nGood my lord!"
    assert sentences(text) == ["To be, or not to be?", "That is the question.", "Good my lord!"]


def test_question_data_labels_questions_without_their_mark():
    data = question_data()
    assert data.labels == ("statement", "question")
    assert len(data.train) == 16_000 and len(data.val) == 2_000 and len(data.test) == 2_000
    share = sum(e.label for e in data.test) / len(data.test)
    assert 0.2 < share < 0.33
    for e in data.train[:300]:
        assert e.line[-1] not in ".?!" and len(e.line.split()) >= 4 and data.vocab.decode(e.ids) == e.line


def test_padded_batches_for_tagging():
    examples = [TaggedLine("a b", torch.tensor([1, 2]), torch.tensor([1, IGNORE_INDEX])),
                TaggedLine("c d e", torch.tensor([3, 4, 5]), torch.tensor([1, 1, IGNORE_INDEX])),
                TaggedLine("f", torch.tensor([6]), torch.tensor([IGNORE_INDEX]))]
    batches = PaddedBatches(examples, 2, shuffle=False)
    assert len(batches) == 2
    (ids, tags, lengths), (ids2, tags2, lengths2) = list(batches)
    assert ids.tolist() == [[1, 2, 0], [3, 4, 5]]
    assert tags.tolist() == [[1, IGNORE_INDEX, IGNORE_INDEX], [1, 1, IGNORE_INDEX]]
    assert lengths.tolist() == [2, 3] and lengths2.tolist() == [1]


def test_padded_batches_for_classification_and_shuffling():
    examples = [LabelledLine(str(i), torch.tensor([i + 1] * (i + 1)), i % 2) for i in range(10)]
    batches = PaddedBatches(examples, 4, seed=3, drop_last=True)
    first = [b[2].tolist() for b in batches]
    second = [b[2].tolist() for b in batches]
    assert len(first) == 2 and first != second                       # a new order each epoch
    again = [b[2].tolist() for b in PaddedBatches(examples, 4, seed=3, drop_last=True)]
    assert again == first                                            # the same run, the same order
    ids, labels, lengths = next(iter(PaddedBatches(examples, 10, shuffle=False)))
    assert labels.shape == (10,) and ids.shape == (10, 10) and lengths.tolist() == list(range(1, 11))


def test_padded_batches_reject_bad_examples():
    with pytest.raises(ValueError, match="at least one example"):
        PaddedBatches([], 2)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        PaddedBatches([(torch.tensor([1]), 0)], 0)
    with pytest.raises(ValueError, match=r"example 0: ids must be a non-empty 1-D torch.long tensor, got torch.float32"):
        PaddedBatches([(torch.tensor([1.0]), 0)], 1)
    with pytest.raises(ValueError, match="example 1: one tag per id expected, got 2 ids and 3 tags"):
        PaddedBatches([(torch.tensor([1]), 0), (torch.tensor([1, 2]), torch.tensor([0, 1, 1]))], 1)
    with pytest.raises(ValueError, match="target must be a 1-D tensor of tags or an int label, got str"):
        PaddedBatches([(torch.tensor([1]), "x")], 1)
