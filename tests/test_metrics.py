"""BLEU against the worked examples of Papineni et al. (2002) and numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from seqlab.metrics import bleu, modified_precision, ngrams

# Papineni et al. (2002), example 1 (lower-cased, split on spaces)
CANDIDATE_1 = "it is a guide to action which ensures that the military always obeys the commands of the party".split()
REFERENCES_1 = [s.split() for s in (
    "it is a guide to action that ensures that the military will forever heed party commands",
    "it is the guiding principle which guarantees the military forces always being under the command of the party",
    "it is the practical guide for the army always to heed the directions of the party")]


def test_papineni_modified_precisions():
    assert modified_precision(CANDIDATE_1, REFERENCES_1, 1) == (17, 18)
    assert modified_precision(CANDIDATE_1, REFERENCES_1, 2) == (10, 17)
    # "the the the the the the the": each 'the' counts at most twice, as often as in one reference
    assert modified_precision(["the"] * 7, ["the cat is on the mat".split(), "there is a cat on the mat".split()], 1) == (2, 7)


def test_bleu_worked_out_by_hand():
    candidate, reference = "the cat sat on the mat".split(), "the cat is on the mat".split()
    plain = bleu([candidate], [[reference]])
    assert plain.precisions == pytest.approx((5 / 6, 3 / 5, 1 / 4, 0.0))
    assert plain.score == 0.0 and plain.brevity_penalty == 1.0          # no matching 4-gram
    smoothed = bleu([candidate], [[reference]], smooth=True)
    assert smoothed.precisions == pytest.approx((5 / 6, 4 / 6, 2 / 5, 1 / 4))
    assert smoothed.score == pytest.approx((5 / 6 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25)


def test_brevity_penalty_and_corpus_sums():
    short = bleu(["the cat".split()], [["the cat is on the mat".split()]], max_n=2)
    assert short.precisions == (1.0, 1.0) and short.brevity_penalty == pytest.approx(math.exp(1 - 6 / 2))
    assert short.score == pytest.approx(math.exp(1 - 3))
    # the closest reference length is used (ties: the shorter)
    assert bleu(["a b c d".split()], [["a b c".split(), "a b c d e".split()]], max_n=1).reference_length == 3
    # corpus BLEU sums counts first: not the mean of the sentence scores
    corpus = bleu(["ab", "abcd"], [["ab"], ["abce"]], max_n=2)
    assert corpus.precisions == pytest.approx(((2 + 3) / (2 + 4), (1 + 2) / (1 + 3)))


def test_identical_is_one_and_characters_work():
    assert bleu(["1998-05-03"], [["1998-05-03"]]).score == pytest.approx(1.0)
    assert ngrams("abab", 2) == {("a", "b"): 2, ("b", "a"): 1}
    assert 0 < bleu(["1998-05-30"], [["1998-05-03"]]).score < 1


def test_bleu_errors_are_clear():
    with pytest.raises(ValueError, match="one list of references per candidate: got 2 candidates and 1"):
        bleu(["ab", "cd"], [["ab"]])
    with pytest.raises(ValueError, match="got a bare string"):
        bleu(["ab"], ["ab"])
    with pytest.raises(ValueError, match="at least one reference"):
        bleu(["ab"], [[]])
    with pytest.raises(ValueError, match="n must be at least 1, got 0"):
        ngrams("ab", 0)
